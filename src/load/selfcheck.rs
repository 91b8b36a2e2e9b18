//! Was it the server or the client? A gate's figures are judged by what the
//! client can have done to them, not by a proxy of its health: every gated
//! figure gets the most the client can have moved it, and a figure moved
//! beyond its tolerance is `client-limited` — it measures servegate, by
//! that much, not the server.
//!
//! Where the client's error comes from, and its bound:
//! - **Tokens read together.** Arrival times are the kernel's receive
//!   stamps: a late read moves no stamp, except when it is so late that a
//!   later token's packet came first; the two are then read at once and
//!   both dated by the newer packet. The earlier one can have come no
//!   sooner than the connection's previous read that emptied it, nor than
//!   the client thread's last wake, less the time it then waited for a CPU
//!   (`stamp::Arrival`): that span is its sample's bound. A server that
//!   packs several tokens into one write woke the client with that packet:
//!   a bound of zero.
//! - **The send.** The time between taking a request's start and writing
//!   it (less any connect) is the client's, and so, in an open loop, is a
//!   start late by the client's own wake (a wait for `max_in_flight` is
//!   the server's): both are in the request's TTFT and e2e.
//! - **Statistics.** Each sample's true value lies within its bound, so a
//!   percentile's lies between the percentile of the samples moved down by
//!   theirs and moved up by theirs (an order statistic is monotone in every
//!   sample); a mean's within the mean of the bounds. TTFT, TTFT to
//!   content and e2e can only have been inflated, TPOT deflated and the
//!   decode rate inflated; an ITL gap either way (its two ends).
//! - **Rates.** A closed loop's request rate is the client's when one of
//!   its threads had no idle time: on a CPU or waiting for one over 90% of
//!   the window (no room to send the next request when one ends); an open
//!   loop's when over 1% of starts were late by more than 5 ms of the
//!   client's own wake. Throughput figures (tok/s, requests/s, goodput)
//!   are then client-limited.
//!
//! The tolerance is 2% of the figure, and at least 0.1 ms for a time: run
//! to run, a real server's figures vary by more, so an error within it
//! cannot decide a verdict that noise would not; kernel stamps are good to
//! microseconds, so 0.1 ms is far above what a client with room adds.
//! Figures the client cannot move (errors, token drift, the server's own
//! timings) are not judged.

use crate::suite::metric::MetricKey;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::units::format_secs;

/// The share of a figure the client's error may reach.
pub const TOLERANCE_SHARE: f64 = 0.02;
/// The client's error any time figure may have, in seconds.
pub const TOLERANCE_FLOOR: f64 = 0.000_1;
/// Share of the window a thread spent on a CPU or waiting for one above
/// which a closed loop's rate is the client's.
pub const BUSY_LIMIT: f64 = 0.90;
/// Share of open-loop starts late by the client's own doing above which
/// the rate is the client's.
pub const LATE_LIMIT: f64 = 0.01;
/// Share of the window a thread may wait for a CPU before the advice for a
/// client-limited gate names the contended host.
pub const WAITED_NOTE: f64 = 0.10;

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
    /// The time it was runnable but waited for a CPU, over the window's
    /// wall time (0–1): other work on its core. `None` where the kernel
    /// does not say (`/proc/thread-self/schedstat`).
    #[serde(default)]
    pub waited: Option<f64>,
    /// The time, s, it spent in the self-check's hooks at each sleep and
    /// wake over the window (reading its context switches and schedstat
    /// to date the wake): what the self-check cost it. `None` in records
    /// older than the figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dating: Option<f64>,
    /// Open loop: requests it started, and how many of them more than
    /// 5 ms after their intended time because it woke late.
    pub starts: u64,
    /// See `starts`.
    pub late_starts: u64,
}

/// A gated figure, with the most the client can have moved it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FigureBound {
    /// The figure (`itl.p99`).
    pub figure: MetricKey,
    /// Its value as measured.
    pub value: f64,
    /// How far the client can have moved it, in its unit; `None` where
    /// nothing bounds it (a connect, a standard deviation, arrivals of an
    /// `https://` target, dated when hyper hands them over).
    pub bound: Option<f64>,
    /// The error allowed.
    pub tolerance: f64,
    /// Whether it is a time (shown as one).
    pub time: bool,
}

impl FigureBound {
    /// A figure with its bound and the tolerance for it.
    pub fn new(figure: MetricKey, value: f64, bound: Option<f64>) -> Self {
        let time = figure.metric.is_duration();
        let share = TOLERANCE_SHARE * value.abs();
        let tolerance = if time {
            share.max(TOLERANCE_FLOOR)
        } else {
            share
        };
        Self {
            figure,
            value,
            bound,
            tolerance,
            time,
        }
    }

    fn show(&self, v: f64) -> String {
        if self.time {
            format_secs(v)
        } else {
            format!("{v:.1}")
        }
    }

    /// Whether the client can have moved it past its tolerance.
    fn moved(&self) -> bool {
        self.bound.is_some_and(|b| b > self.tolerance)
    }

