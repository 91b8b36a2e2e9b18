//! servegate's run loop: one thread runs every selected trial of the run in
//! the list's order (config checks, then each probe and its snapshot, then
//! the gates, their rechecks and curves, suite run after suite run), and
//! owns what those trials settle ([`Execution`]: no lock around it). A
//! trial runs the prerequisites it needs (a gate its probes, a curve its
//! levels) that no selected trial ran before it.
//!
//! libtest-mimic stays the harness users see: it lists, filters and prints
//! the trials, each of which waits for the outcome the loop decided and
//! reports it. The loop hands trial `n + 1` nothing (and so prints nothing
//! of it, not a server started or stopped) until libtest has been handed
//! trial `n`'s outcome, so that every line a trial prints comes before its
//! `test … ok` line and after the one before it.

use std::cell::RefCell;
use std::convert::Infallible;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use libtest_mimic::{Failed, Trial};

use super::session::{Execution, Verdict};
use crate::record::TrialId;
use crate::suite::node::Loc;

/// Runs item `index` of a stage of a suite run.
pub(super) type Each = fn(&Execution, usize) -> Verdict;

/// A trial of the list, as the loop runs it.
pub(super) struct Item {
    pub(super) id: TrialId,
    /// Where its item is written in the suite file.
    pub(super) loc: Loc,
    pub(super) each: Each,
    /// The item's index in its stage's list.
    pub(super) index: usize,
}

/// What the loop does for one selected trial.
enum Work {
    /// Runs an item of the suite run with this index.
    Item(usize, Item),
    /// A suite file that did not load: its trial fails with its problems.
    Unloaded(String),
}

/// Where a trial's outcome goes: the libtest trial waiting for it, and
/// what tells the loop libtest was handed it (the receipt's sending side
/// is dropped then; nothing is ever sent on it).
struct Handover {
    outcome: SyncSender<Result<(), Failed>>,
    handed: Receiver<Infallible>,
}

thread_local! {
    /// The receipt of the last trial this libtest worker reported, dropped
    /// once the worker is back for its next trial or ends: libtest has
    /// been handed that trial's outcome by then.
    static REPORTED: RefCell<Option<SyncSender<Infallible>>> = const { RefCell::new(None) };
}

/// The selected trials of a run and the suite runs they belong to.
#[derive(Default)]
pub(super) struct Executor {
    runs: Vec<Execution>,
    steps: Vec<(Work, Handover)>,
}

impl Executor {
    /// Adds a suite run's trials in run order: each one `selected` (by
    /// name: libtest's filter and `--skip` keep it) as a step of the loop
    /// with the libtest trial that reports its outcome; the others by name
    /// only, for libtest's filter to leave out and count.
    pub(super) fn add_run(
        &mut self,
        run: Execution,
        items: Vec<Item>,
        selected: impl Fn(&str) -> bool,
        trials: &mut Vec<Trial>,
    ) {
        let at = self.runs.len();
        for item in items {
            let name = item.id.name();
            if selected(&name) {
                run.expect_trial();
                let (report, handover) = waiting();
                trials.push(Trial::test(name, report));
                self.steps.push((Work::Item(at, item), handover));
            } else {
                trials.push(Trial::test(name, || Ok(())));
            }
        }
        self.runs.push(run);
    }

    /// Adds the trial of a suite file that did not load: it fails with
    /// `problems`, in its turn when it is `selected`.
    pub(super) fn add_unloaded(
        &mut self,
        name: String,
        problems: String,
        selected: bool,
        trials: &mut Vec<Trial>,
    ) {
        if selected {
            let (report, handover) = waiting();
            trials.push(Trial::test(name, report));
            self.steps.push((Work::Unloaded(problems), handover));
        } else {
            trials.push(unloaded(name, problems));
        }
    }

    /// The suite runs, as everyone may read them.
    pub(super) fn runs(&self) -> Vec<std::sync::Arc<super::SuiteRun>> {
        self.runs.iter().map(Execution::shared).collect()
    }

