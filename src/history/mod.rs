//! The run history: every finished run's figures, one row per (run, suite,
//! gate, figure), kept in a database so that a series of nights can be
//! read back, searched for changes (`changepoint.rs`) and plotted. The
//! default store is a SQLite file beside the runs
//! (`<out>/history.sqlite`); `--history` or `SERVEGATE_HISTORY` names
//! another file, or `off`.
//!
//! Here: where the history is ([`Location`]), what a run becomes in it
//! ([`rows`]) and the reads the commands make ([`History`]); `schema.rs`:
//! the tables and their migrations, the same SQL for every store;
//! `sqlite.rs` and `postgres.rs`: the two stores, behind [`Store`].
//!
//! The schema is documented in `docs/src/history.md` for people who point
//! a dashboard (Grafana reads SQLite) at it without servegate.

use std::path::{Path, PathBuf};

use crate::record::{RunRecord, TrialOutcome};
use crate::suite::metric::MetricKey;

pub mod changepoint;
pub mod gate;
pub mod import;
mod postgres;
mod schema;
mod sqlite;
pub mod trend;

pub use postgres::PostgresUrl;
pub use schema::VERSION;

/// The variable naming the history: a file, or `off`.
pub const HISTORY_ENV: &str = "SERVEGATE_HISTORY";

/// The file of the default history, in servegate's output directory.
pub const DEFAULT_FILE: &str = "history.sqlite";

/// Where the history is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database: its URL (`postgres://user@host/db`), the
    /// password from it or from `PGPASSWORD`, never shown.
    Postgres(PostgresUrl),
    /// No history: runs are not recorded, and nothing can be read.
    Off,
}

impl Location {
    /// `explicit` (`--history`), else `SERVEGATE_HISTORY`, else
    /// `<out>/history.sqlite`. `off` (or `none`) turns it off; a
    /// `postgres://` or `postgresql://` URL names a PostgreSQL database.
    pub fn resolve(explicit: Option<&str>, out: &Path) -> Location {
        let named = explicit
            .map(str::to_owned)
            .or_else(|| std::env::var(HISTORY_ENV).ok())
            .filter(|v| !v.trim().is_empty());
        match named.as_deref().map(str::trim) {
            None => Location::Sqlite(out.join(DEFAULT_FILE)),
            Some("off" | "none") => Location::Off,
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Location::Postgres(PostgresUrl::new(url))
            }
            Some(path) => Location::Sqlite(crate::suite::absolute(Path::new(
                path.strip_prefix("sqlite://").unwrap_or(path),
            ))),
        }
    }

    /// As messages name it.
    pub fn describe(&self) -> String {
        match self {
            Location::Sqlite(path) => path.display().to_string(),
            Location::Postgres(url) => url.to_string(),
            Location::Off => "no history (off)".to_owned(),
        }
    }
}

/// Why the history could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The store answered with an error.
    #[error("the history at {at}: {source}")]
    Store {
        /// The history, as [`Location::describe`] names it.
        at: String,
        /// What went wrong.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Its directory could not be made.
    #[error("the history's directory {}: {source}", .path.display())]
    Directory {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// Written by a newer servegate: this one cannot know its tables.
    #[error(
        "the history at {at} has schema version {found}, newer than this servegate's ({VERSION}): upgrade servegate, or name another history (--history, {HISTORY_ENV})"
    )]
    Newer {
        /// The history.
        at: String,
        /// Its version.
        found: i64,
    },
    /// The history is off.
    #[error("the history is off ({HISTORY_ENV}=off or --history off): nothing to read")]
    Off,
    /// Another process held the file's lock longer than servegate waits.
    #[error(
        "the history at {at} stayed locked by another process for {waited_s} s (a run committing its figures takes well under a second; an open `sqlite3` session or a copy in progress may hold it): {what} gave up"
    )]
    Locked {
        /// The history.
        at: String,
        /// How long servegate waited, seconds.
        waited_s: u64,
        /// What waited: a read, or a write.
        what: &'static str,
    },
}

