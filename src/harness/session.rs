//! One suite's run: its target, the outcome of each probe, the figures of
//! each gate, and the rule that ties them — a gate runs only on a server
//! whose correctness probes all passed in this run.

use std::sync::Mutex;

use std::sync::Arc;

use tokio::runtime::Runtime;

use super::judge::{judge, judge_curve};
use super::target::Connected;
use crate::check::evaluate;
use crate::check::failure::{Sent, assertions_failed, request_failed};
use crate::client::CallRequest;
use crate::load::baseline::{self, Lookup};
use crate::load::metrics::GateMetrics;
use crate::load::runner::run_gate;
use crate::load::thresholds::format_duration;
use crate::load::workload::PROMPT_APPROXIMATION;
use crate::suite::diagnostics::render_location;
use crate::suite::{Arrival, Gate, LoadPrompt, Pace, Probe, Suite};

/// The result of one trial: `Err` carries the whole failure message.
pub type Verdict = Result<(), String>;

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
}

/// A suite being run.
pub struct SuiteRun {
    /// The suite.
    pub suite: Suite,
    /// Its server, or why it could not be reached.
    pub target: Result<Connected, String>,
    runtime: Arc<Runtime>,
    probes: Mutex<Vec<Option<Verdict>>>,
    gates: Mutex<Vec<Option<Verdict>>>,
    figures: Mutex<Vec<GateFigures>>,
}

impl SuiteRun {
    /// A run of `suite` against `target`, executing on `runtime` (the
    /// runtime itself, not a handle: a current-thread runtime's drivers run
    /// only inside its own `block_on`).
    pub fn new(suite: Suite, target: Result<Connected, String>, runtime: Arc<Runtime>) -> Self {
        let n = suite.probes.len();
        let suite_gates = suite.gates.len();
        Self {
            suite,
            target,
            runtime,
            probes: Mutex::new(vec![None; n]),
            gates: Mutex::new(vec![None; suite_gates]),
            figures: Mutex::new(Vec::new()),
        }
    }

    /// Figures measured so far.
    pub fn figures(&self) -> Vec<GateFigures> {
        self.figures.lock().map(|f| f.clone()).unwrap_or_default()
    }

    fn connected(&self) -> Result<&Connected, String> {
        self.target.as_ref().map_err(|e| {
            format!(
                "error: {e}\n  (suite `{}`, every trial of it fails)",
                self.suite.name
            )
        })
    }

    /// Runs probe `index` once; later calls return the first verdict.
    pub fn probe(&self, index: usize) -> Verdict {
        if let Some(done) = self.probes.lock().ok().and_then(|p| p[index].clone()) {
            return done;
        }
        let verdict = self.run_probe(&self.suite.probes[index]);
        if let Ok(mut p) = self.probes.lock() {
            p[index] = Some(verdict.clone());
        }
        verdict
    }

    fn run_probe(&self, probe: &Probe) -> Verdict {
        let target = self.connected()?;
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
            .map_err(|e| request_failed(file, probe.loc, &sent, &e))?;
        let failed: Vec<_> = probe
            .expect
            .iter()
            .filter_map(|a| evaluate(a, &completion).err().map(|m| (a, m)))
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(assertions_failed(file, &sent, &completion, &failed))
        }
    }

    /// Runs gate `index`, after every probe of the suite.
    /// Runs gate `index` once, after every probe of the suite; later calls
    /// (a curve's prerequisites) return the first verdict.
    pub fn gate(&self, index: usize) -> Verdict {
        if let Some(done) = self.gates.lock().ok().and_then(|g| g[index].clone()) {
            return done;
        }
        let verdict = self.run_gate(index);
        if let Ok(mut g) = self.gates.lock() {
            g[index] = Some(verdict.clone());
        }
        verdict
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
                let why = verdict.err().unwrap_or_default();
                let first = why.lines().next().unwrap_or("");
                return Err(format!(
                    "error: the curve of `{}` cannot be judged: level `{level}` measured nothing\n  ({first})",
                    curve.gate
                ));
            };
            let label = level
                .strip_prefix(curve.gate.as_str())
                .and_then(|l| l.strip_prefix("::"))
                .unwrap_or(level);
            rows.push((label, f.metrics));
        }
        judge_curve(&self.suite, curve, &rows)
    }

    fn run_gate(&self, index: usize) -> Verdict {
        let gate = &self.suite.gates[index];
        let target = self.connected()?;
        let failed: Vec<&str> = (0..self.suite.probes.len())
            .filter(|&i| self.probe(i).is_err())
            .map(|i| self.suite.probes[i].name.as_str())
            .collect();
        if !failed.is_empty() {
            let list: Vec<String> = failed
                .iter()
                .map(|n| format!("{}::correctness::{n}", self.suite.name))
                .collect();
            return Err(format!(
                "gated: correctness probe {} failed\n  a performance gate never passes on a server that failed its correctness probes; see {}",
                failed.join(", "),
                list.join(", ")
            ));
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
                    out
                })?;
            repeats.push(metrics);
        }
        let baseline = Lookup::find(
            &baseline::dir(),
            &self.suite.name,
            &gate.name,
            &target.fingerprint,
        );
        let verdict = judge(&self.suite, gate, &repeats, &baseline);
        if let Ok(mut f) = self.figures.lock() {
            f.push(GateFigures {
                gate: gate.name.clone(),
                load: describe_load(gate),
                checks: verdict.checks.clone(),
                figures: baseline::figures(&repeats),
                metrics: repeats.pop().expect("at least one repeat"),
                repeats: gate.repeats,
            });
        }
        verdict.result
    }
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
