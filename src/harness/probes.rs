//! Running a suite's probes: each correctness probe once (its request, its
//! assertions, its contract and determinism checks, or its dataset), and
//! the snapshot of its answer as a trial of its own.

use std::fmt::Write as _;
use std::path::PathBuf;

use futures_util::StreamExt as _;

use super::outcome::{Cause, Stop, Verdict};
use super::session::{Execution, once};
use super::target::Connected;
use crate::check::failure::{Sent, assertions_failed, request_failed};
use crate::check::message::{Label, Message};
use crate::check::{Mismatch, accuracy, contract, evaluate, humaneval, numerics, snapshot};
use crate::client::{CallError, CallRequest, Completion, ErrorKind};
use crate::record::{CheckFailed, FailureCause, FailureKind, SnapshotState, bounded};
use crate::suite::node::Loc;
use crate::suite::{
    Api, Assertion, DatasetProbe, DatasetTask, Input, Numerics, Sampling, SnapshotMode, SourceFile,
};

/// A probe's request as sent, its answer, and the assertions the answer
/// failed with why.
type Checked<'a> = (Sent, Completion, Vec<(&'a Assertion, Mismatch)>);

impl Execution {
    /// Runs probe `index` once; later calls return the first verdict.
    pub fn probe(&self, index: usize) -> Verdict {
        once(
            &self.probes,
            index,
            |p| &mut p.verdict,
            || self.run_probe(index),
        )
    }

