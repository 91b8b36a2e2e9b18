//! The SQLite store: one file, written by one transaction per run.
//! Writers on the same file queue behind SQLite's lock (a busy wait of up
//! to a minute, never an error while another run commits); a read waits
//! at most [`READ_WAIT`] (a gate's history read behind a stuck lock fails
//! its history thresholds, saying so, instead of holding the run), and
//! opening a file already at [`VERSION`] takes no lock. A process killed
//! mid-run leaves the file as its last commit: SQLite's rollback journal
//! undoes a transaction that never committed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior, params};

use super::schema::{self, MIGRATIONS, VERSION};
use super::{HistoryError, Point, PointRow, RunRow, SeriesKey};

/// How long a writer waits for another's transaction to end.
const BUSY: Duration = Duration::from_secs(60);
/// How long a read waits for a writer's lock: a run's commit takes well
/// under a second.
const READ_WAIT: Duration = Duration::from_secs(5);

/// An open SQLite history.
pub struct Sqlite {
    conn: Connection,
    path: PathBuf,
}

impl Sqlite {
    /// Opens (or creates) the file and brings it to [`VERSION`].
    pub fn open(path: &Path) -> Result<Sqlite, HistoryError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| HistoryError::Directory {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        // A history file is never a symbolic link: one planted at the
        // default path (a checkout's `target/servegate/history.sqlite`)
        // would have servegate create and write a database wherever it
        // points. The target itself can be named with `--history`.
        if let Ok(to) = std::fs::read_link(path) {
            return Err(HistoryError::Store {
                at: path.display().to_string(),
                source: format!(
                    "it is a symbolic link (to {}): servegate opens no history through one; name the file itself with --history or {}",
                    to.display(),
                    super::HISTORY_ENV
                )
                .into(),
            });
        }
        let flags = rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let mut store = Sqlite {
            conn: Connection::open_with_flags(path, flags).map_err(|e| store_error(path, e))?,
            path: path.to_path_buf(),
        };
        store
            .conn
            .busy_timeout(READ_WAIT)
            .map_err(|e| store_error(path, e))?;
        store
            .conn
            .pragma_update(None, "foreign_keys", true)
            .map_err(|e| store_error(path, e))?;
        // Older, newer (refused under the lock) or new: the migration.
        if store.version()? != Some(VERSION) {
            store.writing(Self::migrate)?;
        }
        Ok(store)
    }

    fn error(&self, e: rusqlite::Error) -> HistoryError {
        store_error(&self.path, e)
    }

    /// The file's schema version, read with a reader's wait; `None` where
    /// it has none yet (a new file).
    fn version(&self) -> Result<Option<i64>, HistoryError> {
        let read = self.conn.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM servegate_schema",
            [],
            |r| r.get(0),
        );
        match read {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.to_string().contains("no such table") => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    /// Runs `write` with a writer's wait for the lock ([`BUSY`]), then
    /// gives the connection back its reader's wait.
    fn writing<T>(
        &mut self,
        write: impl FnOnce(&mut Self) -> Result<T, HistoryError>,
    ) -> Result<T, HistoryError> {
        self.conn
            .busy_timeout(BUSY)
            .map_err(|e| store_error(&self.path, e))?;
        let done = write(self).map_err(|e| match e {
            HistoryError::Locked { at, .. } => HistoryError::Locked {
                at,
                waited_s: BUSY.as_secs(),
                what: "a write",
            },
            other => other,
        });
        let _ = self.conn.busy_timeout(READ_WAIT);
        done
    }

    /// Applies the migrations the file lacks, each with its version row,
    /// under the write lock (two first runs at once create it once).
    fn migrate(&mut self) -> Result<(), HistoryError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| store_error(&self.path, e))?;
        let at = |e| store_error(&self.path, e);
        tx.execute(schema::SCHEMA_TABLE, []).map_err(at)?;
        let found: i64 = tx
            .query_row(
                "SELECT COALESCE(MAX(version), 0) FROM servegate_schema",
                [],
                |r| r.get(0),
            )
            .map_err(at)?;
        if found > VERSION {
            return Err(HistoryError::Newer {
                at: self.path.display().to_string(),
                found,
            });
        }
        for (version, statements) in (1..)
            .zip(MIGRATIONS)
            .skip(usize::try_from(found).unwrap_or(0))
        {
            for statement in *statements {
                tx.execute(statement, []).map_err(at)?;
            }
            tx.execute(
                "INSERT INTO servegate_schema (version, applied_unix, servegate) VALUES ($1, $2, $3)",
                params![version, now(), env!("CARGO_PKG_VERSION")],
            )
            .map_err(at)?;
        }
        tx.commit().map_err(at)
    }

    /// Writes runs and their points in one transaction; for each run
    /// `false` when it was there already (then nothing of it is written).
    fn write_runs(&mut self, runs: &[(&RunRow, &[PointRow])]) -> Result<Vec<bool>, HistoryError> {
        let path = self.path.clone();
        let at = |e| store_error(&path, e);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(at)?;
        let mut written = Vec::with_capacity(runs.len());
        for &(run, points) in runs {
            let inserted = write_run(&tx, run, points).map_err(at)?;
            written.push(inserted);
        }
        tx.commit().map_err(at)?;
        Ok(written)
    }
}

