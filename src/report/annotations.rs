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

/// The line the message points at (its first `--> file:line:col` in the
/// trial's own file: the failing assertion or threshold), else `line`.
fn pointed_line(message: &str, file: &str, line: u32) -> u32 {
    message
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("--> "))
        .find_map(|at| {
            let rest = at.strip_prefix(file)?.strip_prefix(':')?;
            rest.split(':').next()?.parse().ok()
        })
        .unwrap_or(line)
}

/// One `::error file=…,line=…,title=…::…` line per failed trial, at the
/// line of the assertion or threshold that failed; a gated trial's at its
/// own item (the lines its message points at are what gated it).
pub fn render(record: &RunRecord) -> Vec<String> {
    record
        .trials
        .iter()
        .filter_map(|t| {
            let message = t.message.as_ref()?;
            let line = if t.outcome == TrialOutcome::Gated {
                t.line
            } else {
                pointed_line(message, &t.file, t.line)
            };
            Some(format!(
                "::error file={},line={line},title={}::{}",
                property(&t.file),
                property(&t.name),
                data(message.trim_end())
            ))
        })
        .collect()
}