/// A run as the history keeps it: one row.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    /// Unique across runners: `<node>/<run id>`.
    pub run_uid: String,
    /// The run's directory name (`<secs>-<pid>`).
    pub run_id: String,
    /// The machine that ran it (`SERVEGATE_NODE`, a GitHub runner's name,
    /// else the host name).
    pub node: String,
    /// Seconds since the Unix epoch at its start.
    pub started_unix: i64,
    /// Seconds since the Unix epoch at its end.
    pub finished_unix: i64,
    /// servegate's version.
    pub servegate: String,
    /// The GPUs it ran on, as `nvidia-smi` lists them, one per line.
    pub gpus: String,
    /// The GPUs in short (`8 x NVIDIA H200`), or `no GPU`: figures of
    /// other hardware are another series.
    pub hardware: String,
    /// `run` (recorded by the run), or `import` (`servegate history
    /// import`).
    pub source: String,
    /// The whole configuration of each fingerprint its points have, where
    /// known: the fingerprint and the configuration as JSON.
    pub configs: Vec<(String, String)>,
}

/// A figure's name as the history keeps it: a metric and its statistic
/// (`ttft`, `p99`), or a name of servegate's own benches
/// (`cpu_per_token`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FigureKey {
    /// The metric.
    pub metric: String,
    /// Its statistic, if it has one.
    pub stat: Option<String>,
}

impl From<MetricKey> for FigureKey {
    fn from(key: MetricKey) -> Self {
        FigureKey {
            metric: key.metric.name().to_owned(),
            stat: key.stat.map(|s| s.name().to_owned()),
        }
    }
}

impl std::fmt::Display for FigureKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.stat {
            Some(stat) => write!(f, "{}.{stat}", self.metric),
            None => f.write_str(&self.metric),
        }
    }
}

/// One figure of a run as the history keeps it: one row.
#[derive(Debug, Clone, PartialEq)]
pub struct PointRow {
    /// The suite's label (`sglang`, `sglang[tp8]`).
    pub suite: String,
    /// The variant, if the suite has variants.
    pub variant: Option<String>,
    /// The gate (`decode`, or a sweep's level: `sweep::concurrency_8`).
    pub gate: String,
    /// The figure (`ttft.p99`).
    pub key: FigureKey,
    /// Its value, in `unit`; the mean over repeats.
    pub value: f64,
    /// The unit of `value` (`s`, `tok/s`, …; empty for a count).
    pub unit: String,
    /// Repeats behind the value.
    pub repeats: u32,
    /// The configuration measured: API, served model, server version,
    /// the configuration the server reports.
    pub fingerprint: String,
    /// The model its series is keyed by ([`ModelIdentity::series_model`]).
    pub model: String,
    /// The model the server said it serves; empty where it said none.
    pub served_model: String,
    /// Whether `model` is the suite's pinned `target.model` (else it is
    /// the served id).
    pub model_pinned: bool,
    /// The server's version, where it says.
    pub server_version: Option<String>,
    /// The suite file's git commit (`+dirty` with local changes).
    pub suite_commit: Option<String>,
    /// Whether the gate passed.
    pub gate_passed: bool,
    /// Whether the client, not the server, set the gate's figures (its
    /// self-check said `LIMITED`): such a figure is kept, never compared.
    pub client_limited: bool,
    /// The gate's load, in words.
    pub load: String,
}

