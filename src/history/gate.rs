//! A gate's history as its thresholds read it: the reference figure of
//! `history.median(N)` / `history.mean(N)` (the last N runs of the same
//! configuration), and the bound of `no_regression` (the series' current
//! level and its noise). Only points whose gate passed and whose client
//! did not set them count: a regression that failed never lowers the
//! reference it is judged by, so it stays red until it is fixed.

use std::collections::BTreeMap;

use super::changepoint::Detector;
use super::{History, Location, ModelIdentity, Point, SeriesKey};
use crate::load::fingerprint::Config;
use crate::suite::metric::MetricKey;
use crate::suite::threshold::{Op, Recent};

/// The fewest earlier runs `no_regression` compares with.
pub(crate) const LEAST_FOR_REGRESSION: usize = 5;

/// The smallest change `no_regression` fails on, relative to the level:
/// below it a change is not worth a red gate, however significant.
pub(crate) const LEAST_CHANGE: f64 = 0.01;

/// One-sided significance of `no_regression`: the newest run is beyond
/// the level's 99% prediction bound.
const QUANTILE_Z: f64 = 2.326_347_874;

/// A gate's earlier points, by figure.
#[derive(Debug, Clone)]
pub(crate) struct GateHistory {
    /// Where the history is, as messages name it.
    pub at: String,
    /// The gate's series (its `key` the first figure asked for).
    pub series: SeriesKey,
    /// This run's configuration.
    pub fingerprint: String,
    /// Every earlier point of each figure asked for, oldest first, or why
    /// the history could not be read.
    pub points: Result<BTreeMap<MetricKey, Vec<Point>>, String>,
    /// The server serves another model than it did in the run before of
    /// this suite's gate, in words: the history thresholds fail on it.
    pub changed: Option<String>,
    /// How this run's configuration differs by name from the newest
    /// earlier run's of another, where the history holds that one whole:
    /// `run X's by dsa_decode_backend: flashmla → trtllm`.
    pub differs: Option<String>,
}

/// What a history bound was made from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reference {
    /// The reference figure (a median, a mean, the current level).
    pub value: f64,
    /// The bound, where it is not the reference adjusted by the threshold
    /// (`no_regression`'s).
    pub bound: Option<f64>,
    /// Runs behind it.
    pub runs: usize,
    /// In words, for the failure message: which runs, which statistic.
    pub said: String,
    /// The newest run behind it: the last good run, and its commit.
    pub last_good: Option<Point>,
    /// A failure the history itself shows, whatever the bound says (a
    /// change for the worse that this run is on).
    pub fails: Option<String>,
}

