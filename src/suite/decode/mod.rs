//! Turns the located YAML tree into validated suite types, collecting every
//! problem of the file instead of stopping at the first.

use std::path::{Path, PathBuf};

mod assertion;
mod dataset;
mod gate;
mod images;
mod load;
pub(crate) use load::MAX_PROMPT_TOKENS;
mod pace;
mod probe;
pub(super) mod schema;
mod server;
pub(super) mod tools;
mod values;
mod workers;

use super::diagnostics::{Diagnostic, did_you_mean};
use super::model::{
    Api, BaseUrl, Curve, Gate, ReadLimits, Sampling, SandboxPolicy, SimSpec, SnapshotMode,
    SourceFile, Suite, Target, Timeouts,
};
use super::node::{Key, Loc, Node, Yaml};

use schema::{SAMPLING, SANDBOX, SIM, SNAPSHOT, TOP};

/// Longest adapter name a suite may give.
const MAX_ADAPTER_NAME: usize = 200;

/// Request fields `extra_body` may not set: servegate sets them itself
/// (how it streams and whom it asks) or from a key of the suite's own.
pub(super) const OWN_BODY_FIELDS: &[(&str, &str)] = &[
    (
        "model",
        "the suite's `target.model` sets it (`adapter` names a LoRA adapter)",
    ),
    ("lora_path", "`adapter` sets it, on SGLang"),
    ("messages", "`prompt`, `messages` and `system` set it"),
    ("prompt", "`prompt` sets it"),
    ("text", "`prompt` sets it"),
    ("input_ids", "`prompt` sets it"),
    ("stream", "servegate always streams: it times the stream"),
    ("stream_options", "servegate asks for usage in every chunk"),
    ("n", "servegate asks for one choice"),
    ("temperature", "the suite's `temperature` sets it"),
    ("top_p", "the suite's `top_p` sets it"),
    ("seed", "the suite's `seed` sets it"),
    ("sampling_seed", "the suite's `seed` sets it"),
    ("stop", "the suite's `stop` sets it"),
    ("max_tokens", "the suite's `max_tokens` sets it"),
    ("max_completion_tokens", "the suite's `max_tokens` sets it"),
    ("max_new_tokens", "the suite's `max_tokens` sets it"),
    ("n_predict", "the suite's `max_tokens` sets it"),
    (
        "sampling_params",
        "the suite's sampling keys (`temperature`, `max_tokens`, …) set it",
    ),
    ("ignore_eos", "a gate's `load.ignore_eos` sets it"),
    ("skip_special_tokens", "a gate's `load.ignore_eos` sets it"),
    (
        "chat_template_kwargs",
        "the suite's `chat_template_kwargs` sets it",
    ),
    (
        "separate_reasoning",
        "the suite's `separate_reasoning` sets it",
    ),
    (
        "tools",
        "the suite's `tools` sets it (and `tool_call` checks read it)",
    ),
    ("tool_choice", "the suite's `tool_choice` sets it"),
    (
        "response_format",
        "the suite's `response_format` sets it (and `json_schema: true` reads it)",
    ),
    ("reasoning_effort", "the suite's `reasoning_effort` sets it"),
];

/// The entries of a mapping, checked against the keys allowed there.
struct Fields<'y> {
    entries: &'y [(Key, Yaml)],
    loc: Loc,
}

impl<'y> Fields<'y> {
    fn get(&self, name: &str) -> Option<&'y Yaml> {
        self.entries
            .iter()
            .find(|(k, _)| k.name == name)
            .map(|(_, v)| v)
    }

    fn key(&self, name: &str) -> Option<&'y Key> {
        self.entries
            .iter()
            .find(|(k, _)| k.name == name)
            .map(|(k, _)| k)
    }
}

/// Decoding context: the errors so far and how to look up the environment.
pub(crate) struct Decoder<'e> {
    errors: Vec<Diagnostic>,
    env: &'e dyn Fn(&str) -> Option<String>,
    suite_dir: PathBuf,
    /// The suite's `sandbox:` policy and `sandbox.read`, given to its code
    /// checks.
    sandbox: SandboxPolicy,
    sandbox_read: Vec<PathBuf>,
}

impl<'e> Decoder<'e> {
    pub(crate) fn new(env: &'e dyn Fn(&str) -> Option<String>, suite_path: &Path) -> Self {
        Self {
            errors: Vec::new(),
            env,
            suite_dir: suite_path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            sandbox: SandboxPolicy::default(),
            sandbox_read: Vec::new(),
        }
    }

