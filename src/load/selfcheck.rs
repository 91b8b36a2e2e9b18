//! Was it the server or the client? A gate's figures are judged by what the
//! client can have done to them, not by a proxy of its health: every gated
//! figure gets the most the client can have moved it, and a figure moved
//! beyond its tolerance is `client-limited` — it measures servegate, by
//! that much, not the server. It fails its gate only where that could have
//! changed a verdict: where the interval its true value lies in crosses a
//! threshold's bound ([`at_stake`]).
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
pub(crate) const TOLERANCE_SHARE: f64 = 0.02;
/// The client's error any time figure may have, in seconds.
pub(crate) const TOLERANCE_FLOOR: f64 = 0.000_1;
/// Share of the window a thread spent on a CPU or waiting for one above
/// which a closed loop's rate is the client's.
pub(crate) const BUSY_LIMIT: f64 = 0.90;
/// Share of open-loop starts late by the client's own doing above which
/// the rate is the client's.
pub(crate) const LATE_LIMIT: f64 = 0.01;
/// Share of the window a thread may wait for a CPU before the advice for a
/// client-limited gate names the contended host.
pub(crate) const WAITED_NOTE: f64 = 0.10;

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

    /// Where the true figure lies when the client may have moved it past
    /// its tolerance (within it, run-to-run noise moves the figure more
    /// than the client could: the figure counts as exact); `None` where
    /// it did not, or nothing bounds it.
    fn moved_range(&self) -> Option<(f64, f64)> {
        let b = self.bound.filter(|_| self.moved())?;
        Some((
            self.low.unwrap_or(self.value - b),
            self.high.unwrap_or(self.value + b),
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
    /// decides nothing the client did ([`at_stake`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_stake: Option<String>,
}

/// How far above its measured value a rate the client set may truly lie,
/// as a factor: unbounded in principle (the server could have served any
/// more), a factor no server reaches in practice.
const RATE_CEILING: f64 = 1e9;

/// Why the client's error could change the verdict of `key op bound`
/// over a gate's repeats — each its measured value and its client's
/// check — judged as `mode` says; `None` when the verdict is the same
/// wherever the true figures lie within the client's bounds.
///
/// Each repeat's true figure lies in an interval: its figure's when the
/// client moved it beyond the tolerance, `[v, ∞)` for a rate a client
/// thread set (it can only have been held down), else the measured value
/// alone. The verdict's own figure is then bounded: the mean between the
/// means of the intervals' ends; the standard deviation within the
/// measured one ± `sqrt(Σδ²/(n−1))` (δ a repeat's widest move: the
/// deviation is a norm of the centred values); a confidence interval's end
/// within the mean's range ± t·s/√n over the deviation's range. The
/// threshold is at stake when that range holds figures on both sides of
/// its bound; a point (`==`, `!=`) whenever it holds the bound.
pub fn at_stake(
    key: MetricKey,
    op: Op,
    bound: f64,
    mode: crate::suite::VerdictMode,
    repeats: &[(f64, &ClientCheck)],
) -> Option<String> {
    use crate::suite::VerdictMode;
    let mut moved = Vec::new();
    let mut ranges = Vec::with_capacity(repeats.len());
    for (i, (v, check)) in repeats.iter().enumerate() {
        let which = if repeats.len() > 1 {
            format!(" (repeat {})", i + 1)
        } else {
            String::new()
        };
        let range = if is_rate(key.metric) {
            check.rate_setter().map(|setter| {
                moved.push(format!(
                    "{key} {v:.1}{which} was set by the client ({setter}), and the server's could be higher"
                ));
                (*v, v.abs().max(1.0) * RATE_CEILING)
            })
        } else {
            check
                .figures
                .iter()
                .find(|f| f.figure == key)
                .and_then(|f| {
                    let (low, high) = f.moved_range()?;
                    moved.push(format!(
                        "{key} {}{which} could be off by up to {}",
                        f.show(*v),
                        f.show(f.bound.unwrap_or(0.0)),
                    ));
                    Some((low, high))
                })
        };
        ranges.push(range.unwrap_or((*v, *v)));
    }
    if moved.is_empty() {
        return None;
    }
    #[expect(clippy::cast_precision_loss, reason = "repeat counts are small")]
    let n = repeats.len() as f64;
    let mean = |f: fn(&(f64, f64)) -> f64| ranges.iter().map(f).sum::<f64>() / n;
    let (mean_lo, mean_hi) = (mean(|r| r.0), mean(|r| r.1));
    // One repeat, or the mean's verdict: the mean's range decides.
    let (lo, hi) = if repeats.len() < 2 || mode == VerdictMode::Mean {
        (mean_lo, mean_hi)
    } else {
        let values: Vec<f64> = repeats.iter().map(|(v, _)| *v).collect();
        let measured = crate::load::estimate::Estimate::of(values);
        let widest: f64 = repeats
            .iter()
            .zip(&ranges)
            .map(|((v, _), (l, h))| (v - l).max(h - v).powi(2))
            .sum();
        let d = (widest / (n - 1.0)).sqrt();
        let k = crate::load::estimate::t95(repeats.len() - 1) / n.sqrt();
        let (s_lo, s_hi) = ((measured.stddev - d).max(0.0), measured.stddev + d);
        // The end of the interval the verdict reads (`judge::holds`).
        let upper_end = matches!(
            (mode, op),
            (VerdictMode::Lenient, Op::Ge | Op::Gt) | (VerdictMode::Strict, Op::Le | Op::Lt)
        );
        if op.is_point() {
            (mean_lo - k * s_hi, mean_hi + k * s_hi)
        } else if upper_end {
            (mean_lo + k * s_lo, mean_hi + k * s_hi)
        } else {
            (mean_lo - k * s_hi, mean_hi - k * s_lo)
        }
    };
    // A point's verdict is certain where the client's range misses it.
    let certain = if op.is_point() {
        lo > bound || hi < bound
    } else {
        op.holds(lo, bound) == op.holds(hi, bound)
    };
    if certain {
        return None;
    }
    let show = |v: f64| {
        if key.metric.is_duration() {
            format_secs(v)
        } else {
            format!("{v:.1}")
        }
    };
    let figure = if repeats.len() > 1 {
        format!(
            "its {} verdict's figure over {} repeats",
            mode.name(),
            repeats.len()
        )
    } else {
        "the true figure".to_owned()
    };
    let range = if hi >= RATE_CEILING {
        format!("at {} or more", show(lo))
    } else {
        format!("anywhere in {} … {}", show(lo), show(hi))
    };
    Some(format!(
        "{}: {figure} could lie {range}, on both sides of `{} {}`",
        moved.join("; "),
        op.symbol(),
        show(bound)
    ))
}

/// Whether a figure is a throughput (tok/s, requests/s, goodput).
pub(crate) fn is_rate(metric: Metric) -> bool {
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
            why.extend(self.rate_setters().take(2));
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

    /// Whether the client may have moved figure `key` past its tolerance
    /// (a rate: a thread set it): such a figure measures servegate, and
    /// the history keeps it, compared with nothing. The gate's other
    /// figures count.
    pub fn limits(&self, key: MetricKey) -> bool {
        if is_rate(key.metric) {
            return self.rate_setter().is_some();
        }
        self.figures
            .iter()
            .any(|f| f.figure == key && f.moved_range().is_some())
    }

    /// Why a client thread set the gate's request rate, if one did (the
    /// first).
    pub(crate) fn rate_setter(&self) -> Option<String> {
        self.rate_setters().next()
    }

    /// Each client thread that set the gate's request rate, and why.
    fn rate_setters(&self) -> impl Iterator<Item = String> + '_ {
        self.threads
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.set_the_rate().map(|w| format!("thread {i} {w}")))
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
mod tests;