impl GateHistory {
    /// The earlier points of `keys` of a series (`series.key` is ignored),
    /// read from `location`, and whether the model served changed since
    /// this machine's run before ([`History::previous`]).
    pub fn read(
        location: &Location,
        series: &SeriesKey,
        (fingerprint, config, model): (&str, &Config, &ModelIdentity<'_>),
        keys: &[MetricKey],
    ) -> GateHistory {
        let mut changed = None;
        let mut differs = None;
        let unread = |e: super::HistoryError| format!("the history could not be read: {e}");
        let points = History::open(location).map_err(unread).and_then(|mut h| {
            if let Some(first) = keys.first()
                && let Some(previous) = h
                    .previous(
                        &series.figure(*first),
                        model.pinned.is_some(),
                        &super::node_name(),
                    )
                    .map_err(unread)?
            {
                changed = served_change(&previous, model, series);
            }
            let points: BTreeMap<MetricKey, Vec<Point>> = keys
                .iter()
                .map(|k| {
                    h.points(&series.figure(*k), usize::MAX)
                        .map(|p| (*k, p))
                        .map_err(unread)
                })
                .collect::<Result<_, _>>()?;
            let other = points
                .values()
                .flatten()
                .filter(|p| p.fingerprint != fingerprint)
                .max_by_key(|p| p.finished_unix);
            if let Some(other) = other
                && !config.is_empty()
                && let Some(theirs) = h.config(&other.fingerprint).map_err(unread)?
            {
                differs = Some(format!(
                    "run {}'s by {}",
                    other.run_uid,
                    crate::load::fingerprint::differences_line(&theirs, config, 8)
                ));
            }
            Ok(points)
        });
        GateHistory {
            at: location.describe(),
            series: series.clone(),
            fingerprint: fingerprint.to_owned(),
            points,
            changed,
            differs,
        }
    }

    /// The points of `key` that may be compared with: the gate passed,
    /// its client did not set them.
    fn good(&self, key: MetricKey) -> Result<Vec<&Point>, String> {
        let points = self.points.as_ref().map_err(Clone::clone)?;
        Ok(points
            .get(&key)
            .map(|p| p.iter().filter(|p| p.counted()).collect())
            .unwrap_or_default())
    }

    /// A reference as it stands once the model served is known: where it
    /// changed since the run before, the reference fails (the bound is
    /// still worked out and shown where the series has enough runs: a
    /// pinned series goes on across the change), and too little history
    /// is no pass but a failure that names the change.
    fn served(&self, reference: Option<Reference>) -> Result<Option<Reference>, String> {
        let Some(changed) = &self.changed else {
            return Ok(reference);
        };
        let mut reference = reference.ok_or_else(|| changed.clone())?;
        reference.fails = Some(match reference.fails.take() {
            Some(worse) => format!("{changed}; and {worse}"),
            None => changed.clone(),
        });
        Ok(Some(reference))
    }

    /// `history.median(N)` / `history.mean(N)` of `key` over the last N
    /// good runs of this configuration, or — while it has fewer than
    /// `min(N, 3)` — of the series' in any configuration: a configuration
    /// change (new flags, a new version, another served id) is held to
    /// the runs before it, never a free pass until it has runs of its own.
    /// `Ok(None)` while the series has fewer than `min(N, 3)` in all (the
    /// threshold is not applied yet).
    pub(crate) fn recent(
        &self,
        key: MetricKey,
        recent: Recent,
    ) -> Result<Option<Reference>, String> {
        let reference = self.recent_unserved(key, recent)?;
        self.served(reference)
    }

    fn recent_unserved(&self, key: MetricKey, recent: Recent) -> Result<Option<Reference>, String> {
        let good = self.good(key)?;
        let same: Vec<&Point> = good
            .iter()
            .copied()
            .filter(|p| p.fingerprint == self.fingerprint)
            .collect();
        let n = usize::try_from(recent.runs()).unwrap_or(usize::MAX);
        let needed = n.min(3);
        let (pool, of) = if same.len() >= needed {
            (same, "of this configuration".to_owned())
        } else {
            let had = same.len();
            (
                good,
                format!(
                    "of the series in any configuration (this configuration has {had} of the {needed} it needs{})",
                    self.differs
                        .as_ref()
                        .map_or_else(String::new, |d| format!("; it differs from {d}"))
                ),
            )
        };
        if pool.len() < needed {
            return Ok(None);
        }
        let last: Vec<&Point> = pool[pool.len().saturating_sub(n)..].to_vec();
        let values: Vec<f64> = last.iter().map(|p| p.value).collect();
        let (value, what) = match recent {
            Recent::Median(_) => (median(&values), "median"),
            Recent::Mean(_) => (mean(&values), "mean"),
        };
        Ok(Some(Reference {
            value,
            bound: None,
            runs: last.len(),
            said: format!("the {what} of the last {} passing run(s) {of}", last.len()),
            last_good: last.last().map(|p| (*p).clone()),
            fails: None,
        }))
    }

    /// `no_regression` of `key` for a run that measured `newest` (`op`:
    /// `>=` when higher is better), over the good runs of the series (any
    /// configuration: a configuration change is what it is there to
    /// catch). It fails in two ways:
    ///
    /// - the series with `newest` shows a change for the worse (over
    ///   [`LEAST_CHANGE`]) whose new level `newest` is on: a step too
    ///   small for one run to show, seen once three runs are on it;
    /// - `newest` is beyond the level's one-sided 99% prediction bound
    ///   (and [`LEAST_CHANGE`] of it): the level being the mean of the runs
    ///   since the last change (before the change for the worse, if any).
    ///
    /// `Ok(None)` while fewer than [`LEAST_FOR_REGRESSION`] good runs exist.
    pub fn regression(
        &self,
        key: MetricKey,
        op: Op,
        newest: Option<f64>,
    ) -> Result<Option<Reference>, String> {
        let reference = self.regression_unserved(key, op, newest)?;
        self.served(reference)
    }

    fn regression_unserved(
        &self,
        key: MetricKey,
        op: Op,
        newest: Option<f64>,
    ) -> Result<Option<Reference>, String> {
        let good = self.good(key)?;
        if good.len() < LEAST_FOR_REGRESSION {
            return Ok(None);
        }
        let mut values: Vec<f64> = good.iter().map(|p| p.value).collect();
        let higher_is_better = matches!(op, Op::Ge | Op::Gt);
        let worse = |relative: f64| {
            if higher_is_better {
                relative < -LEAST_CHANGE
            } else {
                relative > LEAST_CHANGE
            }
        };
        let changes = newest.map_or_else(Vec::new, |v| {
            values.push(v);
            let changes = Detector::default().detect(&values);
            values.pop();
            changes
        });
        let worse_change = changes.last().filter(|c| worse(c.relative));
        // The level: the runs since the last change before this one.
        let (since, until) = match worse_change {
            Some(c) => (
                changes.iter().rev().nth(1).map_or(0, |p| p.index),
                c.index.min(values.len()),
            ),
            None => (
                changes.last().map_or(0, |c| c.index.min(values.len())),
                values.len(),
            ),
        };
        let since = since.min(until.saturating_sub(LEAST_FOR_REGRESSION));
        let level = &values[since..until];
        let n = level.len();
        let m = mean(level);
        #[expect(clippy::cast_precision_loss, reason = "a count of runs")]
        let nf = n as f64;
        let sd = (level.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (nf - 1.0).max(1.0)).sqrt();
        let margin =
            (t_quantile(nf - 1.0) * sd * (1.0 + 1.0 / nf).sqrt()).max(LEAST_CHANGE * m.abs());
        let bound = if higher_is_better {
            m - margin
        } else {
            m + margin
        };
        let run = |i: usize| {
            good.get(i)
                .map_or_else(|| "this run".to_owned(), |p| format!("run {}", p.run_uid))
        };
        let fails = worse_change.map(|c| {
            format!(
                "the series changed for the worse from {} on: level {} → {} ({:+.1}%, p = {}), and this run is on the new level",
                run(c.index),
                short(c.mean_before),
                short(c.mean_after),
                100.0 * c.relative,
                crate::history::changepoint::format_p(c.p_value)
            )
        });
        Ok(Some(Reference {
            value: m,
            bound: Some(bound),
            runs: n,
            said: format!(
                "the level of {n} passing run(s) from {} on (noise ±{:.1}%; 99% prediction bound, at least {:.0}% off it):",
                run(since),
                if m == 0.0 { 0.0 } else { 100.0 * sd / m.abs() },
                LEAST_CHANGE * 100.0
            ),
            last_good: good.get(until.saturating_sub(1)).map(|p| (*p).clone()),
            fails,
        }))
    }
}

/// The change of served model since `previous`, in words, or `None`
/// where the server serves what it served then. Never "too little
/// history": the history has runs of this gate, and a server that
/// reports another id (or a model path renamed) must not start a series
/// of its own unseen — the id is the server's to choose.
fn served_change(
    previous: &Point,
    model: &ModelIdentity<'_>,
    series: &SeriesKey,
) -> Option<String> {
    let now = model.served_kept();
    // A server that said nothing (its discovery failed), now or then, is
    // no change of id.
    let unknown = now.is_empty() || previous.served_model.is_empty();
    (!unknown && previous.served_model != now).then(|| {
        format!(
            "the server serves model {now:?} where this machine's run before of this gate on {} (run {}, {}) served {:?}: a configuration change, which fails this run (its figures are kept, not counted); {}",
            series.hardware,
            previous.run_uid,
            crate::units::format_unix(previous.finished_unix),
            previous.served_model,
            match model.pinned {
                Some(pinned) => format!(
                    "the series is the model this suite pins, {pinned:?}, and the next run is compared with it as before"
                ),
                None => format!(
                    "the next run starts {now:?}'s own series — pin the model the suite means with `target.model`, so that its series is the suite's to choose, not the server's"
                ),
            }
        )
    })
}

/// A figure in a sentence, unit-less (the threshold's line says it).
fn short(v: f64) -> String {
    format!("{v:.4}")
}

fn mean(values: &[f64]) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a count of runs")]
    let n = values.len().max(1) as f64;
    values.iter().sum::<f64>() / n
}

/// The median of `values` (NaN for none).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => f64::midpoint(sorted[n / 2 - 1], sorted[n / 2]),
    }
}

/// Student's t quantile at 0.99 for `df` degrees of freedom: the
/// Cornish–Fisher expansion of the normal's to its third term, within 1%
/// of the table from 4 degrees of freedom on (`no_regression` has at least
/// [`LEAST_FOR_REGRESSION`] runs: 4 or more).
fn t_quantile(df: f64) -> f64 {
    let z = QUANTILE_Z;
    let df = df.max(1.0);
    z + (z.powi(3) + z) / (4.0 * df)
        + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * df.powi(2))
        + (3.0 * z.powi(7) + 19.0 * z.powi(5) + 17.0 * z.powi(3) - 15.0 * z) / (384.0 * df.powi(3))
}

#[cfg(test)]
mod tests;
