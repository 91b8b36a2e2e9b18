//! The run record (`servegate.run/2`): every trial's outcome, every figure,
//! the configuration measured; where a run writes it
//! (`<out>/runs/<run>/report.json`, `<out>/latest/report.json`, the journal
//! `trials.jsonl`), how it is written (scrubbed, through a rename) and read
//! back. The harness produces it, the writers of `crate::report` only read
//! it, and `servegate baseline accept` turns a reviewed run into baselines
//! without running it again.
//!
//! Here: the figures (a gate's, a suite's, the run's); `trial.rs`: a
//! trial's id, outcome and exchange; `cause.rs`: why a trial failed, as
//! data; `threshold.rs`: a threshold's line and verdict; `store.rs`: where records live and
//! how they are written, journalled and read back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::load::selfcheck::ClientCheck;
use crate::suite::figures::{ByKey, Figures};
use crate::suite::metric::MetricKey;

mod cause;
pub mod import;
mod store;
mod threshold;
mod trial;

pub use cause::*;
pub use store::*;
pub use threshold::*;
pub use trial::*;

/// The figures of one gate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateRecord {
    /// The gate's name as its trial names it: a sweep's level is
    /// `<sweep>::<level>` (`decode_sweep::concurrency_8`).
    pub gate: String,
    /// Its load, in words.
    pub load: String,
    /// Repeats behind each figure.
    pub repeats: u32,
    /// Every figure, the mean over repeats.
    pub figures: Figures,
    /// Latency over time of the last repeat: per request in completion
    /// order, seconds since the first completion, TTFT and E2E in seconds.
    #[serde(default)]
    pub series: Vec<(f64, f64, f64)>,
    /// What stands behind each figure of the last repeat, keyed like
    /// `figures` (`"5 requests in 5.24s"`, `"2555 samples"`).
    #[serde(default)]
    pub samples: ByKey<String>,
    /// Where token counts came from (`server usage`, `chunks`, …), with
    /// how many requests each, in the last repeat.
    #[serde(default)]
    pub token_sources: BTreeMap<String, u64>,
    /// Every threshold the gate was judged by, passing ones too.
    #[serde(default)]
    pub thresholds: Vec<ThresholdRecord>,
    /// The client's self-check of the last repeat: its threads, and
    /// whether it, not the server, set the figures (`limited`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientCheck>,
    /// The sweep this gate is a level of, and the level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepPoint>,
    /// Each gated figure's earlier values in the run history, where it
    /// has any: the reports draw them beside this run's and say whether
    /// this run moved off their level.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trends: Vec<Trend>,
    /// The correctness probes it would have waited for that the run left
    /// out (`--skip`): it ran without their verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes_skipped: Vec<String>,
}

/// A gated figure's earlier values in the run history (same suite, gate,
/// figure, model and hardware), and whether this run moved off them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Trend {
    /// The figure (`decode_tok_s.mean`).
    pub key: MetricKey,
    /// Its earlier values, oldest first (at most the newest 30).
    pub earlier: Vec<TrendPoint>,
    /// This run's value against the series' level, in words, where it
    /// moved off it (either way); `None` where it did not, or the series
    /// is too short to say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved: Option<String>,
}

/// One earlier value of a [`Trend`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrendPoint {
    /// The run (`<node>/<run id>`).
    pub run: String,
    /// When it ended, seconds since the epoch.
    pub finished_unix: i64,
    /// The value, in the figure's unit.
    pub value: f64,
    /// The suite's commit then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Whether it counts as the series' level: its gate passed and its
    /// client did not set it.
    pub counted: bool,
}

impl GateRecord {
    /// The trial that measured it, in the suite whose label (`<suite>` or
    /// `<suite>[<variant>]`) is `suite`.
    pub fn trial(&self, suite: &str) -> TrialId {
        TrialId::new(suite, Stage::Performance, &self.gate)
    }

    /// Its name as a file's path: the gate's, or its sweep's and level.
    pub(crate) fn file_parts(&self) -> Vec<&str> {
        crate::suite::file_parts(
            &self.gate,
            self.sweep
                .as_ref()
                .map(|s| (s.of.sweep.as_str(), s.of.level.as_str())),
        )
    }

