//! The figures of the latest run, written after every run to
//! `target/servegate/latest/figures.json`, so that `servegate baseline
//! accept` can turn a reviewed run into baselines without running it again.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::session::SuiteRun;
use crate::load::baseline::{self, Entry};

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
}

/// The figures of one suite against one configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteRecord {
    /// The suite's name.
    pub suite: String,
    /// The configuration measured (API, served model, server version).
    pub fingerprint: String,
    /// The target as printed.
    pub target: String,
    /// Gates that measured something.
    pub gates: Vec<GateRecord>,
}

/// The latest run's figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Figures {
    /// Format version.
    pub schema: u32,
    /// Seconds since the Unix epoch at the end of the run.
    pub finished_unix: u64,
    /// Suites whose target was reached.
    pub suites: Vec<SuiteRecord>,
}

/// Where the latest figures live: under `CARGO_TARGET_DIR` or `target/`.
pub fn latest_path() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| PathBuf::from("target"), PathBuf::from)
        .join("servegate/latest/figures.json")
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Collects the figures of a run's suites.
pub fn collect(runs: &[Arc<SuiteRun>]) -> Figures {
    Figures {
        schema: 1,
        finished_unix: now_unix(),
        suites: runs
            .iter()
            .filter_map(|run| {
                let target = run.target.as_ref().ok()?;
                Some(SuiteRecord {
                    suite: run.suite.name.clone(),
                    fingerprint: target.fingerprint.clone(),
                    target: target.description.clone(),
                    gates: run
                        .figures()
                        .into_iter()
                        .map(|f| GateRecord {
                            gate: f.gate,
                            load: f.load,
                            repeats: f.repeats,
                            figures: f.figures,
                        })
                        .collect(),
                })
            })
            .collect(),
    }
}

/// Writes the figures to [`latest_path`].
pub fn write(figures: &Figures) -> Result<PathBuf, String> {
    let path = latest_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("failed to create {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(figures).map_err(|e| e.to_string())?;
    std::fs::write(&path, text + "\n")
        .map_err(|e| format!("failed to write {}: {e}", path.display()))?;
    Ok(path)
}

/// Turns the latest run's figures into baselines; returns the files written.
pub fn accept() -> Result<Vec<PathBuf>, String> {
    let path = latest_path();
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "no figures of a previous run at {} ({e}): run the suites first",
            path.display()
        )
    })?;
    let figures: Figures = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a figures file: {e}", path.display()))?;
    let dir = baseline::dir();
    let mut written = Vec::new();
    for suite in &figures.suites {
        for gate in &suite.gates {
            let file = baseline::path(&dir, &suite.suite, &gate.gate);
            let entry = Entry {
                saved_unix: figures.finished_unix,
                servegate: env!("CARGO_PKG_VERSION").to_owned(),
                load: gate.load.clone(),
                repeats: gate.repeats,
                figures: gate.figures.clone(),
            };
            baseline::write(&file, &suite.fingerprint, entry)?;
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
