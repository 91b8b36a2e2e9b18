//! The record of a harness run, collected from its suite runs (after every
//! trial at checkpoints, and at the end): outcomes, figures, the
//! configuration each suite was measured against.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::session::SuiteRun;
use crate::load::baseline;
use crate::record::{
    Diagnosed, FailureCause, FailureKind, GateRecord, RunInfo, RunRecord, SCHEMA, ServerRecord,
    SuiteRecord, TrialId, TrialOutcome, TrialRecord, now_unix,
};

/// The failed trials of the suite files that could not be loaded.
pub(super) fn invalid_suites(loaded: &[super::loading::Loaded]) -> Vec<TrialRecord> {
    loaded
        .iter()
        .filter_map(|l| match l {
            super::loading::Loaded::Failed(f) => Some(invalid_suite(f)),
            super::loading::Loaded::Suite(_) => None,
        })
        .collect()
}

/// The failed trial of a suite file that could not be loaded: at the line
/// of its first problem, its message every problem with its place.
fn invalid_suite(f: &crate::suite::LoadFailure) -> TrialRecord {
    TrialRecord {
        name: TrialId::load(&f.name).name(),
        id: TrialId::load(&f.name),
        outcome: TrialOutcome::Failed,
        kind: Some(FailureKind::Suite),
        duration_s: 0.0,
        file: f.path.display().to_string(),
        line: f.line.unwrap_or(1),
        points_at: f.line,
        message: Some(f.message.clone()),
        cause: (!f.problems.is_empty()).then(|| FailureCause::Diagnostics {
            problems: f.problems.iter().map(Diagnosed::of).collect(),
        }),
        exchange: None,
    }
}

/// Collects the record of a run so far; `complete` once it is over.
pub fn collect(info: &RunInfo, runs: &[Arc<SuiteRun>], complete: bool) -> RunRecord {
    RunRecord {
        schema: SCHEMA.to_owned(),
        run_id: info
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        started_unix: info.started_unix,
        finished_unix: now_unix(),
        complete,
        trials: runs.iter().flat_map(|r| r.outcomes()).collect(),
        servegate: env!("CARGO_PKG_VERSION").to_owned(),
        node: crate::history::node_name(),
        gpus: gpu_inventory(),
        hardware: None,
        suites: runs
            .iter()
            .filter_map(|run| {
                let target = run.target()?.as_ref().ok()?;
                Some(SuiteRecord {
                    suite: run.label.clone(),
                    variant: run.variant.as_ref().map(|v| v.name.clone()),
                    suite_commit: git_commit(&run.suite.file.path),
                    server: target.server.as_ref().map(|s| ServerRecord {
                        workers: target
                            .workers
                            .iter()
                            .map(|w| (w.name.clone(), server_record(&w.server)))
                            .collect(),
                        ..server_record(s)
                    }),
                    server_info: run.documents.body(crate::suite::ConfigSource::ServerInfo),
                    model_info: run.documents.body(crate::suite::ConfigSource::ModelInfo),
                    datasets: run.dataset_records(),
                    fingerprint: target.fingerprint.clone(),
                    config: target.config.clone(),
                    model: Some(target.model_id.clone()),
                    pinned_model: target.pinned_model.clone(),
                    model_unreported: !target.model_reported,
                    server_version: target.server_version.clone(),
                    baselines: Some(baseline::dir(&run.suite.file.root).display().to_string()),
                    target: target.description.clone(),
                    gates: run
                        .figures()
                        .into_iter()
                        .map(|f| GateRecord {
                            sweep: f.sweep,
                            gate: f.gate,
                            load: f.load,
                            repeats: f.repeats,
                            figures: f.figures.clone(),
                            samples: f
                                .figures
                                .keys()
                                .map(|k| (k, f.metrics.sample_size(k)))
                                .collect(),
                            token_sources: f
                                .metrics
                                .token_sources
                                .iter()
                                .map(|(k, v)| ((*k).to_owned(), *v))
                                .collect(),
                            client: Some(f.metrics.client.clone())
                                .filter(|c| !c.threads.is_empty()),
                            series: f.metrics.series,
                            thresholds: f.checks,
                            trends: Vec::new(),
                            probes_skipped: f.probes_skipped,
                        })
                        .collect(),
                })
            })
            .collect(),
        comparisons: super::compare::compare(runs),
    }
}

/// The commit of the checkout holding `file`, `+dirty` when the file has
/// changes not committed; asked of git once per file and run (the record is
/// written after every trial).
fn git_commit(file: &std::path::Path) -> Option<String> {
    type Commits = std::sync::Mutex<BTreeMap<PathBuf, Option<String>>>;
    static COMMITS: std::sync::OnceLock<Commits> = std::sync::OnceLock::new();
    let commits = COMMITS.get_or_init(Commits::default);
    if let Some(known) = commits.lock().ok()?.get(file) {
        return known.clone();
    }
    let found = ask_git(file);
    if let Ok(mut c) = commits.lock() {
        c.insert(file.to_path_buf(), found.clone());
    }
    found
}

fn ask_git(file: &std::path::Path) -> Option<String> {
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let commit = crate::process::command_output("git", &["rev-parse", "HEAD"], Some(dir))?;
    let name = file.file_name()?.to_str()?;
    // `status` refreshes the index of the checkout it reads, which may be
    // another's: read it without the optional lock (and the write).
    let dirty = crate::process::command_output(
        "git",
        &["--no-optional-locks", "status", "--porcelain", "--", name],
        Some(dir),
    )
    .is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("{commit}+dirty")
    } else {
        commit
    })
}

/// The GPUs `nvidia-smi` lists, once per process.
pub(super) fn gpu_inventory() -> Option<Vec<String>> {
    static GPUS: std::sync::OnceLock<Option<Vec<String>>> = std::sync::OnceLock::new();
    GPUS.get_or_init(|| {
        crate::process::command_output(
            "nvidia-smi",
            &[
                "--query-gpu=index,name,memory.total,driver_version",
                "--format=csv,noheader",
            ],
            None,
        )
        .map(|s| s.lines().map(str::to_owned).collect())
    })
    .clone()
}

/// The sweep level a gate is, with its pace at that level.
pub(super) fn sweep_point(g: &crate::suite::Gate) -> Option<crate::record::SweepPoint> {
    let (concurrency, rate) = match g.load.pace {
        crate::suite::Pace::Closed { concurrency } => (Some(concurrency), None),
        crate::suite::Pace::Open { rate, .. } => (None, Some(rate)),
    };
    let of = g.sweep.as_ref()?;
    Some(crate::record::SweepPoint {
        of: of.clone(),
        concurrency,
        rate,
    })
}

/// How a launched server was started, and its start-up (no workers).
fn server_record(s: &crate::server::Server) -> ServerRecord {
    ServerRecord {
        argv: s.argv.clone(),
        env: s.env_shown.iter().cloned().collect(),
        log: s.log_path.display().to_string(),
        timeline: serde_json::to_value(s.timeline()).unwrap_or_default(),
        workers: std::collections::BTreeMap::new(),
    }
}
