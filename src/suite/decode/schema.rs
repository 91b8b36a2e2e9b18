//! The JSON Schema of suite files (`servegate schema`), for editors:
//! completion, hover documentation and errors as one types.
//!
//! It is built from the decoder's own tables: each object's keys are the
//! list the decoder checks that object against (a schema object that
//! names a key the decoder does not accept, or lacks one it does, fails
//! to build), each enumeration's values are its [`Named`] table, and the
//! metric keys are [`all_keys`]. The descriptions of assertion checks,
//! contract checks and metrics are the README's table cells (a test holds
//! them equal). What the schema cannot say (a file that must exist, a
//! regex that must compile, cross-field rules beyond "one of these keys")
//! the decoder still reports when the suite loads.

use serde_json::{Map, Value, json};

use super::assertion::{CHECKS, CODE, DEGENERATE, JSON, NUMBER, assertion_keys};
use super::dataset::{ACCURACY, DATASET, EXTRACT_REGEX, EXTRACTS, FORMATS, PASS_AT_1};
use super::gate::{GATE, SLO, TOKEN_ACCOUNTING};
use super::load::{ARRIVALS, CLIENT_LIMITED, LOAD, MAX_CLIENT_THREADS, SHARED_PREFIX};
use super::probe::{MESSAGE, ROLES, probe_keys};
use super::server::{EXPECTS, LAUNCH, LIMITS, READY, TARGET, TIMEOUTS, VARIANT};
use super::{SAMPLING, SANDBOX, SIM, TOP, defaults_keys};
use crate::suite::metric::{Metric, Stat, all_keys};
use crate::suite::model::{
    Api, ConfigSource, Contract, Field, SandboxPolicy, SnapshotMode, VerdictMode,
};
use crate::suite::names::Named;

/// The schema of a suite file (JSON Schema draft-07, which every YAML
/// language server reads).
pub fn schema() -> Value {
    let mut top = object(
        "the suite",
        TOP,
        vec![
            (
                "suite",
                described(
                    name(),
                    "The suite's name: the first segment of every trial name, and its directory under `snapshots/` and `baselines/` (default: the file stem).",
                ),
            ),
            ("target", target()),
            (
                "sim",
                described(
                    object(
                        "sim",
                        SIM,
                        vec![(
                            "profile",
                            described(
                                string(),
                                "A simulator profile (`fixtures/sim/*.yaml`), relative to the suite's directory or one of its parents.",
                            ),
                        )],
                    ),
                    "How the embedded simulator behaves, when the target is the simulator.",
                ),
            ),
            (
                "defaults",
                described(
                    object("defaults", &defaults_keys(), with_snapshot(sampling())),
                    "Sampling keys (and `snapshot`) for every probe; a probe's own keys override them.",
                ),
            ),
            ("expect_server", expect_server()),
            (
                "correctness",
                described(
                    array(probe()),
                    "Correctness probes, run first, in order: a performance gate never passes on a server that failed one.",
                ),
            ),
            (
                "performance",
                described(
                    array(gate()),
                    "Performance gates, run after the probes, one at a time.",
                ),
            ),
            (
                "variants",
                described(
                    array(variant()),
                    "Server configurations to compare: each runs every trial on its own freshly launched server (needs `target.launch`).",
                ),
            ),
            (
                "sandbox",
                described(
                    json!({"anyOf": [
                        names::<SandboxPolicy>(),
                        object("sandbox", SANDBOX, vec![
                            ("policy", described(names::<SandboxPolicy>(), "`best` or `strict`, as `sandbox: best`.")),
                            ("read", described(array(string()), "Paths the program may read beyond the system's (the interpreter's tree, `/usr`, a few files of `/etc`), relative to the suite's directory or a parent.")),
                        ]),
                    ]}),
                    "Code probes: `best` uses the sandbox layers the host allows; `strict` fails a code probe whose host lacks one; `{policy, read}` also names paths the program may read.",
                ),
            ),
        ],
    );
    top["$schema"] = "http://json-schema.org/draft-07/schema#".into();
    top["title"] = "servegate suite".into();
    top["description"] = "A servegate test suite: a target server, correctness probes and performance gates (`servegate schema` prints this schema).".into();
    top
}

