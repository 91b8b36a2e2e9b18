//! Decoding a load's pace: a closed loop or a sweep of concurrency
//! levels, an open loop at a rate or a sweep of rates (constant, Poisson or
//! gamma arrivals), or a replay of a trace's recorded times.

use std::time::Duration;

use super::{Decoder, Fields};
use crate::suite::dataset::Record;
use crate::suite::diagnostics::Diagnostic;
use crate::suite::model::{Arrival, Pace};
use crate::suite::node::{Node, Yaml};

pub(super) const ARRIVALS: &[&str] = &["constant", "poisson", "gamma", "trace"];
/// Most a trace may be slowed down, and sped up.
pub(super) const MAX_SLOWDOWN: f64 = 1000.0;
pub(super) const MIN_SLOWDOWN: f64 = 0.001;

/// A sweep level: `concurrency: [1, 8]` or `rate: [5, 10]` gives one gate
/// per value, named `<gate>::concurrency_8`.
pub(super) struct Level {
    pub(super) suffix: Option<String>,
    pub(super) pace: Pace,
}

impl Decoder<'_> {
    /// Integers, or a list of them (a sweep).
    fn levels_of<T>(
        &mut self,
        y: &Yaml,
        what: &str,
        one: impl Fn(&mut Self, &Yaml) -> Option<T>,
    ) -> Option<Vec<T>> {
        match &y.node {
            Node::Seq(items) if items.is_empty() => {
                self.error(Diagnostic::new(y.loc, format!("`{what}` sweep is empty")));
                None
            }
            Node::Seq(items) => items.iter().map(|i| one(self, i)).collect(),
            _ => one(self, y).map(|v| vec![v]),
        }
    }

    pub(super) fn pace(&mut self, f: &Fields<'_>) -> Option<Vec<Level>> {
        let concurrency = f.get("concurrency");
        let arrival = match f.get("arrival") {
            None => None,
            Some(v) => Some(self.one_of(v, "arrival", ARRIVALS)?),
        };
        let trace = arrival.as_deref() == Some("trace");
        for (key, with) in [("burstiness", "gamma"), ("slowdown", "trace")] {
            if let Some(k) = f.key(key)
                && arrival.as_deref() != Some(with)
            {
                self.error(
                    Diagnostic::new(k.loc, format!("`{key}` goes with `arrival: {with}`"))
                        .expected(format!("`arrival: {with}` in this load, or no `{key}`")),
                );
                return None;
            }
        }
        for (key, why) in [
            ("rate", "a trace's records set its times, not `rate`"),
            (
                "seed",
                "a trace's times are its records', not drawn from a `seed`",
            ),
        ] {
            if let Some(k) = f.key(key).filter(|_| trace) {
                self.error(Diagnostic::new(k.loc, why).expected(
                    "no `rate` or `seed` with `arrival: trace` (`slowdown: 2` plays the trace at half speed)",
                ));
                return None;
            }
        }
        let rate = f.get("rate");
        if rate.is_none() && !trace {
            for key in ["arrival", "seed"] {
                if let Some(k) = f.key(key) {
                    self.error(
                        Diagnostic::new(k.loc, format!("`{key}` applies to an open loop only"))
                            .expected("a `rate:` in this load"),
                    );
                }
            }
            return self.closed_levels(concurrency);
        }
        let max_in_flight = match concurrency {
            None => None,
            Some(v) if matches!(v.node, Node::Seq(_)) => {
                self.error(Diagnostic::new(
                    v.loc,
                    "in an open loop (`rate`, or a trace's times), `concurrency` is one cap on requests in flight, not a sweep",
                ));
                return None;
            }
            Some(v) => Some(self.count::<u32>(v, "concurrency", 1)?),
        };
        let arrival = match arrival.as_deref() {
            Some("poisson") => Arrival::Poisson,
            Some("gamma") => {
                let at = self.required(f, "burstiness", "load")?;
                let burstiness = self.positive(
                    at,
                    "burstiness",
                    "`burstiness: 0.5` (below 1 burstier than Poisson, above 1 more even)",
                )?;
                Arrival::Gamma { burstiness }
            }
            Some("trace") => {
                let slowdown = match f.get("slowdown") {
                    None => 1.0,
                    Some(v) => {
                        let s = self.positive(
                            v,
                            "slowdown",
                            "`slowdown: 2` (the trace at half speed)",
                        )?;
                        if !(MIN_SLOWDOWN..=MAX_SLOWDOWN).contains(&s) {
                            self.error(
                                Diagnostic::new(v.loc, format!("slowdown {s} is out of range"))
                                    .expected(format!("a slowdown from {MIN_SLOWDOWN} (a thousand times faster) to {MAX_SLOWDOWN}")),
                            );
                            return None;
                        }
                        s
                    }
                };
                Arrival::Trace { slowdown }
            }
            _ => Arrival::Constant,
        };
        let seed = f
            .get("seed")
            .map_or(Some(0), |v| self.count(v, "seed", 0))?;
        let Some(rate) = rate else {
            // A trace's rate is its mean, set once its records are read.
            return Some(vec![Level {
                suffix: None,
                pace: Pace::Open {
                    rate: 0.0,
                    arrival,
                    seed,
                    max_in_flight,
                },
            }]);
        };
        let rates = self.levels_of(rate, "rate", |d, i| {
            d.positive(i, "rate", "requests per second, e.g. `rate: 20`")
        })?;
        let sweep = rates.len() > 1;
        Some(
            rates
                .into_iter()
                .map(|rate| Level {
                    suffix: sweep.then(|| format!("rate_{}", rate.to_string().replace('.', "_"))),
                    pace: Pace::Open {
                        rate,
                        arrival,
                        seed,
                        max_in_flight,
                    },
                })
                .collect(),
        )
    }

    /// A closed loop's levels: one, or a `concurrency` sweep.
    fn closed_levels(&mut self, concurrency: Option<&Yaml>) -> Option<Vec<Level>> {
        let levels = match concurrency {
            None => vec![1],
            Some(v) => {
                self.levels_of(v, "concurrency", |d, i| d.count::<u32>(i, "concurrency", 1))?
            }
        };
        let sweep = levels.len() > 1;
        Some(
            levels
                .into_iter()
                .map(|c| Level {
                    suffix: sweep.then(|| format!("concurrency_{c}")),
                    pace: Pace::Closed { concurrency: c },
                })
                .collect(),
        )
    }

    /// A finite number above 0.
    fn positive(&mut self, y: &Yaml, what: &str, expected: &str) -> Option<f64> {
        let v = self.float(y, what)?;
        if v > 0.0 && v.is_finite() {
            return Some(v);
        }
        self.error(
            Diagnostic::new(y.loc, format!("{what} must be above 0, found {v}")).expected(expected),
        );
        None
    }

    /// `arrival: trace`: the dataset's records' times from the first's (every
    /// record needs a `timestamp`, in order), and how many requests the
    /// window sends: the records after the warm-up's, all of them unless
    /// `requests` (given) says fewer.
    pub(super) fn trace_times(
        &mut self,
        f: &Fields<'_>,
        records: Option<&[Record]>,
        (warmup, requests): (Option<u32>, Option<u32>),
    ) -> Option<(Vec<Duration>, u32)> {
        let at = f.key("arrival").map_or_else(Default::default, |k| k.loc);
        if f.get("dataset").is_none() {
            self.error(
                Diagnostic::new(at, "`arrival: trace` replays a dataset's records at their `timestamp`s; this load has no `dataset`")
                    .expected("`dataset: trace.jsonl` whose records carry `timestamp` (milliseconds), e.g. a Mooncake trace"),
            );
            return None;
        }
        // Without records, the dataset was refused, and said why.
        let records = records?;
        let data = f.get("dataset").map_or(at, |d| d.loc);
        let mut times = Vec::with_capacity(records.len());
        let mut last = 0.0_f64;
        for r in records {
            let t = match &r.timestamp {
                Some(Ok(t)) if *t >= last => Ok(*t),
                Some(Ok(t)) => Err(format!("its `timestamp` {t} comes before the one before it ({last}): a trace is replayed in order")),
                Some(Err(why)) => Err(why.clone()),
                None => Err("it has no `timestamp`".to_owned()),
            }
            .map_err(|why| {
                self.error(
                    Diagnostic::new(data, format!("{} of the dataset: {why}", r.at))
                        .expected("every record's `timestamp`: milliseconds, in order"),
                );
            })
            .ok()?;
            last = t;
            // Finite and at least 0 (the dataset's reading), but perhaps
            // past what a duration holds.
            let Ok(at) = Duration::try_from_secs_f64(t / 1000.0) else {
                self.error(
                    Diagnostic::new(
                        data,
                        format!(
                            "{} of the dataset: its `timestamp` {t} is too far off to wait for",
                            r.at
                        ),
                    )
                    .expected("every record's `timestamp`: milliseconds, in order"),
                );
                return None;
            };
            times.push(at);
        }
        let start = times[0];
        let times: Vec<Duration> = times.into_iter().map(|t| t.saturating_sub(start)).collect();
        let warmup = warmup?;
        let left = u32::try_from(records.len())
            .unwrap_or(u32::MAX)
            .saturating_sub(warmup);
        match requests {
            None if left > 0 => Some((times, left)),
            Some(n) if n <= left => Some((times, n)),
            _ => {
                let k = f
                    .key("requests")
                    .or_else(|| f.key("warmup"))
                    .map_or(data, |k| k.loc);
                self.error(
                    Diagnostic::new(
                        k,
                        format!("the trace has {} records; after {warmup} warm-up, {left} are left to replay", records.len()),
                    )
                    .expected("`requests` (and `warmup`) within the trace's records"),
                );
                None
            }
        }
    }
}

