//! `bench-client --history`: each row's figures kept in the run history,
//! one run per bench, under the commit of the servegate measured, and set
//! beside the newest run of another commit on the same machine — so a
//! change that makes the client dearer or less precise shows in the
//! project's own history before a user meets it.
//!
//! A series is `bench-client` / the row (`streams=256 threads=1
//! itl=10ms`, with `pack=` and `contention=` where set) / the figure, on
//! this machine's CPUs; the options that change the figures (tokens, the
//! window, the simulator's TTFT, the CPUs) are the run's configuration
//! (its fingerprint): only a run with the same one is compared.

use std::fmt::Write as _;

use serde_json::Value;

use super::{BenchOptions, Contention};
use crate::history::{
    FigureKey, History, Location, ModelIdentity, PointRow, RunRow, SeriesKey, node_name,
};
use crate::suite::metric::format_stored;
use crate::units::{format_secs, format_unix};

/// The suite label of bench rows in the history.
pub const SUITE: &str = "bench-client";

/// The model of bench rows: what answered.
const MODEL: &str = "stamped simulator";

/// A figure kept of every row: its name (a metric and its statistic),
/// where the row's JSON has it, its unit, and whether lower is better.
struct Kept {
    metric: &'static str,
    stat: Option<&'static str>,
    path: &'static [&'static str],
    unit: &'static str,
    lower_better: bool,
}

const KEPT: [Kept; 5] = [
    Kept {
        metric: "cpu_per_token",
        stat: None,
        path: &["cpu_per_token_s"],
        unit: "s",
        lower_better: true,
    },
    Kept {
        metric: "tokens_per_s",
        stat: None,
        path: &["tokens_per_s"],
        unit: "tok/s",
        lower_better: false,
    },
    Kept {
        metric: "ttft_error",
        stat: Some("p99"),
        path: &["ttft", "err_p99_s"],
        unit: "s",
        lower_better: true,
    },
    Kept {
        metric: "ttft_client_error",
        stat: Some("p99"),
        path: &["ttft_outside_p99_s"],
        unit: "s",
        lower_better: true,
    },
    Kept {
        metric: "itl_error",
        stat: Some("p99"),
        path: &["itl", "err_p99_s"],
        unit: "s",
        lower_better: true,
    },
];

impl Kept {
    fn key(&self) -> FigureKey {
        FigureKey {
            metric: self.metric.to_owned(),
            stat: self.stat.map(str::to_owned),
        }
    }

    fn value(&self, row: &Value) -> Option<f64> {
        self.path
            .iter()
            .try_fold(row, |v, k| v.get(k))?
            .as_f64()
            .filter(|v| v.is_finite())
    }

    fn shown(&self, v: f64) -> String {
        format_stored(self.metric, self.unit, v)
    }
}

/// Where to keep a bench, and under which commit.
#[derive(Debug, Clone)]
pub struct Keeping {
    /// The history.
    pub location: Location,
    /// The commit of the servegate measured (`--commit`, else the working
    /// directory's checkout, `+dirty` with changes).
    pub commit: String,
}

/// The commit of the working directory's checkout, `+dirty` when it has
/// changes, where that checkout is servegate's own (its `Cargo.toml`
/// names the package `servegate`): the build measured is then this
/// tree's. `None` elsewhere: another project's commit is not the
/// servegate measured.
pub fn checkout_commit() -> Option<String> {
    let git = |args: &[&str]| crate::process::command_output("git", args, None);
    let top = git(&["rev-parse", "--show-toplevel"])?;
    let manifest = std::fs::read_to_string(std::path::Path::new(&top).join("Cargo.toml")).ok()?;
    if !manifest.lines().any(|l| {
        l.split_once('=')
            .is_some_and(|(k, v)| k.trim() == "name" && v.trim() == "\"servegate\"")
    }) {
        return None;
    }
    let commit = git(&["rev-parse", "HEAD"])?;
    let dirty = git(&[
        "--no-optional-locks",
        "status",
        "--porcelain",
        "--untracked-files=no",
    ])
    .is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("{commit}+dirty")
    } else {
        commit
    })
}

