//! What a gate's load shows of itself to a check running beside it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::Notify;

use crate::client::Completion;

/// What a gate's load shows of itself to a check running beside it (a
/// recheck of the suite's probes): whether the measured window is under
/// way, and the whole text of its first few answers. A gate keeps no text
/// otherwise.
#[derive(Debug, Default)]
pub struct Watch {
    /// Answers of the measured window to keep whole.
    keep: usize,
    /// Set when the measured window starts, cleared when it ends.
    measuring: AtomicBool,
    /// Set when the gate's load is over, whatever became of it.
    ended: AtomicBool,
    /// Wakes those waiting for the measured window to start (or to end
    /// without having started).
    changed: Notify,
    samples: Mutex<Vec<Sample>>,
    /// Requests of the check beside the load under way, and the tokens the
    /// finished ones received: the server counts them in its `/metrics`
    /// between the window's two reads, so they are waited for before the
    /// second and added to what the client received.
    side: AtomicU64,
    pub(super) side_tokens: AtomicU64,
    side_done: Notify,
}

/// One answer of a gate's load, kept whole.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The request's index in the gate's workload.
    pub index: u32,
    /// The answer.
    pub content: String,
    /// Why it ended.
    pub finish_reason: Option<String>,
    /// Its timestamps.
    pub timing: crate::client::Timing,
}

impl Watch {
    /// A watch keeping the first `keep` answers of the measured window.
    pub fn keeping(keep: usize) -> Self {
        Self {
            keep,
            ..Self::default()
        }
    }

    /// Whether the measured window is under way.
    pub fn measuring(&self) -> bool {
        self.measuring.load(Ordering::SeqCst)
    }

    /// Waits until the measured window starts; `false` when the load ended
    /// first (it failed before measuring).
    pub async fn started(&self) -> bool {
        loop {
            let changed = self.changed.notified();
            if self.measuring() {
                return true;
            }
            if self.ended.load(Ordering::SeqCst) {
                return false;
            }
            changed.await;
        }
    }

    /// Marks the gate's load as over (its caller does, whatever its result).
    pub fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        self.set_measuring(false);
    }

    /// A request of the check beside the load may start: `false` (and it
    /// must not) once the measured window is over.
    pub(crate) fn side_started(&self) -> bool {
        self.side.fetch_add(1, Ordering::SeqCst);
        // Counted before looking: a window that ends after this look waits
        // for this request before its last read of the server's counters.
        if self.measuring() {
            true
        } else {
            self.side_finished(0);
            false
        }
    }

    /// A request of the check beside the load ended with `tokens` tokens
    /// received.
    pub(crate) fn side_finished(&self, tokens: u64) {
        self.side_tokens.fetch_add(tokens, Ordering::SeqCst);
        self.side.fetch_sub(1, Ordering::SeqCst);
        self.side_done.notify_waiters();
    }

    /// Waits until no request of the check beside the load is under way
    /// (each is bounded by its own deadlines).
    pub(super) async fn side_quiet(&self) {
        loop {
            let done = self.side_done.notified();
            if self.side.load(Ordering::SeqCst) == 0 {
                return;
            }
            done.await;
        }
    }

    /// The answers kept.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples.lock().map(|s| s.clone()).unwrap_or_default()
    }

    pub(super) fn set_measuring(&self, on: bool) {
        self.measuring.store(on, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// Whether request `index` (of the measured window) is kept whole.
    pub(super) fn wants(&self, index: u32) -> bool {
        (index as usize) < self.keep
    }

    pub(super) fn keep(&self, index: u32, c: &Completion) {
        if let Ok(mut s) = self.samples.lock() {
            s.push(Sample {
                index,
                content: c.content.clone(),
                finish_reason: c.finish_reason.clone(),
                timing: c.timing.clone(),
            });
        }
    }
}
