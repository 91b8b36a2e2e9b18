//! End-to-end runs of the `servegate` binary against the embedded simulator:
//! exit codes, trial order, failure messages and the printed target.

mod common;
#[path = "common/golden.rs"]
mod golden;
use common::run::{command, merged, run_expecting, servegate, servegate_with, streams};
use common::verdicts::{assert_has, failure_of, verdict};
use golden::golden;
use std::net::TcpListener;
use std::process::Command;

/// Whether trial `a` ran before trial `b` in the run whose output is
/// `out`, by its run record (trials in the order they ran). Not by where
/// libtest printed their lines: it prints a trial's line when its result
/// reaches it, and on a loaded machine a quick next trial's can come first.
fn ran_before(out: &str, a: &str, b: &str) -> bool {
    let path = out
        .lines()
        .find_map(|l| l.strip_prefix("servegate: run record written to "))
        .unwrap_or_else(|| panic!("no run record in:\n{out}"));
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path.trim()).unwrap()).unwrap();
    let order: Vec<&str> = record["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    let at = |n: &str| {
        order
            .iter()
            .position(|o| *o == n)
            .unwrap_or_else(|| panic!("`{n}` not in the run record: {order:?}"))
    };
    at(a) < at(b)
}

fn position(out: &str, needle: &str) -> usize {
    out.find(needle)
        .unwrap_or_else(|| panic!("`{needle}` not in:\n{out}"))
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

/// Each line of `out` as JSON; a line that is not fails the test.
fn json_lines(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("`{l}` is not JSON: {e}")))
        .collect()
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

/// `one_of: [yes, no]` (the docs' own example), `[on, off]` and
/// `[1.0, 2.0]` unquoted: the choices are the strings as written, not
/// YAML 1.1's `true`/`false` or the number 1, so each probe passes on the
/// answer it names.
#[test]
fn unquoted_yes_on_and_numbers_stay_strings() {
    let out = run_expecting(&["run", "tests/suites/plain-scalars.yaml"], 0);
    for name in ["yes_no", "on_off", "version"] {
        assert_eq!(
            verdict(&out, &format!("plain_scalars::correctness::{name}")),
            "ok",
            "{out}"
        );
    }
}

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

