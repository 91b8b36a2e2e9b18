//! What a run becomes in the history: its row, its points, and every name
//! it brings bounded and scrubbed as the history keeps it.

use crate::record::{RunRecord, TrialOutcome};
use crate::suite::metric::MetricKey;

/// A run as the history keeps it: one row.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    /// Unique across runners: `<node>/<run id>`.
    pub run_uid: String,
    /// The run's directory name (`<secs>-<pid>`).
    pub run_id: String,
    /// The machine that ran it (`SERVEGATE_NODE`, a GitHub runner's name,
    /// else the host name).
    pub node: String,
    /// Seconds since the Unix epoch at its start.
    pub started_unix: i64,
    /// Seconds since the Unix epoch at its end.
    pub finished_unix: i64,
    /// servegate's version.
    pub servegate: String,
    /// The GPUs it ran on, as `nvidia-smi` lists them, one per line.
    pub gpus: String,
    /// The GPUs in short (`8 x NVIDIA H200`), or `no GPU`: figures of
    /// other hardware are another series.
    pub hardware: String,
    /// `run` (recorded by the run), or `import` (`servegate history
    /// import`).
    pub source: String,
    /// The whole configuration of each fingerprint its points have, where
    /// known: the fingerprint and the configuration as JSON.
    pub configs: Vec<(String, String)>,
}

/// A figure's name as the history keeps it: a metric and its statistic
/// (`ttft`, `p99`), or a name of servegate's own benches
/// (`cpu_per_token`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FigureKey {
    /// The metric.
    pub metric: String,
    /// Its statistic, if it has one.
    pub stat: Option<String>,
}

impl From<MetricKey> for FigureKey {
    fn from(key: MetricKey) -> Self {
        FigureKey {
            metric: key.metric.name().to_owned(),
            stat: key.stat.map(|s| s.name().to_owned()),
        }
    }
}

impl std::fmt::Display for FigureKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.stat {
            Some(stat) => write!(f, "{}.{stat}", self.metric),
            None => f.write_str(&self.metric),
        }
    }
}

/// One figure of a run as the history keeps it: one row.
#[derive(Debug, Clone, PartialEq)]
pub struct PointRow {
    /// The suite's label (`sglang`, `sglang[tp8]`).
    pub suite: String,
    /// The variant, if the suite has variants.
    pub variant: Option<String>,
    /// The gate (`decode`, or a sweep's level: `sweep::concurrency_8`).
    pub gate: String,
    /// The figure (`ttft.p99`).
    pub key: FigureKey,
    /// Its value, in `unit`; the mean over repeats.
    pub value: f64,
    /// The unit of `value` (`s`, `tok/s`, …; empty for a count).
    pub unit: String,
    /// Repeats behind the value.
    pub repeats: u32,
    /// The configuration measured: API, served model, server version,
    /// the configuration the server reports.
    pub fingerprint: String,
    /// The model its series is keyed by ([`ModelIdentity::series_model`]).
    pub model: String,
    /// The model the server said it serves; empty where it said none.
    pub served_model: String,
    /// Whether `model` is the suite's pinned `target.model` (else it is
    /// the served id).
    pub model_pinned: bool,
    /// The server's version, where it says.
    pub server_version: Option<String>,
    /// The suite file's git commit (`+dirty` with local changes).
    pub suite_commit: Option<String>,
    /// Whether the gate passed.
    pub gate_passed: bool,
    /// Whether the client, not the server, set the gate's figures (its
    /// self-check said `LIMITED`): such a figure is kept, never compared.
    pub client_limited: bool,
    /// The gate's load, in words.
    pub load: String,
}

