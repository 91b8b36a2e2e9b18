//! The schema of the server under test: `target` (its URL, API, deadlines
//! and read caps), `target.launch`, `expect_server` and `variants`.

use serde_json::{Value, json};

use super::vocabulary::{
    array, described, duration, env, exactly_one, name, names, non_empty, object, or_interpolated,
    string, text, variable, with_required,
};
use crate::suite::decode::server::{EXPECTS, LAUNCH, LIMITS, READY, TARGET, TIMEOUTS, VARIANT};
use crate::suite::model::{Api, ConfigSource};
use crate::suite::names::Named as _;

pub(super) fn target() -> Value {
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
            // Not interpolated: read as written.
            "pattern": format!("^({})$", crate::units::bytes_pattern()),
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
                        json!({
                            "type": "string",
                            "pattern": or_interpolated("\\s*(sim|https?://[^/\\s]\\S*)?\\s*"),
                        }),
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
                    "admin_key_env",
                    described(
                        variable(),
                        "The NAME of an environment variable holding the admin key (SGLang's `--admin-api-key`), sent to `/flush_cache` in place of the API key; never the key itself.",
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

pub(super) fn expect_server() -> Value {
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

pub(super) fn variant() -> Value {
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
                (
                    "expect_server",
                    described(
                        expect_server(),
                        "What this variant's launch must have changed (`server_info: {num_continuous_decode_steps: 4}`), checked before it is measured: added to the suite's `expect_server`, replacing a check of the same field.",
                    ),
                ),
                (
                    "thresholds",
                    described(
                        json!({"type": "object", "additionalProperties": super::gate::thresholds()}),
                        "Thresholds only this variant's gates are judged by, by gate name (a sweep's name for all its levels): added to the gate's, replacing one of the same figure, e.g. `{single_stream_decode: {server.spec_accept_length: \">= 2.5\"}}`.",
                    ),
                ),
            ],
        ),
        &["name"],
    )
}