    /// What every report says of a gate that ran without the verdict of
    /// probes it waits for (`--skip`), else nothing.
    pub(crate) fn skipped_note(&self) -> Option<String> {
        skipped_note(&self.probes_skipped)
    }
}

/// "ran without …" for the probes a gate would have waited for that
/// `--skip` left out, else nothing.
pub(crate) fn skipped_note(probes: &[String]) -> Option<String> {
    (!probes.is_empty()).then(|| {
        let list: Vec<String> = probes.iter().map(|p| format!("`{p}`")).collect();
        format!(
            "ran without the verdict of correctness probe(s) {}, which --skip left out",
            list.join(", ")
        )
    })
}

/// One level of a sweep.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SweepPoint {
    /// The sweep and the level (`sweep`, `level`: `concurrency_8`,
    /// `rate_2_5`), as the suite names them.
    #[serde(flatten)]
    pub of: crate::suite::SweepLevel,
    /// The closed loop's concurrency at this level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// The open loop's rate at this level, requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
}

/// A server servegate launched: how, and what became of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerRecord {
    /// The argv.
    pub argv: Vec<String>,
    /// The environment variables servegate set (secret-looking values
    /// redacted).
    pub env: BTreeMap<String, String>,
    /// Its log file.
    pub log: String,
    /// Start-up milestones.
    pub timeline: serde_json::Value,
    /// The workers behind it (a router's), by name: each one's record.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub workers: BTreeMap<String, ServerRecord>,
}

/// A dataset probe's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DatasetRecord {
    /// The probe.
    pub probe: String,
    /// The dataset file.
    pub file: String,
    /// The name of the share right: `accuracy`, or `pass_at_1` for code.
    #[serde(default = "accuracy_figure")]
    pub figure: String,
    /// Items scored.
    pub scored: usize,
    /// Items right.
    pub correct: usize,
    /// `correct / scored`.
    pub accuracy: f64,
    /// The Wilson 95% interval.
    pub interval95: (f64, f64),
    /// Every item.
    pub items: Vec<crate::check::accuracy::ItemResult>,
}

fn accuracy_figure() -> String {
    "accuracy".to_owned()
}

/// The figures of one suite against one configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteRecord {
    /// The suite's label: `<suite>` or `<suite>[<variant>]`.
    pub suite: String,
    /// The variant, if the suite has variants.
    #[serde(default)]
    pub variant: Option<String>,
    /// The suite file's git commit (`+dirty` with local changes), when in a
    /// git checkout.
    #[serde(default)]
    pub suite_commit: Option<String>,
    /// The launched server.
    #[serde(default)]
    pub server: Option<ServerRecord>,
    /// The server's `/get_server_info` as it answered.
    #[serde(default)]
    pub server_info: Option<serde_json::Value>,
    /// The server's `/get_model_info` as it answered.
    #[serde(default)]
    pub model_info: Option<serde_json::Value>,
    /// Dataset probes: accuracy and every graded item.
    #[serde(default)]
    pub datasets: Vec<DatasetRecord>,
    /// The configuration measured (API, served model, server version, the
    /// digest of `config`).
    pub fingerprint: String,
    /// The whole configuration the fingerprint digests (SGLang's resolved
    /// server arguments, a launched server's configuring environment as
    /// `env:NAME`), where known.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub config: crate::load::fingerprint::Config,
    /// The model the server said it serves (else the one requests named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model the suite pins (`target.model`), which its requests name
    /// and its history series is keyed by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_model: Option<String>,
    /// The server said no model id (its discovery found none): `model` is
    /// the one requests named.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model_unreported: bool,
    /// The server's version, where it reported one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// The baselines directory its gates compare with (its project's).
    #[serde(default)]
    pub baselines: Option<String>,
    /// The target as printed.
    pub target: String,
    /// Gates that measured something.
    pub gates: Vec<GateRecord>,
}

