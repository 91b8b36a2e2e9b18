//! What a run prints after libtest's lines: the target of every suite again
//! and the figures each gate measured, so a green run shows its numbers.

use std::fmt::Write as _;
use std::sync::Arc;

use super::events::GateFigures;
use super::session::SuiteRun;
use crate::suite::metric::{KEY_FIGURES, MetricKey, format_figure};

/// Prints the targets and the measured figures.
pub fn print(runs: &[Arc<SuiteRun>]) {
    if runs.is_empty() {
        return;
    }
    // Server words (errors, model ids) are in it: printed as for a CI log.
    eprint!("{}", crate::text::for_log(&render(runs)));
}

fn render(runs: &[Arc<SuiteRun>]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "servegate: figures measured in this run");
    for run in runs {
        let _ = match run.target() {
            Some(Ok(c)) => writeln!(out, "  suite `{}` against {}", run.label, c.description),
            Some(Err(e)) => writeln!(out, "  suite `{}`: target failed: {e}", run.label),
            None => writeln!(out, "  suite `{}`: no trial reached its server", run.label),
        };
        for d in run.dataset_records() {
            let _ = writeln!(
                out,
                "  {}::correctness::{}: {} {:.3} ({}/{} {}, Wilson 95% interval {:.3}–{:.3}){}",
                run.label,
                d.probe,
                d.figure,
                d.accuracy,
                d.correct,
                d.scored,
                if d.figure == "accuracy" {
                    "right"
                } else {
                    "passed"
                },
                d.interval95.0,
                d.interval95.1,
                crate::check::accuracy::sandbox_time(&d.items)
                    .map_or_else(String::new, |t| format!("; {t}"))
            );
        }
        let figures = run.figures();
        if figures.is_empty() {
            let _ = writeln!(out, "    (no performance gate measured)");
        }
        for f in figures {
            let _ = writeln!(out, "  {}::performance::{} [{}]", run.label, f.gate, f.load);
            if f.repeats > 1 {
                let _ = writeln!(
                    out,
                    "    (figures of the last of {} repeats; verdicts over all of them)",
                    f.repeats
                );
            }
            if let Some(note) = crate::record::skipped_note(&f.probes_skipped) {
                let _ = writeln!(out, "    {note}");
            }
            out.push_str(&f.metrics.render());
            for c in &f.checks {
                let _ = writeln!(
                    out,
                    "    {} {}",
                    if c.passed { "pass" } else { "FAIL" },
                    c.check
                );
            }
        }
        out.push_str(&sweep_tables(&run.suite, &run.label, &run.figures()));
    }
    out.push_str(&super::compare::render(&super::compare::compare(runs)));
    out
}

/// One row per level of each sweep (`<gate>::concurrency_N`, `<gate>::rate_R`),
/// so a curve reads at a glance.
fn sweep_tables(of: &crate::suite::Suite, suite: &str, figures: &[GateFigures]) -> String {
    let mut sweeps: Vec<(&str, Vec<(&str, &GateFigures)>)> = Vec::new();
    for f in figures {
        let Some(crate::suite::SweepLevel { sweep: gate, level }) = of
            .gates
            .iter()
            .find(|g| g.name == f.gate)
            .and_then(|g| g.sweep.as_ref())
        else {
            continue;
        };
        let (gate, level) = (gate.as_str(), level.as_str());
        match sweeps.iter_mut().find(|(g, _)| *g == gate) {
            Some((_, rows)) => rows.push((level, f)),
            None => sweeps.push((gate, vec![(level, f)])),
        }
    }
    // The key figures, one column each (`ttft.p99` shown as `ttft p99`).
    let columns: Vec<(String, MetricKey)> = KEY_FIGURES
        .iter()
        .map(|k| (k.to_string().replace('.', " "), *k))
        .collect();
    let mut out = String::new();
    for (gate, rows) in sweeps.into_iter().filter(|(_, rows)| rows.len() > 1) {
        let _ = writeln!(out, "  sweep {suite}::performance::{gate}:");
        let _ = write!(out, "    {:<18}", "level");
        for (name, _) in &columns {
            let _ = write!(out, " {name:>17}");
        }
        out.push('\n');
        for (level, f) in rows {
            let _ = write!(out, "    {level:<18}");
            for (_, key) in &columns {
                let shown = f
                    .metrics
                    .value(*key)
                    .map_or_else(|| "-".to_owned(), |v| format_figure(*key, v));
                let _ = write!(out, " {shown:>17}");
            }
            out.push('\n');
        }
    }
    out
}
