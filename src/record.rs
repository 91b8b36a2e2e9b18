//! The run record (`servegate.run/2`): every trial's outcome, every figure,
//! the configuration measured; where a run writes it
//! (`<out>/runs/<run>/report.json`, `<out>/latest/report.json`, the journal
//! `trials.jsonl`), how it is written (scrubbed, through a rename) and read
//! back. The harness produces it, the writers of `crate::report` only read
//! it, and `servegate baseline accept` turns a reviewed run into baselines
//! without running it again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::files::{self, FileError};
use crate::load::baseline::{self, Entry};
use crate::load::selfcheck::ClientCheck;

/// The figures of one gate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateRecord {
    /// The gate's name.
    pub gate: String,
    /// Its load, in words.
    pub load: String,
    /// Repeats behind each figure.
    pub repeats: u32,
    /// Every figure, the mean over repeats.
    pub figures: BTreeMap<String, f64>,
    /// Latency over time of the last repeat: per request in completion
    /// order, seconds since the first completion, TTFT and E2E in seconds.
    #[serde(default)]
    pub series: Vec<(f64, f64, f64)>,
    /// What stands behind each figure of the last repeat, keyed like
    /// `figures` (`"5 requests in 5.24s"`, `"2555 samples"`).
    #[serde(default)]
    pub samples: BTreeMap<String, String>,
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
}

impl GateRecord {
    /// Its name as a file's path: the gate's, or its sweep's and level.
    pub fn file_parts(&self) -> Vec<&str> {
        crate::suite::file_parts(
            &self.gate,
            self.sweep
                .as_ref()
                .map(|s| (s.sweep.as_str(), s.level.as_str())),
        )
    }
}

/// One level of a sweep.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SweepPoint {
    /// The sweep's name (its gates' without the level).
    pub sweep: String,
    /// The level, as the gate's name ends: `concurrency_8`, `rate_2_5`.
    pub level: String,
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
    /// The configuration measured (API, served model, server version).
    pub fingerprint: String,
    /// The baselines directory its gates compare with (its project's).
    #[serde(default)]
    pub baselines: Option<String>,
    /// The target as printed.
    pub target: String,
    /// Gates that measured something.
    pub gates: Vec<GateRecord>,
}

/// How a trial ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialOutcome {
    /// It passed.
    Passed,
    /// It ran and failed.
    Failed,
    /// It did not run: something it depends on failed first (a probe, a
    /// config check, the server). It counts as failed everywhere.
    Gated,
}

impl TrialOutcome {
    /// Whether the trial passed.
    pub fn passed(self) -> bool {
        self == TrialOutcome::Passed
    }

    /// As the record writes it.
    pub fn name(self) -> &'static str {
        match self {
            TrialOutcome::Passed => "passed",
            TrialOutcome::Failed => "failed",
            TrialOutcome::Gated => "gated",
        }
    }
}

/// What failed in a failed trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The target could not be reached or launched.
    Target,
    /// The server's configuration is not the one asserted.
    Config,
    /// A correctness probe's answer (or its request).
    Probe,
    /// An answer differs from its reviewed snapshot.
    Snapshot,
    /// A performance gate: a threshold, or a load that could not run.
    Gate,
    /// The server died, hung or logged a fatal line during the trial.
    Server,
}

/// The stages of a suite's run, in their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// `expect_server` checks.
    Config,
    /// Correctness probes.
    Correctness,
    /// Snapshot comparisons of the probes' answers.
    Snapshot,
    /// Performance gates, their rechecks and curves.
    Performance,
}

impl Stage {
    /// As a trial's name and the record write it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Config => "config",
            Stage::Correctness => "correctness",
            Stage::Snapshot => "snapshot",
            Stage::Performance => "performance",
        }
    }
}

/// The trial of a gate other than the gate itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// `<gate>::recheck`: the probes asked again under the gate's load.
    Recheck,
    /// `<sweep>::curve`: how a figure moves across a sweep's levels.
    Curve,
}

impl Part {
    /// As a trial's name writes it.
    pub fn name(self) -> &'static str {
        match self {
            Part::Recheck => "recheck",
            Part::Curve => "curve",
        }
    }
}

/// Which trial: built once from the suite, its name rendered from it and
/// never parsed back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TrialId {
    /// `<suite>` or `<suite>[<variant>]`.
    pub suite: String,
    /// Its stage.
    pub stage: Stage,
    /// The item of the suite (a check, probe or gate; a sweep's level
    /// gate is `<sweep>::concurrency_8`, a curve's item its sweep).
    #[serde(default)]
    pub item: String,
    /// What of the item, when not the item itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<Part>,
}

