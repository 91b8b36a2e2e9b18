//! What the server reports of each request beside its token counts, as
//! SGLang 0.5.23 sends it (speculative acceptance, retractions, cached and
//! reasoning tokens), judged both ways: a server that reports good figures
//! passes, one that reports bad ones fails on them, one that reports none
//! cannot pass, and one that forges a cache hit fails its requests.

use crate::common::run::run_expecting;
use crate::common::verdicts::{assert_has, failure_of, verdict};
use crate::record_of;

/// A gate's figure `key` in the run record.
fn figure(record: &serde_json::Value, gate: &str, key: &str) -> f64 {
    let gates = record["suites"][0]["gates"].as_array().unwrap();
    let g = gates
        .iter()
        .find(|g| g["gate"] == gate)
        .unwrap_or_else(|| panic!("no gate `{gate}` in {record}"));
    g["figures"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("no figure `{key}` in {g}"))
}

/// Speculative decoding (3 tokens a verify step) and a prefix cache on
/// SGLang's `/generate`: acceptance, retractions and the hit rate pass
/// their gates; `itl_chunk` is `bench_serving`'s ITL, a whole chunk's gap,
/// about 3 times the per-token `itl` (more where a loaded machine read two
/// chunks at once, never less than the tokens a chunk carried allow).
#[test]
fn speculative_decoding_and_the_prefix_cache_are_gated_from_the_servers_reports() {
    let out = run_expecting(&["run", "tests/suites/server-reports.yaml"], 0);
    assert_has(
        &out,
        &[
            "pass spec_accept_length.mean >= 2.50 tokens (measured 3.00 tokens)",
            "pass retractions == 0 (measured 0)",
        ],
    );
    let record = record_of(&out);
    let hit = figure(&record, "prefix_cache", "cache_hit_rate");
    // 8 requests of one 64-token prefix and 8 unique tokens: all but the
    // first are served 64 of their ~72 tokens from the cache.
    assert!((0.5..1.0).contains(&hit), "cache_hit_rate {hit}");
    let chunk = figure(&record, "speculative", "itl_chunk.p50");
    let token = figure(&record, "speculative", "itl.p50");
    assert!(
        chunk >= 2.5 * token && chunk <= 10.0 * token,
        "itl_chunk.p50 {chunk} against itl.p50 {token}"
    );
}

/// The same reports through the chat API: reasoning tokens from
/// `usage.completion_tokens_details`, cached ones from
/// `usage.prompt_tokens_details`, and, where the request asked
/// (`return_spec_tokens_details`), the speculative accept length from the
/// `sglext` chunk SGLang sends before the usage.
#[test]
fn reasoning_and_cached_tokens_come_from_chat_usage() {
    let out = run_expecting(&["run", "tests/suites/server-reports-chat.yaml"], 0);
    assert_has(
        &out,
        &[
            "pass reasoning_tokens.mean >= 5.00 tokens (measured 16.00 tokens)",
            "pass cache_hit_rate >= 0.500 (measured 0.750)",
            "pass spec_accept_length.mean >= 2.50 tokens (measured 3.00 tokens)",
        ],
    );
}

/// A server that retracts every request fails `retractions == 0` with the
/// count; a cache that serves nothing fails its hit rate, measured.
#[test]
fn retractions_and_a_cold_cache_fail_their_gates() {
    let out = run_expecting(&["run", "tests/suites/server-reports-bad.yaml"], 1);
    assert_has(
        &failure_of(&out, "server_reports_bad::performance::pressure"),
        &[
            "error: threshold failed: retractions == 0\n  --> tests/suites/server-reports-bad.yaml:11:7",
            "measured: retractions = 8\n",
            "measured: cache_hit_rate = 0.000\n",
            "samples:  0 cached of ",
            " prompt tokens in 4 requests",
        ],
    );
}

/// A server that reports none of it cannot pass a gate on it: each
/// threshold fails, saying what its figure needs (a reasoning count of 0,
/// which SGLang sends without a reasoning parser, is measured as 0).
#[test]
fn a_server_that_reports_nothing_never_passes_a_gate_on_its_reports() {
    let out = run_expecting(&["run", "tests/suites/server-reports-unreported.yaml"], 1);
    assert_has(
        &failure_of(&out, "server_reports_unreported::performance::unreported"),
        &[
            "measured: cache_hit_rate = nothing\n          2 requests succeeded, but this figure needs cached-token counts from the server for every request (SGLang `--enable-cache-report`",
            "measured: reasoning_tokens.mean = 0.00 tokens\n",
            "measured: spec_accept_length.mean = nothing\n          2 requests succeeded, but this figure needs speculative decoding reported",
            "measured: retractions = nothing\n          2 requests succeeded, but this figure needs retraction counts",
        ],
    );
}

/// A forged cache hit (more cached tokens than the prompt had) fails every
/// request as a protocol error that says so: the gate cannot pass on it.
#[test]
fn a_forged_cache_hit_fails_its_requests() {
    let out = run_expecting(&["run", "tests/suites/server-reports-forged.yaml"], 1);
    assert_eq!(
        verdict(&out, "server_reports_forged::performance::forged"),
        "FAILED",
        "{out}"
    );
    assert_has(
        &failure_of(&out, "server_reports_forged::performance::forged"),
        &[
            "errors:   2 (protocol ×2)",
            "cached prompt tokens of a ",
            "-token prompt: a cache hit it cannot have had",
        ],
    );
}

