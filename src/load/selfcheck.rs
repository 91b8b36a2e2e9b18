//! Was it the server or the client? Every client thread measures itself
//! while a gate's window runs — how busy it was, how late its event loop
//! ran what became ready, how late it started open-loop requests — and a
//! gate whose client was saturated has its figures marked `client-limited`:
//! they measure servegate, not the server.
//!
//! The limits, and why:
//! - **loop lag p99 over 1 ms and over a quarter of the ITL p50.** The lag
//!   is how long an event from outside (a socket with bytes) waited before
//!   the thread ran its task. Arrival times are the kernel's receive
//!   stamps, so a late read moves no stamp — until it is later than the
//!   next token of the same stream: then two tokens share the newer stamp
//!   and the ITL figures are the client's. A lag p99 under a quarter of the
//!   typical gap leaves far fewer than 1% of the gaps within reach; 1 ms is
//!   the floor (tokio's timer grain, and ten times the lag of a client with
//!   room: 0.02–0.2 ms in `servegate bench-client`). A CPU engine decoding
//!   at 50 tok/s on the runner's cores can take 5 ms of the client's turn
//!   without moving a figure; a GPU server at 500 tok/s cannot take 1.
//! - **busy > 90%.** A thread that spends nine tenths of the window on the
//!   CPU has no room for a burst: the lag follows it up (the bench shows
//!   where), and in a closed loop the request rate becomes the client's.
//! - **late starts > 1%** (open loop): more than one request in a hundred
//!   started over 5 ms after its intended time because the client woke
//!   late. Waits for `max_in_flight` are the server's and not counted.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::units::format_secs;

/// Loop lag (p99) above which the client was the bottleneck, in seconds,
/// whatever the gaps between tokens.
pub const LAG_FLOOR: f64 = 0.001;
/// The share of the ITL p50 the loop lag (p99) may reach.
pub const LAG_SHARE_OF_ITL: f64 = 0.25;
/// Lag samples (one a millisecond) a thread needs for its p99 to be
/// judged: with fewer, the p99 is one of the few worst pings, and a single
/// hiccup of the machine decides it. A window this short measures too few
/// tokens for a p99 of its own anyway.
pub const LAG_MIN_SAMPLES: u64 = 200;
/// CPU busy share above which the client was the bottleneck.
pub const BUSY_LIMIT: f64 = 0.90;
/// Share of open-loop starts late by the client's own doing above which
/// the client was the bottleneck.
pub const LATE_LIMIT: f64 = 0.01;

/// What one client thread did during a gate's measured window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ThreadCheck {
    /// Streams (closed loop: workers) this thread owned.
    pub streams: u32,
    /// The CPU it was pinned to, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// Its CPU time over the window's wall time (0–1); `None` where a
    /// thread's CPU clock cannot be read.
    pub busy: Option<f64>,
    /// Loop lag, p50, p99 and max, seconds; `None` without samples.
    pub lag_p50: Option<f64>,
    /// See `lag_p50`.
    pub lag_p99: Option<f64>,
    /// See `lag_p50`.
    pub lag_max: Option<f64>,
    /// Lag samples taken.
    pub lag_samples: u64,
    /// Open loop: requests it started, and how many of them more than
    /// 5 ms after their intended time because it woke late.
    pub starts: u64,
    /// See `starts`.
    pub late_starts: u64,
}

/// The self-check of a gate: every client thread, and its verdict.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClientCheck {
    /// How the thread count was chosen (`auto`, `suite`, `--client-threads`).
    pub chosen: String,
    /// Each client thread.
    pub threads: Vec<ThreadCheck>,
    /// The loop lag (p99) allowed, seconds.
    #[serde(default)]
    pub lag_limit: f64,
    /// Why the figures are client-limited, if they are (`thread 0 busy
    /// 94%, loop lag p99 4.1ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited: Option<String>,
}

impl ThreadCheck {
    /// Whether it had work to be judged by: a thread with no stream and
    /// no start ends as soon as the window starts, and its busy share is
    /// one tiny time over another.
    fn worked(&self) -> bool {
        self.streams > 0 || self.starts > 0
    }

    /// Whether anything of it can be judged: its busy share, or a loop lag
    /// over enough samples.
    fn judgeable(&self) -> bool {
        self.worked() && (self.busy.is_some() || self.lag_samples >= LAG_MIN_SAMPLES)
    }

