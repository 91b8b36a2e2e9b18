//! Validated suite types. Every probe, assertion and threshold knows where it
//! was written, so a failure can point at its YAML line.
//!
//! The suite itself, its file and what probes and gates share (sampling) are
//! here; the server's types are in `server.rs`, the probes' (assertions,
//! datasets, code checks) in `probe.rs`, the gates' (loads, thresholds,
//! sweeps) in `gate.rs`.

use std::path::PathBuf;
use std::sync::Arc;

mod gate;
mod probe;
mod server;

pub use gate::*;
pub use probe::*;
pub use server::*;

pub use super::tokenizer::Tokenizer;

/// A loaded, validated suite file.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The suite's name (`suite:`), the first segment of its trial names.
    pub name: String,
    /// The file it came from.
    pub file: SourceFile,
    /// The server under test.
    pub target: Target,
    /// Simulator settings, used when the target is the embedded simulator.
    pub sim: SimSpec,
    /// Assertions on the configuration the server reports, checked first.
    pub expect_server: Vec<ConfigCheck>,
    /// Launch overrides: the suite runs once per variant, each on its own
    /// freshly launched server. Empty: one run, no variant in trial names.
    pub variants: Vec<Variant>,
    /// Correctness probes, in file order.
    pub probes: Vec<Probe>,
    /// Performance gates, in file order (a sweep gives one per level).
    pub gates: Vec<Gate>,
    /// Checks across the levels of sweeps.
    pub curves: Vec<Curve>,
}

impl Suite {
    /// The suite as `variant` runs it: its `expect_server` checks added to
    /// the suite's, each replacing a suite check of the same field, and its
    /// thresholds to its gates', each replacing one of the same figure.
    #[must_use]
    pub(crate) fn of_variant(&self, variant: Option<&Variant>) -> Suite {
        let mut run = self.clone();
        if let Some(v) = variant {
            // An adapter's check is servegate's own: no variant replaces it.
            run.expect_server.retain(|c| {
                matches!(c.expect, ConfigExpect::ListsId(_))
                    || v.expect_server.iter().all(|w| w.name != c.name)
            });
            run.expect_server.extend(v.expect_server.iter().cloned());
            for (gate, _, extra) in &v.thresholds {
                for g in run.gates.iter_mut().filter(|g| {
                    g.name == *gate || g.sweep.as_ref().is_some_and(|s| s.sweep == *gate)
                }) {
                    g.thresholds
                        .retain(|t| extra.iter().all(|e| e.threshold.key != t.threshold.key));
                    g.thresholds.extend(extra.iter().cloned());
                }
            }
        }
        run
    }
}

/// A suite file's path (as given) and text, kept for diagnostics.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path as the user named it.
    pub path: PathBuf,
    /// The file's text.
    pub text: Arc<str>,
    /// Its project, absolute: where `snapshots/`, `baselines/` and
    /// `target/servegate/` are (see [`project_root`](super::load::project_root)).
    pub root: PathBuf,
}

impl SourceFile {
    /// The path for messages, with `/` separators.
    pub fn display(&self) -> String {
        self.path.display().to_string()
    }

    /// The path relative to its project (`suites/x.yaml`), as snapshots
    /// record their source.
    pub(crate) fn in_project(&self) -> String {
        let abs = super::load::absolute(&self.path);
        abs.strip_prefix(&self.root)
            .unwrap_or(&abs)
            .display()
            .to_string()
    }
}

/// Simulator settings of a suite.
#[derive(Debug, Clone, Default)]
pub struct SimSpec {
    /// A profile file (`fixtures/sim/*.yaml`), resolved to a path that exists.
    pub profile: Option<PathBuf>,
}

