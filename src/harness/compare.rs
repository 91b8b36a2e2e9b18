//! The A/B table of a suite with variants: per performance gate and figure
//! its thresholds name, each variant's value, the delta against the first
//! variant, and whether that delta is beyond the noise the repeats measured.

use std::fmt::Write as _;
use std::sync::Arc;

use super::session::SuiteRun;
use crate::load::estimate::Estimate;
use crate::record::{Comparison, Row, Stage};
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
                let key = t.threshold.key;
                let figure = key.to_string();
                if out.iter().any(|c: &Comparison| {
                    c.suite == suite.name && c.gate == gate.name && c.figure == figure
                }) {
                    continue;
                }
                let higher = matches!(t.threshold.op, Op::Ge | Op::Gt);
                let estimates: Vec<(String, Estimate, Option<String>)> = variants
                    .iter()
                    .filter_map(|r| {
                        let f = r.figures().into_iter().find(|f| f.gate == gate.name)?;
                        let values = f.repeat_values.get(key)?.clone();
                        let name = r.variant.as_ref()?.name.clone();
                        (!values.is_empty())
                            .then(|| (name, Estimate::of(values), excluded(r, &gate.name)))
                    })
                    .collect();
                if estimates.is_empty() {
                    continue;
                }
                let first = estimates[0].1.clone();
                let rows: Vec<Row> = estimates
                    .iter()
                    .enumerate()
                    .map(|(i, (variant, e, excluded))| Row {
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
                        excluded: excluded.clone(),
                    })
                    .collect();
                // `!=` has no better side: its rows are shown, none crowned.
                let sided = t.threshold.op != Op::Ne;
                let (best, no_best) = match pick_best(&rows, higher) {
                    _ if !sided => (None, Some("`!=` has no better side".to_owned())),
                    Some(Ok(best)) => (Some(best), None),
                    Some(Err(why)) => (None, Some(why)),
                    None => (None, None),
                };
                out.push(Comparison {
                    suite: suite.name.clone(),
                    gate: gate.name.clone(),
                    figure,
                    better: match (sided, higher) {
                        (false, _) => "neither",
                        (true, true) => "higher",
                        (true, false) => "lower",
                    }
                    .to_owned(),
                    rows,
                    best,
                    no_best,
                });
            }
        }
    }
    out
}

/// Why variant run `r` cannot be the best of gate `gate`: a trial before
/// the gates (a config check, a probe, a snapshot), the gate itself or its
/// recheck did not pass; `None` when it is a candidate.
fn excluded(r: &SuiteRun, gate: &str) -> Option<String> {
    // The gate's trial, and its own (its recheck).
    r.outcomes()
        .iter()
        .find(|t| !t.outcome.passed() && (t.id.stage != Stage::Performance || t.id.item == gate))
        .map(|t| format!("`{}` {}", t.name, t.outcome.name()))
}