impl TrialId {
    /// The item itself.
    pub fn new(suite: &str, stage: Stage, item: &str) -> TrialId {
        TrialId {
            suite: suite.to_owned(),
            stage,
            item: item.to_owned(),
            part: None,
        }
    }

    /// A part of the item.
    #[must_use]
    pub fn part(mut self, part: Part) -> TrialId {
        self.part = Some(part);
        self
    }

    /// The libtest name: `<suite>::<stage>::<item>[::<part>]`.
    pub fn name(&self) -> String {
        let mut name = format!("{}::{}::{}", self.suite, self.stage.name(), self.item);
        if let Some(p) = self.part {
            name.push_str("::");
            name.push_str(p.name());
        }
        name
    }

    /// The item with its part, as the name writes them after the stage.
    pub fn within_stage(&self) -> String {
        match self.part {
            Some(p) => format!("{}::{}", self.item, p.name()),
            None => self.item.clone(),
        }
    }
}

/// How one trial ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrialRecord {
    /// The libtest name (`suite[variant]::stage::item`).
    pub name: String,
    /// Which trial: `suite`, `stage`, `item` and `part`.
    #[serde(flatten)]
    pub id: TrialId,
    /// How it ended.
    pub outcome: TrialOutcome,
    /// What failed, for a failed trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FailureKind>,
    /// Wall time of the trial, seconds.
    pub duration_s: f64,
    /// The suite file.
    pub file: String,
    /// The 1-based line of the item in it.
    pub line: u32,
    /// The 1-based line in `file` its failure points at (the assertion
    /// or threshold that failed), where it points at one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub points_at: Option<u32>,
    /// The whole failure message, for a failed trial.
    #[serde(default)]
    pub message: Option<String>,
    /// A correctness probe's request and answer.
    #[serde(default)]
    pub exchange: Option<Exchange>,
}

/// What a probe sent and what came back. An answer is kept scrubbed, and
/// as an excerpt of its first [`crate::text::KEPT_CHARS`] characters when longer: its
/// length and hash say what the whole was.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Exchange {
    /// The request body.
    pub request: serde_json::Value,
    /// The answer (scrubbed; its first [`crate::text::KEPT_CHARS`] characters).
    pub content: String,
    /// Characters of the whole (scrubbed) answer.
    #[serde(default)]
    pub content_chars: usize,
    /// SHA-256 of the whole scrubbed answer's UTF-8, lower-case hex.
    #[serde(default)]
    pub content_sha256: String,
    /// The reasoning, when the server separated it (kept as the answer is).
    #[serde(default)]
    pub reasoning: String,
    /// Characters of the whole reasoning.
    #[serde(default)]
    pub reasoning_chars: usize,
    /// SHA-256 of the whole scrubbed reasoning.
    #[serde(default)]
    pub reasoning_sha256: String,
    /// The finish reason.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// The programs its code checks ran: the sandbox layers that held
    /// each, how long it ran, what the sandbox stopped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandbox: Vec<crate::check::code::CodeRun>,
}

impl Exchange {
    /// What the record keeps of a probe's request and answer.
    #[must_use]
    pub fn new(
        request: serde_json::Value,
        answer: &crate::client::Completion,
        sandbox: Vec<crate::check::code::CodeRun>,
    ) -> Exchange {
        let content = crate::text::Kept::of(&answer.content);
        let reasoning = crate::text::Kept::of(&answer.reasoning);
        Exchange {
            request,
            content: content.text,
            content_chars: content.chars,
            content_sha256: content.sha256,
            reasoning: reasoning.text,
            reasoning_chars: reasoning.chars,
            reasoning_sha256: reasoning.sha256,
            finish_reason: answer.finish_reason.clone(),
            sandbox,
        }
    }

    /// The answer as kept.
    #[must_use]
    pub fn answer(&self) -> crate::text::Kept {
        crate::text::Kept {
            text: self.content.clone(),
            chars: self.content_chars,
            sha256: self.content_sha256.clone(),
        }
    }
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
    /// `nvidia-smi --query-gpu=index,name,memory.total,driver_version`
    /// lines, when that command exists.
    #[serde(default)]
    pub gpus: Option<Vec<String>>,
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

/// The record format written by this version.
pub const SCHEMA: &str = "servegate.run/2";

/// What identifies a run in its record, and where it writes.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// The run's directory: `<out>/runs/<run-id>`.
    pub dir: PathBuf,
    /// servegate's output directory, holding `runs/` and `latest/`.
    pub out: PathBuf,
    /// Seconds since the Unix epoch at the start.
    pub started_unix: u64,
}

