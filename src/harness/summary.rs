//! What a run prints after libtest's lines: the target of every suite again
//! and the figures each gate measured, so a green run shows its numbers.
//! A listener: it keeps each suite's target from the run's events and
//! renders it, the gates' figures the run's figure book kept and the
//! record the events built, when the run finishes.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use super::events::{FigureBook, GateFigures, Listener, RunEvent};
use crate::record::{RunRecord, Stage};
use crate::suite::metric::{KEY_FIGURES, MetricKey, format_figure};

/// The end-of-run summary on stderr: each suite run's target, said by
/// the events, and its gates' figures, from the run's figure book.
pub(crate) struct Summary {
    figures: Arc<FigureBook>,
    /// The server each suite run reached, or why it could not, as the
    /// summary says it after the suite's name (`<suite>` or
    /// `<suite>[<variant>]`).
    targets: Mutex<Vec<(String, String)>>,
}

impl Summary {
    /// A summary of the gates `figures` keeps.
    pub(crate) fn new(figures: Arc<FigureBook>) -> Self {
        Self {
            figures,
            targets: Mutex::default(),
        }
    }
}

impl Listener for Summary {
    fn on(&self, event: &RunEvent<'_>) {
        match event {
            RunEvent::TargetReached { label, target } => {
                if let Ok(mut targets) = self.targets.lock() {
                    targets.push((
                        (*label).to_owned(),
                        match target {
                            Ok(c) => format!(" against {}", c.description),
                            Err(e) => format!(": target failed: {e}"),
                        },
                    ));
                }
            }
            // Server words (errors, model ids) are in it: printed as for a
            // CI log, once the lock is let go (stderr may be slow).
            RunEvent::RunFinished(record) => {
                let targets = self.targets.lock().map(|t| t.clone()).unwrap_or_default();
                let text = render(&targets, &self.figures, record);
                eprint!("{}", crate::text::for_log(&text));
            }
            RunEvent::TrialFinished(_)
            | RunEvent::GateMeasured { .. }
            | RunEvent::RecordWritten { .. } => {}
        }
    }
}

fn render(targets: &[(String, String)], book: &FigureBook, record: &RunRecord) -> String {
    // The suite runs in the order their trials ran (a suite file that did
    // not load is no run).
    let mut labels: Vec<&str> = Vec::new();
    for t in record.trials.iter().filter(|t| t.id.stage != Stage::Load) {
        if !labels.contains(&t.id.suite.as_str()) {
            labels.push(&t.id.suite);
        }
    }
    let mut out = String::new();
    if labels.is_empty() {
        return out;
    }
    let _ = writeln!(out, "servegate: figures measured in this run");
    for label in labels {
        let target = targets.iter().find(|(l, _)| l == label);
        let _ = writeln!(
            out,
            "  suite `{label}`{}",
            target.map_or(": no trial reached its server", |(_, t)| t.as_str())
        );
        let datasets = record.suites.iter().filter(|s| s.suite == label);
        for d in datasets.flat_map(|s| &s.datasets) {
            let _ = writeln!(
                out,
                "  {label}::correctness::{}: {} {:.3} ({}/{} {}, Wilson 95% interval {:.3}–{:.3}){}",
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
        let owned = book.of_run(label);
        let figures: Vec<&GateFigures> = owned.iter().collect();
        if figures.is_empty() {
            let _ = writeln!(out, "    (no performance gate measured)");
        }
        for f in &figures {
            let _ = writeln!(out, "  {label}::performance::{} [{}]", f.gate, f.load);
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
        out.push_str(&sweep_tables(label, &figures));
    }
    out.push_str(&super::compare::render(&record.comparisons));
    out
}

/// One row per level of each sweep (`<gate>::concurrency_N`, `<gate>::rate_R`),
/// so a curve reads at a glance.
fn sweep_tables(suite: &str, figures: &[&GateFigures]) -> String {
    let mut sweeps: Vec<(&str, Vec<(&str, &GateFigures)>)> = Vec::new();
    for f in figures {
        let Some(crate::suite::SweepLevel { sweep: gate, level }) = f.sweep.as_ref().map(|s| &s.of)
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
