//! End-to-end runs of the `servegate` binary against the embedded simulator
//! (and `servegate sim` as an external server): exit codes, trial order,
//! failure messages and the printed target. One test binary, a module per
//! feature (tests/README.md says which); the helpers below are the ones
//! several modules share, those of every test binary are in tests/common/.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/golden.rs"]
mod golden;
#[path = "../common/postgres.rs"]
mod postgres;
use common::run::command;

mod adapters;
mod arrivals;
mod assertions;
mod baselines;
mod bench_client;
mod conversations;
mod datasets;
mod events;
mod gates;
mod history;
mod images;
mod init;
mod list_and_filter;
mod manual;
mod numerics;
mod reasoning;
mod reports;
mod run;
mod server_reports;
mod snapshots;
mod targets;

/// The figures of gate `name` of a run record's first suite.
fn gate_figures<'r>(record: &'r serde_json::Value, name: &str) -> &'r serde_json::Value {
    record["suites"][0]["gates"]
        .as_array()
        .and_then(|gates| gates.iter().find(|g| g["gate"] == name))
        .map_or(&serde_json::Value::Null, |g| &g["figures"])
}

/// The names of a run record's trials, in the order they ran.
fn trial_names(record: &serde_json::Value) -> Vec<&str> {
    record["trials"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect()
}

/// The one run directory servegate wrote under `out_dir`.
fn only_run(out_dir: &std::path::Path) -> std::path::PathBuf {
    std::fs::read_dir(out_dir.join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

/// `git ARGS` in `repo` with a committer of its own (none is configured
/// on a CI machine), which must succeed; its standard output, trimmed.
fn git_in(repo: &std::path::Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// Whether trial `a` ran before trial `b` in the run whose output is
/// `out`, by its run record (trials in the order they ran). Not by where
/// libtest printed their lines: it prints a trial's line when its result
/// reaches it, and on a loaded machine a quick next trial's can come first.
fn ran_before(out: &str, a: &str, b: &str) -> bool {
    let record = record_of(out);
    let order = crate::trial_names(&record);
    let at = |n: &str| {
        order
            .iter()
            .position(|o| *o == n)
            .unwrap_or_else(|| panic!("`{n}` not in the run record: {order:?}"))
    };
    at(a) < at(b)
}

/// The run record of the run whose output is `out`.
fn record_of(out: &str) -> serde_json::Value {
    let path = out
        .lines()
        .find_map(|l| l.strip_prefix("servegate: run record written to "))
        .unwrap_or_else(|| panic!("no run record in:\n{out}"));
    serde_json::from_str(&std::fs::read_to_string(path.trim()).unwrap()).unwrap()
}

/// Where `needle` is in `out`; a missing one fails the test.
fn position(out: &str, needle: &str) -> usize {
    out.find(needle)
        .unwrap_or_else(|| panic!("`{needle}` not in:\n{out}"))
}

/// A process stopped when dropped, a failed assertion included (left
/// running, it would hold the test's output open).
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `servegate sim` in a process of its own, standing in for a real
/// server: the process and its URL.
fn external_sim(profile: &str) -> (Stopped, String) {
    external_sim_with(profile, &[])
}

/// [`external_sim`] with more `servegate sim` arguments.
fn external_sim_with(profile: &str, args: &[&str]) -> (Stopped, String) {
    use std::io::{BufRead, BufReader};
    let mut sim = command(&[], &[])
        .args(["sim", "--port", "0", "--profile", profile])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(sim.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_owned();
    (Stopped(sim), url)
}
