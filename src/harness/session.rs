//! One suite's run: its target and server lifecycle, the state its trials
//! share (each probe's verdict and answer, each gate's figures), and each
//! trial's bookkeeping. The probes run in `probes.rs`, the gates in
//! `gates.rs`; a gate runs only on a server whose correctness probes all
//! passed in this run. Whether the server is still there after a trial is
//! `liveness.rs`'s.

use std::cell::{RefCell, RefMut};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::runtime::Runtime;

use super::documents::Documents;
use super::events::{FigureBook, GateFigures, Listeners, RunEvent, TrialBook};
use super::target::{self, Connected, LaunchPlace, TargetError};
use crate::check::message::Message;
use crate::check::{accuracy, snapshot};
use crate::suite::{ConfigSource, Suite, Variant};

pub use super::outcome::Verdict;
use super::outcome::{Cause, Stop};
use crate::record::{FailureKind, TrialOutcome};

/// How a suite run reaches its server.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `<suite>` or `<suite>[<variant>]`.
    pub label: String,
    /// `--target` / `SERVEGATE_TARGET`.
    pub target_override: Option<String>,
    /// The variant run, if the suite has variants.
    pub variant: Option<Variant>,
    /// The run's directory, for server logs.
    pub run_dir: PathBuf,
    /// `baseline save`: `baseline` bounds are not applied.
    pub recording_baselines: bool,
    /// `--client-threads`, when given.
    pub client_threads: Option<u32>,
    /// `--client-limited`, when given.
    pub client_limited: Option<crate::suite::OnClientLimited>,
    /// What is written for an answer with no snapshot or a changed one.
    pub snapshots: snapshot::Update,
    /// Where `variant(NAME)` bounds find the figures of earlier variants
    /// (a listener of `listeners`, which keeps them).
    pub figures: Arc<FigureBook>,
    /// Where the trials that ended are (a listener of `listeners`).
    pub trials: Arc<TrialBook>,
    /// Who is told what happens.
    pub listeners: Listeners,
    /// The run history, where `history.…` and `no_regression` bounds
    /// read earlier runs.
    pub history: crate::history::Location,
    /// The probes `--skip` left out of the run, as indexes: no gate waits
    /// for them, and each gate's record names those it would have.
    pub skipped_probes: Vec<usize>,
}

/// Where a suite run's server stands: how many selected trials are still
/// to finish (the last one stops the server), whether it was lost and why.
#[derive(Debug, Default)]
pub(super) struct Lifecycle {
    remaining: usize,
    /// Why the server can no longer be trusted (it died, hung or logged a
    /// fatal line): the remaining trials fail fast with it.
    pub(super) lost: Option<String>,
}

/// A suite being run (once per variant), as everyone may read it: the
/// suite, its target once reached, the server's documents, the datasets
/// graded. What its trials settle is its [`Execution`]'s, which the run
/// loop owns.
pub(crate) struct SuiteRun {
    /// The suite.
    pub suite: Suite,
    /// `<suite>` or `<suite>[<variant>]`: the first segment of trial names.
    pub label: String,
    /// The variant run, if any.
    pub variant: Option<Variant>,
    pub(super) plan: Plan,
    /// Its server, or why it could not be reached; set by the first trial
    /// that needs it (a launched server starts then, not before).
    pub(super) target: OnceLock<Result<Connected, TargetError>>,
    /// Whether its launched server was stopped.
    stopped: AtomicBool,
    pub(super) runtime: Arc<Runtime>,
    pub(super) documents: Documents,
    /// Each dataset probe's graded items, once it ran.
    pub(super) graded: Vec<OnceLock<Vec<accuracy::ItemResult>>>,
}

/// A suite run as its trials run it, on the run loop's thread alone (it
/// is not `Sync`): the state its trials settle, without a lock.
pub(crate) struct Execution {
    run: Arc<SuiteRun>,
    /// Where the server stands.
    lifecycle: RefCell<Lifecycle>,
    /// Each config check's verdict, once it ran.
    pub(super) configs: Slots<Option<Verdict>>,
    /// What each probe's trials settled.
    pub(super) probes: Slots<ProbeState>,
    /// What each gate's trials settled.
    pub(super) gates: Slots<GateState>,
}

impl std::ops::Deref for Execution {
    type Target = SuiteRun;

    fn deref(&self) -> &SuiteRun {
        &self.run
    }
}

/// What a probe's trials have settled so far.
#[derive(Debug, Clone, Default)]
pub(super) struct ProbeState {
    /// Its correctness verdict, once it ran.
    pub(super) verdict: Option<Verdict>,
    /// Its request and answer, as the record keeps them.
    pub(super) exchange: Option<crate::record::Exchange>,
    /// Its answer as a snapshot stores it, and the snapshot's info.
    pub(super) answer: Option<(String, serde_json::Value)>,
    /// Its snapshot's verdict, once compared.
    pub(super) snapshot: Option<Verdict>,
}

