//! A whole run on the embedded simulator: the printed target, trial order
//! (from the run record), libtest's stdout apart from servegate's stderr,
//! failing probes and gates, a suite that does not load, a target that
//! cannot be reached, and the figures of a failed threshold.

use crate::common::run::{run_expecting, streams};
use crate::common::verdicts::{assert_has, failure_of, verdict};
use crate::{golden::golden, position, ran_before};
use std::net::TcpListener;

/// Each line of `out` as JSON; a line that is not fails the test.
fn json_lines(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("`{l}` is not JSON: {e}")))
        .collect()
}

#[test]
fn shipped_suite_passes_on_the_simulator_with_figures() {
    let out = run_expecting(&["run", "suites/sglang.yaml"], 0);
    // The target is printed before any trial and names the simulator.
    let target = position(&out, "servegate: suite `sglang` → SIMULATOR (embedded");
    let first_probe = position(&out, "test sglang::correctness::arithmetic");
    let second_gate = position(&out, "test sglang::performance::concurrency_8");
    assert!(target < first_probe);
    for (a, b) in [
        ("correctness::arithmetic", "correctness::is_prime"),
        ("correctness::is_prime", "performance::single_stream_decode"),
        (
            "performance::single_stream_decode",
            "performance::concurrency_8",
        ),
        // Each probe's snapshot is its own trial, right after the probe.
        ("correctness::arithmetic", "snapshot::arithmetic"),
        ("snapshot::arithmetic", "correctness::is_prime"),
    ] {
        assert!(
            ran_before(&out, &format!("sglang::{a}"), &format!("sglang::{b}")),
            "{a} did not run before {b}:\n{out}"
        );
    }
    assert_has(&out, &["served model \"sim-sglang\"", "8 passed; 0 failed"]);
    // Measured figures are shown for a green run, with their verdicts.
    let figures = position(&out, "servegate: figures measured in this run");
    assert!(figures > second_gate);
    assert_has(
        &out,
        &[
            "pass decode_tok_s.mean >= 12.5 tok/s (measured",
            "counts from server usage ×5",
            "decode_tok_s   mean",
        ],
    );
    // No progress bar when stderr is not a terminal.
    assert!(!out.contains('\r') && !out.contains('\u{1b}'), "{out:?}");
}

