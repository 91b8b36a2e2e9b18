//! One suite's run: its target and server lifecycle, the state its trials
//! share (each probe's verdict and answer, each gate's figures), and each
//! trial's bookkeeping. The probes run in `probes.rs`, the gates in
//! `gates.rs`; a gate runs only on a server whose correctness probes all
//! passed in this run.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::runtime::Runtime;

use super::documents::Documents;
use super::target::{self, Connected, LaunchPlace};
use crate::check::message::Message;
use crate::check::{accuracy, snapshot};
use crate::client::{Client, Deadline, ErrorKind};
use crate::load::metrics::GateMetrics;
use crate::suite::{ConfigSource, Suite, Timeouts, Variant};

pub use super::outcome::Verdict;
use super::outcome::{Cause, Stop};
use crate::record::{FailureKind, TrialOutcome};

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
pub struct FigureBook(Mutex<Vec<BookEntry>>);

/// One gate's figures in a [`FigureBook`].
#[derive(Debug, Clone)]
struct BookEntry {
    suite: String,
    variant: Option<String>,
    figures: GateFigures,
}

impl FigureBook {
    /// Records a gate's figures for `suite` (and `variant`).
    pub fn record(&self, suite: &str, variant: Option<&str>, figures: GateFigures) {
        if let Ok(mut book) = self.0.lock() {
            book.push(BookEntry {
                suite: suite.to_owned(),
                variant: variant.map(str::to_owned),
                figures,
            });
        }
    }

    /// Every gate's figures of `suite` (and `variant`), in the order they
    /// were measured.
    pub fn of(&self, suite: &str, variant: Option<&str>) -> Vec<GateFigures> {
        self.0.lock().map_or_else(
            |_| Vec::new(),
            |book| {
                book.iter()
                    .filter(|e| e.suite == suite && e.variant.as_deref() == variant)
                    .map(|e| e.figures.clone())
                    .collect()
            },
        )
    }
}

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
    /// Where its gates' figures go, and where `variant(NAME)` bounds find
    /// those of earlier variants.
    pub figures: Arc<FigureBook>,
    /// The run history, where `history.…` and `no_regression` bounds
    /// read earlier runs.
    pub history: crate::history::Location,
    /// The probes `--skip` left out of the run, as indexes: no gate waits
    /// for them, and each gate's record names those it would have.
    pub skipped_probes: Vec<usize>,
}

/// Where a suite run's server stands, under one lock: how many selected
/// trials are still to finish (the last one stops the server), whether it
/// was lost and why, whether it was stopped.
#[derive(Debug, Default)]
struct Lifecycle {
    remaining: usize,
    /// Why the server can no longer be trusted (it died, hung or logged a
    /// fatal line): the remaining trials fail fast with it.
    lost: Option<String>,
    stopped: bool,
}

/// A suite being run (once per variant).
pub struct SuiteRun {
    /// The suite.
    pub suite: Suite,
    /// `<suite>` or `<suite>[<variant>]`: the first segment of trial names.
    pub label: String,
    /// The variant run, if any.
    pub variant: Option<Variant>,
    pub(super) plan: Plan,
    /// Its server, or why it could not be reached; set by the first trial
    /// that needs it (a launched server starts then, not before).
    pub(super) target: OnceLock<Result<Connected, String>>,
    /// Where the server stands.
    lifecycle: Mutex<Lifecycle>,
    /// How each trial that ran ended.
    pub(super) outcomes: Mutex<Vec<crate::record::TrialRecord>>,
    pub(super) runtime: Arc<Runtime>,
    /// Each config check's verdict, once it ran.
    pub(super) configs: Slots<Option<Verdict>>,
    pub(super) documents: Documents,
    /// What each probe's trials settled.
    pub(super) probes: Slots<ProbeState>,
    /// What each gate's trials settled.
    pub(super) gates: Slots<GateState>,
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
    /// A dataset probe's graded items, once it ran.
    pub(super) graded: Option<Vec<accuracy::ItemResult>>,
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
/// in the suite's order.
#[derive(Debug)]
pub(super) struct Slots<T>(Mutex<Vec<T>>);

impl<T: Clone + Default> Slots<T> {
    fn new(items: usize) -> Self {
        Self(Mutex::new(vec![T::default(); items]))
    }

