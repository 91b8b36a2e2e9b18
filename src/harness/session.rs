//! One suite's run: its target, the outcome of each probe, the figures of
//! each gate, and the rule that ties them — a gate runs only on a server
//! whose correctness probes all passed in this run.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::runtime::Runtime;

use super::config;
use super::judge::{References, VariantFigures, judge, judge_curve};
use super::target::{self, Connected, LaunchPlace};
use crate::check::evaluate;
use crate::check::failure::{Problem, Sent, assertions_failed, request_failed};
use crate::check::{accuracy, snapshot};
use crate::client::CallRequest;
use crate::client::error::excerpt;
use crate::load::baseline::{self, Lookup};
use crate::load::metrics::GateMetrics;
use crate::load::runner::run_gate;
use crate::load::workload::PROMPT_APPROXIMATION;
use crate::suite::diagnostics::render_location;
use crate::suite::threshold::Bound;
use crate::suite::{
    Arrival, ConfigSource, Contract, DatasetProbe, Gate, Input, LoadPrompt, Pace, Probe,
    SnapshotMode, Suite, Timeouts, Variant,
};
use crate::units::format_duration;
use futures_util::StreamExt as _;

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
    pub figures: std::collections::BTreeMap<String, f64>,
    /// Each threshold with its verdict.
    pub checks: Vec<(String, bool)>,
    /// The value of each repeat of every figure a threshold names.
    pub repeat_values: std::collections::BTreeMap<String, Vec<f64>>,
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
    /// What is written for an answer with no snapshot or a changed one.
    pub snapshots: snapshot::Update,
    /// Every suite run of the harness run: where `variant(NAME)` bounds
    /// find the figures of earlier variants (weak: the book owns the runs).
    pub siblings: std::sync::Weak<Mutex<Vec<Arc<SuiteRun>>>>,
}