/// The row's series name: what it measured.
fn cell(row: &Value, opts: &BenchOptions) -> String {
    let itl = row
        .get("itl_s")
        .and_then(Value::as_f64)
        .map_or_else(|| "?".into(), format_secs);
    let mut name = format!(
        "streams={} threads={} itl={itl}",
        row.get("streams").and_then(Value::as_u64).unwrap_or(0),
        row.get("threads").and_then(Value::as_u64).unwrap_or(0),
    );
    if opts.pack > 1 {
        let _ = write!(name, " pack={}", opts.pack);
    }
    if opts.contention != Contention::None {
        let _ = write!(
            name,
            " contention={}",
            format!("{:?}", opts.contention).to_lowercase()
        );
    }
    name
}

/// The options that change a row's figures, as its configuration.
fn fingerprint(opts: &BenchOptions, cpus: usize) -> String {
    format!(
        "tokens={} duration={} ttft={} warmup={} cpus={cpus} build={}",
        opts.tokens,
        format_secs(opts.duration.as_secs_f64()),
        opts.ttft
            .map_or_else(|| "default".into(), |t| format_secs(t.as_secs_f64())),
        opts.warmup
            .map_or_else(|| "streams".into(), |w| w.to_string()),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
    )
}

/// This machine's CPUs in short: `2 x AMD EPYC 7B13`, as the history's
/// hardware (a bench's series is its machine's).
fn cpus_named(cpus: usize) -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines().find_map(|l| {
                l.strip_prefix("model name")?
                    .split_once(':')
                    .map(|(_, m)| m.trim().to_owned())
            })
        })
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "CPU".to_owned());
    format!("{cpus} x {}", crate::text::printable(&model))
}