    /// What `f` reads of item `index`'s slot (nothing when the lock is
    /// poisoned: a trial panicked holding it).
    pub(super) fn read<R>(&self, index: usize, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.0.lock().ok().map(|s| f(&s[index]))
    }

    /// Changes item `index`'s slot.
    pub(super) fn write(&self, index: usize, f: impl FnOnce(&mut T)) {
        if let Ok(mut s) = self.0.lock() {
            f(&mut s[index]);
        }
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
            lifecycle: Mutex::default(),
            outcomes: Mutex::new(Vec::new()),
            runtime,
            configs: Slots::new(suite.expect_server.len()),
            documents: Documents::default(),
            probes: Slots::new(suite.probes.len()),
            gates: Slots::new(suite.gates.len()),
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
    pub fn dataset_records(&self) -> Vec<crate::record::DatasetRecord> {
        let graded = self.suite.probes.iter().enumerate().filter_map(|(i, p)| {
            let ds = p.dataset.as_ref()?;
            Some((&p.name, ds, self.probes.read(i, |s| s.graded.clone())??))
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
    pub fn target(&self) -> Option<&Result<Connected, String>> {
        self.target.get()
    }

    /// Reaches (or launches) the target now and prints it.
    pub fn connect(&self) -> &Result<Connected, String> {
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
                    let read = self.documents.get(&c.client, source);
                    let _ = self
                        .runtime
                        .block_on(async { tokio::time::timeout_at(c.discovery_ends, read).await });
                }
            }
            let line = match &connected {
                Ok(c) => format!("servegate: suite `{}` → {}", self.label, c.description),
                Err(e) => format!("servegate: suite `{}` → target FAILED: {e}", self.label),
            };
            eprintln!("{}", crate::text::for_log(&line));
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

    /// Counts a selected trial; the last to finish stops a launched server.
    pub fn expect_trial(&self) {
        self.lifecycle().remaining += 1;
    }

    /// The server's state; a trial that panicked holding it leaves it as it
    /// was.
    fn lifecycle(&self) -> std::sync::MutexGuard<'_, Lifecycle> {
        self.lifecycle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How the trials that ran so far ended.
    pub fn outcomes(&self) -> Vec<crate::record::TrialRecord> {
        self.outcomes.lock().map(|o| o.clone()).unwrap_or_default()
    }

    /// How the last trial that ran ended.
    pub fn last_outcome(&self) -> Option<crate::record::TrialRecord> {
        self.outcomes.lock().ok()?.last().cloned()
    }

    /// Runs one trial (its item written at `loc`): fails fast once the
    /// server is lost, checks the server after the trial, records the
    /// outcome, stops the server after the last trial.
    pub fn trial(
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
            .and_then(|i| self.probes.read(i, |p| p.exchange.clone()).flatten());
        if let Ok(mut o) = self.outcomes.lock() {
            o.push(crate::record::TrialRecord {
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
                exchange,
            });
        }
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

    /// After a trial: a launched server that exited or logged a fatal line,
    /// or any server that no longer answers after a failure, is lost.
    fn check_server(&self, name: &str, verdict: Verdict) -> Verdict {
        let Some(Ok(c)) = self.target.get() else {
            return verdict;
        };
        // A death names the fatal line its log has, whichever was seen
        // first: the crash and its cause in one message.
        let died = |s: &crate::server::Server| {
            s.exited().map(|exit| {
                let fatal = s.fatal_line().map_or_else(String::new, |f| {
                    format!(", after its log's {}", s.describe_fatal(&f))
                });
                format!("the server {exit} during {name}{fatal}\n{}", s.tail())
            })
        };
        let mut cause = c.server.as_ref().and_then(|s| {
            died(s).or_else(|| {
                s.fatal_line()
                    .map(|f| format!("{} during {name}\n{}", s.describe_fatal(&f), s.tail()))
            })
        });
        if cause.is_none() && verdict.is_err() {
            cause = self.unresponsive(c, name).map(|hung| {
                // A server that stopped answering may be on its way out:
                // give its exit a moment to show, to name the real cause.
                let dying = c.server.as_ref().and_then(|s| {
                    (0..100).find_map(|_| {
                        died(s).or_else(|| {
                            std::thread::sleep(Duration::from_millis(20));
                            None
                        })
                    })
                });
                dying.unwrap_or(hung)
            });
        }
        let Some(cause) = cause else {
            return verdict;
        };
        self.lifecycle().lost = Some(format!(
            "{}\n  (the remaining trials of `{}` fail with this cause)",
            cause.lines().next().unwrap_or(""),
            self.label
        ));
        // The trial's own failure keeps its marks and places: an
        // annotation still points at its assertion.
        let mut message = Message::of_error(&cause);
        match verdict {
            Err(Stop::Failed(own)) => {
                let _ = writeln!(message, "  the trial's own failure:");
                message.append(own.message);
            }
            Err(gated) => {
                let _ = write!(message, "  the trial's own failure:\n{gated}");
            }
            Ok(()) => {}
        }
        Err(Stop::failed(FailureKind::Server, message))
    }

    /// `Some(cause)` when the server does not show it is alive within
    /// 10 s in all: SGLang's `GET /health_generate` generates a token
    /// through the scheduler (its `/health` does too by default in 0.5.23,
    /// but answers 200 without it under
    /// `SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0`, so a hung scheduler
    /// would pass), and answers 503 when none came. Any other answer (a
    /// 404 from vLLM or llama.cpp, which lack the route) sends the
    /// question to `GET /health`, and then, as its answer proves only the HTTP
    /// front alive (vLLM 0.32 answers 200 while its engine process is
    /// stopped), to a generation of one token in the suite's API: whatever
    /// comes back is an answer (a token, even one the stream then stalls
    /// after; an error in words; bytes that are not the protocol; a
    /// connection closed at once: the trials judge those); no first token
    /// in time, or a refused connection, is not — all within what is left
    /// of the same 10 s. A launched server whose `/health` answered 5xx and
    /// that then exits within those 10 s is not alive either: its exit,
    /// and its log's tail, name the cause.
    fn unresponsive(&self, c: &Connected, name: &str) -> Option<String> {
        let quick = Timeouts {
            connect: Duration::from_secs(5),
            total: WITHIN,
            ..Timeouts::default()
        };
        let client = c.client.with_timeouts(quick);
        let started = tokio::time::Instant::now();
        // The question under way when the deadline came.
        let asking = std::cell::Cell::new("GET /health_generate");
        let asked = async {
            match client.get("/health_generate").await {
                Ok((200..=299, _)) => None,
                Ok((503, _)) => Some(
                    "GET /health_generate answered 503: the server could not generate a token"
                        .to_owned(),
                ),
                Ok(_) => {
                    asking.set("GET /health_generate, then GET /health");
                    let health = match client.get("/health").await {
                        Ok((status, _)) => status,
                        Err(e) => return Some(format!("GET /health: {e}")),
                    };
                    asking
                        .set("GET /health_generate, then GET /health, then a one-token generation");
                    let hung = one_token_answered(&client, started).await;
                    if hung.is_some() || health < 500 {
                        return hung;
                    }
                    let s = c.server.as_ref()?;
                    asking.set("GET /health (5xx), then the launched server's exit");
                    exit_within(s, started)
                        .await
                        .then(|| format!("GET /health answered {health}, and the server exited"))
                }
                Err(e) => Some(format!("GET /health_generate: {e}")),
            }
        };
        let why = match self
            .runtime
            .block_on(async { tokio::time::timeout(WITHIN, asked).await })
        {
            Ok(None) => return None,
            Ok(Some(why)) => why,
            Err(_) => format!(
                "{}: no answer within {}",
                asking.get(),
                crate::units::format_secs(WITHIN.as_secs_f64())
            ),
        };
        let tail = c
            .server
            .as_ref()
            .map_or_else(String::new, |s| format!("\n{}", s.tail()));
        Some(format!(
            "the server stopped answering during {name} ({why}){tail}"
        ))
    }

    /// Stops a launched server (after the suite's last trial).
    pub fn stop_server(&self) {
        let Some(Ok(Connected {
            server: Some(s), ..
        })) = self.target.get()
        else {
            return;
        };
        let already = std::mem::replace(&mut self.lifecycle().stopped, true);
        if !already {
            let how = s.stop();
            eprintln!(
                "servegate: stopped the server of `{}` ({})",
                self.label,
                how.map_or_else(|| "status unknown".to_owned(), |e| e.to_string())
            );
        }
    }
}

/// How long the liveness question may take in all.
const WITHIN: Duration = Duration::from_secs(10);

/// `Some(cause)` when a one-token generation brings no token within what
/// is left of the liveness check's 10 s since `started`. A token that
/// came, then a stall, is a token: asked first with a 1 s idle deadline,
/// the stall ends the question quickly, not the server (the text kept
/// says whether one came). As that deadline also runs between the
/// answer's headers and its first token (vLLM sends its headers with no
/// token behind them while its engine is stopped), a question stalled
/// there without a token is asked again with all that is left, so a slow
/// first token still counts.
async fn one_token_answered(client: &Client, started: tokio::time::Instant) -> Option<String> {
    let left = || {
        WITHIN
            .saturating_sub(started.elapsed())
            .saturating_sub(Duration::from_millis(300))
    };
    let ask = |idle: Duration| {
        let left = left();
        let c = client.with_timeouts(Timeouts {
            connect: left.min(Duration::from_secs(5)),
            first_token: left,
            idle,
            total: left,
        });
        async move { c.sample(&one_token()).await }
    };
    let no_token = |e: &crate::client::CallError| {
        e.kind == ErrorKind::Connect
            || (matches!(e.kind, ErrorKind::Timeout(..)) && e.partial.is_empty())
    };
    let mut answer = ask(Duration::from_secs(1)).await;
    if let Err(e) = &answer
        && e.kind == ErrorKind::Timeout(Deadline::Idle, Duration::from_secs(1))
        && e.partial.is_empty()
    {
        answer = ask(left()).await;
    }
    match answer {
        Err(e) if no_token(&e) => Some(format!(
            "GET /health answered, but a one-token generation got no token: {e}"
        )),
        _ => None,
    }
}

/// Whether the launched server `s` exits within what is left of the
/// liveness check's 10 s since `started`. A server whose `/health` says
/// it is failing may be on its way out: vLLM 0.32, its engine dead,
/// answers `/health` 503 and requests with the error in words until its
/// watchdog (every 5 s, `entrypoints/launchers/launcher.py`) shuts it
/// down; its exit, with its log's tail (the engine's stack trace), is the
/// cause to name.
async fn exit_within(s: &crate::server::Server, started: tokio::time::Instant) -> bool {
    while started.elapsed() + Duration::from_millis(400) < WITHIN {
        if s.exited().is_some() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// The liveness question's generation: one token of a one-word prompt,
/// greedy.
fn one_token() -> crate::client::CallRequest {
    crate::client::CallRequest {
        input: crate::suite::Input::Prompt {
            system: None,
            prompt: "Hi".to_owned(),
        },
        sampling: crate::suite::Sampling {
            max_tokens: Some(1),
            temperature: Some(0.0),
            ..crate::suite::Sampling::default()
        },
        ignore_eos: false,
    }
}

/// The verdict `field` picks of item `index`'s slot, running `run` to
/// fill it the first time (the lock is not held while it runs: a trial
/// runs others, which read their own slots).
pub(super) fn once<T: Clone + Default>(
    slots: &Slots<T>,
    index: usize,
    field: fn(&mut T) -> &mut Option<Verdict>,
    run: impl FnOnce() -> Verdict,
) -> Verdict {
    let done = slots
        .0
        .lock()
        .ok()
        .and_then(|mut s| field(&mut s[index]).clone());
    if let Some(done) = done {
        return done;
    }
    let verdict = run();
    slots.write(index, |s| *field(s) = Some(verdict.clone()));
    verdict
}