#[test]
fn bad_suite_becomes_one_failing_load_trial() {
    let out = run_expecting(&["run", "tests/suites/bad/typos.yaml"], 2);
    assert_eq!(verdict(&out, "typos::load"), "FAILED", "{out}");
    golden!("typos_load_trial", failure_of(&out, "typos::load"));
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
fn reasoning_suite_separates_reasoning_from_content() {
    let out = run_expecting(&["run", "tests/suites/reasoning.yaml"], 0);
    assert_has(
        &out,
        &["served model \"sim-reasoner\"", "pass ttft.p99 <= 1.000s"],
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

/// Old run directories are pruned after a run: the newest N are kept
/// (this run's included), never one whose process still runs, and nothing
/// that is not a servegate run directory is touched.
#[test]
fn old_run_directories_are_pruned_to_the_newest_n() {
    let dir = std::env::temp_dir().join(format!("servegate-prune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let runs = dir.join("runs");
    let alive_name = format!("999-{}", std::process::id());
    // Twelve runs of a process long gone (no pid is 999999999).
    for i in 0..12 {
        let d = runs.join(format!("{}-999999999", 1000 + i));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("report.json"), "{}").unwrap();
    }
    // The oldest of all, but its process (this test) still runs.
    let alive = runs.join(&alive_name);
    std::fs::create_dir_all(&alive).unwrap();
    std::fs::write(alive.join("trials.jsonl"), "").unwrap();
    // Not servegate's: another name, a run's name without a record, a file.
    for d in ["notes", "5-999999999"] {
        std::fs::create_dir_all(runs.join(d)).unwrap();
    }
    std::fs::write(runs.join("notes/report.json"), "{}").unwrap();
    std::fs::write(runs.join("6-999999999"), "").unwrap();
    let names = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    let run = |keep: &[&str], env: &[(&str, &std::path::Path)]| {
        let mut args = vec![
            "run",
            "suites/sglang.yaml",
            "--out-dir",
            dir.to_str().unwrap(),
        ];
        args.extend_from_slice(keep);
        args.extend(["--", "--exact", "sglang::correctness::arithmetic"]);
        let o = servegate_with(&args, env);
        assert_eq!(o.code, Some(0), "{}", o.out);
        o.out
    };
    let out = run(&["--keep", "3"], &[]);
    assert_has(&out, &["servegate: removed 10 old run directories of "]);
    let left = names();
    let current: Vec<&String> = left
        .iter()
        .filter(|n| n.ends_with("-999999999") || n.starts_with("999-") || *n == "notes")
        .collect();
    assert_eq!(
        current,
        [
            "1010-999999999",
            "1011-999999999",
            "5-999999999",
            "6-999999999",
            &alive_name,
            "notes"
        ],
        "{left:?}"
    );
    assert_eq!(left.len(), 7, "this run's directory is kept: {left:?}");
    // 0 keeps them all; the variable sets N where no flag does.
    let out = run(&["--keep", "0"], &[]);
    assert!(!out.contains("removed"), "{out}");
    assert_eq!(names().len(), 8);
    run(&[], &[("SERVEGATE_KEEP_RUNS", std::path::Path::new("1"))]);
    let left = names();
    assert_eq!(
        left.len(),
        5,
        "only this run, the live one and what is not a run: {left:?}"
    );
    assert!(!left.contains(&"1011-999999999".to_owned()), "{left:?}");
    assert!(left.contains(&alive_name), "{left:?}");
    let _ = std::fs::remove_dir_all(&dir);
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

/// `servegate init` writes a first suite from what it measured on the
/// target, and that suite passes `servegate run` on the same target.
#[test]
fn init_writes_a_suite_that_passes_on_its_own_server() {
    let dir = std::env::temp_dir().join(format!("servegate-init-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = dir.join("suites/first.yaml");
    let path = file.to_str().unwrap();
    let (sim, url) = external_sim("fixtures/sim/sglang.yaml");
    // The calibration and the run measure a debug simulator at 500 tok/s
    // a stream on the runner's shared cores: figures judged even where the
    // self-check distrusts their 2 ms gaps (see
    // `an_external_server_is_measured_and_named_as_such`).
    let out = run_expecting(
        &[
            "init",
            "--target",
            &url,
            "--out",
            path,
            "--client-limited",
            "warn",
        ],
        0,
    );
    assert_has(
        &out,
        &[
            &format!("servegate init: asking {url} what it serves"),
            "servegate init: probe arithmetic: ok",
            "servegate init: probe is_prime: ok",
            "contract checks held: max_tokens, ignore_eos, usage, stop, cache_determinism",
            "servegate init: measuring 8 concurrent streams",
            &format!("servegate init: wrote {path}"),
        ],
    );
    let suite = std::fs::read_to_string(&file).unwrap();
    assert_has(
        &suite,
        &[
            "# yaml-language-server: $schema=servegate.schema.json\n",
            "# A first suite for sim-sglang, server ",
            &format!("  base_url: \"{url}\"\n"),
            "  - name: arithmetic\n",
            "  - name: is_prime\n",
            "    contract: [max_tokens, ignore_eos, usage, stop, cache_determinism]\n",
            "      decode_tok_s.mean: \">= ",
            "tok/s in 3 runs (sim-sglang, server ",
            ": 80% of the lowest",
            "      itl.p99: \"<= ",
        ],
    );
    assert!(!suite.contains("Failed on this server"), "{suite}");
    assert!(dir.join("suites/servegate.schema.json").is_file());
    let out = run_expecting(&["run", path, "--client-limited", "warn"], 0);
    assert_has(
        &out,
        &[
            "test first::correctness::arithmetic ",
            "test first::correctness::is_prime ",
            "test first::performance::concurrency_8 ",
            "5 passed; 0 failed",
        ],
    );
    drop(sim);

    // A file that exists is left alone without --force.
    let out = run_expecting(&["init", "--out", path], 2);
    assert_has(
        &out,
        &[&format!("error: {path} exists; `--force` overwrites it")],
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), suite);

    // The embedded simulator's default profile answers with filler: the
    // probes it fails are written commented out, with why, and the suite
    // still passes there.
    let out = run_expecting(&["init", "--target", "sim", "--out", path, "--force"], 0);
    assert_has(&out, &["probe arithmetic: assertion failed"]);
    let suite = std::fs::read_to_string(&file).unwrap();
    assert_has(
        &suite,
        &[
            "  # Failed on this server when written (assertion failed: expected content matches regex `\\b4\\b`):\n",
            "  # - name: arithmetic\n",
            "  #   prompt: \"What is 2+2?\"\n",
            "  base_url: \"sim\"\n",
        ],
    );
    let out = run_expecting(&["run", path], 0);
    assert_has(&out, &["3 passed; 0 failed"]);
    let _ = std::fs::remove_dir_all(&dir);
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

/// llama.cpp's native dialect end to end: its probe passes, its counts come
/// from `tokens_predicted`, the server's own timings are printed beside the
/// client's and hold a gate; the same gate on a dialect without timings
/// cannot measure, says why, and fails.
#[test]
fn server_timings_hold_a_gate_only_where_the_dialect_reports_them() {
    let out = run_expecting(
        &[
            "run",
            "tests/suites/server-timings.yaml",
            "tests/suites/no-server-timings.yaml",
        ],
        1,
    );
    assert_eq!(
        verdict(&out, "server_timings::correctness::arithmetic"),
        "ok"
    );
    assert_eq!(verdict(&out, "server_timings::performance::decode"), "ok");
    assert_has(
        &out,
        &[
            "api llamacpp-completion, served model \"sim-sglang\"",
            "counts from tokens_predicted ×4",
            "server's own timings (n=4): prompt mean ",
            "pass server_decode_tok_s.mean >= 1.0 tok/s (measured ",
        ],
    );
    assert_eq!(
        verdict(&out, "no_server_timings::performance::decode"),
        "FAILED"
    );
    let none = failure_of(&out, "no_server_timings::performance::decode");
    assert_has(
        &none,
        &[
            "measured: server_decode_tok_s.mean = nothing",
            "2 requests succeeded, but this figure needs an API whose server reports its own timings (`api: llamacpp-completion`)",
        ],
    );
}

/// A bench-client row's figures: the self-check's verdict, each p99
/// (TTFT, ITL) as measured, as the simulator's stamps say it was, and as
/// far as the self-check says the client can have moved it; and the p99 of
/// the TTFT error that lies outside the simulator (the client's write, the
/// wire, the client's stamps: the second table), the client's own share.
struct BenchRow {
    verdict: String,
    ttft: (f64, f64, f64),
    itl: (f64, f64, f64),
    ttft_outside: f64,
}

/// A table's rows: their words (the first is a count of threads).
fn words(table: &str, min: usize) -> impl Iterator<Item = Vec<&str>> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(move |w| w.len() >= min && w[0].parse::<usize>().is_ok())
}

fn bench_rows(out: &str) -> Vec<BenchRow> {
    let secs = |w: &str| {
        servegate::units::parse_duration(w.trim_matches(|c| c == '(' || c == ')'))
            .unwrap_or_else(|e| panic!("{w}: {e}\n{out}"))
            .as_secs_f64()
    };
    let (main, parts) = out
        .split_once("where the TTFT error goes")
        .unwrap_or_else(|| panic!("no TTFT breakdown in:\n{out}"));
    // threads ITL streams |err| p50 / p99, queue p50 / p99, outside p50 / p99, …
    let outside: Vec<f64> = words(parts, 15).map(|w| secs(w[11])).collect();
    let rows: Vec<BenchRow> = words(main, 18)
        .zip(&outside)
        .map(|(w, &ttft_outside)| BenchRow {
            verdict: w[17].to_owned(),
            ttft: (secs(w[8]), secs(w[9]), secs(w[11])),
            itl: (secs(w[12]), secs(w[13]), secs(w[15])),
            ttft_outside,
        })
        .collect();
    assert_eq!(
        rows.len(),
        outside.len(),
        "a row without its TTFT breakdown:\n{out}"
    );
    rows
}

/// The self-check judged as a classifier against known truth (the stamped
/// simulator's own stamps), in both directions, row by row: a row is `ok`
/// exactly when the client moved neither p99 past the tolerance. For TTFT
/// the client's share is the error outside the simulator (the request
/// waiting in the simulator's socket is the server's time); for ITL, the
/// p99's distance from the stamps' p99.
///
/// A client whose core a real-time thread takes 20 ms of every 25 reads
/// tokens late and together: every row is LIMITED, wrong by far more than
/// the tolerance, with a bound that covers the error. A client on a host
/// whose every core is busy at normal priority keeps its share and its
/// stamps, and its rows are `ok` — unless the machine running the tests is
/// loaded past that (CI's under-load run): then a row the client truly
/// delayed (its write of a request descheduled for 18 ms) is LIMITED, and
/// that is right. No `ok` row is off (no false green); no LIMITED row is
/// within the tolerance (no false red).
#[test]
fn the_self_check_is_right_both_ways_against_the_stamped_simulator() {
    // 2% of the figure, at least 0.1 ms; and the wire between the
    // simulator's stamps and the client's, which no client removes.
    let tolerance = |truth: f64| (0.02 * truth).max(0.000_1) + 0.000_1;
    for (contention, itl) in [("host", "20ms"), ("starved", "10ms")] {
        let o = servegate(&[
            "bench-client",
            "--streams",
            "1,4",
            "--itl",
            itl,
            "--tokens",
            "48",
            "--duration",
            "2s",
            "--contention",
            contention,
        ]);
        if o.code != Some(0) && o.out.contains("needs") {
            eprintln!(
                "not proven here: bench-client --contention {contention}: {}",
                o.out.trim()
            );
            continue;
        }
        assert_eq!(o.code, Some(0), "{}", o.out);
        let rows = bench_rows(&o.out);
        assert_eq!(rows.len(), 2, "{}", o.out);
        for r in &rows {
            eprintln!(
                "{contention}: ITL p99 {:.3}ms (true {:.3}ms, bound {:.3}ms), TTFT p99 {:.3}ms (true {:.3}ms, bound {:.3}ms, outside the simulator {:.3}ms): {}",
                r.itl.0 * 1e3,
                r.itl.1 * 1e3,
                r.itl.2 * 1e3,
                r.ttft.0 * 1e3,
                r.ttft.1 * 1e3,
                r.ttft.2 * 1e3,
                r.ttft_outside * 1e3,
                r.verdict
            );
            let itl_moved = (r.itl.0 - r.itl.1).abs();
            let (itl_tol, ttft_tol) = (tolerance(r.itl.1), tolerance(r.ttft.1));
            let moved = itl_moved > itl_tol || r.ttft_outside > ttft_tol;
            let label = if moved { "LIMITED" } else { "ok" };
            assert_eq!(
                r.verdict,
                label,
                "{contention}: the verdict is not the truth's (a false {}):\n{}",
                if moved { "green" } else { "red" },
                o.out
            );
            if r.verdict == "LIMITED" {
                // The ITL bound covers what the client moved. (The TTFT
                // bound does not always: starved, 8.8 ms against 10.3 ms
                // outside the simulator, 0.6 against 14.7 at 4 streams —
                // the verdict is right, the bound's size is issue 29's.)
                assert!(r.itl.2 + itl_tol >= itl_moved, "{}", o.out);
            }
            if contention == "starved" {
                // Starved, every row is wrong by far more than the tolerance.
                assert!(itl_moved > 5.0 * itl_tol, "{}", o.out);
            }
        }
    }
}

/// bench-client: a row per pacing, client threads and streams, each with
/// its self-check and its timing error against the stamped simulator
/// (every answer's stamps read back: no unreadable answer), the TTFT
/// error's parts, and the scaling of threads.
#[test]
fn bench_client_prints_its_rows_timing_error_and_scaling() {
    let o = servegate(&[
        "bench-client",
        "--streams",
        "2",
        "--threads",
        "1,2",
        "--itl",
        "0ms,5ms",
        "--tokens",
        "16",
        "--duration",
        "300ms",
    ]);
    let out = o.out;
    assert_eq!(o.code, Some(0), "{out}");
    let (main, parts) = out
        .split_once("where the TTFT error goes")
        .unwrap_or_else(|| panic!("no TTFT breakdown in:\n{out}"));
    let rows: Vec<Vec<&str>> = words(main, 11).collect();
    let keys: Vec<(&str, &str)> = rows.iter().map(|w| (w[0], w[1])).collect();
    assert_eq!(
        keys,
        [("1", "0"), ("2", "0"), ("1", "5.00ms"), ("2", "5.00ms")],
        "{out}"
    );
    for w in &rows {
        // … errors, then the self-check (and where the simulator ran).
        let errors = w.iter().position(|c| *c == "ok" || *c == "LIMITED");
        assert!(
            errors.is_some_and(|i| w[i - 1] == "0"),
            "a row with errors or unreadable stamps, or no self-check: {w:?}\n{out}"
        );
        assert!(w[4].ends_with("µs"), "CPU per token: {w:?}");
    }
    assert_eq!(words(parts, 15).count(), 4, "{out}");
    assert_has(
        &out,
        &[
            "scaling: 2 streams, ITL 0: 2 threads hold ",
            "scaling: 2 streams, ITL 5.00ms: 2 threads hold ",
        ],
    );
}

#[test]
fn repeated_gates_report_the_interval_of_their_repeats() {
    let out = run_expecting(&["run", "tests/suites/repeats.yaml"], 0);
    assert!(
        out.contains("(figures of the last of 3 repeats; verdicts over all of them)"),
        "{out}"
    );
    let check = out
        .lines()
        .find(|l| l.contains("pass decode_tok_s.mean >= 10.0 tok/s"))
        .unwrap_or_else(|| panic!("no decode check in:\n{out}"));
    assert!(
        check.contains("(95% CI ") && check.contains(", 3 repeats))"),
        "{check}"
    );
}

#[test]
fn baselines_round_trip_through_save_and_relative_thresholds() {
    let dir = std::env::temp_dir().join(format!("servegate-baselines-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (baselines, target) = (dir.join("baselines"), dir.join("target"));
    let env = [
        ("SERVEGATE_BASELINES", baselines.as_path()),
        ("CARGO_TARGET_DIR", target.as_path()),
    ];
    let run = || servegate_with(&["run", "tests/suites/relative.yaml"], &env);

    // No baseline yet: a relative threshold cannot pass.
    let out = run().out;
    let steady = failure_of(&out, "relative::performance::steady");
    assert_has(
        &steady,
        &[
            "but there is no baseline: no baseline file",
            "servegate baseline save",
        ],
    );

    // Save: the run's figures become the baseline of this configuration.
    let o = servegate_with(&["baseline", "save", "tests/suites/relative.yaml"], &env);
    let saved = o.out;
    assert_eq!(o.code, Some(0), "{saved}");
    let file = baselines.join("relative/steady.json");
    assert!(
        saved.contains(&format!(
            "servegate: baseline written to {}",
            file.display()
        )),
        "{saved}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let entry = &json["entries"]["openai-chat, model sim-steady, server servegate-sim 0.1.0"];
    assert!(
        entry["figures"]["decode_tok_s.mean"].as_f64().unwrap() > 0.0,
        "{json}"
    );

    // Against its own baseline, `steady` holds and `tenfold` shows both numbers.
    let o = run();
    let out = o.out;
    assert_eq!(
        verdict(&out, "relative::performance::steady"),
        "ok",
        "{out}"
    );
    assert_eq!(
        verdict(&out, "relative::performance::tenfold"),
        "FAILED",
        "{out}"
    );
    let tenfold = failure_of(&out, "relative::performance::tenfold");
    assert_has(
        &tenfold,
        &[
            "bound:    output_tok_s >= baseline * 10 = ",
            " from baseline ",
            "relative/tenfold.json, configuration openai-chat, model sim-steady",
        ],
    );

    // A failed run records nothing: its probe failed, its gate is gated.
    let o = servegate_with(
        &["baseline", "save", "tests/suites/wrong_arithmetic.yaml"],
        &env,
    );
    assert_eq!(o.code, Some(1), "{}", o.out);
    assert_has(
        &o.out,
        &[
            "test result: FAILED",
            "error: the run failed: no baseline recorded",
        ],
    );
    assert!(!o.out.contains("baseline written"), "{}", o.out);
    assert!(!baselines.join("wrong").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_interrupted_run_leaves_the_figures_already_measured() {
    let dir = std::env::temp_dir().join(format!("servegate-interrupted-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = command(&[], &[])
        .args(["run", "tests/suites/interrupted.yaml"])
        .env("CARGO_TARGET_DIR", &dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let figures = dir.join("servegate/latest/report.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut text = String::new();
    while std::time::Instant::now() < deadline {
        text = std::fs::read_to_string(&figures).unwrap_or_default();
        if text.contains("\"gate\": \"quick\"") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let still_running = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        still_running,
        "the long gate should still have been running"
    );
    assert_has(&text, &["\"gate\": \"quick\"", "\"output_tok_s\""]);
    // The record says the run did not finish, and which trials did.
    let record: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(record["complete"], false);
    assert_eq!(
        record["trials"][0]["name"],
        "interrupted::performance::quick"
    );
    assert_eq!(record["trials"][0]["outcome"], "passed");
    assert_eq!(record["trials"].as_array().map(Vec::len), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The record is rewritten at checkpoints (after 1, 2, 4, 8, … trials and
/// after each gate), each trial appended to a journal beside it: a run
/// killed mid-gate leaves every finished trial, merged by `servegate report`.
#[test]
fn an_interrupted_run_keeps_every_finished_trial_in_its_journal() {
    let dir = std::env::temp_dir().join(format!("servegate-journal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = command(&[], &[])
        .args(["run", "tests/suites/interrupted-probes.yaml", "--out-dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let journal = || {
        let runs = std::fs::read_dir(dir.join("runs")).ok()?;
        let run = runs.flatten().next()?.path();
        let text = std::fs::read_to_string(run.join("trials.jsonl")).ok()?;
        Some((run, text.lines().count()))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while journal().is_none_or(|(_, n)| n < 6) {
        assert!(
            std::time::Instant::now() < deadline,
            "the probes never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let (run, lines) = journal().unwrap();
    assert_eq!(lines, 6);
    let on_disk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    assert_eq!(on_disk["complete"], false);
    assert_eq!(on_disk["trials"].as_array().map(Vec::len), Some(4));
    let merged = streams(&["report", run.to_str().unwrap(), "--format", "json"]);
    let merged: serde_json::Value = serde_json::from_slice(&merged.stdout).unwrap();
    let names: Vec<&str> = merged["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["a", "b", "c", "d", "e", "f"].map(|p| format!("journal::correctness::{p}"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ctrl-C (or a CI cancel's SIGINT) mid-gate: the run exits 130 and first
/// writes the record of every finished trial and its reports.
#[test]
fn an_interrupted_run_writes_its_last_record_and_reports() {
    let dir = std::env::temp_dir().join(format!("servegate-sigint-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let child = command(&[], &[])
        .args(["run", "tests/suites/interrupted-probes.yaml", "--out-dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let journal = dir.join("latest/report.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // The fourth trial's checkpoint, then a little more: the gate runs.
    while !std::fs::read_to_string(&journal).is_ok_and(|t| t.contains("journal::correctness::d")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the probes never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert_has(
        &String::from_utf8_lossy(&out.stderr),
        &["servegate: the record of the 6 finished trial(s) is in "],
    );
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&journal).unwrap()).unwrap();
    assert_eq!(record["complete"], false);
    assert_eq!(record["trials"].as_array().map(Vec::len), Some(6));
    assert!(dir.join("latest/junit.xml").exists() && dir.join("latest/report.html").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sweep_runs_one_trial_per_level_prints_its_curve_and_gates_it() {
    let out = run_expecting(&["run", "tests/suites/sweep.yaml"], 1);
    assert_eq!(
        verdict(&out, "sweep::performance::scaling::concurrency_1"),
        "ok",
        "{out}"
    );
    assert_eq!(
        verdict(&out, "sweep::performance::scaling::concurrency_4"),
        "ok",
        "{out}"
    );
    assert_eq!(
        verdict(&out, "sweep::performance::scaling::curve"),
        "FAILED",
        "{out}"
    );
    let curve = failure_of(&out, "sweep::performance::scaling::curve");
    assert!(
        curve.starts_with("error: curve failed: requests_per_s should be non_increasing across the levels of `scaling`"),
        "{curve}"
    );
    assert_has(
        &curve,
        &[
            "--> tests/suites/sweep.yaml:13:7",
            "levels:   concurrency_1 ",
            "from concurrency_1 to concurrency_4",
        ],
    );
    assert!(
        !curve.contains("output_tok_s should"),
        "throughput rose, as it should:\n{curve}"
    );
    let table = position(&out, "  sweep sweep::performance::scaling:");
    let rows: Vec<&str> = out[table..].lines().skip(2).take(2).collect();
    assert!(rows[0].trim_start().starts_with("concurrency_1 "), "{out}");
    assert!(rows[1].trim_start().starts_with("concurrency_4 "), "{out}");
    // The curve alone: its levels run first as prerequisites.
    let o = servegate(&[
        "run",
        "tests/suites/sweep.yaml",
        "--",
        "--exact",
        "sweep::performance::scaling::curve",
    ]);
    let out = o.out;
    assert_has(
        &out,
        &[
            "the levels of its selected curves run first as prerequisites",
            "running 1 test",
        ],
    );
    assert!(
        failure_of(&out, "sweep::performance::scaling::curve").contains("requests_per_s"),
        "{out}"
    );
}

#[test]
fn an_unset_api_key_fails_the_suite_and_a_set_one_never_shows() {
    // Unset: every trial fails and says which variable.
    let out = run_expecting(&["run", "tests/suites/keyed.yaml", "--target", "sim"], 3);
    let f = failure_of(&out, "keyed::correctness::arithmetic");
    assert!(
        f.contains("target.api_key_env names `SERVEGATE_TEST_KEY`, which is not set"),
        "{f}"
    );
    // Set, against the simulator (`--target sim` overrides the suite's URL):
    // the probe runs, fails on the wrong answer, and the key appears nowhere.
    let canary = "sk-canary-5f2d8a";
    let o = command(&[], &[])
        .args(["run", "tests/suites/keyed.yaml", "--target", "sim"])
        .env("SERVEGATE_TEST_KEY", canary)
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(err.contains("SIMULATOR (embedded"), "{err}");
    assert!(
        failure_of(&out, "keyed::correctness::arithmetic").contains("content:   \"5\""),
        "{out}"
    );
    assert!(
        !out.contains(canary) && !err.contains(canary),
        "the key leaked:\n{out}\n{err}"
    );
}

#[test]
fn an_external_server_is_measured_and_named_as_such() {
    let (sim, url) = external_sim("fixtures/sim/sglang.yaml");
    // A debug simulator at 500 tok/s a stream shares the CI runner's cores
    // with the debug client, and the self-check may rightly distrust the
    // ITL figures of 2 ms gaps: this test is about the target, so they are
    // judged anyway (the self-check has its own tests below).
    let o = servegate(&[
        "run",
        "suites/sglang.yaml",
        "--target",
        &url,
        "--client-limited",
        "warn",
        "--",
        "sglang::",
    ]);
    drop(sim);
    let out = o.out;
    assert_eq!(o.code, Some(0), "{out}");
    assert!(out.contains(&format!("servegate: suite `sglang` → server at {url}, api openai-chat, served model \"sim-sglang\"")), "{out}");
    assert!(!out.contains("SIMULATOR"), "{out}");
    assert_has(
        &out,
        &[
            "8 passed; 0 failed",
            "server /metrics over the window: generation tokens 2560",
            "client self-check: 1 thread (auto), busy ≤ ",
            "    client thread 0: 1 stream, busy ",
        ],
    );
}

/// A load one client thread cannot keep up with (tokens as fast as the
/// server sends them, 32 streams): the gate fails, whatever its
/// thresholds say, with the thread's own figures, and the record says why.
#[test]
fn a_saturated_client_fails_its_gate_and_says_it_was_the_bottleneck() {
    let (sim, url) = external_sim_with(
        "fixtures/sim/sglang.yaml",
        &["--itl", "0ms", "--capacity", "100000"],
    );
    let dir = std::env::temp_dir().join(format!("servegate-starved-{}", std::process::id()));
    let o = servegate(&[
        "run",
        "tests/suites/client/starved.yaml",
        "--target",
        &url,
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    drop(sim);
    let out = o.out;
    assert_eq!(o.code, Some(1), "{out}");
    let failure = failure_of(&out, "starved::performance::flood");
    let first = failure
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or("");
    // No idle time: busy, or (on a loaded machine) waiting for a CPU; the
    // advice fits which.
    assert!(
        first.starts_with("error: the client moved these figures beyond their tolerance (thread 0 busy ")
            && (first.ends_with(
                "): they measure servegate, not the server; its threads had no room: raise client_threads"
            ) || first.ends_with("(other work on their cores): give servegate cores of its own (taskset, a cpuset) or run it on a quieter host")),
        "{failure}"
    );
    assert_has(
        &failure,
        &[
            " --> tests/suites/client/starved.yaml:8:5",
            "`load.client_limited: warn` judges these figures anyway",
            "    client thread 0: 32 streams, busy ",
        ],
    );
    // The other thresholds held: the self-check alone failed the gate.
    assert!(out.contains("pass output_tok_s >= 1.0 tok/s"), "{out}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("latest/report.json")).unwrap())
            .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let gate = &record["suites"][0]["gates"][0];
    let client = &gate["client"];
    assert_eq!(client["chosen"], "suite", "{gate}");
    assert_eq!(
        client["threads"].as_array().map(Vec::len),
        Some(1),
        "{gate}"
    );
    assert!(
        client["limited"]
            .as_str()
            .is_some_and(|l| l.starts_with("thread 0 ")),
        "{gate}"
    );
    // Marked, but judged anyway, when the run says so.
    let (sim, url) = external_sim_with(
        "fixtures/sim/sglang.yaml",
        &["--itl", "0ms", "--capacity", "100000"],
    );
    let warned = servegate(&[
        "run",
        "tests/suites/client/starved.yaml",
        "--target",
        &url,
        "--client-limited",
        "warn",
    ]);
    drop(sim);
    assert_eq!(warned.code, Some(0), "{}", warned.out);
    assert!(
        warned.out.contains("CLIENT-LIMITED (thread 0 ")
            && warned.out.contains("(client_limited: warn: judged anyway)"),
        "{}",
        warned.out
    );
}

/// Four paced streams on two client threads: each thread owns two streams,
/// their figures merge, and the self-check passes the gate.
#[test]
fn a_client_with_room_passes_its_self_check_on_two_threads() {
    let (sim, url) = external_sim_with("fixtures/sim/sglang.yaml", &["--itl", "20ms"]);
    let o = servegate(&["run", "tests/suites/client/paced.yaml", "--target", &url]);
    drop(sim);
    let out = o.out;
    assert_eq!(o.code, Some(0), "{out}");
    assert_has(
        &out,
        &[
            "pass client self-check: 2 threads (suite), busy ≤ ",
            ", client error itl.p50 ±",
            ": every gated figure within 2% (0.1ms) of the server's",
            "    client thread 0: 2 streams, busy ",
            "    client thread 1: 2 streams, busy ",
        ],
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

/// Code probes run the answer's code with the probe's tests appended: a
/// correct function passes, a wrong one fails at the test it breaks, an
/// endless loop is killed at the time limit, and the sandbox sees none of
/// servegate's environment.
#[test]
fn code_probes_run_the_answer_against_its_tests_in_a_sandbox() {
    let secret = std::path::Path::new("hunter2");
    let o = servegate_with(
        &["run", "tests/suites/code.yaml"],
        &[("SERVEGATE_TEST_SECRET", secret)],
    );
    let out = o.out;
    assert_eq!(o.code, Some(1), "{out}");
    for ok in ["correct", "secret", "unfenced"] {
        assert_eq!(
            verdict(&out, &format!("code::correctness::{ok}")),
            "ok",
            "{ok}"
        );
    }
    assert_has(
        &failure_of(&out, "code::correctness::wrong"),
        &[
            "error: assertion failed: expected the python code in content passes its 3 tests (python3)",
            "--> tests/suites/code.yaml:19:9",
            "found:    failed test: assert not is_prime(91)",
            "the program exited with code 1",
            "code run (from the ```python block), tests from line 5:",
            "      1 | __name__ = \"servegate_probe\"; __import__(\"sys\").modules[__name__] = __import__(\"sys\").modules[\"__main__\"]  # a main guard does not run; the tests do",
            "      3 |     return n % 2 == 1",
            "    | AssertionError",
        ],
    );
    assert_has(
        &failure_of(&out, "code::correctness::endless"),
        &["found:    killed at the 1s wall-clock limit (an endless loop?)"],
    );
}

/// A project of its own in a temporary directory: `snapshots/` at its root,
/// the snapshot suites under `suites/` with their simulator profiles.
fn snapshot_project(tag: &str) -> std::path::PathBuf {
    let root =
        std::env::temp_dir().join(format!("servegate-snapshots-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("snapshots")).unwrap();
    std::fs::create_dir_all(root.join("suites")).unwrap();
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in ["a", "b", "gate"] {
        let text = std::fs::read_to_string(here.join(format!("tests/suites/snapshot/{name}.yaml")))
            .unwrap()
            .replace(
                "fixtures/sim/",
                &format!("{}/fixtures/sim/", here.display()),
            );
        std::fs::write(root.join(format!("suites/{name}.yaml")), text).unwrap();
    }
    root
}

/// `servegate` in `cwd` with these variables (and no CI or INSTA_* unless given).
fn servegate_in(
    cwd: &std::path::Path,
    args: &[&str],
    vars: &[(&str, &str)],
) -> (Option<i32>, String) {
    let mut cmd = command(&[], &[]);
    cmd.args(args).current_dir(cwd);
    for v in [
        "CI",
        "TF_BUILD",
        "INSTA_UPDATE",
        "INSTA_FORCE_PASS",
        "SERVEGATE_TARGET",
        "SERVEGATE_SNAPSHOTS",
        "SERVEGATE_OUT",
        "CARGO_TARGET_DIR",
    ] {
        cmd.env_remove(v);
    }
    cmd.envs(vars.iter().copied());
    merged(cmd)
}

/// `servegate review` in `project`, answering `answers` on stdin.
fn review(project: &std::path::Path, args: &[&str], answers: &str) -> String {
    let mut child = command(&[], &[])
        .arg("review")
        .args(args)
        .current_dir(project)
        .env_remove("SERVEGATE_SNAPSHOTS")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), answers.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Snapshots are a stage of their own: a missing or changed answer fails
/// `<suite>::snapshot::<probe>` and leaves the probe, and the gates, alone
/// (unless `snapshot: gate`); the pending answer goes beside the snapshot
/// locally and into the run directory in CI; `INSTA_FORCE_PASS` passes
/// nothing; paths are the suite's project's, wherever servegate runs from.
#[test]
fn snapshots_are_a_review_stage_of_their_own() {
    let root = snapshot_project("stage");
    let suites = root.join("suites");
    let snap = root.join("snapshots/snap/sim-snap/capital.snap");
    let pending = root.join("snapshots/snap/sim-snap/capital.snap.new");
    // No snapshot, nothing written: the snapshot trial fails, the probe passes.
    let (code, out) = servegate_in(&suites, &["run", "a.yaml"], &[("INSTA_UPDATE", "no")]);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(verdict(&out, "snap::correctness::capital"), "ok", "{out}");
    assert_eq!(verdict(&out, "snap::snapshot::capital"), "FAILED", "{out}");
    assert!(ran_before(
        &out,
        "snap::correctness::capital",
        "snap::snapshot::capital"
    ));
    assert!(ran_before(
        &out,
        "snap::snapshot::capital",
        "snap::correctness::twice"
    ));
    assert_has(
        &failure_of(&out, "snap::snapshot::capital"),
        &[
            "error: no snapshot yet: ",
            "--> a.yaml:10:5",
            "  | The capital of France is Paris.\n  | It lies on the Seine.",
            "= INSTA_UPDATE=no: nothing was written",
            "= a review item: the correctness probe and the performance gates do not depend on it",
        ],
    );
    assert!(!snap.exists() && !pending.exists());
    // Run from elsewhere: the same project, a pending answer beside the
    // snapshot, pointing at the suite and the probe's line.
    let a = suites.join("a.yaml");
    let (_, out) = servegate_in(
        std::path::Path::new("/"),
        &["run", a.to_str().unwrap()],
        &[],
    );
    assert_has(
        &failure_of(&out, "snap::snapshot::capital"),
        &["capital.snap.new for review: `servegate review` accepts or rejects it"],
    );
    assert_has(
        &std::fs::read_to_string(&pending).unwrap(),
        &[
            "source: suites/a.yaml",
            "assertion_line: 10",
            "description: snap::snapshot::capital",
            "model: sim-snap",
        ],
    );
    assert!(
        root.join("target/servegate/latest/report.json").exists(),
        "the run's output is in its project"
    );
    // In CI nothing is written into the checkout, and INSTA_FORCE_PASS passes nothing.
    let _ = std::fs::remove_file(&pending);
    let out_dir = root.join("ci-out");
    let (_, out) = servegate_in(
        &suites,
        &["run", "a.yaml", "--out-dir", out_dir.to_str().unwrap()],
        &[("CI", "true"), ("INSTA_FORCE_PASS", "1")],
    );
    assert_has(
        &out,
        &["note: INSTA_FORCE_PASS is ignored: a changed answer never passes its snapshot trial"],
    );
    assert_eq!(verdict(&out, "snap::snapshot::capital"), "FAILED", "{out}");
    assert!(!pending.exists());
    assert!(std::fs::read_dir(out_dir.join("runs")).unwrap().any(|run| {
        run.unwrap()
            .path()
            .join("snapshots/snap/sim-snap/capital.snap.new")
            .exists()
    }));
    // Recorded, then changed: a diff, and the gate still passes.
    let (_, out) = servegate_in(&suites, &["run", "a.yaml"], &[("INSTA_UPDATE", "always")]);
    assert_has(&out, &["servegate: snapshot recorded: ", "capital.snap"]);
    let (code, out) = servegate_in(&suites, &["run", "b.yaml"], &[("INSTA_UPDATE", "no")]);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(verdict(&out, "snap::correctness::capital"), "ok", "{out}");
    assert_eq!(verdict(&out, "snap::performance::quick"), "ok", "{out}");
    assert_has(
        &failure_of(&out, "snap::snapshot::capital"),
        &[
            "error: snapshot changed: ",
            "--> b.yaml:11:5",
            "-The capital of France is Paris.\n+The capital of France is Lyon.",
        ],
    );
    // `snapshot: gate`: the changed answer gates the performance gate.
    let (_, out) = servegate_in(&suites, &["run", "gate.yaml"], &[("INSTA_UPDATE", "no")]);
    assert_eq!(verdict(&out, "snap::correctness::capital"), "ok", "{out}");
    assert_has(
        &failure_of(&out, "snap::performance::quick"),
        &[
            "gated: snapshot capital changed (`snapshot: gate`)",
            "see snap::snapshot::capital",
        ],
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// The shipped suite's first run against a server it has no snapshots of
/// (here: an empty snapshots directory, in CI): every probe and gate gives
/// its verdict, and only the snapshot trials fail, pending review, with the
/// whole answer in the message and nothing written into the checkout.
#[test]
fn a_first_run_gives_probe_and_gate_verdicts_with_snapshots_pending() {
    let dir = std::env::temp_dir().join(format!("servegate-first-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let snapshots = dir.join("snapshots");
    let out_dir = dir.join("out");
    let (code, out) = servegate_in(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")),
        &[
            "run",
            "suites/sglang.yaml",
            "--out-dir",
            out_dir.to_str().unwrap(),
        ],
        &[
            ("CI", "true"),
            ("SERVEGATE_SNAPSHOTS", snapshots.to_str().unwrap()),
        ],
    );
    assert_eq!(code, Some(1), "{out}");
    for probe in ["arithmetic", "is_prime", "server_contract"] {
        assert_eq!(
            verdict(&out, &format!("sglang::correctness::{probe}")),
            "ok",
            "{out}"
        );
        assert_eq!(
            verdict(&out, &format!("sglang::snapshot::{probe}")),
            "FAILED",
            "{out}"
        );
    }
    for gate in ["single_stream_decode", "concurrency_8"] {
        assert_eq!(
            verdict(&out, &format!("sglang::performance::{gate}")),
            "ok",
            "{out}"
        );
    }
    assert_has(
        &failure_of(&out, "sglang::snapshot::arithmetic"),
        &[
            "error: no snapshot yet: ",
            "received:\n  | finish_reason: stop\n  | --- content ---\n  | 4",
        ],
    );
    assert!(
        !snapshots.exists(),
        "nothing is written into the checkout in CI"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `servegate review` shows each pending answer with its probe's line,
/// prompt, model and diff, and takes a, r, s or q on stdin; answers made in
/// CI are accepted into the project with `--from`.
#[test]
fn servegate_review_accepts_and_rejects_through_stdin() {
    let root = snapshot_project("review");
    let suites = root.join("suites");
    let snap = root.join("snapshots/snap/sim-snap/capital.snap");
    let pending = root.join("snapshots/snap/sim-snap/capital.snap.new");
    servegate_in(&suites, &["run", "a.yaml"], &[]);
    let shown = review(&root, &[], "a\n");
    assert_has(
        &shown,
        &[
            "── pending 1 of 1: ",
            "probe:   suites/a.yaml:10  (snap::snapshot::capital)",
            "prompt:  What is the capital of France?",
            "model:   sim-snap   server version: servegate-sim",
            "new snapshot (none stored yet):",
            "+The capital of France is Paris.",
            "accept (a), reject (r), skip (s), quit (q)? ",
            "servegate: 1 accepted, 0 rejected, 0 skipped",
        ],
    );
    assert!(snap.exists() && !pending.exists());
    assert!(
        !std::fs::read_to_string(&snap)
            .unwrap()
            .contains("assertion_line")
    );
    let (_, out) = servegate_in(&suites, &["run", "a.yaml"], &[("INSTA_UPDATE", "no")]);
    assert_eq!(verdict(&out, "snap::snapshot::capital"), "ok", "{out}");
    // A changed answer, rejected: the stored answer stays.
    servegate_in(&suites, &["run", "b.yaml"], &[]);
    let shown = review(&root, &["suites/b.yaml"], "x\nr\n");
    assert_has(
        &shown,
        &[
            "`x`: answer a, r, s or q",
            "-The capital of France is Paris.",
            "+The capital of France is Lyon.",
            "0 accepted, 1 rejected",
        ],
    );
    assert!(!pending.exists());
    assert!(std::fs::read_to_string(&snap).unwrap().contains("Paris"));
    // Made in CI, downloaded, accepted into the project.
    let out_dir = root.join("ci-out");
    servegate_in(
        &suites,
        &["run", "b.yaml", "--out-dir", out_dir.to_str().unwrap()],
        &[("CI", "true")],
    );
    let run = std::fs::read_dir(out_dir.join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let shown = review(&root, &["--from", run.to_str().unwrap()], "s\n");
    assert_has(&shown, &["0 accepted, 0 rejected, 1 skipped"]);
    let shown = review(
        &root,
        &["--from", run.to_str().unwrap(), "--accept-all"],
        "",
    );
    assert_has(&shown, &["+The capital of France is Lyon.", "1 accepted"]);
    assert!(std::fs::read_to_string(&snap).unwrap().contains("Lyon"));
    assert_eq!(review(&root, &[], ""), "servegate: no pending snapshots\n");
    let _ = std::fs::remove_dir_all(&root);
}

/// A dataset probe asks every scored item (after the few-shot examples),
/// grades the last number of each answer and judges the accuracy and its
/// Wilson bound; a failure lists the wrong items and the record keeps all.
#[test]
fn dataset_accuracy_passes_and_fails_with_the_wrong_items() {
    run_expecting(&["run", "tests/suites/accuracy-good.yaml"], 0);
    let out = run_expecting(&["run", "tests/suites/accuracy-bad.yaml"], 1);
    assert_has(
        &failure_of(&out, "accuracy-bad::correctness::arithmetic"),
        &[
            "error: threshold failed: accuracy >= 0.75",
            "--> tests/suites/accuracy-bad.yaml:17:7",
            "measured: accuracy 0.625 (5/8 right, Wilson 95% interval 0.306–0.863)",
            "first wrong items (3 of 3), from fixtures/datasets/arithmetic.jsonl:",
            "  line 4: \"Goran reads for 25 minutes a day",
            "    expected \"375\", read \"376\"; answer: \"Let me work it out. The answer is 376.\"",
            // Two examples, then the question.
            "Answer: 36\\n\\nQuestion: A notebook costs $5",
        ],
    );
    // The lower bound 0.306 meets `>= 0.3`: only the point estimate failed.
    assert!(!out.contains("threshold failed: accuracy.lower95"), "{out}");
}

/// Each server-contract check catches a simulator that breaks it; the
/// shipped suite's contract probe passes on the healthy simulator.
#[test]
fn contract_checks_catch_a_server_that_breaks_them() {
    let out = run_expecting(&["run", "tests/suites/contract-broken.yaml"], 1);
    for (probe, needle) in [
        (
            "max_tokens",
            "error: contract broken: max_tokens: asked for at most 16 tokens, the server generated 19 (1 by server usage, 19 in the stream)",
        ),
        (
            "ignore_eos",
            "error: contract broken: ignore_eos: with ignore_eos and max_tokens 64 the server generated 40 token(s), finish_reason stop",
        ),
        (
            "usage",
            "error: contract broken: usage: usage says 1 completion tokens, but 19 chunks of the stream carried tokens",
        ),
        (
            "stop",
            "error: contract broken: stop: the stop sequence \" 12\" is in the answer at character 23",
        ),
        (
            "cache_determinism",
            "error: contract broken: cache_determinism: at temperature 0 the same request, asked again (a prefix-cache hit), answered differently",
        ),
    ] {
        let failure = failure_of(&out, &format!("contract::correctness::{probe}"));
        assert_has(
            &failure,
            &[needle, "--> tests/suites/contract-broken.yaml:"],
        );
    }
    let o = servegate(&[
        "run",
        "suites/sglang.yaml",
        "--",
        "--exact",
        "sglang::correctness::server_contract",
    ]);
    let out = o.out;
    assert_eq!(
        verdict(&out, "sglang::correctness::server_contract"),
        "ok",
        "{out}"
    );
}

/// A reasoning model that spends its budget thinking gets a failure that
/// says so; `chat_template_kwargs` and `separate_reasoning` reach the server.
#[test]
fn reasoning_budget_and_thinking_switches() {
    let out = run_expecting(&["run", "tests/suites/reasoning-budget.yaml"], 1);
    assert_has(
        &failure_of(&out, "thinking::correctness::budget"),
        &[
            "error: assertion failed: expected content (trimmed) equals \"4\"",
            "note:     the model spent all 8 tokens reasoning and wrote no answer (finish_reason length); raise max_tokens or disable thinking (`chat_template_kwargs: {enable_thinking: false}`)",
        ],
    );
    assert_eq!(
        verdict(&out, "thinking::correctness::no_thinking"),
        "ok",
        "{out}"
    );
    assert_eq!(
        verdict(&out, "thinking::correctness::inline"),
        "ok",
        "{out}"
    );
    // The whole answer in reasoning, content empty: a hint to read it there.
    let answer = failure_of(&out, "thinking::correctness::answer_in_reasoning");
    assert_has(
        &answer,
        &[
            "error: assertion failed: expected content contains \"Paris\"\n  --> tests/suites/reasoning-budget.yaml:29:9\n",
            "help:     content is empty and the answer is in reasoning (31 chars); to check it there, add `in: reasoning` (or `in: all`) to the assertion",
        ],
    );
    assert!(!answer.contains("note:     the model spent"), "{answer}");
    let budget = failure_of(&out, "thinking::correctness::budget");
    assert!(!budget.contains("help:"), "{budget}");
}

/// On GitHub Actions a run annotates the failing lines of the suite file and
/// appends its Markdown summary to the step summary.
#[test]
fn github_actions_get_annotations_and_a_step_summary() {
    let summary = std::env::temp_dir().join(format!("servegate-summary-{}.md", std::process::id()));
    std::fs::write(&summary, "earlier steps\n").unwrap();
    let mut cmd = command(&["run", "tests/suites/wrong_arithmetic.yaml"], &[]);
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary);
    let (code, out) = merged(cmd);
    assert_eq!(code, Some(1), "{out}");
    assert_has(
        &out,
        &[
            "::error file=tests/suites/wrong_arithmetic.yaml,line=13,title=wrong%3A%3Acorrectness%3A%3Aarithmetic::error: assertion failed: expected content matches regex `\\b4\\b`%0A",
            "::error file=tests/suites/wrong_arithmetic.yaml,line=19,title=wrong%3A%3Aperformance%3A%3Adecode::gated: correctness probe arithmetic failed",
        ],
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert_has(
        &md,
        &[
            "earlier steps\n## ❌ servegate: 1 passed, 2 failed",
            "| `wrong::correctness::arithmetic` | ❌ failed |",
            "<details><summary><code>wrong::correctness::arithmetic</code>",
        ],
    );
    let _ = std::fs::remove_file(&summary);
}

/// Proxy variables are ignored by both transports alike: with a dead proxy
/// in the environment the run still reaches its server directly (it used to
/// send discovery through the proxy and the streams around it).
#[test]
fn proxy_variables_are_ignored_by_every_request() {
    let dead = std::path::Path::new("http://127.0.0.1:1");
    let env: Vec<(&str, &std::path::Path)> = [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .into_iter()
    .map(|k| (k, dead))
    .collect();
    let o = servegate_with(
        &[
            "run",
            "tests/suites/server-timings.yaml",
            "--",
            "correctness::arithmetic",
        ],
        &env,
    );
    let out = o.out;
    assert_eq!(o.code, Some(0), "{out}");
    assert_eq!(
        verdict(&out, "server_timings::correctness::arithmetic"),
        "ok"
    );
}

/// `not_degenerate` names what is degenerate and where: a run of one
/// character, a loop with its repeated unit, replacement characters; a
/// sound answer, and a tolerated count, pass.
#[test]
fn degenerate_answers_fail_with_the_offending_span() {
    let out = run_expecting(&["run", "tests/suites/degenerate.yaml"], 1);
    for (name, want) in [
        ("bang", "FAILED"),
        ("loop", "FAILED"),
        ("mojibake", "FAILED"),
        ("tolerated", "ok"),
        ("water", "ok"),
    ] {
        let trial = format!("degenerate::correctness::{name}");
        assert_eq!(verdict(&out, &trial), want, "{trial}: {out}");
    }
    assert_has(
        &failure_of(&out, "degenerate::correctness::bang"),
        &[
            "expected content is not degenerate",
            "--> tests/suites/degenerate.yaml:14:9",
            "found:    a run of 109 × '!' (at most 80 allowed); characters 1–110: \"!!!!",
        ],
    );
    assert_has(
        &failure_of(&out, "degenerate::correctness::loop"),
        &[
            "--> tests/suites/degenerate.yaml:18:9",
            "% of it repeats an earlier part of it (at most 60% allowed); characters ",
            "        return False\" repeated 12 times",
        ],
    );
    assert_has(
        &failure_of(&out, "degenerate::correctness::mojibake"),
        &[
            "found:    2 replacement or control characters (at most 0 allowed); the first, '\u{FFFD}', at character 14: ",
        ],
    );
}

/// `format: humaneval` against scripted answers: through the chat API the
/// answer's code block (a whole function, or the body alone) follows the
/// prompt; through the completions API the completion continues it up to
/// `HumanEval`'s stop sequences. A wrong answer names its failing assertion,
/// an endless one the wall-clock limit; every item is in the run record
/// with its sandbox run.
#[test]
fn humaneval_problems_run_against_their_own_tests() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let chat = run_expecting(
        &["run", "tests/suites/humaneval.yaml", "--out-dir", out_dir],
        1,
    );
    assert_eq!(
        verdict(&chat, "humaneval::correctness::all"),
        "FAILED",
        "{chat}"
    );
    assert_eq!(
        verdict(&chat, "humaneval::correctness::first_three"),
        "ok",
        "{chat}"
    );
    assert_has(
        &failure_of(&chat, "humaneval::correctness::all"),
        &[
            "error: threshold failed: pass_at_1 >= 0.6",
            "--> tests/suites/humaneval.yaml:",
            "measured: pass_at_1 0.500 (2/4 passed, Wilson 95% interval 0.150–0.850); sandbox time ",
            "Mini/1 (line 2): the program exited 0 before its tests finished: the line after the last test never printed (its code ended the run: `os._exit`, `sys.exit`, an `atexit` hook or exception hook that exits 0); AssertionError at `assert candidate('one') == 'one'`",
            "Mini/3 (line 4): killed at the 2s wall-clock limit (an endless loop?)",
            "Complete the following Python function.",
        ],
    );
    assert!(
        chat.contains("humaneval::correctness::first_three: pass_at_1 0.667 (2/3 passed"),
        "{chat}"
    );
    let completions = run_expecting(&["run", "tests/suites/humaneval-completions.yaml"], 0);
    assert!(
        completions
            .contains("humaneval_completions::correctness::all: pass_at_1 0.750 (3/4 passed"),
        "{completions}"
    );
    // The record: every item, its program and its sandbox run.
    let record = std::fs::read_dir(dir.path().join("runs"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path().join("report.json"))
        .find(|p| p.exists())
        .expect("a run record");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record).unwrap()).unwrap();
    let all = &record["suites"][0]["datasets"][0];
    assert_eq!(all["figure"], "pass_at_1");
    let items = all["items"].as_array().unwrap();
    assert_eq!(items.len(), 4);
    let evens = &items[2];
    assert_eq!(evens["task_id"], "Mini/2");
    assert_eq!(evens["correct"], true);
    // The body alone continued the prompt's function.
    let program = evens["extracted"].as_str().unwrap();
    assert!(
        program.contains("    \"\"\"\n    return [x for x in xs if x % 2 == 0]\n"),
        "{program}"
    );
    assert!(
        program.contains("check(evens)\nprint(\"\\nservegate: every test ran\", "),
        "{program}"
    );
    assert!(
        items
            .iter()
            .all(|i| i["run"]["elapsed_s"].as_f64().is_some())
    );
}

/// `recheck:` asks the suite's probes again while a gate's load runs: at a
/// concurrency the simulator serves right they pass; past the batch size at
/// which it turns answers to "!", the recheck trial fails naming the probe,
/// the load, the failed assertion, the diff against the idle answer and the
/// degenerate load answers — while the gate's own figures pass.
#[test]
fn recheck_catches_a_server_wrong_only_under_load() {
    let out = run_expecting(&["run", "tests/suites/recheck.yaml"], 1);
    for (name, want) in [
        ("recheck::correctness::arithmetic", "ok"),
        ("recheck::performance::calm", "ok"),
        ("recheck::performance::calm::recheck", "ok"),
        ("recheck::performance::busy", "ok"),
        ("recheck::performance::busy::recheck", "FAILED"),
    ] {
        assert_eq!(verdict(&out, name), want, "{name}: {out}");
    }
    assert!(
        ran_before(
            &out,
            "recheck::performance::busy",
            "recheck::performance::busy::recheck"
        ),
        "{out}"
    );
    // The recheck's tokens beside the load are counted with the load's:
    // the server's counter agrees with what the client received.
    assert_has(
        &out,
        &["pass token_drift_metrics <= 1.00% (measured 0.00%)"],
    );
    assert_has(
        &failure_of(&out, "recheck::performance::busy::recheck"),
        &[
            "error: correctness under load failed",
            "--> tests/suites/recheck.yaml:30:14",
            "load:     closed loop, concurrency 8, 48 requests,",
            "probe arithmetic: ",
            " answer(s) under load went wrong; the first:",
            "    assertion failed: expected content matches regex `\\b4\\b`",
            "--> tests/suites/recheck.yaml:14:9",
            "    the greedy answer changed (- alone, + under load):\n    - \"4\"\n    + \"!\"",
            "of the 8 load answers kept whole are degenerate:",
            "a run of 96 × '!' (at most 80 allowed)",
        ],
    );
    // Only the recheck selected: its gate runs first, and says so.
    let out = run_expecting(
        &[
            "run",
            "tests/suites/recheck.yaml",
            "--",
            "--exact",
            "recheck::performance::calm::recheck",
        ],
        0,
    );
    assert!(
        out.contains("the gates of its 1 selected recheck(s) run first"),
        "{out}"
    );
    assert_eq!(
        verdict(&out, "recheck::performance::calm::recheck"),
        "ok",
        "{out}"
    );
}
