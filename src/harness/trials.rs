//! Building the trial list: each suite run's trials named and in run order
//! ([`Names`]), the notes on prerequisites that run first, the turns that
//! keep trials one at a time ([`Turns`]), and the list of `--list`.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use libtest_mimic::{Arguments, Trial};

use super::events::{FigureBook, Listeners, TrialBook};
use super::loading::Loaded;
use super::session::{self, Plan, SuiteRun};
use super::target;
use crate::record::{Part, Stage, TrialId};
use crate::suite::node::Loc;
use crate::suite::{LoadFailure, SnapshotMode, Suite};

/// Trials of one run of a suite (`label`: `<suite>` or
/// `<suite>[<variant>]`), in run order: config checks, each probe followed
/// by its snapshot, gates, then sweep curves.
pub(super) struct Names {
    configs: Vec<TrialId>,
    probes: Vec<TrialId>,
    /// Each snapshot trial with its probe's index.
    snapshots: Vec<(usize, TrialId)>,
    gates: Vec<TrialId>,
    /// Each recheck trial with its gate's index.
    rechecks: Vec<(usize, TrialId)>,
    curves: Vec<TrialId>,
}

impl Names {
    fn of(suite: &Suite, label: &str) -> Self {
        let id = |stage, item: &str| TrialId::new(label, stage, item);
        Self {
            configs: suite
                .expect_server
                .iter()
                .map(|c| id(Stage::Config, &c.name))
                .collect(),
            probes: suite
                .probes
                .iter()
                .map(|p| id(Stage::Correctness, &p.name))
                .collect(),
            snapshots: suite
                .probes
                .iter()
                .enumerate()
                .filter(|(_, p)| p.snapshot != SnapshotMode::Off)
                .map(|(i, p)| (i, id(Stage::Snapshot, &p.name)))
                .collect(),
            gates: suite
                .gates
                .iter()
                .map(|g| id(Stage::Performance, &g.name))
                .collect(),
            rechecks: suite
                .gates
                .iter()
                .enumerate()
                .filter(|(_, g)| g.recheck.is_some())
                .map(|(i, g)| (i, id(Stage::Performance, &g.name).part(Part::Recheck)))
                .collect(),
            curves: suite
                .curves
                .iter()
                .map(|c| id(Stage::Performance, &c.gate).part(Part::Curve))
                .collect(),
        }
    }

    /// One label per run of the suite: its variants, or the suite alone.
    pub(super) fn labels(suite: &Suite) -> Vec<(String, Option<crate::suite::Variant>)> {
        if suite.variants.is_empty() {
            return vec![(suite.name.clone(), None)];
        }
        suite
            .variants
            .iter()
            .map(|v| (format!("{}[{}]", suite.name, v.name), Some(v.clone())))
            .collect()
    }

    /// Every trial in run order: its name, where its item is written, what
    /// runs it and the item's index in its list.
    fn in_order(self, suite: &Suite) -> Vec<(TrialId, Loc, Each, usize)> {
        let mut out: Vec<(TrialId, Loc, Each, usize)> = Vec::new();
        for (i, name) in self.configs.into_iter().enumerate() {
            out.push((name, suite.expect_server[i].loc, SuiteRun::config, i));
        }
        let mut snapshots = self.snapshots.into_iter().peekable();
        for (i, name) in self.probes.into_iter().enumerate() {
            let loc = suite.probes[i].loc;
            out.push((name, loc, SuiteRun::probe, i));
            if let Some((_, snap)) = snapshots.next_if(|(p, _)| *p == i) {
                out.push((snap, loc, SuiteRun::snapshot, i));
            }
        }
        let mut rechecks = self.rechecks.into_iter().peekable();
        for (i, name) in self.gates.into_iter().enumerate() {
            out.push((name, suite.gates[i].loc, SuiteRun::gate, i));
            if let Some((_, recheck)) = rechecks.next_if(|(g, _)| *g == i) {
                let loc = suite.gates[i]
                    .recheck
                    .as_ref()
                    .map_or(suite.gates[i].loc, |r| r.loc);
                out.push((recheck, loc, SuiteRun::recheck, i));
            }
        }
        for (i, name) in self.curves.into_iter().enumerate() {
            out.push((name, suite.curves[i].loc, SuiteRun::curve, i));
        }
        out
    }
}