/// What the history keeps of a run: its row and every figure's. A record
/// is input (an imported file, or a server's words in a run's own: its
/// model id, its version): every string is scrubbed of the secrets known
/// here before it is kept, and bounded ([`kept`]), so one point holds a
/// bounded length of text whatever the record says.
pub fn rows(record: &RunRecord, source: &str) -> (RunRow, Vec<PointRow>) {
    let node = if record.node.is_empty() {
        "unknown".to_owned()
    } else {
        stored(&record.node)
    };
    let run_id = stored(&record.run_id);
    let gpus = kept_gpus(record.gpus.as_deref().unwrap_or_default());
    let mut run = RunRow {
        run_uid: format!("{node}/{run_id}"),
        run_id,
        node,
        started_unix: i64::try_from(record.started_unix).unwrap_or(i64::MAX),
        finished_unix: i64::try_from(record.finished_unix).unwrap_or(i64::MAX),
        servegate: kept(&record.servegate, SHORT_CHARS),
        hardware: record_hardware(record),
        gpus: gpus.join("\n"),
        source: source.to_owned(),
        configs: Vec::new(),
    };
    let mut points = Vec::new();
    for suite in &record.suites {
        let identity = ModelIdentity::of(suite);
        // Kept once a suite: every point of it holds the same.
        let label = stored(&suite.suite);
        let variant = suite.variant.as_deref().map(stored);
        let fingerprint = kept(&suite.fingerprint, LONG_CHARS);
        if !suite.config.is_empty() && !run.configs.iter().any(|(f, _)| *f == fingerprint) {
            let config = crate::load::fingerprint::kept(&suite.config);
            if let Ok(json) = serde_json::to_string(&config) {
                run.configs.push((fingerprint.clone(), json));
            }
        }
        let (model, served_model) = (identity.series_model(), identity.served_kept());
        let server_version = suite
            .server_version
            .as_deref()
            .map(|v| kept(v, SHORT_CHARS));
        let suite_commit = suite.suite_commit.as_deref().map(|c| kept(c, SHORT_CHARS));
        for gate in &suite.gates {
            let gate_passed = record
                .gate_trial(suite, gate)
                .is_some_and(|t| t.outcome == TrialOutcome::Passed);
            let (gate_stored, load) = (stored(&gate.gate), kept(&gate.load, LONG_CHARS));
            for (key, value) in gate.figures.iter() {
                if !value.is_finite() {
                    continue;
                }
                points.push(PointRow {
                    suite: label.clone(),
                    variant: variant.clone(),
                    gate: gate_stored.clone(),
                    key: key.into(),
                    value: *value,
                    unit: key.metric.unit().to_owned(),
                    repeats: gate.repeats,
                    fingerprint: fingerprint.clone(),
                    model: model.clone(),
                    served_model: served_model.clone(),
                    model_pinned: identity.pinned.is_some(),
                    server_version: server_version.clone(),
                    suite_commit: suite_commit.clone(),
                    gate_passed,
                    // Only the figures the client moved: a gate that passed
                    // with one (its verdict certain) still builds the
                    // history of the others.
                    client_limited: gate.client.as_ref().is_some_and(|c| c.limits(key)),
                    load: load.clone(),
                });
            }
        }
    }
    (run, points)
}

/// The most characters a name keeps (a suite, gate, variant, node, run).
pub(super) const NAME_CHARS: usize = 100;

/// The most characters a short text keeps whole (a model id, a version,
/// a commit, a GPU's line, the hardware), [`kept`]'s mark aside.
pub(super) const SHORT_CHARS: usize = 200;

/// The most characters a long text keeps whole (the configuration's
/// fingerprint, a load in words), [`kept`]'s mark aside.
pub(super) const LONG_CHARS: usize = 2000;

/// The most GPU lines a run keeps.
pub(super) const GPU_LINES: usize = 64;

/// A text of a record as the history keeps it: scrubbed of every known
/// secret, its acting characters escaped, and at most `max` characters of
/// it — a longer one cut and marked with its length and the start of its
/// SHA-256, so two texts that differ after the cut stay two (a
/// configuration compared by its fingerprint is still compared whole).
pub(super) fn kept(text: &str, max: usize) -> String {
    let clean = crate::text::printable(&crate::secrets::scrub(text)).into_owned();
    let (excerpt, whole) = crate::secrets::cut_scrubbed(&clean, max);
    match whole {
        None => excerpt,
        Some(chars) => format!(
            "{excerpt} … ({chars} chars, sha256 {})",
            &crate::text::sha256_hex(clean.as_bytes())[..16]
        ),
    }
}

