//! Naming trials without running them and choosing which run: `list`,
//! libtest filters (`--exact`, a filter that matches nothing), a filtered
//! gate that still runs its probes first, and the probes a gate waits for
//! (`needs`, `--skip`).

use crate::common::run::{run_expecting, servegate, streams};
use crate::common::verdicts::{assert_has, failure_of, verdict};
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

/// A gate waits for the probes it `needs` (every probe by default): one
/// that needs only a passing probe runs beside a failed one. A probe
/// `--skip` leaves out gates nothing — the run was told not to ask it —
/// and the run says so, in its notes, its figures and each gate's record.
#[test]
fn a_gate_waits_for_the_probes_it_needs_and_not_for_a_skipped_one() {
    let out = run_expecting(&["run", "tests/suites/needs.yaml"], 1);
    assert_eq!(
        verdict(&out, "needs::correctness::arithmetic"),
        "FAILED",
        "{out}"
    );
    assert_eq!(verdict(&out, "needs::correctness::is_prime"), "ok", "{out}");
    assert_eq!(verdict(&out, "needs::performance::tokens"), "ok", "{out}");
    let gate = failure_of(&out, "needs::performance::decode");
    assert!(
        gate.starts_with("gated: correctness probe arithmetic failed"),
        "{gate}"
    );

    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["run", "tests/suites/needs.yaml", "--out-dir"];
        all.push(dir.path().to_str().unwrap());
        all.extend(args);
        servegate(&all)
    };
    let o = run(&["--", "--skip", "arithmetic"]);
    assert_eq!(o.code, Some(0), "{}", o.out);
    assert_eq!(
        verdict(&o.out, "needs::performance::decode"),
        "ok",
        "{}",
        o.out
    );
    assert_has(
        &o.out,
        &[
            "note: suite `needs`: correctness probe(s) `arithmetic` left out by --skip: no gate waits for them",
            "  needs::performance::decode [",
            "    ran without the verdict of correctness probe(s) `arithmetic`, which --skip left out",
            "3 passed; 0 failed; 0 ignored; 0 measured; 1 filtered out",
        ],
    );
    assert!(
        !o.out.contains("test needs::correctness::arithmetic ..."),
        "{}",
        o.out
    );
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("latest/report.json")).unwrap(),
    )
    .unwrap();
    let skipped: Vec<(&str, &serde_json::Value)> = record["suites"][0]["gates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["gate"].as_str().unwrap(), &g["probes_skipped"]))
        .collect();
    assert_eq!(
        skipped,
        [
            ("decode", &serde_json::json!(["arithmetic"])),
            ("tokens", &serde_json::Value::Null),
        ],
        "only the gate that needs the skipped probe ran without it"
    );
    let latest = dir.path().join("latest");
    let report = |format: &str| {
        let o = streams(&["report", latest.to_str().unwrap(), "--format", format]);
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let note =
        "ran without the verdict of correctness probe(s) `arithmetic`, which --skip left out";
    assert_has(
        &report("md"),
        &[
            "⚠️ ran without the verdict of correctness probe(s) \\`arithmetic\\`, which --skip left out",
        ],
    );
    assert_has(&report("html"), &[note]);
    assert_has(
        &report("junit"),
        &[&format!("<system-out>{note}</system-out>")],
    );
    let annotations = report("annotations");
    assert_has(
        &annotations,
        &[
            "::warning file=tests/suites/needs.yaml,line=21,title=needs%3A%3Aperformance%3A%3Adecode::ran without the verdict",
        ],
    );
    assert_eq!(annotations.matches("::warning").count(), 1, "{annotations}");

    // A filter that merely does not select the probe leaves it a
    // prerequisite: it runs first and gates as before.
    let o = run(&["--", "performance::decode"]);
    assert_eq!(o.code, Some(1), "{}", o.out);
    assert!(
        failure_of(&o.out, "needs::performance::decode")
            .starts_with("gated: correctness probe arithmetic failed"),
        "{}",
        o.out
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
/// head`, of stdout or of stderr): servegate ends quietly, with the code a
/// shell gives a process a closed pipe ended (128 + SIGPIPE), no panic.
/// The reader's end is closed before servegate starts, so every write
/// meets the closed pipe however busy the machine is (a reader that closes
/// after its first line races servegate writing the rest into the pipe's
/// buffer and exiting 0 first; the next test closes it mid-run).
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

/// `servegate run … | head -3` once head has its lines: the reader is gone
/// in the middle of the run. Nobody reads the rest, so the run stops there
/// as on Ctrl-C — the gate under way is not finished (it would measure for
/// a minute here) and the launched server is stopped — and nothing
/// measured is lost: the record of the trials that finished is written,
/// and servegate exits 141 without a panic. The simulator's slow second
/// probe (about 3 s) leaves the reader ample time to close after the
/// first; were the run to go on, the gate would be in the record.
#[test]
fn a_reader_gone_mid_run_stops_the_run_and_keeps_what_finished() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let long = "word ".repeat(150);
    std::fs::write(
        dir.path().join("sim.yaml"),
        format!(
            "model: sim-slow\nttft: 5ms\nitl: 20ms\nreplies:\n  - match: '2\\+2'\n    reply: \"4\"\n  - match: 'long'\n    reply: \"{long}\"\n"
        ),
    )
    .unwrap();
    // A server servegate launches (the simulator in a process of its own),
    // marked so that a survivor would be found.
    let marker = format!("servegate-piped-marker-{}", std::process::id());
    std::fs::write(
        dir.path().join("piped.yaml"),
        format!("suite: piped\ntarget:\n  launch:\n    command: [{bin:?}, sim, --port, '{{port}}', --profile, {profile:?}, --say, {marker}]\n    ready: {{ interval: 50ms, timeout: 60s }}\n    grace: 2s\ncorrectness:\n  - name: first\n    prompt: \"What is 2+2?\"\n    expect: [ {{ number: 4 }} ]\n  - name: second\n    prompt: \"Say something long.\"\n    max_tokens: 200\n    expect: [ {{ regex: word }} ]\nperformance:\n  - name: minute\n    load: {{ concurrency: 1, requests: 20, input_tokens: 8, output_tokens: 150, ignore_eos: true }}\n    thresholds:\n      decode_tok_s.mean: \">= 1\"\n",
            bin = env!("CARGO_BIN_EXE_servegate"),
            profile = dir.path().join("sim.yaml").to_str().unwrap(),
        ),
    )
    .unwrap();
    // The reader of stdout alone (`| head`), then of both (`2>&1 | head`,
    // where even the stop's own lines meet the closed pipe).
    for merged in [false, true] {
        let out_dir = dir.path().join(format!("out-{merged}"));
        let (reader, writer) = std::io::pipe().unwrap();
        let mut cmd = crate::common::run::command(&["run"], &[]);
        cmd.arg(dir.path().join("piped.yaml"))
            .arg("--out-dir")
            .arg(&out_dir)
            .stderr(if merged {
                writer.try_clone().unwrap().into()
            } else {
                std::process::Stdio::piped()
            })
            .stdout(writer);
        let child = cmd.spawn().unwrap();
        // No copy of the write end stays here: the pipe closes with the reader.
        drop(cmd);
        // Read up to the first trial's line, then close the pipe.
        let mut lines = std::io::BufReader::new(reader);
        let mut seen = String::new();
        while !seen.contains("test piped::") {
            let mut line = String::new();
            assert_ne!(lines.read_line(&mut line).unwrap(), 0, "{seen}");
            seen.push_str(&line);
        }
        drop(lines);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "{merged}: {seen}\n{stderr}");
        if !merged {
            assert!(!stderr.contains("panicked"), "{stderr}");
            assert_has(
                &stderr,
                &[
                    "servegate: its output was closed: stopping 1 launched server(s) and 0 sandboxed program(s)",
                    "servegate: the record of the ",
                ],
            );
        }
        assert_eq!(
            crate::common::run::processes_with(&marker),
            Vec::<String>::new(),
            "{merged}: the launched server outlived the run"
        );
        let run = crate::only_run(&out_dir);
        let record: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run.join("report.json")).unwrap()).unwrap();
        let names = crate::trial_names(&record);
        assert_eq!(record["complete"], false, "{record}");
        assert!(
            names.contains(&"piped::correctness::first"),
            "{merged}: {names:?}"
        );
        // The gate under way when the run stopped ended by the stop (its
        // server killed): no outcome of the server's, so not recorded.
        assert!(
            !names.contains(&"piped::performance::minute"),
            "{merged}: {names:?}"
        );
    }
}