    /// Compares probe `index`'s answer with its snapshot (running the probe
    /// first when it has not run); later calls return the first verdict.
    pub fn snapshot(&self, index: usize) -> Verdict {
        once(
            &self.probes,
            index,
            |p| &mut p.snapshot,
            || {
                let probe = &self.suite.probes[index];
                let target = self.connected()?;
                let probe_verdict = self.probe(index);
                let answer = self.probes.read(index, |p| p.answer.clone());
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
                        eprintln!(
                            "servegate: snapshot recorded: {}",
                            snapshot::shown_path(&path)
                        );
                        Ok(())
                    }
                    Err(changed) => Err(Stop::failed_for(
                        FailureKind::Snapshot,
                        FailureCause::Snapshot {
                            path: bounded(&snapshot::shown_path(&changed.path)),
                            state: match &changed.stored {
                                None => SnapshotState::New,
                                Some(Ok(_)) => SnapshotState::Changed,
                                Some(Err(_)) => SnapshotState::Unreadable,
                            },
                        },
                        changed.message(file, probe.loc, probe.snapshot == SnapshotMode::Gate),
                    )),
                }
            },
        )
    }

    /// `Err` when a config check failed: nothing after it is trusted.
    pub(super) fn config_prerequisite(&self) -> Result<(), Stop> {
        let checks = &self.suite.expect_server;
        let (failed, why): (Vec<String>, Vec<String>) = (0..checks.len())
            .filter_map(|i| {
                let stop = self.config(i).err()?;
                Some((checks[i].name.clone(), stop.gist()))
            })
            .unzip();
        if failed.is_empty() {
            return Ok(());
        }
        Err(Stop::Gated(Cause::Config {
            label: self.label.clone(),
            checks: failed,
            why,
        }))
    }

    fn run_probe(&self, index: usize) -> Verdict {
        let probe = &self.suite.probes[index];
        let target = self.connected()?;
        self.config_prerequisite()?;
        if let Some(ds) = &probe.dataset {
            return self.run_dataset(index, target, ds);
        }
        if let Some(n) = &probe.numerics {
            return self.run_numerics(probe, target, n);
        }
        if !probe.turns.is_empty() {
            return self.run_conversation(index, target);
        }
        let req = CallRequest {
            input: probe.input.clone(),
            sampling: probe.sampling.clone(),
            ignore_eos: false,
        };
        let file = &self.suite.file;
        let (sent, completion, failed) =
            self.ask_and_check(index, target, &req, &probe.expect, (probe.loc, None))?;
        let ask = |r: &CallRequest| self.runtime.block_on(target.client.complete(r));
        let asker = contract::Asker {
            file,
            client: &target.client,
            ask: &ask,
        };
        let mut problems =
            contract::contract(&asker, probe, &req, &completion).map_err(probe_failed)?;
        if let Some(n) = probe.deterministic {
            problems.extend(
                contract::determinism(&asker, &req, &completion, n, probe.loc, None)
                    .map_err(probe_failed)?,
            );
        }
        if probe.snapshot != SnapshotMode::Off {
            let answer = (
                snapshot::render(&completion),
                serde_json::json!({
                    "request": sent.body,
                    "model": target.model_id,
                    "server_version": target.server_version,
                    "api": self.suite.target.api.name(),
                }),
            );
            self.probes.write(index, |p| p.answer = Some(answer));
        }
        if failed.is_empty() && problems.is_empty() {
            Ok(())
        } else {
            let cause = FailureCause::Assertions {
                failed: problems
                    .iter()
                    .map(|p| CheckFailed::new(&p.error, None, p.loc))
                    .chain(
                        failed
                            .iter()
                            .map(|(a, m)| CheckFailed::new(&m.expected, m.found.as_deref(), a.loc)),
                    )
                    .collect(),
            };
            Err(Stop::failed_for(
                FailureKind::Probe,
                cause,
                assertions_failed(file, &sent, &completion, &failed, &problems),
            ))
        }
    }

    /// Sends `req` for probe `index` and checks the answer against
    /// `expect`, keeping the exchange in the record: what was sent, the
    /// answer, and the assertions that failed with why.
    fn ask_and_check<'a>(
        &self,
        index: usize,
        target: &Connected,
        req: &CallRequest,
        expect: &'a [Assertion],
        (loc, turn): (Loc, Option<&str>),
    ) -> Result<Checked<'a>, Stop> {
        let sent = Sent::of(&target.client, req);
        let completion = self
            .runtime
            .block_on(target.client.complete(req))
            .map_err(|e| request_stop(&self.suite.file, (loc, turn), &sent, &e))?;
        let mut code_runs = Vec::new();
        let failed: Vec<_> = expect
            .iter()
            .filter_map(|a| {
                evaluate(a, &completion, &mut code_runs)
                    .err()
                    .map(|m| (a, m))
            })
            .collect();
        let exchange = crate::record::Exchange::new(sent.body.clone(), &completion, code_runs);
        self.probes.write(index, |p| p.exchange = Some(exchange));
        Ok((sent, completion, failed))
    }

    /// Runs a conversation probe: each turn sent with the conversation so
    /// far, the model's own answers carried forward as `assistant`
    /// messages, each answer checked by its turn's assertions. The first
    /// turn that fails ends it; the record keeps the last exchange.
    fn run_conversation(&self, index: usize, target: &Connected) -> Verdict {
        let probe = &self.suite.probes[index];
        let file = &self.suite.file;
        // The decoder gives a conversation its context as messages.
        let mut history = match &probe.input {
            Input::Messages(context) => context.clone(),
            Input::Prompt { .. } => Vec::new(),
        };
        let total = probe.turns.len();
        for (n, turn) in probe.turns.iter().enumerate() {
            history.push(turn.message.clone());
            let req = CallRequest {
                input: Input::Messages(history.clone()),
                sampling: probe.sampling.clone(),
                ignore_eos: false,
            };
            // Which turn, its prompt, and what went before it: the body
            // `sent:` shows is cut, and the failing turn comes last in it.
            let said = crate::secrets::cut(&turn.message.joined_text(), 200).0;
            let note = format!(
                "turn {} of {total} ({said:?}), sent with the {} message{} before it (the model's own answers as `assistant` messages)",
                n + 1,
                history.len() - 1,
                if history.len() == 2 { "" } else { "s" }
            );
            let (sent, completion, failed) =
                self.ask_and_check(index, target, &req, &turn.expect, (turn.loc, Some(&note)))?;
            if !failed.is_empty() {
                let mut out = assertions_failed(file, &sent, &completion, &failed, &[]);
                out.line(Label::Note, &note);
                let cause = FailureCause::Assertions {
                    failed: failed
                        .iter()
                        .map(|(a, m)| CheckFailed::new(&m.expected, m.found.as_deref(), a.loc))
                        .collect(),
                };
                return Err(Stop::failed_for(FailureKind::Probe, cause, out));
            }
            // An empty answer carried forward would test a conversation
            // that never happened: the next turn is not sent.
            if n + 1 < total && completion.content.trim().is_empty() {
                let mut out = Message::of_error(format_args!(
                    "the answer to turn {} of {total} is empty: nothing to carry into the next turn",
                    n + 1
                ));
                out.at(file, turn.loc);
                out.line(
                    Label::Note,
                    format_args!(
                        "finish_reason {}, {} completion tokens, {} characters of reasoning (only the answer's content is carried)",
                        completion.finish_reason.as_deref().unwrap_or("none"),
                        completion.completion_tokens,
                        completion.reasoning.chars().count()
                    ),
                );
                let _ = writeln!(out);
                sent.write_to(&mut out);
                let cause = FailureCause::Assertions {
                    failed: vec![CheckFailed::new(
                        "an answer to carry into the next turn",
                        Some("empty content"),
                        turn.loc,
                    )],
                };
                return Err(Stop::failed_for(FailureKind::Probe, cause, out));
            }
            history.push(crate::suite::Message::text(
                "assistant",
                &completion.content,
            ));
        }
        Ok(())
    }

    /// Has the server score a numerics probe's text and judges the mean
    /// token log-probability against the known-good one.
    fn run_numerics(
        &self,
        probe: &crate::suite::Probe,
        target: &Connected,
        n: &Numerics,
    ) -> Verdict {
        let (loc, adapter) = (probe.loc, probe.sampling.adapter.as_deref());
        let file = &self.suite.file;
        let scoring = target.scorer.and_then(|api| {
            let (path, body) = target.client.score_request(api, &n.text, adapter)?;
            Some((api, path, body))
        });
        let Some((api, path, body)) = scoring else {
            let mut out = Message::of_error(
                "numerics probe cannot measure: servegate knows no way to have this server score a prompt",
            );
            out.at(file, loc);
            let _ = writeln!(
                out,
                "expected: SGLang (scored through `/generate` with `return_logprob`) or vLLM (`/v1/completions` with `prompt_logprobs`), which their `/server_info` or `/version` name; {} names neither",
                target.description
            );
            return Err(probe_failed(out));
        };
        let sent = Sent {
            url: format!("{}{path}", target.client.base_url()),
            body,
            images: Vec::new(),
        };
        let logprobs = self
            .runtime
            .block_on(target.client.score(api, path, &sent.body))
            .map_err(|e| request_stop(file, (loc, None), &sent, &e))?;
        numerics::judge(n, &logprobs).map(|_| ()).map_err(|f| {
            let mut out = Message::of_error(f.error);
            out.at(file, loc);
            let _ = write!(out, "{}", f.detail);
            sent.write_to(&mut out);
            probe_failed(out)
        })
    }

    /// Asks every scored item of a dataset, `concurrency` at a time, grades
    /// the answers (running a code dataset's programs in the sandbox) and
    /// judges the share right.
    fn run_dataset(&self, index: usize, target: &Connected, ds: &DatasetProbe) -> Verdict {
        let probe = &self.suite.probes[index];
        let system = match &probe.input {
            Input::Prompt { system, .. } => system.clone(),
            Input::Messages(_) => None,
        };
        let chat = self.suite.target.api == Api::OpenAiChat;
        let ask = |prompt: String, sampling: Sampling| CallRequest {
            input: Input::prompt(system.clone(), prompt),
            sampling,
            ignore_eos: false,
        };
        let requests: Vec<CallRequest> = match &ds.task {
            DatasetTask::Qa(qa) => accuracy::scored(&qa.items, qa.shots, ds.limit)
                .iter()
                .map(|item| ask(accuracy::prompt(qa, item), probe.sampling.clone()))
                .collect(),
            DatasetTask::HumanEval(code) => {
                let mut sampling = probe.sampling.clone();
                if !chat {
                    let stops = sampling.stop.get_or_insert_with(Vec::new);
                    stops.extend(humaneval::STOPS.map(str::to_owned));
                }
                accuracy::scored(&code.problems, 0, ds.limit)
                    .iter()
                    .map(|p| ask(humaneval::prompt(p, chat), sampling.clone()))
                    .collect()
            }
        };
        let client = &target.client;
        // Each request a task of its own, so that its stream is read while
        // an answer is graded (a HumanEval program runs for up to its time
        // limit, off the runtime's thread); each answer graded as it comes
        // and dropped, its result (an excerpt) kept: memory holds at most
        // `concurrency` answers, not the dataset's.
        let results: Vec<accuracy::ItemResult> = self.runtime.block_on(
            futures_util::stream::iter(requests.iter().cloned())
                .map(|req| {
                    let client = client.clone();
                    tokio::spawn(async move { client.complete(&req).await })
                })
                .buffered(ds.concurrency)
                .enumerate()
                .then(|(i, answer)| async move {
                    let answer =
                        answer.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
                    match &ds.task {
                        DatasetTask::Qa(qa) => {
                            let item = &accuracy::scored(&qa.items, qa.shots, ds.limit)[i];
                            accuracy::grade_item(&qa.extract, item, answer)
                        }
                        DatasetTask::HumanEval(code) => {
                            let problem = accuracy::scored(&code.problems, 0, ds.limit)[i].clone();
                            let limits = code.limits.clone();
                            let answer = answer.map(|c| c.content).map_err(|e| e.to_string());
                            tokio::task::spawn_blocking(move || {
                                let answer = answer.as_deref().map_err(Clone::clone);
                                humaneval::grade(&problem, answer, chat, &limits)
                            })
                            .await
                            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
                        }
                    }
                })
                .collect::<Vec<_>>(),
        );
        let verdict = accuracy::judge(&self.suite.file, ds, &results).map_err(|mut out| {
            if let Some(first) = requests.first() {
                let _ = writeln!(out);
                Sent::of(client, first).write_to(&mut out);
            }
            out
        });
        let _ = self.graded[index].set(results);
        verdict.map_err(probe_failed)
    }
}

/// A probe that ran and failed, with its whole message.
fn probe_failed(message: Message) -> Stop {
    Stop::failed(FailureKind::Probe, message)
}

/// A probe whose request got no answer: the error's class and the message.
fn request_stop(
    file: &SourceFile,
    (loc, note): (Loc, Option<&str>),
    sent: &Sent,
    e: &CallError,
) -> Stop {
    let mut out = request_failed(file, loc, sent, e);
    if let Some(note) = note {
        out.line(Label::Note, note);
    }
    Stop::failed_for(FailureKind::Probe, request_cause(e), out)
}

/// A request's failure as data: its class, and its status for `http`.
pub(super) fn request_cause(e: &CallError) -> FailureCause {
    FailureCause::Request {
        class: e.class().to_owned(),
        status: match e.kind {
            ErrorKind::Http(status) => Some(status),
            _ => None,
        },
    }
}