/// Writes a run and its points in `tx`; `false` when the run was there
/// already (then nothing is written).
fn write_run(
    tx: &rusqlite::Transaction<'_>,
    run: &RunRow,
    points: &[PointRow],
) -> rusqlite::Result<bool> {
    let inserted = tx.execute(
        schema::INSERT_RUN,
        params![
            run.run_uid,
            run.run_id,
            run.node,
            run.started_unix,
            run.finished_unix,
            run.servegate,
            run.gpus,
            run.hardware,
            run.source,
            now()
        ],
    )?;
    if inserted == 0 {
        return Ok(false);
    }
    let mut insert = tx.prepare_cached(schema::INSERT_POINT)?;
    for p in points {
        insert.execute(params![
            run.run_uid,
            p.suite,
            p.variant,
            p.gate,
            p.key.metric,
            p.key.stat.as_deref().unwrap_or(""),
            p.key.to_string(),
            p.value,
            p.unit,
            i64::from(p.repeats),
            p.fingerprint,
            p.model,
            p.server_version,
            p.suite_commit,
            i64::from(p.gate_passed),
            i64::from(p.client_limited),
            p.load,
            p.served_model,
            i64::from(p.model_pinned),
        ])?;
    }
    let mut config = tx.prepare_cached(schema::INSERT_CONFIG)?;
    for (fingerprint, json) in &run.configs {
        config.execute(params![fingerprint, json])?;
    }
    Ok(true)
}

impl super::Store for Sqlite {
    fn insert(&mut self, runs: &[(&RunRow, &[PointRow])]) -> Result<Vec<bool>, HistoryError> {
        self.writing(|s| s.write_runs(runs))
    }

    fn groups(&mut self) -> Result<Vec<(SeriesKey, u64)>, HistoryError> {
        let mut query = self
            .conn
            .prepare(schema::SERIES)
            .map_err(|e| self.error(e))?;
        query
            .query_map([], |r| {
                Ok((
                    SeriesKey {
                        suite: r.get(0)?,
                        gate: r.get(1)?,
                        key: r.get(2)?,
                        model: r.get(3)?,
                        hardware: r.get(4)?,
                    },
                    u64::try_from(r.get::<_, i64>(5)?).unwrap_or(0),
                ))
            })
            .and_then(Iterator::collect)
            .map_err(|e| self.error(e))
    }

    fn select(&mut self, s: &SeriesKey, newest: bool) -> Result<Vec<Point>, HistoryError> {
        let mut query = self
            .conn
            .prepare(&schema::points(newest))
            .map_err(|e| self.error(e))?;
        query
            .query_map(params![s.suite, s.gate, s.key, s.model, s.hardware], point)
            .and_then(Iterator::collect)
            .map_err(|e| self.error(e))
    }

    fn newest_of_node(
        &mut self,
        s: &SeriesKey,
        pinned: bool,
        node: &str,
    ) -> Result<Option<Point>, HistoryError> {
        let mut query = self
            .conn
            .prepare(&schema::newest_of_node(pinned))
            .map_err(|e| self.error(e))?;
        let rows = if pinned {
            query.query_map(
                params![s.suite, s.gate, s.key, s.hardware, node, s.model],
                point,
            )
        } else {
            query.query_map(params![s.suite, s.gate, s.key, s.hardware, node], point)
        };
        rows.and_then(|mut rows| rows.next().transpose())
            .map_err(|e| self.error(e))
    }