/// What a gate's trials have settled so far.
#[derive(Debug, Clone, Default)]
pub(super) struct GateState {
    /// Its verdict, once its load ran and was judged.
    pub(super) verdict: Option<Verdict>,
    /// Its recheck's verdict under that load.
    pub(super) recheck: Option<Verdict>,
}

/// One stage's state: a slot per item (a probe, a gate, a config check),
/// in the suite's order. Borrowed only for the moment `read` or `write`
/// runs: a trial runs others (its prerequisites), which read their own.
#[derive(Debug)]
pub(super) struct Slots<T>(RefCell<Vec<T>>);

impl<T: Clone + Default> Slots<T> {
    fn new(items: usize) -> Self {
        Self(RefCell::new(vec![T::default(); items]))
    }

    /// What `f` reads of item `index`'s slot.
    pub(super) fn read<R>(&self, index: usize, f: impl FnOnce(&T) -> R) -> R {
        f(&self.0.borrow()[index])
    }

    /// Changes item `index`'s slot.
    pub(super) fn write(&self, index: usize, f: impl FnOnce(&mut T)) {
        f(&mut self.0.borrow_mut()[index]);
    }
}

impl SuiteRun {
    /// A run of `suite` as `plan` says, executing on `runtime` (the
    /// runtime itself, not a handle: a current-thread runtime's drivers run
    /// only inside its own `block_on`).
    pub fn new(suite: Suite, plan: Plan, runtime: Arc<Runtime>) -> Self {
        Self {
            label: plan.label.clone(),
            variant: plan.variant.clone(),
            plan,
            target: OnceLock::new(),
            stopped: AtomicBool::new(false),
            runtime,
            documents: Documents::default(),
            graded: suite.probes.iter().map(|_| OnceLock::new()).collect(),
            suite,
        }
    }

    /// Figures measured so far.
    pub fn figures(&self) -> Vec<GateFigures> {
        self.plan.figures.of(
            &self.suite.name,
            self.variant.as_ref().map(|v| v.name.as_str()),
        )
    }

    /// The dataset probes' outcomes so far, for the record.
    pub(crate) fn dataset_records(&self) -> Vec<crate::record::DatasetRecord> {
        let graded = self.suite.probes.iter().enumerate().filter_map(|(i, p)| {
            let ds = p.dataset.as_ref()?;
            Some((&p.name, ds, self.graded[i].get()?))
        });
        graded
            .map(|(probe, ds, items)| {
                let correct = items.iter().filter(|i| i.correct).count();
                #[expect(clippy::cast_precision_loss, reason = "dataset sizes are small")]
                let accuracy = correct as f64 / items.len().max(1) as f64;
                crate::record::DatasetRecord {
                    probe: probe.clone(),
                    file: ds.path.display().to_string(),
                    figure: ds.task.figure().to_owned(),
                    scored: items.len(),
                    correct,
                    accuracy,
                    interval95: accuracy::wilson95(correct, items.len()),
                    items: items.clone(),
                }
            })
            .collect()
    }

    /// The target, if a trial has reached (or failed to reach) it.
    pub fn target(&self) -> Option<&Result<Connected, TargetError>> {
        self.target.get()
    }

    /// Reaches (or launches) the target now and prints it.
    pub fn connect(&self) -> &Result<Connected, TargetError> {
        self.target.get_or_init(|| {
            let label = self.label.replace(['[', ']'], "-");
            let place = LaunchPlace {
                dir: &self.plan.run_dir,
                label: label.trim_end_matches('-'),
                variant: self.variant.as_ref(),
            };
            let connected = self.runtime.block_on(target::connect(
                &self.suite,
                self.plan.target_override.as_deref(),
                place,
            ));
            if let Ok(c) = &connected {
                // Kept for the run record, whether or not a check reads them.
                // By discovery's deadline: one a check needs is read again.
                for source in [ConfigSource::ServerInfo, ConfigSource::ModelInfo] {
                    let read = self.documents.get(c.documents_from(), source);
                    let _ = self
                        .runtime
                        .block_on(async { tokio::time::timeout_at(c.discovery_ends, read).await });
                }
            }
            self.plan.listeners.emit(&RunEvent::TargetReached {
                label: &self.label,
                target: &connected,
            });
            connected
        })
    }

    pub(super) fn connected(&self) -> Result<&Connected, Stop> {
        self.connect().as_ref().map_err(|e| {
            let mut message = Message::of_error(e);
            let _ = write!(
                message,
                "  (suite `{}`, every trial of it fails)",
                self.label
            );
            Stop::failed(FailureKind::Target, message)
        })
    }

    pub(super) fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// How the trials that ran so far ended.
    pub fn outcomes(&self) -> Vec<crate::record::TrialRecord> {
        self.plan.trials.of(&self.label)
    }

