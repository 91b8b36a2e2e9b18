//! Performance gates: the client's self-check (a saturated client, one
//! with room), repeats and their interval, sweeps over a level, and
//! `recheck:` probes asked again under load.

use crate::common::run::{run_expecting, servegate, servegate_with};
use crate::common::verdicts::{assert_has, failure_of, verdict};
use crate::{external_sim_with, position, ran_before};

/// `tests/suites/client/starved.yaml` against a simulator sending tokens
/// as fast as it can (with `args` beside), in an output directory of its
/// own: what it printed, and its record — or `None` where the run passed
/// because its one client thread had idle time (over a tenth of the window
/// neither busy nor waiting for a CPU): on a machine loaded past both
/// processes' share (CI's stress-ng on two cores), the simulator, starved
/// too, set the rate, and the self-check rightly found no figure the
/// client moved. Said on stderr; the test proves nothing more of it.
fn starved_run(args: &[&str]) -> Option<(crate::common::run::Run, serde_json::Value)> {
    let (sim, url) = external_sim_with(
        "fixtures/sim/sglang.yaml",
        &["--itl", "0ms", "--capacity", "100000"],
    );
    let dir = tempfile::tempdir().unwrap();
    let mut all = vec![
        "run",
        "tests/suites/client/starved.yaml",
        "--target",
        &url,
        "--out-dir",
        dir.path().to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let o = servegate(&all);
    drop(sim);
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("latest/report.json")).unwrap(),
    )
    .unwrap();
    // Each gate's client must have been saturated for what the test holds
    // of it: on a loaded machine the simulator, starved, may set the rate.
    let idle = |gate: usize| {
        let thread = &record["suites"][0]["gates"][gate]["client"]["threads"][0];
        let share = |k: &str| thread[k].as_f64().unwrap_or(0.0);
        1.0 - share("busy") - share("waited")
    };
    let idlest = idle(0).max(idle(1));
    if args.is_empty() && idlest > 0.10 {
        eprintln!(
            "note: a client thread was idle {:.0}% of its window (the simulator, starved by this machine's load, set the rate): the saturated client was not tested in this run",
            100.0 * idlest
        );
        return None;
    }
    Some((o, record))
}