impl RunInfo {
    /// The copy of the latest run's record: `<out>/latest/report.json`.
    pub fn latest(&self) -> PathBuf {
        latest_in(&self.out)
    }
}

/// `<out>/latest/report.json`.
pub fn latest_in(out: &Path) -> PathBuf {
    out.join("latest/report.json")
}

/// A new run's directory: `<out>/runs/<seconds since the epoch>-<pid>`.
pub fn new_run_dir(out: &Path) -> PathBuf {
    out.join("runs")
        .join(format!("{}-{}", now_unix(), std::process::id()))
}

/// The variable that sets how many run directories are kept.
pub const KEEP_RUNS_ENV: &str = "SERVEGATE_KEEP_RUNS";

/// How many run directories are kept unless told otherwise.
pub const DEFAULT_KEEP_RUNS: usize = 20;

/// `SERVEGATE_KEEP_RUNS`, else the default; a value that is not a count
/// is said and the default kept.
pub fn keep_runs_from_env() -> usize {
    match std::env::var(KEEP_RUNS_ENV) {
        Ok(v) if !v.trim().is_empty() => v.trim().parse().unwrap_or_else(|_| {
            eprintln!(
                "warning: {KEEP_RUNS_ENV}={v:?} is not a count of run directories; keeping the newest {DEFAULT_KEEP_RUNS}"
            );
            DEFAULT_KEEP_RUNS
        }),
        _ => DEFAULT_KEEP_RUNS,
    }
}

/// Removes the oldest run directories of `<out>/runs/` until `keep` are
/// left (`0`: none removed), never `current` and never one whose process
/// is still running (another run writing into the same directory). Only
/// directories that are servegate's are touched: named `<secs>-<pid>` and
/// holding a record or a journal. Returns how many were removed.
pub fn prune_runs(out: &Path, keep: usize, current: &Path) -> usize {
    if keep == 0 {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(out.join("runs")) else {
        return 0;
    };
    let mut runs: Vec<((u64, u32), PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (secs, pid) = name.split_once('-')?;
            let id = (secs.parse().ok()?, pid.parse().ok()?);
            let path = e.path();
            let ours = path.join("report.json").is_file() || path.join(JOURNAL).is_file();
            ours.then_some((id, path))
        })
        .collect();
    // Newest first; the current run counts as one of those kept.
    runs.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut kept = usize::from(runs.iter().all(|(_, p)| p != current));
    let mut removed = 0;
    for ((_, pid), path) in runs {
        if path == current || kept < keep || process_alive(pid) {
            kept += 1;
            continue;
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => removed += 1,
            Err(e) => eprintln!("warning: failed to remove {}: {e}", path.display()),
        }
    }
    removed
}

/// Whether process `pid` exists (a run still writing its directory).
fn process_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(raw) = i32::try_from(pid) else {
            return false;
        };
        // Signal 0 checks existence only; EPERM: it exists, as another user.
        !matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None),
            Err(nix::errno::Errno::ESRCH)
        )
    }
    #[cfg(not(unix))]
    {
        pid == std::process::id()
    }
}

/// servegate's output directory (it holds `runs/<run>/` and `latest/`):
/// `--out-dir`, else `SERVEGATE_OUT`, else `$CARGO_TARGET_DIR/servegate`,
/// else `<project>/target/servegate` where `project` is the first suite's
/// project (or the working directory's, for commands that run no suite).
pub fn out_dir(explicit: Option<&Path>, project: Option<&Path>) -> PathBuf {
    if let Some(dir) = explicit {
        return crate::suite::absolute(dir);
    }
    if let Some(dir) = std::env::var_os("SERVEGATE_OUT").filter(|v| !v.is_empty()) {
        return crate::suite::absolute(Path::new(&dir));
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
        return crate::suite::absolute(Path::new(&dir)).join("servegate");
    }
    project
        .map_or_else(working_project, Path::to_path_buf)
        .join("target/servegate")
}

/// The project of the working directory: the nearest directory holding
/// `snapshots/` or `.git`, else the working directory.
pub fn working_project() -> PathBuf {
    crate::suite::project_root(Path::new("servegate.yaml"))
}

