//! Verdicts of performance gates: every threshold against the figures of
//! every repeat, and a failure message that shows them all.

use std::fmt::Write as _;

use crate::check::message::Message;
use crate::history::gate::{GateHistory, Reference};
use crate::load::baseline::Lookup;
use crate::load::estimate::Estimate;
use crate::load::metrics::GateMetrics;
use crate::load::selfcheck;
use crate::load::workload::PROMPT_APPROXIMATION;
use crate::record::{ThresholdRecord, ThresholdVerdict};
use crate::suite::figures::Figures;
use crate::suite::metric::{Metric, MetricKey, format_value};
use crate::suite::threshold::{Bound, Op, Threshold};
use crate::suite::{
    Arrival, Gate, LoadPrompt, LocatedThreshold, OnClientLimited, Pace, SourceFile, Suite,
    VerdictMode,
};
use crate::units::format_duration;

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

fn describe(key: MetricKey, e: &Estimate) -> String {
    let v = |x: f64| format_value(key.metric, x);
    // A percentile of the server's histogram is its bucket's bound.
    let at_most = if key.is_bucket_bound() { "≤ " } else { "" };
    match e.ci95 {
        None => format!("{at_most}{}", v(e.mean)),
        Some((lo, hi)) => format!(
            "{at_most}{} ± {} (95% CI {} … {}, {} repeats)",
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
    /// The gate's earlier runs, where a threshold reads them (`None`:
    /// none does, or the history is off).
    pub history: Option<&'a GateHistory>,
}

/// A variant's name and the figures a gate measured in it, or why none.
pub type VariantFigures = (String, Result<Figures, String>);

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
            Bound::History(..) | Bound::NoRegression => match self.history {
                None => Some("the history is off".to_owned()),
                Some(h) => match self.history_reference(t, None) {
                    Some(Ok(None)) => Some(format!(
                        "too little history yet: {} of {} needed{} in {}",
                        self.good_runs(t),
                        match t.bound {
                            Bound::History(recent, _) => recent.runs().min(3).to_string(),
                            _ => crate::history::gate::LEAST_FOR_REGRESSION.to_string(),
                        },
                        match t.bound {
                            Bound::History(..) => " passing runs of this configuration",
                            _ => " passing runs",
                        },
                        h.at
                    )),
                    _ => None,
                },
            },
            _ => None,
        }
    }

    /// What a history bound reads: its reference, `Ok(None)` while the
    /// history is too short, `None` for another bound or no history.
    fn history_reference(
        &self,
        t: &Threshold,
        measured: Option<f64>,
    ) -> Option<Result<Option<Reference>, String>> {
        let h = self.history?;
        match t.bound {
            Bound::History(recent, _) => Some(h.recent(t.key, recent)),
            Bound::NoRegression => Some(h.regression(t.key, t.op, measured)),
            _ => None,
        }
    }

    /// How many earlier runs count for `t` (for "too little history").
    fn good_runs(&self, t: &Threshold) -> usize {
        self.history
            .and_then(|h| {
                h.points.as_ref().ok()?.get(&t.key).map(|p| {
                    p.iter()
                        .filter(|p| p.counted())
                        .filter(|p| {
                            !matches!(t.bound, Bound::History(..)) || p.fingerprint == h.fingerprint
                        })
                        .count()
                })
            })
            .unwrap_or(0)
    }

    /// The figure a relative bound starts from (`None` for a fixed bound,
    /// and a history bound).
    fn reference(&self, t: &Threshold) -> Option<Result<f64, String>> {
        match &t.bound {
            // A history bound is read with the figure measured: `judge`
            // asks `history_reference`.
            Bound::Value(_) | Bound::History(..) | Bound::NoRegression => None,
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
            .get(key)
            .copied()
            .ok_or_else(|| format!("variant `{name}` measured no figure `{key}`"))
    }
}

