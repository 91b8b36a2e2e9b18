//! GitHub Actions workflow commands: an `::error` at the YAML line of each
//! failed trial, so the failure shows on the suite file in the pull request.

use crate::record::{RunRecord, TrialOutcome};

/// Escapes a command's message (`%`, CR, LF).
fn data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a command's property value (also `:` and `,`).
fn property(text: &str) -> String {
    data(text).replace(':', "%3A").replace(',', "%2C")
}

/// One `::error file=…,line=…,title=…::…` line per failed trial, at the
/// line of the assertion or threshold that failed; a gated trial's at its
/// own item (the lines its message points at are what gated it). A
/// `::warning` at a gate that passed without the verdict of probes
/// `--skip` left out.
pub fn render(record: &RunRecord) -> Vec<String> {
    let skipped = record.skipped_notes();
    let warnings = record.trials.iter().filter_map(|t| {
        let (_, note) = skipped.iter().find(|(name, _)| *name == t.name)?;
        Some(format!(
            "::warning file={},line={},title={}::{}",
            property(&t.file),
            t.line,
            property(&t.name),
            data(note)
        ))
    });
    let errors = record.trials.iter().filter_map(|t| {
        let message = t.message.as_ref()?;
        let line = if t.outcome == TrialOutcome::Gated {
            t.line
        } else {
            t.points_at.unwrap_or(t.line)
        };
        Some(format!(
            "::error file={},line={line},title={}::{}",
            property(&t.file),
            property(&t.name),
            data(message.trim_end())
        ))
    });
    errors.chain(warnings).collect()
}
