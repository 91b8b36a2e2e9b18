//! The field tables of a suite file's objects, and the JSON Schema of
//! suite files built from them (`servegate schema`, for editors:
//! completion, hover documentation and errors as one types).
//!
//! Each YAML object has one table of [`Field`]s: its keys, each with the
//! schema of its value and its words. The decoder checks an object's keys
//! against its table (and names them in its errors), the schema is built
//! from it, and so is the docs' key reference (`keys.rs`, `servegate
//! schema --keys`): adding a key is adding its entry and the code that
//! reads it. Each enumeration's values are its
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

pub(super) mod gate;
mod keys;
pub(super) mod probe;
pub(super) mod server;
pub(super) mod vocabulary;

use crate::suite::model::{SandboxPolicy, SnapshotMode};
use gate::gate;
pub use keys::key_reference;
use probe::probe;
use server::{expect_server, target, variant};
use vocabulary::{
    Field, array, boolean, count, name, names, number, object, string, text, with_required,
};

/// The suite's top level.
pub(in crate::suite::decode) const TOP: &[Field] = &[
    Field {
        key: "suite",
        value: name,
        doc: "The suite's name: the first segment of every trial name, and its directory under `snapshots/` and `baselines/` (default: the file stem).",
    },
    Field {
        key: "target",
        value: target,
        doc: "The server under test.",
    },
    Field {
        key: "sim",
        value: || object(&[SIM]),
        doc: "How the embedded simulator behaves, when the target is the simulator.",
    },
    Field {
        key: "defaults",
        value: || object(&[SAMPLING, SNAPSHOT]),
        doc: "Sampling keys (and `snapshot`) for every probe; a probe's own keys override them.",
    },
    Field {
        key: "expect_server",
        value: expect_server,
        doc: "Configuration truth: config checks that run before the probes, against the server's own documents.",
    },
    Field {
        key: "correctness",
        value: || array(probe()),
        doc: "Correctness probes, run first, in order: a performance gate never passes on a server that failed one.",
    },
    Field {
        key: "performance",
        value: || array(gate()),
        doc: "Performance gates, run after the probes, one at a time.",
    },
    Field {
        key: "variants",
        value: || array(variant()),
        doc: "Server configurations to compare: each runs every trial on its own freshly launched server (needs `target.launch`).",
    },
    Field {
        key: "sandbox",
        value: || json!({"anyOf": [names::<SandboxPolicy>(), object(&[SANDBOX])]}),
        doc: "Code probes: `best` uses the sandbox layers the host allows; `strict` fails a code probe whose host lacks one; `{policy, read}` also names paths the program may read.",
    },
];

/// `sim:`.
pub(in crate::suite::decode) const SIM: &[Field] = &[Field {
    key: "profile",
    value: string,
    doc: "A simulator profile (`fixtures/sim/*.yaml`), relative to the suite's directory or one of its parents.",
}];

/// `sandbox:` as a mapping.
pub(in crate::suite::decode) const SANDBOX: &[Field] = &[
    Field {
        key: "policy",
        value: names::<SandboxPolicy>,
        doc: "`best` or `strict`, as `sandbox: best`.",
    },
    Field {
        key: "read",
        value: || array(string()),
        doc: "Paths the program may read beyond the system's (the interpreter's tree, `/usr`, a few files of `/etc`), relative to the suite's directory or a parent.",
    },
];

/// The sampling keys, shared by `defaults` and probes.
pub(in crate::suite::decode) const SAMPLING: &[Field] = &[
    Field {
        key: "temperature",
        value: number,
        doc: "Sampling temperature.",
    },
    Field {
        key: "max_tokens",
        value: || count(1),
        doc: "The most tokens of an answer.",
    },
    Field {
        key: "seed",
        value: || count(0),
        doc: "Sampling seed.",
    },
    Field {
        key: "top_p",
        value: number,
        doc: "Nucleus sampling.",
    },
    Field {
        key: "stop",
        value: || json!({"anyOf": [text(), array(text())]}),
        doc: "Stop sequences: one, or a list.",
    },
    Field {
        key: "chat_template_kwargs",
        value: || json!({"type": "object"}),
        doc: "Sent as they are, e.g. `{enable_thinking: false}` (chat API only).",
    },
    Field {
        key: "separate_reasoning",
        value: boolean,
        doc: "`false`: SGLang keeps the reasoning inline in the content (chat API only).",
    },
    Field {
        key: "tools",
        value: || array(with_required(object(&[TOOL]), &["name"])),
        doc: "Functions offered to the model, sent as OpenAI `tools` (chat API only); a `tool_call` check judges a call's arguments by its tool's `parameters`.",
    },
    Field {
        key: "tool_choice",
        value: text,
        doc: "`auto`, `required`, `none`, or a tool's name (chat API only).",
    },
    Field {
        key: "response_format",
        value: || with_required(object(&[RESPONSE_FORMAT]), &["type"]),
        doc: "Structured output as SGLang takes it (chat and completions APIs): `{type: json_schema, json_schema: {name, schema}}` or `{type: json_object}`.",
    },
    Field {
        key: "reasoning_effort",
        value: || json!({"anyOf": [{"enum": ["none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max"]}, {"type": "number", "minimum": 0, "maximum": 0.99}]}),
        doc: "A reasoning model's effort: a level or a share from 0 to 0.99, as SGLang 0.5.23 takes it (chat API only).",
    },
    EXTRA_BODY,
    ADAPTER,
];

