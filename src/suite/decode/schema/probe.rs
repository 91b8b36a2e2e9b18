//! The field tables of a correctness probe: its input, `thresholds`, `contract`,
//! its `dataset`, its assertions and their code checks, with the README's
//! cells that describe each check.

use serde_json::{Value, json};

use super::vocabulary::{
    Field, count, described, duration, exactly_one, keys, name, names, non_empty, number, object,
    one_of, one_of_required, string, text, with_required,
};
use super::{SAMPLING, SNAPSHOT};
use crate::suite::decode::dataset::{EXTRACTS, FORMATS};
use crate::suite::decode::probe::ROLES;
use crate::suite::model::Contract;
use crate::suite::names::Named as _;

/// A correctness probe's own keys (with [`SNAPSHOT`] and [`SAMPLING`]).
pub(in crate::suite::decode) const PROBE: &[Field] = &[
    Field {
        key: "name",
        value: name,
        doc: "The probe's name: `<suite>::correctness::<name>`.",
    },
    Field {
        key: "prompt",
        value: text,
        doc: "The user message (or the prompt of a completion API).",
    },
    Field {
        key: "messages",
        value: || non_empty(with_required(object(&[MESSAGE]), &keys(&[MESSAGE]))),
        doc: "A whole conversation instead of `prompt` (chat API only).",
    },
    Field {
        key: "system",
        value: text,
        doc: "A system message before the prompt (chat API only).",
    },
    Field {
        key: "turns",
        value: || non_empty(with_required(object(&[TURN]), &["prompt", "expect"])),
        doc: "A conversation: each turn a user message sent with the conversation so far (`system` or `messages` first, then every earlier turn and the model's own answer to it), its answer checked by the turn's `expect` (chat API only).",
    },
    Field {
        key: "images",
        value: || non_empty(image()),
        doc: "Images sent with `prompt`: before its text as chat content parts, or as `/generate`'s `image_data`. Each a file relative to the suite (read at load, sent as a `data:` URL), a `data:` URL or an http(s) URL.",
    },
    Field {
        key: "expect",
        value: || non_empty(assertion()),
        doc: "Assertions on the answer, one check per item; every one must pass.",
    },
    Field {
        key: "deterministic",
        value: || count(2),
        doc: "Ask this many times and require the same answer every time.",
    },
    Field {
        key: "dataset",
        value: || with_required(object(&[DATASET]), &["file"]),
        doc: "Ask every item of a question/answer file and judge the share right (with `thresholds`).",
    },
    Field {
        key: "thresholds",
        value: || json!({"anyOf": [object(&[ACCURACY]), object(&[PASS_AT_1])]}),
        doc: "A dataset probe's bounds: `accuracy` (format `qa`) or `pass_at_1` (format `humaneval`).",
    },
    Field {
        key: "contract",
        value: || {
            non_empty(json!({
                "enum": Contract::names(),
                "enumDescriptions": Contract::ALL.iter().map(|(_, c)| format!("fails when {}", contract_doc(*c))).collect::<Vec<_>>(),
            }))
        },
        doc: "Promises of the serving API checked with this probe's request.",
    },
    Field {
        key: "numerics",
        value: || with_required(object(&[NUMERICS]), &["text"]),
        doc: "A numerics probe: the server scores `text` — SGLang through `/generate` with `return_logprob`, vLLM through `/v1/completions` with `prompt_logprobs`, whatever the suite's `api` — and the mean token log-probability must be a known-good configuration's.",
    },
];

/// A chat message of `messages:`.
pub(in crate::suite::decode) const MESSAGE: &[Field] = &[
    Field {
        key: "role",
        value: || one_of(ROLES),
        doc: "",
    },
    Field {
        key: "content",
        value: || json!({"anyOf": [text(), non_empty(exactly_one(object(&[PART])))]}),
        doc: "The message's text, or its parts in order: `- text: \"…\"`, `- image: <file or URL>`.",
    },
];

