//! The server a run measures: an API key from the environment, an external
//! server named as such, proxy variables ignored, and server-side timings
//! per dialect.

use crate::common::run::{command, run_expecting, servegate, servegate_with};
use crate::common::verdicts::{assert_has, failure_of, verdict};
use crate::external_sim;

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
            "tests/suites/server-timings-sglang.yaml",
            "tests/suites/no-server-timings.yaml",
        ],
        1,
    );
    // SGLang's `/generate` timings, beside the client's.
    assert_eq!(
        verdict(&out, "server_timings_sglang::performance::decode"),
        "ok"
    );
    assert_has(
        &out,
        &[
            "server's own timings (n=4): ttft mean ",
            " (client ttft mean ",
            "), e2e mean ",
            "queue mean 0us p99 0us, decode mean ",
            "pass server_ttft.p99 <= 5.000s (measured ",
            "pass server_queue.max <= 1.00ms (measured 0us)",
        ],
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
            "2 requests succeeded, but this figure needs an API whose server reports its own timings (`api: llamacpp-completion`, or `api: sglang-generate` against SGLang with `--enable-metrics`)",
        ],
    );
}

/// SGLang's `--incremental-streaming-output` sends `/generate`'s text as
/// segments: servegate reads the mode from `/server_info` and joins them,
/// so the answer is whole and each segment is counted once.
#[test]
fn incremental_generate_output_is_joined_as_the_server_reports_it() {
    let out = crate::common::run::run_expecting(&["run", "tests/suites/incremental.yaml"], 0);
    crate::common::verdicts::assert_has(
        &out,
        &["pass token_drift_chunks <= 5.00% (measured 0.00%)"],
    );
}
