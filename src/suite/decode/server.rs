//! Decoding the server under test: `target:` (its URL, API, deadlines and
//! read caps), `target.launch`, `expect_server:` and `variants:`.

use std::time::Duration;

use super::schema::server::{EXPECTS, LIMITS, PROCESS, READY, TARGET, TIMEOUTS, VARIANT, WORKERS};
use super::schema::vocabulary::keys;
use super::{Decoder, Fields, quoted_list};
use crate::suite::diagnostics::Diagnostic;
use crate::suite::model::{
    Api, BaseUrl, ConfigCheck, ConfigExpect, ConfigSource, Launch, ReadLimits, Ready, Target,
    Timeouts, Variant,
};
use crate::suite::names::Named as _;
use crate::suite::node::{Node, Yaml};

impl Decoder<'_> {
    /// The NAME of an environment variable holding a key (`key` in the
    /// suite, `example` a name to show): never the key itself.
    fn key_variable(&mut self, v: &Yaml, key: &str, example: &str) -> Option<String> {
        let name = self.text(v, key)?;
        let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if valid {
            return Some(name);
        }
        self.error(
            Diagnostic::new(
                v.loc,
                format!("{key} must be the NAME of an environment variable"),
            )
            .expected(format!(
                "a name such as `{example}`; never write the key itself in a suite"
            )),
        );
        None
    }

    pub(super) fn target(&mut self, y: &Yaml) -> Option<Target> {
        let f = self.fields(y, "target", &[TARGET])?;
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
        let api_key_env = f
            .get("api_key_env")
            .and_then(|v| self.key_variable(v, "api_key_env", "SGLANG_API_KEY"));
        let admin_key_env = f
            .get("admin_key_env")
            .and_then(|v| self.key_variable(v, "admin_key_env", "SGLANG_ADMIN_API_KEY"));
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
            admin_key_env,
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
        let f = self.fields(y, "target.timeouts", &[TIMEOUTS])?;
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
        let f = self.fields(y, "target.limits", &[LIMITS])?;
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
}