/// One turn of a conversation probe (`turns:`).
pub(in crate::suite::decode) const TURN: &[Field] = &[
    Field {
        key: "prompt",
        value: text,
        doc: "The user message of this turn.",
    },
    Field {
        key: "images",
        value: || non_empty(image()),
        doc: "Images sent with this turn's prompt, before its text.",
    },
    Field {
        key: "expect",
        value: || non_empty(assertion()),
        doc: "Assertions on the answer to this turn.",
    },
];

/// A part of a message's `content` list: one of its keys.
pub(in crate::suite::decode) const PART: &[Field] = &[
    Field {
        key: "text",
        value: text,
        doc: "A text part.",
    },
    Field {
        key: "image",
        value: image,
        doc: "An image part: a file relative to the suite (read at load, sent as a `data:` URL), a `data:` URL or an http(s) URL.",
    },
];

/// An image: a file's path or a URL.
fn image() -> Value {
    json!({"type": "string", "minLength": 1})
}

/// A probe's `numerics:`.
pub(in crate::suite::decode) const NUMERICS: &[Field] = &[
    Field {
        key: "text",
        value: text,
        doc: "The reference text the server scores.",
    },
    Field {
        key: "mean_logprob",
        value: || json!({"type": "number", "maximum": 0}),
        doc: "The mean token log-probability a known-good configuration of the model gave the text; unset, the probe fails and says what it measured.",
    },
    Field {
        key: "within",
        value: || json!({"type": "number", "exclusiveMinimum": 0}),
        doc: "The largest difference from `mean_logprob` that passes, nats per token (default 0.1).",
    },
];

/// A bound on a share: a comparison with a fraction.
fn share() -> Value {
    json!({"type": "string", "pattern": "^\\s*(>=|<=|>|<)\\s*[0-9.]+\\s*$"})
}

/// A question/answer dataset probe's `thresholds:`.
pub(in crate::suite::decode) const ACCURACY: &[Field] = &[
    Field {
        key: "accuracy",
        value: share,
        doc: "The share of items right: correct / scored. A comparison with a fraction, such as `\">= 0.62\"`.",
    },
    Field {
        key: "accuracy.lower95",
        value: share,
        doc: "The Wilson 95% lower bound of the accuracy: the accuracy you can bet on. A comparison with a fraction, such as `\">= 0.62\"`.",
    },
];

/// A code dataset probe's `thresholds:`.
pub(in crate::suite::decode) const PASS_AT_1: &[Field] = &[
    Field {
        key: "pass_at_1",
        value: share,
        doc: "A code dataset's share of programs passing: passed / asked. A comparison with a fraction, such as `\">= 0.62\"`.",
    },
    Field {
        key: "pass_at_1.lower95",
        value: share,
        doc: "The Wilson 95% lower bound of pass_at_1. A comparison with a fraction, such as `\">= 0.62\"`.",
    },
];

/// A probe's `dataset:`.
pub(in crate::suite::decode) const DATASET: &[Field] = &[
    Field {
        key: "file",
        value: string,
        doc: "A JSONL file (`.jsonl.gz` too), relative to the suite or a parent; `${VAR:-default}` expands.",
    },
    Field {
        key: "format",
        value: || one_of(FORMATS),
        doc: "`qa` (default): questions with reference answers; `humaneval`: HumanEval's code problems, run in the sandbox.",
    },
    Field {
        key: "question_field",
        value: text,
        doc: "The question's field (default `question`).",
    },
    Field {
        key: "answer_field",
        value: text,
        doc: "The answer's field (default `answer`).",
    },
    Field {
        key: "shots",
        value: || count(0),
        doc: "The first N items become worked examples.",
    },
    Field {
        key: "limit",
        value: || count(1),
        doc: "Score at most N items.",
    },
    Field {
        key: "template",
        value: text,
        doc: "The prompt of an item, with `{question}` (default `Question: {question}\\nAnswer:`).",
    },
    Field {
        key: "extract",
        value: || json!({"anyOf": [one_of(EXTRACTS), with_required(object(&[EXTRACT_REGEX]), &["regex"])]}),
        doc: "How the answer is read: `last_number` (default), `exact` (trimmed text) or `{regex}`.",
    },
    Field {
        key: "concurrency",
        value: || count(1),
        doc: "Items asked at once (default 4).",
    },
    Field {
        key: "timeout",
        value: duration,
        doc: "format humaneval: each program's time limit (default 10s; the time it waits for a CPU behind other work is not counted, nor, up to the limit, the time it is blocked; at most 10× the limit on the clock).",
    },
    Field {
        key: "memory_mib",
        value: || count(16),
        doc: "format humaneval: each program's memory limit in MiB (default 1024).",
    },
];

