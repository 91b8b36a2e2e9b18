//! The run history: every finished run's figures, one row per (run, suite,
//! gate, figure), kept in a database so that a series of nights can be
//! read back, searched for changes (`changepoint/`) and plotted. The
//! default store is a SQLite file beside the runs
//! (`<out>/history.sqlite`); `--history` or `SERVEGATE_HISTORY` names
//! another file, or `off`.
//!
//! Here: where the history is ([`Location`]), what a run becomes in it
//! (`rows.rs`) and the reads the commands make ([`History`]); `schema.rs`:
//! the tables and their migrations, the same SQL for every store;
//! `sqlite.rs` and `postgres/`: the two stores, behind [`Store`].
//!
//! The schema is documented in `docs/src/history.md` for people who point
//! a dashboard (Grafana reads SQLite) at it without servegate.

use std::path::{Path, PathBuf};

use crate::record::RunRecord;

pub mod changepoint;
pub mod gate;
pub mod import;
mod postgres;
mod rows;
mod schema;
mod series;
mod sqlite;
#[cfg(test)]
mod tests;
pub mod trend;

pub use postgres::PostgresUrl;
pub use rows::*;
pub use schema::VERSION;
pub use series::*;

/// The variable naming the history: a file, or `off`.
pub const HISTORY_ENV: &str = "SERVEGATE_HISTORY";

/// The file of the default history, in servegate's output directory.
pub(crate) const DEFAULT_FILE: &str = "history.sqlite";

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
    /// A PostgreSQL history, named to a servegate built without its store.
    #[error(
        "the history at {at} is a PostgreSQL database, but this servegate was built without the `postgres` feature (on by default): build it with `--features postgres`, or name a SQLite history (--history FILE, {HISTORY_ENV})"
    )]
    NotBuilt {
        /// The history, its password hidden.
        at: String,
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
            Location::Postgres(url) => postgres::open(url)?,
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
pub(crate) fn record_run(location: &Location, record: &RunRecord) {
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
