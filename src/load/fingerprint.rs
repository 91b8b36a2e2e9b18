//! The configuration a figure was measured on, as baselines and the
//! history key it: the API, the served model, the server's version, the
//! fields of its configuration a reader looks for first, and — where the
//! server reports its whole resolved configuration (SGLang's
//! `/server_info`) or servegate launched it (the environment it gave the
//! server) — a digest of all of it. Two fingerprints that differ are told
//! apart by name: `dsa_decode_backend: flashmla → trtllm`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

/// A whole configuration: a field's name and its value in words. The
/// server's resolved arguments by their names; the launch environment as
/// `env:NAME`.
pub type Config = BTreeMap<String, String>;

/// A fingerprint's server version where nothing named one (a result file
/// of `vllm bench serve`, which names the model only).
pub(crate) const UNKNOWN_VERSION: &str = "of unknown version";

/// What a fingerprint's digest of the whole configuration follows.
const DIGEST: &str = ", config ";

/// The most fields a configuration keeps (SGLang 0.5.23 reports ~550): a
/// document with more is cut there, and the digest says so.
const FIELDS: usize = 1024;

/// The longest field name kept, in characters.
const NAME_CHARS: usize = 100;

/// The longest value kept, in characters (a launch command's, longer).
const VALUE_CHARS: usize = 300;
const COMMAND_CHARS: usize = 2000;

/// The value a field with a secret's name (`api_key`, `watermark_key`,
/// `ssl_keyfile_password`) is kept as where it is set: its presence
/// counts, its value is never read.
const SET: &str = "(set)";

/// Fields of SGLang's `/server_info` left out of the configuration: the
/// server's address and ports (a launch picks free ones), its start time
/// and live state, its version (the fingerprint's own part), figures it
/// derives from the memory it found free at start, and a seed it may draw.
const VOLATILE: &[&str] = &[
    "host",
    "port",
    "nccl_port",
    "dist_init_addr",
    "startup_time",
    "internal_states",
    "status",
    "version",
    "kv_events",
    "kv_event_sources",
    "max_total_num_tokens",
    "max_req_input_len",
    "random_seed",
    "served_model_name",
];

/// Launch flags whose values a launch picks (`{port}`) or that name the
/// machine's address, dropped with their values from `launch_command`.
const VOLATILE_FLAGS: &[&str] = &["--host", "--port", "--nccl-port", "--dist-init-addr"];

/// The environment a launched server was given that changes how it runs:
/// NCCL's, SGLang's, CUDA's and vLLM's own variables.
const ENV_PREFIXES: &[&str] = &["NCCL_", "SGLANG_", "CUDA_", "VLLM_"];

/// Variables of those that place the server rather than configure it.
const ENV_PLACEMENT: &[&str] = &["CUDA_VISIBLE_DEVICES"];

/// The fingerprint of a configuration: `api, model M, server V`, the
/// `shown` fields as `k=v`, and, where the whole configuration is known,
/// `, config <digest>`.
pub fn fingerprint(
    api: crate::suite::Api,
    model: &str,
    version: Option<&str>,
    shown: &[(&str, String)],
    whole: &Config,
) -> String {
    let mut out = format!(
        "{}, model {}, server {}",
        api.name(),
        model,
        version.unwrap_or(UNKNOWN_VERSION)
    );
    if !shown.is_empty() {
        let shown: Vec<String> = shown
            .iter()
            .map(|(k, v)| format!("{k}={}", bounded(v, 200)))
            .collect();
        out.push_str(", ");
        out.push_str(&shown.join(" "));
    }
    if !whole.is_empty() {
        out.push_str(DIGEST);
        out.push_str(&digest(whole));
    }
    out
}

/// The first 12 hex digits of the SHA-256 of a configuration's lines.
fn digest(config: &Config) -> String {
    let mut text = String::new();
    for (k, v) in config {
        text.push_str(k);
        text.push('=');
        text.push_str(v);
        text.push('\n');
    }
    crate::text::sha256_hex(text.as_bytes())[..12].to_owned()
}

/// A fingerprint without its digest: what a fingerprint written before
/// servegate digested whole configurations looked like.
pub(crate) fn without_digest(fingerprint: &str) -> Option<&str> {
    let (head, tail) = fingerprint.rsplit_once(DIGEST)?;
    (tail.len() == 12 && tail.bytes().all(|b| b.is_ascii_hexdigit())).then_some(head)
}