/// Trials taking turns: libtest-mimic runs them on two worker threads, so
/// that it prints each `test … ok` line after its trial ended and what a
/// trial prints (a server launched or stopped, a snapshot recorded) comes
/// before that line, never inside it; the turns keep them one at a time and
/// in order.
///
/// A worker sends its trial's outcome to be printed after the trial's
/// closure returned, so a turn passed on inside the closure would let a
/// quick next trial (a snapshot's comparison) be printed first on a busy
/// machine. The turn is passed on by the worker itself once it is back for
/// its next trial (or, with none left, as it ends): after its outcome was
/// sent.
#[derive(Default)]
pub(super) struct Turns {
    next: Mutex<usize>,
    changed: std::sync::Condvar,
}

/// A turn whose trial ended, passed on when dropped.
struct Ended(Arc<Turns>);

impl Drop for Ended {
    fn drop(&mut self) {
        if let Ok(mut next) = self.0.next.lock() {
            *next += 1;
        }
        self.0.changed.notify_all();
    }
}

thread_local! {
    /// The turn this worker's last trial took, until the worker is back for
    /// its next trial or ends (its outcome was sent by then).
    static ENDED: std::cell::RefCell<Option<Ended>> = const { std::cell::RefCell::new(None) };
}

impl Turns {
    /// Runs `f` once every trial with an earlier turn has ended and its
    /// outcome was handed to libtest.
    pub(super) fn take<R>(self: &Arc<Self>, turn: usize, f: impl FnOnce() -> R) -> R {
        // This worker's previous trial's outcome has been sent: pass its
        // turn on.
        drop(ENDED.with(|e| e.borrow_mut().take()));
        if let Ok(mut next) = self.next.lock() {
            while *next < turn {
                next = match self.changed.wait(next) {
                    Ok(n) => n,
                    Err(_) => break,
                };
            }
        }
        // Held even when the trial panics (libtest catches it and sends the
        // failure).
        let ended = Ended(Arc::clone(self));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        ENDED.with(|e| *e.borrow_mut() = Some(ended));
        result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

/// What every suite run of a harness run shares.
pub(super) struct Context<'a> {
    pub(super) args: &'a Arguments,
    pub(super) runtime: &'a Arc<tokio::runtime::Runtime>,
    pub(super) book: &'a Arc<Mutex<Vec<Arc<SuiteRun>>>>,
    /// Every gate's figures, by suite and variant.
    pub(super) figures: &'a Arc<FigureBook>,
    /// Every trial's record.
    pub(super) trials: &'a Arc<TrialBook>,
    /// Who is told what happens.
    pub(super) listeners: &'a Listeners,
    pub(super) dir: &'a Path,
    pub(super) target_override: Option<&'a str>,
    /// The turns of the trials that run, and how many were handed out.
    pub(super) turns: (Arc<Turns>, AtomicUsize),
    /// What this run does with new and changed answers.
    pub(super) snapshots: &'a crate::check::snapshot::Policy,
    /// `baseline save`: `baseline` bounds are not applied.
    pub(super) recording_baselines: bool,
    pub(super) client_threads: Option<u32>,
    pub(super) client_limited: Option<crate::suite::OnClientLimited>,
    /// The run history: gates read it, the run is recorded in it.
    pub(super) history: &'a crate::history::Location,
}

impl Context<'_> {
    /// Whether the trial `name` runs (not filtered out); then its turn.
    pub(super) fn turn(&self, name: &str) -> Option<usize> {
        let trial = Trial::test(name, || Ok(()));
        (!self.args.is_filtered_out(&trial) && !self.args.is_ignored(&trial))
            .then(|| self.turns.1.fetch_add(1, Ordering::SeqCst))
    }
}

/// Runs item `index` of a stage of a suite run.
type Each = fn(&SuiteRun, usize) -> session::Verdict;