/// Whether a load asks to replay a trace (`arrival: trace`), valid or not.
pub(super) fn replays(f: &Fields<'_>) -> bool {
    f.get("arrival")
        .is_some_and(|a| matches!(&a.node, Node::Str(s) if s == "trace"))
}

/// The slowdown of a load that replays a trace.
pub(super) fn trace_slowdown(levels: &[Level]) -> Option<f64> {
    levels.iter().find_map(|l| match l.pace {
        Pace::Open {
            arrival: Arrival::Trace { slowdown },
            ..
        } => Some(slowdown),
        _ => None,
    })
}

/// A replayed window's mean rate, in requests per second: the gaps between
/// the times of the records it sends over their span, played `slowdown`
/// times slower (0 for one record; a span under a millisecond counts as
/// one).
pub(super) fn mean_rate<'t>(times: impl Iterator<Item = &'t Duration>, slowdown: f64) -> f64 {
    let (mut first, mut last, mut n) = (None, Duration::ZERO, 0_u32);
    for t in times {
        first.get_or_insert(*t);
        last = *t;
        n += 1;
    }
    let span = last
        .saturating_sub(first.unwrap_or_default())
        .as_secs_f64()
        .max(0.001)
        * slowdown;
    f64::from(n.saturating_sub(1)) / span
}