/// The server's own `/metrics` over the window: its running-requests
/// gauge, sampled while the load runs, shows the 4 streams reached it; its
/// counters give the speculative acceptance (3 tokens a verify step), no
/// retraction or abort, and the prefix cache's hits on a shared prefix.
#[test]
fn the_servers_metrics_prove_what_the_load_did() {
    let out = run_expecting(&["run", "tests/suites/server-metrics.yaml"], 0);
    assert_has(
        &out,
        &[
            "pass server.num_running_reqs.max >= 4 (measured 4)",
            "pass server.spec_accept_length >= 2.50 tokens (measured 3.00 tokens)",
            "pass server.retractions == 0 (measured 0)",
            "pass server.aborted == 0 (measured 0)",
        ],
    );
    let record = record_of(&out);
    let hit = figure(&record, "prefix_cache", "server.cache_hit_rate");
    assert!((0.5..1.0).contains(&hit), "server.cache_hit_rate {hit}");
    // The gauge was read inside the window, more than once.
    let mean = figure(&record, "reached", "server.num_running_reqs.mean");
    assert!(
        mean > 1.0 && mean <= 4.0,
        "server.num_running_reqs.mean {mean}"
    );
}

/// SGLang's gauges stand for a window only where it rewrote them in it,
/// twice at least: a window shorter than their refresh (one request of
/// 300 ms, rewritten at its prefill only) cannot measure them and fails
/// saying why; a window of 1.5 s, rewritten every 40 decode steps, passes
/// on the fresh values alone, the reads between two rewrites not counted.
#[test]
fn sglangs_gauges_count_only_where_it_rewrote_them() {
    let out = run_expecting(&["run", "tests/suites/server-gauges.yaml"], 1);
    let too_short = failure_of(&out, "server_gauges::performance::too_short");
    assert_has(
        &too_short,
        &[
            "measured: server.num_running_reqs.max = nothing\n          the server rewrote its gauges ",
            "in the window's ",
            "the window is no longer than their refresh",
            "SGLang rewrites its gauges at each prefill batch, every `decode_log_interval` decode steps (40 by default) and when it falls idle); lengthen the window",
        ],
    );
    let long_enough = "server_gauges::performance::long_enough";
    assert_eq!(verdict(&out, long_enough), "ok", "{out}");
    let running = figure(
        &record_of(&out),
        "long_enough",
        "server.num_running_reqs.max",
    );
    assert!((running - 1.0).abs() < 1e-9, "{running}");
}

/// The other way: a load of 2 streams fails a gate written for 8 with the
/// gauge's reading, a retracting server fails `server.retractions == 0`
/// with its count, and a server without speculative counters cannot pass
/// an acceptance gate: the message names the series it lacked.
#[test]
fn the_servers_metrics_fail_a_load_that_did_not_reach_it() {
    let out = run_expecting(&["run", "tests/suites/server-metrics-bad.yaml"], 1);
    assert_has(
        &failure_of(&out, "server_metrics_bad::performance::pressure"),
        &[
            "error: threshold failed: server.num_running_reqs.max >= 8\n  --> tests/suites/server-metrics-bad.yaml:11:7",
            "measured: server.num_running_reqs.max = 2\n",
            "measured: server.retractions = 16\n",
            "measured: server.spec_accept_length = nothing\n          /metrics has neither sglang:spec_verify_calls_total nor vllm:spec_decode_num_drafts_total: is speculative decoding on?",
        ],
    );
}

/// A server that cuts its streams counts the aborts: `server.aborted == 0`
/// fails with them, beside the transport errors the client saw.
#[test]
fn the_servers_abort_counter_fails_its_gate() {
    let out = run_expecting(&["run", "tests/suites/server-metrics-aborts.yaml"], 1);
    let failure = failure_of(&out, "server_metrics_aborts::performance::aborts");
    assert_has(
        &failure,
        &[
            "error: threshold failed: server.aborted == 0",
            "errors:   6 (transport ×6)",
        ],
    );
    assert!(
        !failure.contains("measured: server.aborted = 0\n")
            && failure.contains("measured: server.aborted = "),
        "{failure}"
    );
}

