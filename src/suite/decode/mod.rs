//! Turns the located YAML tree into validated suite types, collecting every
//! problem of the file instead of stopping at the first.

use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;

mod gate;
mod probe;
pub(super) mod schema;
mod server;

use super::diagnostics::{Diagnostic, did_you_mean};
use super::interpolate::interpolate;
use super::model::{
    Api, BaseUrl, Curve, Gate, ReadLimits, Sampling, SandboxPolicy, SimSpec, SnapshotMode,
    SourceFile, Suite, Target, Timeouts,
};
use super::names::Named;
use super::node::{Key, Loc, Node, Yaml};

pub(super) const TOP: &[&str] = &[
    "suite",
    "target",
    "sim",
    "defaults",
    "expect_server",
    "correctness",
    "performance",
    "variants",
    "sandbox",
];
pub(super) const TARGET: &[&str] = &[
    "base_url",
    "api",
    "model",
    "api_key_env",
    "timeouts",
    "limits",
    "secrets",
    "launch",
];
pub(super) const TIMEOUTS: &[&str] = &["connect", "first_token", "idle", "total"];
pub(super) const LIMITS: &[&str] = &["answer", "document", "buffers"];
pub(super) const SANDBOX: &[&str] = &["policy", "read"];
pub(super) const SIM: &[&str] = &["profile"];
pub(super) const SAMPLING: &[&str] = &[
    "temperature",
    "max_tokens",
    "seed",
    "top_p",
    "stop",
    "chat_template_kwargs",
    "separate_reasoning",
];
/// The keys of `defaults`: the sampling keys and `snapshot`.
fn defaults_keys() -> Vec<&'static str> {
    SAMPLING.iter().copied().chain(["snapshot"]).collect()
}

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

    fn fields<'y>(&mut self, y: &'y Yaml, what: &str, allowed: &[&str]) -> Option<Fields<'y>> {
        let Node::Map(entries) = &y.node else {
            self.type_error(y, what, "a mapping");
            return None;
        };
        for (key, _) in entries {
            if !allowed.contains(&key.name.as_str()) {
                let mut d =
                    Diagnostic::new(key.loc, format!("unknown field `{}` in {what}", key.name))
                        .expected(format!("one of {}", quoted_list(allowed)));
                if let Some(close) = did_you_mean(&key.name, allowed) {
                    d = d.help(format!("did you mean `{close}`?"));
                }
                self.error(d);
            }
        }
        Some(Fields {
            entries,
            loc: y.loc,
        })
    }

    fn type_error(&mut self, y: &Yaml, what: &str, expected: &str) {
        self.error(
            Diagnostic::new(
                y.loc,
                format!("{what} must be {expected}, found {}", y.node.kind()),
            )
            .expected(expected.to_owned()),
        );
    }

    fn required<'y>(&mut self, f: &Fields<'y>, name: &str, what: &str) -> Option<&'y Yaml> {
        let v = f.get(name);
        if v.is_none() {
            self.error(Diagnostic::new(
                f.loc,
                format!("missing field `{name}` in {what}"),
            ));
        }
        v
    }

    /// A scalar as text, as it is written: YAML `4` is the text "4", `yes`
    /// is "yes" (not YAML 1.1's `true`) and `1.0` is "1.0" where text is
    /// expected.
    fn text(&mut self, y: &Yaml, what: &str) -> Option<String> {
        match &y.node {
            Node::Str(s) => Some(s.clone()),
            Node::Int(_) | Node::Float(_) | Node::Bool(_) if y.written.is_some() => {
                y.written.clone()
            }
            Node::Int(i) => Some(i.to_string()),
            Node::Float(f) => Some(f.to_string()),
            Node::Bool(b) => Some(b.to_string()),
            _ => {
                self.type_error(y, what, "a string");
                None
            }
        }
    }

    /// A name usable in a trial name: letters, digits, `_`, `-`, `.`.
    fn name(&mut self, y: &Yaml, what: &str) -> Option<String> {
        let name = self.text(y, what)?;
        // Names become parts of paths (snapshots, baselines, logs) as well
        // as of test names: never `.`, `..` or a hidden file.
        let valid = !name.is_empty()
            && !name.starts_with('.')
            && name.chars().all(crate::files::is_name_char);
        if valid {
            Some(name)
        } else {
            self.error(
                Diagnostic::new(y.loc, format!("invalid {what} `{name}`")).expected(
                    "letters, digits, `_`, `-` or `.`, not first (it becomes part of a test name and of file paths)",
                ),
            );
            None
        }
    }

    fn int(&mut self, y: &Yaml, what: &str) -> Option<i64> {
        if let Node::Int(i) = y.node {
            Some(i)
        } else {
            self.type_error(y, what, "an integer");
            None
        }
    }

    fn count<T: TryFrom<i64>>(&mut self, y: &Yaml, what: &str, min: i64) -> Option<T> {
        let i = self.int(y, what)?;
        match T::try_from(i) {
            Ok(v) if i >= min => Some(v),
            _ => {
                self.error(
                    Diagnostic::new(y.loc, format!("{what} is out of range: {i}"))
                        .expected(format!("an integer >= {min}")),
                );
                None
            }
        }
    }

    fn float(&mut self, y: &Yaml, what: &str) -> Option<f64> {
        match y.node {
            #[expect(clippy::cast_precision_loss, reason = "suite numbers are small")]
            Node::Int(i) => Some(i as f64),
            Node::Float(f) if f.is_finite() => Some(f),
            _ => {
                self.type_error(y, what, "a finite number");
                None
            }
        }
    }

    fn boolean(&mut self, y: &Yaml, what: &str) -> Option<bool> {
        if let Node::Bool(b) = y.node {
            Some(b)
        } else {
            self.type_error(y, what, "true or false");
            None
        }
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
        let f = self.fields(y, "sandbox", SANDBOX)?;
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

    fn duration(&mut self, y: &Yaml, what: &str) -> Option<Duration> {
        let text = self.text(y, what)?;
        match crate::units::parse_duration(&text) {
            Ok(d) if !d.is_zero() => Some(d),
            Ok(_) => {
                self.error(Diagnostic::new(
                    y.loc,
                    format!("{what} must be longer than 0"),
                ));
                None
            }
            Err(e) => {
                self.error(
                    Diagnostic::new(y.loc, format!("invalid duration `{text}` for {what}: {e}"))
                        .expected("a duration such as `90s`, `500ms` or `10m`"),
                );
                None
            }
        }
    }

    fn list<'y>(&mut self, y: &'y Yaml, what: &str) -> Option<&'y [Yaml]> {
        if let Node::Seq(items) = &y.node {
            Some(items)
        } else {
            self.type_error(y, what, "a list");
            None
        }
    }

    /// The value of a named type (`api: openai-chat`) that `y` names.
    fn pick<T: Named>(&mut self, y: &Yaml, what: &str) -> Option<T> {
        let name = self.one_of(y, what, &T::names())?;
        T::named(&name)
    }

    fn one_of(&mut self, y: &Yaml, what: &str, choices: &[&str]) -> Option<String> {
        let text = self.text(y, what)?;
        if choices.contains(&text.as_str()) {
            return Some(text);
        }
        let mut d = Diagnostic::new(y.loc, format!("invalid {what} `{text}`"))
            .expected(format!("one of {}", quoted_list(choices)));
        if let Some(close) = did_you_mean(&text, choices) {
            d = d.help(format!("did you mean `{close}`?"));
        }
        self.error(d);
        None
    }

    fn interpolated(&mut self, y: &Yaml, what: &str) -> Option<String> {
        let raw = self.text(y, what)?;
        match interpolate(&raw, self.env) {
            Ok(v) => Some(v),
            Err(e) => {
                self.error(Diagnostic::new(y.loc, format!("in {what}: {e}")));
                None
            }
        }
    }

    fn regex(&mut self, y: &Yaml, what: &str) -> Option<Regex> {
        let text = self.text(y, what)?;
        match Regex::new(&text) {
            Ok(r) => Some(r),
            Err(e) => {
                let detail = e.to_string();
                let last = detail.lines().last().unwrap_or("invalid regex").trim();
                self.error(
                    Diagnostic::new(y.loc, format!("invalid regex in {what}: {last}"))
                        .expected("a regular expression in Rust `regex` syntax"),
                );
                None
            }
        }
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
        let f = self.fields(root, "the suite", TOP)?;
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
        let (defaults, snapshot_default) = f
            .get("defaults")
            .and_then(|y| {
                let df = self.fields(y, "defaults", &defaults_keys())?;
                let snapshot = df
                    .get("snapshot")
                    .and_then(|v| self.snapshot_mode(v, "defaults.snapshot"))
                    .unwrap_or_default();
                Some((self.sampling(&df), snapshot))
            })
            .unwrap_or_default();
        let api = target.as_ref().map_or(Api::OpenAiChat, |t| t.api);
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
                self.items(y, "performance", |d, item| d.gate(item, &defaults, &probes))
            })
            .into_iter()
            .unzip();
        let gates: Vec<Gate> = gates.into_iter().flatten().collect();
        let curves: Vec<Curve> = curves.into_iter().flatten().collect();
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

    /// Every `variant(NAME)` bound names a variant of this suite.
    fn variant_bounds(&mut self, gates: &[Gate], variants: &[crate::suite::Variant]) {
        let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
        let mut reported: Vec<Loc> = Vec::new();
        for lt in gates.iter().flat_map(|g| &g.thresholds) {
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

    fn items<T>(
        &mut self,
        y: &Yaml,
        what: &str,
        mut each: impl FnMut(&mut Self, &Yaml) -> Option<T>,
    ) -> Vec<T> {
        let Some(items) = self.list(y, what) else {
            return Vec::new();
        };
        items.iter().filter_map(|item| each(self, item)).collect()
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

    fn target(&mut self, y: &Yaml) -> Option<Target> {
        let f = self.fields(y, "target", TARGET)?;
        let base_url = match f.get("base_url") {
            None => Some(BaseUrl::Sim),
            Some(v) => self.base_url(v),
        };
        let api = match f.get("api") {
            None => Some(Api::OpenAiChat),
            Some(v) => self.pick(v, "api"),
        };
        let model = f
            .get("model")
            .and_then(|v| self.interpolated(v, "target.model"));
        let api_key_env = f.get("api_key_env").and_then(|v| {
            let name = self.text(v, "api_key_env")?;
            let valid =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if valid {
                Some(name)
            } else {
                self.error(
                    Diagnostic::new(
                        v.loc,
                        "api_key_env must be the NAME of an environment variable",
                    )
                    .expected(
                        "a name such as `SGLANG_API_KEY`; never write the key itself in a suite",
                    ),
                );
                None
            }
        });
        let timeouts = f
            .get("timeouts")
            .map_or(Some(Timeouts::default()), |v| self.timeouts(v));
        let limits = f
            .get("limits")
            .map_or(Some(ReadLimits::default()), |v| self.limits(v));
        let secrets = f.get("secrets").map_or_else(Vec::new, |v| {
            self.items(v, "secrets", |d, item| {
                let name = d.text(item, "secrets")?;
                let valid =
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !valid {
                    d.error(
                        Diagnostic::new(item.loc, "secrets lists NAMES of environment variables")
                            .expected(
                                "a name such as `MY_CREDS`; never write a secret itself in a suite",
                            ),
                    );
                    return None;
                }
                Some(name)
            })
        });
        let launch = match f.get("launch") {
            None => None,
            Some(v) => {
                if let Some(k) = f.key("base_url") {
                    self.error(
                        Diagnostic::new(k.loc, "`base_url` and `launch` are both set")
                            .expected("one of them: a launched server is reached at http://<launch.host>:<port>"),
                    );
                }
                Some(self.launch(v, api.unwrap_or(Api::OpenAiChat))?)
            }
        };
        Some(Target {
            base_url: base_url?,
            api: api?,
            model,
            api_key_env,
            timeouts: timeouts?,
            limits: limits?,
            secrets,
            launch,
            loc: y.loc,
        })
    }

    fn base_url(&mut self, y: &Yaml) -> Option<BaseUrl> {
        let url = self.interpolated(y, "target.base_url")?;
        let url = url.trim();
        if url.is_empty() || url == "sim" {
            return Some(BaseUrl::Sim);
        }
        match normalize_url(url) {
            Ok(u) => Some(BaseUrl::Url(u)),
            Err(e) => {
                self.error(
                    Diagnostic::new(y.loc, format!("invalid base_url `{url}`: {e}"))
                        .expected("`sim` or an http(s) URL such as `http://127.0.0.1:30000`"),
                );
                None
            }
        }
    }

    fn timeouts(&mut self, y: &Yaml) -> Option<Timeouts> {
        let f = self.fields(y, "target.timeouts", TIMEOUTS)?;
        let mut t = Timeouts::default();
        let mut ok = true;
        for (name, slot) in [
            ("connect", &mut t.connect),
            ("first_token", &mut t.first_token),
            ("idle", &mut t.idle),
            ("total", &mut t.total),
        ] {
            if let Some(v) = f.get(name) {
                match self.duration(v, &format!("timeouts.{name}")) {
                    Some(d) => *slot = d,
                    None => ok = false,
                }
            }
        }
        ok.then_some(t)
    }

    fn limits(&mut self, y: &Yaml) -> Option<ReadLimits> {
        let f = self.fields(y, "target.limits", LIMITS)?;
        let mut l = ReadLimits::default();
        let mut ok = true;
        for (name, slot) in [
            ("answer", &mut l.answer),
            ("document", &mut l.document),
            ("buffers", &mut l.buffers),
        ] {
            if let Some(v) = f.get(name) {
                let text = match &v.node {
                    Node::Int(n) => n.to_string(),
                    _ => self.text(v, &format!("limits.{name}"))?,
                };
                match crate::units::parse_bytes(&text) {
                    Ok(n) if n >= 1024 => *slot = n,
                    Ok(_) => {
                        self.error(
                            Diagnostic::new(v.loc, format!("limits.{name} must be at least 1 KiB"))
                                .expected("a size such as `8 MiB`"),
                        );
                        ok = false;
                    }
                    Err(e) => {
                        self.error(
                            Diagnostic::new(v.loc, format!("invalid limits.{name}: {e}"))
                                .expected("a size such as `8 MiB`, `512 KiB` or `1 GiB`"),
                        );
                        ok = false;
                    }
                }
            }
        }
        ok.then_some(l)
    }

    /// A file named relative to the suite's directory or one of its
    /// parents; reports `<what> `…` not found` at its location otherwise.
    fn file(&mut self, y: &Yaml, what: &str) -> Option<PathBuf> {
        // `${SERVEGATE_DATA:-${HOME}/.cache/servegate/data}/…` names a cache.
        let rel = self.interpolated(y, what)?;
        let found = resolve_relative(&self.suite_dir, Path::new(&rel));
        if found.is_none() {
            self.error(
                Diagnostic::new(y.loc, format!("{what} `{rel}` not found")).expected(format!(
                    "a file relative to the suite's directory `{}` or one of its parents",
                    self.suite_dir.display()
                )),
            );
        }
        found
    }

    fn sim(&mut self, y: &Yaml) -> Option<SimSpec> {
        let f = self.fields(y, "sim", SIM)?;
        let Some(p) = f.get("profile") else {
            return Some(SimSpec::default());
        };
        let found = self.file(p, "simulator profile");
        found.map(|path| SimSpec {
            profile: Some(path),
        })
    }

    fn sampling(&mut self, f: &Fields<'_>) -> Sampling {
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
        }
    }
}

fn quoted_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `http://host:port[/v1][/]` → `http://host:port`: the client adds API paths.
fn normalize_url(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or("the scheme must be http:// or https://")?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err("no host".into());
    }
    let trimmed = url.trim_end_matches('/');
    let trimmed = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
    Ok(trimmed.to_owned())
}

/// `rel` against `dir`, then against each parent of `dir`: suites name
/// fixtures relative to the project root or to themselves.
fn resolve_relative(dir: &Path, rel: &Path) -> Option<PathBuf> {
    if rel.is_absolute() {
        return rel.exists().then(|| rel.to_path_buf());
    }
    let mut base = Some(dir);
    while let Some(b) = base {
        let candidate = b.join(rel);
        if candidate.exists() {
            return Some(candidate);
        }
        base = b.parent();
    }
    rel.exists().then(|| rel.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::normalize_url;

    #[test]
    fn urls_are_normalized_to_the_server_root() {
        assert_eq!(normalize_url("http://h:1/v1/").unwrap(), "http://h:1");
        assert_eq!(normalize_url("https://h").unwrap(), "https://h");
        assert!(normalize_url("h:1").is_err());
        assert!(normalize_url("http://").is_err());
    }
}
