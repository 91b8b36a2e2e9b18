//! The Markdown summary of a run (GitHub's step summary): the outcome of
//! every trial, the key figures of every gate, the variant comparison and
//! the failure messages.

use std::fmt::Write as _;

use super::counts;
use crate::record::{RunRecord, TrialOutcome, TrialRecord};
use crate::suite::metric::{KEY_FIGURES, format_figure};

/// The record as Markdown.
pub fn render(record: &RunRecord) -> String {
    let (passed, failed) = counts(record);
    let mut out = String::new();
    let verdict = if failed == 0 { "✅" } else { "❌" };
    let _ = writeln!(
        out,
        "## {verdict} servegate: {passed} passed, {failed} failed{}\n",
        if record.complete {
            ""
        } else {
            " (run interrupted)"
        }
    );
    for s in &record.suites {
        let _ = writeln!(out, "- `{}` against {}", s.suite, s.target);
    }
    out.push('\n');
    let _ = writeln!(out, "| trial | outcome | time |\n|---|---|---|");
    for t in &record.trials {
        let _ = writeln!(
            out,
            "| `{}` | {} | {:.2}s |",
            t.name,
            mark(t.outcome),
            t.duration_s
        );
    }
    for s in &record.suites {
        for g in &s.gates {
            let _ = writeln!(
                out,
                "\n### `{}::performance::{}`\n\n{}\n",
                s.suite, g.gate, g.load
            );
            if g.repeats > 1 {
                let _ = writeln!(out, "(means over {} repeats)\n", g.repeats);
            }
            let _ = writeln!(out, "| figure | value |\n|---|---|");
            for key in KEY_FIGURES.map(|k| k.to_string()) {
                if let Some(v) = g.figures.get(&key) {
                    let _ = writeln!(out, "| {key} | {} |", format_figure(&key, *v));
                }
            }
        }
    }
    if !record.comparisons.is_empty() {
        let _ = writeln!(
            out,
            "\n### Variants\n\n| gate | figure | variant | value | delta | noise |\n|---|---|---|---|---|---|"
        );
        for c in &record.comparisons {
            for r in &c.rows {
                let delta = r
                    .delta_pct
                    .map_or_else(|| "reference".to_owned(), |d| format!("{d:+.1}%"));
                let noise = match r.beyond_noise {
                    Some(true) => "beyond",
                    Some(false) => "within",
                    None if r.delta_pct.is_none() => "",
                    None => "unknown",
                };
                let best = if c.best.as_deref() == Some(r.variant.as_str()) {
                    " (best)"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "| `{}` | {} ({} is better) | {}{best} | {} | {delta} | {noise} |",
                    c.gate, c.figure, c.better, r.variant, r.shown
                );
            }
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
    let _ = writeln!(
        out,
        "\nRun record: `target/servegate/runs/{}/report.json` (servegate {}).",
        record.run_id, record.servegate
    );
    out
}

/// A failed trial's message, folded under its name (`name`) and place.
pub(super) fn failure(out: &mut String, name: &str, t: &TrialRecord) {
    let _ = writeln!(
        out,
        "\n<details><summary><code>{name}</code> ({}:{})</summary>\n\n```\n{}\n```\n\n</details>",
        t.file,
        t.line,
        t.message
            .as_deref()
            .unwrap_or("")
            .trim_end()
            .replace("```", "'''")
    );
}

/// A trial's outcome as the tables show it.
pub(super) fn mark(outcome: TrialOutcome) -> &'static str {
    match outcome {
        TrialOutcome::Passed => "✅ passed",
        TrialOutcome::Failed => "❌ failed",
        TrialOutcome::Gated => "⛔ gated",
    }
}