/// What the history keeps of a run: its row and every figure's. A record
/// is input (an imported file, or a server's words in a run's own: its
/// model id, its version): every string is scrubbed of the secrets known
/// here before it is kept, and bounded ([`kept`]), so one point holds at
/// most [`POINT_CHARS`] characters of text whatever the record says.
pub fn rows(record: &RunRecord, source: &str) -> (RunRow, Vec<PointRow>) {
    let node = if record.node.is_empty() {
        "unknown".to_owned()
    } else {
        stored(&record.node)
    };
    let run_id = stored(&record.run_id);
    let gpus = kept_gpus(record.gpus.as_deref().unwrap_or_default());
    let mut run = RunRow {
        run_uid: format!("{node}/{run_id}"),
        run_id,
        node,
        started_unix: i64::try_from(record.started_unix).unwrap_or(i64::MAX),
        finished_unix: i64::try_from(record.finished_unix).unwrap_or(i64::MAX),
        servegate: kept(&record.servegate, SHORT_CHARS),
        hardware: kept(
            &record.hardware.clone().unwrap_or_else(|| hardware(&gpus)),
            SHORT_CHARS,
        ),
        gpus: gpus.join("\n"),
        source: source.to_owned(),
        configs: Vec::new(),
    };
    let mut points = Vec::new();
    for suite in &record.suites {
        let identity = ModelIdentity::of(suite);
        // Kept once a suite: every point of it holds the same.
        let label = stored(&suite.suite);
        let variant = suite.variant.as_deref().map(stored);
        let fingerprint = kept(&suite.fingerprint, LONG_CHARS);
        if !suite.config.is_empty() && !run.configs.iter().any(|(f, _)| *f == fingerprint) {
            let config = crate::load::fingerprint::kept(&suite.config);
            if let Ok(json) = serde_json::to_string(&config) {
                run.configs.push((fingerprint.clone(), json));
            }
        }
        let (model, served_model) = (identity.series_model(), identity.served_kept());
        let server_version = suite
            .server_version
            .as_deref()
            .map(|v| kept(v, SHORT_CHARS));
        let suite_commit = suite.suite_commit.as_deref().map(|c| kept(c, SHORT_CHARS));
        for gate in &suite.gates {
            let name = gate_name(
                &gate.gate,
                gate.sweep
                    .as_ref()
                    .map(|s| (s.of.sweep.as_str(), s.of.level.as_str())),
            );
            let trial = format!("{}::performance::{name}", suite.suite);
            let gate_passed = record
                .trials
                .iter()
                .find(|t| t.name == trial)
                .is_some_and(|t| t.outcome == TrialOutcome::Passed);
            let (gate_stored, load) = (stored(&name), kept(&gate.load, LONG_CHARS));
            for (key, value) in gate.figures.iter() {
                if !value.is_finite() {
                    continue;
                }
                points.push(PointRow {
                    suite: label.clone(),
                    variant: variant.clone(),
                    gate: gate_stored.clone(),
                    key: key.into(),
                    value: *value,
                    unit: key.metric.unit().to_owned(),
                    repeats: gate.repeats,
                    fingerprint: fingerprint.clone(),
                    model: model.clone(),
                    served_model: served_model.clone(),
                    model_pinned: identity.pinned.is_some(),
                    server_version: server_version.clone(),
                    suite_commit: suite_commit.clone(),
                    gate_passed,
                    // Only the figures the client moved: a gate that passed
                    // with one (its verdict certain) still builds the
                    // history of the others.
                    client_limited: gate.client.as_ref().is_some_and(|c| c.limits(key)),
                    load: load.clone(),
                });
            }
        }
    }
    (run, points)
}

/// The most characters a name keeps (a suite, gate, variant, node, run).
const NAME_CHARS: usize = 100;

/// The most characters a short text keeps whole (a model id, a version,
/// a commit, a GPU's line, the hardware), [`kept`]'s mark aside.
const SHORT_CHARS: usize = 200;

/// The most characters a long text keeps whole (the configuration's
/// fingerprint, a load in words), [`kept`]'s mark aside.
const LONG_CHARS: usize = 2000;

/// The most GPU lines a run keeps.
const GPU_LINES: usize = 64;

/// What [`kept`] adds to a text it cut: ` … (N chars, sha256 <16 hex>)`.
const CUT_MARK_CHARS: usize = 50;

/// The most characters of text one point of the history holds: its names,
/// its figure's, two model ids, a version and a commit, the fingerprint
/// and the load, each at its bound.
pub const POINT_CHARS: usize =
    3 * NAME_CHARS + 100 + 4 * (SHORT_CHARS + CUT_MARK_CHARS) + 2 * (LONG_CHARS + CUT_MARK_CHARS);

/// A text of a record as the history keeps it: scrubbed of every known
/// secret, its acting characters escaped, and at most `max` characters of
/// it — a longer one cut and marked with its length and the start of its
/// SHA-256, so two texts that differ after the cut stay two (a
/// configuration compared by its fingerprint is still compared whole).
fn kept(text: &str, max: usize) -> String {
    let clean = crate::text::printable(&crate::secrets::scrub(text)).into_owned();
    let (excerpt, whole) = crate::secrets::cut_scrubbed(&clean, max);
    match whole {
        None => excerpt,
        Some(chars) => format!(
            "{excerpt} … ({chars} chars, sha256 {})",
            &crate::text::sha256_hex(clean.as_bytes())[..16]
        ),
    }
}

/// The GPU lines a run keeps: at most [`GPU_LINES`], each [`kept`].
fn kept_gpus(gpus: &[String]) -> Vec<String> {
    gpus.iter()
        .take(GPU_LINES)
        .map(|l| kept(l, SHORT_CHARS))
        .collect()
}

/// The hardware of a run on these GPUs (`nvidia-smi`'s lines) as the
/// history keeps it ([`RunRow::hardware`]): what a reader of a series
/// names it by.
pub fn run_hardware(gpus: &[String]) -> String {
    kept(&hardware(&kept_gpus(gpus)), SHORT_CHARS)
}