/// stdout is libtest's alone, so its machine-readable formats stay
/// parseable: every line of `--format json` is a JSON event, `--format
/// terse` holds only its dots and counts; servegate's own lines (the
/// target, the figures, where the record went) are on stderr.
#[test]
fn stdout_is_libtests_alone_and_parses_as_json() {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let o = streams(&["run", "suites/sglang.yaml", "--", "--format", "json"]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let events = json_lines(&out);
    assert_eq!(events[0]["event"], "started", "{out}");
    assert_eq!(events[0]["test_count"], 8, "{out}");
    let passed: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "test" && e["event"] == "ok")
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(passed.len(), 8, "{out}");
    assert!(
        passed.contains(&"sglang::performance::concurrency_8"),
        "{out}"
    );
    let last = events.last().unwrap();
    assert_eq!((&last["event"], &last["passed"]), (&"ok".into(), &8.into()));
    assert_has(
        &err,
        &[
            "servegate: suite `sglang` → SIMULATOR (embedded",
            "servegate: figures measured in this run",
            "pass decode_tok_s.mean >= 12.5 tok/s",
            "servegate: run record written to ",
        ],
    );
    // A failure is an event too, its message inside it.
    let o = streams(&[
        "run",
        "tests/suites/wrong_arithmetic.yaml",
        "--",
        "--format=json",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let failed: Vec<serde_json::Value> = json_lines(&out)
        .into_iter()
        .filter(|e| e["event"] == "failed" && e["type"] == "test")
        .collect();
    assert_eq!(failed.len(), 2, "{out}");
    assert!(
        failed[0]["stdout"]
            .as_str()
            .is_some_and(|m| m.contains("--> tests/suites/wrong_arithmetic.yaml:13:9")),
        "{out}"
    );
    // Terse: dots and counts.
    let o = streams(&[
        "run",
        "suites/sglang.yaml",
        "--",
        "--format",
        "terse",
        "correctness",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    for line in out.lines().filter(|l| !l.is_empty()) {
        assert!(
            line == "running 3 tests"
                || line.chars().all(|c| c == '.')
                || line.starts_with("test result: ok. 3 passed; 0 failed;"),
            "`{line}` in:\n{out}"
        );
    }
    assert!(out.contains("\n...\n"), "{out}");
}

#[test]
fn wrong_answer_fails_its_probe_and_gates_performance() {
    let out = run_expecting(&["run", "tests/suites/wrong_arithmetic.yaml"], 1);
    assert_eq!(
        verdict(&out, "wrong::correctness::arithmetic"),
        "FAILED",
        "{out}"
    );
    assert_eq!(verdict(&out, "wrong::correctness::is_prime"), "ok", "{out}");
    assert_eq!(
        verdict(&out, "wrong::performance::decode"),
        "FAILED",
        "{out}"
    );
    let probe = failure_of(&out, "wrong::correctness::arithmetic");
    // Where, what was expected, what was sent and what came back.
    assert_has(
        &probe,
        &[
            "error: assertion failed: expected content matches regex `\\b4\\b`",
            "--> tests/suites/wrong_arithmetic.yaml:13:9",
            "13 |       - regex: '\\b4\\b'",
            "sent:     POST http://127.0.0.1:",
            "\"content\":\"What is 2+2? Answer with just the number.\"",
            "content:   \"5\"",
            "1 completion token (server usage), finish_reason stop",
        ],
    );
    let gate = failure_of(&out, "wrong::performance::decode");
    assert!(
        gate.starts_with("gated: correctness probe arithmetic failed"),
        "{gate}"
    );
    assert!(gate.contains("wrong::correctness::arithmetic"), "{gate}");
    assert!(out.contains("(no performance gate measured)"), "{out}");
}

#[test]
fn bad_suite_becomes_one_failing_load_trial() {
    let out = run_expecting(&["run", "tests/suites/bad/typos.yaml"], 2);
    assert_eq!(verdict(&out, "typos::load"), "FAILED", "{out}");
    // The golden file keeps its name from before tests/cli/ had modules
    // (cli__, not cli__run__): docs/src/failure-messages.md includes it.
    insta::with_settings!({ prepend_module_to_snapshot => false }, {
        golden!("cli__typos_load_trial", failure_of(&out, "typos::load"));
    });
}

#[test]
fn unreachable_target_fails_every_trial_clearly() {
    // A port that was free a moment ago: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let out = run_expecting(&["run", "suites/sglang.yaml", "--target", &url], 3);
    assert_has(
        &out,
        &[
            &format!(
                "servegate: suite `sglang` → target FAILED: target {url} is unreachable: could not connect"
            ),
            "0 passed; 8 failed",
        ],
    );
    for name in [
        "sglang::correctness::arithmetic",
        "sglang::performance::concurrency_8",
    ] {
        let f = failure_of(&out, name);
        assert_has(&f, &["is unreachable", "every trial of it fails"]);
    }
}

#[test]
fn failed_thresholds_show_value_bound_and_sample_size() {
    let out = run_expecting(
        &[
            "run",
            "tests/suites/too_slow.yaml",
            "tests/suites/unmeasurable.yaml",
        ],
        1,
    );
    let slow = failure_of(&out, "too_slow::performance::decode");
    assert!(
        slow.starts_with(
            "error: threshold failed: ttft.p50 <= 1us\n --> tests/suites/too_slow.yaml:9:7"
        ),
        "{slow}"
    );
    assert_has(
        &slow,
        &[
            "measured: ttft.p50 = ",
            "bound:    ttft.p50 <= 1us",
            "samples:  4 requests",
        ],
    );
    assert!(
        !slow.contains("ttft.p99"),
        "a passing threshold is not reported as failed:\n{slow}"
    );
    // Every request timed out: the gate says it could not measure, and why.
    let none = failure_of(&out, "unmeasurable::performance::decode");
    assert!(
        none.starts_with("error: could not measure: all 3 requests failed"),
        "{none}"
    );
    assert_has(
        &none,
        &[
            "errors:   3 (timeout ×3)",
            "request exceeded the total deadline (40.00ms)",
            "errors == 0 (implicit",
        ],
    );
}

/// The output directory is the suite's project's: `target/servegate/` in a
/// Cargo project, as always; `.servegate/` (which git is told to ignore)
/// in any other, such as a pip user's Python repository, where no
/// `target/` is made.
#[test]
fn output_goes_to_target_in_a_cargo_project_and_to_dot_servegate_elsewhere() {
    let root = std::env::temp_dir().join(format!("servegate-outdir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let suite = "suite: here\ncorrectness:\n  - name: q\n    prompt: \"2+2?\"\n    expect: [{regex: \".\"}]\n";
    for (project, cargo) in [("python", false), ("rust", true)] {
        let dir = root.join(project);
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::create_dir_all(dir.join("suites")).unwrap();
        std::fs::write(dir.join("suites/here.yaml"), suite).unwrap();
        if cargo {
            std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
        }
        // Run from elsewhere: the project is the suite's, not the
        // working directory's.
        let mut cmd = crate::common::run::command(&["run"], &[]);
        cmd.arg(dir.join("suites/here.yaml"))
            .current_dir(&root)
            .env_remove("SERVEGATE_OUT")
            .env_remove("CARGO_TARGET_DIR");
        let (code, out) = crate::common::run::merged(cmd);
        assert_eq!(code, Some(0), "{out}");
        let (kept, absent) = if cargo {
            (dir.join("target/servegate"), dir.join(".servegate"))
        } else {
            (dir.join(".servegate"), dir.join("target"))
        };
        assert!(
            kept.join("latest/report.json").is_file(),
            "{project}: {out}"
        );
        assert!(!absent.exists(), "{project}: {} was made", absent.display());
        assert_eq!(
            kept.join(".gitignore").is_file(),
            !cargo,
            "{project}: a .gitignore only in .servegate/ (Cargo ignores target/ itself)"
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// The sandbox's line names its layers in short; `--verbose`, or
/// `SERVEGATE_VERBOSE` as a flag's variable is written (`1`, `true`, …),
/// names every part. `0` and an empty value leave it short, and none of
/// these is a usage error.
#[test]
fn the_sandbox_line_is_short_unless_verbose() {
    let run = |vars: &[(&str, &str)], extra: &[&str]| {
        let mut cmd = crate::common::run::command(&["run", "suites/sglang.yaml"], &[]);
        cmd.args(extra)
            .args(["--", "--exact", "sglang::correctness::is_prime"])
            .env_remove("SERVEGATE_VERBOSE")
            .envs(vars.iter().copied());
        let (code, out) = crate::common::run::merged(cmd);
        assert_eq!(code, Some(0), "{vars:?} {extra:?}: {out}");
        out.lines()
            .find(|l| l.starts_with("servegate: sandbox: "))
            .unwrap_or_else(|| panic!("no sandbox line: {out}"))
            .to_owned()
    };
    for short in [
        run(&[], &[]),
        run(&[("SERVEGATE_VERBOSE", "0")], &[]),
        run(&[("SERVEGATE_VERBOSE", "")], &[]),
    ] {
        assert!(
            short.ends_with("(--verbose: each part, and why)"),
            "{short}"
        );
        assert!(short.len() < 200 && !short.contains("rlimits("), "{short}");
    }
    for verbose in [
        run(&[("SERVEGATE_VERBOSE", "1")], &[]),
        run(&[], &["--verbose"]),
    ] {
        assert!(!verbose.contains("--verbose"), "{verbose}");
        assert!(
            verbose.contains("rlimits(") || verbose.contains("no layer"),
            "each layer with its parts: {verbose}"
        );
    }
}

/// `--help` never shows the value of `SERVEGATE_HISTORY`, which may be a
/// PostgreSQL URL with a password in it.
#[test]
fn help_never_shows_the_historys_password() {
    for args in [&["run", "--help"][..], &["history", "--help"][..]] {
        let out = crate::common::run::command(args, &[])
            .env(
                "SERVEGATE_HISTORY",
                "postgres://u:hunter2@db.example/servegate",
            )
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("SERVEGATE_HISTORY"), "{text}");
        assert!(!text.contains("hunter2"), "{args:?}: {text}");
    }
}

/// A run reads the suite's git state (its commit, and `+dirty`) without
/// writing the checkout's index: `git status` refreshes a stale index
/// under an optional lock, and the suite's checkout may be another's,
/// busy with its own git (the index was rewritten before
/// `--no-optional-locks`).
#[test]
fn a_run_leaves_the_suites_git_index_alone() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| crate::git_in(dir.path(), args);
    git(&["init", "-q"]);
    let suite = dir.path().join("suites/locks.yaml");
    std::fs::create_dir_all(suite.parent().unwrap()).unwrap();
    std::fs::write(
        &suite,
        "suite: locks\ntarget: { base_url: sim }\ncorrectness:\n  - name: p\n    prompt: \"Hi\"\n    expect: [{ min_chars: 1 }]\n",
    )
    .unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "suite"]);
    // The file's times change, its bytes do not: the index is stale.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&suite)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let index = dir.path().join(".git/index");
    let before = std::fs::metadata(&index).unwrap().modified().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let out = run_expecting(
        &[
            "run",
            suite.to_str().unwrap(),
            "--out-dir",
            out_dir.path().to_str().unwrap(),
        ],
        0,
    );
    assert_has(&out, &["1 passed"]);
    let after = std::fs::metadata(&index).unwrap().modified().unwrap();
    assert_eq!(before, after, "the run rewrote the suite's git index");
    // The commit was read, and the file is not dirty.
    let record = std::fs::read_to_string(out_dir.path().join("latest/report.json")).unwrap();
    assert!(!record.contains("+dirty"), "{record}");
}
