//! Conversation probes (`turns:`): every turn with the conversation so far,
//! the model's answers carried forward, each turn's answer checked, the
//! turn that failed named; suites that cannot hold a conversation refused
//! at load.

use crate::common::run::{run_expecting, run_recorded, trial_of};
use crate::common::verdicts::{assert_has, failure_of, verdict};

/// Each turn goes with what came before it — the system message, the
/// earlier turns and the model's own answers — and a wrong answer in a
/// later turn fails the probe at that turn's assertion, saying which turn.
#[test]
fn each_turn_carries_the_conversation_so_far() {
    let (o, record) = run_recorded("tests/suites/conversation.yaml");
    assert_eq!(o.code, Some(1), "{}", o.out);
    assert_eq!(
        verdict(&o.out, "conversation::correctness::follow_up"),
        "ok",
        "{}",
        o.out
    );
    assert_has(
        &failure_of(&o.out, "conversation::correctness::second_turn_wrong"),
        &[
            "error: assertion failed: expected the last number in content is 40",
            "tests/suites/conversation.yaml:21:20",
            "note:     turn 2 of 2 (\"And what is 2+2 times 10?\"), sent with the 2 messages before it (the model's own answers as `assistant` messages)",
            r#""messages":[{"content":"What is 2+2?","role":"user"},{"content":"4","role":"assistant"},{"content":"And what is 2+2 times 10?","role":"user"}]"#,
        ],
    );
    // An empty answer is not carried into the next turn as if it were one.
    assert_has(
        &failure_of(&o.out, "conversation::correctness::empty_answer"),
        &[
            "error: the answer to turn 1 of 2 is empty: nothing to carry into the next turn",
            "tests/suites/conversation.yaml:25:9",
            "note:     finish_reason stop, ",
        ],
    );
    let follow_up = trial_of(&record, "conversation::correctness::follow_up");
    // The record keeps the last turn's exchange: all that went before it.
    assert_eq!(
        follow_up["exchange"]["request"]["messages"],
        serde_json::json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "Now count from 1 to 40."},
        ])
    );
}

/// `turns` with keys that belong to a turn, or on an API without chat
/// messages, is an error where it is written.
#[test]
fn a_conversation_that_cannot_be_held_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("bad.yaml");
    std::fs::write(
        &suite,
        "suite: bad\ntarget: { base_url: sim, api: openai-completions }\ncorrectness:\n  - name: a\n    prompt: hi\n    turns:\n      - prompt: hi\n        expect: [{ contains: x }]\n      - prompt: again\n      - prompt: more\n        expect: []\n    tools: [{ name: f }]\nperformance:\n  - name: g\n    recheck: [a]\n    load: { concurrency: 1, requests: 1, prompt: hi, output_tokens: 4 }\n    thresholds: { errors: \"== 0\" }\n",
    )
    .unwrap();
    let out = run_expecting(&["run", suite.to_str().unwrap()], 2);
    assert_has(
        &out,
        &[
            ":5:5\n",
            "`prompt` does not go with `turns`",
            ":6:5\n",
            "`turns` needs `api: openai-chat`; this suite uses openai-completions",
            ":9:9\n",
            "missing field `expect` in turn",
            ":11:17\n",
            "`expect` is empty",
            ":12:5\n",
            "`tools` does not go with `turns`",
            "probe `a` is a conversation probe: it is not rechecked",
        ],
    );
}

/// A conversation load: sessions of turns, each with the conversation so
/// far. Against a simulated SGLang whose prefix cache reports what it
/// served, the later turns find their history cached — by the usage of
/// every request and by the server's `/metrics` — where the same synthetic
/// prompts one turn at a time find almost nothing; MT-Bench's two-turn
/// records make sessions of real text.
#[test]
fn a_conversation_load_finds_its_history_in_the_prefix_cache() {
    let (o, record) = run_recorded("tests/suites/conversation-load.yaml");
    assert_eq!(o.code, Some(0), "{}", o.out);
    assert_has(
        &o.out,
        &[
            "conversation_load::performance::sessions [closed loop, concurrency 2, 12 requests, 16 output tokens (ignore_eos), ~32 input tokens (synthetic, ~1 token per word, no tokenizer), sessions of 3 turns, each turn those new words sent after the conversation so far, 20.00ms think time]",
            "80 conversations from tests/suites/../../fixtures/datasets/mt-bench.jsonl, sessions of 2 turns",
        ],
    );
    assert!(
        !o.out.contains("did not ask for reuse"),
        "a conversation asks for its history's reuse: {}",
        o.out
    );
    let figure = |gate: &str| {
        crate::gate_figures(&record, gate)["cache_hit_rate"]
            .as_f64()
            .unwrap()
    };
    let (sessions, single) = (figure("sessions"), figure("single_turns"));
    assert!(
        sessions > 4.0 * single,
        "cache hit rate {sessions} in sessions, {single} one turn at a time"
    );
}

/// `conversation` where it cannot be held is an error where it is
/// written: an open loop, a shared prefix, an API without messages, a
/// dataset whose records have fewer user turns.
#[test]
fn a_conversation_load_that_cannot_be_held_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("bad.yaml");
    let data = dir.path().join("one-turn.jsonl");
    std::fs::write(&data, "{\"prompt\": \"hi\"}\n").unwrap();
    std::fs::write(
        &suite,
        "suite: bad\ntarget: { base_url: sim, api: openai-completions }\nperformance:\n  - name: g\n    load: { rate: 2, requests: 4, input_tokens: 8, shared_prefix: { tokens: 8 }, output_tokens: 4,\n      conversation: { turns: 2 } }\n    thresholds: { errors: \"== 0\" }\n  - name: h\n    load: { requests: 4, dataset: one-turn.jsonl, output_tokens: 4, conversation: { turns: 2, think: 1s } }\n    thresholds: { errors: \"== 0\" }\n  - name: i\n    load: { requests: 4, input_tokens: 8, output_tokens: 4, conversation: { turns: 1 } }\n    thresholds: { errors: \"== 0\" }\n  - name: j\n    load: { requests: 4, input_tokens: 8, output_tokens: 4, conversation: { turns: 65 } }\n    thresholds: { errors: \"== 0\" }\n",
    )
    .unwrap();
    let out = run_expecting(&["run", suite.to_str().unwrap()], 2);
    assert_has(
        &out,
        &[
            ":5:13\n",
            "`conversation` goes with a closed loop (`concurrency`), not `rate`",
            ":5:52\n",
            "`shared_prefix` does not go with `conversation`",
            ":6:21\n",
            "`conversation` needs `api: openai-chat`; this suite uses openai-completions",
            ":9:83\n",
            "one-turn.jsonl has 2 user turns (the most is 1)",
            ":9:92\n",
            "conversation.turns is out of range: 1",
            ":12:84\n",
            "conversation.turns is out of range: 65",
            ":15:84\n",
        ],
    );
}