/// Which model a suite's figures are of: the one the suite pins (its
/// `target.model`, which its requests name), else the one the server says
/// it serves.
#[derive(Debug, Clone, Copy)]
pub struct ModelIdentity<'a> {
    /// The suite's `target.model`, where it names one.
    pub pinned: Option<&'a str>,
    /// What the server said it serves, else the model requests named.
    pub served: &'a str,
    /// Whether the server said (`false`: discovery found no id, and
    /// `served` is the one requests named).
    pub reported: bool,
}

impl<'a> ModelIdentity<'a> {
    /// A suite record's.
    pub fn of(suite: &'a crate::record::SuiteRecord) -> Self {
        ModelIdentity {
            pinned: suite.pinned_model.as_deref(),
            served: suite.model.as_deref().unwrap_or_default(),
            reported: !suite.model_unreported,
        }
    }

    /// The model a series is keyed by, as the history keeps it: what the
    /// suite asked for where it pins one, so that a server cannot choose
    /// its series by the id it reports.
    pub fn series_model(&self) -> String {
        kept(self.pinned.unwrap_or(self.served), SHORT_CHARS)
    }

    /// The served id as the history keeps it; empty where the server
    /// reported none.
    pub fn served_kept(&self) -> String {
        if self.reported {
            kept(self.served, SHORT_CHARS)
        } else {
            String::new()
        }
    }
}

/// A name a record brings as the history keeps it. A record is input (an
/// imported file can say anything): its names are kept as they can be
/// shown, scrubbed, every acting character escaped, at most
/// [`NAME_CHARS`] characters (the names a suite file allows are unchanged
/// by it).
fn stored(name: &str) -> String {
    crate::text::printable(&crate::secrets::scrub(name))
        .chars()
        .take(NAME_CHARS)
        .collect()
}

/// A gate's name in the history: its own, or `<sweep>::<level>`, as the
/// trial's name writes it.
pub fn gate_name(gate: &str, sweep: Option<(&str, &str)>) -> String {
    sweep.map_or_else(|| gate.to_owned(), |(s, l)| format!("{s}::{l}"))
}