/// The best of several variants' rows (`None` for fewer than two): `Ok`
/// with its name when it stands out, `Err` with why none does — a variant
/// that failed or was gated is no candidate; fewer than two candidates, a
/// tie as shown, no interval (one repeat: a difference cannot be told from
/// noise), or 95% intervals that overlap the runner-up's (within noise).
fn pick_best(rows: &[Row], higher: bool) -> Option<Result<String, String>> {
    if rows.len() < 2 {
        return None;
    }
    let out: Vec<String> = rows
        .iter()
        .filter(|r| r.excluded.is_some())
        .map(|r| format!("`{}`", r.variant))
        .collect();
    let mut order: Vec<&Row> = rows.iter().filter(|r| r.excluded.is_none()).collect();
    if order.len() < 2 {
        let left = order.first().map_or_else(
            || "no variant is left to compare".to_owned(),
            |r| {
                format!(
                    "only `{}` is left, with nothing to compare it with",
                    r.variant
                )
            },
        );
        return Some(Err(format!(
            "{} failed or {} gated, so {} no candidate; {left}",
            and_list(&out),
            if out.len() == 1 { "was" } else { "were" },
            if out.len() == 1 { "it is" } else { "they are" },
        )));
    }
    order.sort_by(|a, b| {
        let by = a.value.total_cmp(&b.value);
        if higher { by.reverse() } else { by }
    });
    let (best, runner_up) = (order[0], order[1]);
    let tied: Vec<String> = order
        .iter()
        .filter(|r| r.shown == best.shown)
        .map(|r| format!("`{}`", r.variant))
        .collect();
    if tied.len() > 1 {
        return Some(Err(format!("{} tie at {}", and_list(&tied), best.shown)));
    }
    if let Some(once) = order.iter().find(|r| r.ci95.is_none()) {
        return Some(Err(format!(
            "`{}` ran {} time{}: without an interval a difference cannot be told from noise (set the gate's `repeats: 3` or more)",
            once.variant,
            once.repeats,
            if once.repeats == 1 { "" } else { "s" }
        )));
    }
    if let (Some((lo, hi)), Some((rlo, rhi))) = (best.ci95, runner_up.ci95)
        && lo <= rhi
        && rlo <= hi
    {
        return Some(Err(format!(
            "`{}` and `{}` are within noise (their 95% intervals overlap)",
            best.variant, runner_up.variant
        )));
    }
    Some(Ok(best.variant.clone()))
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
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
            let excluded = r
                .excluded
                .as_ref()
                .map_or_else(String::new, |why| format!("  (no candidate: {why})"));
            let _ = writeln!(
                out,
                "      {:<16} {:>14}  (n={}){delta}{excluded}",
                r.variant, r.shown, r.repeats
            );
        }
        if let Some(best) = &c.best {
            let _ = writeln!(out, "      best: `{best}`");
        }
        if let Some(why) = &c.no_best {
            let _ = writeln!(out, "      no best: {why}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(variant: &str, value: f64, shown: &str, ci95: Option<(f64, f64)>) -> Row {
        Row {
            variant: variant.into(),
            value,
            shown: shown.into(),
            repeats: if ci95.is_some() { 3 } else { 1 },
            ci95,
            delta_pct: None,
            beyond_noise: None,
            excluded: None,
        }
    }

    #[test]
    fn a_best_variant_only_where_one_stands_out() {
        // Apart: the higher wins where higher is better, the lower otherwise.
        let apart = [
            row("a", 100.0, "100.0 tok/s", Some((98.0, 102.0))),
            row("b", 120.0, "120.0 tok/s", Some((118.0, 122.0))),
        ];
        assert_eq!(pick_best(&apart, true), Some(Ok("b".into())));
        assert_eq!(pick_best(&apart, false), Some(Ok("a".into())));
        // Overlapping intervals: within noise, whichever mean is higher.
        let close = [
            row("a", 100.0, "100.0 tok/s", Some((95.0, 105.0))),
            row("b", 103.0, "103.0 tok/s", Some((99.0, 107.0))),
        ];
        assert_eq!(
            pick_best(&close, true),
            Some(Err(
                "`b` and `a` are within noise (their 95% intervals overlap)".into()
            ))
        );
        // The same as shown: a tie, whatever the noise.
        let tie = [
            row("a", 0.0, "0", None),
            row("b", 0.0, "0", None),
            row("c", 0.0, "0", None),
        ];
        assert_eq!(
            pick_best(&tie, false),
            Some(Err("`a`, `b` and `c` tie at 0".into()))
        );
        // One repeat each: no interval, so no winner however far apart.
        let once = [
            row("a", 1.0, "1.0 tok/s", None),
            row("b", 2.0, "2.0 tok/s", None),
        ];
        assert_eq!(
            pick_best(&once, true),
            Some(Err("`b` ran 1 time: without an interval a difference cannot be told from noise (set the gate's `repeats: 3` or more)".into()))
        );
        assert_eq!(pick_best(&once[..1], true), None);
        // The fastest failed its probes: never the best, whatever its figure.
        let mut failed = apart.clone();
        failed[1].excluded = Some("`s[b]::correctness::p` failed".into());
        assert_eq!(
            pick_best(&failed, true),
            Some(Err("`b` failed or was gated, so it is no candidate; only `a` is left, with nothing to compare it with".into()))
        );
        let mut three = apart.to_vec();
        three.push(row("c", 150.0, "150.0 tok/s", Some((149.0, 151.0))));
        three[2].excluded = Some("`s[c]::performance::g` gated".into());
        assert_eq!(pick_best(&three, true), Some(Ok("b".into())));
    }
}
