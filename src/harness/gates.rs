//! Running a suite's performance gates: each gate's load (after every
//! probe passed), its repeats, its judgement against absolute, baseline and
//! variant bounds, and the curves across a sweep's levels.

use std::fmt::Write as _;

use super::events::GateFigures;
use super::events::RunEvent;
use super::judge::{NoReference, References, VariantFigures, describe_load, judge, judge_curve};
use super::outcome::{Cause, Stop, Verdict};
use super::probes::request_cause;
use super::session::{Execution, once};
use crate::load::baseline::{self, Lookup};
use std::sync::Arc;

use super::target::Connected;
use crate::check::message::Message;
use crate::check::recheck;
use crate::client::CallRequest;
use crate::history::gate::GateHistory;
use crate::history::{Location, SeriesKey};
use crate::load::metrics::GateMetrics;
use crate::load::runner::{LoadError, Watch, run_gate, run_watched};
use crate::load::threads::Threads;
use crate::record::FailureKind;
use crate::suite::figures::Figures;
use crate::suite::threshold::Bound;
use crate::suite::{Gate, OnClientLimited, Recheck, SnapshotMode};

impl Execution {
    /// The earlier runs of `gate` its `history.…` and `no_regression`
    /// bounds read (`None`: it has none, or the history is off). Read
    /// once the gate has measured: a run beside it that ends first is in.
    fn gate_history(&self, gate: &Gate, target: &Connected) -> Option<GateHistory> {
        let keys: Vec<_> = gate
            .thresholds
            .iter()
            .filter(|t| matches!(t.threshold.bound, Bound::History(..) | Bound::NoRegression))
            .map(|t| t.threshold.key)
            .collect();
        if keys.is_empty() || self.plan.history == Location::Off {
            return None;
        }
        let series = SeriesKey::of_gate(
            &self.label,
            &gate.name,
            &target.model_identity(),
            &crate::history::run_hardware(&super::recording::gpu_inventory().unwrap_or_default()),
        );
        Some(GateHistory::read(
            &self.plan.history,
            &series,
            (
                &target.fingerprint,
                &target.config,
                &target.model_identity(),
            ),
            &keys,
        ))
    }

    /// The figures gate `gate` measured in variant `name` of this suite.
    fn variant_figures(&self, name: &str, gate: &str) -> Result<Figures, NoReference> {
        let order = |n: &str| self.suite.variants.iter().position(|v| v.name == n);
        let this = self.variant.as_ref().and_then(|v| order(&v.name));
        if order(name) > this {
            return Err(NoReference::VariantLater(name.to_owned()));
        }
        self.plan
            .figures
            .of(&self.suite.name, Some(name))
            .into_iter()
            .find(|f| f.gate == gate)
            .map(|f| f.figures)
            .ok_or_else(|| NoReference::VariantMeasuredNothing {
                variant: name.to_owned(),
                gate: gate.to_owned(),
            })
    }

    /// The probes whose pass `gate` waits for: those it `needs` (every
    /// probe by default), less those `--skip` left out of the run.
    fn waits_for(&self, gate: &Gate) -> Vec<usize> {
        gate.needed(self.suite.probes.len())
            .into_iter()
            .filter(|i| !self.plan.skipped_probes.contains(i))
            .collect()
    }

    /// The names of the probes `gate` needs that `--skip` left out.
    fn probes_skipped(&self, gate: &Gate) -> Vec<String> {
        gate.needed(self.suite.probes.len())
            .into_iter()
            .filter(|i| self.plan.skipped_probes.contains(i))
            .map(|i| self.suite.probes[i].name.clone())
            .collect()
    }

    /// Runs gate `index` once, after the probes it waits for; later calls
    /// (a curve's prerequisites) return the first verdict.
    pub fn gate(&self, index: usize) -> Verdict {
        once(
            &self.gates,
            index,
            |g| &mut g.verdict,
            || self.run_gate(index),
        )
    }

