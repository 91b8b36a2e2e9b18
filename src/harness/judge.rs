//! Verdicts of performance gates: every threshold against the figures of
//! every repeat, and a failure message that shows them all.

use std::fmt::Write as _;

use super::gates::describe_load;
use std::collections::BTreeMap;

use crate::check::message::Message;
use crate::load::baseline::Lookup;
use crate::load::estimate::Estimate;
use crate::load::metrics::GateMetrics;
use crate::record::{ThresholdRecord, ThresholdVerdict};
use crate::suite::metric::{Metric, MetricKey, format_value};
use crate::suite::threshold::{Bound, Op, Threshold};
use crate::suite::{
    Curve, Gate, LocatedThreshold, OnClientLimited, SourceFile, Suite, VerdictMode,
};

/// A gate's verdict and one line per threshold for the summary.
pub struct Judgement {
    /// `Err`: the whole failure message.
    pub result: Result<(), Message>,
    /// Each threshold's verdict (its line as printed and as data), then
    /// the client self-check's row.
    pub checks: Vec<ThresholdRecord>,
}

/// The thresholds that apply, each with whether it is implicit: the
/// gate's, plus `errors == 0` unless the gate states its own error bound.
fn thresholds(gate: &Gate) -> Vec<(LocatedThreshold, bool)> {
    let mut all: Vec<(LocatedThreshold, bool)> =
        gate.thresholds.iter().map(|t| (t.clone(), false)).collect();
    if !all
        .iter()
        .any(|(t, _)| t.threshold.key.metric == Metric::Errors)
    {
        all.push((
            LocatedThreshold {
                threshold: Threshold {
                    key: MetricKey {
                        metric: Metric::Errors,
                        stat: None,
                    },
                    op: Op::Eq,
                    bound: Bound::Value(0.0),
                },
                loc: gate.loc,
            },
            true,
        ));
    }
    all
}

/// Whether an estimate meets a (resolved) bound under a verdict mode.
fn holds(t: &Threshold, bound: f64, e: &Estimate, mode: VerdictMode) -> bool {
    let Some((lo, hi)) = e.ci95 else {
        return t.op.holds(e.mean, bound);
    };
    // The end of the interval that decides: the optimistic one when only a
    // whole interval past the bound may fail, the pessimistic one otherwise.
    let (optimistic, pessimistic) = match t.op {
        Op::Ge | Op::Gt => (hi, lo),
        Op::Le | Op::Lt => (lo, hi),
        Op::Eq => {
            return match mode {
                VerdictMode::Mean => t.op.holds(e.mean, bound),
                VerdictMode::Lenient => lo <= bound && bound <= hi,
                VerdictMode::Strict => e.values.iter().all(|v| t.op.holds(*v, bound)),
            };
        }
    };
    match mode {
        VerdictMode::Mean => t.op.holds(e.mean, bound),
        VerdictMode::Lenient => t.op.holds(optimistic, bound),
        VerdictMode::Strict => t.op.holds(pessimistic, bound),
    }
}

/// Counts add up over repeats; every other figure is estimated from them.
fn estimate(key: MetricKey, repeats: &[GateMetrics]) -> Option<Estimate> {
    let values: Option<Vec<f64>> = repeats.iter().map(|m| m.value(key)).collect();
    Some(crate::load::estimate::combine(key.metric, values?))
}

fn describe(metric: Metric, e: &Estimate) -> String {
    let v = |x: f64| format_value(metric, x);
    match e.ci95 {
        None => v(e.mean),
        Some((lo, hi)) => format!(
            "{} ± {} (95% CI {} … {}, {} repeats)",
            v(e.mean),
            v(e.stddev),
            v(lo),
            v(hi),
            e.values.len()
        ),
    }
}