/// Seconds since the Unix epoch now.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Writes the record to the run's directory and to [`RunInfo::latest`], each
/// through a temporary file renamed into place, so a reader (or a run
/// killed mid-write) never sees half a record. Returns the run's copy.
pub fn write(info: &RunInfo, record: &RunRecord) -> Result<PathBuf, FileError> {
    let scrubbed = record.scrubbed();
    let own = info.dir.join("report.json");
    for path in [&own, &info.latest()] {
        files::write_json(path, "the run record", &scrubbed)?;
    }
    Ok(own)
}

/// Counts a finished trial of `stage` in `(trials, at the last rewrite)`;
/// whether the record is to be rewritten now.
pub fn rewrite_due(counts: &mut (u64, u64), stage: Stage) -> bool {
    counts.0 += 1;
    let due = stage == Stage::Performance || counts.0 - counts.1 >= counts.1.max(1);
    if due {
        counts.1 = counts.0;
    }
    due
}

/// The journal of a run: one JSON line per finished trial.
pub const JOURNAL: &str = "trials.jsonl";

/// Appends one trial to the journal, its secrets scrubbed.
pub fn append(path: &Path, trial: &TrialRecord) -> Result<(), FileError> {
    let encode = |source| FileError::Encode {
        path: path.to_path_buf(),
        what: "a trial",
        source,
    };
    let mut value = serde_json::to_value(trial).map_err(encode)?;
    crate::secrets::scrub_json(&mut value);
    let line = serde_json::to_string(&value).map_err(encode)? + "\n";
    files::append(path, &line)
}

/// The trials of a run's journal that its record does not hold yet (the
/// record of an interrupted run is its last checkpoint).
pub fn merge_journal(record: &mut RunRecord, dir: &Path) {
    let Ok(text) = std::fs::read_to_string(dir.join(JOURNAL)) else {
        return;
    };
    for line in text.lines() {
        if let Ok(t) = serde_json::from_str::<TrialRecord>(line)
            && !record.trials.iter().any(|r| r.name == t.name)
        {
            record.trials.push(t);
        }
    }
}

/// Reads a record from `report.json` or a run directory holding one; an
/// interrupted run's journal is merged into it.
pub fn read(path: &Path) -> Result<RunRecord, FileError> {
    let file = if path.is_dir() {
        path.join("report.json")
    } else {
        path.to_path_buf()
    };
    let mut record: RunRecord = files::read_json(&file, "a servegate run record")?;
    // An interrupted run's record is its last checkpoint: the trials after
    // it are in the journal beside it.
    if !record.complete
        && let Some(dir) = file.parent()
    {
        merge_journal(&mut record, dir);
    }
    Ok(record)
}

/// Turns the latest run's figures (in output directory `out`) into
/// baselines, each in the baselines directory of its suite's project;
/// returns the files written.
pub fn accept(out: &Path) -> Result<Vec<PathBuf>, String> {
    let path = latest_in(out);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "no figures of a previous run at {} ({e}): run the suites first",
            path.display()
        )
    })?;
    let figures: RunRecord = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a figures file: {e}", path.display()))?;
    let mut written = Vec::new();
    for suite in &figures.suites {
        let dir = suite
            .baselines
            .as_ref()
            .map_or_else(|| baseline::dir(&working_project()), PathBuf::from);
        for gate in &suite.gates {
            let file = baseline::path(&dir, &suite.suite, &gate.file_parts());
            let entry = Entry {
                saved_unix: figures.finished_unix,
                servegate: env!("CARGO_PKG_VERSION").to_owned(),
                load: gate.load.clone(),
                repeats: gate.repeats,
                figures: gate.figures.clone(),
            };
            baseline::write(&file, &suite.fingerprint, entry).map_err(|e| e.to_string())?;
            written.push(file);
        }
    }
    if written.is_empty() {
        return Err(format!(
            "the run in {} measured no gate: no baseline written",
            path.display()
        ));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::{Stage, rewrite_due};

    /// A thousand probes rewrite the record ten times (after 1, 2, 4, …,
    /// 512 trials); each gate rewrites it once more.
    #[test]
    fn rewrites_are_logarithmic_in_probes_and_one_per_gate() {
        let mut state = (0, 0);
        let probes = (0..1000)
            .filter(|_| rewrite_due(&mut state, Stage::Correctness))
            .count();
        assert_eq!(probes, 10);
        let gates = (0..5)
            .filter(|_| rewrite_due(&mut state, Stage::Performance))
            .count();
        assert_eq!(gates, 5);
    }
}
