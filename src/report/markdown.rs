//! The Markdown summary of a run (GitHub's step summary): the outcome of
//! every trial, the key figures of every gate, the variant comparison and
//! the failure messages.

use std::fmt::Write as _;

use super::counts;
use crate::record::{RunRecord, TrialOutcome, TrialRecord};
use crate::suite::metric::{KEY_FIGURES, format_figure};
use crate::text::{for_markdown, md_code};

/// The record as Markdown; `at` is where the record was written, when known
/// (a run's `--out-dir` puts it anywhere).
pub fn render(record: &RunRecord, at: Option<&std::path::Path>) -> String {
    let (counted, failed) = counts(record);
    let mut out = String::new();
    let verdict = headline_mark(record.trials.len(), failed);
    let _ = writeln!(
        out,
        "## {verdict} servegate: {counted}{}\n",
        if record.complete {
            ""
        } else {
            " (run interrupted)"
        }
    );
    for s in &record.suites {
        let _ = writeln!(
            out,
            "- {} against {}",
            md_code(&s.suite),
            for_markdown(&s.target)
        );
    }
    out.push('\n');
    let _ = writeln!(out, "| trial | outcome | time |\n|---|---|---|");
    for t in &record.trials {
        let _ = writeln!(
            out,
            "| {} | {} | {:.2}s |",
            md_code(&t.name),
            mark(t.outcome),
            t.duration_s
        );
    }
    for s in &record.suites {
        for g in &s.gates {
            let _ = writeln!(
                out,
                "\n### {}\n\n{}\n",
                md_code(&format!("{}::performance::{}", s.suite, g.gate)),
                for_markdown(&g.load)
            );
            if g.repeats > 1 {
                let _ = writeln!(out, "(means over {} repeats)\n", g.repeats);
            }
            if let Some(note) = g.skipped_note() {
                let _ = writeln!(out, "⚠️ {}\n", for_markdown(&note));
            }
            let _ = writeln!(out, "| figure | value |\n|---|---|");
            for key in KEY_FIGURES {
                if let Some(v) = g.figures.get(key) {
                    let _ = writeln!(out, "| {key} | {} |", format_figure(key, *v));
                }
            }
            if !g.thresholds.is_empty() {
                let _ = writeln!(out, "\n| threshold | verdict |\n|---|---|");
                for t in &g.thresholds {
                    // A double-backtick span: checks quote names in backticks.
                    let _ = writeln!(
                        out,
                        "| `` {} `` | {} |",
                        t.check.replace('|', "\\|"),
                        if t.passed { "✅ pass" } else { "❌ fail" }
                    );
                }
            }
        }
    }
    against_history(&mut out, record);
    if !record.comparisons.is_empty() {
        let _ = writeln!(
            out,
            "\n### Variants\n\n| gate | figure | variant | value | delta | noise |\n|---|---|---|---|---|---|"
        );
        for c in &record.comparisons {
            for (i, r) in c.rows.iter().enumerate() {
                let delta = match r.delta_pct {
                    Some(d) => format!("{d:+.1}%"),
                    None if i == 0 => "reference".to_owned(),
                    // Against a reference of 0.
                    None => "—".to_owned(),
                };
                let noise = match r.beyond_noise {
                    Some(true) => "beyond",
                    Some(false) => "within",
                    None if i == 0 => "",
                    None => "unknown",
                };
                let best = if c.best.as_deref() == Some(r.variant.as_str()) {
                    " (best)"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "| {} | {} ({} is better) | {}{best} | {} | {delta} | {noise} |",
                    md_code(&c.gate),
                    c.figure,
                    c.better,
                    r.variant,
                    r.shown
                );
            }
        }
        let mut no_best = record
            .comparisons
            .iter()
            .filter_map(|c| c.no_best.as_ref().map(|why| (c, why)))
            .peekable();
        if no_best.peek().is_some() {
            out.push('\n');
        }
        for (c, why) in no_best {
            // Servegate's words around the suite's variant names.
            let _ = writeln!(
                out,
                "- {} {}: no best variant: {why}",
                md_code(&c.gate),
                c.figure
            );
        }
    }
    let failures: Vec<_> = record
        .trials
        .iter()
        .filter(|t| t.message.is_some())
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "\n### Failures");
        for t in failures {
            failure(&mut out, &t.name, t);
        }
    }
    let _ = match at {
        Some(path) => writeln!(
            out,
            "\nRun record: {} (servegate {}).",
            md_code(&path.display().to_string()),
            record.servegate
        ),
        None => writeln!(
            out,
            "\nRun {} (servegate {}).",
            md_code(&record.run_id),
            record.servegate
        ),
    };
    out
}

