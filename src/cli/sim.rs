//! `servegate sim`: the simulator (or bench-client's stamped streamer) as
//! a server process, its profile overridden by the command line.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use servegate::exit::Exit;
use servegate::sim::{self, Profile};

/// `servegate sim`: the simulator as a server process.
#[derive(Debug, clap::Args)]
pub(crate) struct SimArgs {
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 30000)]
    port: u16,
    /// Address to bind; loopback unless you mean otherwise.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,
    /// A simulator profile (fixtures/sim/*.yaml).
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Time to first token, overriding the profile (e.g. `100ms`).
    #[arg(long, env = "SERVEGATE_SIM_TTFT", value_parser = servegate::units::parse_duration)]
    ttft: Option<Duration>,
    /// Inter-token latency, overriding the profile (`0ms`: as fast as possible).
    #[arg(long, env = "SERVEGATE_SIM_ITL", value_parser = servegate::units::parse_duration)]
    itl: Option<Duration>,
    /// Streams decoded at full speed, overriding the profile.
    #[arg(long)]
    capacity: Option<usize>,
    /// SGLang's `--num-continuous-decode-steps`: tokens per streamed chunk,
    /// overriding the profile's `tokens_per_chunk` (and reported in
    /// `/server_info`).
    #[arg(long, value_name = "N")]
    num_continuous_decode_steps: Option<usize>,
    /// Serve bench-client's truth instead of the simulator: a bare HTTP/1.1
    /// streamer whose tokens are their own send times (µs since the epoch);
    /// any request but a POST gets an empty 404.
    #[arg(long)]
    stamp_tokens: bool,
    /// With `--stamp-tokens`: tokens after the first written N at a time,
    /// every N × ITL (a loaded server's events reaching its socket together).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "stamp_tokens", value_parser = clap::value_parser!(u32).range(1..))]
    pack_tokens: u32,
    /// Route every request round-robin to this worker (repeatable) instead
    /// of serving: a router in front of simulators, as SGLang's stands in
    /// front of its engines (`launch.workers`).
    #[arg(long, value_name = "URL", conflicts_with = "stamp_tokens")]
    route: Vec<String>,
    /// Health checks answer 503 "Loading model" for this long after start.
    #[arg(long, value_parser = servegate::units::parse_duration)]
    loading: Option<Duration>,
    /// Health checks never answer 200: a start-up that hangs.
    #[arg(long)]
    never_ready: bool,
    /// The server it speaks as, overriding the profile's `speaks`: its
    /// routes, answer shapes, errors and metric names (SGLang 0.5.23's,
    /// or vLLM 0.32's).
    #[arg(long, value_parser = ["sglang", "vllm"])]
    speaks: Option<String>,
    /// Abort (SIGABRT) when a generation request arrives after this many;
    /// speaking as vLLM, its engine dies instead (the request gets the
    /// error in its stream, `/health` 503, the process exits 3 s later).
    #[arg(long)]
    crash_after: Option<u64>,
    /// Stop answering anything (health included) when a generation request
    /// arrives after this many.
    #[arg(long)]
    hang_after: Option<u64>,
    /// Stop generating when a generation request arrives after this many:
    /// a hung scheduler behind a live HTTP server. Generation requests
    /// hang; `/health_generate` (and `/health`, as in SGLang 0.5.23)
    /// answers 503 after `SGLANG_HEALTH_CHECK_TIMEOUT` (20 s). At 0 the
    /// warmup never gets its token: 503 at once, and the process kills
    /// itself after `SGLANG_WARMUP_TIMEOUT` (600 s), unless
    /// `--skip-server-warmup`.
    #[arg(long)]
    scheduler_hang_after: Option<u64>,
    /// SGLang's `--api-key`: every route but health and metrics takes it.
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// SGLang's `--admin-api-key`: `/flush_cache` takes it, and only it.
    #[arg(long, value_name = "KEY")]
    admin_api_key: Option<String>,
    /// A `/get_server_info` field, as `KEY=VALUE` (VALUE read as JSON when
    /// it parses, else as a string); repeatable.
    #[arg(long = "server-info", value_name = "KEY=VALUE")]
    server_info: Vec<String>,
    /// A line written to stderr at start (log-pattern tests); repeatable.
    #[arg(long, value_name = "LINE")]
    say: Vec<String>,
    /// A fault every generation request meets (`http_500`, `stall_mid_stream`, …).
    #[arg(long)]
    fault: Option<servegate::sim::fault::Fault>,
    /// SGLang's launch flags: `servegate sim` as `python3 -m
    /// sglang.launch_server` with the same arguments.
    #[command(flatten)]
    sglang: servegate::sim::launch::Flags,
}