    /// `itl.p99 10.90ms ± 9.80ms` as judged.
    fn describe(&self) -> String {
        match self.bound {
            Some(b) => format!(
                "{} {} could be off by up to {} ({} allowed)",
                self.figure,
                self.show(self.value),
                self.show(b),
                self.show(self.tolerance)
            ),
            None => format!("{} {} (not bounded)", self.figure, self.show(self.value)),
        }
    }
}

/// The self-check of a gate: every client thread, every gated figure's
/// bound, and the verdict.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClientCheck {
    /// How the thread count was chosen (`auto`, `suite`, `--client-threads`).
    pub chosen: String,
    /// Each client thread.
    pub threads: Vec<ThreadCheck>,
    /// Each gated figure the client can move, with its bound.
    #[serde(default)]
    pub figures: Vec<FigureBound>,
    /// Tokens read together with a later one (their stamps merged), and
    /// all tokens' chunks, over the window.
    #[serde(default)]
    pub merged: u64,
    /// See `merged`.
    #[serde(default)]
    pub marks: u64,
    /// Why the figures are client-limited, if they are.
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

    /// Why this thread set the gate's request rate, if it did.
    fn set_the_rate(&self) -> Option<String> {
        if !self.worked() {
            return None;
        }
        if let Some(b) = self.busy {
            let waited = self.waited.unwrap_or(0.0);
            if b + waited > BUSY_LIMIT {
                return Some(if waited > 0.005 {
                    format!(
                        "busy {:.0}% and waiting for a CPU {:.0}%: no idle time",
                        100.0 * b,
                        100.0 * waited
                    )
                } else {
                    format!("busy {:.0}%", 100.0 * b)
                });
            }
        }
        #[expect(clippy::cast_precision_loss, reason = "request counts are small")]
        if self.starts > 0 && self.late_starts as f64 > LATE_LIMIT * self.starts as f64 {
            return Some(format!(
                "{} of {} starts late by over 5ms",
                self.late_starts, self.starts
            ));
        }
        None
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
        if let Some(w) = self.waited {
            let _ = write!(s, ", waited for a CPU {:.1}% of the window", 100.0 * w);
        }
        if self.starts > 0 {
            let _ = write!(s, ", {} late of {} starts", self.late_starts, self.starts);
        }
        s
    }
}

impl ClientCheck {
    /// Judges the gated figures `figures` (their bounds) and the threads:
    /// sets `limited` when a figure's bound passed its tolerance, or a
    /// gated rate was the client's (`rates`: the gate has a throughput
    /// threshold).
    #[must_use]
    pub fn judged(mut self, figures: Vec<FigureBound>, rates: bool) -> Self {
        let mut why: Vec<String> = figures
            .iter()
            .filter(|f| f.moved())
            .map(FigureBound::describe)
            .collect();
        if rates {
            why.extend(
                self.threads
                    .iter()
                    .enumerate()
                    .filter_map(|(i, t)| t.set_the_rate().map(|w| format!("thread {i} {w}")))
                    .take(2),
            );
        }
        self.figures = figures;
        self.limited = (!why.is_empty()).then(|| why.join("; "));
        self
    }

    /// What to do about a client-limited gate: more threads for a busy
    /// client, cores of its own on a contended host.
    fn advice(&self) -> String {
        let busy = self
            .threads
            .iter()
            .any(|t| t.busy.is_some_and(|b| b > BUSY_LIMIT / 2.0) && t.set_the_rate().is_some());
        let waited = self
            .threads
            .iter()
            .filter_map(|t| t.waited)
            .fold(0.0, f64::max);
        if busy {
            "its threads had no room: raise client_threads".to_owned()
        } else if waited > WAITED_NOTE {
            format!(
                "its threads waited for a CPU up to {:.0}% of the window (other work on their cores): give servegate cores of its own (taskset, a cpuset) or run it on a quieter host",
                100.0 * waited
            )
        } else {
            format!(
                "its threads were kept from a CPU when a request went out or tokens came ({:.1}% of the window in all): give servegate cores of its own, or run it on a quieter host",
                100.0 * waited
            )
        }
    }

    /// The failure of a gate whose client moved its figures.
    pub fn failure(&self) -> Option<String> {
        self.limited.as_ref().map(|why| {
            format!(
                "the client moved these figures beyond their tolerance ({why}): they measure servegate, not the server; {}",
                self.advice()
            )
        })
    }