    fn config(&mut self, fingerprint: &str) -> Result<Option<String>, HistoryError> {
        let mut query = self
            .conn
            .prepare_cached(schema::SELECT_CONFIG)
            .map_err(|e| self.error(e))?;
        query
            .query_map(params![fingerprint], |r| r.get(0))
            .and_then(|mut rows| rows.next().transpose())
            .map_err(|e| self.error(e))
    }
}

/// A point as the schema's queries read it.
fn point(r: &rusqlite::Row<'_>) -> rusqlite::Result<Point> {
    Ok(Point {
        run_uid: r.get(0)?,
        node: r.get(1)?,
        finished_unix: r.get(2)?,
        value: r.get(3)?,
        unit: r.get(4)?,
        suite_commit: r.get(5)?,
        fingerprint: r.get(6)?,
        server_version: r.get(7)?,
        servegate: r.get(8)?,
        gate_passed: r.get::<_, i64>(9)? != 0,
        client_limited: r.get::<_, i64>(10)? != 0,
        served_model: r.get(11)?,
    })
}

fn store_error(path: &Path, e: rusqlite::Error) -> HistoryError {
    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) {
        return HistoryError::Locked {
            at: path.display().to_string(),
            waited_s: READ_WAIT.as_secs(),
            what: "a read",
        };
    }
    HistoryError::Store {
        at: path.display().to_string(),
        source: Box::new(e),
    }
}

