//! Was it the server or the client? A gate's figures are judged by what the
//! client can have done to them, not by a proxy of its health: every gated
//! figure gets the most the client can have moved it, and a figure moved
//! beyond its tolerance is `client-limited` — it measures servegate, by
//! that much, not the server. It fails its gate only where that could have
//! changed a verdict: where the interval its true value lies in crosses a
//! threshold's bound ([`ClientCheck::stake`]).
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

use crate::suite::metric::{Metric, MetricKey};
use crate::suite::threshold::Op;
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
    /// Where the true figure lies, as the client's bounds say: the figure
    /// of every sample moved down by its bound, and up by it (`None` in
    /// records older than the interval: `value ± bound`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<f64>,
    /// See `low`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<f64>,
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
            low: None,
            high: None,
        }
    }

    /// A figure whose true value lies in `low ..= high` (around `value`).
    pub fn within(figure: MetricKey, value: f64, low: f64, high: f64) -> Self {
        Self {
            low: Some(low),
            high: Some(high),
            ..Self::new(
                figure,
                value,
                Some((value - low).max(high - value).max(0.0)),
            )
        }
    }

    /// Where the true figure lies; `None` where nothing bounds it.
    fn interval(&self) -> Option<(f64, f64)> {
        let b = self.bound?;
        Some((
            self.low.unwrap_or(self.value - b),
            self.high.unwrap_or(self.value + b),
        ))
    }

    /// Why the client's error could change the verdict of `value op
    /// bound`: it is beyond the tolerance (within it, run-to-run noise
    /// moves the figure more than the client could), and the true
    /// figure's interval holds values on both sides of the bound.
    fn at_stake(&self, op: Op, bound: f64) -> Option<String> {
        if !self.moved() {
            return None;
        }
        let (low, high) = self.interval()?;
        let now = op.holds(self.value, bound);
        if op.holds(low, bound) == now && op.holds(high, bound) == now {
            return None;
        }
        Some(format!(
            "{} {} could be off by up to {}: the true figure lies in {} … {}, on both sides of `{} {}`",
            self.figure,
            self.show(self.value),
            self.show(self.bound.unwrap_or(0.0)),
            self.show(low),
            self.show(high),
            op.symbol(),
            self.show(bound)
        ))
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
    /// Why the figures are client-limited, if they are: a figure moved
    /// beyond its tolerance, or a rate the client set. Such figures
    /// measure servegate, by that much: the history keeps them and
    /// compares them with nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited: Option<String>,
    /// Why a threshold's verdict depends on the client, if one does (its
    /// figure's true value could lie on the other side of its bound): the
    /// gate then fails as client-limited. A figure however far the client
    /// moved it, whose whole interval lies on one side of every bound,
    /// decides nothing the client did ([`ClientCheck::stake`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_stake: Option<String>,
}

/// A threshold of a gate as judged: its figure, how it compares, against
/// what bound (resolved), and the figure measured.
#[derive(Debug, Clone, Copy)]
pub struct Judged {
    /// The figure.
    pub key: MetricKey,
    /// How it compares.
    pub op: Op,
    /// Against what.
    pub bound: f64,
    /// What was measured.
    pub value: f64,
}

