//! Naming trials without running them and choosing which run: `list`,
//! libtest filters (`--exact`, a filter that matches nothing), and a
//! filtered gate that still runs its probes first.

use crate::common::run::{run_expecting, streams};
use crate::common::verdicts::{assert_has, failure_of};
use crate::position;

#[test]
fn a_filtered_performance_gate_still_runs_the_probes_first() {
    let out = run_expecting(
        &[
            "run",
            "tests/suites/wrong_arithmetic.yaml",
            "--",
            "performance",
        ],
        1,
    );
    assert_has(
        &out,
        &[
            "its 2 correctness probe(s) run first as prerequisites",
            "running 1 test",
        ],
    );
    assert!(!out.contains("test wrong::correctness::"), "{out}");
    let gate = failure_of(&out, "wrong::performance::decode");
    assert!(
        gate.starts_with("gated: correctness probe arithmetic failed"),
        "{gate}"
    );
    // The probe's trial was filtered out: the gate shows why it failed.
    assert_has(
        &gate,
        &[
            "\n  wrong::correctness::arithmetic failed with:\n    error: assertion failed: expected content matches regex `\\b4\\b`\n      --> tests/suites/wrong_arithmetic.yaml:13:9\n",
            "    received: 1 completion token (server usage), finish_reason stop",
            "      content:   \"5\"",
        ],
    );
    assert!(
        !gate.contains("sent:"),
        "only the gist of the probe's failure:\n{gate}"
    );
}

#[test]
fn exact_filter_runs_one_trial() {
    let out = run_expecting(
        &[
            "run",
            "suites/sglang.yaml",
            "--",
            "--exact",
            "sglang::correctness::arithmetic",
        ],
        0,
    );
    assert_has(
        &out,
        &[
            "running 1 test",
            "1 passed; 0 failed; 0 ignored; 0 measured; 7 filtered out",
        ],
    );
}