    /// What of this thread passed a limit (`lag_limit` for the loop
    /// lag), in words; empty when nothing did.
    fn over(&self, lag_limit: f64) -> Vec<String> {
        let mut over = Vec::new();
        if !self.worked() {
            return over;
        }
        if let Some(b) = self.busy.filter(|b| *b > BUSY_LIMIT) {
            over.push(format!("busy {:.0}%", 100.0 * b));
        }
        if let Some(l) = self
            .lag_p99
            .filter(|l| *l > lag_limit && self.lag_samples >= LAG_MIN_SAMPLES)
        {
            over.push(format!("loop lag p99 {}", format_secs(l)));
        }
        #[expect(clippy::cast_precision_loss, reason = "request counts are small")]
        if self.starts > 0 && self.late_starts as f64 > LATE_LIMIT * self.starts as f64 {
            over.push(format!(
                "{} of {} starts late by over 5ms",
                self.late_starts, self.starts
            ));
        }
        over
    }

    /// One line of figures.
    fn describe(&self) -> String {
        let mut s = format!(
            "{} stream{}",
            self.streams,
            if self.streams == 1 { "" } else { "s" }
        );
        if let Some(cpu) = self.cpu {
            let _ = write!(s, " on CPU {cpu}");
        }
        if let Some(b) = self.busy {
            let _ = write!(s, ", busy {:.0}%", 100.0 * b);
        }
        if let (Some(p50), Some(p99), Some(max)) = (self.lag_p50, self.lag_p99, self.lag_max) {
            let _ = write!(
                s,
                ", loop lag p50 {} p99 {} max {}",
                format_secs(p50),
                format_secs(p99),
                format_secs(max)
            );
        }
        if self.starts > 0 {
            let _ = write!(s, ", {} late of {} starts", self.late_starts, self.starts);
        }
        s
    }
}

impl ClientCheck {
    /// The loop lag (p99) allowed with tokens `itl_p50` apart.
    pub fn lag_limit(itl_p50: Option<f64>) -> f64 {
        itl_p50.map_or(LAG_FLOOR, |itl| (itl * LAG_SHARE_OF_ITL).max(LAG_FLOOR))
    }