/// Printable, at most `max` characters.
fn bounded(text: &str, max: usize) -> String {
    let clean = crate::secrets::scrub(text);
    let printable = crate::text::printable(&clean);
    let mut out: String = printable.chars().take(max).collect();
    if printable.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// The last part of a path.
fn file_name(path: &str) -> &str {
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path)
}

/// Whether a field's value is a path (`model_path`, `lora_paths`,
/// `download_dir`, `lmcache_config_file`): its file name is kept, so the
/// same checkpoint under another directory is the same configuration.
fn is_path_field(name: &str) -> bool {
    ["_path", "_paths", "_dir", "_file", "_certfile", "_keyfile"]
        .iter()
        .any(|s| name.ends_with(s))
}

/// SGLang's resolved configuration from its `/server_info` (0.5.23: its
/// server arguments as resolved, flat, with `launch_command` and the
/// scheduler's figures): every field but the [`VOLATILE`] ones, paths by
/// their file names, a secret's name by its presence alone, lists and
/// objects as compact JSON, everything printable and bounded.
pub(crate) fn sglang_config(info: &Value) -> Config {
    let Some(map) = info.as_object() else {
        return Config::new();
    };
    let mut out = Config::new();
    for (name, value) in map {
        if out.len() == FIELDS {
            out.insert("(cut)".to_owned(), format!("{} fields", map.len()));
            break;
        }
        if VOLATILE.contains(&name.as_str()) {
            continue;
        }
        let words = match value {
            Value::Null => "null".to_owned(),
            Value::String(s) if crate::secrets::is_secret_name(name) && !s.is_empty() => {
                SET.to_owned()
            }
            Value::String(s) if name == "launch_command" => {
                bounded(&launch_command(s), COMMAND_CHARS)
            }
            Value::String(s) if is_path_field(name) => bounded(file_name(s), VALUE_CHARS),
            Value::String(s) => bounded(s, VALUE_CHARS),
            Value::Array(items) if is_path_field(name) => bounded(
                &items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .map_or_else(|| i.to_string(), |s| file_name(s).to_owned())
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                VALUE_CHARS,
            ),
            other => bounded(&other.to_string(), VALUE_CHARS),
        };
        out.insert(bounded(name, NAME_CHARS), words);
    }
    out
}

/// A launched process's argv as a configuration, read as a launch
/// command is ([`launch_command`]), its program by its file name: what a
/// router's command and its workers' say of how they run, the same on
/// every machine and run.
pub(crate) fn argv_config(argv: &[String]) -> String {
    let mut words = argv.to_vec();
    if let Some(program) = words.first_mut()
        && let Some(name) = std::path::Path::new(program.as_str()).file_name()
    {
        *program = name.to_string_lossy().into_owned();
    }
    bounded(&launch_command(&words.join(" ")), COMMAND_CHARS)
}

/// A launch command as a configuration: the address and ports a launch
/// picks dropped with their flags, a path argument by its file name, a
/// secret flag's value by its presence.
fn launch_command(command: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut words = command.split_whitespace();
    while let Some(word) = words.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (word, None),
        };
        if !flag.starts_with("--") {
            out.push(word.to_owned());
            continue;
        }
        // A flag's value: inline, or the next word unless that is a flag.
        let mut value = || {
            inline.map(str::to_owned).or_else(|| {
                let next = words.clone().next().filter(|w| !w.starts_with("--"))?;
                words.next();
                Some(next.to_owned())
            })
        };
        if VOLATILE_FLAGS.contains(&flag) {
            value();
            continue;
        }
        let name = flag.trim_start_matches('-').replace('-', "_");
        out.push(flag.to_owned());
        if crate::secrets::is_secret_name(&name) {
            if value().is_some() {
                out.push(SET.to_owned());
            }
        } else if is_path_field(&name) || name == "model" {
            if let Some(v) = value() {
                out.push(file_name(&v).to_owned());
            }
        } else if let Some(v) = value() {
            out.push(v);
        }
    }
    out.join(" ")
}