    /// Runs the loop on a thread of its own while libtest runs `trials`
    /// (those the loop's steps report, and the others by name).
    pub(super) fn run_as(
        self,
        args: &libtest_mimic::Arguments,
        trials: Vec<Trial>,
    ) -> std::io::Result<libtest_mimic::Conclusion> {
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("servegate-run".to_owned())
                .spawn_scoped(scope, move || self.run())?;
            Ok(libtest_mimic::run(args, trials))
        })
    }

    /// Runs every step in order, each outcome handed to its trial once the
    /// one before was reported.
    fn run(self) {
        for (work, handover) in self.steps {
            let outcome = match work {
                Work::Unloaded(problems) => Err(problems.into()),
                Work::Item(at, item) => run_item(&self.runs[at], &item),
            };
            handover.hand(outcome);
        }
    }
}

impl Handover {
    /// Hands `outcome` to its trial and waits until libtest was handed it.
    /// A trial libtest dropped unrun (its filter disagreed) takes no
    /// outcome and leaves no receipt to wait for.
    fn hand(self, outcome: Result<(), Failed>) {
        if self.outcome.send(outcome).is_ok() {
            let _ = self.handed.recv();
        }
    }
}

/// The trial of a suite file that did not load, outside the loop: what
/// `--list` names, or one libtest's filter leaves out.
pub(super) fn unloaded(name: String, problems: String) -> Trial {
    Trial::test(name, move || Err(problems.into()))
}

/// Runs one item; a panic in it fails its trial with the panic's words, as
/// libtest would have, and the loop goes on.
fn run_item(run: &Execution, item: &Item) -> Result<(), Failed> {
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run.trial(&item.id, item.loc, || (item.each)(run, item.index))
    }));
    match ran {
        Ok(verdict) => verdict.map_err(Into::into),
        Err(panic) => {
            let words = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(format!("servegate panicked running this trial: {words}").into())
        }
    }
}

/// A libtest trial's body that reports the outcome handed to it, and its
/// handover.
fn waiting() -> (
    impl FnOnce() -> Result<(), Failed> + Send + 'static,
    Handover,
) {
    let (outcome, decided) = sync_channel(1);
    let (receipt, handed) = sync_channel::<Infallible>(0);
    let report = move || {
        // Back for a next trial: libtest has the last one's outcome.
        drop(REPORTED.with(|r| r.borrow_mut().take()));
        let outcome = decided.recv().unwrap_or_else(|_| {
            Err("servegate's run loop ended before this trial's turn (see the panic above)".into())
        });
        REPORTED.with(|r| *r.borrow_mut() = Some(receipt));
        outcome
    };
    (report, Handover { outcome, handed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// The loop hands a trial its outcome only once libtest was handed the
    /// one before: however slowly a worker sends its outcome on, what the
    /// loop does next (and prints) waits for it.
    #[test]
    fn a_next_step_waits_until_the_last_outcome_was_handed_on() {
        let events = Arc::new(Mutex::new(Vec::new()));
        let log = |e: &'static str| {
            let events = Arc::clone(&events);
            move || events.lock().unwrap().push(e)
        };
        let (first, first_handover) = waiting();
        let (second, second_handover) = waiting();
        let steps = [
            (first_handover, log("loop ran first")),
            (second_handover, log("loop ran second")),
        ];
        std::thread::scope(|scope| {
            scope.spawn(move || {
                for (handover, ran) in steps {
                    ran();
                    handover.hand(Ok(()));
                }
            });
            // libtest's workers: the trial, then (later, on a busy
            // machine) the send of its outcome, then the thread ends.
            let sent = log("first handed on");
            scope.spawn(move || {
                assert!(first().is_ok());
                std::thread::sleep(std::time::Duration::from_millis(100));
                sent();
            });
            scope.spawn(move || assert!(second().is_ok()));
        });
        assert_eq!(
            *events.lock().unwrap(),
            ["loop ran first", "first handed on", "loop ran second"]
        );
    }
}