/// Where relative bounds find their reference figures.
#[derive(Debug, Clone, Copy)]
pub struct References<'a> {
    /// The gate's baseline.
    pub baseline: &'a Lookup,
    /// The variant being judged, if the suite has variants.
    pub variant: Option<&'a str>,
    /// The figures (means over repeats) this gate measured in the variants
    /// that ran before, or why one has none.
    pub variants: &'a [VariantFigures],
    /// `baseline save` is recording this run's figures: its `baseline`
    /// bounds are not applied (the first save has none to compare with, a
    /// later one replaces them).
    pub recording_baselines: bool,
    /// What figures the client's self-check found client-limited do.
    pub client_limited: OnClientLimited,
}

/// A variant's name and the figures a gate measured in it, or why none.
pub type VariantFigures = (String, Result<BTreeMap<String, f64>, String>);

impl References<'_> {
    /// Why `t` is not judged in this run: its bound is the variant being
    /// judged, or a baseline this run records.
    fn not_applied(&self, t: &Threshold) -> Option<String> {
        match &t.bound {
            Bound::Variant(name, _) if self.variant == Some(name.as_str()) => {
                Some(format!("this is variant `{name}`"))
            }
            Bound::Baseline(_) if self.recording_baselines => {
                Some("this run records the baselines".to_owned())
            }
            _ => None,
        }
    }

    /// The figure a relative bound starts from (`None` for a fixed bound).
    fn reference(&self, t: &Threshold) -> Option<Result<f64, String>> {
        match &t.bound {
            Bound::Value(_) => None,
            Bound::Baseline(_) => Some(self.baseline.figure(t.key)),
            Bound::Variant(name, _) => Some(self.variant_figure(name, t.key)),
        }
    }

    fn variant_figure(&self, name: &str, key: MetricKey) -> Result<f64, String> {
        let (_, figures) = self
            .variants
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| {
                format!("variant `{name}` has not run before this one (variants run in file order)")
            })?;
        let figures = figures.as_ref().map_err(Clone::clone)?;
        figures
            .get(&key.to_string())
            .copied()
            .ok_or_else(|| format!("variant `{name}` measured no figure `{key}`"))
    }
}

/// ` = <bound> from baseline <figure>`: how a relative bound was made.
fn against(t: &Threshold, reference: Option<&Result<f64, String>>, bound: Option<&f64>) -> String {
    let (Some(Ok(r)), Some(b)) = (reference, bound) else {
        return String::new();
    };
    let m = t.key.metric;
    match &t.bound {
        Bound::Value(_) => String::new(),
        Bound::Baseline(_) => format!(
            " = {} from baseline {}",
            format_value(m, *b),
            format_value(m, *r)
        ),
        Bound::Variant(name, _) => format!(
            " = {} from variant `{name}`'s {}",
            format_value(m, *b),
            format_value(m, *r)
        ),
    }
}

/// Why a figure of `metric` is missing from a gate's repeats.
fn unmeasured(metric: Metric, repeats: &[GateMetrics]) -> String {
    if let Some(why) = repeats.iter().find_map(|m| m.missing(metric)) {
        return why;
    }
    let completed: u64 = repeats.iter().map(|m| m.completed).sum();
    match metric.spec().needs {
        Some(needs) if completed > 0 => {
            format!("{completed} requests succeeded, but this figure needs {needs}")
        }
        _ => "no successful request produced this figure".to_owned(),
    }
}
/// The client's self-check of a gate: its row for the summary, and the
/// error (in `out`) of figures the client distorted, which never pass
/// silently.
fn self_check(
    suite: &Suite,
    gate: &Gate,
    repeats: &[GateMetrics],
    refs: &References<'_>,
    out: &mut Message,
) -> Option<(String, bool)> {
    let last = repeats.last()?;
    let check = repeats
        .iter()
        .map(|m| &m.client)
        .find(|c| c.limited.is_some())
        .or_else(|| Some(&last.client).filter(|c| !c.threads.is_empty()))?;
    let failure = check.failure();
    let fails = failure.is_some() && refs.client_limited == OnClientLimited::Fail;
    let warned = if failure.is_some() && !fails {
        " (client_limited: warn: judged anyway)"
    } else {
        ""
    };
    if let Some(why) = failure.filter(|_| fails) {
        out.error(why);
        out.at(&suite.file, gate.loc);
        let _ = writeln!(
            out,
            "  = `load.client_threads: N` or `--client-threads N` adds threads; `load.client_limited: warn` judges these figures anyway, marked client-limited\n"
        );
    }
    Some((format!("{}{warned}", check.summary()), !fails))
}