/// A dataset's `extract: {regex}`.
pub(in crate::suite::decode) const EXTRACT_REGEX: &[Field] = &[Field {
    key: "regex",
    value: string,
    doc: "Its first group is the answer read.",
}];

/// The checks of an assertion (an item of `expect:`), one of them an
/// assertion's, each described by the README's "passes when" cell.
pub(in crate::suite::decode) const CHECKS: &[Field] = &[
    Field {
        key: "equals",
        value: text,
        doc: "passes when the text, trimmed, equals the value",
    },
    Field {
        key: "contains",
        value: text,
        doc: "passes when the text contains / does not contain the value",
    },
    Field {
        key: "not_contains",
        value: text,
        doc: "passes when the text contains / does not contain the value",
    },
    Field {
        key: "regex",
        value: string,
        doc: "passes when the text matches / does not match (Rust `regex` syntax)",
    },
    Field {
        key: "not_regex",
        value: string,
        doc: "passes when the text matches / does not match (Rust `regex` syntax)",
    },
    Field {
        key: "starts_with",
        value: text,
        doc: "passes when the text, leading whitespace trimmed, starts with the value",
    },
    Field {
        key: "number",
        value: || json!({"anyOf": [number(), with_required(object(&[NUMBER]), &["value"])]}),
        doc: "passes when the last number in the text (`1,234.5` reads as 1234.5) is within tolerance",
    },
    Field {
        key: "one_of",
        value: || non_empty(text()),
        doc: "passes when the trimmed text equals one of the values",
    },
    Field {
        key: "json",
        value: || json!({"anyOf": [{"const": true}, with_required(object(&[JSON]), &keys(&[JSON]))]}),
        doc: "passes when the text (or its ``` fence) is JSON; optionally the pointer's value equals",
    },
    Field {
        key: "finish_reason",
        value: text,
        doc: "passes when the server's finish reason",
    },
    Field {
        key: "min_chars",
        value: || count(0),
        doc: "passes when length in characters",
    },
    Field {
        key: "max_chars",
        value: || count(0),
        doc: "passes when length in characters",
    },
    Field {
        key: "code",
        value: || with_required(object(&[CODE]), &["tests"]),
        doc: "passes when the answer's code, with `tests` appended, exits 0 in the sandbox (below)",
    },
    Field {
        key: "not_degenerate",
        value: || json!({"anyOf": [{"const": true}, object(&[DEGENERATE])]}),
        doc: "passes when the text is not degenerate (below)",
    },
    Field {
        key: "tool_call",
        value: || json!({"anyOf": [text(), with_required(object(&[TOOL_CALL]), &["name"])]}),
        doc: "passes when the answer calls the named function (streamed `delta.tool_calls`) with arguments that are JSON meeting its schema: the offered tool's `parameters`, or `arguments:`",
    },
    Field {
        key: "json_schema",
        value: || json!({"anyOf": [{"const": true}, {"type": "object"}]}),
        doc: "passes when the text (or its ``` fence) is JSON meeting the schema: the one given, or with `true` the request's `response_format` schema",
    },
];