    /// The recheck of gate `index` under its load: run with the gate (the
    /// gate runs first when it has not); gated as the gate was.
    pub fn recheck(&self, index: usize) -> Verdict {
        let gate = self.gate(index);
        if let Some(done) = self.gates.read(index, |g| g.recheck.clone()) {
            return done;
        }
        match gate {
            Err(Stop::Gated(cause)) => Err(Stop::Gated(cause)),
            Err(e) => {
                let mut m = Message::of_error(
                    "the gate's load did not run, so nothing was rechecked under it",
                );
                let _ = write!(m, "  ({})", e.to_string().lines().next().unwrap_or(""));
                Err(Stop::failed(FailureKind::Gate, m))
            }
            Ok(()) => Err(Stop::failed(
                FailureKind::Gate,
                Message::of_error("the gate ran without its recheck"),
            )),
        }
    }

    /// Judges a sweep's curve, running any level not yet run first.
    pub fn curve(&self, index: usize) -> Verdict {
        let curve = &self.suite.curves[index];
        self.connected()?;
        let mut rows = Vec::new();
        for i in curve.levels.clone() {
            let level = &self.suite.gates[i].name;
            let verdict = self.gate(i);
            let Some(f) = self.figures().into_iter().find(|f| &f.gate == level) else {
                let why = verdict.err().map(|e| e.to_string()).unwrap_or_default();
                let mut m = Message::of_error(format_args!(
                    "the curve of `{}` cannot be judged: level `{level}` measured nothing",
                    curve.gate
                ));
                let _ = write!(m, "  ({})", why.lines().next().unwrap_or(""));
                return Err(Stop::failed(FailureKind::Gate, m));
            };
            let label = self.suite.gates[i]
                .sweep
                .as_ref()
                .map_or(level.as_str(), |s| s.level.as_str());
            rows.push((label, f.metrics));
        }
        judge_curve(&self.suite, curve, &rows).map_err(|m| Stop::failed(FailureKind::Gate, m))
    }

