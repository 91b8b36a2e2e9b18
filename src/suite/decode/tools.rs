//! Decoding the request surface of agentic and reasoning models: `tools:`
//! (each function's arguments a JSON Schema, checked as one), `tool_choice`,
//! `response_format` and `reasoning_effort`, as SGLang 0.5.23 takes them
//! (`srt/entrypoints/openai/protocol.py`); and the JSON Schemas of the
//! `tool_call` and `json_schema` checks.

use serde_json::{Value, json};

use super::schema::probe::TOOL_CALL;
use super::schema::{JSON_SCHEMA_FORMAT, RESPONSE_FORMAT, TOOL};
use super::{Decoder, Fields};
use crate::suite::diagnostics::Diagnostic;
use crate::suite::model::{Api, Assertion, Check, Sampling, Tool};
use crate::suite::node::{Node, Yaml};

/// `reasoning_effort`'s levels in SGLang 0.5.23 (`ChatCompletionRequest`).
const EFFORTS: &[&str] = &[
    "none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max",
];

/// `tool_choice`'s words; anything else names a tool.
const TOOL_CHOICES: &[&str] = &["auto", "required", "none"];

impl Decoder<'_> {
    /// The request fields an API cannot send, each refused at its key:
    /// tools and reasoning effort are the chat API's, `response_format` the
    /// chat and completions APIs'.
    pub(super) fn request_surface_api(&mut self, f: &Fields<'_>, api: Api) {
        for (key, apis) in [
            ("tools", &[Api::OpenAiChat][..]),
            ("tool_choice", &[Api::OpenAiChat]),
            ("reasoning_effort", &[Api::OpenAiChat]),
            (
                "response_format",
                &[Api::OpenAiChat, Api::OpenAiCompletions],
            ),
        ] {
            if let Some(k) = f.key(key)
                && !apis.contains(&api)
            {
                let takes: Vec<&str> = apis.iter().map(|a| a.name()).collect();
                self.error(
                    Diagnostic::new(
                        k.loc,
                        format!("`{key}` is not sent by `api: {}`", api.name()),
                    )
                    .expected(format!("`api: {}`", takes.join("` or `api: "))),
                );
            }
        }
    }

    /// A JSON Schema written in YAML, compiled to prove it is one.
    pub(super) fn json_schema(&mut self, y: &Yaml, what: &str) -> Option<Value> {
        if !matches!(y.node, Node::Map(_) | Node::Bool(_)) {
            self.type_error(
                y,
                what,
                "a JSON Schema (a mapping such as `{type: object}`)",
            );
            return None;
        }
        let schema = y.to_json();
        match jsonschema::validator_for(&schema) {
            Ok(_) => Some(schema),
            Err(e) => {
                self.error(
                    Diagnostic::new(y.loc, format!("{what} is not a valid JSON Schema: {e}"))
                        .expected("a JSON Schema, e.g. `{type: object, properties: {city: {type: string}}, required: [city]}`"),
                );
                None
            }
        }
    }

    /// `tools: [{name, description, parameters, strict}]`.
    pub(super) fn tools(&mut self, y: &Yaml) -> Option<Vec<Tool>> {
        let tools = self.items(y, "tools", |d, item| {
            let f = d.fields(item, "tool", &[TOOL])?;
            let name = d
                .required(&f, "name", "tool")
                .and_then(|v| d.function_name(v));
            let description = f.get("description").map(|v| d.text(v, "tool description"));
            let parameters = match f.get("parameters") {
                Some(v) => d.json_schema(v, "tool parameters"),
                None => Some(json!({"type": "object", "properties": {}})),
            };
            let strict = match f.get("strict") {
                Some(v) => d.boolean(v, "tool strict")?,
                None => false,
            };
            Some((
                Tool {
                    name: name?,
                    description: description.map_or(Some(None), |d| d.map(Some))?,
                    parameters: parameters?,
                    strict,
                },
                item.loc,
            ))
        });
        self.unique_names(tools.iter().map(|(t, loc)| (t.name.as_str(), *loc)), "tool");
        // A tool in error was reported; the checks are not judged against
        // the others as if it were not offered.
        let written = match &y.node {
            Node::Seq(items) => items.len(),
            _ => 0,
        };
        (tools.len() == written).then(|| tools.into_iter().map(|(t, _)| t).collect())
    }

    /// A function's name as OpenAI takes it: letters, digits, `_`, `-`, at
    /// most 64.
    fn function_name(&mut self, y: &Yaml) -> Option<String> {
        let name = self.text(y, "tool name")?;
        let ok = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if ok {
            Some(name)
        } else {
            self.error(
                Diagnostic::new(y.loc, format!("invalid tool name `{name}`"))
                    .expected("1 to 64 letters, digits, `_` or `-`"),
            );
            None
        }
    }

    /// `tool_choice: auto | required | none | <a tool's name>`, as the
    /// request sends it.
    pub(super) fn tool_choice(&mut self, y: &Yaml) -> Option<Value> {
        let choice = self.text(y, "tool_choice")?;
        if TOOL_CHOICES.contains(&choice.as_str()) {
            return Some(Value::String(choice));
        }
        let name = self.function_name(y)?;
        Some(json!({"type": "function", "function": {"name": name}}))
    }

    /// `response_format: {type: text | json_object | json_schema,
    /// json_schema: {name, schema, …}}`.
    pub(super) fn response_format(&mut self, y: &Yaml) -> Option<Value> {
        let f = self.fields(y, "response_format", &[RESPONSE_FORMAT])?;
        let kind = self.required(&f, "type", "response_format").and_then(|v| {
            self.pick_word(
                v,
                "response_format.type",
                &["text", "json_object", "json_schema"],
            )
        })?;
        let mut out = json!({"type": kind});
        match (kind.as_str(), f.get("json_schema")) {
            ("json_schema", Some(v)) => {
                let jf = self.fields(v, "response_format.json_schema", &[JSON_SCHEMA_FORMAT])?;
                let name = self
                    .required(&jf, "name", "response_format.json_schema")
                    .and_then(|n| self.text(n, "response_format.json_schema.name"));
                let schema = jf
                    .get("schema")
                    .map(|s| self.json_schema(s, "response_format.json_schema.schema"));
                let mut spec = v.to_json();
                spec["name"] = Value::String(name?);
                if let Some(s) = schema {
                    spec["schema"] = s?;
                }
                out["json_schema"] = spec;
            }
            ("json_schema", None) => {
                self.error(
                    Diagnostic::new(
                        f.loc,
                        "`response_format` of type `json_schema` needs its `json_schema`",
                    )
                    .expected("`json_schema: {name: answer, schema: {type: object, …}}`"),
                );
                return None;
            }
            (_, Some(v)) => {
                self.error(Diagnostic::new(
                    v.loc,
                    format!("`json_schema` belongs to `type: json_schema`, not `{kind}`"),
                ));
                return None;
            }
            (_, None) => {}
        }
        Some(out)
    }

    /// One of `words`, as written.
    fn pick_word(&mut self, y: &Yaml, what: &str, words: &[&str]) -> Option<String> {
        let w = self.text(y, what)?;
        if words.contains(&w.as_str()) {
            Some(w)
        } else {
            self.error(
                Diagnostic::new(y.loc, format!("unknown {what} `{w}`"))
                    .expected(format!("one of {}", super::quoted_list(words))),
            );
            None
        }
    }

    /// `reasoning_effort`: a level, or a share in `[0, 0.99]`.
    pub(super) fn reasoning_effort(&mut self, y: &Yaml) -> Option<Value> {
        match y.node {
            Node::Int(_) | Node::Float(_) => {
                let v = self.float(y, "reasoning_effort")?;
                if (0.0..=0.99).contains(&v) {
                    Some(json!(v))
                } else {
                    self.error(
                        Diagnostic::new(y.loc, format!("reasoning_effort {v} is out of range"))
                            .expected("a share from 0 to 0.99, or a level such as `low`"),
                    );
                    None
                }
            }
            _ => self
                .pick_word(y, "reasoning_effort", EFFORTS)
                .map(Value::String),
        }
    }

    /// `tool_call: NAME` or `tool_call: {name, arguments: SCHEMA}`.
    pub(super) fn tool_call(&mut self, y: &Yaml) -> Option<Check> {
        if let Node::Map(_) = y.node {
            let f = self.fields(y, "tool_call", &[TOOL_CALL])?;
            let name = self
                .required(&f, "name", "tool_call")
                .and_then(|v| self.function_name(v));
            let arguments = f
                .get("arguments")
                .map(|v| self.json_schema(v, "tool_call.arguments"));
            return Some(Check::ToolCall {
                name: name?,
                arguments: arguments.map_or(Some(None), |a| a.map(Some))?,
            });
        }
        Some(Check::ToolCall {
            name: self.function_name(y)?,
            arguments: None,
        })
    }

    /// `json_schema: SCHEMA`, or `true`: the probe's `response_format`
    /// schema.
    pub(super) fn json_schema_check(&mut self, y: &Yaml) -> Option<Check> {
        if let Node::Bool(true) = y.node {
            return Some(Check::JsonSchema(None));
        }
        self.json_schema(y, "`json_schema`")
            .map(|s| Check::JsonSchema(Some(s)))
    }

    /// Fills in what a probe's checks take from its request: a `tool_call`'s
    /// schema from the tool it names, `json_schema: true`'s from
    /// `response_format`; a check that names what the request does not
    /// offer is an error at the check.
    pub(super) fn resolve_request_checks(&mut self, expect: &mut [Assertion], sampling: &Sampling) {
        for a in expect {
            match &mut a.check {
                Check::ToolCall { name, arguments } => {
                    let Some(tools) = &sampling.tools else {
                        self.error(
                            Diagnostic::new(
                                a.loc,
                                format!("`tool_call: {name}`, but the request offers no tools"),
                            )
                            .expected(
                                "`tools:` on the probe or in `defaults`, naming the function",
                            ),
                        );
                        continue;
                    };
                    match tools.iter().find(|t| t.name == *name) {
                        Some(t) if arguments.is_none() => *arguments = Some(t.parameters.clone()),
                        Some(_) => {}
                        None => {
                            let offered: Vec<&str> =
                                tools.iter().map(|t| t.name.as_str()).collect();
                            self.error(
                                Diagnostic::new(
                                    a.loc,
                                    format!("`tool_call: {name}` names a tool the request does not offer"),
                                )
                                .expected(format!("one of {}", super::quoted_list(&offered))),
                            );
                        }
                    }
                }
                Check::JsonSchema(schema @ None) => {
                    let given = sampling
                        .response_format
                        .as_ref()
                        .and_then(|r| r.pointer("/json_schema/schema"));
                    if let Some(s) = given {
                        *schema = Some(s.clone());
                    } else {
                        self.error(
                            Diagnostic::new(
                                a.loc,
                                "`json_schema: true` takes the schema of the request's `response_format`, which has none",
                            )
                            .expected("`response_format: {type: json_schema, json_schema: {name, schema}}`, or the schema itself here"),
                        );
                    }
                }
                _ => {}
            }
        }
    }
}
