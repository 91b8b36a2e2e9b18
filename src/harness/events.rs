//! The run as typed events. A suite run says what happened as it happens
//! (its server reached, a trial ended with its record, a gate measured with
//! its figures, every trial ended, the run's record written) to the run's
//! [`Listener`]s, in the order they were given; each output is one
//! listener, and renders from the events or from the record they built:
//! the target lines, the trial book the record's trials come from, the
//! figure book `variant(NAME)` bounds and the record's gates come from, the
//! trial journal, the end-of-run summary, the report writers
//! (`RunOptions::publish`) and a library user's own (`RunOptions::listeners`).

use std::sync::{Arc, Mutex};

use super::target::{Connected, TargetError};
use crate::load::metrics::GateMetrics;
use crate::record::{self, JOURNAL, RunInfo, RunRecord, TrialRecord};

/// What happened in a run, in the order it happened.
#[derive(Debug)]
pub enum RunEvent<'a> {
    /// A suite run reached its server (launched it, or found it), or
    /// could not: every trial of the suite run fails then.
    TargetReached {
        /// `<suite>` or `<suite>[<variant>]`.
        label: &'a str,
        /// The server, or why it could not be reached.
        target: &'a Result<Connected, TargetError>,
    },
    /// A trial ended: its record, as the run's record keeps it.
    TrialFinished(&'a TrialRecord),
    /// A gate's load ran and was judged: what it measured.
    GateMeasured {
        /// `<suite>` or `<suite>[<variant>]`.
        label: &'a str,
        /// The suite's name.
        suite: &'a str,
        /// The variant run, if the suite has variants.
        variant: Option<&'a str>,
        /// The figures, with each threshold's verdict.
        figures: &'a GateFigures,
    },
    /// Every trial ended: the run's record (the failed `<file>::load`
    /// trials of suite files that did not load first), before it is kept
    /// (the history's trends not yet read into it).
    RunFinished(&'a RunRecord),
    /// The run's record is kept: at the end of the run (the report writers
    /// take it even where writing `report.json` failed, which a warning
    /// said), or of a run a signal stopped once its record was written
    /// (then `record.complete` is false).
    RecordWritten {
        /// Where the run writes.
        info: &'a RunInfo,
        /// The record written.
        record: &'a RunRecord,
    },
}

/// Something a run tells what happens: an output, a store.
pub trait Listener: Send + Sync {
    /// Takes one event. Called on the thread where it happened, in the
    /// order events happen; a listener that blocks holds the run up.
    fn on(&self, event: &RunEvent<'_>);
}

/// The listeners of a run, told each event in the order they were given.
#[derive(Clone, Default)]
pub struct Listeners(Vec<Arc<dyn Listener>>);

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Listeners({})", self.0.len())
    }
}

impl Listeners {
    /// These listeners, then `more`.
    #[must_use]
    pub fn and(mut self, more: impl IntoIterator<Item = Arc<dyn Listener>>) -> Self {
        self.0.extend(more);
        self
    }

    /// These listeners, then those of `more`.
    #[must_use]
    pub fn then(self, more: &Listeners) -> Self {
        self.and(more.0.iter().cloned())
    }

    /// Tells every listener `event`.
    pub(crate) fn emit(&self, event: &RunEvent<'_>) {
        for l in &self.0 {
            l.on(event);
        }
    }
}

/// The line every run prints for each suite run: which server it measures
/// (simulator or real, its model), or why it has none.
pub(crate) struct TargetLines;

impl Listener for TargetLines {
    fn on(&self, event: &RunEvent<'_>) {
        if let RunEvent::TargetReached { label, target } = event {
            let line = match target {
                Ok(c) => format!("servegate: suite `{label}` → {}", c.description),
                Err(e) => format!("servegate: suite `{label}` → target FAILED: {e}"),
            };
            eprintln!("{}", crate::text::for_log(&line));
        }
    }
}

/// Every trial's record, in the order the trials ended: the record's
/// `trials`.
#[derive(Debug, Default)]
pub(crate) struct TrialBook(Mutex<Vec<TrialRecord>>);

impl TrialBook {
    /// Those of suite run `label` (`<suite>` or `<suite>[<variant>]`).
    pub fn of(&self, label: &str) -> Vec<TrialRecord> {
        self.0.lock().map_or_else(
            |_| Vec::new(),
            |t| t.iter().filter(|t| t.id.suite == label).cloned().collect(),
        )
    }
}

impl Listener for TrialBook {
    fn on(&self, event: &RunEvent<'_>) {
        if let RunEvent::TrialFinished(t) = event
            && let Ok(mut book) = self.0.lock()
        {
            book.push((*t).clone());
        }
    }
}