/// Longest an open loop's schedule may run without a `duration`: a rate
/// near zero, or a trace's far timestamp, would otherwise wait silently for
/// days.
const MAX_SCHEDULE: Duration = Duration::from_secs(7 * 24 * 3600);

impl Decoder<'_> {
    /// An open loop of `requests` (after `warmup`) without a `duration`:
    /// its last start (a trace's, or `requests - 1` gaps of its rate's
    /// mean) within
    /// [`MAX_SCHEDULE`].
    pub(super) fn schedule_within_reach(
        &mut self,
        f: &Fields<'_>,
        levels: &[Level],
        (warmup, requests): (u32, u32),
        prompt: &crate::suite::model::LoadPrompt,
    ) -> Option<()> {
        for level in levels {
            let Pace::Open { rate, arrival, .. } = level.pace else {
                continue;
            };
            let last = match (arrival, prompt) {
                (
                    Arrival::Trace { slowdown },
                    crate::suite::model::LoadPrompt::Dataset { times: Some(t), .. },
                ) => {
                    let w = warmup as usize;
                    let end = (w + requests as usize).saturating_sub(1);
                    let (first, end) = (t.get(w).copied(), t.get(end).copied());
                    end.unwrap_or_default()
                        .saturating_sub(first.unwrap_or_default())
                        .as_secs_f64()
                        * slowdown
                }
                (Arrival::Trace { .. }, _) => continue,
                _ => f64::from(requests.saturating_sub(1)) / rate,
            };
            if last > MAX_SCHEDULE.as_secs_f64() {
                let at = f
                    .key("rate")
                    .or_else(|| f.key("arrival"))
                    .map_or_else(Default::default, |k| k.loc);
                self.error(
                    Diagnostic::new(
                        at,
                        format!(
                            "the schedule's last start is {:.1} days away",
                            last / 86_400.0
                        ),
                    )
                    .expected("a `duration:` to end the window, or a schedule of at most 7 days"),
                );
                return None;
            }
        }
        Some(())
    }
}