/// A suite being run (once per variant).
pub struct SuiteRun {
    /// The suite.
    pub suite: Suite,
    /// `<suite>` or `<suite>[<variant>]`: the first segment of trial names.
    pub label: String,
    /// The variant run, if any.
    pub variant: Option<Variant>,
    plan: Plan,
    /// Its server, or why it could not be reached; set by the first trial
    /// that needs it (a launched server starts then, not before).
    target: OnceLock<Result<Connected, String>>,
    /// Why the server can no longer be trusted (it died, hung or logged a
    /// fatal line): the remaining trials fail fast with it.
    lost: Mutex<Option<String>>,
    /// Selected trials not yet finished: the last one stops the server.
    remaining: AtomicUsize,
    /// How each trial that ran ended.
    outcomes: Mutex<Vec<crate::record::TrialRecord>>,
    /// Each probe's request and answer, by probe name.
    exchanges: Mutex<Vec<(String, crate::record::Exchange)>>,
    stopped: std::sync::atomic::AtomicBool,
    runtime: Arc<Runtime>,
    pub(super) configs: Mutex<Vec<Option<Verdict>>>,
    pub(super) documents: config::Documents,
    probes: Mutex<Vec<Option<Verdict>>>,
    /// Each probe's answer as a snapshot stores it, once it came.
    answers: Mutex<Vec<Option<(String, serde_json::Value)>>>,
    snapshots: Mutex<Vec<Option<Verdict>>>,
    /// Every graded item of the dataset probes: probe, file, items.
    pub(super) datasets: Mutex<Vec<(String, PathBuf, Vec<accuracy::ItemResult>)>>,
    gates: Mutex<Vec<Option<Verdict>>>,
    figures: Mutex<Vec<GateFigures>>,
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
            lost: Mutex::new(None),
            remaining: AtomicUsize::new(0),
            outcomes: Mutex::new(Vec::new()),
            exchanges: Mutex::new(Vec::new()),
            stopped: std::sync::atomic::AtomicBool::new(false),
            runtime,
            configs: Mutex::new(vec![None; suite.expect_server.len()]),
            documents: config::Documents::default(),
            probes: Mutex::new(vec![None; suite.probes.len()]),
            answers: Mutex::new(vec![None; suite.probes.len()]),
            snapshots: Mutex::new(vec![None; suite.probes.len()]),
            datasets: Mutex::new(Vec::new()),
            gates: Mutex::new(vec![None; suite.gates.len()]),
            figures: Mutex::new(Vec::new()),
            suite,
        }
    }

    /// Figures measured so far.
    pub fn figures(&self) -> Vec<GateFigures> {
        self.figures.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// The dataset probes' outcomes so far, for the record.
    pub fn dataset_records(&self) -> Vec<crate::record::DatasetRecord> {
        let Ok(d) = self.datasets.lock() else {
            return Vec::new();
        };
        d.iter()
            .map(|(probe, path, items)| {
                let correct = items.iter().filter(|i| i.correct).count();
                #[expect(clippy::cast_precision_loss, reason = "dataset sizes are small")]
                let accuracy = correct as f64 / items.len().max(1) as f64;
                crate::record::DatasetRecord {
                    probe: probe.clone(),
                    file: path.display().to_string(),
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
                for source in [ConfigSource::ServerInfo, ConfigSource::ModelInfo] {
                    let _ = self.runtime.block_on(self.documents.get(&c.client, source));
                }
            }
            let line = match &connected {
                Ok(c) => format!("servegate: suite `{}` → {}", self.label, c.description),
                Err(e) => format!("servegate: suite `{}` → target FAILED: {e}", self.label),
            };
            println!("{}", crate::text::for_log(&line));
            connected
        })
    }

    pub(super) fn connected(&self) -> Result<&Connected, Stop> {
        self.connect().as_ref().map_err(|e| {
            Stop::failed(
                FailureKind::Target,
                format!(
                    "error: {e}\n  (suite `{}`, every trial of it fails)",
                    self.label
                ),
            )
        })
    }

    pub(super) fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Counts a selected trial; the last to finish stops a launched server.
    pub fn expect_trial(&self) {
        self.remaining.fetch_add(1, Ordering::SeqCst);
    }

    /// How the trials that ran so far ended.
    pub fn outcomes(&self) -> Vec<crate::record::TrialRecord> {
        self.outcomes.lock().map(|o| o.clone()).unwrap_or_default()
    }

    /// How the last trial that ran ended.
    pub fn last_outcome(&self) -> Option<crate::record::TrialRecord> {
        self.outcomes.lock().ok()?.last().cloned()
    }

    /// Runs one trial named `name` (its item written at `loc`): fails fast
    /// once the server is lost, checks the server after the trial, records
    /// the outcome, stops the server after the last trial.
    pub fn trial(
        &self,
        name: &str,
        loc: crate::suite::node::Loc,
        body: impl FnOnce() -> Verdict,
    ) -> Verdict {
        let started = std::time::Instant::now();
        // Whatever a server put in the message is made safe for a terminal
        // and a CI log, its secrets scrubbed, before libtest prints it.
        let verdict = self
            .trial_inner(name, body)
            .map_err(|stop| stop.map_text(crate::text::for_log));
        let exchange = name
            .strip_prefix(self.label.as_str())
            .and_then(|r| r.strip_prefix("::correctness::"))
            .and_then(|probe| {
                let ex = self.exchanges.lock().ok()?;
                ex.iter().find(|(p, _)| p == probe).map(|(_, e)| e.clone())
            });
        if let Ok(mut o) = self.outcomes.lock() {
            o.push(crate::record::TrialRecord {
                name: name.to_owned(),
                suite: self.label.clone(),
                stage: name
                    .strip_prefix(self.label.as_str())
                    .and_then(|r| r.strip_prefix("::"))
                    .and_then(|r| r.split("::").next())
                    .unwrap_or("")
                    .to_owned(),
                outcome: verdict
                    .as_ref()
                    .map_or_else(Stop::outcome, |()| TrialOutcome::Passed),
                kind: verdict.as_ref().err().and_then(Stop::kind),
                duration_s: started.elapsed().as_secs_f64(),
                file: self.suite.file.display(),
                line: loc.line,
                message: verdict.as_ref().err().map(ToString::to_string),
                exchange,
            });
        }
        verdict
    }

    fn trial_inner(&self, name: &str, body: impl FnOnce() -> Verdict) -> Verdict {
        let lost = self.lost.lock().ok().and_then(|l| l.clone());
        let verdict = if let Some(cause) = lost {
            Err(Stop::Gated(Cause::ServerLost(cause)))
        } else {
            let verdict = body();
            self.check_server(name, verdict)
        };
        if self.remaining.fetch_sub(1, Ordering::SeqCst) == 1 {
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
        let died = |s: &crate::server::Server| {
            s.exited()
                .map(|exit| format!("the server {exit} during {name}\n{}", s.tail()))
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
        if let Ok(mut l) = self.lost.lock() {
            *l = Some(format!(
                "{}\n  (the remaining trials of `{}` fail with this cause)",
                cause.lines().next().unwrap_or(""),
                self.label
            ));
        }
        let own = verdict.err().map_or_else(String::new, |e| {
            format!("\n  the trial's own failure:\n{e}")
        });
        Err(Stop::failed(
            FailureKind::Server,
            format!("error: {cause}{own}"),
        ))
    }

    /// `Some(cause)` when `GET /health` gets no HTTP answer within 10 s.
    fn unresponsive(&self, c: &Connected, name: &str) -> Option<String> {
        let quick = Timeouts {
            connect: Duration::from_secs(5),
            total: Duration::from_secs(10),
            ..Timeouts::default()
        };
        let client = c.client.with_timeouts(quick);
        let answer = self.runtime.block_on(client.get("/health"));
        answer.err().map(|e| {
            let tail = c
                .server
                .as_ref()
                .map_or_else(String::new, |s| format!("\n{}", s.tail()));
            format!("the server stopped answering during {name} (GET /health: {e}){tail}")
        })
    }

    /// Stops a launched server (after the suite's last trial).
    pub fn stop_server(&self) {
        if let Some(Ok(Connected {
            server: Some(s), ..
        })) = self.target.get()
            && !self.stopped.swap(true, Ordering::SeqCst)
        {
            let how = s.stop();
            println!(
                "servegate: stopped the server of `{}` ({})",
                self.label,
                how.map_or_else(|| "status unknown".to_owned(), |e| e.to_string())
            );
        }
    }

    /// Runs probe `index` once; later calls return the first verdict.
    pub fn probe(&self, index: usize) -> Verdict {
        once(&self.probes, index, || self.run_probe(index))
    }

    /// Compares probe `index`'s answer with its snapshot (running the probe
    /// first when it has not run); later calls return the first verdict.
    pub fn snapshot(&self, index: usize) -> Verdict {
        once(&self.snapshots, index, || {
            let probe = &self.suite.probes[index];
            let target = self.connected()?;
            let probe_verdict = self.probe(index);
            let answer = self.answers.lock().ok().and_then(|a| a[index].clone());
            let Some((text, info)) = answer else {
                let why = probe_verdict
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                return Err(Stop::Gated(Cause::NoAnswer {
                    label: self.label.clone(),
                    probe: probe.name.clone(),
                    why: why.lines().next().unwrap_or("").to_owned(),
                }));
            };
            let file = &self.suite.file;
            let place = snapshot::Place {
                root: snapshot::root(&file.root),
                rel: PathBuf::from(&self.suite.name).join(snapshot::slug(&target.model_id)),
                name: probe.name.clone(),
                source: file.in_project(),
                line: probe.loc.line,
                description: format!("{}::snapshot::{}", self.label, probe.name),
                info,
            };
            match snapshot::compare(&place, &text, &self.plan.snapshots) {
                Ok(snapshot::Compared::Matched) => Ok(()),
                Ok(snapshot::Compared::Recorded(path)) => {
                    println!(
                        "servegate: snapshot recorded: {}",
                        snapshot::shown_path(&path)
                    );
                    Ok(())
                }
                Err(changed) => Err(Stop::failed(
                    FailureKind::Snapshot,
                    changed.message(file, probe.loc, probe.snapshot == SnapshotMode::Gate),
                )),
            }
        })
    }

    /// `Err` when a config check failed: nothing after it is trusted.
    fn config_prerequisite(&self) -> Result<(), Stop> {
        let checks = &self.suite.expect_server;
        let failed: Vec<String> = (0..checks.len())
            .filter(|&i| self.config(i).is_err())
            .map(|i| checks[i].name.clone())
            .collect();
        if failed.is_empty() {
            return Ok(());
        }
        Err(Stop::Gated(Cause::Config {
            label: self.label.clone(),
            checks: failed,
        }))
    }

    fn run_probe(&self, index: usize) -> Verdict {
        let probe = &self.suite.probes[index];
        let target = self.connected()?;
        self.config_prerequisite()?;
        if let Some(ds) = &probe.dataset {
            return self.run_dataset(target, probe, ds);
        }
        let req = CallRequest {
            input: probe.input.clone(),
            sampling: probe.sampling.clone(),
            ignore_eos: false,
        };
        let sent = Sent {
            url: target.client.url(),
            body: target.client.body(&req),
        };
        let file = &self.suite.file;
        let completion = self
            .runtime
            .block_on(target.client.complete(&req))
            .map_err(|e| probe_failed(request_failed(file, probe.loc, &sent, &e)))?;
        let mut code_runs = Vec::new();
        let failed: Vec<_> = probe
            .expect
            .iter()
            .filter_map(|a| {
                evaluate(a, &completion, &mut code_runs)
                    .err()
                    .map(|m| (a, m))
            })
            .collect();
        if let Ok(mut ex) = self.exchanges.lock() {
            ex.push((
                probe.name.clone(),
                crate::record::Exchange {
                    request: sent.body.clone(),
                    content: completion.content.clone(),
                    reasoning: completion.reasoning.clone(),
                    finish_reason: completion.finish_reason.clone(),
                    sandbox: code_runs,
                },
            ));
        }
        let mut problems = self
            .contract(target, probe, &req, &completion)
            .map_err(probe_failed)?;
        if let Some(n) = probe.deterministic {
            problems.extend(
                self.determinism(target, &req, &completion, n, probe.loc)
                    .map_err(probe_failed)?,
            );
        }
        if probe.snapshot != SnapshotMode::Off
            && let Ok(mut answers) = self.answers.lock()
        {
            answers[index] = Some((
                snapshot::render(&completion),
                serde_json::json!({
                    "request": sent.body,
                    "model": target.model_id,
                    "server_version": target.server_version,
                    "api": self.suite.target.api.name(),
                }),
            ));
        }
        if failed.is_empty() && problems.is_empty() {
            Ok(())
        } else {
            Err(probe_failed(assertions_failed(
                file,
                &sent,
                &completion,
                &failed,
                &problems,
            )))
        }
    }

    /// Asks every scored item of a dataset, `concurrency` at a time, grades
    /// the answers and judges the accuracy.
    fn run_dataset(&self, target: &Connected, probe: &Probe, ds: &DatasetProbe) -> Verdict {
        let system = match &probe.input {
            Input::Prompt { system, .. } => system.clone(),
            Input::Messages(_) => None,
        };
        let items = accuracy::scored(ds);
        let requests: Vec<CallRequest> = items
            .iter()
            .map(|item| CallRequest {
                input: Input::Prompt {
                    system: system.clone(),
                    prompt: accuracy::prompt(ds, item),
                },
                sampling: probe.sampling.clone(),
                ignore_eos: false,
            })
            .collect();
        let client = &target.client;
        let answers = self.runtime.block_on(
            futures_util::stream::iter(&requests)
                .map(|req| client.complete(req))
                .buffered(ds.concurrency)
                .collect::<Vec<_>>(),
        );
        let results: Vec<accuracy::ItemResult> = items
            .iter()
            .zip(answers)
            .map(|(item, answer)| {
                let expected = accuracy::reference(&item.answer).to_owned();
                match answer {
                    Ok(c) => {
                        let (extracted, correct) = accuracy::grade(&ds.extract, &c.content, item);
                        accuracy::ItemResult {
                            line: item.line,
                            expected,
                            extracted,
                            correct,
                            answer: c.content.chars().take(300).collect(),
                            error: false,
                        }
                    }
                    Err(e) => accuracy::ItemResult {
                        line: item.line,
                        expected,
                        extracted: None,
                        correct: false,
                        answer: e.to_string(),
                        error: true,
                    },
                }
            })
            .collect();
        let verdict = accuracy::judge(&self.suite.file, ds, &results).map_err(|mut out| {
            if let Some(first) = requests.first() {
                out.push('\n');
                Sent {
                    url: client.url(),
                    body: client.body(first),
                }
                .write_to(&mut out);
            }
            out
        });
        if let Ok(mut d) = self.datasets.lock() {
            d.push((probe.name.clone(), ds.path.clone(), results));
        }
        verdict.map_err(probe_failed)
    }

    /// The probe's server-contract checks, on its answer and on the extra
    /// requests some of them need.
    fn contract(
        &self,
        target: &Connected,
        probe: &Probe,
        req: &CallRequest,
        c: &crate::client::Completion,
    ) -> Result<Vec<Problem>, String> {
        let file = &self.suite.file;
        let ask = |req: &CallRequest| {
            let sent = Sent {
                url: target.client.url(),
                body: target.client.body(req),
            };
            self.runtime
                .block_on(target.client.complete(req))
                .map_err(|e| request_failed(file, probe.loc, &sent, &e))
        };
        let broken = |what: &str, why: String| Problem {
            message: format!("error: contract broken: {what}: {why}"),
            loc: probe.loc,
        };
        let max = u64::from(probe.sampling.max_tokens.unwrap_or(0));
        // The larger of the server's count and the stream's: a server whose
        // usage is wrong does not hide an overrun.
        let tokens = |c: &crate::client::Completion| {
            let received: u64 = c.timing.marks.iter().map(|m| u64::from(m.tokens)).sum();
            c.completion_tokens.max(received)
        };
        let mut problems = Vec::new();
        for contract in &probe.contract {
            match contract {
                Contract::MaxTokens if tokens(c) > max => problems.push(broken(
                    "max_tokens",
                    format!(
                        "asked for at most {max} tokens, the server generated {} ({} by {}, {} in the stream)",
                        tokens(c),
                        c.completion_tokens,
                        c.token_source.name(),
                        c.timing.marks.iter().map(|m| u64::from(m.tokens)).sum::<u64>()
                    ),
                )),
                Contract::Usage => {
                    let chunks = c.timing.marks.len();
                    let why = match &c.usage {
                        None => Some("no usage reported, though `stream_options.include_usage` was asked".to_owned()),
                        Some(u) => match (u.prompt_tokens, u.completion_tokens) {
                            (None | Some(0), _) => Some("usage reports no prompt tokens".to_owned()),
                            (_, None) => Some("usage reports no completion tokens".to_owned()),
                            (_, Some(n)) if n < chunks as u64 => Some(format!(
                                "usage says {n} completion tokens, but {chunks} chunks of the stream carried tokens"
                            )),
                            _ => None,
                        },
                    };
                    problems.extend(why.map(|w| broken("usage", w)));
                }
                Contract::Stop => {
                    let stops = probe.sampling.stop.clone().unwrap_or_default();
                    if let Some((s, at)) = stops
                        .iter()
                        .find_map(|s| c.content.find(s.as_str()).map(|at| (s, at)))
                    {
                        problems.push(broken(
                            "stop",
                            format!(
                                "the stop sequence {s:?} is in the answer at character {}",
                                c.content[..at].chars().count()
                            ),
                        ));
                    }
                }
                Contract::IgnoreEos => {
                    // Without stop sequences: they end a stream even with ignore_eos.
                    let again = ask(&CallRequest {
                        ignore_eos: true,
                        sampling: crate::suite::Sampling {
                            stop: None,
                            ..req.sampling.clone()
                        },
                        ..req.clone()
                    })?;
                    let finish = again.finish_reason.as_deref().unwrap_or("absent");
                    if tokens(&again) != max || finish != "length" {
                        problems.push(broken(
                            "ignore_eos",
                            format!(
                                "with ignore_eos and max_tokens {max} the server generated {} token(s), finish_reason {finish}: fixed-length benchmarks on it measure other lengths than they ask for",
                                tokens(&again)
                            ),
                        ));
                    }
                }
                Contract::CacheDeterminism => {
                    let greedy = CallRequest {
                        sampling: crate::suite::Sampling {
                            temperature: Some(0.0),
                            ..req.sampling.clone()
                        },
                        ..req.clone()
                    };
                    let first = ask(&greedy)?;
                    if let Some(p) = self.determinism(target, &greedy, &first, 2, probe.loc)? {
                        problems.push(Problem {
                            message: p.message.replacen(
                                "error: answers differ: ask 2 of 2 differs from the first",
                                "error: contract broken: cache_determinism: at temperature 0 the same request, asked again (a prefix-cache hit), answered differently",
                                1,
                            ),
                            loc: p.loc,
                        });
                    }
                }
                Contract::MaxTokens => {}
            }
        }
        Ok(problems)
    }

    /// Asks `n - 1` more times; a problem when any answer differs from the first.
    fn determinism(
        &self,
        target: &Connected,
        req: &CallRequest,
        first: &crate::client::Completion,
        n: u32,
        loc: crate::suite::node::Loc,
    ) -> Result<Option<Problem>, String> {
        let file = &self.suite.file;
        let sent = Sent {
            url: target.client.url(),
            body: target.client.body(req),
        };
        let parts = |c: &crate::client::Completion| {
            [
                ("content", c.content.clone()),
                ("reasoning", c.reasoning.clone()),
                ("finish_reason", c.finish_reason.clone().unwrap_or_default()),
            ]
        };
        let want = parts(first);
        for k in 2..=n {
            let again = self
                .runtime
                .block_on(target.client.complete(req))
                .map_err(|e| request_failed(file, loc, &sent, &e))?;
            let got = parts(&again);
            let Some(((what, a), (_, b))) = want.iter().zip(&got).find(|(a, b)| a.1 != b.1) else {
                continue;
            };
            let at = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
            let around = |t: &str| {
                let from = at.saturating_sub(20);
                let piece: String = t.chars().skip(from).take(80).collect();
                format!(
                    "{}{}",
                    if from > 0 { "…" } else { "" },
                    excerpt(&piece, 100)
                )
            };
            return Ok(Some(Problem {
                message: format!(
                    "error: answers differ: ask {k} of {n} differs from the first in its {what} at character {at}\nfirst:    {}\nask {k}:    {}\n",
                    around(a),
                    around(b)
                ),
                loc,
            }));
        }
        Ok(None)
    }

    /// Runs gate `index`, after every probe of the suite.
    /// The figures gate `gate` measured in variant `name` of this suite.
    fn variant_figures(&self, name: &str, gate: &str) -> Result<BTreeMap<String, f64>, String> {
        let order = |n: &str| self.suite.variants.iter().position(|v| v.name == n);
        let this = self.variant.as_ref().and_then(|v| order(&v.name));
        if order(name) > this {
            return Err(format!(
                "variant `{name}` runs after this one (variants run in file order)"
            ));
        }
        let book = self.plan.siblings.upgrade().ok_or("the run is over")?;
        let runs = book.lock().map_err(|_| "the run's book is poisoned")?;
        let sibling = runs
            .iter()
            .find(|r| {
                r.suite.name == self.suite.name
                    && r.variant.as_ref().is_some_and(|v| v.name == name)
            })
            .ok_or_else(|| format!("variant `{name}` did not run (filtered out?)"))?;
        sibling
            .figures()
            .into_iter()
            .find(|f| f.gate == gate)
            .map(|f| f.figures)
            .ok_or_else(|| format!("variant `{name}` measured nothing in `{gate}` (its trial failed or was filtered out)"))
    }

    /// Runs gate `index` once, after every probe of the suite; later calls
    /// (a curve's prerequisites) return the first verdict.
    pub fn gate(&self, index: usize) -> Verdict {
        once(&self.gates, index, || self.run_gate(index))
    }

    /// Judges a sweep's curve, running any level not yet run first.
    pub fn curve(&self, index: usize) -> Verdict {
        let curve = &self.suite.curves[index];
        self.connected()?;
        let mut rows = Vec::new();
        for level in &curve.levels {
            let Some(i) = self.suite.gates.iter().position(|g| &g.name == level) else {
                continue;
            };
            let verdict = self.gate(i);
            let Some(f) = self.figures().into_iter().find(|f| &f.gate == level) else {
                let why = verdict.err().map(|e| e.to_string()).unwrap_or_default();
                let first = why.lines().next().unwrap_or("");
                return Err(Stop::failed(
                    FailureKind::Gate,
                    format!(
                        "error: the curve of `{}` cannot be judged: level `{level}` measured nothing\n  ({first})",
                        curve.gate
                    ),
                ));
            };
            let label = level
                .strip_prefix(curve.gate.as_str())
                .and_then(|l| l.strip_prefix("::"))
                .unwrap_or(level);
            rows.push((label, f.metrics));
        }
        judge_curve(&self.suite, curve, &rows).map_err(|m| Stop::failed(FailureKind::Gate, m))
    }

    fn run_gate(&self, index: usize) -> Verdict {
        let gate = &self.suite.gates[index];
        let target = self.connected()?;
        self.config_prerequisite()?;
        let failed: Vec<String> = (0..self.suite.probes.len())
            .filter(|&i| self.probe(i).is_err())
            .map(|i| self.suite.probes[i].name.clone())
            .collect();
        if !failed.is_empty() {
            return Err(Stop::Gated(Cause::Probes {
                label: self.label.clone(),
                probes: failed,
            }));
        }
        let changed: Vec<String> = (0..self.suite.probes.len())
            .filter(|&i| {
                self.suite.probes[i].snapshot == SnapshotMode::Gate && self.snapshot(i).is_err()
            })
            .map(|i| self.suite.probes[i].name.clone())
            .collect();
        if !changed.is_empty() {
            return Err(Stop::Gated(Cause::Snapshots {
                label: self.label.clone(),
                probes: changed,
            }));
        }
        let mut repeats = Vec::new();
        for _ in 0..gate.repeats {
            let metrics = self
                .runtime
                .block_on(run_gate(&target.client, gate))
                .map_err(|e| {
                    let mut out = format!("error: {e}\n");
                    render_location(
                        &mut out,
                        &self.suite.file.display(),
                        &self.suite.file.text,
                        gate.loc,
                    );
                    Stop::failed(FailureKind::Gate, out)
                })?;
            repeats.push(metrics);
        }
        let baseline = Lookup::find(
            &baseline::dir(&self.suite.file.root),
            &self.label,
            &gate.name,
            &target.fingerprint,
        );
        let variants: Vec<VariantFigures> = gate
            .thresholds
            .iter()
            .filter_map(|t| match &t.threshold.bound {
                Bound::Variant(name, _) => Some(name.clone()),
                _ => None,
            })
            .map(|name| {
                let figures = self.variant_figures(&name, &gate.name);
                (name, figures)
            })
            .collect();
        let refs = References {
            baseline: &baseline,
            variant: self.variant.as_ref().map(|v| v.name.as_str()),
            variants: &variants,
        };
        let verdict = judge(&self.suite, gate, &repeats, &refs);
        if let Ok(mut f) = self.figures.lock() {
            f.push(GateFigures {
                gate: gate.name.clone(),
                load: describe_load(gate),
                checks: verdict.checks.clone(),
                figures: baseline::figures(&repeats),
                repeat_values: gate
                    .thresholds
                    .iter()
                    .map(|t| {
                        let key = t.threshold.key;
                        let values = repeats.iter().filter_map(|m| m.value(key)).collect();
                        (key.to_string(), values)
                    })
                    .collect(),
                metrics: repeats.pop().expect("at least one repeat"),
                repeats: gate.repeats,
            });
        }
        verdict
            .result
            .map_err(|m| Stop::failed(FailureKind::Gate, m))
    }
}

/// A probe that ran and failed, with its whole message.
fn probe_failed(message: String) -> Stop {
    Stop::failed(FailureKind::Probe, message)
}

/// The verdict in `slots[index]`, running `run` to fill it the first time.
pub(super) fn once(
    slots: &Mutex<Vec<Option<Verdict>>>,
    index: usize,
    run: impl FnOnce() -> Verdict,
) -> Verdict {
    if let Some(done) = slots.lock().ok().and_then(|s| s[index].clone()) {
        return done;
    }
    let verdict = run();
    if let Ok(mut s) = slots.lock() {
        s[index] = Some(verdict.clone());
    }
    verdict
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
