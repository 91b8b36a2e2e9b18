//! Verdicts of performance gates: every threshold against the figures of
//! every repeat, and a failure message that shows them all.

use std::fmt::Write as _;

use crate::check::message::Message;
use crate::load::estimate::Estimate;
use crate::load::metrics::GateMetrics;
use crate::load::selfcheck;
use crate::record::{FailureCause, ThresholdRecord};
use crate::suite::metric::{Metric, MetricKey, format_value};
use crate::suite::threshold::{Bound, Op, Threshold};
use crate::suite::{Gate, LocatedThreshold, Suite, VerdictMode};

/// A gate's verdict and one line per threshold for the summary.
pub(crate) struct Judgement {
    /// `Err`: the whole failure message.
    pub result: Result<(), Message>,
    /// Each threshold's verdict (its line as printed and as data), then
    /// the client self-check's row.
    pub checks: Vec<ThresholdRecord>,
}

impl Judgement {
    /// Why the gate failed, as data: the verdicts of the thresholds that
    /// failed, and whether the client self-check's row failed it; `None`
    /// when neither did (the load measured nothing a threshold could read,
    /// which the message says).
    pub fn cause(&self) -> Option<FailureCause> {
        let failed: Vec<_> = self
            .checks
            .iter()
            .filter(|c| !c.passed)
            .filter_map(|c| c.threshold.clone())
            .collect();
        let client_at_stake = self
            .checks
            .iter()
            .any(|c| !c.passed && c.threshold.is_none());
        (!failed.is_empty() || client_at_stake).then_some(FailureCause::Thresholds {
            failed,
            client_at_stake,
        })
    }
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
        // A point: only `lenient` reads the interval, and fails only where
        // all of it is past the bound (`==`: the bound outside it; `!=`:
        // nothing but the bound in it).
        Op::Eq | Op::Ne => {
            let interval_holds = match t.op {
                // The bound's own tolerance at either end, as `!=` reads
                // it: the two are complements over a point interval.
                Op::Eq => {
                    (lo <= bound && bound <= hi)
                        || Op::Eq.holds(lo, bound)
                        || Op::Eq.holds(hi, bound)
                }
                _ => !(Op::Eq.holds(lo, bound) && Op::Eq.holds(hi, bound)),
            };
            return match mode {
                VerdictMode::Mean => t.op.holds(e.mean, bound),
                VerdictMode::Lenient => interval_holds,
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

/// The most the client can have moved a figure over the repeats, by its
/// self-check; `None` where nothing bounds it.
fn client_error(key: MetricKey, repeats: &[GateMetrics]) -> Option<f64> {
    repeats
        .iter()
        .filter_map(|m| m.client.figures.iter().find(|f| f.figure == key)?.bound)
        .reduce(f64::max)
}

/// Counts add up over repeats; every other figure is estimated from them.
fn estimate(key: MetricKey, repeats: &[GateMetrics]) -> Option<Estimate> {
    let values: Option<Vec<f64>> = repeats.iter().map(|m| m.value(key)).collect();
    Some(crate::load::estimate::combine(key.metric, values?))
}

/// Judges a gate from the figures of its repeats (at least one).
///
/// The client's self-check of each repeat is decided here, where each
/// threshold's bound is known: it fails the gate only where the client's
/// error could have changed a verdict
/// ([`crate::load::selfcheck::at_stake`]).
pub fn judge(
    suite: &Suite,
    gate: &Gate,
    repeats: &mut [GateMetrics],
    refs: &References<'_>,
) -> Judgement {
    let file = &suite.file;
    // Each threshold with its estimate, and its resolved bound or why it
    // is not applied.
    let plan: Vec<_> = thresholds(gate)
        .into_iter()
        .map(|(lt, implicit)| {
            let est = estimate(lt.threshold.key, repeats);
            let resolution = match refs.not_applied(&lt.threshold) {
                Some(why) => Err(why),
                None => Ok(resolve(&lt.threshold, est.as_ref(), refs)),
            };
            (lt, implicit, est, resolution)
        })
        .collect();
    // Whether the client's error could change a verdict, each threshold
    // over every repeat as its verdict reads them; said by the last
    // repeat's check (the record's).
    let stakes: Vec<String> = plan
        .iter()
        .filter_map(|(lt, _, _, resolution)| {
            let t = &lt.threshold;
            let bound = *resolution.as_ref().ok()?.resolved.as_ref().ok()?;
            let each: Option<Vec<(f64, &selfcheck::ClientCheck)>> = repeats
                .iter()
                .map(|m| Some((m.value(t.key)?, &m.client)))
                .collect();
            selfcheck::at_stake(t.key, t.op, bound, gate.verdict, &each?)
        })
        .collect();
    for m in repeats.iter_mut() {
        m.client.at_stake = None;
    }
    if let Some(last) = repeats.last_mut() {
        last.client.at_stake = (!stakes.is_empty()).then(|| stakes.join("; "));
    }
    let repeats = &*repeats;
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
    for (lt, implicit, est, resolution) in plan {
        let t = &lt.threshold;
        // What each repeat measured, as the failure message lists it.
        let each: Vec<f64> = if repeats.len() > 1 {
            repeats.iter().filter_map(|m| m.value(t.key)).collect()
        } else {
            Vec::new()
        };
        let verdict = |bound, reference, reference_from, not_applied| {
            Judged {
                bound,
                reference,
                est: est.as_ref(),
                repeats: each.clone(),
                not_applied,
                client_error: client_error(t.key, repeats),
                reference_from,
            }
            .verdict(&lt, implicit)
        };
        let Resolution {
            reference,
            history,
            resolved,
        } = match resolution {
            Ok(r) => r,
            Err(why) => {
                let verdict = verdict(None, None, None, Some(why));
                checks.push(ThresholdRecord {
                    check: verdict.to_string(),
                    passed: true,
                    threshold: Some(verdict),
                });
                continue;
            }
        };
        let pass = match (&est, &resolved) {
            (Some(e), Ok(bound)) => holds(t, *bound, e, gate.verdict),
            _ => false,
        } && history.as_ref().is_none_or(|h| h.fails.is_none());
        let verdict = verdict(
            resolved.as_ref().ok().copied(),
            reference.as_ref().and_then(|r| r.as_ref().ok()).copied(),
            reference_from(t, history.as_ref()),
            None,
        );
        let (measured, against) = (verdict.measured_text(), verdict.against());
        checks.push(ThresholdRecord {
            check: verdict.to_string(),
            passed: pass,
            threshold: Some(verdict),
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
        explain_bound(&mut out, t, &resolved, &against, refs, history.as_ref());
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

mod curve;
mod message;
mod references;
mod words;
pub use curve::judge_curve;
use message::{Judged, explain_bound, self_check, unmeasurable, unmeasured, write_figures};
pub use references::{NoReference, References, VariantFigures};
use references::{Resolution, reference_from, resolve};
pub use words::describe_load;

#[cfg(test)]
mod tests;