/// ` = <bound> from baseline <figure>`: how a relative bound was made.
fn against(
    t: &Threshold,
    reference: Option<&Result<f64, String>>,
    bound: Option<&f64>,
    history: Option<&Reference>,
) -> String {
    let (Some(Ok(r)), Some(b)) = (reference, bound) else {
        return String::new();
    };
    let m = t.key.metric;
    match &t.bound {
        Bound::Value(_) => String::new(),
        Bound::History(..) | Bound::NoRegression => format!(
            " = {} from {} {}",
            format_value(m, *b),
            history.map_or("the history's", |h| h.said.as_str()),
            format_value(m, *r)
        ),
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
    // The verdict at stake first (the last repeat's check says it), then
    // a repeat whose figures are client-limited, then the last.
    let check = repeats
        .iter()
        .map(|m| &m.client)
        .find(|c| c.at_stake.is_some())
        .or_else(|| {
            repeats
                .iter()
                .map(|m| &m.client)
                .find(|c| c.limited.is_some())
        })
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
struct Judged<'a> {
    bound: Option<f64>,
    reference: Option<f64>,
    est: Option<&'a Estimate>,
    /// Each repeat's figure, when the gate repeated.
    repeats: Vec<f64>,
    not_applied: Option<String>,
}

impl Judged<'_> {
    /// The verdict on `lt` as data.
    fn verdict(self, lt: &LocatedThreshold, implicit: bool) -> ThresholdVerdict {
        let t = &lt.threshold;
        ThresholdVerdict {
            key: t.key,
            op: t.op.symbol().to_owned(),
            bound: self.bound,
            reference: self.reference,
            measured: self.est.map(|e| e.mean),
            repeats: self.repeats,
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

/// The `bound:` lines of a failed threshold: what it was held to, and
/// where that came from (or why there was nothing to hold it to).
fn explain_bound(
    out: &mut Message,
    t: &Threshold,
    resolved: &Result<f64, String>,
    against: &str,
    refs: &References<'_>,
    history: Option<&Reference>,
) {
    let baseline = refs.baseline;
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
        (Bound::History(..) | Bound::NoRegression, Ok(_)) => {
            let _ = writeln!(out, "bound:    {t}{against}");
            if let Some(why) = history.and_then(|h| h.fails.as_deref()) {
                let _ = writeln!(out, "          and it fails whatever the bound: {why}");
            }
            if let Some(good) = history.as_ref().and_then(|h| h.last_good.as_ref()) {
                let _ = writeln!(
                    out,
                    "          last good run: {} (commit {}, {})",
                    good.run_uid,
                    good.suite_commit.as_deref().unwrap_or("unknown"),
                    good.fingerprint
                );
            }
            if let Some(h) = refs.history {
                let _ = writeln!(
                    out,
                    "          (`servegate history show {}::{} {}`)",
                    h.series.suite, h.series.gate, t.key
                );
            }
        }
        (Bound::History(..) | Bound::NoRegression, Err(why)) => {
            let _ = writeln!(out, "bound:    {t}, but {why}");
        }
        (Bound::Baseline(_), Err(why)) => {
            let _ = writeln!(out, "bound:    {t}, but there is no baseline: {why}");
            let _ = writeln!(
                out,
                "          record one on the reference configuration with `servegate baseline save` (or `baseline accept` after a run)"
            );
        }
    }
}

/// A threshold's bound as judged: the reference a relative bound starts
/// from, the history's reference, and the bound (or why there is none:
/// a relative bound without its reference cannot pass).
struct Resolution {
    reference: Option<Result<f64, String>>,
    history: Option<Reference>,
    resolved: Result<f64, String>,
}

fn resolve(t: &Threshold, est: Option<&Estimate>, refs: &References<'_>) -> Resolution {
    let from_history = refs.history_reference(t, est.map(|e| e.mean));
    let reference = match &from_history {
        Some(r) => Some(r.clone().and_then(|r| {
            r.map(|r| r.value)
                .ok_or_else(|| "too little history".to_owned())
        })),
        None => refs.reference(t),
    };
    let history = from_history.and_then(|r| r.ok().flatten());
    let resolved = match (&t.bound, &reference) {
        (Bound::Value(v), _) => Ok(*v),
        (Bound::NoRegression, Some(Ok(_))) => history
            .as_ref()
            .and_then(|h| h.bound)
            .ok_or_else(|| "no bound".to_owned()),
        (Bound::Baseline(r) | Bound::Variant(_, r) | Bound::History(_, r), Some(Ok(b))) => {
            Ok(r.apply(*b))
        }
        (_, Some(Err(e))) => Err(e.clone()),
        (_, None) => Err("no reference".to_owned()),
    };
    Resolution {
        reference,
        history,
        resolved,
    }
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
        let verdict = |bound, reference, not_applied| {
            Judged {
                bound,
                reference,
                est: est.as_ref(),
                repeats: each.clone(),
                not_applied,
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
                checks.push(ThresholdRecord {
                    check: format!("{t} (not applied: {why})"),
                    passed: true,
                    threshold: Some(verdict(None, None, Some(why))),
                });
                continue;
            }
        };
        let pass = match (&est, &resolved) {
            (Some(e), Ok(bound)) => holds(t, *bound, e, gate.verdict),
            _ => false,
        } && history.as_ref().is_none_or(|h| h.fails.is_none());
        let measured = est
            .as_ref()
            .map_or_else(|| "nothing".into(), |e| describe(t.key, e));
        let against = against(
            t,
            reference.as_ref(),
            resolved.as_ref().ok(),
            history.as_ref(),
        );
        checks.push(ThresholdRecord {
            check: format!("{t}{against} (measured {measured})"),
            passed: pass,
            threshold: Some(verdict(
                resolved.as_ref().ok().copied(),
                reference.as_ref().and_then(|r| r.as_ref().ok()).copied(),
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

/// The load of a gate, in words, for output and failure messages.
pub fn describe_load(gate: &Gate) -> String {
    let l = &gate.load;
    let mut parts = Vec::new();
    parts.push(match l.pace {
        Pace::Closed { concurrency } => format!("closed loop, concurrency {concurrency}"),
        Pace::Open {
            rate,
            arrival,
            seed,
            max_in_flight,
        } => {
            let arrival = match arrival {
                Arrival::Constant => "constant".to_owned(),
                Arrival::Poisson => format!("poisson, seed {seed}"),
            };
            let cap =
                max_in_flight.map_or_else(String::new, |n| format!(", at most {n} in flight"));
            format!("open loop, {rate} req/s ({arrival}){cap}")
        }
    });
    parts.push(match (l.requests, l.duration) {
        (Some(n), None) => format!("{n} requests"),
        (None, Some(d)) => format!("for {}", format_duration(d)),
        (Some(n), Some(d)) => format!(
            "{n} requests or {}, whichever ends first",
            format_duration(d)
        ),
        (None, None) => "no bound".to_owned(),
    });
    if l.warmup > 0 {
        parts.push(format!("after {} warm-up", l.warmup));
    }
    parts.push(format!(
        "{} output tokens{}",
        l.output_tokens,
        if l.ignore_eos { " (ignore_eos)" } else { "" }
    ));
    parts.push(match &l.prompt {
        LoadPrompt::Text(t) => format!("fixed prompt of {} chars", t.chars().count()),
        LoadPrompt::Tokens(n) => match &l.tokenizer {
            Some(t) => format!("{n} input tokens (synthetic, cut to length by {})", t.path().display()),
            None => format!("~{n} input tokens ({PROMPT_APPROXIMATION})"),
        },
        LoadPrompt::Dataset { path, prompts } => {
            format!("{} prompts from {}", prompts.len(), path.display())
        }
        LoadPrompt::SharedPrefix {
            prefix_tokens,
            groups,
            suffix_tokens,
        } => format!(
            "{groups} shared prefix(es) of {prefix_tokens} tokens + {suffix_tokens} unique tokens ({})",
            l.tokenizer.as_ref().map_or_else(
                || PROMPT_APPROXIMATION.to_owned(),
                |t| format!("cut to length by {}", t.path().display())
            )
        ),
    });
    if l.flush_cache {
        parts.push("cache flushed before measuring".to_owned());
    }
    let slo: Vec<String> = [
        ("ttft", gate.slo.ttft),
        ("tpot", gate.slo.tpot),
        ("e2e", gate.slo.e2e),
    ]
    .into_iter()
    .filter_map(|(n, d)| d.map(|d| format!("{n} <= {}", format_duration(d))))
    .collect();
    if !slo.is_empty() {
        parts.push(format!("SLO {}", slo.join(" and ")));
    }
    parts.join(", ")
}

mod curve;
pub use curve::judge_curve;

#[cfg(test)]
mod tests;
