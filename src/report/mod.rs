//! Writers of the run record (`crate::harness::record::RunRecord`): JUnit
//! XML, a Markdown summary (GitHub's step summary), GitHub annotations at
//! the YAML line of each failure. They only read the record, so `servegate
//! report` renders a saved one the same way.

pub mod annotations;
pub mod html;
pub mod junit;
pub mod markdown;

use std::path::Path;

use crate::harness::record::RunRecord;

/// Reads a record from `report.json` or a run directory holding one.
pub fn read(path: &Path) -> Result<RunRecord, String> {
    let file = if path.is_dir() {
        path.join("report.json")
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let mut record: RunRecord = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a servegate run record: {e}", file.display()))?;
    // An interrupted run's record is its last checkpoint: the trials after
    // it are in the journal beside it.
    if !record.complete
        && let Some(dir) = file.parent()
    {
        crate::harness::record::merge_journal(&mut record, dir);
    }
    Ok(record)
}

/// Passed and failed trials.
pub fn counts(record: &RunRecord) -> (usize, usize) {
    let failed = record
        .trials
        .iter()
        .filter(|t| t.outcome != "passed")
        .count();
    (record.trials.len() - failed, failed)
}