/// Adds the trials of one run of `suite` (one variant, or the suite alone).
pub(super) fn add_run(
    ctx: &Context<'_>,
    suite: &Suite,
    label: &str,
    variant: Option<crate::suite::Variant>,
    trials: &mut Vec<Trial>,
) {
    let (runtime, book) = (ctx.runtime, ctx.book);
    let names = Names::of(suite, label);
    let selected = |id: &TrialId| !ctx.args.is_filtered_out(&Trial::test(id.name(), || Ok(())));
    // A probe `--skip` leaves out is left out of the gates' prerequisites
    // too: the run was told not to ask it. One a filter merely does not
    // select still runs first for the selected gates that need it.
    let skips = Arguments {
        filter: None,
        ..ctx.args.clone()
    };
    let skipped_probes: Vec<usize> = (0..names.probes.len())
        .filter(|&i| skips.is_filtered_out(&Trial::test(names.probes[i].name(), || Ok(()))))
        .collect();
    let count = |list: &[TrialId]| list.iter().filter(|n| selected(n)).count();
    let snapshot_names: Vec<TrialId> = names.snapshots.iter().map(|(_, n)| n.clone()).collect();
    let recheck_names: Vec<TrialId> = names.rechecks.iter().map(|(_, n)| n.clone()).collect();
    // A recheck, like a curve, needs its gate's load: both count as gates'
    // dependants.
    let (configs, probes, snapshots, gates, curves) = (
        count(&names.configs),
        count(&names.probes),
        count(&snapshot_names),
        count(&names.gates),
        count(&names.curves) + count(&recheck_names),
    );
    if configs + probes + snapshots + gates + curves == 0 {
        // Nothing of the suite runs, and no server is asked; its trials
        // are still handed to libtest, whose filter leaves each one out
        // and counts it (`N filtered out`, as in any Rust test run).
        trials.extend(named_only(names, suite));
        return;
    }
    let plan = Plan {
        label: label.to_owned(),
        target_override: ctx.target_override.map(str::to_owned),
        variant,
        run_dir: ctx.dir.to_path_buf(),
        recording_baselines: ctx.recording_baselines,
        client_threads: ctx.client_threads,
        client_limited: ctx.client_limited,
        snapshots: ctx.snapshots.update.clone(),
        figures: Arc::clone(ctx.figures),
        trials: Arc::clone(ctx.trials),
        listeners: ctx.listeners.clone(),
        history: ctx.history.clone(),
        skipped_probes: skipped_probes.clone(),
    };
    let run = Arc::new(SuiteRun::new(suite.clone(), plan, Arc::clone(runtime)));
    if target::launches(suite, ctx.target_override) {
        eprintln!(
            "servegate: suite `{label}` → a server launched before its first trial (target.launch at {}:{})",
            suite.file.display(),
            suite.target.launch.as_ref().map_or(0, |l| l.loc.line)
        );
    } else {
        if suite.target.launch.is_some() {
            eprintln!(
                "note: suite `{label}`: target.launch is skipped: the target is overridden (--target or {})",
                target::TARGET_ENV
            );
        }
        run.connect();
    }
    let earlier = |n: usize, total: usize, what: &str| {
        if n < total && probes + snapshots + gates + curves > 0 {
            eprintln!(
                "note: suite `{label}`: its {total} {what} run first as prerequisites of the selected trials"
            );
        }
    };
    earlier(configs, names.configs.len(), "config check(s)");
    if gates + curves > 0 {
        // What the gates that run wait for (a curve's or a recheck's gates
        // among them: all, for the note).
        let waited: std::collections::BTreeSet<usize> = suite
            .gates
            .iter()
            .zip(&names.gates)
            .filter(|(_, n)| curves > 0 || selected(n))
            .flat_map(|(g, _)| g.needed(names.probes.len()))
            .filter(|i| !skipped_probes.contains(i))
            .collect();
        earlier(
            waited
                .iter()
                .filter(|&&i| selected(&names.probes[i]))
                .count(),
            waited.len(),
            "correctness probe(s)",
        );
        if !skipped_probes.is_empty() {
            let list: Vec<String> = skipped_probes
                .iter()
                .map(|&i| format!("`{}`", suite.probes[i].name))
                .collect();
            eprintln!(
                "note: suite `{label}`: correctness probe(s) {} left out by --skip: no gate waits for them, and each gate's record says it ran without them",
                list.join(", ")
            );
        }
    } else if snapshots > 0 {
        let unselected = names
            .snapshots
            .iter()
            .filter(|(i, n)| selected(n) && !selected(&names.probes[*i]))
            .count();
        if unselected > 0 {
            eprintln!(
                "note: suite `{label}`: the correctness probes of its {unselected} selected snapshot(s) run first: a snapshot compares their answers"
            );
        }
    }
    if count(&names.curves) > 0 && gates < names.gates.len() {
        eprintln!(
            "note: suite `{label}`: the levels of its selected curves run first as prerequisites"
        );
    }
    let unrun = names
        .rechecks
        .iter()
        .filter(|(g, n)| selected(n) && !selected(&names.gates[*g]))
        .count();
    if unrun > 0 {
        eprintln!(
            "note: suite `{label}`: the gates of its {unrun} selected recheck(s) run first: a recheck asks during its gate's load"
        );
    }
    for (id, loc, each, i) in names.in_order(suite) {
        let name = id.name();
        let turn = ctx.turn(&name);
        if turn.is_some() {
            run.expect_trial();
        }
        let (r, turns) = (Arc::clone(&run), Arc::clone(&ctx.turns.0));
        trials.push(Trial::test(name, move || {
            let body = || r.trial(&id, loc, || each(&r, i)).map_err(Into::into);
            match turn {
                Some(turn) => turns.take(turn, body),
                None => body(),
            }
        }));
    }
    if let Ok(mut runs) = book.lock() {
        runs.push(run);
    }
}

