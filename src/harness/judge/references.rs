//! Where a threshold's bound comes from: a number, the gate's baseline,
//! a variant that ran before, or the history; and how a relative bound
//! was made, in words.

use crate::history::gate::{GateHistory, Reference};
use crate::load::baseline::Lookup;
use crate::load::estimate::Estimate;
use crate::suite::OnClientLimited;
use crate::suite::figures::Figures;
use crate::suite::metric::MetricKey;
use crate::suite::threshold::{Bound, Threshold};

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
pub type VariantFigures = (String, Result<Figures, NoReference>);

/// Why a relative bound has no reference figure to start from: then it
/// has no bound, and cannot pass.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NoReference {
    /// `variant(NAME)` names a variant listed after the one judged.
    #[error("variant `{0}` runs after this one (variants run in file order)")]
    VariantLater(String),
    /// `variant(NAME)` names a variant that did not run before this one.
    #[error("variant `{0}` has not run before this one (variants run in file order)")]
    VariantNotRun(String),
    /// The variant ran, but the gate's trial in it measured nothing.
    #[error(
        "variant `{variant}` measured nothing in `{gate}` (its trial failed or was filtered out)"
    )]
    VariantMeasuredNothing {
        /// The variant.
        variant: String,
        /// The gate.
        gate: String,
    },
    /// The variant's gate measured other figures.
    #[error("variant `{variant}` measured no figure `{key}`")]
    VariantNoFigure {
        /// The variant.
        variant: String,
        /// The figure the bound reads.
        key: MetricKey,
    },
    /// The gate's baseline has none, in the baseline store's words (which
    /// file, which configuration): text from files, not a kind to act on.
    #[error("{0}")]
    Baseline(String),
    /// The history could not be read, in its store's words.
    #[error("{0}")]
    History(String),
    /// Too few earlier runs to read a reference from.
    #[error("too little history")]
    TooLittleHistory,
    /// A history bound, with the history off (`--history off`): the bound
    /// is not applied.
    #[error("the history is off")]
    HistoryOff,
    /// The history has a reference but gave no bound.
    #[error("no bound")]
    NoBound,
}

impl References<'_> {
    /// Why `t` is not judged in this run: its bound is the variant being
    /// judged, or a baseline this run records.
    pub(super) fn not_applied(&self, t: &Threshold) -> Option<String> {
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
    ) -> Option<Result<Option<Reference>, NoReference>> {
        let h = self.history?;
        let read = match t.bound {
            Bound::History(recent, _) => h.recent(t.key, recent),
            Bound::NoRegression => h.regression(t.key, t.op, measured),
            _ => return None,
        };
        Some(read.map_err(NoReference::History))
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
    fn reference(&self, t: &Threshold) -> Option<Result<f64, NoReference>> {
        match &t.bound {
            // A history bound is read with the figure measured: `judge`
            // asks `history_reference`.
            Bound::Value(_) | Bound::History(..) | Bound::NoRegression => None,
            Bound::Baseline(_) => Some(self.baseline.figure(t.key).map_err(NoReference::Baseline)),
            Bound::Variant(name, _) => Some(self.variant_figure(name, t.key)),
        }
    }

    fn variant_figure(&self, name: &str, key: MetricKey) -> Result<f64, NoReference> {
        let (_, figures) = self
            .variants
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| NoReference::VariantNotRun(name.to_owned()))?;
        let figures = figures.as_ref().map_err(Clone::clone)?;
        figures
            .get(key)
            .copied()
            .ok_or_else(|| NoReference::VariantNoFigure {
                variant: name.to_owned(),
                key,
            })
    }
}

/// What a relative bound is made from, in words (`baseline`, ``variant
/// `base`'s``, the history's own words); `None` for a fixed bound.
pub(super) fn reference_from(t: &Threshold, history: Option<&Reference>) -> Option<String> {
    match &t.bound {
        Bound::Value(_) => None,
        Bound::History(..) | Bound::NoRegression => Some(
            history
                .map_or("the history's", |h| h.said.as_str())
                .to_owned(),
        ),
        Bound::Baseline(_) => Some("baseline".to_owned()),
        Bound::Variant(name, _) => Some(format!("variant `{name}`'s")),
    }
}

/// A threshold's bound as judged: the reference a relative bound starts
/// from, the history's reference, and the bound (or why there is none:
/// a relative bound without its reference cannot pass).
pub(super) struct Resolution {
    pub(super) reference: Option<Result<f64, NoReference>>,
    pub(super) history: Option<Reference>,
    pub(super) resolved: Result<f64, NoReference>,
}

pub(super) fn resolve(t: &Threshold, est: Option<&Estimate>, refs: &References<'_>) -> Resolution {
    let from_history = refs.history_reference(t, est.map(|e| e.mean));
    let reference = match &from_history {
        Some(r) => Some(
            r.clone()
                .and_then(|r| r.map(|r| r.value).ok_or(NoReference::TooLittleHistory)),
        ),
        None => refs.reference(t),
    };
    let history = from_history.and_then(|r| r.ok().flatten());
    let resolved = match (&t.bound, &reference) {
        (Bound::Value(v), _) => Ok(*v),
        (Bound::NoRegression, Some(Ok(_))) => history
            .as_ref()
            .and_then(|h| h.bound)
            .ok_or(NoReference::NoBound),
        (Bound::Baseline(r) | Bound::Variant(_, r) | Bound::History(_, r), Some(Ok(b))) => {
            Ok(r.apply(*b))
        }
        (_, Some(Err(e))) => Err(e.clone()),
        (_, None) => Err(NoReference::HistoryOff),
    };
    Resolution {
        reference,
        history,
        resolved,
    }
}