    /// Judges the threads of a gate whose tokens came `itl_p50` apart:
    /// sets `limited` when any thread passed a limit.
    #[must_use]
    pub fn judged(mut self, itl_p50: Option<f64>) -> Self {
        let lag_limit = Self::lag_limit(itl_p50);
        self.lag_limit = lag_limit;
        let over: Vec<String> = self
            .threads
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let o = t.over(lag_limit);
                (!o.is_empty()).then(|| format!("thread {i} {}", o.join(", ")))
            })
            .collect();
        self.limited = (!over.is_empty()).then(|| {
            let shown = over.len().min(2);
            let more = over.len() - shown;
            let mut s = over[..shown].join("; ");
            if more > 0 {
                let _ = write!(s, "; {more} more thread(s)");
            }
            s
        });
        self
    }

    /// The failure of a gate whose client was the bottleneck.
    pub fn failure(&self) -> Option<String> {
        self.limited.as_ref().map(|why| {
            format!(
                "the client was the bottleneck ({why}): these figures measure servegate, not the server; raise client_threads"
            )
        })
    }

    /// The self-check as the summary shows it, one line.
    pub fn summary(&self) -> String {
        let n = self.threads.len();
        let worst = |f: fn(&ThreadCheck) -> Option<f64>| {
            self.threads
                .iter()
                .filter_map(f)
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
        };
        let mut s = format!(
            "client self-check: {n} thread{} ({})",
            if n == 1 { "" } else { "s" },
            self.chosen
        );
        if let Some(b) = worst(|t| t.busy) {
            let _ = write!(s, ", busy ≤ {:.0}%", 100.0 * b);
        }
        if let Some(l) = worst(|t| t.lag_p99) {
            let _ = write!(
                s,
                ", loop lag p99 ≤ {} ({} allowed)",
                format_secs(l),
                format_secs(self.lag_limit)
            );
        }
        if self.threads.iter().any(|t| t.lag_samples < LAG_MIN_SAMPLES) {
            let _ = write!(
                s,
                " (a window under {LAG_MIN_SAMPLES} ms: its loop lag is shown, not judged)"
            );
        }
        match &self.limited {
            Some(why) => {
                let _ = write!(s, ": CLIENT-LIMITED ({why})");
            }
            None if !self.threads.iter().any(ThreadCheck::judgeable) => s.push_str(
                ": not judged (no thread clock and too few lag samples): nothing says whether the client kept up",
            ),
            None => s.push_str(": the server, not the client, set the figures"),
        }
        s
    }

    /// Every thread, one line each, for the gate's figures.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (i, t) in self.threads.iter().enumerate() {
            let _ = writeln!(out, "    client thread {i}: {}", t.describe());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(busy: f64, lag_p99: f64) -> ThreadCheck {
        ThreadCheck {
            streams: 8,
            busy: Some(busy),
            lag_p50: Some(lag_p99 / 4.0),
            lag_p99: Some(lag_p99),
            lag_max: Some(lag_p99 * 2.0),
            lag_samples: 1000,
            ..ThreadCheck::default()
        }
    }

    fn check(threads: Vec<ThreadCheck>) -> ClientCheck {
        ClientCheck {
            chosen: "auto".into(),
            threads,
            ..ClientCheck::default()
        }
        .judged(Some(0.002))
    }

    #[test]
    fn a_client_with_room_is_not_limited() {
        let c = check(vec![thread(0.3, 0.000_05), thread(0.89, 0.000_9)]);
        assert_eq!(c.limited, None);
        assert!(c.failure().is_none());
        assert!(
            c.summary().contains("the server, not the client"),
            "{}",
            c.summary()
        );
    }

    #[test]
    fn a_busy_or_lagging_thread_makes_the_figures_client_limited() {
        let c = check(vec![thread(0.2, 0.000_05), thread(0.94, 0.0041)]);
        assert_eq!(
            c.failure().as_deref(),
            Some(
                "the client was the bottleneck (thread 1 busy 94%, loop lag p99 4.10ms): these figures measure servegate, not the server; raise client_threads"
            )
        );
        let lagging = check(vec![thread(0.1, 0.002)]);
        assert!(lagging.limited.unwrap().contains("loop lag p99 2.00ms"));
        let busy = check(vec![thread(0.95, 0.0001)]);
        assert_eq!(busy.limited.as_deref(), Some("thread 0 busy 95%"));
    }

    #[test]
    fn the_lag_allowed_grows_with_the_gap_between_tokens() {
        assert!((ClientCheck::lag_limit(None) - 0.001).abs() < 1e-12);
        assert!((ClientCheck::lag_limit(Some(0.002)) - 0.001).abs() < 1e-12);
        assert!((ClientCheck::lag_limit(Some(0.02)) - 0.005).abs() < 1e-12);
        let slow_engine = ClientCheck {
            chosen: "auto".into(),
            threads: vec![thread(0.2, 0.004)],
            ..ClientCheck::default()
        };
        assert_eq!(slow_engine.clone().judged(Some(0.02)).limited, None);
        assert!(slow_engine.judged(Some(0.01)).limited.is_some());
    }

    #[test]
    fn a_window_too_short_for_a_p99_is_not_judged_by_its_lag() {
        let mut t = thread(0.1, 0.003);
        t.lag_samples = LAG_MIN_SAMPLES - 1;
        let c = check(vec![t.clone()]);
        assert_eq!(c.limited, None);
        assert!(c.summary().contains("shown, not judged"), "{}", c.summary());
        t.busy = Some(0.95);
        assert_eq!(check(vec![t]).limited.as_deref(), Some("thread 0 busy 95%"));
    }

    #[test]
    fn a_thread_without_work_is_not_judged() {
        let mut idle = thread(0.97, 0.000_01);
        idle.streams = 0;
        let c = check(vec![thread(0.2, 0.000_1), idle.clone()]);
        assert_eq!(c.limited, None);
        let alone = check(vec![idle]);
        assert!(
            alone.summary().contains("not judged"),
            "{}",
            alone.summary()
        );
    }

    #[test]
    fn late_open_loop_starts_make_the_figures_client_limited() {
        let mut t = thread(0.1, 0.0001);
        t.starts = 1000;
        t.late_starts = 10;
        assert_eq!(check(vec![t.clone()]).limited, None);
        t.late_starts = 11;
        assert_eq!(
            check(vec![t]).limited.as_deref(),
            Some("thread 0 11 of 1000 starts late by over 5ms")
        );
    }

    #[test]
    fn many_limited_threads_are_counted_not_listed() {
        let c = check(vec![thread(0.99, 0.01); 5]);
        assert!(
            c.limited
                .as_deref()
                .unwrap()
                .ends_with("; 3 more thread(s)"),
            "{c:?}"
        );
    }
}