    fn run_gate(&self, index: usize) -> Verdict {
        let gate = &self.suite.gates[index];
        let target = self.connected()?;
        self.config_prerequisite()?;
        let waits_for = self.waits_for(gate);
        let (probes, why): (Vec<String>, Vec<String>) = waits_for
            .iter()
            .filter_map(|&i| {
                let stop = self.probe(i).err()?;
                Some((self.suite.probes[i].name.clone(), stop.gist()))
            })
            .unzip();
        if !probes.is_empty() {
            return Err(Stop::Gated(Cause::Probes {
                label: self.label.clone(),
                probes,
                why,
            }));
        }
        let changed: Vec<String> = waits_for
            .into_iter()
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
        for repeat in 0..gate.repeats {
            let measured = match gate.recheck.as_ref().filter(|_| repeat == 0) {
                Some(recheck) => self.measure_and_recheck(index, target, gate, recheck),
                None => self.runtime.block_on(run_gate(
                    &target.client,
                    gate,
                    Threads::of(&gate.load, self.plan.client_threads),
                )),
            };
            let metrics = measured.map_err(|e| {
                let mut out = Message::of_error(&e);
                out.at(&self.suite.file, gate.loc);
                match &e {
                    LoadError::FlushCache(call) => {
                        Stop::failed_for(FailureKind::Gate, request_cause(call), out)
                    }
                    LoadError::ThreadStart { .. } | LoadError::WarmUp(_) => {
                        Stop::failed(FailureKind::Gate, out)
                    }
                }
            })?;
            repeats.push(metrics);
        }
        let baseline = Lookup::find(
            &baseline::dir(&self.suite.file.root),
            &self.label,
            &gate.file_parts(),
            &target.fingerprint,
            &target.config,
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
        let history = self.gate_history(gate, target);
        let refs = References {
            history: history.as_ref(),
            baseline: &baseline,
            variant: self.variant.as_ref().map(|v| v.name.as_str()),
            variants: &variants,
            recording_baselines: self.plan.recording_baselines,
            client_limited: self
                .plan
                .client_limited
                .or(gate.load.client_limited)
                .unwrap_or(if target.sim.is_some() {
                    OnClientLimited::Warn
                } else {
                    OnClientLimited::Fail
                }),
        };
        let verdict = judge(&self.suite, gate, &mut repeats, &refs);
        let figures = GateFigures {
            gate: gate.name.clone(),
            sweep: super::recording::sweep_point(gate),
            load: describe_load(gate),
            checks: verdict.checks.clone(),
            figures: baseline::figures(&repeats),
            probes_skipped: self.probes_skipped(gate),
            repeat_values: gate
                .thresholds
                .iter()
                .map(|t| {
                    let key = t.threshold.key;
                    let values = repeats.iter().filter_map(|m| m.value(key)).collect();
                    (key, values)
                })
                .collect(),
            metrics: repeats.pop().expect("at least one repeat"),
            repeats: gate.repeats,
        };
        self.plan.listeners.emit(&RunEvent::GateMeasured {
            label: &self.label,
            suite: &self.suite.name,
            variant: self.variant.as_ref().map(|v| v.name.as_str()),
            figures: &figures,
        });
        let cause = verdict.cause();
        verdict.result.map_err(|m| match cause {
            Some(cause) => Stop::failed_for(FailureKind::Gate, cause, m),
            None => Stop::failed(FailureKind::Gate, m),
        })
    }
}

/// Answers of a gate's measured window kept whole for the recheck.
const SAMPLES: usize = 8;

/// Rounds of rechecks at most while one load runs.
const ROUNDS: usize = 3;

impl Execution {
    /// Runs gate `index`'s load while asking the probes `recheck` names
    /// again, round after round while the load's measured window runs (at
    /// least once, at most [`ROUNDS`] times), and keeps the verdict of the
    /// recheck for its trial.
    fn measure_and_recheck(
        &self,
        index: usize,
        target: &Connected,
        gate: &Gate,
        recheck: &Recheck,
    ) -> Result<GateMetrics, LoadError> {
        let client = &target.client;
        let requests: Vec<(usize, CallRequest)> = recheck
            .probes
            .iter()
            .map(|&i| {
                let probe = &self.suite.probes[i];
                let req = CallRequest {
                    input: probe.input.clone(),
                    sampling: probe.sampling.clone(),
                    ignore_eos: false,
                };
                (i, req)
            })
            .collect();
        let watch = Arc::new(Watch::keeping(SAMPLES));
        let (measured, asked) = self.runtime.block_on(async {
            let load = async {
                let threads = Threads::of(&gate.load, self.plan.client_threads);
                let measured = run_watched(client, gate, threads, &watch).await;
                watch.end();
                measured
            };
            let ask = async {
                let mut asked = Vec::new();
                if !watch.started().await {
                    return asked;
                }
                for round in 0..ROUNDS {
                    let watch = &watch;
                    let round = requests.iter().map(|(i, req)| async move {
                        // Counted while the window runs (the server's
                        // counters see it); the first round is asked even
                        // after a window too short for it.
                        let counted = watch.side_started();
                        if !counted && round > 0 {
                            return None;
                        }
                        let answer = client.complete(req).await;
                        if counted {
                            watch.side_finished(answer.as_ref().map_or(0, |c| c.completion_tokens));
                        }
                        Some(recheck::Asked {
                            probe: *i,
                            answer,
                            under_load: watch.measuring(),
                        })
                    });
                    asked.extend(
                        futures_util::future::join_all(round)
                            .await
                            .into_iter()
                            .flatten(),
                    );
                    if !watch.measuring() {
                        break;
                    }
                }
                asked
            };
            tokio::join!(load, ask)
        });
        let idle: Vec<Option<crate::text::Kept>> = (0..self.suite.probes.len())
            .map(|i| {
                self.probes.read(i, |p| {
                    p.exchange.as_ref().map(crate::record::Exchange::answer)
                })
            })
            .collect();
        let samples: Vec<recheck::LoadAnswer> = watch
            .samples()
            .into_iter()
            .map(|s| recheck::LoadAnswer {
                index: s.index,
                content: s.content,
                finish_reason: s.finish_reason,
            })
            .collect();
        let load = describe_load(gate);
        let cx = recheck::Context {
            file: &self.suite.file,
            probes: &self.suite.probes,
            idle: &idle,
            load: &load,
            loc: recheck.loc,
        };
        let verdict =
            recheck::judge(&cx, &asked, &samples).map_err(|m| Stop::failed(FailureKind::Gate, m));
        self.gates.write(index, |g| g.recheck = Some(verdict));
        measured
    }
}
