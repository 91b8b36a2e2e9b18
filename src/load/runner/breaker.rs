//! The breaker that ends a gate early once its requests keep failing the
//! same costly way.

use std::sync::Mutex;

use crate::client::{CallError, Completion, ErrorKind};

/// Ends a gate once `after` requests in a row failed the same way with a
/// failure that costs a deadline (a timeout, a stall, no connection): a
/// stalled server would otherwise make every request wait out its deadline,
/// 128 requests × a 60 s idle deadline is two hours of a GPU runner.
#[derive(Debug, Default)]
pub struct Breaker {
    after: u32,
    state: Mutex<Streak>,
}

#[derive(Debug, Default)]
struct Streak {
    /// The class and the words of the failure repeating, and how often.
    failure: Option<(&'static str, String)>,
    count: u32,
    /// Why the gate stopped, once it has.
    tripped: Option<String>,
}

impl Breaker {
    /// A breaker that trips after `after` consecutive like failures (0: never).
    pub fn new(after: u32) -> Self {
        Self {
            after,
            state: Mutex::default(),
        }
    }

    /// Counts a finished request.
    pub(super) fn note(&self, result: &Result<Completion, CallError>) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        let costly = match result {
            Ok(_) => None,
            Err(e) => match &e.kind {
                ErrorKind::Timeout(which, limit) => Some((
                    e.class(),
                    format!(
                        "{} past the {} deadline ({})",
                        if *which == crate::client::Deadline::Idle {
                            "stalled"
                        } else {
                            "timed out"
                        },
                        which.name(),
                        crate::units::format_duration(*limit)
                    ),
                )),
                ErrorKind::Connect => Some((e.class(), "could not connect".to_owned())),
                _ => None,
            },
        };
        match costly {
            Some((class, words)) if s.failure.as_ref().is_some_and(|(c, _)| *c == class) => {
                s.count += 1;
                s.failure = Some((class, words));
            }
            Some(f) => {
                s.failure = Some(f);
                s.count = 1;
            }
            None => {
                s.failure = None;
                s.count = 0;
            }
        }
        if self.after > 0
            && s.count >= self.after
            && s.tripped.is_none()
            && let Some((_, words)) = &s.failure
        {
            s.tripped = Some(format!(
                "stopping early: {} consecutive requests {words}",
                s.count
            ));
        }
    }

    /// Stops the gate: every worker ends before its next request.
    pub(super) fn stop(&self, why: String) {
        if let Ok(mut s) = self.state.lock() {
            s.tripped.get_or_insert(why);
        }
    }

    /// Why the gate stopped early, if it did.
    pub(crate) fn tripped(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.tripped.clone())
    }
}
