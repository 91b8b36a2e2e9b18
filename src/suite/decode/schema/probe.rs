//! The schema of a correctness probe: its input, `thresholds`, `contract`,
//! its `dataset`, its assertions and their code checks, with the README's
//! cells that describe each check.

use serde_json::{Value, json};

use super::vocabulary::{
    count, described, duration, name, names, non_empty, number, object, one_of, one_of_required,
    string, text, with_required,
};
use super::{sampling, snapshot};
use crate::suite::decode::assertion::{CHECKS, CODE, DEGENERATE, JSON, NUMBER, assertion_keys};
use crate::suite::decode::dataset::{
    ACCURACY, DATASET, EXTRACT_REGEX, EXTRACTS, FORMATS, PASS_AT_1,
};
use crate::suite::decode::probe::{MESSAGE, NUMERICS, ROLES, probe_keys};
use crate::suite::decode::tools::TOOL_CALL;
use crate::suite::model::{Contract, Field};
use crate::suite::names::Named as _;

pub(super) fn probe() -> Value {
    let mut props = vec![
        (
            "name",
            described(name(), "The probe's name: `<suite>::correctness::<name>`."),
        ),
        (
            "prompt",
            described(
                text(),
                "The user message (or the prompt of a completion API).",
            ),
        ),
        (
            "messages",
            described(
                non_empty(with_required(
                    object(
                        "message",
                        MESSAGE,
                        vec![("role", one_of(ROLES)), ("content", text())],
                    ),
                    MESSAGE,
                )),
                "A whole conversation instead of `prompt` (chat API only).",
            ),
        ),
        (
            "system",
            described(
                text(),
                "A system message before the prompt (chat API only).",
            ),
        ),
        (
            "expect",
            described(
                non_empty(assertion()),
                "Assertions on the answer, one check per item; every one must pass.",
            ),
        ),
        (
            "deterministic",
            described(
                count(2),
                "Ask this many times and require the same answer every time.",
            ),
        ),
        ("dataset", dataset()),
        (
            "numerics",
            described(
                with_required(
                    object(
                        "numerics",
                        NUMERICS,
                        vec![
                            (
                                "text",
                                described(text(), "The reference text the server scores."),
                            ),
                            (
                                "mean_logprob",
                                described(
                                    json!({"type": "number", "maximum": 0}),
                                    "The mean token log-probability a known-good configuration of the model gave the text; unset, the probe fails and says what it measured.",
                                ),
                            ),
                            (
                                "within",
                                described(
                                    json!({"type": "number", "exclusiveMinimum": 0}),
                                    "The largest difference from `mean_logprob` that passes, nats per token (default 0.1).",
                                ),
                            ),
                        ],
                    ),
                    &["text"],
                ),
                "A numerics probe: the server scores `text` — SGLang through `/generate` with `return_logprob`, vLLM through `/v1/completions` with `prompt_logprobs`, whatever the suite's `api` — and the mean token log-probability must be a known-good configuration's.",
            ),
        ),
        (
            "thresholds",
            described(
                json!({"anyOf": [
                    object(
                        "thresholds",
                        ACCURACY,
                        vec![
                            (
                                "accuracy",
                                accuracy("The share of items right: correct / scored."),
                            ),
                            (
                                "accuracy.lower95",
                                accuracy(
                                    "The Wilson 95% lower bound of the accuracy: the accuracy you can bet on.",
                                ),
                            ),
                        ],
                    ),
                    object(
                        "thresholds",
                        PASS_AT_1,
                        vec![
                            (
                                "pass_at_1",
                                accuracy("A code dataset's share of programs passing: passed / asked."),
                            ),
                            (
                                "pass_at_1.lower95",
                                accuracy("The Wilson 95% lower bound of pass_at_1."),
                            ),
                        ],
                    ),
                ]}),
                "A dataset probe's bounds: `accuracy` (format `qa`) or `pass_at_1` (format `humaneval`).",
            ),
        ),
        (
            "contract",
            described(
                non_empty(json!({
                    "enum": Contract::names(),
                    "enumDescriptions": Contract::ALL.iter().map(|(_, c)| format!("fails when {}", contract_doc(*c))).collect::<Vec<_>>(),
                })),
                "Promises of the serving API checked with this probe's request.",
            ),
        ),
    ];
    props.push(("snapshot", snapshot()));
    props.extend(sampling());
    described(
        one_of_required(
            with_required(object("probe", &probe_keys(), props), &["name"]),
            &[&["prompt"], &["messages"], &["dataset"], &["numerics"]],
        ),
        "A correctness probe: one request, its answer checked.",
    )
}