/// An object of exactly the keys `keys` (the decoder's list for it), each
/// described by `props`; panics when the two differ, so that the schema
/// cannot drift from the decoder.
fn object(what: &str, keys: &[&str], props: Vec<(&str, Value)>) -> Value {
    let mut given: Vec<&str> = props.iter().map(|(k, _)| *k).collect();
    let mut wanted = keys.to_vec();
    given.sort_unstable();
    wanted.sort_unstable();
    assert_eq!(
        given, wanted,
        "the schema of {what} and the keys the decoder accepts there differ"
    );
    let properties: Map<String, Value> =
        props.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

fn described(mut schema: Value, description: &str) -> Value {
    schema["description"] = description.into();
    schema
}

fn with_required(mut schema: Value, required: &[&str]) -> Value {
    schema["required"] = json!(required);
    schema
}

/// Exactly one of these alternatives (each a list of required keys).
fn one_of_required(mut schema: Value, alternatives: &[&[&str]]) -> Value {
    schema["oneOf"] = alternatives
        .iter()
        .map(|keys| json!({ "required": keys }))
        .collect();
    schema
}

fn array(items: Value) -> Value {
    let mut schema = json!({"type": "array"});
    schema["items"] = items;
    schema
}

fn non_empty(items: Value) -> Value {
    let mut schema = array(items);
    schema["minItems"] = 1.into();
    schema
}

fn string() -> Value {
    json!({"type": "string"})
}

/// A scalar read as text (YAML `4` is the text "4" where text is expected).
fn text() -> Value {
    json!({"type": ["string", "number", "boolean"]})
}

fn boolean() -> Value {
    json!({"type": "boolean"})
}

fn number() -> Value {
    json!({"type": "number"})
}

fn count(min: i64) -> Value {
    json!({"type": "integer", "minimum": min})
}

/// A name that becomes part of trial names and file paths.
fn name() -> Value {
    json!({"type": ["string", "number", "boolean"], "pattern": "^[A-Za-z0-9_-][A-Za-z0-9_.-]*$"})
}

fn duration() -> Value {
    json!({
        "type": "string",
        "pattern": "^\\s*[0-9]",
        "description": "A duration such as `90s`, `500ms` or `10m`."
    })
}

fn names<T: Named>() -> Value {
    json!({ "enum": T::names() })
}

fn one_of(choices: &[&str]) -> Value {
    json!({ "enum": choices })
}

/// A mapping of environment variable names to values.
fn env() -> Value {
    json!({
        "type": "object",
        "propertyNames": {"pattern": "^[A-Za-z0-9_]+$"},
        "additionalProperties": {"type": ["string", "number", "boolean"]},
        "description": "Environment variables, NAME: value (`${VAR}` interpolated)."
    })
}

/// The name of an environment variable.
fn variable() -> Value {
    json!({"type": "string", "pattern": "^[A-Za-z0-9_]+$"})
}

/// A comparison such as `">= 12.5"` or `"<= baseline * 1.1"`.
fn comparison(what: &str) -> Value {
    json!({
        "type": "string",
        "pattern": "^\\s*(>=|<=|==|>|<)\\s*\\S",
        "description": what,
    })
}

fn target() -> Value {
    let timeouts = TIMEOUTS
        .iter()
        .map(|k| {
            let d = match *k {
                "connect" => "TCP connect (default 10s).",
                "first_token" => "Send to the first token of any kind (default 120s).",
                "idle" => "The longest gap between two chunks (default 60s).",
                _ => "The whole request (default 10m).",
            };
            (*k, described(duration(), d))
        })
        .collect();
    let size = |d: &str| {
        json!({
            "type": ["integer", "string"],
            "minimum": 1024,
            "pattern": "^\\s*[0-9]",
            "description": d,
        })
    };
    described(
        object(
            "target",
            TARGET,
            vec![
                (
                    "base_url",
                    described(
                        text(),
                        "`sim` (or absent): the embedded simulator; else the server root, `http(s)://host:port` (a trailing `/v1` is dropped). `${VAR}` and `${VAR:-default}` are interpolated.",
                    ),
                ),
                (
                    "api",
                    described(
                        names::<Api>(),
                        "The serving API: how requests look and how their streams read (default `openai-chat`).",
                    ),
                ),
                (
                    "model",
                    described(
                        text(),
                        "Sent as `model`; absent: the id the server serves (`/v1/models`).",
                    ),
                ),
                (
                    "api_key_env",
                    described(
                        variable(),
                        "The NAME of an environment variable holding the API key; never the key itself.",
                    ),
                ),
                (
                    "timeouts",
                    described(
                        object("target.timeouts", TIMEOUTS, timeouts),
                        "Deadlines of every request.",
                    ),
                ),
                (
                    "limits",
                    described(
                        object(
                            "target.limits",
                            LIMITS,
                            vec![
                                (
                                    "answer",
                                    size("The most read of one answer (default `8 MiB`)."),
                                ),
                                (
                                    "document",
                                    size("The most read of one GET body (default `4 MiB`)."),
                                ),
                                (
                                    "buffers",
                                    size(
                                        "The most the streams in flight hold together: their line buffers and kept text (default `256 MiB`).",
                                    ),
                                ),
                            ],
                        ),
                        "The most servegate reads from the server.",
                    ),
                ),
                (
                    "secrets",
                    described(
                        array(variable()),
                        "NAMES of environment variables whose values are scrubbed from every output.",
                    ),
                ),
                ("launch", launch()),
            ],
        ),
        "The server under test.",
    )
}

fn launch() -> Value {
    let ready = object(
        "launch.ready",
        READY,
        vec![
            (
                "path",
                described(
                    text(),
                    "The path polled until it answers 200 (default `/health`, `/health_generate` for SGLang).",
                ),
            ),
            (
                "interval",
                described(duration(), "Between polls (default 2s)."),
            ),
            (
                "timeout",
                described(duration(), "Start-up deadline (default 20m)."),
            ),
        ],
    );
    described(
        with_required(
            object(
                "target.launch",
                LAUNCH,
                vec![
                    (
                        "command",
                        described(
                            non_empty(text()),
                            "The server's argv (no shell); `{host}` and `{port}` are replaced.",
                        ),
                    ),
                    ("env", env()),
                    (
                        "cwd",
                        described(text(), "Working directory, relative to the suite's."),
                    ),
                    (
                        "host",
                        described(text(), "Where it listens (default 127.0.0.1)."),
                    ),
                    (
                        "port",
                        json!({
                            "type": ["integer", "string"],
                            "minimum": 1,
                            "maximum": 65535,
                            "description": "A fixed port; absent: a free one."
                        }),
                    ),
                    ("ready", described(ready, "How readiness is checked.")),
                    (
                        "fatal_log_patterns",
                        described(
                            array(string()),
                            "Regexes that, in the server's log, fail the run at once.",
                        ),
                    ),
                    (
                        "grace",
                        described(
                            duration(),
                            "Between SIGTERM and SIGKILL at teardown (default 30s).",
                        ),
                    ),
                ],
            ),
            &["command"],
        ),
        "servegate starts the server itself, waits until it is ready, and stops it after the suite (instead of `base_url`).",
    )
}

/// The sampling keys, shared by `defaults` and probes.
fn sampling() -> Vec<(&'static str, Value)> {
    SAMPLING
        .iter()
        .map(|k| {
            let v = match *k {
                "temperature" => described(number(), "Sampling temperature."),
                "max_tokens" => described(count(1), "The most tokens of an answer."),
                "seed" => described(count(0), "Sampling seed."),
                "top_p" => described(number(), "Nucleus sampling."),
                "stop" => json!({
                    "anyOf": [text(), array(text())],
                    "description": "Stop sequences: one, or a list."
                }),
                "chat_template_kwargs" => json!({
                    "type": "object",
                    "description": "Sent as they are, e.g. `{enable_thinking: false}` (chat API only)."
                }),
                _ => described(
                    boolean(),
                    "`false`: SGLang keeps the reasoning inline in the content (chat API only).",
                ),
            };
            (*k, v)
        })
        .collect()
}

fn with_snapshot(mut keys: Vec<(&'static str, Value)>) -> Vec<(&'static str, Value)> {
    keys.push(("snapshot", snapshot()));
    keys
}

fn snapshot() -> Value {
    json!({
        "anyOf": [boolean(), {"enum": SnapshotMode::ALL.iter().map(|(n, _)| *n).collect::<Vec<_>>()}],
        "description": "Keep the answer under review in `snapshots/`: `true` or `review` (a changed answer fails its snapshot trial), `gate` (it also gates the performance gates), `false` (default)."
    })
}

fn probe() -> Value {
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
            &[&["prompt"], &["messages"], &["dataset"]],
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
                            "format humaneval: each program's wall-clock limit (default 10s).",
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
                    described(duration(), "Wall-clock limit (default 10s)."),
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

/// The README's "what" cell of each metric.
fn metric_doc(metric: Metric) -> &'static str {
    match metric {
        Metric::Ttft => "send → first token of any kind (reasoning counts)",
        Metric::TtftContent => {
            "send → first token of the answer's text (after reasoning; not white space, nor a count without text)"
        }
        Metric::TtftFromSend => {
            "request written → first token (TTFT without connect, write or late start)"
        }
        Metric::Connect => "time to open a connection (requests that opened one)",
        Metric::Itl => "gap between tokens; a chunk of k tokens gives k gaps of gap/k",
        Metric::Tpot => "(e2e − ttft) / (tokens − 1) per request",
        Metric::E2e => "send → end of stream",
        Metric::DecodeTokS => "(tokens − 1) / (e2e − ttft) per request",
        Metric::OutputTokS | Metric::InputTokS | Metric::TotalTokS => {
            "aggregate over the window (input from server-reported prompt tokens)"
        }
        Metric::RequestsPerS => "completed requests over the window",
        Metric::GoodputRequestsPerS | Metric::GoodputTokS => {
            "the same, counting only requests that met every `slo:` objective (`ttft`, `tpot`, `e2e`)"
        }
        Metric::Errors => {
            "failed requests (counted by class: connect, timeout, http, in-stream error, protocol, transport, oversize, aborted, short)"
        }
        Metric::LateStarts => "open loop: requests that started more than 5 ms late",
        Metric::TokenDriftChunks => {
            "% difference between server-reported output tokens and what the chunks carried (each chunk's rise of the count, at most its text's bytes + 1)"
        }
        Metric::TokenDriftMetrics => {
            "% difference between the server's `/metrics` generation-token delta and the tokens received"
        }
        Metric::ServerDecodeTokS => {
            "the server's own decode rate per request, `predicted_n / predicted_ms` of llama.cpp's `timings` (`api: llamacpp-completion`); set it beside `decode_tok_s` to see what the transport and the client cost"
        }
    }
}

fn stat_doc(stat: Stat) -> &'static str {
    match stat {
        Stat::Mean => "the mean",
        Stat::Stddev => "the standard deviation",
        Stat::Min => "the smallest",
        Stat::P50 => "the median",
        Stat::P90 => "the 90th percentile",
        Stat::P95 => "the 95th percentile",
        Stat::P99 => "the 99th percentile",
        Stat::P999 => "the 99.9th percentile",
        Stat::Max => "the largest",
    }
}

/// An object of every metric key (`ttft.p99`, `output_tok_s`, …), each
/// described and valued by `value`.
fn metric_keys(value: impl Fn(&str) -> Value) -> Value {
    let mut properties = Map::new();
    for key in all_keys() {
        let parsed: crate::suite::metric::MetricKey =
            key.parse().expect("all_keys() names metric keys");
        let doc = metric_doc(parsed.metric);
        let what = match parsed.stat {
            Some(s) => format!("{} of `{}`: {doc}", stat_doc(s), parsed.metric.name()),
            None => format!("`{}`: {doc}", parsed.metric.name()),
        };
        properties.insert(key.clone(), described(value(&key), &what));
    }
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

fn gate() -> Value {
    let thresholds = metric_keys(|key| {
        comparison(&format!(
            "A bound on `{key}`, such as `\">= 12.5\"`, `\"<= 2s\"`, `\"== 0\"`, `\"<= baseline + 10%\"` or `\">= variant(base) * 1.05\"`."
        ))
    });
    let curve = metric_keys(|_| {
        json!({
            "type": "string",
            "pattern": "^\\s*(non_decreasing|non_increasing)(\\s+within\\s+[0-9.]+\\s*%?)?\\s*$",
        })
    });
    described(
        with_required(
            object(
                "gate",
                GATE,
                vec![
                    (
                        "name",
                        described(name(), "The gate's name: `<suite>::performance::<name>`."),
                    ),
                    ("load", load()),
                    (
                        "thresholds",
                        described(
                            with_min_properties(thresholds),
                            "Bounds on the figures measured: metric (`ttft.p99`, `decode_tok_s.mean`, `output_tok_s`, `errors`) to comparison.",
                        ),
                    ),
                    (
                        "slo",
                        described(
                            with_min_properties(object(
                                "slo",
                                SLO,
                                SLO.iter().map(|k| (*k, duration())).collect(),
                            )),
                            "Per-request objectives (`ttft`, `tpot`, `e2e`) that `goodput_*` counts.",
                        ),
                    ),
                    (
                        "repeats",
                        described(
                            count(1),
                            "Run the load N times and judge the repeats together.",
                        ),
                    ),
                    (
                        "verdict",
                        described(
                            names::<VerdictMode>(),
                            "With repeats: `mean` (default) compares the mean, `lenient` fails only when the whole 95% interval is past the bound, `strict` passes only when the whole interval meets it.",
                        ),
                    ),
                    (
                        "token_accounting",
                        described(
                            object(
                                "token_accounting",
                                TOKEN_ACCOUNTING,
                                vec![(
                                    "tolerance",
                                    json!({
                                        "type": ["string", "number"],
                                        "pattern": "^\\s*[0-9.]+\\s*%?\\s*$",
                                        "description": "A percentage such as `1%` (default)."
                                    }),
                                )],
                            ),
                            "Adds `token_drift_chunks` and `token_drift_metrics` bounds at this tolerance.",
                        ),
                    ),
                    (
                        "recheck",
                        described(
                            json!({"anyOf": [{"const": "all"}, non_empty(name())]}),
                            "Probes asked again while the load runs (`all`, or their names); a trial `<gate>::recheck` judges them and the load's answers.",
                        ),
                    ),
                    (
                        "curve",
                        described(
                            curve,
                            "With a sweep: metric to `non_decreasing` or `non_increasing`, optionally `within 5%`, checked from one level to the next.",
                        ),
                    ),
                ],
            ),
            &["name", "load", "thresholds"],
        ),
        "A performance gate: a load, and bounds on what it measured.",
    )
}

fn with_min_properties(mut schema: Value) -> Value {
    schema["minProperties"] = 1.into();
    schema
}

fn exactly_one(schema: Value) -> Value {
    let mut schema = with_min_properties(schema);
    schema["maxProperties"] = 1.into();
    schema
}

fn load() -> Value {
    let levels = |one: Value, d: &str| json!({"anyOf": [one.clone(), {"type": "array", "items": one, "minItems": 1}], "description": d});
    let props = LOAD
        .iter()
        .map(|k| {
            let v = match *k {
                "concurrency" => levels(count(1), "Closed loop: N workers, each sending its next request when the previous ends; a list sweeps (one trial per level). With `rate`: a cap on requests in flight."),
                "rate" => levels(json!({"type": "number", "exclusiveMinimum": 0}), "Open loop: requests per second, started on a schedule; a list sweeps."),
                "arrival" => described(one_of(ARRIVALS), "Spacing of the open-loop schedule (default `constant`)."),
                "seed" => described(count(0), "Seed of the Poisson schedule."),
                "requests" => described(count(1), "The measured window ends after N requests (or at `duration`)."),
                "duration" => described(duration(), "The measured window ends at this duration (or after `requests`)."),
                "warmup" => described(count(0), "Requests sent first and left out of every figure."),
                "prompt" => described(text(), "A fixed prompt for every request."),
                "input_tokens" => described(count(1), "A synthetic prompt of about N tokens, different per request."),
                "output_tokens" => described(count(1), "`max_tokens` of every request."),
                "ignore_eos" => described(boolean(), "The server generates exactly `output_tokens`."),
                "flush_cache" => described(boolean(), "`POST /flush_cache` (SGLang) after the warm-up."),
                "abort_after" => described(count(0), "Stop after this many consecutive stalls, timeouts or refusals (default 3; 0: never)."),
                "client_threads" => described(
                    json!({"anyOf": [{"const": "auto"}, {"type": "integer", "minimum": 1, "maximum": MAX_CLIENT_THREADS}]}),
                    "Client threads driving the load, each owning a shard of the streams (default `auto`: from the load, within the machine's cores; `--client-threads` overrides).",
                ),
                "client_limited" => described(one_of(CLIENT_LIMITED), "When the self-check finds the client was the bottleneck: `fail` the gate or `warn` (figures marked client-limited, judged as they are); default: `fail` against a server, `warn` against the embedded simulator."),
                "dataset" => described(string(), "A JSONL (or ShareGPT JSON) file of prompts, relative to the suite or a parent."),
                "shared_prefix" => described(
                    with_required(
                        object(
                            "shared_prefix",
                            SHARED_PREFIX,
                            vec![
                                ("tokens", described(count(1), "Tokens of each shared prefix.")),
                                ("groups", described(count(1), "How many prefixes (default 1).")),
                            ],
                        ),
                        &["tokens"],
                    ),
                    "With `input_tokens`: one of G prefixes of about P tokens, then N unique tokens.",
                ),
                _ => described(string(), "A Hugging Face `tokenizer.json` that cuts synthetic prompts to exactly `input_tokens`."),
            };
            (*k, v)
        })
        .collect();
    let mut load = one_of_required(
        with_required(object("load", LOAD, props), &["output_tokens"]),
        &[&["prompt"], &["input_tokens"], &["dataset"]],
    );
    load["anyOf"] = json!([{"required": ["requests"]}, {"required": ["duration"]}]);
    described(
        load,
        "The load: its pace (`concurrency` or `rate`), its window (`requests` and/or `duration`) and its workload (one of `prompt`, `input_tokens`, `dataset`).",
    )
}

fn expect_server() -> Value {
    let expectation = json!({
        "anyOf": [
            {"type": ["string", "number", "boolean", "null"]},
            exactly_one(object("an expected value", EXPECTS, vec![
                ("equals", json!({"description": "Equal to this value."})),
                ("contains", described(text(), "A string containing this.")),
                ("matches", described(string(), "A string matching this regex.")),
                ("one_of", described(array(json!({})), "Equal to one of these.")),
            ])),
        ],
        "description": "The value expected, or one check: `{equals}`, `{contains}`, `{matches}` or `{one_of}`."
    });
    let document = json!({
        "type": "object",
        "propertyNames": {"pattern": "^[^.]+(\\.[^.]+)*$"},
        "additionalProperties": expectation,
        "description": "A field (or dotted path such as `data.0.id`) of the document, to its expected value."
    });
    let props = ConfigSource::ALL
        .iter()
        .map(|(n, s)| {
            (
                *n,
                described(
                    document.clone(),
                    &format!(
                        "Fields of what the server answers at {}.",
                        s.paths()
                            .iter()
                            .map(|p| format!("`{p}`"))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ),
                ),
            )
        })
        .collect();
    described(
        object("expect_server", &ConfigSource::names(), props),
        "Configuration truth: config checks that run before the probes, against the server's own documents.",
    )
}

fn variant() -> Value {
    with_required(
        object(
            "variant",
            VARIANT,
            vec![
                (
                    "name",
                    described(name(), "The variant's name: `<suite>[<name>]::…`."),
                ),
                ("env", env()),
                (
                    "args",
                    described(array(text()), "Arguments appended to `launch.command`."),
                ),
            ],
        ),
        &["name"],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_builds_with_every_key_of_the_decoder() {
        let s = schema();
        assert_eq!(s["$schema"], "http://json-schema.org/draft-07/schema#");
        let top: Vec<&str> = s["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(top.len(), TOP.len());
    }

    #[test]
    #[should_panic(expected = "the schema of target and the keys the decoder accepts there differ")]
    fn a_key_the_decoder_does_not_know_fails_the_build() {
        object("target", TARGET, vec![("base_url", text())]);
    }
}
