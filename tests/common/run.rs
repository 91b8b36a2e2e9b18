//! Running the `servegate` binary: one command line with the variables
//! that would change a run removed, and what the run printed.

use std::io::Read as _;
use std::process::{Command, Output};

/// The binary with `args`, in the repository's root, without the variables
/// that would change what it runs against or how (a target, a kept run,
/// client threads), plus `env`.
pub fn command(args: &[&str], env: &[(&str, &std::path::Path)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_servegate"));
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("SERVEGATE_TARGET")
        .env_remove("SGLANG_URL")
        .env_remove("SERVEGATE_KEEP_RUNS")
        .env_remove("SERVEGATE_CLIENT_THREADS")
        .env_remove("SERVEGATE_CLIENT_LIMITED")
        .env_remove("SERVEGATE_PIN_CLIENT")
        .env_remove("SERVEGATE_TEST_UNSET_VARIABLE")
        .env_remove("SERVEGATE_HISTORY")
        .env("CARGO_TARGET_DIR", test_out())
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())));
    cmd
}

/// Where a test's runs go unless it names a place: servegate writes a
/// Cargo project's runs under `$CARGO_TARGET_DIR/servegate/`, and this is
/// a directory of this test process's own under Cargo's scratch space for
/// integration tests (`target/tmp/`) — never the checkout's
/// `target/servegate/`, the user's runs and run history (a test binary's
/// fixture series there pushed the user's own out of the history). A test
/// that sets `SERVEGATE_OUT`, `--out-dir` or its own `CARGO_TARGET_DIR`
/// chooses for itself.
pub fn test_out() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("servegate-out-{}", std::process::id()))
}

/// A command's standard output and error through one pipe: servegate's
/// own lines go to stderr and libtest's to stdout, and a test that checks
/// their order reads both as they were printed. Runs `cmd` (taken whole,
/// so that no copy of the pipe's write end stays open here) and returns
/// its exit code and everything it printed.
pub fn merged(mut cmd: Command) -> (Option<i32>, String) {
    let (mut reader, writer) = std::io::pipe().expect("a pipe");
    cmd.stdout(writer.try_clone().expect("a second write end"))
        .stderr(writer);
    let mut child = cmd.spawn().expect("the command starts");
    drop(cmd);
    let mut out = Vec::new();
    reader.read_to_end(&mut out).expect("its output reads");
    let status = child.wait().expect("it ends");
    (status.code(), String::from_utf8_lossy(&out).into_owned())
}

/// What a finished `servegate` printed, both streams in order, and its
/// exit code.
pub struct Run {
    pub code: Option<i32>,
    pub out: String,
}

/// Runs the binary with `args` ([`command`]); what it printed.
pub fn servegate(args: &[&str]) -> Run {
    servegate_with(args, &[])
}

/// [`servegate`] with these variables added.
pub fn servegate_with(args: &[&str], env: &[(&str, &std::path::Path)]) -> Run {
    let (code, out) = merged(command(args, env));
    Run { code, out }
}

/// `servegate import bench-serving FILE --out-dir OUT` with `more`
/// arguments, which must succeed; what it printed.
pub fn import_result(file: &str, out: &std::path::Path, more: &[&str]) -> String {
    let mut args = vec![
        "import",
        "bench-serving",
        file,
        "--out-dir",
        out.to_str().expect("a UTF-8 path"),
    ];
    args.extend_from_slice(more);
    run_expecting(&args, 0)
}

/// Runs the binary and checks its exit code; what it printed.
pub fn run_expecting(args: &[&str], code: i32) -> String {
    let o = servegate(args);
    assert_eq!(o.code, Some(code), "{}", o.out);
    o.out
}

/// The binary's standard output alone (libtest's, or a report), and its
/// standard error.
pub fn streams(args: &[&str]) -> Output {
    command(args, &[]).output().expect("servegate runs")
}

/// The living processes whose command line holds `marker`, as
/// `PID: command line` (a zombie's command line is empty).
pub fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(marker) {
                found.push(format!(
                    "{}: {cmdline}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    found
}

/// `servegate run SUITE` with its runs in a directory of its own; what it
/// printed and the run record it wrote.
pub fn run_recorded(suite: &str) -> (Run, serde_json::Value) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let run = servegate(&[
        "run",
        suite,
        "--out-dir",
        dir.path().to_str().expect("UTF-8"),
    ]);
    let text = std::fs::read_to_string(dir.path().join("latest/report.json"))
        .unwrap_or_else(|e| panic!("no run record ({e}):\n{}", run.out));
    let record = serde_json::from_str(&text).expect("the record is JSON");
    (run, record)
}

/// Trial `name` of a run record.
pub fn trial_of<'a>(record: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    record["trials"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("no trial {name} in {record}"))
}