fn accuracy(d: &str) -> Value {
    json!({
        "type": "string",
        "pattern": "^\\s*(>=|<=|>|<)\\s*[0-9.]+\\s*$",
        "description": format!("{d} A comparison with a fraction, such as `\">= 0.62\"`."),
    })
}

fn dataset() -> Value {
    let extract = json!({
        "anyOf": [
            one_of(EXTRACTS),
            with_required(
                object(
                    "dataset.extract",
                    EXTRACT_REGEX,
                    vec![("regex", described(string(), "Its first group is the answer read."))],
                ),
                EXTRACT_REGEX,
            ),
        ],
        "description": "How the answer is read: `last_number` (default), `exact` (trimmed text) or `{regex}`."
    });
    described(
        with_required(
            object(
                "dataset",
                DATASET,
                vec![
                    (
                        "file",
                        described(
                            string(),
                            "A JSONL file (`.jsonl.gz` too), relative to the suite or a parent; `${VAR:-default}` expands.",
                        ),
                    ),
                    (
                        "format",
                        described(
                            one_of(FORMATS),
                            "`qa` (default): questions with reference answers; `humaneval`: HumanEval's code problems, run in the sandbox.",
                        ),
                    ),
                    (
                        "timeout",
                        described(
                            duration(),
                            "format humaneval: each program's time limit (default 10s; the time it waits for a CPU behind other work is not counted, nor, up to the limit, the time it is blocked; at most 10× the limit on the clock).",
                        ),
                    ),
                    (
                        "memory_mib",
                        described(
                            count(16),
                            "format humaneval: each program's memory limit in MiB (default 1024).",
                        ),
                    ),
                    (
                        "question_field",
                        described(text(), "The question's field (default `question`)."),
                    ),
                    (
                        "answer_field",
                        described(text(), "The answer's field (default `answer`)."),
                    ),
                    (
                        "shots",
                        described(count(0), "The first N items become worked examples."),
                    ),
                    ("limit", described(count(1), "Score at most N items.")),
                    (
                        "template",
                        described(
                            text(),
                            "The prompt of an item, with `{question}` (default `Question: {question}\\nAnswer:`).",
                        ),
                    ),
                    ("extract", extract),
                    (
                        "concurrency",
                        described(count(1), "Items asked at once (default 4)."),
                    ),
                ],
            ),
            &["file"],
        ),
        "Ask every item of a question/answer file and judge the share right (with `thresholds`).",
    )
}

fn assertion() -> Value {
    let checks = CHECKS
        .iter()
        .map(|k| {
            let value = match *k {
                "regex" | "not_regex" => string(),
                "min_chars" | "max_chars" => count(0),
                "one_of" => non_empty(text()),
                "number" => json!({"anyOf": [number(), with_required(object("number", NUMBER, vec![
                    ("value", number()),
                    ("tolerance", described(number(), "Allowed difference (default 0).")),
                ]), &["value"])]}),
                "json" => json!({"anyOf": [{"const": true}, with_required(object("json", JSON, vec![
                    ("pointer", described(string(), "A JSON pointer such as `/answer` or `/items/0/name`.")),
                    ("equals", json!({"description": "The value expected there."})),
                ]), JSON)]}),
                "code" => code(),
                "not_degenerate" => json!({"anyOf": [{"const": true}, object("not_degenerate", DEGENERATE, vec![
                    ("max_repeat_share", described(json!({"type": "number", "minimum": 0, "maximum": 1}), "The largest share of the text that may copy an earlier stretch of it (default 0.6).")),
                    ("max_char_run", described(count(1), "The longest run of one non-whitespace character (default 80).")),
                    ("max_bad_chars", described(count(0), "Replacement and control characters allowed (default 0).")),
                ])]}),
                "tool_call" => json!({"anyOf": [text(), with_required(object("tool_call", TOOL_CALL, vec![
                    ("name", described(text(), "The function a call must name.")),
                    ("arguments", json!({"type": ["object", "boolean"], "description": "A JSON Schema the call's arguments must meet (default: the offered tool's `parameters`)."})),
                ]), &["name"])]}),
                "json_schema" => json!({"anyOf": [{"const": true}, {"type": "object"}], "description": "A JSON Schema, or `true`: the schema of the request's `response_format`."}),
                _ => text(),
            };
            (*k, described(value, &format!("passes when {}", check_doc(k))))
        })
        .chain([(
            "in",
            described(
                names::<Field>(),
                "The text checked: `content` (default), `reasoning`, or `all` (reasoning then content).",
            ),
        )])
        .collect();
    let alternatives: Vec<&[&str]> = CHECKS.iter().map(std::slice::from_ref).collect();
    described(
        one_of_required(
            object("assertion", &assertion_keys(), checks),
            &alternatives,
        ),
        "One check of the answer.",
    )
}

