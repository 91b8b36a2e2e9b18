//! The run's figures as CSV, one row per figure of every gate, for a
//! spreadsheet or a dashboard's import. A record is input (an imported
//! file can say anything), so every text cell is made safe for the sink:
//! made printable ([`crate::text::printable`]), written with a leading
//! `'` where a spreadsheet would read it as a formula (it begins with
//! `=`, `+`, `-`, `@`, a tab or a carriage return), and quoted where it
//! holds a comma, a quote or a line break (RFC 4180).

use std::fmt::Write as _;

use crate::record::RunRecord;

/// The columns, in order.
pub const HEADER: &str =
    "run_id,node,suite,gate,figure,value,unit,repeats,outcome,load,fingerprint";

/// The record's figures as CSV: the header, then a row per gate and
/// figure (a figure that is not a number is left out, as the history
/// leaves it out). `outcome` is the gate's trial's, read by its id
/// (`passed`, `failed`, `gated`), empty where the record has no trial for
/// it (an imported result).
pub fn render(record: &RunRecord) -> String {
    let mut out = format!("{HEADER}\r\n");
    for suite in &record.suites {
        for gate in &suite.gates {
            let outcome = record
                .gate_trial(suite, gate)
                .map_or("", |t| t.outcome.name());
            for (key, value) in gate.figures.iter() {
                if !value.is_finite() {
                    continue;
                }
                let _ = write!(
                    out,
                    "{},{},{},{},{},{value},{},{},{},{},{}\r\n",
                    cell(&record.run_id),
                    cell(&record.node),
                    cell(&suite.suite),
                    cell(&gate.gate),
                    cell(&key.to_string()),
                    cell(key.metric.unit()),
                    gate.repeats,
                    cell(outcome),
                    cell(&gate.load),
                    cell(&suite.fingerprint),
                );
            }
        }
    }
    out
}

/// One text cell, safe for a spreadsheet.
fn cell(text: &str) -> String {
    let shown = crate::text::printable(text);
    // Spaces first too: an importer that trims them would read the rest.
    let inert = if shown.starts_with(['\t', '\r'])
        || shown.trim_start().starts_with(['=', '+', '-', '@'])
    {
        format!("'{shown}")
    } else {
        shown.into_owned()
    };
    if inert.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", inert.replace('"', "\"\""))
    } else {
        inert
    }
}

#[cfg(test)]
mod tests {
    use super::cell;

    #[test]
    fn cells_are_inert_and_quoted() {
        assert_eq!(cell("decode"), "decode");
        assert_eq!(cell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(cell("-1+2"), "'-1+2");
        assert_eq!(cell("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(cell("  =1+1"), "'  =1+1");
        assert_eq!(
            cell("closed loop, concurrency 1"),
            "\"closed loop, concurrency 1\""
        );
        assert!(!cell("a\u{1b}[2Jb\nc").contains(['\u{1b}', '\n']));
    }
}
