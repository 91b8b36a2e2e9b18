//! Arrivals beyond evenly spaced and Poisson: a trace replayed at its
//! records' times (Mooncake's format: prompts of shared blocks, lengths,
//! timestamps), a bursty open loop of gamma-distributed gaps, and the
//! loads that cannot be replayed refused where they are written.

use crate::common::run::{run_expecting, run_recorded};
use crate::common::verdicts::assert_has;

/// A Mooncake-format trace of 20 records over 1.92 s, four groups sharing
/// a first block of 512 tokens: replayed as recorded, and twice as slow
/// after a warm-up of its first four records. No window ends before its
/// last record's time (so every request waited for its own), the blocks
/// the trace shares are found in the simulated SGLang's prefix cache (by
/// usage and by `/metrics`: 16 of 20 records reuse 512 of ~650 tokens),
/// and that reuse is not flagged as unasked.
#[test]
fn a_trace_is_replayed_at_its_records_times() {
    let (o, record) = run_recorded("tests/suites/trace.yaml");
    assert_eq!(o.code, Some(0), "{}", o.out);
    assert_has(
        &o.out,
        &[
            "trace::performance::replay [open loop, replaying the trace's times (mean 9.90 req/s), 20 requests, up to 48 output tokens, 20 trace records (prompts of 512-token blocks named by their `hash_ids`) from tests/suites/../../fixtures/datasets/mooncake-trace.jsonl, each asking for its answer's length (mean 31 tokens)]",
            "trace::performance::replay_slower [open loop, replaying the trace's times 2× slower (mean 5.00 req/s), 16 requests, after 4 warm-up, 8 output tokens,",
            "trace::performance::bursty [open loop, 40 req/s (gamma, burstiness 0.25, seed 3), 20 requests,",
        ],
    );
    assert!(!o.out.contains("did not ask for reuse"), "{}", o.out);
    let figures = |gate: &str| crate::gate_figures(&record, gate).clone();
    // Records 0..19 span 1.92 s; after the warm-up, records 4..19 span
    // 1.5 s, played over 3 s.
    for (gate, requests, span) in [("replay", 20.0, 1.92), ("replay_slower", 16.0, 3.0)] {
        let rate = figures(gate)["requests_per_s"].as_f64().unwrap();
        assert!(
            rate <= requests / span,
            "{gate}: {rate} requests/s; the trace cannot end before {span} s"
        );
    }
    let replay = figures("replay");
    for key in ["cache_hit_rate", "server.cache_hit_rate"] {
        let hit = replay[key].as_f64().unwrap();
        assert!((0.4..=0.8).contains(&hit), "{key} {hit}");
    }
}

