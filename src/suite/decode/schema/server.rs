//! The field tables of the server under test: `target` (its URL, API,
//! deadlines and read caps), `target.launch`, `expect_server` and
//! `variants`.

use serde_json::{Map, Value, json};

use super::vocabulary::{
    Field, array, closed, described, duration, env, exactly_one, name, names, non_empty, object,
    or_interpolated, string, text, variable, with_required,
};
use crate::suite::model::{Api, ConfigSource};

/// `target:`.
pub(in crate::suite::decode) const TARGET: &[Field] = &[
    Field {
        key: "base_url",
        value: || {
            json!({
                "type": "string",
                "pattern": or_interpolated("\\s*(sim|https?://[^/\\s]\\S*)?\\s*"),
            })
        },
        doc: "`sim` (or absent): the embedded simulator; else the server root, `http(s)://host:port` (a trailing `/v1` is dropped). `${VAR}` and `${VAR:-default}` are interpolated.",
    },
    Field {
        key: "api",
        value: names::<Api>,
        doc: "The serving API: how requests look and how their streams read (default `openai-chat`).",
    },
    Field {
        key: "model",
        value: text,
        doc: "Sent as `model`; absent: the id the server serves (`/v1/models`).",
    },
    Field {
        key: "api_key_env",
        value: variable,
        doc: "The NAME of an environment variable holding the API key; never the key itself.",
    },
    Field {
        key: "admin_key_env",
        value: variable,
        doc: "The NAME of an environment variable holding the admin key (SGLang's `--admin-api-key`), sent to `/flush_cache` in place of the API key; never the key itself.",
    },
    Field {
        key: "timeouts",
        value: || object(&[TIMEOUTS]),
        doc: "Deadlines of every request.",
    },
    Field {
        key: "limits",
        value: || object(&[LIMITS]),
        doc: "The most servegate reads from the server.",
    },
    Field {
        key: "secrets",
        value: || array(variable()),
        doc: "NAMES of environment variables whose values are scrubbed from every output.",
    },
    Field {
        key: "launch",
        value: || with_required(object(&[PROCESS, WORKERS]), &["command"]),
        doc: "servegate starts the server itself, waits until it is ready, and stops it after the suite (instead of `base_url`).",
    },
];

/// `target.timeouts:`.
pub(in crate::suite::decode) const TIMEOUTS: &[Field] = &[
    Field {
        key: "connect",
        value: duration,
        doc: "TCP connect (default 10s).",
    },
    Field {
        key: "first_token",
        value: duration,
        doc: "Send to the first token of any kind (default 120s).",
    },
    Field {
        key: "idle",
        value: duration,
        doc: "The longest gap between two chunks (default 60s).",
    },
    Field {
        key: "total",
        value: duration,
        doc: "The whole request (default 10m).",
    },
];

/// A size in bytes, read as written (not interpolated).
fn size() -> Value {
    json!({
        "type": ["integer", "string"],
        "minimum": 1024,
        "pattern": format!("^({})$", crate::units::bytes_pattern()),
    })
}

/// `target.limits:`.
pub(in crate::suite::decode) const LIMITS: &[Field] = &[
    Field {
        key: "answer",
        value: size,
        doc: "The most read of one answer (default `8 MiB`).",
    },
    Field {
        key: "document",
        value: size,
        doc: "The most read of one GET body (default `4 MiB`).",
    },
    Field {
        key: "buffers",
        value: size,
        doc: "The most the streams in flight hold together: their line buffers and kept text (default `256 MiB`).",
    },
];

/// `target.launch.workers:`: the servers a launched router stands in
/// front of.
pub(in crate::suite::decode) const WORKERS: &[Field] = &[Field {
    key: "workers",
    value: || {
        non_empty(with_required(
            object(&[WORKER, PROCESS]),
            &["name", "command"],
        ))
    },
    doc: "Servers started, each ready, before `command` (a router in front of them: SGLang's `sglang_router.launch_router --worker-urls {worker.a} {worker.b}`); each has the keys of `launch` and a `name`; `{worker.NAME}` in the router's command and env is its `http://host:port`. Each one's exit or fatal log line fails the trials as that worker's, and the load gates' server figures sum every worker's `/metrics`.",
}];

/// A worker's own key beside those of a launch.
pub(in crate::suite::decode) const WORKER: &[Field] = &[Field {
    key: "name",
    value: name,
    doc: "The worker's name: in its log's file name, its failures, and its `/metrics` samples' `servegate_worker` label.",
}];

