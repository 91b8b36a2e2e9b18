//! The history's reads: a series' key, its points, its summary and the
//! changes found in it.

use super::{ModelIdentity, PointRow, RunRow, changepoint, rows::stored};
use crate::suite::metric::MetricKey;

/// A run written into the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The run's id in the history.
    pub run_uid: String,
    /// Figures written.
    pub points: usize,
    /// The run was there already (recorded, or imported before): nothing
    /// was written.
    pub already: bool,
}

impl Recorded {
    pub(super) fn of(run: RunRow, points: &[PointRow], inserted: bool) -> Self {
        Self {
            run_uid: run.run_uid,
            points: if inserted { points.len() } else { 0 },
            already: !inserted,
        }
    }
}

/// Which series: a suite's gate's figure, on one model and hardware.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct SeriesKey {
    /// The suite's label.
    pub suite: String,
    /// The gate.
    pub gate: String,
    /// The figure (`ttft.p99`).
    pub key: String,
    /// The model: the suite's pinned one, else the one served
    /// ([`ModelIdentity::series_model`]).
    pub model: String,
    /// The hardware ([`RunRow::hardware`]).
    pub hardware: String,
}

impl SeriesKey {
    /// The series of a suite's gate (figure to be named) as the history
    /// stores it: names cut and escaped as [`rows`] keeps them, so a
    /// reader finds what a run wrote whatever its names; `hardware` as
    /// [`run_hardware`] made it.
    pub(crate) fn of_gate(
        suite: &str,
        gate: &str,
        model: &ModelIdentity<'_>,
        hardware: &str,
    ) -> SeriesKey {
        SeriesKey {
            suite: stored(suite),
            gate: stored(gate),
            key: String::new(),
            model: model.series_model(),
            hardware: hardware.to_owned(),
        }
    }

    /// The same series' figure `key`.
    #[must_use]
    pub fn figure(&self, key: MetricKey) -> SeriesKey {
        SeriesKey {
            key: key.to_string(),
            ..self.clone()
        }
    }
}

/// A series in a listing.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SeriesSummary {
    /// Which.
    #[serde(flatten)]
    pub series: SeriesKey,
    /// Points in it.
    pub points: u64,
    /// When its newest point's run ended, seconds since the epoch.
    pub last_unix: i64,
    /// Its newest value.
    pub last_value: f64,
    /// The unit of its values.
    pub unit: String,
}

/// One point of a series, read back.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Point {
    /// The run's id in the history (`<node>/<run id>`).
    pub run_uid: String,
    /// The machine.
    pub node: String,
    /// When the run ended, seconds since the epoch.
    pub finished_unix: i64,
    /// The value.
    pub value: f64,
    /// Its unit.
    pub unit: String,
    /// The suite's commit.
    pub suite_commit: Option<String>,
    /// The configuration measured.
    pub fingerprint: String,
    /// The model the server said it served (empty: it said none).
    pub served_model: String,
    /// The server's version.
    pub server_version: Option<String>,
    /// servegate's version.
    pub servegate: String,
    /// Whether the gate passed.
    pub gate_passed: bool,
    /// Whether the client set the figure (never compared).
    pub client_limited: bool,
}

impl Point {
    /// Whether it counts toward its series' level: its gate passed and
    /// its client did not set it (such a figure is kept, never compared).
    pub fn counted(&self) -> bool {
        self.gate_passed && !self.client_limited
    }
}

/// A change of level in a series, at the run that starts it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SeriesChange {
    /// Where the new level starts: the 0-based index of its first run in
    /// the points the change was found in (the series', oldest first).
    pub index: usize,
    /// The first run on the new level.
    pub run_uid: String,
    /// When it ended, seconds since the epoch.
    pub finished_unix: i64,
    /// Its suite commit.
    pub suite_commit: Option<String>,
    /// The level before and after (means of the segments).
    pub mean_before: f64,
    /// The level after.
    pub mean_after: f64,
    /// `(after - before) / before`.
    pub relative: f64,
    /// Welch's p-value between the two levels: how sure, comparable
    /// between changes (`changepoint/`).
    pub p_value: f64,
    /// The permutation test's, which decided it is a change (at least
    /// 1/200, its floor).
    pub p_permutation: f64,
    /// The configuration of the run, where it differs from the run's before.
    pub configuration: Option<String>,
    /// How it differs, by name (`dsa_decode_backend: flashmla → trtllm`),
    /// where the history holds both configurations whole
    /// ([`History::differences`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configuration_differs: Option<String>,
}

/// The changes of level in a series' points (those the client did not
/// set), oldest first.
pub fn changes(points: &[Point]) -> Vec<SeriesChange> {
    let kept: Vec<(usize, &Point)> = points
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.client_limited)
        .collect();
    let values: Vec<f64> = kept.iter().map(|(_, p)| p.value).collect();
    changepoint::Detector::default()
        .detect(&values)
        .into_iter()
        .filter_map(|c| {
            let &(index, at) = kept.get(c.index)?;
            let before = c
                .index
                .checked_sub(1)
                .and_then(|i| kept.get(i))
                .map(|(_, p)| p);
            Some(SeriesChange {
                index,
                run_uid: at.run_uid.clone(),
                finished_unix: at.finished_unix,
                suite_commit: at.suite_commit.clone(),
                mean_before: c.mean_before,
                mean_after: c.mean_after,
                relative: c.relative,
                p_value: c.p_value,
                p_permutation: c.p_permutation,
                configuration: before
                    .filter(|b| b.fingerprint != at.fingerprint)
                    .map(|_| at.fingerprint.clone()),
                configuration_differs: None,
            })
        })
        .collect()
}

/// Which series a listing shows: parts of their names (empty: any).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Part of the suite's label.
    pub suite: String,
    /// Part of the gate's name.
    pub gate: String,
    /// Part of the figure's name.
    pub key: String,
}

impl Filter {
    /// Whether `series` is one of those shown.
    pub fn matches(&self, series: &SeriesKey) -> bool {
        series.suite.contains(&self.suite)
            && series.gate.contains(&self.gate)
            && series.key.contains(&self.key)
    }
}