/// Keeps the record of a run current at a cost linear in its trials: each
/// ended trial is appended to `<run>/trials.jsonl` (one line), and the
/// whole record is rewritten only after a performance gate (its figures) or
/// when the trials since the last rewrite are as many as before it (1, 2,
/// 4, 8, …): a thousand probes rewrite it ten times, not a thousand. An
/// interrupted run leaves its last record plus the journal, which
/// [`crate::record::read`] merges.
pub(crate) struct Journal {
    info: RunInfo,
    /// The record so far.
    so_far: Box<dyn Fn() -> RunRecord + Send + Sync>,
    /// Trials ended, and how many there were at the last rewrite.
    state: Mutex<(u64, u64)>,
}

impl Journal {
    /// A journal in `info`'s run directory; `so_far` builds the record of
    /// the trials that ended (the trial book has the one that just did).
    pub fn new(info: RunInfo, so_far: Box<dyn Fn() -> RunRecord + Send + Sync>) -> Self {
        Self {
            info,
            so_far,
            state: Mutex::default(),
        }
    }
}

impl Listener for Journal {
    fn on(&self, event: &RunEvent<'_>) {
        let RunEvent::TrialFinished(trial) = event else {
            return;
        };
        if let Err(e) = record::append(&self.info.dir.join(JOURNAL), trial) {
            eprintln!("warning: {e}");
        }
        let due = self
            .state
            .lock()
            .is_ok_and(|mut s| record::rewrite_due(&mut s, trial.id.stage));
        if due && let Err(e) = record::write(&self.info, &(self.so_far)()) {
            eprintln!("warning: {e}");
        }
    }
}

/// The report writers a run was given (`RunOptions::publish`), handed each
/// record written.
pub(crate) struct Publisher(pub(crate) super::Publish);

impl Listener for Publisher {
    fn on(&self, event: &RunEvent<'_>) {
        if let RunEvent::RecordWritten { info, record } = event {
            (self.0)(info, record);
        }
    }
}

/// Figures measured by a gate, kept for the summary.
#[derive(Debug, Clone)]
pub struct GateFigures {
    /// The gate's name.
    pub gate: String,
    /// The load, in words.
    pub load: String,
    /// What was measured (the last repeat).
    pub metrics: GateMetrics,
    /// How many repeats ran.
    pub repeats: u32,
    /// Every figure, the mean over repeats: what a baseline records.
    pub figures: crate::suite::figures::Figures,
    /// Each threshold with its verdict.
    pub checks: Vec<crate::record::ThresholdRecord>,
    /// The value of each repeat of every figure a threshold names.
    pub repeat_values: crate::suite::figures::ByKey<Vec<f64>>,
    /// The sweep level the gate is, if it is one.
    pub sweep: Option<crate::record::SweepPoint>,
    /// The probes it would have waited for that `--skip` left out.
    pub probes_skipped: Vec<String>,
}

/// What every gate of a harness run measured, by suite and variant: each
/// suite run writes its gates' figures here, and a `variant(NAME)` bound
/// reads those of an earlier variant of its suite. A store of figures, not
/// of runs: what one run may see of another is exactly this.
#[derive(Debug, Default)]
pub(crate) struct FigureBook(Mutex<Vec<BookEntry>>);

impl Listener for FigureBook {
    fn on(&self, event: &RunEvent<'_>) {
        if let RunEvent::GateMeasured {
            label,
            suite,
            variant,
            figures,
        } = event
            && let Ok(mut book) = self.0.lock()
        {
            book.push(BookEntry {
                label: (*label).to_owned(),
                suite: (*suite).to_owned(),
                variant: variant.map(str::to_owned),
                figures: (*figures).clone(),
            });
        }
    }
}

/// One gate's figures in a [`FigureBook`].
#[derive(Debug, Clone)]
struct BookEntry {
    label: String,
    suite: String,
    variant: Option<String>,
    figures: GateFigures,
}

impl FigureBook {
    /// Every gate's figures of `suite` (and `variant`), in the order they
    /// were measured.
    pub fn of(&self, suite: &str, variant: Option<&str>) -> Vec<GateFigures> {
        self.matching(|e| e.suite == suite && e.variant.as_deref() == variant)
    }

    /// Every gate's figures of suite run `label` (`<suite>` or
    /// `<suite>[<variant>]`), in the order they were measured.
    pub(crate) fn of_run(&self, label: &str) -> Vec<GateFigures> {
        self.matching(|e| e.label == label)
    }

    fn matching(&self, keep: impl Fn(&BookEntry) -> bool) -> Vec<GateFigures> {
        self.0.lock().map_or_else(
            |_| Vec::new(),
            |book| {
                book.iter()
                    .filter(|e| keep(e))
                    .map(|e| e.figures.clone())
                    .collect()
            },
        )
    }
}