    fn error(&mut self, d: Diagnostic) {
        self.errors.push(d);
    }

    /// `snapshot: true | false | review | gate`.
    fn snapshot_mode(&mut self, y: &Yaml, what: &str) -> Option<SnapshotMode> {
        match &y.node {
            Node::Bool(true) => Some(SnapshotMode::Review),
            Node::Bool(false) => Some(SnapshotMode::Off),
            _ => {
                let names: Vec<&str> = SnapshotMode::ALL.iter().map(|(n, _)| *n).collect();
                let name = self.one_of(y, what, &names)?;
                SnapshotMode::ALL
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, m)| *m)
            }
        }
    }

    /// `sandbox: best | strict`, or `sandbox: { policy: …, read: [paths] }`:
    /// the policy, and what the program may read beyond the system's
    /// (each path relative to the suite's directory or a parent, as a
    /// fixture is).
    fn sandbox(&mut self, y: &Yaml) -> Option<(SandboxPolicy, Vec<PathBuf>)> {
        if !matches!(y.node, Node::Map(_)) {
            return Some((self.pick(y, "sandbox")?, Vec::new()));
        }
        let f = self.fields(y, "sandbox", &[SANDBOX])?;
        let policy = f
            .get("policy")
            .map_or(Some(SandboxPolicy::default()), |v| {
                self.pick(v, "sandbox.policy")
            })?;
        let read = match f.get("read") {
            None => Vec::new(),
            Some(list) => self
                .list(list, "sandbox.read")?
                .iter()
                .map(|item| {
                    let found = self.file(item, "sandbox.read")?;
                    Some(std::fs::canonicalize(&found).unwrap_or(found))
                })
                .collect::<Option<Vec<_>>>()?,
        };
        Some((policy, read))
    }

    /// Decodes a whole suite; `Err` holds every problem found.
    pub(crate) fn suite(mut self, root: &Yaml, file: SourceFile) -> Result<Suite, Vec<Diagnostic>> {
        let suite = self.suite_inner(root, file);
        match suite {
            Some(s) if self.errors.is_empty() => Ok(s),
            _ => {
                self.errors.sort_by_key(|d| (d.loc.line, d.loc.column));
                Err(self.errors)
            }
        }
    }

    fn suite_inner(&mut self, root: &Yaml, file: SourceFile) -> Option<Suite> {
        let f = self.fields(root, "the suite", &[TOP])?;
        let name = match f.get("suite") {
            Some(y) => self.name(y, "suite name"),
            None => file
                .path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned()),
        };
        let target = match f.get("target") {
            Some(y) => self.target(y),
            None => Some(Target {
                base_url: BaseUrl::Sim,
                api: Api::OpenAiChat,
                model: None,
                api_key_env: None,
                admin_key_env: None,
                timeouts: Timeouts::default(),
                limits: ReadLimits::default(),
                secrets: Vec::new(),
                launch: None,
                loc: root.loc,
            }),
        };
        let expect_server = f
            .get("expect_server")
            .map_or(Vec::new(), |y| self.expect_server(y));
        let variants = f.get("variants").map_or(Vec::new(), |y| self.variants(y));
        if let (Some(k), Some(t)) = (f.key("variants"), &target)
            && t.launch.is_none()
        {
            self.error(
                Diagnostic::new(k.loc, "`variants` need `target.launch`")
                    .expected("a `launch:` under `target:`: each variant runs on its own freshly launched server"),
            );
        }
        let sim = f
            .get("sim")
            .map_or(Some(SimSpec::default()), |y| self.sim(y));
        let api = target.as_ref().map_or(Api::OpenAiChat, |t| t.api);
        let (defaults, snapshot_default) = f
            .get("defaults")
            .and_then(|y| {
                let df = self.fields(y, "defaults", &[SAMPLING, SNAPSHOT])?;
                let snapshot = df
                    .get("snapshot")
                    .and_then(|v| self.snapshot_mode(v, "defaults.snapshot"))
                    .unwrap_or_default();
                Some((self.sampling(&df, api), snapshot))
            })
            .unwrap_or_default();
        if let Some(y) = f.get("sandbox") {
            (self.sandbox, self.sandbox_read) = self.sandbox(y).unwrap_or_default();
        }
        let probes = f.get("correctness").map_or(Vec::new(), |y| {
            self.items(y, "correctness", |d, item| {
                d.probe(item, &defaults, snapshot_default, api)
            })
        });
        let (gates, curves): (Vec<Vec<Gate>>, Vec<Option<Curve>>) = f
            .get("performance")
            .map_or(Vec::new(), |y| {
                self.items(y, "performance", |d, item| {
                    d.gate(item, &defaults, &probes, api)
                })
            })
            .into_iter()
            .unzip();
        let mut all: Vec<Gate> = Vec::new();
        let mut placed: Vec<Curve> = Vec::new();
        for (levels, curve) in gates.into_iter().zip(curves) {
            let start = all.len();
            all.extend(levels);
            placed.extend(curve.map(|c| Curve {
                levels: start + c.levels.start..start + c.levels.end,
                ..c
            }));
        }
        let (gates, curves) = (all, placed);
        let mut expect_server = expect_server;
        expect_server.extend(adapter_checks(&probes, &gates));
        self.variant_bounds(&gates, &variants);
        self.unique_names(probes.iter().map(|p| (p.name.as_str(), p.loc)), "probe");
        self.unique_names(gates.iter().map(|g| (g.name.as_str(), g.loc)), "gate");
        if probes.is_empty() && gates.is_empty() && self.errors.is_empty() {
            self.error(
                Diagnostic::new(root.loc, "the suite has no probes and no gates")
                    .expected("a `correctness:` or `performance:` list"),
            );
        }
        Some(Suite {
            name: name?,
            file,
            target: target?,
            sim: sim?,
            expect_server,
            variants,
            probes,
            gates,
            curves,
        })
    }

    /// Every `variant(NAME)` bound names a variant of this suite, and
    /// every gate a variant's thresholds name is one of its gates.
    fn variant_bounds(&mut self, gates: &[Gate], variants: &[crate::suite::Variant]) {
        let gate_names: Vec<&str> = gates
            .iter()
            .map(|g| {
                g.sweep
                    .as_ref()
                    .map_or(g.name.as_str(), |s| s.sweep.as_str())
            })
            .collect();
        for (gate, loc, _) in variants.iter().flat_map(|v| &v.thresholds) {
            if !gate_names.contains(&gate.as_str()) {
                let mut d = Diagnostic::new(
                    *loc,
                    format!("variant thresholds for `{gate}`: the suite has no gate `{gate}`"),
                )
                .expected(format!("one of {}", quoted_list(&gate_names)));
                if let Some(close) = did_you_mean(gate, &gate_names) {
                    d = d.help(format!("did you mean `{close}`?"));
                }
                self.error(d);
            }
        }
        let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
        let mut reported: Vec<Loc> = Vec::new();
        let own = variants
            .iter()
            .flat_map(|v| &v.thresholds)
            .flat_map(|(_, _, t)| t);
        for lt in gates.iter().flat_map(|g| &g.thresholds).chain(own) {
            let crate::suite::threshold::Bound::Variant(name, _) = &lt.threshold.bound else {
                continue;
            };
            // A sweep repeats its thresholds at every level: one error each.
            if names.contains(&name.as_str()) || reported.contains(&lt.loc) {
                continue;
            }
            reported.push(lt.loc);
            let mut d = Diagnostic::new(
                lt.loc,
                format!("`variant({name})`: the suite has no variant `{name}`"),
            );
            d = if names.is_empty() {
                d.expected("a `variants:` list (with a `target.launch`) that names it")
            } else {
                d.expected(format!("one of {}", quoted_list(&names)))
            };
            if let Some(close) = did_you_mean(name, &names) {
                d = d.help(format!("did you mean `{close}`?"));
            }
            self.error(d);
        }
    }

    fn unique_names<'a>(&mut self, names: impl Iterator<Item = (&'a str, Loc)>, what: &str) {
        let mut seen: Vec<(&str, Loc)> = Vec::new();
        for (name, loc) in names {
            if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
                let first_line = first.line;
                self.error(Diagnostic::new(
                    loc,
                    format!("duplicate {what} name `{name}` (first defined at line {first_line})"),
                ));
            } else {
                seen.push((name, loc));
            }
        }
    }

    fn sim(&mut self, y: &Yaml) -> Option<SimSpec> {
        let f = self.fields(y, "sim", &[SIM])?;
        let Some(p) = f.get("profile") else {
            return Some(SimSpec::default());
        };
        let found = self.file(p, "simulator profile");
        found.map(|path| SimSpec {
            profile: Some(path),
        })
    }

    fn sampling(&mut self, f: &Fields<'_>, api: Api) -> Sampling {
        self.request_surface_api(f, api);
        Sampling {
            temperature: f
                .get("temperature")
                .and_then(|v| self.float(v, "temperature")),
            max_tokens: f
                .get("max_tokens")
                .and_then(|v| self.count(v, "max_tokens", 1)),
            seed: f.get("seed").and_then(|v| self.count(v, "seed", 0)),
            top_p: f.get("top_p").and_then(|v| self.float(v, "top_p")),
            stop: f.get("stop").and_then(|v| match &v.node {
                Node::Seq(items) => items
                    .iter()
                    .map(|i| self.text(i, "stop sequence"))
                    .collect::<Option<Vec<_>>>(),
                _ => self.text(v, "stop").map(|s| vec![s]),
            }),
            chat_template_kwargs: f.get("chat_template_kwargs").and_then(|v| {
                if matches!(v.node, Node::Map(_)) {
                    Some(v.to_json())
                } else {
                    self.type_error(
                        v,
                        "chat_template_kwargs",
                        "a mapping such as `{enable_thinking: false}`",
                    );
                    None
                }
            }),
            separate_reasoning: f
                .get("separate_reasoning")
                .and_then(|v| self.boolean(v, "separate_reasoning")),
            tools: f.get("tools").and_then(|v| self.tools(v)),
            tool_choice: f.get("tool_choice").and_then(|v| self.tool_choice(v)),
            response_format: f
                .get("response_format")
                .and_then(|v| self.response_format(v)),
            reasoning_effort: f
                .get("reasoning_effort")
                .and_then(|v| self.reasoning_effort(v)),
            extra_body: f.get("extra_body").and_then(|v| self.extra_body(v)),
            adapter: f.get("adapter").and_then(|v| self.adapter(v)),
        }
    }

    /// `adapter: NAME`: a LoRA adapter's name as the server loaded it.
    fn adapter(&mut self, v: &Yaml) -> Option<String> {
        let name = self.text(v, "adapter")?;
        let fits = !name.is_empty()
            && name.chars().count() <= MAX_ADAPTER_NAME
            && name.chars().all(|c| !c.is_control() && !c.is_whitespace());
        if fits {
            return Some(name);
        }
        self.error(
            Diagnostic::new(v.loc, format!("adapter {name:?} is not an adapter's name"))
                .expected(format!(
                    "the name the server loaded the adapter under (vLLM's `--lora-modules NAME=PATH`, SGLang's `--lora-paths NAME=PATH`): 1 to {MAX_ADAPTER_NAME} characters, no spaces"
                )),
        );
        None
    }

    /// `extra_body: {field: value, …}`: any JSON, except the fields
    /// servegate sets itself, each refused at its key.
    fn extra_body(&mut self, v: &Yaml) -> Option<serde_json::Map<String, serde_json::Value>> {
        let Node::Map(entries) = &v.node else {
            self.type_error(
                v,
                "extra_body",
                "a mapping of request fields, such as `{min_tokens: 8}`",
            );
            return None;
        };
        let mut ok = true;
        for (k, _) in entries {
            if let Some((_, how)) = OWN_BODY_FIELDS.iter().find(|(f, _)| *f == k.name) {
                ok = false;
                self.error(
                    Diagnostic::new(
                        k.loc,
                        format!("`extra_body.{}` is a field servegate sets itself", k.name),
                    )
                    .help((*how).to_owned()),
                );
            }
        }
        match v.to_json() {
            serde_json::Value::Object(m) if ok => Some(m),
            _ => None,
        }
    }
}

/// A check of `/v1/models` for each LoRA adapter the suite's probes and
/// gates name, at the first that names it: a request to an adapter the
/// server has not loaded would be served by the base model (SGLang reads
/// an unknown `model` as the base) or refused, and neither is the
/// adapter's figure.
fn adapter_checks(
    probes: &[crate::suite::Probe],
    gates: &[Gate],
) -> Vec<crate::suite::ConfigCheck> {
    use crate::suite::{ConfigCheck, ConfigExpect, ConfigSource};
    let named = probes
        .iter()
        .map(|p| (&p.sampling, p.loc))
        .chain(gates.iter().map(|g| (&g.sampling, g.loc)));
    let mut checks: Vec<ConfigCheck> = Vec::new();
    for (sampling, loc) in named {
        let Some(adapter) = &sampling.adapter else {
            continue;
        };
        let name = format!("models.adapter.{adapter}");
        if checks.iter().all(|c| c.name != name) {
            checks.push(ConfigCheck {
                name,
                source: ConfigSource::Models,
                path: vec!["data".to_owned()],
                expect: ConfigExpect::ListsId(adapter.clone()),
                loc,
            });
        }
    }
    checks
}

fn quoted_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
