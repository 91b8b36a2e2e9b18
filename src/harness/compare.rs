//! The A/B table of a suite with variants: per performance gate and figure
//! its thresholds name, each variant's value, the delta against the first
//! variant, and whether that delta is beyond the noise the repeats measured.

use std::fmt::Write as _;
use std::sync::Arc;

use super::session::SuiteRun;
use crate::load::estimate::Estimate;
use crate::record::{Comparison, Row};
use crate::suite::metric::format_value;
use crate::suite::threshold::Op;

/// The comparisons of every suite run with variants.
pub fn compare(runs: &[Arc<SuiteRun>]) -> Vec<Comparison> {
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for run in runs.iter().filter(|r| r.variant.is_some()) {
        let suite = &run.suite;
        if seen.contains(&suite.name) {
            continue;
        }
        seen.push(suite.name.clone());
        let variants: Vec<&Arc<SuiteRun>> = runs
            .iter()
            .filter(|r| r.suite.name == suite.name && r.variant.is_some())
            .collect();
        for gate in &suite.gates {
            for t in &gate.thresholds {
                let figure = t.threshold.key.to_string();
                if out.iter().any(|c: &Comparison| {
                    c.suite == suite.name && c.gate == gate.name && c.figure == figure
                }) {
                    continue;
                }
                let higher = matches!(t.threshold.op, Op::Ge | Op::Gt);
                let estimates: Vec<(String, Estimate)> = variants
                    .iter()
                    .filter_map(|r| {
                        let f = r.figures().into_iter().find(|f| f.gate == gate.name)?;
                        let values = f.repeat_values.get(&figure)?.clone();
                        let name = r.variant.as_ref()?.name.clone();
                        (!values.is_empty()).then(|| (name, Estimate::of(values)))
                    })
                    .collect();
                if estimates.is_empty() {
                    continue;
                }
                let first = estimates[0].1.clone();
                let rows: Vec<Row> = estimates
                    .iter()
                    .enumerate()
                    .map(|(i, (variant, e))| Row {
                        variant: variant.clone(),
                        value: e.mean,
                        shown: format_value(t.threshold.key.metric, e.mean),
                        repeats: e.values.len(),
                        ci95: e.ci95,
                        delta_pct: (i > 0 && first.mean != 0.0)
                            .then(|| (e.mean - first.mean) / first.mean.abs() * 100.0),
                        beyond_noise: if i == 0 {
                            None
                        } else {
                            match (e.ci95, first.ci95) {
                                (Some((lo, hi)), Some((flo, fhi))) => Some(lo > fhi || hi < flo),
                                _ => None,
                            }
                        },
                    })
                    .collect();
                let best = (rows.len() > 1)
                    .then(|| {
                        rows.iter()
                            .max_by(|a, b| {
                                let (x, y) = if higher {
                                    (a.value, b.value)
                                } else {
                                    (b.value, a.value)
                                };
                                x.total_cmp(&y)
                            })
                            .map(|r| r.variant.clone())
                    })
                    .flatten();
                out.push(Comparison {
                    suite: suite.name.clone(),
                    gate: gate.name.clone(),
                    figure,
                    better: if higher { "higher" } else { "lower" }.to_owned(),
                    rows,
                    best,
                });
            }
        }
    }
    out
}

/// The comparisons as the terminal shows them.
pub fn render(comparisons: &[Comparison]) -> String {
    let mut out = String::new();
    let mut last_gate = None;
    for c in comparisons {
        if last_gate != Some((&c.suite, &c.gate)) {
            let first = c.rows.first().map_or("", |r| r.variant.as_str());
            let _ = writeln!(
                out,
                "  variants of {}::performance::{} (delta against `{first}`):",
                c.suite, c.gate
            );
            last_gate = Some((&c.suite, &c.gate));
        }
        let _ = writeln!(out, "    {} ({} is better)", c.figure, c.better);
        for r in &c.rows {
            let delta = r.delta_pct.map_or_else(String::new, |d| {
                let noise = match r.beyond_noise {
                    Some(true) => "beyond noise",
                    Some(false) => "within noise",
                    None => "noise unknown: repeats: 1",
                };
                format!(" {d:+.1}% ({noise})")
            });
            let _ = writeln!(
                out,
                "      {:<16} {:>14}  (n={}){delta}",
                r.variant, r.shown, r.repeats
            );
        }
        if let Some(best) = &c.best {
            let _ = writeln!(out, "      best: `{best}`");
        }
    }
    out
}