/// Everything a run leaves behind (`target/servegate/runs/<run>/report.json`,
/// copied to `target/servegate/latest/report.json`): schema `servegate.run/2`,
/// documented in `docs/src/run-record.md`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunRecord {
    /// `servegate.run/2`.
    pub schema: String,
    /// The run's directory name under `target/servegate/runs/`.
    #[serde(default)]
    pub run_id: String,
    /// Seconds since the Unix epoch at the start of the run.
    #[serde(default)]
    pub started_unix: u64,
    /// Seconds since the Unix epoch when the record was written.
    pub finished_unix: u64,
    /// Whether the run is over (`false` in a record written mid-run: the
    /// last one of an interrupted run).
    #[serde(default)]
    pub complete: bool,
    /// servegate's version.
    #[serde(default)]
    pub servegate: String,
    /// The machine it ran on: `SERVEGATE_NODE`, a GitHub runner's name
    /// (`RUNNER_NAME`), else the host name.
    #[serde(default)]
    pub node: String,
    /// `nvidia-smi --query-gpu=index,name,memory.total,driver_version`
    /// lines, when that command exists.
    #[serde(default)]
    pub gpus: Option<Vec<String>>,
    /// The hardware in words where no GPU list says it: another tool's
    /// result, whose hardware servegate was not there to see (`unknown`,
    /// or what `import bench-serving --hardware` names). The history keys
    /// its series by it in place of the GPU list's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    /// Every trial that ran, in run order.
    #[serde(default)]
    pub trials: Vec<TrialRecord>,
    /// Suites whose target was reached.
    pub suites: Vec<SuiteRecord>,
    /// The A/B tables of suites with variants.
    #[serde(default)]
    pub comparisons: Vec<Comparison>,
}

impl RunRecord {
    /// The trial that measured `gate` of `suite`, found by its id; in a
    /// record older than the id's `item` (its trials have none), by the
    /// name the id renders.
    pub(crate) fn gate_trial(
        &self,
        suite: &SuiteRecord,
        gate: &GateRecord,
    ) -> Option<&TrialRecord> {
        let id = gate.trial(&suite.suite);
        self.trials
            .iter()
            .find(|t| t.id == id || (t.id.item.is_empty() && t.name == id.name()))
    }

    /// Each gate trial that ran without the verdict of probes it waits
    /// for (`--skip`), by trial name, with what the reports say of it.
    pub(crate) fn skipped_notes(&self) -> Vec<(String, String)> {
        self.suites
            .iter()
            .flat_map(|s| {
                s.gates.iter().filter_map(|g| {
                    let note = g.skipped_note()?;
                    Some((format!("{}::performance::{}", s.suite, g.gate), note))
                })
            })
            .collect()
    }

    /// The record with every known secret replaced in every string, before
    /// anything renders it: scrubbing a finished document would miss a
    /// secret the format escaped (`&`, `"`, `%`) and could break the format
    /// where a secret equals a word of it.
    #[must_use]
    pub fn scrubbed(&self) -> RunRecord {
        let mut record = self.clone();
        for trial in &mut record.trials {
            trial.cause = trial.cause.take().map(FailureCause::rescrubbed);
        }
        let Ok(mut value) = serde_json::to_value(&record) else {
            return record;
        };
        crate::secrets::scrub_json(&mut value);
        serde_json::from_value(value).unwrap_or(record)
    }
}

/// One variant's value of a figure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// The variant.
    pub variant: String,
    /// The mean over its repeats.
    pub value: f64,
    /// The value with its unit.
    pub shown: String,
    /// Repeats behind the value.
    pub repeats: usize,
    /// The 95% interval of the mean, with two repeats or more.
    #[serde(default)]
    pub ci95: Option<(f64, f64)>,
    /// Percent change against the first variant (`None` for the first).
    pub delta_pct: Option<f64>,
    /// Whether the 95% intervals of this and the first variant are apart;
    /// `None` when either ran once (no interval).
    pub beyond_noise: Option<bool>,
    /// Why this variant cannot be the best (a probe or this gate failed, or
    /// it was gated): its figure is shown, never chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded: Option<String>,
}

/// One figure of one gate across the variants.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    /// The suite.
    pub suite: String,
    /// The gate.
    pub gate: String,
    /// The figure (`decode_tok_s.mean`).
    pub figure: String,
    /// `higher` or `lower`: which way is better, from the threshold.
    pub better: String,
    /// One row per variant that measured it, in variant order.
    pub rows: Vec<Row>,
    /// The best variant, when the figure was measured by more than one
    /// and one stands out.
    pub best: Option<String>,
    /// Why none is best although several measured it: a tie as shown, or
    /// 95% intervals that overlap (within noise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_best: Option<String>,
}