/// The environment a launched server runs with that changes how it runs
/// ([`ENV_PREFIXES`]), as `env:NAME`: what servegate's own environment
/// passes on, overridden by the launch's and the variant's `env`.
/// Placement ([`ENV_PLACEMENT`]) is left out; a secret's name (`…_TOKEN`)
/// is kept by its presence.
pub(crate) fn launch_env<'a>(
    inherited: impl Iterator<Item = (String, String)>,
    set: impl Iterator<Item = (&'a str, &'a str)>,
) -> Config {
    let mut all: BTreeMap<String, String> = inherited.collect();
    for (k, v) in set {
        all.insert(k.to_owned(), v.to_owned());
    }
    all.into_iter()
        .filter(|(k, _)| {
            ENV_PREFIXES.iter().any(|p| k.starts_with(p)) && !ENV_PLACEMENT.contains(&k.as_str())
        })
        .take(FIELDS)
        .map(|(k, v)| {
            let v = if crate::secrets::is_secret_name(&k) {
                SET.to_owned()
            } else {
                bounded(&v, VALUE_CHARS)
            };
            (format!("env:{}", bounded(&k, NAME_CHARS)), v)
        })
        .collect()
}

/// How `to` differs from `from`, a field at a line: `name: a → b`, `unset`
/// where one has no such field.
pub fn differences(from: &Config, to: &Config) -> Vec<String> {
    let unset = "unset";
    let mut out = Vec::new();
    for (k, a) in from {
        match to.get(k) {
            Some(b) if b == a => {}
            Some(b) => out.push(format!("{k}: {a} → {b}")),
            None => out.push(format!("{k}: {a} → {unset}")),
        }
    }
    for (k, b) in to {
        if !from.contains_key(k) {
            out.push(format!("{k}: {unset} → {b}"));
        }
    }
    out
}

/// [`differences`] in one line: the first `n` of them and how many more.
pub(crate) fn differences_line(from: &Config, to: &Config, n: usize) -> String {
    let all = differences(from, to);
    if all.is_empty() {
        return "no field differs (the API, model or server version does)".to_owned();
    }
    let mut line = all.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if all.len() > n {
        let _ = write!(line, " and {} more", all.len() - n);
    }
    line
}