pub(crate) fn serve_sim(set: &SimArgs) -> ExitCode {
    let addr = SocketAddr::new(set.host, set.port);
    let mut profile = match set.profile.as_deref().map(Profile::load).transpose() {
        Ok(p) => p.unwrap_or_default(),
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Usage.into();
        }
    };
    profile.ttft = set.ttft.unwrap_or(profile.ttft);
    profile.itl = set.itl.unwrap_or(profile.itl);
    profile.capacity = set.capacity.unwrap_or(profile.capacity).max(1);
    profile.tokens_per_chunk = set
        .num_continuous_decode_steps
        .unwrap_or(profile.tokens_per_chunk)
        .max(1);
    profile.crash_after = set.crash_after.or(profile.crash_after);
    match set.speaks.as_deref() {
        Some("vllm") => profile.speaks = sim::Speaks::Vllm,
        Some(_) => profile.speaks = sim::Speaks::Sglang,
        None => {}
    }
    profile.fault = set.fault.or(profile.fault);
    profile.hang_after = set.hang_after;
    profile.scheduler_hang_after = set.scheduler_hang_after;
    profile.api_key.clone_from(&set.api_key);
    profile.admin_api_key.clone_from(&set.admin_api_key);
    profile.loading = if set.never_ready {
        None
    } else {
        set.loading.or(profile.loading)
    };
    for field in &set.server_info {
        let Some((key, value)) = field.split_once('=') else {
            eprintln!("error: --server-info `{field}`: expected KEY=VALUE");
            return Exit::Usage.into();
        };
        let value = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
        profile.server_info.insert(key.to_owned(), value);
    }
    for line in set.sglang.apply(&mut profile) {
        eprintln!("{line}");
    }
    for line in &set.say {
        eprintln!("{line}");
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return ExitCode::from(Exit::Failed);
        }
    };
    let (stamp_tokens, pack) = (set.stamp_tokens, set.pack_tokens);
    let routes = set.route.clone();
    let serves = if routes.is_empty() {
        format!("serving model {:?}", profile.model)
    } else {
        format!("routing round-robin to {}", routes.join(", "))
    };
    // A scheduler hung from the start never answers SGLang's warmup
    // request: after its loading and SGLANG_WARMUP_TIMEOUT the server
    // kills itself (`srt/entrypoints/http_server.py`, `_execute_server_warmup`).
    let warmup_dies = profile
        .warmup_never_answers()
        .then_some(profile.loading)
        .flatten();
    runtime.block_on(async {
        let (ttft, itl) = (profile.ttft, profile.itl);
        let spawned = if !routes.is_empty() {
            sim::listen(addr).and_then(|l| sim::router::spawn(l, routes))
        } else if stamp_tokens {
            sim::listen(addr)
                .and_then(|l| sim::stamped::spawn(l, sim::stamped::Pace { ttft, itl, pack }))
        } else {
            sim::spawn(profile, addr)
        };
        match spawned {
            Ok(running) => {
                if let Some(loading) = warmup_dies {
                    tokio::spawn(die_after_warmup(loading));
                }
                println!(
                    "servegate sim: {serves} at {} (Ctrl-C to stop)",
                    running.base_url()
                );
                let _ = tokio::signal::ctrl_c().await;
                ExitCode::from(Exit::Passed)
            }
            Err(e) => {
                eprintln!("error: failed to bind {addr}: {e}");
                ExitCode::from(Exit::Failed)
            }
        }
    })
}

/// SGLang 0.5.23's end of a warmup request that got no answer within
/// `SGLANG_WARMUP_TIMEOUT` (600 s when unset or not positive): its log
/// line, then SIGKILL to itself (`kill_process_tree`).
async fn die_after_warmup(loading: Duration) {
    let timeout = std::env::var("SGLANG_WARMUP_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|t| t.is_finite() && *t > 0.0)
        .unwrap_or(600.0);
    tokio::time::sleep(loading + Duration::from_secs_f64(timeout)).await;
    eprintln!(
        "servegate sim: Initialization failed. warmup error: requests.exceptions.ReadTimeout: the warmup request had no answer in {timeout}s (SGLANG_WARMUP_TIMEOUT)"
    );
    #[cfg(unix)]
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    std::process::exit(1);
}