/// Each gate's window sends prompts of its own: against a server with a
/// prefix cache, a second gate of the same shape is not served from the
/// first one's prompts (before, every window sent the same prompts, and a
/// server kept from earlier runs read 81% hits); and a load whose prompts
/// the cache serves though it did not ask for reuse (one fixed prompt)
/// says so beside its figures.
#[test]
fn a_window_is_not_served_from_another_windows_prompts() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("cache.yaml");
    let profile =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sim/speculative.yaml");
    let gate = |name: &str, prompt: &str, bound: &str| {
        format!(
            "  - name: {name}\n    load: {{ concurrency: 1, requests: 4, {prompt}, output_tokens: 6, ignore_eos: true }}\n    thresholds: {{ server.cache_hit_rate: \"{bound}\" }}\n"
        )
    };
    std::fs::write(
        &suite,
        format!(
            "suite: cache\nsim: {{ profile: {} }}\nperformance:\n{}{}{}",
            profile.display(),
            gate("first", "input_tokens: 48", "<= 0.2"),
            gate("same_shape", "input_tokens: 48", "<= 0.2"),
            gate(
                "fixed",
                "prompt: \"Tell me about the week in review, in detail, day by day.\"",
                ">= 0.5"
            ),
        ),
    )
    .unwrap();
    let out = run_expecting(&["run", suite.to_str().unwrap()], 0);
    let fixed = out
        .split("cache::performance::fixed [")
        .nth(1)
        .unwrap_or_else(|| panic!("no figures of the fixed gate:\n{out}"));
    assert!(
        fixed.contains("note: the server's prefix cache served ")
            && fixed
                .contains("of this window's prompt tokens, though the load did not ask for reuse"),
        "{out}"
    );
    let synthetic = out.split("cache::performance::fixed [").next().unwrap();
    assert!(
        !synthetic.contains("note: the server's prefix cache"),
        "{out}"
    );
}

/// Requests the client abandons at its deadline (it closes their
/// connections) are counted by the server's own abort counter in the
/// gate's window: the read of `/metrics` after the window waits for the
/// server to notice them (the simulator, as SGLang, at its next token's
/// write, here 400 ms away). A gate whose every request failed cannot
/// pass, whatever the server counted.
#[test]
fn the_server_counts_the_requests_the_client_abandoned() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("slow.yaml");
    std::fs::write(
        &profile,
        "model: sim-slow\nttft: 20ms\nitl: 400ms\nreplies:\n  - match: '.*'\n    reply: ok\n",
    )
    .unwrap();
    let suite = dir.path().join("abandon.yaml");
    std::fs::write(
        &suite,
        format!(
            "suite: abandon\nsim: {{ profile: {} }}\ntarget:\n  timeouts: {{ total: 1s }}\nperformance:\n  - name: abandoned\n    load: {{ concurrency: 2, requests: 2, input_tokens: 8, output_tokens: 50, ignore_eos: true }}\n    thresholds: {{ server.aborted: \">= 2\", errors: \"== 2\" }}\n",
            profile.display()
        ),
    )
    .unwrap();
    let out = run_expecting(&["run", suite.to_str().unwrap()], 1);
    assert_has(
        &out,
        &[
            "errors:   2 (timeout ×2)",
            "request exceeded the total deadline (1.000s)",
            ", aborted 2,",
            "pass server.aborted >= 2 (measured 2)",
            "error: could not measure: all 2 requests failed, so no figure exists",
        ],
    );
}

/// When tok/s moves, the server's own series say why, each a gated
/// figure: at 2 streams every decode pass ran a CUDA graph captured for
/// batches of 2 (`--cuda-graph-max-bs-decode 2`), the scheduler's CPU, the KV
/// cache's used and free slots, the queue and latency histograms pass; a
/// histogram's percentile is shown as at most its bucket's bound. At 4
/// streams the batches outgrew the graphs: the gate fails with the
/// passes counted.
#[test]
fn the_servers_own_series_say_why_tok_s_moved() {
    let out = run_expecting(&["run", "tests/suites/server-why.yaml"], 1);
    assert_eq!(
        verdict(&out, "server_why::performance::within_the_graphs"),
        "ok",
        "{out}"
    );
    assert_has(
        &out,
        &[
            "pass server.cuda_graph_share >= 0.990 (measured 1.000)",
            "pass server.queue_time.p99 <= 1.00ms (measured ≤ 1.00ms)",
            "pass server.e2e.p50 <= 60.000s (measured ≤ 2.500s)",
            "pass server.itl.p99 <= 1.000s (measured ≤ 25.00ms)",
        ],
    );
    let record = record_of(&out);
    let cpu = figure(&record, "within_the_graphs", "server.scheduler_cpu");
    assert!(cpu > 0.0 && cpu < 4.0, "server.scheduler_cpu {cpu}");
    let used = figure(&record, "within_the_graphs", "server.kv_used_tokens.max");
    let free = figure(
        &record,
        "within_the_graphs",
        "server.kv_available_tokens.min",
    );
    assert!(used >= 32.0 && free > 0.0, "kv used {used}, free {free}");
    let ttft = figure(&record, "within_the_graphs", "server.ttft.mean");
    assert!(ttft > 0.015 && ttft < 5.0, "server.ttft.mean {ttft}");
    let failure = failure_of(&out, "server_why::performance::past_the_graphs");
    assert_has(
        &failure,
        &[
            "error: threshold failed: server.cuda_graph_share >= 0.990\n  --> tests/suites/server-why.yaml:29:7",
            "decode passes ran a CUDA graph, by the server's counter",
        ],
    );
    let share = figure(&record, "past_the_graphs", "server.cuda_graph_share");
    assert!(share < 0.5, "server.cuda_graph_share {share}");
}