/// A configuration kept from an imported or stored record: a crafted one
/// is held to the same bounds as one read from a server, and a value
/// under a secret's name that is no number, flag or null is kept by its
/// presence alone.
pub fn kept(config: &Config) -> Config {
    config
        .iter()
        .take(FIELDS)
        .map(|(k, v)| {
            let plain = v == "null" || v == "true" || v == "false" || v.parse::<f64>().is_ok();
            let v = if crate::secrets::is_secret_name(k.trim_start_matches("env:")) && !plain {
                SET.to_owned()
            } else {
                bounded(v, COMMAND_CHARS)
            };
            (bounded(k, NAME_CHARS + 4), v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// SGLang's `/server_info` as 0.5.23 resolves it: volatile fields
    /// left out, paths by file name, secrets by presence, the launch
    /// command without its address, and a change named.
    #[test]
    fn the_whole_configuration_is_kept_and_its_changes_named() {
        let info = json!({
            "model_path": "/models/GLM-5-FP8", "host": "0.0.0.0", "port": 30000,
            "tp_size": 8, "dsa_decode_backend": "flashmla", "api_key": "sk-very-secret",
            "admin_api_key": null, "startup_time": 1.7e9, "internal_states": [{"x": 1}],
            "uvicorn_access_log_exclude_prefixes": ["/metrics"], "mem_fraction_static": 0.8,
            "launch_command": "--model-path /models/GLM-5-FP8 --tp 8 --port 30000 --host 0.0.0.0 --api-key sk-very-secret --dsa-decode-backend flashmla",
            "version": "0.5.23", "random_seed": 123_456,
        });
        let a = sglang_config(&info);
        let shown = format!("{a:?}");
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert_eq!(a["api_key"], "(set)");
        assert_eq!(a["admin_api_key"], "null");
        assert_eq!(a["model_path"], "GLM-5-FP8");
        assert_eq!(
            a["launch_command"],
            "--model-path GLM-5-FP8 --tp 8 --api-key (set) --dsa-decode-backend flashmla"
        );
        assert_eq!(a["uvicorn_access_log_exclude_prefixes"], "[\"/metrics\"]");
        for gone in [
            "host",
            "port",
            "startup_time",
            "internal_states",
            "version",
            "random_seed",
        ] {
            assert!(!a.contains_key(gone), "{gone}");
        }
        // Another machine: another address and path, the same configuration.
        let mut elsewhere = info.clone();
        elsewhere["port"] = json!(31_000);
        elsewhere["model_path"] = json!("/data/GLM-5-FP8");
        elsewhere["startup_time"] = json!(1.8e9);
        elsewhere["launch_command"] = json!(
            "--model-path /data/GLM-5-FP8 --tp 8 --port=31000 --host 0.0.0.0 --api-key sk-other --dsa-decode-backend flashmla"
        );
        assert_eq!(sglang_config(&elsewhere), a);
        let api = crate::suite::Api::OpenAiChat;
        let print =
            |c: &Config| fingerprint(api, "glm-5", Some("0.5.23"), &[("tp_size", "8".into())], c);
        assert_eq!(print(&sglang_config(&elsewhere)), print(&a));
        // The bring-up's change: the decode backend.
        let mut trtllm = info.clone();
        trtllm["dsa_decode_backend"] = json!("trtllm");
        trtllm["launch_command"] =
            json!("--model-path /models/GLM-5-FP8 --tp 8 --dsa-decode-backend trtllm");
        let b = sglang_config(&trtllm);
        assert_ne!(print(&a), print(&b));
        assert_eq!(
            differences(&a, &b),
            [
                "dsa_decode_backend: flashmla → trtllm",
                "launch_command: --model-path GLM-5-FP8 --tp 8 --api-key (set) --dsa-decode-backend flashmla → --model-path GLM-5-FP8 --tp 8 --dsa-decode-backend trtllm",
            ]
        );
        let fp = print(&a);
        assert!(
            fp.starts_with("openai-chat, model glm-5, server 0.5.23, tp_size=8, config "),
            "{fp}"
        );
        assert_eq!(
            without_digest(&fp),
            Some("openai-chat, model glm-5, server 0.5.23, tp_size=8")
        );
        assert_eq!(without_digest("openai-chat, model m, server 1"), None);
    }

    /// The environment that configures a launched server: NCCL's, SGLang's,
    /// CUDA's, vLLM's, the launch's own over the inherited, placement left
    /// out, a secret by presence.
    #[test]
    fn the_launch_environment_that_matters_is_kept() {
        let inherited = [
            ("NCCL_ALGO", "Ring"),
            ("PATH", "/usr/bin"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("SGLANG_API_TOKEN", "hunter2hunter2"),
            ("HF_TOKEN", "hf_abc"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let env = launch_env(
            inherited.into_iter(),
            [
                ("NCCL_ALGO", "Tree"),
                ("SGLANG_ENABLE_NAN_LOGITS_CHECK", "1"),
            ]
            .into_iter(),
        );
        assert_eq!(
            env.into_iter().collect::<Vec<_>>(),
            [
                ("env:NCCL_ALGO".to_owned(), "Tree".to_owned()),
                ("env:SGLANG_API_TOKEN".to_owned(), "(set)".to_owned()),
                (
                    "env:SGLANG_ENABLE_NAN_LOGITS_CHECK".to_owned(),
                    "1".to_owned()
                ),
            ]
        );
    }

    /// A crafted record's configuration is bounded and keeps no secret.
    #[test]
    fn a_crafted_record_keeps_no_secret() {
        let crafted: Config = [
            ("api_key", "sk-from-a-crafted-record"),
            ("env:HF_TOKEN", "hf_crafted"),
            ("tbo_token_distribution_threshold", "0.48"),
            ("attention_backend", "fa3"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let kept = kept(&crafted);
        assert_eq!(kept["api_key"], "(set)");
        assert_eq!(kept["env:HF_TOKEN"], "(set)");
        assert_eq!(kept["tbo_token_distribution_threshold"], "0.48");
        assert_eq!(kept["attention_backend"], "fa3");
    }

    /// A server that sends a flood of fields, or huge ones, is cut to the
    /// bounds.
    #[test]
    fn a_hostile_configuration_is_bounded() {
        let mut map = serde_json::Map::new();
        for i in 0..5000 {
            map.insert(
                format!("field_{i:05}_{}", "x".repeat(300)),
                json!("y".repeat(10_000)),
            );
        }
        let config = sglang_config(&Value::Object(map));
        assert_eq!(config.len(), FIELDS + 1);
        assert!(
            config
                .iter()
                .all(|(k, v)| k.chars().count() <= NAME_CHARS + 1
                    && v.chars().count() <= VALUE_CHARS + 1)
        );
        assert_eq!(config["(cut)"], "5000 fields");
    }
}