/// Each load that cannot be replayed or drawn is an error at its line and
/// column, saying what is wrong.
#[test]
fn arrivals_that_cannot_be_replayed_are_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write(
        "two.jsonl",
        "{\"timestamp\": 0, \"prompt\": \"a\"}\n{\"timestamp\": 10, \"prompt\": \"b\"}\n",
    );
    write(
        "untimed.jsonl",
        "{\"timestamp\": 0, \"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n",
    );
    write(
        "disordered.jsonl",
        "{\"timestamp\": 10, \"prompt\": \"a\"}\n{\"timestamp\": 5, \"prompt\": \"b\"}\n",
    );
    write(
        "blocks.jsonl",
        "{\"timestamp\": 0, \"input_length\": 513, \"hash_ids\": [1]}\n",
    );
    write(
        "distant.jsonl",
        "{\"timestamp\": 0, \"prompt\": \"a\"}\n{\"timestamp\": 9007199254740993, \"prompt\": \"b\"}\n",
    );
    write(
        "far.jsonl",
        "{\"timestamp\": 0, \"prompt\": \"a\"}\n{\"timestamp\": 1e30, \"prompt\": \"b\"}\n",
    );
    let suite = dir.path().join("bad.yaml");
    std::fs::write(
        &suite,
        r#"suite: bad
target: { base_url: sim, api: openai-chat }
performance:
  - name: a
    load: { arrival: trace, requests: 4, input_tokens: 8, output_tokens: 4 }
    thresholds: { errors: "== 0" }
  - name: b
    load: { arrival: trace, rate: 2, dataset: two.jsonl, output_tokens: 4 }
    thresholds: { errors: "== 0" }
  - name: c
    load: { rate: 2, burstiness: 0.5, requests: 4, input_tokens: 8, output_tokens: 4 }
    thresholds: { errors: "== 0" }
  - name: d
    load: { rate: 2, arrival: gamma, requests: 4, input_tokens: 8, output_tokens: 4 }
    thresholds: { errors: "== 0" }
  - name: e
    load: { arrival: trace, dataset: untimed.jsonl, output_tokens: 4 }
    thresholds: { errors: "== 0" }
  - name: f
    load: { arrival: trace, dataset: disordered.jsonl, output_tokens: 4 }
    thresholds: { errors: "== 0" }
  - name: g
    load: { arrival: trace, dataset: two.jsonl, warmup: 1, requests: 2, output_tokens: 4 }
    thresholds: { errors: "== 0" }
  - name: h
    load: { arrival: trace, slowdown: 0, dataset: two.jsonl, output_tokens: 4 }
    thresholds: { errors: "== 0" }
  - name: i
    load: { arrival: trace, dataset: blocks.jsonl, output_tokens: 4 }
    thresholds: { errors: "== 0" }
  - name: j
    load: { arrival: trace, dataset: two.jsonl, output_tokens: 4, conversation: { turns: 2 } }
    thresholds: { errors: "== 0" }
  - name: k
    load: { arrival: trace, slowdown: 2000, dataset: two.jsonl, output_tokens: 4 }
    thresholds: { errors: "== 0" }
  - name: l
    load: { arrival: trace, dataset: far.jsonl, output_tokens: 4 }
    thresholds: { errors: "== 0" }
  - name: m
    load: { rate: 0.000001, requests: 2, input_tokens: 8, output_tokens: 4 }
    thresholds: { errors: "== 0" }
  - name: n
    load: { arrival: trace, dataset: distant.jsonl, output_tokens: 4 }
    thresholds: { errors: "== 0" }
  - name: o
    load: { requests: 1, input_tokens: 1000000000, output_tokens: 4 }
    thresholds: { errors: "== 0" }
"#,
    )
    .unwrap();
    let out = run_expecting(&["run", suite.to_str().unwrap()], 2);
    assert_has(
        &out,
        &[
            ":5:13\n",
            "`arrival: trace` replays a dataset's records at their `timestamp`s; this load has no `dataset`",
            ":8:29\n",
            "a trace's records set its times, not `rate`",
            ":11:22\n",
            "`burstiness` goes with `arrival: gamma`",
            ":14:11\n",
            "missing field `burstiness` in load",
            ":17:38\n",
            "line 2 of the dataset: it has no `timestamp`",
            ":20:38\n",
            "line 2 of the dataset: its `timestamp` 5 comes before the one before it (10): a trace is replayed in order",
            ":23:60\n",
            "the trace has 2 records; after 1 warm-up, 1 are left to replay",
            ":26:39\n",
            "slowdown must be above 0, found 0",
            ":29:38\n",
            "line 1: `input_length` 513 does not end in the last of its 1 blocks of 512 tokens",
            ":32:13\n",
            "`conversation` goes with a closed loop (`concurrency`), not `arrival`",
            ":35:39\n",
            "slowdown 2000 is out of range",
            ":38:38\n",
            "line 2 of the dataset: its `timestamp` 1000000000000000000000000000000 is too far off to wait for",
            ":41:13\n",
            "the schedule's last start is 11.6 days away",
            ":44:13\n",
            "the schedule's last start is 104249991.4 days away",
            ":47:40\n",
            "input_tokens is out of range: 1000000000",
        ],
    );
}