    /// The self-check as the summary shows it, one line.
    pub fn summary(&self) -> String {
        let n = self.threads.len();
        let mut s = format!(
            "client self-check: {n} thread{} ({})",
            if n == 1 { "" } else { "s" },
            self.chosen
        );
        let worst = |f: fn(&ThreadCheck) -> Option<f64>| {
            self.threads
                .iter()
                .filter_map(f)
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
        };
        if let Some(b) = worst(|t| t.busy) {
            let _ = write!(s, ", busy ≤ {:.0}%", 100.0 * b);
        }
        if self.marks > 0 {
            let _ = write!(
                s,
                ", {} of {} token chunks merged by a late read",
                self.merged, self.marks
            );
        }
        let judged: Vec<String> = self
            .figures
            .iter()
            .map(|f| match f.bound {
                Some(b) => format!("{} ±{}", f.figure, f.show(b)),
                None => format!("{} not bounded", f.figure),
            })
            .collect();
        if !judged.is_empty() {
            let _ = write!(s, ", client error {}", judged.join(", "));
        }
        match &self.limited {
            Some(why) => {
                let _ = write!(s, ": CLIENT-LIMITED ({why})");
            }
            None if self.figures.is_empty() => {
                s.push_str(": no gated figure the client can move");
            }
            None if self.figures.iter().any(|f| f.bound.is_none()) => s.push_str(
                ": every bounded figure within 2% (0.1ms) of the server's; what is not bounded is not judged",
            ),
            None => s.push_str(": every gated figure within 2% (0.1ms) of the server's"),
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
    fn key(text: &str) -> MetricKey {
        text.parse().expect("a metric key")
    }
    use super::*;

    fn thread(busy: f64) -> ThreadCheck {
        ThreadCheck {
            streams: 8,
            busy: Some(busy),
            waited: Some(0.001),
            ..ThreadCheck::default()
        }
    }

    fn check(threads: Vec<ThreadCheck>, figures: Vec<FigureBound>, rates: bool) -> ClientCheck {
        ClientCheck {
            chosen: "auto".into(),
            threads,
            ..ClientCheck::default()
        }
        .judged(figures, rates)
    }

    #[test]
    fn the_tolerance_is_two_percent_and_a_tenth_of_a_millisecond_for_times() {
        assert!(
            (FigureBound::new(key("itl.p99"), 0.010, Some(0.0)).tolerance - 0.000_2).abs() < 1e-12
        );
        assert!(
            (FigureBound::new(key("itl.p50"), 0.002, Some(0.0)).tolerance - 0.000_1).abs() < 1e-12
        );
        assert!(
            (FigureBound::new(key("decode_tok_s.mean"), 50.0, Some(0.0)).tolerance - 1.0).abs()
                < 1e-12
        );
    }

    #[test]
    fn a_figure_moved_past_its_tolerance_is_client_limited_and_named() {
        let within = FigureBound::new(key("itl.p99"), 0.010, Some(0.000_15));
        let beyond = FigureBound::new(key("ttft.p99"), 0.100, Some(0.009_8));
        let ok = check(vec![thread(0.2)], vec![within.clone()], false);
        assert_eq!(ok.limited, None);
        assert!(ok.summary().contains("itl.p99 ±150us"), "{}", ok.summary());
        let c = check(vec![thread(0.2)], vec![within, beyond], false);
        assert_eq!(
            c.limited.as_deref(),
            Some("ttft.p99 100.00ms could be off by up to 9.80ms (2.00ms allowed)")
        );
        let failure = c.failure().unwrap();
        assert!(
            failure.contains("kept from a CPU when a request went out"),
            "{failure}"
        );
    }

    #[test]
    fn the_advice_fits_a_busy_client_or_a_contended_host() {
        let beyond = || vec![FigureBound::new(key("itl.p99"), 0.010, Some(0.005))];
        let busy = check(vec![thread(0.95)], beyond(), false);
        assert!(busy.failure().unwrap().ends_with("raise client_threads"));
        let mut starved = thread(0.1);
        starved.waited = Some(0.4);
        let host = check(vec![starved], beyond(), false);
        assert!(
            host.failure()
                .unwrap()
                .contains("waited for a CPU up to 40% of the window"),
            "{:?}",
            host.failure()
        );
    }

    #[test]
    fn a_busy_thread_limits_gated_rates_only() {
        let c = check(vec![thread(0.2), thread(0.94)], Vec::new(), true);
        assert_eq!(c.limited.as_deref(), Some("thread 1 busy 94%"));
        // Without a gated rate, a busy thread that moved no figure is fine.
        let c = check(vec![thread(0.94)], Vec::new(), false);
        assert_eq!(c.limited, None);
        assert!(c.summary().contains("no gated figure"), "{}", c.summary());
    }

    #[test]
    fn a_thread_busy_or_waiting_for_a_cpu_all_the_window_had_no_room() {
        let mut t = thread(0.88);
        t.waited = Some(0.115);
        let c = check(vec![t], Vec::new(), true);
        assert_eq!(
            c.limited.as_deref(),
            Some("thread 0 busy 88% and waiting for a CPU 12%: no idle time")
        );
        assert!(c.failure().unwrap().ends_with("raise client_threads"));
    }

    #[test]
    fn late_open_loop_starts_limit_gated_rates() {
        let mut t = thread(0.1);
        t.starts = 1000;
        t.late_starts = 10;
        assert_eq!(check(vec![t.clone()], Vec::new(), true).limited, None);
        t.late_starts = 11;
        assert_eq!(
            check(vec![t], Vec::new(), true).limited.as_deref(),
            Some("thread 0 11 of 1000 starts late by over 5ms")
        );
    }

    #[test]
    fn a_thread_without_work_is_not_judged() {
        let mut idle = thread(0.97);
        idle.streams = 0;
        assert_eq!(
            check(vec![thread(0.2), idle], Vec::new(), true).limited,
            None
        );
    }
}