/// Sampling parameters; `None` leaves the server's default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sampling {
    /// Temperature.
    pub temperature: Option<f64>,
    /// Output token limit.
    pub max_tokens: Option<u32>,
    /// Sampling seed.
    pub seed: Option<u64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Stop sequences.
    pub stop: Option<Vec<String>>,
    /// Chat template arguments (`enable_thinking: false`), chat API only.
    pub chat_template_kwargs: Option<serde_json::Value>,
    /// SGLang's `separate_reasoning`: reasoning in `reasoning_content`
    /// (true) or inline in the content (false). Chat API only.
    pub separate_reasoning: Option<bool>,
    /// Tools offered to the model (`tools:`), chat API only.
    pub tools: Option<Vec<Tool>>,
    /// `tool_choice` as the request sends it: `"auto"`, `"required"`,
    /// `"none"` or `{"type": "function", "function": {"name": …}}`.
    pub tool_choice: Option<serde_json::Value>,
    /// `response_format` as the request sends it (`{"type": "json_schema",
    /// "json_schema": {"name", "schema"}}`), chat and completions APIs.
    pub response_format: Option<serde_json::Value>,
    /// `reasoning_effort`: a level (`low`, `high`, …) or a share in
    /// `[0, 0.99]`, as SGLang 0.5.23 takes it; chat API only.
    pub reasoning_effort: Option<serde_json::Value>,
    /// Fields merged into the request body as they are
    /// (`return_hidden_states`, …): any field the server takes that
    /// servegate does not set itself.
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// The LoRA adapter that serves the request, by the name the server
    /// loaded it under: sent as SGLang's `lora_path`, else as `model`
    /// (vLLM's way and the OpenAI convention).
    pub adapter: Option<String>,
}

/// A function offered to the model as a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// Its name, which a call must name.
    pub name: String,
    /// What it does, for the model.
    pub description: Option<String>,
    /// The JSON Schema of its arguments (checked as a schema when the suite
    /// loads); a `tool_call` check validates a call's arguments with it.
    pub parameters: serde_json::Value,
    /// `strict: true`: the server is asked to hold the arguments to
    /// `parameters` (OpenAI's `function.strict`). SGLang 0.5.23 constrains
    /// a required or named call's arguments to the schema only then, and
    /// to any JSON object otherwise (`FunctionCallParser`: "accept all if
    /// not strict").
    pub strict: bool,
}

impl Tool {
    /// The tool as an OpenAI request offers it.
    pub(crate) fn to_request(&self) -> serde_json::Value {
        let mut function = serde_json::json!({"name": self.name, "parameters": self.parameters});
        if let Some(d) = &self.description {
            function["description"] = serde_json::Value::String(d.clone());
        }
        if self.strict {
            function["strict"] = serde_json::Value::Bool(true);
        }
        serde_json::json!({"type": "function", "function": function})
    }
}

impl Sampling {
    /// Bytes of the stop sequences: their tokens (at most one per byte)
    /// are counted by a server and cut from the text it sends.
    pub(crate) fn stop_bytes(&self) -> u64 {
        self.stop.iter().flatten().map(|s| s.len() as u64).sum()
    }

    /// `self` with every unset field taken from `defaults`.
    #[must_use]
    pub fn or(&self, defaults: &Sampling) -> Sampling {
        Sampling {
            temperature: self.temperature.or(defaults.temperature),
            max_tokens: self.max_tokens.or(defaults.max_tokens),
            seed: self.seed.or(defaults.seed),
            top_p: self.top_p.or(defaults.top_p),
            stop: self.stop.clone().or_else(|| defaults.stop.clone()),
            chat_template_kwargs: self
                .chat_template_kwargs
                .clone()
                .or_else(|| defaults.chat_template_kwargs.clone()),
            separate_reasoning: self.separate_reasoning.or(defaults.separate_reasoning),
            tools: self.tools.clone().or_else(|| defaults.tools.clone()),
            tool_choice: self
                .tool_choice
                .clone()
                .or_else(|| defaults.tool_choice.clone()),
            response_format: self
                .response_format
                .clone()
                .or_else(|| defaults.response_format.clone()),
            reasoning_effort: self
                .reasoning_effort
                .clone()
                .or_else(|| defaults.reasoning_effort.clone()),
            extra_body: merged(defaults.extra_body.as_ref(), self.extra_body.as_ref()),
            adapter: self.adapter.clone().or_else(|| defaults.adapter.clone()),
        }
    }
}

/// `over`'s fields over `base`'s: a probe's `extra_body` adds to the
/// defaults' and replaces the fields both name.
pub fn merged(
    base: Option<&serde_json::Map<String, serde_json::Value>>,
    over: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    match (base, over) {
        (None, None) => None,
        (Some(b), None) => Some(b.clone()),
        (None, Some(o)) => Some(o.clone()),
        (Some(b), Some(o)) => {
            let mut m = b.clone();
            m.extend(o.iter().map(|(k, v)| (k.clone(), v.clone())));
            Some(m)
        }
    }
}