pub(super) fn listing(loaded: &Loaded) -> Vec<Trial> {
    match loaded {
        Loaded::Failed(failure) => vec![load_trial(failure.clone(), None)],
        Loaded::Suite(suite) => Names::labels(suite)
            .into_iter()
            .flat_map(|(label, variant)| {
                let run = suite.of_variant(variant.as_ref());
                named_only(Names::of(&run, &label), &run)
            })
            .collect(),
    }
}

/// The trials of a suite run by name only, in order: what a listing shows,
/// and what libtest's filter counts for a suite none of whose trials run.
fn named_only(names: Names, suite: &Suite) -> Vec<Trial> {
    names
        .in_order(suite)
        .into_iter()
        .map(|(id, ..)| Trial::test(id.name(), || Ok(())))
        .collect()
}

/// The one trial of a suite file that could not be loaded: it fails with
/// every problem of the file, in its turn when it has one.
pub(super) fn load_trial(f: LoadFailure, turn: Option<(Arc<Turns>, usize)>) -> Trial {
    Trial::test(TrialId::load(&f.name).name(), move || {
        let fail = || Err(f.message.clone().into());
        match &turn {
            Some((turns, t)) => turns.take(*t, fail),
            None => fail(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trial's turn passes on only once its worker is back for its next
    /// trial or ended, that is after libtest was sent its outcome: a next
    /// trial never runs (and so is never printed) before the outcome of the
    /// one before it was sent, however slow the sending worker is.
    #[test]
    fn a_turn_passes_on_after_its_outcome_was_sent() {
        let turns = Arc::new(Turns::default());
        let events = Arc::new(Mutex::new(Vec::new()));
        let log = |e: &'static str| {
            let events = Arc::clone(&events);
            move || events.lock().unwrap().push(e)
        };
        std::thread::scope(|scope| {
            // libtest's worker: the trial's closure, then (later, on a busy
            // machine) the send of its outcome, then the thread ends.
            let (t, first, sent) = (Arc::clone(&turns), log("first ran"), log("first sent"));
            scope.spawn(move || {
                t.take(0, first);
                std::thread::sleep(std::time::Duration::from_millis(100));
                sent();
            });
            let (t, second) = (Arc::clone(&turns), log("second ran"));
            scope.spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(10));
                t.take(1, second);
            });
        });
        assert_eq!(
            *events.lock().unwrap(),
            ["first ran", "first sent", "second ran"]
        );
    }
}