/// Writes the rows into the opened `history` and says what was kept and how each
/// figure compares with the newest run of another commit on this machine.
pub fn keep(
    history: &mut History,
    keeping: &Keeping,
    opts: &BenchOptions,
    (rows, cpus, started_unix): (&[Value], usize, i64),
) -> Result<String, String> {
    let node = node_name();
    let run_id = format!("bench-client-{started_unix}-{}", std::process::id());
    let hardware = cpus_named(cpus);
    let run = RunRow {
        run_uid: format!("{node}/{run_id}"),
        run_id,
        node: node.clone(),
        started_unix,
        finished_unix: i64::try_from(crate::record::now_unix()).unwrap_or(i64::MAX),
        servegate: env!("CARGO_PKG_VERSION").to_owned(),
        gpus: String::new(),
        hardware: hardware.clone(),
        source: SUITE.to_owned(),
        configs: Vec::new(),
    };
    let fingerprint = fingerprint(opts, cpus);
    let mut points = Vec::new();
    for row in rows {
        let limited = row.get("limited").and_then(Value::as_bool).unwrap_or(false);
        let errors = row.get("errors").and_then(Value::as_u64).unwrap_or(0);
        for kept in &KEPT {
            let Some(value) = kept.value(row) else {
                continue;
            };
            points.push(PointRow {
                suite: SUITE.to_owned(),
                variant: None,
                gate: cell(row, opts),
                key: kept.key(),
                value,
                unit: kept.unit.to_owned(),
                repeats: 1,
                fingerprint: fingerprint.clone(),
                model: MODEL.to_owned(),
                served_model: MODEL.to_owned(),
                model_pinned: true,
                server_version: None,
                suite_commit: Some(keeping.commit.clone()),
                gate_passed: errors == 0,
                client_limited: limited,
                load: format!(
                    "closed loop, {} streams",
                    row.get("streams").and_then(Value::as_u64).unwrap_or(0)
                ),
            });
        }
    }
    history.write(&run, &points).map_err(|e| e.to_string())?;
    let mut out = format!(
        "\nhistory: {} figure(s) of {} (commit {}) recorded in {}\n",
        points.len(),
        run.run_uid,
        short(&keeping.commit),
        keeping.location.describe()
    );
    // Every figure's earlier points of this machine and these options
    // from another commit; the reference is one run, the newest of them,
    // and each figure is compared with that run's or not at all.
    let mut earlier = Vec::new();
    for p in &points {
        let series = SeriesKey {
            key: p.key.to_string(),
            ..SeriesKey::of_gate(
                SUITE,
                &p.gate,
                &ModelIdentity {
                    pinned: Some(MODEL),
                    served: MODEL,
                    reported: true,
                },
                &hardware,
            )
        };
        let mut found = history
            .points(&series, usize::MAX)
            .map_err(|e| e.to_string())?;
        found.retain(|e| {
            e.run_uid != run.run_uid
                && e.node == node
                && e.fingerprint == fingerprint
                && e.suite_commit.as_deref() != Some(keeping.commit.as_str())
        });
        earlier.push(found);
    }
    let Some(reference) = earlier
        .iter()
        .flatten()
        .max_by_key(|e| (e.finished_unix, e.run_uid.clone()))
        .map(|e| {
            (
                e.run_uid.clone(),
                e.suite_commit.clone().unwrap_or_default(),
                e.finished_unix,
            )
        })
    else {
        out.push_str(
            "history: no earlier run of another commit with these options on this machine: nothing to compare with yet\n",
        );
        return Ok(out);
    };
    let _ = writeln!(
        out,
        "history: against the newest run of another commit on this machine (commit {}, {}, {}); runs minutes apart differ by the machine's noise as well: scripts/bench-client-ab.sh alternates two builds for a decision",
        short(&reference.1),
        crate::text::printable(&reference.0),
        format_unix(reference.2)
    );
    let _ = writeln!(
        out,
        "{:<40} {:<22} {:>12} {:>12} {:>8}",
        "row", "figure", "previous", "this", "ratio"
    );
    for (p, found) in points.iter().zip(&earlier) {
        let Some(before) = found.iter().find(|e| e.run_uid == reference.0) else {
            let _ = writeln!(out, "{:<40} {:<22} {:>12}", p.gate, p.key.to_string(), "-");
            continue;
        };
        let kept = KEPT
            .iter()
            .find(|k| k.key() == p.key)
            .expect("a kept figure");
        let ratio = p.value / before.value;
        let better = if kept.lower_better {
            ratio < 1.0
        } else {
            ratio > 1.0
        };
        let _ = writeln!(
            out,
            "{:<40} {:<22} {:>12} {:>12} {:>8}{}{}",
            p.gate,
            p.key.to_string(),
            kept.shown(before.value),
            kept.shown(p.value),
            if ratio.is_finite() {
                format!("{ratio:.2}×")
            } else {
                "-".into()
            },
            if ratio.is_finite() && (ratio - 1.0).abs() >= 0.005 {
                if better { " better" } else { " worse" }
            } else {
                ""
            },
            if p.client_limited || before.client_limited {
                "  (LIMITED)"
            } else {
                ""
            }
        );
    }
    Ok(out)
}

/// Whether `--commit` names a commit as the history keeps it: letters,
/// digits and `._+/-`, at most 80 (`HEAD` or a branch name would be
/// stored as it is, and never meet a run of the same commit).
pub fn commit_name(text: &str) -> Result<String, String> {
    if text.len() <= 80
        && text.starts_with(|c: char| c.is_ascii_alphanumeric())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+/-".contains(c))
    {
        Ok(text.to_owned())
    } else {
        Err(
            "a commit: its hash (a letter or digit, then letters, digits and `._+/-`, at most 80)"
                .to_owned(),
        )
    }
}

/// A commit as people read it: 12 hex digits and any `+dirty`.
fn short(commit: &str) -> String {
    let commit = crate::text::printable(commit).to_string();
    let (hash, rest) = commit
        .split_once('+')
        .map_or((commit.as_str(), ""), |(h, r)| (h, r));
    let cut: String = hash.chars().take(12).collect();
    if rest.is_empty() {
        cut
    } else {
        format!("{cut}+{rest}")
    }
}
