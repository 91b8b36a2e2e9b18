//! What a gate's failure message says beyond its verdicts: why a figure
//! is missing, the client's self-check, each bound explained, the
//! figures of every repeat.

use std::fmt::Write as _;

use super::References;
use super::references::NoReference;
use crate::check::message::Message;
use crate::history::gate::Reference;
use crate::load::estimate::Estimate;
use crate::load::metrics::GateMetrics;
use crate::record::{ThresholdVerdict, bounded};
use crate::suite::metric::Metric;
use crate::suite::threshold::{Bound, Threshold};
use crate::suite::{Gate, LocatedThreshold, OnClientLimited, SourceFile, Suite};

/// Why a figure of `metric` is missing from a gate's repeats.
pub(super) fn unmeasured(metric: Metric, repeats: &[GateMetrics]) -> String {
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
pub(super) fn self_check(
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
pub(super) fn unmeasurable(
    file: &SourceFile,
    gate: &Gate,
    repeats: &[GateMetrics],
    out: &mut Message,
) {
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
pub(super) struct Judged<'a> {
    pub(super) bound: Option<f64>,
    pub(super) reference: Option<f64>,
    pub(super) est: Option<&'a Estimate>,
    /// Each repeat's figure, when the gate repeated.
    pub(super) repeats: Vec<f64>,
    pub(super) not_applied: Option<String>,
    /// The most the client can have moved the figure.
    pub(super) client_error: Option<f64>,
    /// What a relative bound was made from, in words.
    pub(super) reference_from: Option<String>,
}

impl Judged<'_> {
    /// The verdict on `lt` as data.
    pub(super) fn verdict(self, lt: &LocatedThreshold, implicit: bool) -> ThresholdVerdict {
        let t = &lt.threshold;
        ThresholdVerdict {
            key: t.key,
            op: t.op,
            bound: self.bound,
            reference: self.reference,
            measured: self.est.map(|e| e.mean),
            repeats: self.repeats,
            line: lt.loc.line,
            implicit,
            not_applied: self.not_applied.as_deref().map(bounded),
            client_error: self.client_error,
            written: bounded(&t.bound_text()),
            reference_from: self.reference_from.as_deref().map(bounded),
        }
    }
}

/// A failed gate's errors and the figures of its last repeat.
pub(super) fn write_figures(out: &mut Message, repeats: &[GateMetrics]) {
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
pub(super) fn explain_bound(
    out: &mut Message,
    t: &Threshold,
    resolved: &Result<f64, NoReference>,
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