/// What makes a gate's figures unsure whatever its thresholds say: a
/// repeat in which every request failed, a load cut short, bytes the
/// server sent unasked.
fn unmeasurable(file: &SourceFile, gate: &Gate, repeats: &[GateMetrics], out: &mut Message) {
    if let Some(empty) = repeats.iter().position(|m| m.completed == 0) {
        let which = if repeats.len() > 1 {
            format!(" of repeat {}", empty + 1)
        } else {
            String::new()
        };
        out.error(format_args!(
            "could not measure: all {} requests{which} failed, so no figure exists",
            repeats[empty].errors
        ));
        out.at(file, gate.loc);
        let _ = writeln!(out);
    }
    // A gate cut short never passes: its figures are what it measured
    // before it stopped, kept in the record, but its load did not run.
    if let Some(why) = repeats.iter().find_map(|m| m.stopped_early.as_deref()) {
        out.error(why);
        out.at(file, gate.loc);
        let _ = writeln!(
            out,
            "  = the figures measured before it stopped are in the record; `load.abort_after` sets how many (0: never stop)\n"
        );
    }
    // Bytes sent unasked on a kept-alive connection: an answer read on
    // one may have been another request's, so no figure of it is sure.
    let unsolicited: u64 = repeats.iter().map(|m| m.unsolicited).sum();
    if unsolicited > 0 {
        out.error(format_args!("the server sent bytes no request asked for on {unsolicited} kept-alive connection{}: an answer read on one may have been another request's",
            if unsolicited == 1 { "" } else { "s" }
        ));
        out.at(file, gate.loc);
        let _ = writeln!(
            out,
            "  = servegate closed each such connection without reading them as an answer; the server (or a proxy before it) wrote a response, or part of one, before it was asked\n"
        );
    }
}

/// What a threshold was judged with.
struct Figures<'a> {
    bound: Option<f64>,
    reference: Option<f64>,
    est: Option<&'a Estimate>,
    not_applied: Option<String>,
}

impl Figures<'_> {
    /// The verdict on `lt` as data.
    fn verdict(self, lt: &LocatedThreshold, implicit: bool) -> ThresholdVerdict {
        let t = &lt.threshold;
        ThresholdVerdict {
            key: t.key.to_string(),
            op: t.op.symbol().to_owned(),
            bound: self.bound,
            reference: self.reference,
            measured: self.est.map(|e| e.mean),
            repeats: self
                .est
                .filter(|e| e.values.len() > 1)
                .map_or_else(Vec::new, |e| e.values.clone()),
            unit: t.key.metric.unit().to_owned(),
            line: lt.loc.line,
            implicit,
            not_applied: self.not_applied,
        }
    }
}

/// A failed gate's errors and the figures of its last repeat.
fn write_figures(out: &mut Message, repeats: &[GateMetrics]) {
    let last = repeats.last().expect("at least one repeat");
    if last.errors > 0 {
        let classes: Vec<String> = last
            .error_classes
            .iter()
            .map(|(c, n)| format!("{c} ×{n}"))
            .collect();
        let _ = writeln!(out, "errors:   {} ({})", last.errors, classes.join(", "));
        for e in &last.first_errors {
            let _ = writeln!(out, "  - {}", e.replace('\n', "\n    "));
        }
    }
    let which = if repeats.len() > 1 {
        format!(" (repeat {} of {})", repeats.len(), repeats.len())
    } else {
        String::new()
    };
    let _ = write!(out, "figures{which}:\n{}", last.render());
}