fn now() -> i64 {
    i64::try_from(crate::record::now_unix()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::{Filter, History, HistoryError, Location, SeriesKey};
    use crate::record::RunRecord;

    /// A run of `gates` gates with one figure each, `value`.
    fn run(node: &str, id: &str, gates: usize, value: f64) -> RunRecord {
        let gates: Vec<serde_json::Value> = (0..gates)
            .map(|g| {
                serde_json::json!({
                    "gate": format!("g{g}"), "load": "1 stream", "repeats": 1,
                    "figures": { "decode_tok_s.mean": value, "errors": 0.0 }
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "schema": "servegate.run/2", "run_id": id, "node": node,
            "started_unix": 1, "finished_unix": 2, "complete": true, "servegate": "0.1.0",
            "suites": [{ "suite": "s", "fingerprint": "f", "target": "t", "model": "m", "gates": gates }]
        }))
        .unwrap()
    }

    fn temp() -> (tempfile::TempDir, Location) {
        let dir = tempfile::tempdir().unwrap();
        let at = Location::Sqlite(dir.path().join("h/history.sqlite"));
        (dir, at)
    }

    /// A run is written once: again, it is there already and nothing is
    /// added; its figures read back as one series per figure.
    #[test]
    fn a_run_is_recorded_once_and_reads_back() {
        let (_dir, at) = temp();
        let mut h = History::open(&at).unwrap();
        let first = h.record(&run("a", "1-1", 2, 500.0), "run").unwrap();
        assert_eq!((first.points, first.already), (4, false));
        let again = h.record(&run("a", "1-1", 2, 1.0), "import").unwrap();
        assert_eq!((again.points, again.already), (0, true));
        // Another node's run of the same id is another run.
        h.record(&run("b", "1-1", 2, 510.0), "run").unwrap();
        let series = h.series(&Filter::default()).unwrap();
        assert_eq!(series.len(), 4, "{series:?}");
        let key = SeriesKey {
            suite: "s".into(),
            gate: "g0".into(),
            key: "decode_tok_s.mean".into(),
            model: "m".into(),
            hardware: "no GPU".into(),
        };
        let values: Vec<f64> = h
            .points(&key, 10)
            .unwrap()
            .iter()
            .map(|p| p.value)
            .collect();
        assert_eq!(values, [500.0, 510.0]);
        assert_eq!(h.points(&key, 1).unwrap()[0].run_uid, "b/1-1", "the newest");
    }

    /// A series is found by the names a run has, whatever they are: a
    /// model id longer than the history keeps (a snapshot path), or with a
    /// control character, is stored cut and escaped, and a reader naming
    /// the series by the run's own names finds it ([`SeriesKey::of_gate`];
    /// a key built from the raw names found nothing).
    #[test]
    fn a_series_is_found_by_the_names_the_run_has() {
        let (_dir, at) = temp();
        let mut h = History::open(&at).unwrap();
        let model = format!("/models/hub/{}/snapshots/\u{1b}[31m", "x".repeat(120));
        let mut record = run("a", "1-1", 1, 500.0);
        record.suites[0].model = Some(model.clone());
        h.record(&record, "run").unwrap();
        let identity = super::super::ModelIdentity {
            pinned: None,
            served: &model,
            reported: true,
        };
        let key = SeriesKey::of_gate("s", "g0", &identity, "no GPU")
            .figure("decode_tok_s.mean".parse().unwrap());
        assert_eq!(h.points(&key, 10).unwrap().len(), 1, "{key:?}");
        let raw = SeriesKey {
            model,
            ..key.clone()
        };
        assert!(h.points(&raw, 10).unwrap().is_empty());
    }

    /// Four writers on one file at once, each its own connection, a run
    /// of 200 figures each, ten times: every run lands whole.
    #[test]
    fn writers_at_once_all_land() {
        let (_dir, at) = temp();
        std::thread::scope(|s| {
            for w in 0..4 {
                let at = at.clone();
                s.spawn(move || {
                    let mut h = History::open(&at).unwrap();
                    for i in 0..10 {
                        h.record(&run(&format!("w{w}"), &format!("{i}-1"), 100, 1.0), "run")
                            .unwrap();
                    }
                });
            }
        });
        let mut h = History::open(&at).unwrap();
        let series = h.series(&Filter::default()).unwrap();
        assert_eq!(series.len(), 200);
        assert!(series.iter().all(|s| s.points == 40), "{series:?}");
    }

    /// A history written by a newer servegate is refused, naming both
    /// versions, never written into.
    #[test]
    fn a_newer_schema_is_refused() {
        let (_dir, at) = temp();
        drop(History::open(&at).unwrap());
        let Location::Sqlite(path) = &at else {
            unreachable!()
        };
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute(
            "INSERT INTO servegate_schema (version, applied_unix, servegate) VALUES (99, 0, 'future')",
            [],
        )
        .unwrap();
        drop(conn);
        let err = History::open(&at).err().unwrap();
        assert!(
            matches!(err, HistoryError::Newer { found: 99, .. }),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains(&format!("newer than this servegate's ({})", super::VERSION)),
            "{err}"
        );
    }

    /// A history of schema 1 (before the served model was kept beside the
    /// series' model) is brought to 2 as it is opened: its rows read back
    /// with the model they were keyed by as the one served, unpinned.
    #[test]
    fn a_version_1_history_is_migrated_and_reads_back() {
        let (_dir, at) = temp();
        let Location::Sqlite(path) = &at else {
            unreachable!()
        };
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute(super::schema::SCHEMA_TABLE, []).unwrap();
        for statement in super::MIGRATIONS[0] {
            conn.execute(statement, []).unwrap();
        }
        conn.execute_batch(
            "INSERT INTO servegate_schema VALUES (1, 0, '0.1.0');
            INSERT INTO servegate_runs VALUES ('a/1-1', '1-1', 'a', 1, 2, '0.1.0', '', 'no GPU', 'run', 3);
            INSERT INTO servegate_points VALUES ('a/1-1', 's', NULL, 'g0', 'decode_tok_s', 'mean',
                'decode_tok_s.mean', 50.0, 'tok/s', 1, 'f', 'old-model', NULL, NULL, 1, 0, 'x');",
        )
        .unwrap();
        drop(conn);
        let mut h = History::open(&at).unwrap();
        let key = SeriesKey {
            suite: "s".into(),
            gate: "g0".into(),
            key: "decode_tok_s.mean".into(),
            model: "old-model".into(),
            hardware: "no GPU".into(),
        };
        let points = h.points(&key, 10).unwrap();
        assert_eq!(points.len(), 1);
        assert_eq!(points[0].served_model, "old-model");
        let previous = h.previous(&key, false, "a").unwrap().unwrap();
        assert_eq!(previous.run_uid, "a/1-1");
        assert!(
            h.previous(&key, false, "b").unwrap().is_none(),
            "another machine's"
        );
        // A new run lands beside it.
        h.record(&run("a", "2-1", 1, 51.0), "run").unwrap();
        assert_eq!(
            h.previous(&key, false, "a").unwrap().unwrap().served_model,
            "m"
        );
    }
}