/// `adapter`, a key of probes, `defaults` and gates: the LoRA adapter
/// that serves their requests.
pub(in crate::suite::decode) const ADAPTER: Field = Field {
    key: "adapter",
    value: || json!({"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[^\\s]+$"}),
    doc: "A LoRA adapter by the name the server loaded it under (vLLM `--lora-modules NAME=PATH`, SGLang `--lora-paths NAME=PATH`): sent as SGLang's `lora_path`, else as `model`; a config check first asks `/v1/models` that the server serves it.",
};

/// `extra_body`, a key of probes, `defaults` and gates: any request field
/// servegate does not set itself.
pub(in crate::suite::decode) const EXTRA_BODY: Field = Field {
    key: "extra_body",
    value: || {
        json!({
            "type": "object",
            "propertyNames": {"not": {"enum": super::OWN_BODY_FIELDS.iter().map(|(f, _)| *f).collect::<Vec<_>>()}},
        })
    },
    doc: "Fields merged into every request body as they are, e.g. `{min_tokens: 8}` or `{return_hidden_states: true}`; over the defaults' own. Not the fields servegate sets itself (`stream`, `model`, the sampling keys, …).",
};

/// A tool offered to the model (`tools:`).
pub(in crate::suite::decode) const TOOL: &[Field] = &[
    Field {
        key: "name",
        value: text,
        doc: "The function's name: 1 to 64 letters, digits, `_` or `-`.",
    },
    Field {
        key: "description",
        value: text,
        doc: "What it does, for the model.",
    },
    Field {
        key: "parameters",
        value: || json!({"type": ["object", "boolean"]}),
        doc: "The JSON Schema of its arguments (checked as one when the suite loads; default: an object of no properties).",
    },
    Field {
        key: "strict",
        value: boolean,
        doc: "Sent as `function.strict`: the server is asked to hold the arguments to `parameters` (SGLang constrains a required or named call's arguments to the schema only then). Default false.",
    },
];

/// `response_format:`.
pub(in crate::suite::decode) const RESPONSE_FORMAT: &[Field] = &[
    Field {
        key: "type",
        value: || json!({"enum": ["text", "json_object", "json_schema"]}),
        doc: "",
    },
    Field {
        key: "json_schema",
        value: || with_required(object(&[JSON_SCHEMA_FORMAT]), &["name"]),
        doc: "",
    },
];

/// `response_format.json_schema:`.
pub(in crate::suite::decode) const JSON_SCHEMA_FORMAT: &[Field] = &[
    Field {
        key: "name",
        value: text,
        doc: "",
    },
    Field {
        key: "description",
        value: text,
        doc: "",
    },
    Field {
        key: "schema",
        value: || json!({"type": ["object", "boolean"]}),
        doc: "A JSON Schema (checked as one when the suite loads); `json_schema: true` checks the answer against it.",
    },
    Field {
        key: "strict",
        value: boolean,
        doc: "",
    },
];

/// `snapshot:`, a key of probes and of `defaults`.
pub(in crate::suite::decode) const SNAPSHOT: &[Field] = &[Field {
    key: "snapshot",
    value: || json!({"anyOf": [boolean(), {"enum": SnapshotMode::ALL.iter().map(|(n, _)| *n).collect::<Vec<_>>()}]}),
    doc: "Keep the answer under review in `snapshots/`: `true` or `review` (a changed answer fails its snapshot trial), `gate` (it also gates the performance gates), `false` (default).",
}];

/// The schema of a suite file (JSON Schema draft-07, which every YAML
/// language server reads).
pub fn schema() -> Value {
    let mut top = object(&[TOP]);
    top["$schema"] = "http://json-schema.org/draft-07/schema#".into();
    top["title"] = "servegate suite".into();
    top["description"] = "A servegate test suite: a target server, correctness probes and performance gates (`servegate schema` prints this schema).".into();
    top
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema is draft-07 (what YAML language servers read) and every
    /// object of it is closed: a key its table does not list is an error
    /// in an editor as it is when the suite loads. (An alternative without
    /// a `type` of its own, a load's `arrival: trace` in place of
    /// `requests`, constrains the closed object it is an alternative of.)
    #[test]
    fn the_schema_is_draft_07_and_every_object_is_closed() {
        // `constraint`: an alternative of `anyOf`, which may constrain
        // the closed object it is an alternative of without a `type`.
        fn closed(v: &Value, path: &str, constraint: bool) {
            if let Some(props) = v.get("properties").and_then(Value::as_object) {
                if !constraint || v.get("type").is_some() {
                    assert_eq!(v["additionalProperties"], false, "{path} is open");
                }
                for (k, sub) in props {
                    closed(sub, &format!("{path}.{k}"), false);
                }
            }
            for key in ["items", "additionalProperties"] {
                if let Some(sub) = v.get(key).filter(|s| s.is_object()) {
                    closed(sub, path, false);
                }
            }
            for alternative in v
                .get("anyOf")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                closed(alternative, path, true);
            }
        }
        let s = schema();
        assert_eq!(s["$schema"], "http://json-schema.org/draft-07/schema#");
        closed(&s, "$", false);
    }
}
