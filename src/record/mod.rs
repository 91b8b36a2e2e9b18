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
//! data; `store.rs`: where records live and
//! how they are written, journalled and read back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::load::selfcheck::ClientCheck;
use crate::suite::figures::{ByKey, Figures};
use crate::suite::metric::{MetricKey, Unit, format_value};
use crate::suite::threshold::Op;

mod cause;
pub mod import;
mod store;
mod trial;

pub use cause::*;
pub use store::*;
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
    pub fn file_parts(&self) -> Vec<&str> {
        crate::suite::file_parts(
            &self.gate,
            self.sweep
                .as_ref()
                .map(|s| (s.of.sweep.as_str(), s.of.level.as_str())),
        )
    }

    /// What every report says of a gate that ran without the verdict of
    /// probes it waits for (`--skip`), else nothing.
    pub fn skipped_note(&self) -> Option<String> {
        skipped_note(&self.probes_skipped)
    }
}

/// "ran without …" for the probes a gate would have waited for that
/// `--skip` left out, else nothing.
pub fn skipped_note(probes: &[String]) -> Option<String> {
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

/// One threshold of a gate and its verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThresholdRecord {
    /// The threshold with its bound and what was measured, as the
    /// terminal prints it (`decode_tok_s.mean >= 12.5 tok/s (measured
    /// 500.1 tok/s)`).
    pub check: String,
    /// Whether it held.
    pub passed: bool,
    /// The threshold as data (absent for the client self-check's row,
    /// and in records written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<ThresholdVerdict>,
}

/// A threshold's verdict as data: what was compared, how, against what,
/// what was measured, and where the threshold is written. Written with its
/// figure's unit (`unit`: `s`, `tok/s`, `req/s`, `%`, `tokens`, or empty
/// for a count or a share), which its key decides and readers need not
/// look up; read back from its key.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ThresholdVerdict {
    /// The figure, as a suite names it: `ttft.p99`.
    pub key: MetricKey,
    /// The comparison, written as in the suite: `>=`, `>`, `<=`, `<`,
    /// `==`, `!=`.
    #[serde(deserialize_with = "op_symbol")]
    pub op: Op,
    /// The bound the figure was held to, in the figure's unit; absent
    /// when a relative bound had no reference (then it cannot pass).
    pub bound: Option<f64>,
    /// What a relative bound was made from (a baseline's or a variant's
    /// figure), in the figure's unit.
    #[serde(default)]
    pub reference: Option<f64>,
    /// The figure judged, combined over repeats as its metric says (the
    /// mean; the total for a count such as `errors`); absent when nothing
    /// measured it.
    pub measured: Option<f64>,
    /// Each repeat's figure, when the gate repeated.
    #[serde(default)]
    pub repeats: Vec<f64>,
    /// The 1-based line of the suite file it is written at (the gate's
    /// own for the implicit error bound).
    pub line: u32,
    /// The `errors == 0` a gate gets when it states no error bound.
    #[serde(default)]
    pub implicit: bool,
    /// Why it was not applied, when it was not (it then passes).
    #[serde(default)]
    pub not_applied: Option<String>,
    /// The most the client can have moved the figure, by its self-check
    /// (the largest over repeats), in the figure's unit; absent where
    /// nothing bounds it or the self-check does not gate the figure.
    #[serde(default)]
    pub client_error: Option<f64>,
    /// The bound as the suite writes it (`2s`, `baseline * 1.1`,
    /// `no_regression`); empty in records written before it.
    #[serde(default)]
    pub written: String,
    /// What a relative bound was made from, in words (`baseline`,
    /// ``variant `base`'s``, the history's own words), where it was.
    #[serde(default)]
    pub reference_from: Option<String>,
}

impl ThresholdVerdict {
    /// The unit of `bound`, `reference` and `measured`: the figure's.
    pub fn unit(&self) -> Unit {
        self.key.metric.spec().unit
    }

    /// ` = 2.1 s from baseline 1.9 s`: how a relative bound was made;
    /// empty for a fixed bound, or one that had no reference.
    pub fn against(&self) -> String {
        let m = self.key.metric;
        match (&self.reference_from, self.reference, self.bound) {
            (Some(from), Some(r), Some(b)) => format!(
                " = {} from {from} {}",
                format_value(m, b),
                format_value(m, r)
            ),
            _ => String::new(),
        }
    }

    /// What was measured, in words: the figure, and over repeats its
    /// spread and 95% interval; `nothing` when nothing measured it.
    pub fn measured_text(&self) -> String {
        let Some(measured) = self.measured else {
            return "nothing".to_owned();
        };
        let estimate = if self.repeats.len() > 1 {
            crate::load::estimate::combine(self.key.metric, self.repeats.clone())
        } else {
            crate::load::estimate::Estimate::of(vec![measured])
        };
        crate::load::estimate::describe(self.key, &estimate)
    }
}

/// The threshold's line as the terminal and the reports print it: the
/// threshold as written, how a relative bound was made, what was measured
/// (`decode_tok_s.mean >= 12.5 tok/s (measured 500.1 tok/s)`), or why it
/// was not applied.
impl std::fmt::Display for ThresholdVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ", self.key, self.op.symbol())?;
        match (self.written.is_empty(), self.bound) {
            (false, _) => f.write_str(&self.written)?,
            (true, Some(b)) => f.write_str(&format_value(self.key.metric, b))?,
            (true, None) => f.write_str("?")?,
        }
        match &self.not_applied {
            Some(why) => write!(f, " (not applied: {why})"),
            None => write!(f, "{} (measured {})", self.against(), self.measured_text()),
        }
    }
}