/// `target.launch:` and each of its `workers:`.
pub(in crate::suite::decode) const PROCESS: &[Field] = &[
    Field {
        key: "command",
        value: || non_empty(text()),
        doc: "The server's argv (no shell); `{host}`, `{port}` and `{free_port.NAME}` (a second free port, the same for the same NAME in the whole launch) are replaced, and in a router's, `{worker.NAME}`.",
    },
    Field {
        key: "env",
        value: env,
        doc: "",
    },
    Field {
        key: "cwd",
        value: text,
        doc: "Working directory, relative to the suite's.",
    },
    Field {
        key: "host",
        value: text,
        doc: "Where it listens (default 127.0.0.1).",
    },
    Field {
        key: "port",
        value: || json!({"type": ["integer", "string"], "minimum": 1, "maximum": 65535}),
        doc: "A fixed port; absent: a free one.",
    },
    Field {
        key: "ready",
        value: || object(&[READY]),
        doc: "How readiness is checked.",
    },
    Field {
        key: "fatal_log_patterns",
        value: || array(string()),
        doc: "Regexes that, in the server's log, fail the run at once.",
    },
    Field {
        key: "grace",
        value: duration,
        doc: "Between SIGTERM and SIGKILL at teardown (default 30s).",
    },
];

/// `target.launch.ready:`.
pub(in crate::suite::decode) const READY: &[Field] = &[
    Field {
        key: "path",
        value: text,
        doc: "The path polled until it answers 200 (default `/health`, `/health_generate` for SGLang).",
    },
    Field {
        key: "interval",
        value: duration,
        doc: "Between polls (default 2s).",
    },
    Field {
        key: "timeout",
        value: duration,
        doc: "Start-up deadline (default 20m).",
    },
];

/// An expected value of `expect_server` given as a check.
pub(in crate::suite::decode) const EXPECTS: &[Field] = &[
    Field {
        key: "equals",
        value: || json!({}),
        doc: "Equal to this value.",
    },
    Field {
        key: "contains",
        value: text,
        doc: "A string containing this.",
    },
    Field {
        key: "matches",
        value: string,
        doc: "A string matching this regex.",
    },
    Field {
        key: "one_of",
        value: || array(json!({})),
        doc: "Equal to one of these.",
    },
];

/// `expect_server:`: a key per document the server answers, each named by
/// [`ConfigSource`]'s own table.
pub(super) fn expect_server() -> Value {
    let expectation = json!({
        "anyOf": [
            {"type": ["string", "number", "boolean", "null"]},
            exactly_one(object(&[EXPECTS])),
        ],
        "description": "The value expected, or one check: `{equals}`, `{contains}`, `{matches}` or `{one_of}`."
    });
    let document = json!({
        "type": "object",
        "propertyNames": {"pattern": "^[^.]+(\\.[^.]+)*$"},
        "additionalProperties": expectation,
        "description": "A field (or dotted path such as `data.0.id`) of the document, to its expected value."
    });
    let props: Map<String, Value> = ConfigSource::ALL
        .iter()
        .map(|(n, s)| {
            (
                (*n).to_owned(),
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
    closed(props)
}

/// A variant (`variants:`).
pub(in crate::suite::decode) const VARIANT: &[Field] = &[
    Field {
        key: "name",
        value: name,
        doc: "The variant's name: `<suite>[<name>]::…`.",
    },
    Field {
        key: "env",
        value: env,
        doc: "",
    },
    Field {
        key: "args",
        value: || array(text()),
        doc: "Arguments appended to `launch.command`.",
    },
    Field {
        key: "expect_server",
        value: expect_server,
        doc: "What this variant's launch must have changed (`server_info: {num_continuous_decode_steps: 4}`), checked before it is measured: added to the suite's `expect_server`, replacing a check of the same field.",
    },
    Field {
        key: "thresholds",
        value: || json!({"type": "object", "additionalProperties": super::gate::thresholds()}),
        doc: "Thresholds only this variant's gates are judged by, by gate name (a sweep's name for all its levels): added to the gate's, replacing one of the same figure, e.g. `{single_stream_decode: {server.spec_accept_length: \">= 2.5\"}}`.",
    },
];

/// The server under test.
pub(super) fn target() -> Value {
    object(&[TARGET])
}

/// A variant.
pub(super) fn variant() -> Value {
    with_required(object(&[VARIANT]), &["name"])
}