/// A load one client thread cannot keep up with (tokens as fast as the
/// server sends them, 32 streams): the gate whose verdict the client's
/// rate could change fails, with the thread's own figures, and the record
/// says why; the gate whose bound that rate already meets passes, its
/// figures marked client-limited.
#[test]
fn a_saturated_client_fails_its_gate_and_says_it_was_the_bottleneck() {
    let Some((o, record)) = starved_run(&[]) else {
        return;
    };
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
        first.starts_with("error: the client could have changed this gate's verdict (output_tok_s ")
            && first.contains(" was set by the client (thread 0 busy ")
            && (first.ends_with(
                "): it measures servegate, not the server; its threads had no room: raise client_threads"
            ) || first.ends_with("(other work on their cores): give servegate cores of its own (taskset, a cpuset) or run it on a quieter host")),
        "{failure}"
    );
    assert_has(
        &failure,
        &[
            "  --> tests/suites/client/starved.yaml:10:5",
            "`load.client_limited: warn` judges these figures anyway",
            "    client thread 0: 32 streams, busy ",
        ],
    );
    assert!(
        first.contains("and the server's could be higher: the true figure could lie at "),
        "{failure}"
    );
    // A bound the client's own rate meets is met: the gate passes, its
    // figures marked.
    assert_eq!(verdict(&out, "starved::performance::roomy"), "ok", "{out}");
    assert!(out.contains("pass output_tok_s >= 1.0 tok/s"), "{out}");
    assert!(
        out.contains(
            "but no threshold's verdict depends on them: kept, not compared, in the history"
        ),
        "{out}"
    );
    assert!(
        record["suites"][0]["gates"][1]["client"]["limited"].is_string(),
        "{record}"
    );
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
    assert!(client["at_stake"].is_string(), "{gate}");
    // Marked, but judged anyway, when the run says so: the gate at stake
    // fails on its threshold alone.
    let (warned, record) = starved_run(&["--client-limited", "warn"]).unwrap();
    assert_eq!(warned.code, Some(1), "{}", warned.out);
    let failure = failure_of(&warned.out, "starved::performance::flood");
    assert!(
        failure.starts_with("error: threshold failed: output_tok_s >= "),
        "{failure}"
    );
    // At stake as above, or (its simulator starved) not limited at all.
    assert_eq!(
        record["suites"][0]["gates"][0]["client"]["at_stake"].is_string(),
        warned.out.contains("CLIENT-LIMITED (output_tok_s ")
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

/// `extra_body` fields reach the server, from the defaults and from a
/// probe's or gate's own: SGLang's `min_tokens` (which the simulator
/// honours) makes a one-token answer long enough for `min_chars: 20` and a
/// gate's decode rate, and a failing probe shows every field it sent, its
/// own over the defaults'.
#[test]
fn extra_body_fields_reach_the_server_and_show_in_the_sent_body() {
    let out = run_expecting(&["run", "tests/suites/extra-body.yaml"], 0);
    assert_has(&out, &["pass decode_tok_s.mean >= 1.0 tok/s"]);
    let out = run_expecting(&["run", "tests/suites/extra-body-shown.yaml"], 1);
    assert_has(
        &failure_of(&out, "extra_body_shown::correctness::shown"),
        &[
            r#""min_tokens":1,"model":"sim-steady","return_hidden_states":false,"stream":true"#,
            r#""top_k":1}"#,
        ],
    );
}

/// SGLang with `--admin-api-key` takes only that key at `/flush_cache`:
/// `target.admin_key_env` sends it there (and the API key everywhere else);
/// without it the flush is refused and the gate fails saying so. Neither
/// key is printed.
#[test]
fn flush_cache_sends_the_admin_key_where_the_server_has_one() {
    let (sim, url) = external_sim_with(
        "fixtures/sim/steady.yaml",
        &[
            "--api-key",
            "user-key-5531",
            "--admin-api-key",
            "admin-key-7219",
        ],
    );
    let env = [
        (
            "SERVEGATE_TEST_USER_KEY",
            std::path::Path::new("user-key-5531"),
        ),
        (
            "SERVEGATE_TEST_ADMIN_KEY",
            std::path::Path::new("admin-key-7219"),
        ),
    ];
    let ok = servegate_with(
        &["run", "tests/suites/admin-key.yaml", "--target", &url],
        &env,
    );
    assert_eq!(ok.code, Some(0), "{}", ok.out);
    let refused = servegate_with(
        &[
            "run",
            "tests/suites/admin-key-missing.yaml",
            "--target",
            &url,
        ],
        &env,
    );
    drop(sim);
    assert_eq!(refused.code, Some(1), "{}", refused.out);
    assert_has(
        &failure_of(&refused.out, "admin_key_missing::performance::cold_cache"),
        &["flush_cache failed before measuring: HTTP 401"],
    );
    for out in [&ok.out, &refused.out] {
        assert!(
            !out.contains("user-key-5531") && !out.contains("admin-key-7219"),
            "{out}"
        );
    }
}

/// A gate's `slo:` counts goodput and SLO attainment (SGLang
/// `bench_serving --goodput`'s figures): every request within a 5 s first
/// token is an attainment of 1; an objective of 1 ms, which no request
/// met, fails `slo_attainment >= 0.9` with the requests counted, and the
/// run's figures say how many of those sent met them.
#[test]
fn slo_attainment_is_the_share_of_requests_sent_within_every_objective() {
    let out = run_expecting(&["run", "tests/suites/slo.yaml"], 1);
    assert_eq!(verdict(&out, "slo::performance::within"), "ok", "{out}");
    assert_has(
        &out,
        &[
            "goodput 6 of 6 requests sent met the SLOs (slo_attainment 1.000)",
            "pass slo_attainment >= 0.990 (measured 1.000)",
        ],
    );
    assert_has(
        &failure_of(&out, "slo::performance::beyond"),
        &[
            "error: threshold failed: slo_attainment >= 0.900\n  --> tests/suites/slo.yaml:24:7",
            "measured: slo_attainment = 0.000\n",
            "samples:  0 of 6 requests sent met every objective (0 surely, 0 had the client delayed none of them)",
        ],
    );
}

/// `!=` end to end: parsed, judged and said. No request fails on the
/// simulator, so `errors != 0` fails with the measured 0 and the line it
/// stands on, and `decode_tok_s.mean != 0` passes.
#[test]
fn a_point_bound_fails_only_at_its_point() {
    let out = run_expecting(&["run", "tests/suites/point-bounds.yaml"], 1);
    assert_has(&out, &["pass decode_tok_s.mean != 0"]);
    assert_has(
        &failure_of(&out, "point::performance::refuses_some"),
        &[
            "error: threshold failed: errors != 0\n  --> tests/suites/point-bounds.yaml:16:7",
            "measured: errors = 0\n",
        ],
    );
}