impl Serialize for ThresholdVerdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut out = s.serialize_struct("ThresholdVerdict", 13)?;
        out.serialize_field("key", &self.key)?;
        out.serialize_field("op", self.op.symbol())?;
        out.serialize_field("bound", &self.bound)?;
        match self.reference {
            Some(r) => out.serialize_field("reference", &r)?,
            None => out.skip_field("reference")?,
        }
        out.serialize_field("measured", &self.measured)?;
        if self.repeats.is_empty() {
            out.skip_field("repeats")?;
        } else {
            out.serialize_field("repeats", &self.repeats)?;
        }
        out.serialize_field("unit", self.key.metric.unit())?;
        out.serialize_field("line", &self.line)?;
        out.serialize_field("implicit", &self.implicit)?;
        match &self.not_applied {
            Some(why) => out.serialize_field("not_applied", why)?,
            None => out.skip_field("not_applied")?,
        }
        match self.client_error {
            Some(e) => out.serialize_field("client_error", &e)?,
            None => out.skip_field("client_error")?,
        }
        if self.written.is_empty() {
            out.skip_field("written")?;
        } else {
            out.serialize_field("written", &self.written)?;
        }
        match &self.reference_from {
            Some(from) => out.serialize_field("reference_from", from)?,
            None => out.skip_field("reference_from")?,
        }
        out.end()
    }
}

/// An operator as a record writes it (`>=`); any other text is an error
/// that names the ones there are.
fn op_symbol<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Op, D::Error> {
    let text = String::deserialize(d)?;
    Op::ALL
        .into_iter()
        .find(|op| op.symbol() == text)
        .ok_or_else(|| {
            let known: Vec<&str> = Op::ALL.iter().map(|op| op.symbol()).collect();
            serde::de::Error::custom(format!(
                "unknown operator `{text}` (one of {})",
                known.join(" ")
            ))
        })
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
    pub fn gate_trial(&self, suite: &SuiteRecord, gate: &GateRecord) -> Option<&TrialRecord> {
        let id = gate.trial(&suite.suite);
        self.trials
            .iter()
            .find(|t| t.id == id || (t.id.item.is_empty() && t.name == id.name()))
    }

    /// Each gate trial that ran without the verdict of probes it waits
    /// for (`--skip`), by trial name, with what the reports say of it.
    pub fn skipped_notes(&self) -> Vec<(String, String)> {
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
        let Ok(mut value) = serde_json::to_value(self) else {
            return self.clone();
        };
        crate::secrets::scrub_json(&mut value);
        serde_json::from_value(value).unwrap_or_else(|_| self.clone())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A verdict renders the threshold's line: as written, how a relative
    /// bound was made, what was measured over the repeats; or why it was
    /// not applied.
    #[test]
    fn a_verdict_renders_its_line() {
        let v = ThresholdVerdict {
            key: "ttft.p99".parse().expect("a key"),
            op: Op::Le,
            bound: Some(0.22),
            reference: Some(0.2),
            measured: Some(0.25),
            repeats: vec![0.24, 0.25, 0.26],
            line: 9,
            implicit: false,
            not_applied: None,
            client_error: None,
            written: "baseline * 1.1".into(),
            reference_from: Some("baseline".into()),
        };
        assert_eq!(
            v.to_string(),
            "ttft.p99 <= baseline * 1.1 = 220.00ms from baseline 200.00ms (measured 250.00ms ± 10.00ms (95% CI 225.16ms … 274.84ms, 3 repeats))"
        );
        let not_applied = ThresholdVerdict {
            bound: None,
            reference: None,
            measured: None,
            repeats: Vec::new(),
            not_applied: Some("`baseline save` records this run's figures".into()),
            ..v
        };
        assert_eq!(
            not_applied.to_string(),
            "ttft.p99 <= baseline * 1.1 (not applied: `baseline save` records this run's figures)"
        );
    }

    /// A verdict is written with its operator as in the suite and its
    /// figure's unit, and read back typed; an operator no suite can write
    /// is an error naming those there are.
    #[test]
    fn a_verdict_writes_its_operator_and_unit_and_reads_back_typed() {
        let v = ThresholdVerdict {
            key: "spec_accept_length.mean".parse().expect("a key"),
            op: Op::Ne,
            bound: Some(64.0),
            reference: None,
            measured: Some(64.0),
            repeats: Vec::new(),
            line: 9,
            implicit: false,
            not_applied: None,
            client_error: Some(0.000_2),
            written: "64".into(),
            reference_from: None,
        };
        let text = serde_json::to_string(&v).expect("written");
        assert_eq!(
            text,
            r#"{"key":"spec_accept_length.mean","op":"!=","bound":64.0,"measured":64.0,"unit":"tokens","line":9,"implicit":false,"client_error":0.0002,"written":"64"}"#
        );
        let back: ThresholdVerdict = serde_json::from_str(&text).expect("read back");
        assert_eq!((back.op, back.unit()), (Op::Ne, Unit::Tokens));
        assert_eq!(back, v);
        let bad = text.replace("!=", "=~");
        let e = serde_json::from_str::<ThresholdVerdict>(&bad).expect_err("not an operator");
        assert!(
            e.to_string()
                .contains("unknown operator `=~` (one of >= > <= < == !=)"),
            "{e}"
        );
    }
}
