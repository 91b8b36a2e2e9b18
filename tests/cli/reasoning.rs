//! Reasoning models: reasoning kept apart from content, a thinking budget
//! spent, and the switches that reach the server.

use crate::common::run::run_expecting;
use crate::common::verdicts::{assert_has, failure_of, verdict};

#[test]
fn reasoning_suite_separates_reasoning_from_content() {
    let out = run_expecting(&["run", "tests/suites/reasoning.yaml"], 0);
    assert_has(
        &out,
        &["served model \"sim-reasoner\"", "pass ttft.p99 <= 1.000s"],
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
