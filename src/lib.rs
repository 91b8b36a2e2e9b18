//! servegate: a `cargo test`-style runner of declarative test suites for LLM
//! inference servers.
//!
//! A YAML suite names a target server, correctness probes and performance
//! gates; the [`harness`] turns each into a libtest trial. Correctness probes
//! run first; a performance gate never passes on a server that failed them.

pub mod bench;
pub mod check;
pub mod client;
pub mod exit;
pub mod files;
pub mod harness;
pub mod history;
pub mod init;
pub mod load;
pub mod media;
pub mod process;
pub mod random;
pub mod record;
pub mod report;
pub mod review;
pub mod secrets;
pub mod server;
pub mod sim;
pub mod stamp;
pub mod suite;
pub mod text;
pub mod units;

/// The `main` of a `harness = false` test (`examples/consumer` shows one in
/// a project of its own): the suites in `SERVEGATE_SUITES` or under
/// `<manifest_dir>/suites/` (engine- and GPU-specific subdirectories are
/// collected only when named), the target override from
/// `SERVEGATE_TARGET`, libtest's arguments from the command line; or,
/// started as a code probe's sandbox helper, that helper. Runs, their
/// reports and the run history go where `servegate run` puts them:
/// `SERVEGATE_OUT`, else the project's `target/servegate/`.
pub fn test_main(manifest_dir: &str) -> std::process::ExitCode {
    harness_main(manifest_dir, None)
}

/// [`test_main`], with runs, reports and the run history written under
/// `out_dir` unless `SERVEGATE_OUT` names another place: for a harness
/// whose runs are a project's own tests rather than its users' runs
/// (servegate's `tests/sglang_suite.rs` writes under Cargo's
/// `CARGO_TARGET_TMPDIR`, so that `cargo test` in a checkout leaves its
/// `target/servegate/`, and the history there, as it found them).
pub fn test_main_writing_to(
    manifest_dir: &str,
    out_dir: impl AsRef<std::path::Path>,
) -> std::process::ExitCode {
    let out_dir = std::env::var_os("SERVEGATE_OUT")
        .filter(|v| !v.is_empty())
        .map_or_else(|| out_dir.as_ref().to_path_buf(), std::path::PathBuf::from);
    harness_main(manifest_dir, Some(out_dir))
}

fn harness_main(manifest_dir: &str, out_dir: Option<std::path::PathBuf>) -> std::process::ExitCode {
    // A launched server is started through the running binary's re-exec
    // mode (`crate::process::tree`), and code probes re-execute it as their
    // sandbox's helper: here, the test binary's.
    if let Some(failed) = process::tree::exec_mode_if_asked() {
        return failed;
    }
    #[cfg(target_os = "linux")]
    if let Some(code) = check::sandbox::helper::main_if_asked() {
        return code;
    }
    let paths = match std::env::var_os(harness::SUITES_ENV) {
        Some(v) if !v.is_empty() => std::env::split_paths(&v).collect(),
        _ => vec![std::path::Path::new(manifest_dir).join("suites")],
    };
    let (client_threads, client_limited) = match harness::client_threads_from_env()
        .and_then(|n| harness::client_limited_from_env().map(|l| (n, l)))
    {
        Ok(both) => both,
        Err(e) => {
            eprintln!("error: {e}");
            return e.exit().into();
        }
    };
    let options = harness::RunOptions {
        target: std::env::var(harness::target::TARGET_ENV).ok(),
        client_threads,
        client_limited,
        out_dir,
        publish: Some(report::publish),
        recording_baselines: false,
        keep_runs: record::keep_runs_from_env(),
        // Cargo hands one filter to every test binary of the package: one
        // with no matching trial is normal here, not a typo.
        require_match: false,
        history: None,
        verbose: harness::verbose_from_env(),
        listeners: harness::Listeners::default(),
    };
    let outcome = harness::run(&paths, &options, libtest_mimic::Arguments::from_args());
    if outcome.interrupted {
        return exit::Exit::Interrupted.into();
    }
    outcome.conclusion.exit_code()
}