/// Judges a gate from the figures of its repeats (at least one).
pub fn judge(
    suite: &Suite,
    gate: &Gate,
    repeats: &[GateMetrics],
    refs: &References<'_>,
) -> Judgement {
    let baseline = refs.baseline;
    let file = &suite.file;
    let last = repeats.last().expect("at least one repeat");
    let mut out = Message::new();
    let mut checks = Vec::new();
    unmeasurable(file, gate, repeats, &mut out);
    // Its row comes after the thresholds'.
    let self_check = self_check(suite, gate, repeats, refs, &mut out);
    let mode = if repeats.len() > 1 {
        Some(gate.verdict)
    } else {
        None
    };
    for (lt, implicit) in thresholds(gate) {
        let t = &lt.threshold;
        let verdict = |bound, reference, est, not_applied| {
            Figures {
                bound,
                reference,
                est,
                not_applied,
            }
            .verdict(&lt, implicit)
        };
        if let Some(why) = refs.not_applied(t) {
            checks.push(ThresholdRecord {
                check: format!("{t} (not applied: {why})"),
                passed: true,
                threshold: Some(verdict(None, None, None, Some(why))),
            });
            continue;
        }
        let est = estimate(t.key, repeats);
        // A relative bound needs its reference figure; without it the
        // threshold cannot pass.
        let reference = refs.reference(t);
        let resolved = match (&t.bound, &reference) {
            (Bound::Value(v), _) => Ok(*v),
            (Bound::Baseline(r) | Bound::Variant(_, r), Some(Ok(b))) => Ok(r.apply(*b)),
            (_, Some(Err(e))) => Err(e.clone()),
            (_, None) => Err("no reference".to_owned()),
        };
        let pass = match (&est, &resolved) {
            (Some(e), Ok(bound)) => holds(t, *bound, e, gate.verdict),
            _ => false,
        };
        let measured = est
            .as_ref()
            .map_or_else(|| "nothing".into(), |e| describe(t.key.metric, e));
        let against = against(t, reference.as_ref(), resolved.as_ref().ok());
        checks.push(ThresholdRecord {
            check: format!("{t}{against} (measured {measured})"),
            passed: pass,
            threshold: Some(verdict(
                resolved.as_ref().ok().copied(),
                reference.as_ref().and_then(|r| r.as_ref().ok()).copied(),
                est.as_ref(),
                None,
            )),
        });
        if pass {
            continue;
        }
        out.error(format_args!(
            "threshold failed: {t}{}{}",
            mode.map_or_else(String::new, |m| format!(" (verdict: {})", m.name())),
            if implicit {
                " (implicit: a gate fails on any error unless it states an `errors` bound)"
            } else {
                ""
            }
        ));
        out.at(file, lt.loc);
        let _ = writeln!(out, "measured: {} = {measured}", t.key);
        if repeats.len() > 1 {
            let each: Vec<String> = repeats
                .iter()
                .map(|m| {
                    m.value(t.key)
                        .map_or_else(|| "nothing".into(), |v| format_value(t.key.metric, v))
                })
                .collect();
            let _ = writeln!(out, "repeats:  {}", each.join(", "));
        }
        if est.is_none() {
            let _ = writeln!(out, "          {}", unmeasured(t.key.metric, repeats));
        }
        match (&t.bound, &resolved) {
            (Bound::Value(_), _) => {
                let _ = writeln!(out, "bound:    {t}");
            }
            (Bound::Variant(..), Ok(_)) => {
                let _ = writeln!(out, "bound:    {t}{against}");
            }
            (Bound::Variant(..), Err(why)) => {
                let _ = writeln!(out, "bound:    {t}, but it has no reference: {why}");
            }
            (Bound::Baseline(_), Ok(_)) => {
                let _ = writeln!(out, "bound:    {t}{against}");
                let _ = writeln!(
                    out,
                    "          ({}, configuration {})",
                    baseline.path.display(),
                    baseline.fingerprint
                );
            }
            (Bound::Baseline(_), Err(why)) => {
                let _ = writeln!(out, "bound:    {t}, but there is no baseline: {why}");
                let _ = writeln!(
                    out,
                    "          record one on the reference configuration with `servegate baseline save` (or `baseline accept` after a run)"
                );
            }
        }
        let _ = writeln!(
            out,
            "samples:  {}{}",
            last.sample_size(t.key),
            if repeats.len() > 1 { " per repeat" } else { "" }
        );
        let _ = writeln!(out);
    }
    checks.extend(self_check.map(|(check, passed)| ThresholdRecord {
        check,
        passed,
        threshold: None,
    }));
    if out.is_empty() {
        return Judgement {
            result: Ok(()),
            checks,
        };
    }
    let _ = writeln!(out, "load:     {}", describe_load(gate));
    write_figures(&mut out, repeats);
    Judgement {
        result: Err(out),
        checks,
    }
}

