//! Running a suite's performance gates: each gate's load (after every
//! probe passed), its repeats, its judgement against absolute, baseline and
//! variant bounds, and the curves across a sweep's levels.

use std::collections::BTreeMap;

use super::judge::{References, VariantFigures, judge, judge_curve};
use super::outcome::{Cause, Stop, Verdict};
use super::session::{GateFigures, SuiteRun, once};
use crate::load::baseline::{self, Lookup};
use crate::load::runner::run_gate;
use crate::load::workload::PROMPT_APPROXIMATION;
use crate::record::FailureKind;
use crate::suite::diagnostics::render_location;
use crate::suite::threshold::Bound;
use crate::suite::{Arrival, Gate, LoadPrompt, Pace, SnapshotMode};
use crate::units::format_duration;

impl SuiteRun {
    /// The figures gate `gate` measured in variant `name` of this suite.
    fn variant_figures(&self, name: &str, gate: &str) -> Result<BTreeMap<String, f64>, String> {
        let order = |n: &str| self.suite.variants.iter().position(|v| v.name == n);
        let this = self.variant.as_ref().and_then(|v| order(&v.name));
        if order(name) > this {
            return Err(format!(
                "variant `{name}` runs after this one (variants run in file order)"
            ));
        }
        self.plan
            .figures
            .of(&self.suite.name, Some(name))
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
            recording_baselines: self.plan.recording_baselines,
        };
        let verdict = judge(&self.suite, gate, &repeats, &refs);
        self.plan.figures.record(
            &self.suite.name,
            self.variant.as_ref().map(|v| v.name.as_str()),
            GateFigures {
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
            },
        );
        verdict
            .result
            .map_err(|m| Stop::failed(FailureKind::Gate, m))
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