impl Decoder<'_> {
    pub(super) fn launch(&mut self, y: &Yaml, api: Api) -> Option<Launch> {
        let f = self.fields(y, "target.launch", &[PROCESS, WORKERS])?;
        let f = &f;
        let workers = f
            .get("workers")
            .map_or_else(Vec::new, |v| self.workers(v, api));
        let mut launch = self.process(y, f, api, "launch")?;
        self.worker_urls(f.get("command").map_or(y.loc, |v| v.loc), &launch, &workers);
        launch.workers = workers;
        Some(launch)
    }

    /// The keys a launch and a worker share: the process, its readiness,
    /// its log's fatal lines and its teardown.
    pub(super) fn process(
        &mut self,
        y: &Yaml,
        f: &Fields<'_>,
        api: Api,
        what: &str,
    ) -> Option<Launch> {
        let command = self
            .required(f, "command", &format!("a {what}"))
            .and_then(|v| self.argv(v, &format!("{what}.command")));
        if let (Some(v), Some(c)) = (f.get("command"), &command)
            && c.is_empty()
        {
            self.error(Diagnostic::new(v.loc, format!("{what}.command is empty")).expected(
                "the server's argv, e.g. `[python3, -m, sglang.launch_server, --port, \"{port}\"]`",
            ));
        }
        let env = f
            .get("env")
            .map_or(Some(Vec::new()), |v| self.env_map(v, "launch.env"));
        let cwd = f.get("cwd").and_then(|v| {
            let dir = self.interpolated(v, "launch.cwd")?;
            let path = self.suite_dir.join(dir);
            if path.is_dir() {
                Some(path)
            } else {
                self.error(Diagnostic::new(
                    v.loc,
                    format!("launch.cwd `{}` is not a directory", path.display()),
                ));
                None
            }
        });
        let host = f
            .get("host")
            .and_then(|v| self.interpolated(v, "launch.host"))
            .unwrap_or_else(|| "127.0.0.1".to_owned());
        let port = f.get("port").and_then(|v| {
            let text = self.interpolated(v, "launch.port")?;
            match text.trim().parse::<u16>() {
                Ok(p) if p > 0 => Some(p),
                _ => {
                    self.error(
                        Diagnostic::new(v.loc, format!("launch.port `{text}` is not a port"))
                            .expected("a port number from 1 to 65535, or no `port` for a free one"),
                    );
                    None
                }
            }
        });
        let sglang = api == Api::SglangGenerate
            || command
                .as_ref()
                .is_some_and(|c| c.iter().any(|a| a.contains("sglang")));
        let mut ready = Ready {
            path: if sglang {
                "/health_generate"
            } else {
                "/health"
            }
            .to_owned(),
            interval: Duration::from_secs(2),
            timeout: Duration::from_secs(20 * 60),
        };
        if let Some(v) = f.get("ready")
            && let Some(rf) = self.fields(v, "launch.ready", &[READY])
        {
            if let Some(p) = rf.get("path").and_then(|p| self.text(p, "ready.path")) {
                ready.path = if p.starts_with('/') {
                    p
                } else {
                    format!("/{p}")
                };
            }
            if let Some(d) = rf
                .get("interval")
                .and_then(|d| self.duration(d, "ready.interval"))
            {
                ready.interval = d;
            }
            if let Some(d) = rf
                .get("timeout")
                .and_then(|d| self.duration(d, "ready.timeout"))
            {
                ready.timeout = d;
            }
        }
        let fatal_log_patterns = f.get("fatal_log_patterns").map_or(Vec::new(), |v| {
            self.items(v, "fatal_log_patterns", |d, p| {
                d.regex(p, "a fatal log pattern")
            })
        });
        let grace = f
            .get("grace")
            .and_then(|v| self.duration(v, "launch.grace"))
            .unwrap_or(Duration::from_secs(30));
        Some(Launch {
            command: command?,
            env: env?,
            cwd,
            host,
            port,
            ready,
            fatal_log_patterns,
            grace,
            workers: Vec::new(),
            loc: y.loc,
        })
    }

    /// A list of arguments, each interpolated.
    fn argv(&mut self, y: &Yaml, what: &str) -> Option<Vec<String>> {
        if let Node::Str(_) = y.node {
            self.error(
                Diagnostic::new(y.loc, format!("{what} must be a list of arguments, found a string"))
                    .expected("an argv list such as `[python3, -m, sglang.launch_server]`: no shell splits it"),
            );
            return None;
        }
        let items = self.list(y, what)?;
        items
            .iter()
            .map(|a| self.interpolated(a, what))
            .collect::<Vec<_>>()
            .into_iter()
            .collect()
    }

    /// A mapping of environment variable names to (interpolated) values.
    fn env_map(&mut self, y: &Yaml, what: &str) -> Option<Vec<(String, String)>> {
        let Node::Map(entries) = &y.node else {
            self.type_error(y, what, "a mapping of NAME: value");
            return None;
        };
        let mut out = Vec::new();
        let mut ok = true;
        for (k, v) in entries {
            let valid = !k.name.is_empty()
                && k.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                self.error(
                    Diagnostic::new(
                        k.loc,
                        format!("invalid environment variable name `{}`", k.name),
                    )
                    .expected("letters, digits and `_`"),
                );
                ok = false;
            }
            match self.interpolated(v, &format!("{what}.{}", k.name)) {
                Some(value) => out.push((k.name.clone(), value)),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    pub(super) fn variants(&mut self, y: &Yaml) -> Vec<Variant> {
        let variants = self.items(y, "variants", |d, item| {
            let f = d.fields(item, "variant", &[VARIANT])?;
            let name = d
                .required(&f, "name", "variant")
                .and_then(|v| d.name(v, "variant name"));
            let env = f
                .get("env")
                .map_or(Some(Vec::new()), |v| d.env_map(v, "variant.env"));
            let args = f
                .get("args")
                .map_or(Some(Vec::new()), |v| d.argv(v, "variant.args"));
            let expect_server = f
                .get("expect_server")
                .map_or_else(Vec::new, |y| d.expect_server(y));
            let thresholds = f
                .get("thresholds")
                .map_or_else(|| Some(Vec::new()), |y| d.variant_thresholds(y));
            Some(Variant {
                name: name?,
                env: env?,
                args: args?,
                expect_server,
                thresholds: thresholds?,
                loc: item.loc,
            })
        });
        self.unique_names(variants.iter().map(|v| (v.name.as_str(), v.loc)), "variant");
        variants
    }

    /// A variant's `thresholds: {<gate>: {<figure>: <bound>}}`.
    fn variant_thresholds(
        &mut self,
        y: &Yaml,
    ) -> Option<
        Vec<(
            String,
            crate::suite::node::Loc,
            Vec<crate::suite::model::LocatedThreshold>,
        )>,
    > {
        let Node::Map(entries) = &y.node else {
            self.type_error(
                y,
                "variant.thresholds",
                "a mapping of gate name to its thresholds, such as `{single_stream_decode: {server.spec_accept_length: \">= 2.5\"}}`",
            );
            return None;
        };
        let mut out = Vec::new();
        for (gate, bounds) in entries {
            out.push((gate.name.clone(), gate.loc, self.thresholds(bounds)?));
        }
        Some(out)
    }

    pub(super) fn expect_server(&mut self, y: &Yaml) -> Vec<ConfigCheck> {
        let Some(f) = self.named_fields(y, "expect_server", &ConfigSource::names()) else {
            return Vec::new();
        };
        let mut checks = Vec::new();
        for (key, doc) in f.entries {
            let Some(source) = ConfigSource::named(&key.name) else {
                continue;
            };
            let Node::Map(fields) = &doc.node else {
                self.type_error(
                    doc,
                    &format!("expect_server.{}", key.name),
                    "a mapping of field: expected value",
                );
                continue;
            };
            for (field, want) in fields {
                if source == ConfigSource::Models && field.name.starts_with("adapter.") {
                    self.error(
                        Diagnostic::new(field.loc, format!("`models.{}` is the name of a check servegate makes itself", field.name))
                            .expected("`adapter: NAME` on a probe or gate: servegate checks that `/v1/models` lists it, as `models.adapter.NAME`"),
                    );
                    continue;
                }
                let path: Vec<String> = field.name.split('.').map(str::to_owned).collect();
                if path.iter().any(String::is_empty) {
                    self.error(
                        Diagnostic::new(field.loc, format!("invalid field path `{}`", field.name))
                            .expected("a field name, or a dotted path such as `data.0.id`"),
                    );
                    continue;
                }
                if let Some(expect) = self.config_expect(want) {
                    checks.push(ConfigCheck {
                        name: format!("{}.{}", source.name(), field.name),
                        source,
                        path,
                        expect,
                        loc: field.loc,
                    });
                }
            }
        }
        checks
    }

    fn config_expect(&mut self, y: &Yaml) -> Option<ConfigExpect> {
        match &y.node {
            Node::Map(_) => {
                let f = self.fields(y, "an expected value", &[EXPECTS])?;
                self.one_expectation(&f, y)
            }
            Node::Seq(_) => {
                self.error(
                    Diagnostic::new(y.loc, "an expected server value cannot be a list")
                        .expected("a value, or `{one_of: [a, b]}` for alternatives"),
                );
                None
            }
            _ => Some(ConfigExpect::Equals(y.to_json())),
        }
    }

    fn one_expectation(&mut self, f: &Fields<'_>, y: &Yaml) -> Option<ConfigExpect> {
        let checks = keys(&[EXPECTS]);
        let given: Vec<&str> = checks
            .iter()
            .copied()
            .filter(|k| f.get(k).is_some())
            .collect();
        if given.len() != 1 {
            self.error(
                Diagnostic::new(y.loc, "an expected server value takes exactly one check")
                    .expected(format!("one of {}", quoted_list(&checks))),
            );
            return None;
        }
        let v = f.get(given[0])?;
        match given[0] {
            "equals" => Some(ConfigExpect::Equals(v.to_json())),
            "contains" => self.text(v, "contains").map(ConfigExpect::Contains),
            "matches" => self.regex(v, "matches").map(ConfigExpect::Matches),
            _ => {
                let items = self.list(v, "one_of")?;
                Some(ConfigExpect::OneOf(
                    items.iter().map(Yaml::to_json).collect(),
                ))
            }
        }
    }
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
    if rest.chars().any(char::is_whitespace) {
        return Err("a URL holds no spaces (percent-encode one in a path as %20)".into());
    }
    let trimmed = url.trim_end_matches('/');
    let trimmed = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
    Ok(trimmed.to_owned())
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
        assert!(normalize_url("http://h b:1").is_err() && normalize_url("http:// h").is_err());
    }
}