    /// Stops a launched server (after the suite's last trial).
    pub(crate) fn stop_server(&self) {
        let Some(Ok(Connected {
            server: Some(s),
            workers,
            ..
        })) = self.target.get()
        else {
            return;
        };
        if !self.stopped.swap(true, Ordering::SeqCst) {
            let how = |s: &crate::server::Server| {
                s.stop()
                    .map_or_else(|| "status unknown".to_owned(), |e| e.to_string())
            };
            // The router first: nothing is sent to a worker being stopped.
            eprintln!(
                "servegate: stopped the server of `{}` ({})",
                self.label,
                how(s)
            );
            for w in workers {
                eprintln!(
                    "servegate: stopped worker `{}` of `{}` ({})",
                    w.name,
                    self.label,
                    how(&w.server)
                );
            }
        }
    }
}

impl Execution {
    /// The run of `run`'s trials, none settled yet.
    pub(crate) fn new(run: Arc<SuiteRun>) -> Self {
        Self {
            lifecycle: RefCell::default(),
            configs: Slots::new(run.suite.expect_server.len()),
            probes: Slots::new(run.suite.probes.len()),
            gates: Slots::new(run.suite.gates.len()),
            run,
        }
    }

    /// The suite run, as everyone may read it.
    pub(super) fn shared(&self) -> Arc<SuiteRun> {
        Arc::clone(&self.run)
    }

    /// Counts a selected trial; the last to finish stops a launched server.
    pub(super) fn expect_trial(&self) {
        self.lifecycle().remaining += 1;
    }

    /// The server's state.
    pub(super) fn lifecycle(&self) -> RefMut<'_, Lifecycle> {
        self.lifecycle.borrow_mut()
    }

    /// Runs one trial (its item written at `loc`): fails fast once the
    /// server is lost, checks the server after the trial, records the
    /// outcome, stops the server after the last trial.
    pub(super) fn trial(
        &self,
        id: &crate::record::TrialId,
        loc: crate::suite::node::Loc,
        body: impl FnOnce() -> Verdict,
    ) -> Verdict {
        let started = std::time::Instant::now();
        let name = id.name();
        // Whatever a server put in the message is made safe for a terminal
        // and a CI log, its secrets scrubbed, before libtest prints it.
        let verdict = self
            .trial_inner(&name, body)
            .map_err(|stop| stop.map_text(crate::text::for_log));
        // A trial that ended while a signal or a closed output stops the run
        // ended by that stop (its server killed, its requests cut): its
        // outcome is not the server's, and is not recorded. The stopping
        // thread writes the record of what finished and exits.
        crate::process::reaper::park_if_stopping();
        let exchange = (id.stage == crate::record::Stage::Correctness && id.part.is_none())
            .then(|| self.suite.probes.iter().position(|p| p.name == id.item))
            .flatten()
            .and_then(|i| self.probes.read(i, |p| p.exchange.clone()));
        self.plan
            .listeners
            .emit(&RunEvent::TrialFinished(&crate::record::TrialRecord {
                name,
                id: id.clone(),
                outcome: verdict
                    .as_ref()
                    .map_or_else(Stop::outcome, |()| TrialOutcome::Passed),
                kind: verdict.as_ref().err().and_then(Stop::kind),
                duration_s: started.elapsed().as_secs_f64(),
                file: self.suite.file.display(),
                line: loc.line,
                points_at: verdict
                    .as_ref()
                    .err()
                    .and_then(Stop::points_at)
                    .map(|at| at.line),
                message: verdict.as_ref().err().map(ToString::to_string),
                cause: verdict.as_ref().err().and_then(Stop::cause).cloned(),
                exchange,
            }));
        verdict
    }

    fn trial_inner(&self, name: &str, body: impl FnOnce() -> Verdict) -> Verdict {
        let lost = self.lifecycle().lost.clone();
        let verdict = if let Some(cause) = lost {
            Err(Stop::Gated(Cause::ServerLost(cause)))
        } else {
            let verdict = body();
            self.check_server(name, verdict)
        };
        let was_last = {
            let mut l = self.lifecycle();
            l.remaining = l.remaining.saturating_sub(1);
            l.remaining == 0
        };
        if was_last {
            self.stop_server();
        }
        verdict
    }
}

/// The verdict `field` picks of item `index`'s slot, running `run` to
/// fill it the first time (the slot is not borrowed while it runs: a trial
/// runs others, which read their own slots).
pub(super) fn once<T: Clone + Default>(
    slots: &Slots<T>,
    index: usize,
    field: fn(&mut T) -> &mut Option<Verdict>,
    run: impl FnOnce() -> Verdict,
) -> Verdict {
    let done = field(&mut slots.0.borrow_mut()[index]).clone();
    if let Some(done) = done {
        return done;
    }
    let verdict = run();
    slots.write(index, |s| *field(s) = Some(verdict.clone()));
    verdict
}
