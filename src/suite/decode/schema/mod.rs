//! The JSON Schema of suite files (`servegate schema`), for editors:
//! completion, hover documentation and errors as one types.
//!
//! It is built from the decoder's own tables: each object's keys are the
//! list the decoder checks that object against (a schema object that
//! names a key the decoder does not accept, or lacks one it does, fails
//! to build), each enumeration's values are its
//! [`Named`](crate::suite::names::Named) table, and the metric keys are
//! [`all_keys`](crate::suite::metric::all_keys). The descriptions of
//! assertion checks, contract checks and metrics are the README's table
//! cells (a test holds them equal). What the schema cannot say (a file
//! that must exist, a regex that must compile, cross-field rules beyond
//! "one of these keys") the decoder still reports when the suite loads.
//!
//! This file holds the suite's top level and its sampling keys; the
//! pieces every part is built from are in `vocabulary.rs`, the server's
//! parts (`target`, `launch`, `expect_server`, `variants`) in `server.rs`,
//! probes (assertions, datasets, code checks) in `probe.rs`, gates (loads,
//! thresholds, curves) in `gate.rs`.

use serde_json::{Value, json};

mod gate;
mod probe;
mod server;
mod vocabulary;

use super::tools::{JSON_SCHEMA_FORMAT, RESPONSE_FORMAT, TOOL};
use super::{SAMPLING, SANDBOX, SIM, TOP, defaults_keys};
use crate::suite::model::{SandboxPolicy, SnapshotMode};
use gate::gate;
use probe::probe;
use server::{expect_server, target, variant};
use vocabulary::{
    array, boolean, count, described, name, names, number, object, string, text, with_required,
};

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
                "extra_body" => extra_body(),
                "tools" => described(
                    array(with_required(
                        object(
                            "tool",
                            TOOL,
                            vec![
                                ("name", described(text(), "The function's name: 1 to 64 letters, digits, `_` or `-`.")),
                                ("description", described(text(), "What it does, for the model.")),
                                ("parameters", json!({"type": ["object", "boolean"], "description": "The JSON Schema of its arguments (checked as one when the suite loads; default: an object of no properties)."})),
                                ("strict", described(json!({"type": "boolean"}), "Sent as `function.strict`: the server is asked to hold the arguments to `parameters` (SGLang constrains a required or named call's arguments to the schema only then). Default false.")),
                            ],
                        ),
                        &["name"],
                    )),
                    "Functions offered to the model, sent as OpenAI `tools` (chat API only); a `tool_call` check judges a call's arguments by its tool's `parameters`.",
                ),
                "tool_choice" => described(text(), "`auto`, `required`, `none`, or a tool's name (chat API only)."),
                "response_format" => described(
                    with_required(
                        object(
                            "response_format",
                            RESPONSE_FORMAT,
                            vec![
                                ("type", json!({"enum": ["text", "json_object", "json_schema"]})),
                                ("json_schema", with_required(
                                    object("json_schema", JSON_SCHEMA_FORMAT, vec![
                                        ("name", text()),
                                        ("description", text()),
                                        ("schema", json!({"type": ["object", "boolean"], "description": "A JSON Schema (checked as one when the suite loads); `json_schema: true` checks the answer against it."})),
                                        ("strict", boolean()),
                                    ]),
                                    &["name"],
                                )),
                            ],
                        ),
                        &["type"],
                    ),
                    "Structured output as SGLang takes it (chat and completions APIs): `{type: json_schema, json_schema: {name, schema}}` or `{type: json_object}`.",
                ),
                "reasoning_effort" => json!({
                    "anyOf": [{"enum": ["none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max"]}, {"type": "number", "minimum": 0, "maximum": 0.99}],
                    "description": "A reasoning model's effort: a level or a share from 0 to 0.99, as SGLang 0.5.23 takes it (chat API only)."
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

/// `extra_body`: any request field servegate does not set itself.
pub(super) fn extra_body() -> Value {
    json!({
        "type": "object",
        "propertyNames": {"not": {"enum": super::OWN_BODY_FIELDS.iter().map(|(f, _)| *f).collect::<Vec<_>>()}},
        "description": "Fields merged into every request body as they are, e.g. `{min_tokens: 8}` or `{return_hidden_states: true}`; over the defaults' own. Not the fields servegate sets itself (`stream`, `model`, the sampling keys, …)."
    })
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
}