/// Which gated figures moved off their level in the run history (both
/// ways: a gain is news too), or that none did.
fn against_history(out: &mut String, record: &RunRecord) {
    let trends: Vec<_> = record
        .suites
        .iter()
        .flat_map(|s| s.gates.iter().map(move |g| (s, g)))
        .flat_map(|(s, g)| g.trends.iter().map(move |t| (s, g, t)))
        .collect();
    if trends.is_empty() {
        return;
    }
    let moved: Vec<_> = trends
        .iter()
        .filter(|(_, _, t)| t.moved.is_some())
        .collect();
    let _ = writeln!(out, "\n### Against the history\n");
    if moved.is_empty() {
        let _ = writeln!(
            out,
            "No gated figure moved off its level ({} figure(s) with earlier runs).",
            trends.len()
        );
        return;
    }
    let _ = writeln!(
        out,
        "{} of {} gated figure(s) moved off their level:\n\n| gate | figure | this run | moved |\n|---|---|---|---|",
        moved.len(),
        trends.len()
    );
    for (s, g, t) in moved {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            md_code(&format!("{}::performance::{}", s.suite, g.gate)),
            t.key,
            g.figures
                .get(t.key)
                .map_or_else(|| "—".to_owned(), |v| format_figure(t.key, *v)),
            for_markdown(t.moved.as_deref().unwrap_or_default())
        );
    }
}

/// A failed trial's message, folded under its name (`name`) and place.
pub(super) fn failure(out: &mut String, name: &str, t: &TrialRecord) {
    let _ = writeln!(
        out,
        "\n<details><summary><code>{}</code> {}({}:{})</summary>\n\n```\n{}\n```\n\n</details>",
        super::html::esc(name),
        if t.outcome == TrialOutcome::Gated {
            "gated "
        } else {
            ""
        },
        super::html::esc(&t.file),
        t.line,
        t.message
            .as_deref()
            .unwrap_or("")
            .trim_end()
            .replace("```", "'''")
    );
}

/// A summary's headline mark: a run in which no trial ran passed nothing,
/// so it is never green.
pub(super) fn headline_mark(trials: usize, failed: bool) -> &'static str {
    match (trials, failed) {
        (_, true) => "❌",
        (0, false) => "⚠️",
        _ => "✅",
    }
}

/// A trial's outcome as the tables show it.
pub(super) fn mark(outcome: TrialOutcome) -> &'static str {
    match outcome {
        TrialOutcome::Passed => "✅ passed",
        TrialOutcome::Failed => "❌ failed",
        TrialOutcome::Gated => "⛔ gated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_without_trials_is_never_green() {
        let empty = RunRecord {
            complete: true,
            ..RunRecord::default()
        };
        let summary = render(&empty, None);
        assert!(
            summary.starts_with("## ⚠️ servegate: 0 passed, 0 failed"),
            "{summary}"
        );
    }

    /// The record's place is the one it was written to (a run's
    /// `--out-dir` puts it anywhere); without one, the run is named.
    #[test]
    fn the_record_is_named_where_it_was_written() {
        let record = RunRecord {
            run_id: "1796000000-42".into(),
            servegate: "0.1.0".into(),
            ..RunRecord::default()
        };
        let at = std::path::Path::new("/tmp/ci out/runs/1796000000-42/report.json");
        assert!(render(&record, Some(at)).ends_with(
            "Run record: `/tmp/ci out/runs/1796000000-42/report.json` (servegate 0.1.0).\n"
        ));
        assert!(render(&record, None).ends_with("Run `1796000000-42` (servegate 0.1.0).\n"));
    }
}