/// The GPU lines a run keeps: at most [`GPU_LINES`], each [`kept`].
pub(super) fn kept_gpus(gpus: &[String]) -> Vec<String> {
    gpus.iter()
        .take(GPU_LINES)
        .map(|l| kept(l, SHORT_CHARS))
        .collect()
}

/// The hardware of a run on these GPUs (`nvidia-smi`'s lines) as the
/// history keeps it ([`RunRow::hardware`]): what a reader of a series
/// names it by.
pub(crate) fn run_hardware(gpus: &[String]) -> String {
    kept(&hardware(&kept_gpus(gpus)), SHORT_CHARS)
}

/// The hardware a record ran on as the history keeps it and every report
/// names it: what the record says in words (an imported result's), else
/// its GPUs counted by name ([`hardware`]) — one reading of the
/// inventory for every reader, bounded as [`kept`].
pub(crate) fn record_hardware(record: &RunRecord) -> String {
    match &record.hardware {
        Some(words) => kept(words, SHORT_CHARS),
        None => run_hardware(record.gpus.as_deref().unwrap_or_default()),
    }
}

/// Which model a suite's figures are of: the one the suite pins (its
/// `target.model`, which its requests name), else the one the server says
/// it serves.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModelIdentity<'a> {
    /// The suite's `target.model`, where it names one.
    pub pinned: Option<&'a str>,
    /// What the server said it serves, else the model requests named.
    pub served: &'a str,
    /// Whether the server said (`false`: discovery found no id, and
    /// `served` is the one requests named).
    pub reported: bool,
}

impl<'a> ModelIdentity<'a> {
    /// A suite record's.
    pub fn of(suite: &'a crate::record::SuiteRecord) -> Self {
        ModelIdentity {
            pinned: suite.pinned_model.as_deref(),
            served: suite.model.as_deref().unwrap_or_default(),
            reported: !suite.model_unreported,
        }
    }

    /// The model a series is keyed by, as the history keeps it: what the
    /// suite asked for where it pins one, so that a server cannot choose
    /// its series by the id it reports.
    pub(crate) fn series_model(&self) -> String {
        kept(self.pinned.unwrap_or(self.served), SHORT_CHARS)
    }

    /// The served id as the history keeps it; empty where the server
    /// reported none.
    pub(crate) fn served_kept(&self) -> String {
        if self.reported {
            kept(self.served, SHORT_CHARS)
        } else {
            String::new()
        }
    }
}

/// A name a record brings as the history keeps it. A record is input (an
/// imported file can say anything): its names are kept as they can be
/// shown, scrubbed, every acting character escaped, at most
/// [`NAME_CHARS`] characters (the names a suite file allows are unchanged
/// by it).
pub(super) fn stored(name: &str) -> String {
    crate::text::printable(&crate::secrets::scrub(name))
        .chars()
        .take(NAME_CHARS)
        .collect()
}

/// The GPUs in short: `8 x NVIDIA H200`, `1 x NVIDIA A10G + 1 x NVIDIA L4`,
/// or `no GPU`. `nvidia-smi`'s lines are `index, name, memory, driver`.
pub fn hardware(gpus: &[String]) -> String {
    let mut counted: Vec<(String, usize)> = Vec::new();
    for line in gpus {
        let name = line.split(',').nth(1).unwrap_or(line).trim().to_owned();
        match counted.iter_mut().find(|(n, _)| *n == name) {
            Some((_, count)) => *count += 1,
            None => counted.push((name, 1)),
        }
    }
    if counted.is_empty() {
        return "no GPU".to_owned();
    }
    counted
        .iter()
        .map(|(name, count)| format!("{count} x {name}"))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The machine a run is recorded as having run on: `SERVEGATE_NODE`,
/// else a GitHub runner's name (`RUNNER_NAME`), else the host name.
pub(crate) fn node_name() -> String {
    ["SERVEGATE_NODE", "RUNNER_NAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|n| !n.trim().is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .or_else(|| std::env::var("HOSTNAME").ok())
        })
        .map(|n| crate::text::printable(n.trim()).chars().take(100).collect())
        .filter(|n: &String| !n.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}
