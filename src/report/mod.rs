//! Writers of the run record (`crate::record::RunRecord`), one registry of
//! formats: JSON, JUnit XML, a Markdown summary (GitHub's step summary),
//! GitHub annotations at the YAML line of each failure, a self-contained
//! HTML report, the figures as CSV. They only read the record, so the end of a run
//! ([`publish`]) and `servegate report` render it the same way; `merge`
//! renders the records of several nodes as one.

pub mod annotations;
pub mod csv;
pub mod html;
pub mod junit;
pub mod markdown;
pub mod merge;

use std::fmt::Write as _;

use crate::record::{RunInfo, RunRecord};

/// A format the record renders to (`servegate report --format`, whose
/// help lists them with these words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Markdown summary.
    #[value(name = "md")]
    Markdown,
    /// JUnit XML.
    Junit,
    /// GitHub Actions annotations.
    Annotations,
    /// The self-contained HTML report.
    Html,
    /// The record itself.
    Json,
    /// Every gate's figures as CSV, a row each (for a spreadsheet).
    Csv,
}

/// A record that could not be rendered.
#[derive(Debug, thiserror::Error)]
#[error("failed to render the {format:?} report: {reason}")]
pub struct ReportError {
    /// The format.
    pub format: Format,
    /// Why.
    pub reason: String,
}

/// The record in `format`, rendered from its scrubbed copy (each format
/// escapes after that, so no escaped secret slips through); `at` is where
/// the record was written, when known.
pub fn render(
    format: Format,
    record: &RunRecord,
    at: Option<&std::path::Path>,
) -> Result<String, ReportError> {
    let rec = &record.scrubbed();
    let fail = |reason: String| ReportError { format, reason };
    match format {
        Format::Markdown => Ok(markdown::render(rec, at)),
        Format::Html => Ok(html::render(rec)),
        Format::Junit => junit::render(rec).map_err(|e| fail(e.to_string())),
        Format::Annotations => Ok(annotations::render(rec).join("\n") + "\n"),
        Format::Csv => Ok(csv::render(rec)),
        Format::Json => serde_json::to_string_pretty(rec)
            .map(|j| j + "\n")
            .map_err(|e| fail(e.to_string())),
    }
}

/// The writers at the end of a run: `junit.xml` and `report.html` beside
/// the record (and in `latest/`), the Markdown summary appended to
/// `$GITHUB_STEP_SUMMARY` when it is set, GitHub annotations printed when
/// `GITHUB_ACTIONS=true`.
pub fn publish(info: &RunInfo, rec: &RunRecord) {
    for (format, name) in [(Format::Junit, "junit.xml"), (Format::Html, "report.html")] {
        let text = match render(format, rec, None) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("warning: {e}");
                continue;
            }
        };
        for path in [info.dir.join(name), info.latest().with_file_name(name)] {
            if let Err(e) = std::fs::write(&path, &text) {
                eprintln!("warning: failed to write {}: {e}", path.display());
            }
        }
    }
    if let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|s| !s.is_empty()) {
        let appended = render(Format::Markdown, rec, Some(&info.dir.join("report.json")))
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|md| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&summary)
                    .and_then(|mut f| std::io::Write::write_all(&mut f, md.as_bytes()))
            });
        if let Err(e) = appended {
            eprintln!("warning: failed to append to $GITHUB_STEP_SUMMARY: {e}");
        }
    }
    if std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
        && let Ok(lines) = render(Format::Annotations, rec, None)
    {
        eprint!("{lines}");
    }
}

/// A record's passed and failed trials (gated ones count as failed).
pub fn tally(record: &RunRecord) -> (usize, usize) {
    let failed = record.trials.iter().filter(|t| !t.outcome.passed()).count();
    (record.trials.len() - failed, failed)
}

/// `5 passed, 2 failed (1 of them gated)`: the trials by outcome (a gated
/// trial counts as failed, and is named), and whether any failed.
pub fn counts(record: &RunRecord) -> (String, bool) {
    let (passed, failed) = tally(record);
    let gated = record
        .trials
        .iter()
        .filter(|t| t.outcome == crate::record::TrialOutcome::Gated)
        .count();
    let mut line = format!("{passed} passed, {failed} failed");
    if gated > 0 {
        let _ = write!(line, " ({gated} of them gated)");
    }
    (line, failed > 0)
}