/// The key of an assertion beside its check: the text it reads.
pub(in crate::suite::decode) const ASSERTION_IN: &[Field] = &[Field {
    key: "in",
    value: names::<crate::suite::model::Field>,
    doc: "The text checked: `content` (default), `reasoning`, or `all` (reasoning then content).",
}];

/// `number: {value, tolerance}`.
pub(in crate::suite::decode) const NUMBER: &[Field] = &[
    Field {
        key: "value",
        value: number,
        doc: "",
    },
    Field {
        key: "tolerance",
        value: number,
        doc: "Allowed difference (default 0).",
    },
];

/// `json: {pointer, equals}`.
pub(in crate::suite::decode) const JSON: &[Field] = &[
    Field {
        key: "pointer",
        value: string,
        doc: "A JSON pointer such as `/answer` or `/items/0/name`.",
    },
    Field {
        key: "equals",
        value: || json!({}),
        doc: "The value expected there.",
    },
];

/// `not_degenerate: {…}`.
pub(in crate::suite::decode) const DEGENERATE: &[Field] = &[
    Field {
        key: "max_repeat_share",
        value: || json!({"type": "number", "minimum": 0, "maximum": 1}),
        doc: "The largest share of the text that may copy an earlier stretch of it (default 0.6).",
    },
    Field {
        key: "max_char_run",
        value: || count(1),
        doc: "The longest run of one non-whitespace character (default 80).",
    },
    Field {
        key: "max_bad_chars",
        value: || count(0),
        doc: "Replacement and control characters allowed (default 0).",
    },
];

/// `tool_call: {name, arguments}`.
pub(in crate::suite::decode) const TOOL_CALL: &[Field] = &[
    Field {
        key: "name",
        value: text,
        doc: "The function a call must name.",
    },
    Field {
        key: "arguments",
        value: || json!({"type": ["object", "boolean"]}),
        doc: "A JSON Schema the call's arguments must meet (default: the offered tool's `parameters`).",
    },
];

/// `code: {…}`.
pub(in crate::suite::decode) const CODE: &[Field] = &[
    Field {
        key: "language",
        value: text,
        doc: "The fenced block taken from the answer (default `python`).",
    },
    Field {
        key: "tests",
        value: || non_empty(text()),
        doc: "Lines appended to the code, such as `assert is_prime(97)`.",
    },
    Field {
        key: "run",
        value: || non_empty(text()),
        doc: "The interpreter's argv; the program's file is appended (default by language).",
    },
    Field {
        key: "timeout",
        value: duration,
        doc: "Time limit (default 10s): the clock, less the time the program waits for a CPU behind other work and, up to the limit, the time it is blocked; at most 10× the limit on the clock.",
    },
    Field {
        key: "memory_mib",
        value: || count(16),
        doc: "Memory limit in MiB (default 1024).",
    },
];

/// A correctness probe (an item of `correctness:`).
pub(super) fn probe() -> Value {
    let mut schema = one_of_required(
        with_required(object(&[PROBE, SNAPSHOT, SAMPLING]), &["name"]),
        &[
            &["prompt"],
            &["messages"],
            &["dataset"],
            &["numerics"],
            &["turns"],
        ],
    );
    // A conversation's `messages` are its context before the first turn.
    schema["oneOf"][1]["not"] = json!({"required": ["turns"]});
    described(
        schema,
        "A correctness probe: one request (or a conversation's `turns`), its answer checked.",
    )
}

/// An assertion: exactly one check, and `in`.
fn assertion() -> Value {
    let alternatives: Vec<[&str; 1]> = CHECKS.iter().map(|c| [c.key]).collect();
    let alternatives: Vec<&[&str]> = alternatives.iter().map(<[&str; 1]>::as_slice).collect();
    described(
        one_of_required(object(&[CHECKS, ASSERTION_IN]), &alternatives),
        "One check of the answer.",
    )
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