/// Whether a figure is a throughput (tok/s, requests/s, goodput).
pub fn is_rate(metric: Metric) -> bool {
    matches!(
        metric,
        Metric::OutputTokS
            | Metric::InputTokS
            | Metric::TotalTokS
            | Metric::RequestsPerS
            | Metric::GoodputRequestsPerS
            | Metric::GoodputTokS
    )
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

    /// Sets [`ClientCheck::at_stake`] from the gate's thresholds: a
    /// threshold is at stake when its figure's true value, within the
    /// client's bounds, could lie on the other side of its bound. A rate
    /// the client set can only be understated (the server could have
    /// served more): a `>=` it meets, or a `<=` it misses, is certain
    /// whatever the client did; the other verdicts are at stake.
    pub fn stake(&mut self, judged: &[Judged]) {
        let rate_setter = self
            .threads
            .iter()
            .enumerate()
            .find_map(|(i, t)| t.set_the_rate().map(|w| format!("thread {i} {w}")));
        let why: Vec<String> = judged
            .iter()
            .filter_map(|j| {
                if is_rate(j.key.metric) {
                    let setter = rate_setter.as_ref()?;
                    let certain = match j.op {
                        Op::Ge | Op::Gt => j.op.holds(j.value, j.bound),
                        Op::Le | Op::Lt => !j.op.holds(j.value, j.bound),
                        Op::Eq => false,
                    };
                    return (!certain).then(|| {
                        format!(
                            "{} {:.1} was set by the client ({setter}), and the server's could be higher: `{} {} {:.1}` could go the other way",
                            j.key,
                            j.value,
                            j.key,
                            j.op.symbol(),
                            j.bound
                        )
                    });
                }
                self.figures
                    .iter()
                    .find(|f| f.figure == j.key)?
                    .at_stake(j.op, j.bound)
            })
            .collect();
        self.at_stake = (!why.is_empty()).then(|| why.join("; "));
    }

    /// The failure of a gate whose verdict the client could have changed.
    pub fn failure(&self) -> Option<String> {
        self.at_stake.as_ref().map(|why| {
            format!(
                "the client could have changed this gate's verdict ({why}): it measures servegate, not the server; {}",
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
        match (&self.at_stake, &self.limited) {
            (Some(why), _) => {
                let _ = write!(s, ": CLIENT-LIMITED ({why})");
            }
            (None, Some(why)) => {
                let _ = write!(
                    s,
                    ": client-limited figures ({why}), but no threshold's verdict depends on them: kept, not compared, in the history"
                );
            }
            (None, None) if self.figures.is_empty() => {
                s.push_str(": no gated figure the client can move");
            }
            (None, None) if self.figures.iter().any(|f| f.bound.is_none()) => s.push_str(
                ": every bounded figure within 2% (0.1ms) of the server's; what is not bounded is not judged",
            ),
            (None, None) => s.push_str(": every gated figure within 2% (0.1ms) of the server's"),
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

    /// `c` staked on one threshold `key op bound`, measured `value`.
    fn staked(mut c: ClientCheck, key_text: &str, op: Op, bound: f64, value: f64) -> ClientCheck {
        c.stake(&[Judged {
            key: key(key_text),
            op,
            bound,
            value,
        }]);
        c
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
        // Far inside its bound, the figure decides nothing the client did.
        let far = staked(c.clone(), "ttft.p99", Op::Le, 1.0, 0.100);
        assert_eq!((far.at_stake.as_ref(), far.failure()), (None, None));
        assert!(
            far.summary()
                .contains("but no threshold's verdict depends on them"),
            "{}",
            far.summary()
        );
        // Its true value (90.2–109.8 ms: a bound without its interval is
        // either way) on both sides of 95 ms: at stake,
        // both numbers named.
        let near = staked(c, "ttft.p99", Op::Le, 0.095, 0.100);
        assert_eq!(
            near.at_stake.as_deref(),
            Some(
                "ttft.p99 100.00ms could be off by up to 9.80ms: the true figure lies in 90.20ms … 109.80ms, on both sides of `<= 95.00ms`"
            )
        );
        let failure = near.failure().unwrap();
        assert!(
            failure.contains("kept from a CPU when a request went out"),
            "{failure}"
        );
        assert!(
            near.summary().contains(": CLIENT-LIMITED ("),
            "{}",
            near.summary()
        );
    }

    #[test]
    fn a_verdict_is_at_stake_only_where_the_interval_crosses_the_bound() {
        // A TTFT can only have been inflated: its true value lies in
        // 40–50 ms.
        let ttft = FigureBound::within(key("ttft.mean"), 0.050, 0.040, 0.050);
        let c = check(vec![thread(0.2)], vec![ttft], false);
        for (op, bound, stake) in [
            (Op::Le, 0.060, false), // passes whatever the client did
            (Op::Le, 0.030, false), // fails whatever the client did
            (Op::Le, 0.045, true),  // fails as measured, the truth may pass
            (Op::Ge, 0.045, true),
            (Op::Ge, 0.035, false),
        ] {
            let c = staked(c.clone(), "ttft.mean", op, bound, 0.050);
            assert_eq!(c.at_stake.is_some(), stake, "{op:?} {bound}: {c:?}");
        }
        // Within its tolerance the client's error decides nothing: noise
        // moves the figure more.
        let small = FigureBound::within(key("itl.p99"), 0.010, 0.009_9, 0.010);
        let c = check(vec![thread(0.2)], vec![small], false);
        assert_eq!(staked(c, "itl.p99", Op::Le, 0.009_95, 0.010).at_stake, None);
    }

    #[test]
    fn the_advice_fits_a_busy_client_or_a_contended_host() {
        let beyond = || vec![FigureBound::new(key("itl.p99"), 0.010, Some(0.005))];
        let busy = staked(
            check(vec![thread(0.95)], beyond(), false),
            "itl.p99",
            Op::Le,
            0.008,
            0.010,
        );
        assert!(busy.failure().unwrap().ends_with("raise client_threads"));
        let mut starved = thread(0.1);
        starved.waited = Some(0.4);
        let host = staked(
            check(vec![starved], beyond(), false),
            "itl.p99",
            Op::Le,
            0.008,
            0.010,
        );
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
        // The client can only have held the rate down: a lower bound met
        // is met, a lower bound missed may not be, and the reverse for an
        // upper bound.
        for (op, bound, stake) in [
            (Op::Ge, 100.0, false),
            (Op::Ge, 150.0, true),
            (Op::Le, 150.0, true),
            (Op::Le, 100.0, false),
        ] {
            let s = staked(c.clone(), "output_tok_s", op, bound, 120.0);
            assert_eq!(s.at_stake.is_some(), stake, "{op:?} {bound}: {s:?}");
        }
        assert_eq!(
            staked(c.clone(), "output_tok_s", Op::Ge, 150.0, 120.0)
                .at_stake
                .as_deref(),
            Some(
                "output_tok_s 120.0 was set by the client (thread 1 busy 94%), and the server's could be higher: `output_tok_s >= 150.0` could go the other way"
            )
        );
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
        let c = staked(c, "requests_per_s", Op::Ge, 10.0, 8.0);
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