/// Judges the checks of a sweep's curve over the figures of its levels.
pub fn judge_curve(
    suite: &Suite,
    curve: &Curve,
    rows: &[(&str, GateMetrics)],
) -> Result<(), Message> {
    let file = &suite.file;
    let mut out = Message::new();
    for check in &curve.checks {
        let values: Vec<(&str, Option<f64>)> =
            rows.iter().map(|(l, m)| (*l, m.value(check.key))).collect();
        let shown: Vec<String> = values
            .iter()
            .map(|(l, v)| {
                format!(
                    "{l} {}",
                    v.map_or_else(|| "nothing".into(), |v| format_value(check.key.metric, v))
                )
            })
            .collect();
        let broken = values.windows(2).find_map(|w| {
            let ((from, a), (to, b)) = (w[0], w[1]);
            let (Some(a), Some(b)) = (a, b) else {
                return Some(format!("{to} has no value"));
            };
            let slack = a.abs() * check.tolerance / 100.0;
            let ok = if check.rising {
                b >= a - slack
            } else {
                b <= a + slack
            };
            (!ok).then(|| {
                let change = if a == 0.0 {
                    0.0
                } else {
                    100.0 * (b - a) / a.abs()
                };
                format!("{change:+.1}% from {from} to {to}")
            })
        });
        if let Some(step) = broken {
            let direction = if check.rising {
                "non_decreasing"
            } else {
                "non_increasing"
            };
            out.error(format_args!(
                "curve failed: {} should be {direction}{} across the levels of `{}`",
                check.key,
                if check.tolerance > 0.0 {
                    format!(" within {}%", check.tolerance)
                } else {
                    String::new()
                },
                curve.gate
            ));
            out.at(file, check.loc);
            let _ = writeln!(out, "levels:   {}", shown.join(" → "));
            let _ = writeln!(out, "broken:   {step}\n");
        }
    }
    if out.is_empty() { Ok(()) } else { Err(out) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{Completion, Timing};
    use crate::suite::load_text;
    use std::path::Path;
    use std::time::Duration;

    /// Figures of a repeat in which `tokens` tokens streamed in one second.
    fn repeat(tokens: u64) -> GateMetrics {
        let c = Completion {
            completion_tokens: tokens,
            timing: Timing {
                first_token: Some(Duration::from_millis(10)),
                end: Duration::from_secs(1),
                ..Timing::default()
            },
            ..Completion::default()
        };
        GateMetrics::compute(&[c], &[], Duration::from_secs(1))
    }

    fn no_baseline() -> Lookup {
        Lookup::find(Path::new("/nonexistent"), "n", &["g"], "test")
    }

    fn refs(baseline: &Lookup) -> References<'_> {
        References {
            baseline,
            variant: None,
            variants: &[],
            recording_baselines: false,
            client_limited: OnClientLimited::Fail,
        }
    }

    fn noisy_gate(verdict: &str) -> (Suite, Gate) {
        let text = format!(
            "suite: n\nperformance:\n  - name: g\n    repeats: 5\n    verdict: {verdict}\n    load: {{requests: 1, prompt: x, output_tokens: 8}}\n    thresholds:\n      output_tok_s: \">= 500\"\n"
        );
        let suite = load_text(Path::new("n.yaml"), &text, &|_| None).unwrap();
        let gate = suite.gates[0].clone();
        (suite, gate)
    }

    #[test]
    fn a_noisy_gate_passes_leniently_and_fails_strictly() {
        // Mean 499 tok/s, spread ±16: noise around the bound of 500.
        let repeats: Vec<GateMetrics> = [480, 520, 495, 510, 490].into_iter().map(repeat).collect();
        let (suite, gate) = noisy_gate("lenient");
        let j = judge(&suite, &gate, &repeats, &refs(&no_baseline()));
        assert!(j.result.is_ok(), "{:?}", j.result);
        assert!(
            j.checks[0]
                .check
                .contains("499.0 tok/s ± 16.0 tok/s (95% CI 479.2 tok/s … 518.8 tok/s, 5 repeats)"),
            "{:?}",
            j.checks
        );
        // The same verdict as data.
        let v = j.checks[0].threshold.as_ref().expect("a threshold's row");
        assert_eq!(
            (v.key.as_str(), v.op.as_str(), v.bound, v.unit.as_str()),
            ("output_tok_s", ">=", Some(500.0), "tok/s")
        );
        assert!((v.measured.unwrap() - 499.0).abs() < 1e-9, "{v:?}");
        assert_eq!(v.repeats, [480.0, 520.0, 495.0, 510.0, 490.0]);
        assert!(!v.implicit && v.not_applied.is_none());
        let errors = j.checks[1].threshold.as_ref().expect("the implicit row");
        assert_eq!((errors.key.as_str(), errors.implicit), ("errors", true));
        assert_eq!(
            j.checks.len(),
            2,
            "no self-check row without client threads"
        );
        let (suite, gate) = noisy_gate("mean");
        assert!(
            judge(&suite, &gate, &repeats, &refs(&no_baseline()))
                .result
                .is_err()
        );
        let (suite, gate) = noisy_gate("strict");
        let message = judge(&suite, &gate, &repeats, &refs(&no_baseline()))
            .result
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with(
                "error: threshold failed: output_tok_s >= 500.0 tok/s (verdict: strict)"
            ),
            "{message}"
        );
        assert!(
            message.contains(
                "repeats:  480.0 tok/s, 520.0 tok/s, 495.0 tok/s, 510.0 tok/s, 490.0 tok/s"
            ),
            "{message}"
        );
        assert!(message.contains("figures (repeat 5 of 5):"), "{message}");
        // Far below the bound, even the lenient verdict fails.
        let slow: Vec<GateMetrics> = [300, 310, 305].into_iter().map(repeat).collect();
        let (suite, gate) = noisy_gate("lenient");
        assert!(
            judge(&suite, &gate, &slow, &refs(&no_baseline()))
                .result
                .is_err()
        );
    }

    fn threshold(op: Op, bound: f64) -> Threshold {
        Threshold {
            key: "output_tok_s".parse().unwrap(),
            op,
            bound: Bound::Value(bound),
        }
    }

    fn check(t: &Threshold, e: &Estimate, mode: VerdictMode) -> bool {
        let Bound::Value(bound) = t.bound else {
            panic!("a fixed bound")
        };
        holds(t, bound, e, mode)
    }

    #[test]
    fn verdict_modes_read_the_interval() {
        // 100 ± 4.3 (95% CI about 95.0 … 105.0)
        let e = Estimate::of(vec![98.0, 100.0, 102.0]);
        let at_least = |b| threshold(Op::Ge, b);
        assert!(check(&at_least(99.0), &e, VerdictMode::Mean));
        assert!(!check(&at_least(101.0), &e, VerdictMode::Mean));
        // Lenient: fails only when the whole interval is below the bound.
        assert!(check(&at_least(104.0), &e, VerdictMode::Lenient));
        assert!(!check(&at_least(106.0), &e, VerdictMode::Lenient));
        // Strict: passes only when the whole interval is above the bound.
        assert!(!check(&at_least(96.0), &e, VerdictMode::Strict));
        assert!(check(&at_least(94.0), &e, VerdictMode::Strict));
        // Upper bounds read the other end.
        assert!(check(&threshold(Op::Le, 96.0), &e, VerdictMode::Lenient));
        assert!(!check(&threshold(Op::Le, 104.0), &e, VerdictMode::Strict));
    }
}
