//! `servegate history import`: the run record a file holds, whether a
//! servegate run's (`report.json`) or another tool's results
//! (`sglang.bench_serving`, `vllm bench serve`), named so that importing
//! it twice finds it there already.

use std::path::Path;

use crate::record::{MAX_RECORD_BYTES, RunRecord};

/// The record of `file`: a servegate run record (an interrupted run's
/// with its journal), else a benchmark tool's result file; a file over
/// `MAX_RECORD_BYTES` is refused unread.
pub fn read(file: &Path) -> Result<RunRecord, String> {
    let text = crate::files::read_capped(file, "a run record or result file", MAX_RECORD_BYTES)
        .map_err(|e| format!("cannot read it: {e}"))?;
    let mut record = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) if v.get("schema").is_some() => {
            crate::record::from_json(v, file).map_err(|e| e.to_string())?
        }
        // The same file is the same run, whenever and by whichever route
        // it is imported.
        _ => crate::record::import::file_record(
            &text,
            &crate::record::import::Naming::default(),
            file,
        )
        .map_err(|e| {
            format!("neither a servegate run record nor a benchmark tool's results: {e}")
        })?,
    };
    if record.node.is_empty() {
        record.node = super::node_name();
    }
    plausible(&record)?;
    Ok(record)
}

/// `Err` naming the first figure no measurement gives: servegate's
/// figures are counts, times, rates and shares, none negative, none
/// infinite. A crafted file's `-5` errors or `-100` tok/s would otherwise
/// become a baseline every later run is held to.
fn plausible(record: &RunRecord) -> Result<(), String> {
    for suite in &record.suites {
        for gate in &suite.gates {
            if let Some((key, value)) = gate
                .figures
                .iter()
                .find(|(_, v)| !v.is_finite() || **v < 0.0)
            {
                return Err(format!(
                    "its gate `{}` of suite `{}` has {key} = {value}: a count, a time or a rate is never negative or infinite, so nothing of the file was imported",
                    crate::text::printable(&crate::secrets::cut(&gate.gate, 100).0),
                    crate::text::printable(&crate::secrets::cut(&suite.suite, 100).0),
                ));
            }
        }
    }
    Ok(())
}