fn code() -> Value {
    with_required(
        object(
            "code",
            CODE,
            vec![
                (
                    "language",
                    described(
                        text(),
                        "The fenced block taken from the answer (default `python`).",
                    ),
                ),
                (
                    "tests",
                    described(
                        non_empty(text()),
                        "Lines appended to the code, such as `assert is_prime(97)`.",
                    ),
                ),
                (
                    "run",
                    described(
                        non_empty(text()),
                        "The interpreter's argv; the program's file is appended (default by language).",
                    ),
                ),
                (
                    "timeout",
                    described(
                        duration(),
                        "Time limit (default 10s): the clock, less the time the program waits for a CPU behind other work and, up to the limit, the time it is blocked; at most 10× the limit on the clock.",
                    ),
                ),
                (
                    "memory_mib",
                    described(count(16), "Memory limit in MiB (default 1024)."),
                ),
            ],
        ),
        &["tests"],
    )
}

/// The README's "passes when" cell of each assertion check.
fn check_doc(check: &str) -> &'static str {
    match check {
        "equals" => "the text, trimmed, equals the value",
        "contains" | "not_contains" => "the text contains / does not contain the value",
        "regex" | "not_regex" => "the text matches / does not match (Rust `regex` syntax)",
        "starts_with" => "the text, leading whitespace trimmed, starts with the value",
        "number" => "the last number in the text (`1,234.5` reads as 1234.5) is within tolerance",
        "one_of" => "the trimmed text equals one of the values",
        "json" => "the text (or its ``` fence) is JSON; optionally the pointer's value equals",
        "finish_reason" => "the server's finish reason",
        "min_chars" | "max_chars" => "length in characters",
        "code" => "the answer's code, with `tests` appended, exits 0 in the sandbox (below)",
        "not_degenerate" => "the text is not degenerate (below)",
        "tool_call" => {
            "the answer calls the named function (streamed `delta.tool_calls`) with arguments that are JSON meeting its schema: the offered tool's `parameters`, or `arguments:`"
        }
        "json_schema" => {
            "the text (or its ``` fence) is JSON meeting the schema: the one given, or with `true` the request's `response_format` schema"
        }
        other => unreachable!("no description of check `{other}`"),
    }
}

/// The README's "fails when" cell of each contract check.
fn contract_doc(contract: Contract) -> &'static str {
    match contract {
        Contract::MaxTokens => {
            "more tokens came than `max_tokens` (the larger of the server's count and the stream's)"
        }
        Contract::IgnoreEos => {
            "asked again with `ignore_eos` (and no stop sequences), the server did not generate exactly `max_tokens` tokens with finish_reason `length`"
        }
        Contract::Usage => {
            "no usage although `include_usage` was asked, no prompt or completion count, or fewer completion tokens than chunks that carried tokens"
        }
        Contract::Stop => "one of the probe's `stop` sequences is in the answer",
        Contract::CacheDeterminism => {
            "asked twice at temperature 0 (the second a prefix-cache hit), the answers differ"
        }
    }
}