/// The GPUs in short: `8 x NVIDIA H200`, `1 x NVIDIA A10G + 1 x NVIDIA L4`,
/// or `no GPU`. `nvidia-smi`'s lines are `index, name, memory, driver`.
pub fn hardware(gpus: &[String]) -> String {
    let mut counted: Vec<(String, usize)> = Vec::new();
    for line in gpus {
        let name = line.split(',').nth(1).unwrap_or(line).trim().to_owned();
        match counted.iter_mut().find(|(n, _)| *n == name) {
            Some((_, count)) => *count += 1,
            None => counted.push((name, 1)),
        }
    }
    if counted.is_empty() {
        return "no GPU".to_owned();
    }
    counted
        .iter()
        .map(|(name, count)| format!("{count} x {name}"))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The machine a run is recorded as having run on: `SERVEGATE_NODE`,
/// else a GitHub runner's name (`RUNNER_NAME`), else the host name.
pub fn node_name() -> String {
    ["SERVEGATE_NODE", "RUNNER_NAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|n| !n.trim().is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .or_else(|| std::env::var("HOSTNAME").ok())
        })
        .map(|n| crate::text::printable(n.trim()).chars().take(100).collect())
        .filter(|n: &String| !n.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

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
    fn of(run: RunRow, points: &[PointRow], inserted: bool) -> Self {
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
    pub fn of_gate(
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
    /// between changes (`changepoint.rs`).
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

/// What a history's store does: the same for SQLite and PostgreSQL.
trait Store {
    /// Writes runs and their points in one transaction, all or none; for
    /// each run `false` when it was there already (then nothing of it is
    /// written).
    fn insert(&mut self, runs: &[(&RunRow, &[PointRow])]) -> Result<Vec<bool>, HistoryError>;
    /// Every series with its number of points.
    fn groups(&mut self) -> Result<Vec<(SeriesKey, u64)>, HistoryError>;
    /// A series' points, oldest first, or only its newest.
    fn select(&mut self, series: &SeriesKey, newest: bool) -> Result<Vec<Point>, HistoryError>;
    /// The newest point of `node` of a suite's gate's figure on its
    /// hardware: of the series' model where `pinned`, else of any model
    /// keyed by the server's id (no pinned model).
    fn newest_of_node(
        &mut self,
        series: &SeriesKey,
        pinned: bool,
        node: &str,
    ) -> Result<Option<Point>, HistoryError>;
    /// The configuration kept for a fingerprint, as JSON.
    fn config(&mut self, fingerprint: &str) -> Result<Option<String>, HistoryError>;
}

/// An open history.
pub struct History {
    store: Box<dyn Store>,
}

impl History {
    /// Opens the history at `location`, creating it (a SQLite file and its
    /// directory) or bringing its tables to this version's schema.
    pub fn open(location: &Location) -> Result<History, HistoryError> {
        let store: Box<dyn Store> = match location {
            Location::Sqlite(path) => Box::new(sqlite::Sqlite::open(path)?),
            Location::Postgres(url) => Box::new(postgres::Postgres::open(url)?),
            Location::Off => return Err(HistoryError::Off),
        };
        Ok(History { store })
    }

    /// The whole configuration a fingerprint digests, where a run of it
    /// recorded one (runs before servegate kept them did not); a stored
    /// one that does not read is none.
    pub fn config(
        &mut self,
        fingerprint: &str,
    ) -> Result<Option<crate::load::fingerprint::Config>, HistoryError> {
        Ok(self
            .store
            .config(fingerprint)?
            .and_then(|json| serde_json::from_str(&json).ok())
            .map(|c| crate::load::fingerprint::kept(&c)))
    }

    /// How configuration `to` differs from `from` by name, where the
    /// history holds both whole; `None` where it does not (a run recorded
    /// before servegate kept configurations, or a server that reports
    /// none).
    pub fn differences(&mut self, from: &str, to: &str) -> Result<Option<String>, HistoryError> {
        let (Some(a), Some(b)) = (self.config(from)?, self.config(to)?) else {
            return Ok(None);
        };
        Ok(Some(crate::load::fingerprint::differences_line(&a, &b, 8)))
    }

    /// Writes a run's figures, all or none, once: a run already there
    /// (its node and id) is left as it is.
    pub fn record(&mut self, record: &RunRecord, source: &str) -> Result<Recorded, HistoryError> {
        let (run, points) = rows(record, source);
        let inserted = self.store.insert(&[(&run, &points)])?;
        Ok(Recorded::of(run, &points, inserted.first() == Some(&true)))
    }

    /// Records runs in one transaction, all or none (an import's: one
    /// commit, where a commit each cost four `fsync`s a run); what became
    /// of each, in order.
    pub fn record_all(
        &mut self,
        records: &[&RunRecord],
        source: &str,
    ) -> Result<Vec<Recorded>, HistoryError> {
        let rows: Vec<(RunRow, Vec<PointRow>)> = records.iter().map(|r| rows(r, source)).collect();
        let borrowed: Vec<(&RunRow, &[PointRow])> = rows
            .iter()
            .map(|(run, points)| (run, points.as_slice()))
            .collect();
        let inserted = self.store.insert(&borrowed)?;
        Ok(rows
            .into_iter()
            .zip(inserted)
            .map(|((run, points), inserted)| Recorded::of(run, &points, inserted))
            .collect())
    }

    /// Writes a run's rows as they are, all or none, once: `false` when
    /// the run was there already (then nothing is written). For figures
    /// that are no suite's (`servegate bench-client`'s).
    pub fn write(&mut self, run: &RunRow, points: &[PointRow]) -> Result<bool, HistoryError> {
        let inserted = self.store.insert(&[(run, points)])?;
        Ok(inserted.first().copied().unwrap_or(false))
    }

    /// Every series, with its size and newest point.
    pub fn series(&mut self, filter: &Filter) -> Result<Vec<SeriesSummary>, HistoryError> {
        let mut groups = self.store.groups()?;
        groups.retain(|(s, _)| filter.matches(s));
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = Vec::with_capacity(groups.len());
        for (series, points) in groups {
            if let Some(newest) = self.store.select(&series, true)?.pop() {
                out.push(SeriesSummary {
                    points,
                    last_unix: newest.finished_unix,
                    last_value: newest.value,
                    unit: newest.unit,
                    series,
                });
            }
        }
        Ok(out)
    }

    /// The run before this one, on this machine (`node`), of the series'
    /// suite, gate, figure and hardware that a served id is compared with
    /// ([`ModelIdentity`]): with a pinned model, the series' newest point;
    /// without, the newest of any served model (the server's id is then
    /// the key, and a new id would otherwise start a new series unseen).
    /// Per machine: runners of one series may serve one model under ids of
    /// their own (its path on each).
    pub fn previous(
        &mut self,
        series: &SeriesKey,
        pinned: bool,
        node: &str,
    ) -> Result<Option<Point>, HistoryError> {
        self.store.newest_of_node(series, pinned, node)
    }

    /// The newest `last` points of a series (all: `usize::MAX`), oldest
    /// first; values that are not finite left out.
    pub fn points(&mut self, series: &SeriesKey, last: usize) -> Result<Vec<Point>, HistoryError> {
        let mut points = self.store.select(series, false)?;
        // A run never records a value that is not finite; a history edited
        // by hand, or another writer's, can hold one (SQLite's 9e999,
        // PostgreSQL's NaN): it is no point of any series.
        points.retain(|p| p.value.is_finite());
        let skip = points.len().saturating_sub(last);
        points.drain(..skip);
        Ok(points)
    }
}

/// Records a finished run in the history `location` names, saying where
/// on stderr; a history that cannot be written is a warning (the run's
/// verdict stands, its record is written already).
pub fn record_run(location: &Location, record: &RunRecord) {
    if *location == Location::Off || record.suites.iter().all(|s| s.gates.is_empty()) {
        return;
    }
    match History::open(location).and_then(|mut h| h.record(record, "run")) {
        Ok(r) => eprintln!(
            "servegate: history: {} figure(s) of run {} recorded in {}",
            r.points,
            r.run_uid,
            location.describe()
        ),
        Err(e) => eprintln!("warning: this run's figures are not in the history: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{Location, hardware};
    use std::path::Path;

    #[test]
    fn hardware_counts_gpus_by_name() {
        let lines = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(hardware(&[]), "no GPU");
        assert_eq!(
            hardware(&lines(&[
                "0, NVIDIA H200, 143771 MiB, 550.54",
                "1, NVIDIA H200, 143771 MiB, 550.54"
            ])),
            "2 x NVIDIA H200"
        );
        assert_eq!(
            hardware(&lines(&[
                "0, NVIDIA L4, 1 MiB, 1",
                "1, NVIDIA A10G, 1 MiB, 1"
            ])),
            "1 x NVIDIA L4 + 1 x NVIDIA A10G"
        );
    }

    #[test]
    fn only_the_figures_the_client_moved_are_not_counted() {
        // A passing gate whose ITL the client moved past its tolerance (its
        // verdict certain): that figure is kept, not counted; its decode
        // rate counts.
        let run: crate::record::RunRecord = serde_json::from_value(serde_json::json!({
            "schema": "servegate.run/2", "run_id": "1-1", "node": "n",
            "finished_unix": 1, "complete": true,
            "trials": [{ "name": "s::performance::g", "suite": "s", "stage": "performance",
                "item": "g", "outcome": "passed", "duration_s": 1.0, "file": "s.yaml", "line": 1 }],
            "suites": [{ "suite": "s", "fingerprint": "f", "target": "t",
                "gates": [{ "gate": "g", "load": "x", "repeats": 1,
                    "figures": { "itl.p99": 0.012, "decode_tok_s.mean": 80.0 },
                    "client": { "chosen": "auto", "threads": [],
                        "figures": [{ "figure": "itl.p99", "value": 0.012, "bound": 0.003,
                            "tolerance": 0.000_24, "time": true, "low": 0.009, "high": 0.012 }],
                        "limited": "itl.p99 12.00ms could be off by up to 3.00ms (240us allowed)" } }] }]
        }))
        .unwrap();
        let (_, points) = super::rows(&run, "run");
        let counted = |key: &str| {
            points
                .iter()
                .find(|p| p.key.to_string() == key)
                .map(|p| p.gate_passed && !p.client_limited)
                .unwrap()
        };
        assert!(!counted("itl.p99"));
        assert!(counted("decode_tok_s.mean"));
    }

    #[test]
    fn the_history_is_named_or_beside_the_runs() {
        let out = Path::new("/o");
        assert_eq!(
            Location::resolve(Some("off"), out),
            Location::Off,
            "`off` turns it off"
        );
        assert_eq!(
            Location::resolve(Some("sqlite:///h/x.sqlite"), out),
            Location::Sqlite("/h/x.sqlite".into())
        );
        assert_eq!(
            Location::resolve(Some("/h/y.db"), out),
            Location::Sqlite("/h/y.db".into())
        );
    }
}
