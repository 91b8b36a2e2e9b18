//! Where a run's record lives and how it is kept: the run directories
//! (new, latest, pruned), the output directory, writing the record whole,
//! the journal of trials a crash leaves behind, reading a record back and
//! `servegate baseline accept`.

use std::path::{Path, PathBuf};

use super::{RunRecord, Stage, TrialRecord};
use crate::files::{self, FileError};
use crate::load::baseline::{self, Entry};

/// The record format written by this version.
pub(crate) const SCHEMA: &str = "servegate.run/2";

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
pub(crate) fn latest_in(out: &Path) -> PathBuf {
    out.join("latest/report.json")
}

/// A new run's directory: `<out>/runs/<seconds since the epoch>-<pid>`
/// (the output directory prepared by [`prepare`]).
pub fn new_run_dir(out: &Path) -> PathBuf {
    prepare(out);
    out.join("runs")
        .join(format!("{}-{}", now_unix(), std::process::id()))
}

/// The variable that sets how many run directories are kept.
pub const KEEP_RUNS_ENV: &str = "SERVEGATE_KEEP_RUNS";

/// How many run directories are kept unless told otherwise.
pub const DEFAULT_KEEP_RUNS: usize = 20;

/// `SERVEGATE_KEEP_RUNS`, else the default; a value that is not a count
/// is said and the default kept.
pub(crate) fn keep_runs_from_env() -> usize {
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
pub(crate) fn prune_runs(out: &Path, keep: usize, current: &Path) -> usize {
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

/// Makes a default output directory outside a Cargo project
/// (`.servegate/`) with a `.gitignore` of `*`, so that nothing of it is
/// committed by accident (as pytest and ruff keep their caches); it is
/// written whenever it is missing, whoever made the directory first
/// (`servegate init` keeps its calibration suites there). A directory that
/// cannot be made here fails, said, where the first file is written.
pub fn prepare(out: &Path) {
    if out.file_name() == Some(OUTSIDE_CARGO.as_ref()) && !out.join(".gitignore").exists() {
        let _ = std::fs::create_dir_all(out).and_then(|()| {
            std::fs::write(
                out.join(".gitignore"),
                "# servegate's runs and history: not for committing\n*\n",
            )
        });
    }
}

/// The default output directory's name in a project that is not a Cargo
/// project (no `Cargo.toml`): a pip user's Python repository has no
/// `target/`, and servegate makes none there.
pub(crate) const OUTSIDE_CARGO: &str = ".servegate";

/// servegate's output directory (it holds `runs/<run>/` and `latest/`):
/// `--out-dir`, else `SERVEGATE_OUT`, else `$CARGO_TARGET_DIR/servegate`,
/// else in the first suite's project (or the working directory's, for
/// commands that run no suite): `<project>/target/servegate` in a Cargo
/// project (one holding `Cargo.toml`), `<project>/.servegate` in any other.
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
    let project = project.map_or_else(working_project, Path::to_path_buf);
    if project.join("Cargo.toml").is_file() {
        project.join("target/servegate")
    } else {
        project.join(OUTSIDE_CARGO)
    }
}

/// The project of the working directory: the nearest directory holding
/// `snapshots/` or `.git`, else the working directory.
pub fn working_project() -> PathBuf {
    crate::suite::project_root(Path::new("servegate.yaml"))
}

/// Seconds since the Unix epoch now.
pub(crate) fn now_unix() -> u64 {
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
pub(crate) fn rewrite_due(counts: &mut (u64, u64), stage: Stage) -> bool {
    counts.0 += 1;
    let due = stage == Stage::Performance || counts.0 - counts.1 >= counts.1.max(1);
    if due {
        counts.1 = counts.0;
    }
    due
}

/// The journal of a run: one JSON line per finished trial.
pub(crate) const JOURNAL: &str = "trials.jsonl";

/// Appends one trial to the journal, its secrets scrubbed.
pub fn append(path: &Path, trial: &TrialRecord) -> Result<(), FileError> {
    let encode = |source| FileError::Encode {
        path: path.to_path_buf(),
        what: "a trial",
        source,
    };
    let trial = TrialRecord {
        cause: trial.cause.clone().map(super::FailureCause::rescrubbed),
        ..trial.clone()
    };
    let mut value = serde_json::to_value(&trial).map_err(encode)?;
    crate::secrets::scrub_json(&mut value);
    let line = serde_json::to_string(&value).map_err(encode)? + "\n";
    files::append(path, &line)
}

/// The trials of a run's journal that its record does not hold yet (the
/// record of an interrupted run is its last checkpoint).
pub(crate) fn merge_journal(record: &mut RunRecord, dir: &Path) {
    let Ok(text) = files::read_capped(&dir.join(JOURNAL), "a run's journal", MAX_RECORD_BYTES)
    else {
        return;
    };
    for line in text.lines() {
        if let Some(t) = serde_json::from_str(line)
            .ok()
            .and_then(|v| serde_json::from_value::<TrialRecord>(inert(v)).ok())
            && !record.trials.iter().any(|r| r.name == t.name)
        {
            record.trials.push(t);
        }
    }
}

/// The most bytes a record read back may have (a run of thousands of
/// trials with their excerpts is a few MiB).
pub(crate) const MAX_RECORD_BYTES: u64 = 64 << 20;

/// Every string of a record read back (keys too) as it may reach a
/// terminal, a CI log or a report: a record is a file anyone can write,
/// and `report`, `report merge` and `history import` show its strings
/// where the run that wrote it had made them safe. [`for_log`] keeps a
/// message's lines and escapes what would act (an escape sequence, a
/// line that is a workflow command); it changes nothing of a record
/// servegate wrote.
///
/// [`for_log`]: crate::text::for_log
fn inert(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(crate::text::for_log(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(inert).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (crate::text::for_log(&k), inert(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Reads a record from `report.json` or a run directory holding one (at
/// most `MAX_RECORD_BYTES`, every string made inert: [`inert`]); an
/// interrupted run's journal is merged into it.
pub fn read(path: &Path) -> Result<RunRecord, FileError> {
    let file = if path.is_dir() {
        path.join("report.json")
    } else {
        path.to_path_buf()
    };
    let text = files::read_capped(&file, RECORD, MAX_RECORD_BYTES)?;
    let value = serde_json::from_str(&text).map_err(|source| FileError::NotJson {
        path: file.clone(),
        what: RECORD,
        source,
    })?;
    from_json(value, &file)
}

/// What a run record is called in messages.
const RECORD: &str = "a servegate run record";

/// The record a JSON document read from `file` holds, every string made
/// inert ([`inert`]); an interrupted run's journal beside `file` is merged
/// into it. [`read`] reads `file` first; `history import`, which has
/// parsed it already to tell a record from a benchmark's results, starts
/// here.
pub fn from_json(value: serde_json::Value, file: &Path) -> Result<RunRecord, FileError> {
    let mut record: RunRecord =
        serde_json::from_value(inert(value)).map_err(|source| FileError::NotJson {
            path: file.to_path_buf(),
            what: RECORD,
            source,
        })?;
    // An interrupted run's record is its last checkpoint: the trials after
    // it are in the journal beside it.
    if !record.complete
        && let Some(dir) = file.parent()
    {
        merge_journal(&mut record, dir);
    }
    Ok(record)
}

/// `a, b` of figure names.
fn join(keys: &[crate::suite::metric::MetricKey]) -> String {
    keys.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why `baseline accept` wrote no baselines.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// There is no latest run to accept.
    #[error("no figures of a previous run at {} ({source}): run the suites first", path.display())]
    NoRun {
        /// Where the latest run's record would be.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// The latest run's record is not one.
    #[error("{} is not a figures file: {source}", path.display())]
    NotFigures {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A baseline file could not be read or written.
    #[error(transparent)]
    Baseline(#[from] FileError),
    /// The latest run (its record named) measured no gate.
    #[error("the run in {} measured no gate: no baseline written", .0.display())]
    NoGate(PathBuf),
}

/// Turns the latest run's figures (in output directory `out`) into
/// baselines, each in the baselines directory of its suite's project;
/// returns the files written.
pub fn accept(out: &Path) -> Result<Vec<PathBuf>, AcceptError> {
    let path = latest_in(out);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(source) => return Err(AcceptError::NoRun { path, source }),
    };
    let figures: RunRecord = match serde_json::from_str(&text) {
        Ok(figures) => figures,
        Err(source) => return Err(AcceptError::NotFigures { path, source }),
    };
    let mut written = Vec::new();
    for suite in &figures.suites {
        let dir = suite
            .baselines
            .as_ref()
            .map_or_else(|| baseline::dir(&working_project()), PathBuf::from);
        for gate in &suite.gates {
            // A rate the client set measures the client, and may lie far
            // below the server's: held to it, later runs would be judged
            // against servegate's own limit. It gets no baseline; a time
            // the client moved past its tolerance is kept, said.
            let mut kept = gate.figures.clone();
            if let Some(client) = &gate.client {
                let moved: Vec<_> = gate.figures.keys().filter(|k| client.limits(*k)).collect();
                let (rates, times): (Vec<_>, Vec<_>) = moved
                    .into_iter()
                    .partition(|k| crate::load::selfcheck::is_rate(k.metric));
                let name = format!(
                    "{}::{}",
                    crate::text::printable(&suite.suite),
                    crate::text::printable(&gate.gate)
                );
                kept = kept
                    .iter()
                    .filter(|(k, _)| !rates.contains(k))
                    .map(|(k, v)| (k, *v))
                    .collect();
                if !rates.is_empty() {
                    eprintln!(
                        "warning: no baseline of {} for `{name}`: the client set {} ({}); rerun it where the client has room",
                        join(&rates),
                        if rates.len() == 1 { "it" } else { "them" },
                        crate::text::printable(
                            client
                                .limited
                                .as_deref()
                                .unwrap_or("its threads had no room")
                        )
                    );
                }
                if !times.is_empty() {
                    eprintln!(
                        "warning: the baseline of {} for `{name}` is off by what the client moved {} past its tolerance ({})",
                        join(&times),
                        if times.len() == 1 { "it" } else { "them" },
                        crate::text::printable(client.limited.as_deref().unwrap_or(""))
                    );
                }
            }
            if kept.is_empty() {
                continue;
            }
            let file = baseline::path(&dir, &suite.suite, &gate.file_parts());
            let entry = Entry {
                saved_unix: figures.finished_unix,
                servegate: env!("CARGO_PKG_VERSION").to_owned(),
                load: gate.load.clone(),
                repeats: gate.repeats,
                figures: kept,
                config: crate::load::fingerprint::kept(&suite.config),
            };
            baseline::write(&file, &suite.fingerprint, entry)?;
            written.push(file);
        }
    }
    if written.is_empty() {
        return Err(AcceptError::NoGate(path));
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
