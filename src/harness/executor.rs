//! servegate's run loop: one thread runs every selected trial of the run in
//! the list's order (config checks, then each probe and its snapshot, then
//! the gates, their rechecks and curves, suite run after suite run), and
//! owns what those trials settle ([`Execution`]: no lock around it). A
//! trial runs the prerequisites it needs (a gate its probes, a curve its
//! levels) that no selected trial ran before it.
//!
//! libtest-mimic stays the harness users see: it lists, filters and prints
//! the trials, each of which waits for the outcome the loop decided and
//! reports it. The loop runs a step only once libtest has started its
//! trial (after its `running N tests` line; a trial libtest left out is
//! not run) and has been handed the outcome of the trial before it: what a
//! trial prints (a server launched or stopped) comes before its own
//! `test … ok` line, and after the one before it as soon as libtest's
//! printer, on its own thread, has written that line.

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

/// What passes between a step of the loop and its libtest trial: that
/// the trial started, its outcome, and that libtest was handed it (the
/// receipt's sending side is dropped then; nothing is ever sent on it).
struct Handover {
    started: Receiver<()>,
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
    /// (those the loop's steps report, and the others by name). A loop
    /// that panicked fails the trials it had not reported (they say so)
    /// and the run.
    pub(super) fn run_as(
        self,
        args: &libtest_mimic::Arguments,
        trials: Vec<Trial>,
    ) -> std::io::Result<libtest_mimic::Conclusion> {
        std::thread::scope(|scope| {
            let Executor { runs, steps } = self;
            let run = std::thread::Builder::new()
                .name("servegate-run".to_owned())
                .spawn_scoped(scope, move || {
                    in_turn(steps, |work| match work {
                        Work::Unloaded(problems) => Err(problems.into()),
                        Work::Item(at, item) => run_item(&runs[at], &item),
                    });
                })?;
            let mut conclusion = libtest_mimic::run(args, trials);
            if run.join().is_err() {
                conclusion.num_failed = conclusion.num_failed.max(1);
            }
            Ok(conclusion)
        })
    }
}

/// Runs each step in order once its trial started, hands the trial its
/// outcome, and waits until libtest was handed it. A trial libtest dropped
/// unrun (its filter disagreed) is not run and leaves nothing to wait for.
fn in_turn<W>(
    steps: impl IntoIterator<Item = (W, Handover)>,
    mut run: impl FnMut(W) -> Result<(), Failed>,
) {
    for (work, handover) in steps {
        if handover.started.recv().is_err() {
            continue;
        }
        if handover.outcome.send(run(work)).is_ok() {
            let _ = handover.handed.recv();
        }
    }
}

/// The trial of a suite file that did not load, outside the loop: what
/// `--list` names, or one libtest's filter leaves out.
pub(super) fn unloaded(name: String, problems: String) -> Trial {
    Trial::test(name, move || Err(problems.into()))
}

/// Runs one item; a panic in it fails its trial as libtest would have
/// failed it, and the loop goes on.
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
                .or_else(|| panic.downcast_ref::<String>().cloned());
            Err(words.map_or_else(
                || "test panicked".into(),
                |w| format!("test panicked: {w}").into(),
            ))
        }
    }
}

/// A libtest trial's body that reports the outcome handed to it, and its
/// handover.
fn waiting() -> (
    impl FnOnce() -> Result<(), Failed> + Send + 'static,
    Handover,
) {
    let (starts, started) = sync_channel(1);
    let (outcome, decided) = sync_channel(1);
    let (receipt, handed) = sync_channel::<Infallible>(0);
    let report = move || {
        // Back for a next trial: libtest has the last one's outcome.
        drop(REPORTED.with(|r| r.borrow_mut().take()));
        let _ = starts.send(());
        let outcome = decided.recv().unwrap_or_else(|_| {
            Err("servegate's run loop ended before this trial's turn (see the panic above)".into())
        });
        REPORTED.with(|r| *r.borrow_mut() = Some(receipt));
        outcome
    };
    (
        report,
        Handover {
            started,
            outcome,
            handed,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// The loop runs a step only once its trial started and libtest was
    /// handed the outcome before it, which a worker says by coming back for
    /// its next trial (or ending): here one worker runs the first and the
    /// fourth trials, slow to send the first one's outcome on, the other the
    /// second; the third, which libtest dropped unrun, is not run.
    #[test]
    fn a_step_runs_in_its_turn_after_the_last_outcome_was_handed_on() {
        let events = Arc::new(Mutex::new(Vec::new()));
        let log = |e: &'static str| {
            let events = Arc::clone(&events);
            move || events.lock().unwrap().push(e)
        };
        let (first, one) = waiting();
        let (second, two) = waiting();
        let (dropped, three) = waiting();
        let (fourth, four) = waiting();
        drop(dropped);
        let handed_on = log("first handed on");
        let done = {
            let (events, (sent, ends)) = (Arc::clone(&events), sync_channel(1));
            std::thread::spawn(move || {
                let names = [
                    "loop ran first",
                    "loop ran second",
                    "loop ran the dropped",
                    "loop ran fourth",
                ];
                let steps = [(0, one), (1, two), (2, three), (3, four)];
                std::thread::scope(|scope| {
                    scope.spawn(|| {
                        in_turn(steps, |i| {
                            events.lock().unwrap().push(names[i]);
                            Ok(())
                        });
                    });
                    // libtest's workers: the trial, then (later, on a busy
                    // machine) the send of its outcome, then the next trial.
                    scope.spawn(move || {
                        assert!(first().is_ok());
                        std::thread::sleep(Duration::from_millis(100));
                        handed_on();
                        assert!(fourth().is_ok());
                    });
                    scope.spawn(move || {
                        std::thread::sleep(Duration::from_millis(10));
                        assert!(second().is_ok());
                    });
                });
                let _ = sent.send(());
            });
            ends
        };
        // A loop that waits for a receipt never dropped would hang.
        done.recv_timeout(Duration::from_secs(20))
            .expect("the loop and its trials ended");
        assert_eq!(
            *events.lock().unwrap(),
            [
                "loop ran first",
                "first handed on",
                "loop ran second",
                "loop ran fourth"
            ]
        );
    }
}