/// The list is libtest's (stdout, what nextest parses); a broken file is
/// its `::load` trial there, its problems on stderr, and the exit code 2.
#[test]
fn list_names_every_trial_without_running() {
    let o = streams(&["list", "suites/sglang.yaml", "tests/suites/bad/typos.yaml"]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert_has(
        &err,
        &[
            "error: unknown field `temprature` in defaults",
            "tests/suites/bad/typos.yaml: 13 errors in suite file",
        ],
    );
    assert_eq!(
        out,
        "sglang::correctness::arithmetic: test\n\
         sglang::snapshot::arithmetic: test\n\
         sglang::correctness::is_prime: test\n\
         sglang::snapshot::is_prime: test\n\
         sglang::correctness::server_contract: test\n\
         sglang::snapshot::server_contract: test\n\
         sglang::performance::single_stream_decode: test\n\
         sglang::performance::concurrency_8: test\n\
         typos::load: test\n"
    );
}

/// A filter that selects nothing is an error that names the closest
/// trials, for `run` and `list` alike: a typo never runs nothing green.
#[test]
fn a_filter_matching_no_trial_fails_with_the_closest_names() {
    let out = run_expecting(
        &["run", "suites/sglang.yaml", "--", "sglang::corectness"],
        4,
    );
    assert_has(
        &out,
        &[
            "error: no trial matches `sglang::corectness` (nothing ran)",
            "= closest: `sglang::correctness::arithmetic`, `sglang::correctness::is_prime`, `sglang::correctness::server_contract`",
            "the suites have 8 trial(s)",
        ],
    );
    assert!(!out.contains("running "), "something ran:\n{out}");
    let out = run_expecting(
        &[
            "list",
            "suites/sglang.yaml",
            "--",
            "--exact",
            "sglang::performance::concurency_8",
        ],
        4,
    );
    assert_has(
        &out,
        &[
            "no trial matches `sglang::performance::concurency_8` exactly",
            "closest: `sglang::performance::concurrency_8`",
        ],
    );
    // Filters select what `list` lists, as they select what `run` runs.
    let out = run_expecting(&["list", "suites/sglang.yaml", "--", "performance"], 0);
    assert_eq!(
        out,
        "sglang::performance::single_stream_decode: test\n\
         sglang::performance::concurrency_8: test\n"
    );
}

/// The GPU-runner example loads on any machine and names a trial per
/// variant and stage, config checks first.
#[test]
fn the_gpu_example_suite_lists_its_variants_and_stages() {
    let out = run_expecting(&["list", "suites/gpu/kimi-k2.5.yaml"], 0);
    assert_has(
        &out,
        &[
            "kimi-k2.5[baseline]::config::server_info.tp_size: test",
            "kimi-k2.5[nccl-ll-ring]::config::model_info.model_path: test",
            "kimi-k2.5[decode-steps-4]::performance::single_stream_decode: test",
        ],
    );
    assert!(
        position(&out, "kimi-k2.5[baseline]::config::server_info.tp_size")
            < position(&out, "kimi-k2.5[baseline]::correctness::arithmetic")
    );
    assert!(
        position(&out, "kimi-k2.5[baseline]::performance::concurrency_32")
            < position(&out, "kimi-k2.5[nccl-ll-ring]::config::server_info.tp_size")
    );
}

/// Under `cargo test` (a filter matching nothing is normal there: cargo
/// hands one filter to every test binary), libtest is handed every trial
/// and counts those its filter leaves out, as in any Rust test run, for a
/// suite none of whose trials is selected too (no server is asked then).
#[test]
fn under_cargo_test_a_filter_counts_what_it_leaves_out() {
    let out = std::env::temp_dir().join(format!("servegate-filtered-{}", std::process::id()));
    let run = |filter: &str| {
        let args = libtest_mimic::Arguments {
            filter: Some(filter.to_owned()),
            ..libtest_mimic::Arguments::default()
        };
        let options = servegate::harness::RunOptions {
            out_dir: Some(out.clone()),
            history: Some("off".into()),
            ..servegate::harness::RunOptions::default()
        };
        servegate::harness::run(&["suites/sglang.yaml".into()], &options, args).conclusion
    };
    let none = run("no_trial_is_named_this");
    assert_eq!(
        (none.num_filtered_out, none.num_passed, none.num_failed),
        (8, 0, 0)
    );
    let one = run("sglang::correctness::arithmetic");
    assert_eq!(
        (one.num_filtered_out, one.num_passed, one.num_failed),
        (7, 1, 0)
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// `--skip` that leaves no trial is the filter that matches none: exit 4,
/// said, and nothing runs (never an empty green run).
#[test]
fn skipping_every_trial_is_no_match() {
    let out = run_expecting(
        &["run", "suites/sglang.yaml", "--", "--skip", "sglang::"],
        4,
    );
    assert_has(
        &out,
        &["error: --skip sglang:: leaves no trial of the 8 (nothing ran)"],
    );
    assert!(!out.contains("running "), "{out}");
}

/// A reader that is gone (`servegate list | head -1`, `servegate run … |
/// head` once head has its line, of stdout or of stderr): servegate ends
/// quietly, with the code a
/// shell gives a process a closed pipe ended (128 + SIGPIPE), no panic (a
/// run's trials under way finish first). The reader's end is closed before
/// servegate starts, so every write meets the closed pipe however busy the
/// machine is (a reader that closes after its first line races servegate
/// writing the rest into the pipe's buffer and exiting 0 first).
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    for args in [vec!["list"], vec!["run", "suites/sglang.yaml", "--out-dir"]] {
        let out_dir = tempfile::tempdir().unwrap();
        let mut cmd = crate::common::run::command(&args, &[]);
        if args.len() > 1 {
            cmd.arg(out_dir.path());
        }
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = cmd
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "{args:?}:\n{stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}:\n{stderr}");
    }
    // A closed standard error ends it the same way (`history list 2>&1 |
    // head -1`: its message about the missing history has nowhere to go).
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("history.sqlite");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = crate::common::run::command(&["history", "list", "--history"], &[])
        .arg(&missing)
        .stdout(std::process::Stdio::piped())
        .stderr(writer)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(141), "{out:?}");
}
