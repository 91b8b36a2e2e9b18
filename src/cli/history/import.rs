//! `servegate history import`: records of earlier runs, or other tools'
//! results, added to the history in batches.

use std::path::{Path, PathBuf};

use servegate::history::{History, Location};
use servegate::record::RunRecord;

/// The most runs an import writes in one transaction. A commit each cost
/// four `fsync`s a run on SQLite (19 ms a run on a disk that syncs for
/// real: 6,000 runs in two minutes); a batch pays them once. Bounded so
/// that a batch's records sit in memory together: at most this many, and
/// at most [`IMPORT_BATCH_BYTES`] of files.
const IMPORT_BATCH: usize = 500;

/// See [`IMPORT_BATCH`]: a batch ends once its files hold this many bytes.
const IMPORT_BATCH_BYTES: u64 = 64 << 20;

pub(super) fn import(
    history: &mut History,
    location: &Location,
    paths: &[PathBuf],
) -> Result<(), String> {
    let mut imported = Imported::default();
    let mut batch: Vec<(PathBuf, RunRecord)> = Vec::new();
    let mut bytes = 0;
    for file in paths.iter().flat_map(|p| records_under(p)) {
        match servegate::history::import::read(&file) {
            Ok(record) => {
                bytes += std::fs::metadata(&file).map_or(0, |m| m.len());
                batch.push((file, record));
            }
            Err(e) => imported.failed.push(format!("{}: {e}", file.display())),
        }
        if batch.len() >= IMPORT_BATCH || bytes >= IMPORT_BATCH_BYTES {
            imported.write(history, &mut batch);
            bytes = 0;
        }
    }
    imported.write(history, &mut batch);
    eprintln!(
        "servegate: {} run(s) added to {}, {} there already",
        imported.added,
        location.describe(),
        imported.already
    );
    if imported.failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} file(s) not imported:\n  {}",
            imported.failed.len(),
            imported.failed.join("\n  ")
        ))
    }
}

/// What an import did so far.
#[derive(Default)]
struct Imported {
    added: usize,
    already: usize,
    failed: Vec<String>,
}

impl Imported {
    /// Writes `batch` in one transaction (and empties it), saying of each
    /// run added what it held once it is committed. A batch the history
    /// refused (one run it cannot take rolls back them all) is written
    /// again a run at a time, so only the files it cannot take are named,
    /// each with why.
    fn write(&mut self, history: &mut History, batch: &mut Vec<(PathBuf, RunRecord)>) {
        if batch.is_empty() {
            return;
        }
        let records: Vec<&RunRecord> = batch.iter().map(|(_, r)| r).collect();
        match history.record_all(&records, "import") {
            Ok(recorded) => {
                for ((file, _), r) in batch.iter().zip(recorded) {
                    self.said(file, Ok(r));
                }
            }
            Err(_) => {
                for (file, record) in batch.iter() {
                    self.said(file, history.record(record, "import"));
                }
            }
        }
        batch.clear();
    }

    /// Counts what became of one file's run, and says it.
    fn said(
        &mut self,
        file: &Path,
        recorded: Result<servegate::history::Recorded, servegate::history::HistoryError>,
    ) {
        match recorded {
            Ok(r) if r.already => self.already += 1,
            Ok(r) => {
                self.added += 1;
                let line = format!(
                    "servegate: {}: {} figure(s) as run {}",
                    file.display(),
                    r.points,
                    r.run_uid
                );
                eprintln!("{}", servegate::text::for_log(&line));
            }
            Err(e) => self.failed.push(format!("{}: {e}", file.display())),
        }
    }
}

/// The record files a path names: itself, its `report.json`, or every
/// run's under its `runs/`.
fn records_under(path: &Path) -> Vec<PathBuf> {
    if !path.is_dir() {
        return vec![path.to_path_buf()];
    }
    if path.join("report.json").is_file() {
        return vec![path.join("report.json")];
    }
    let mut runs: Vec<PathBuf> = std::fs::read_dir(path.join("runs"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path().join("report.json"))
        .filter(|p| p.is_file())
        .collect();
    runs.sort();
    if runs.is_empty() {
        // Said as the path given: no record there.
        runs.push(path.to_path_buf());
    }
    runs
}
