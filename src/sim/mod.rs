//! The embedded simulator: an OpenAI- and SGLang-compatible server with
//! configurable timing and scripted answers, for laptops and tests.
//!
//! [`app`] is a router factory; tests serve it in-process on `127.0.0.1:0`,
//! `servegate sim` serves it on a chosen port.

mod engine;
pub mod fault;
mod histogram;
pub mod launch;
pub mod profile;
pub mod router;
mod routes;
pub mod stamped;
mod vision;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use axum::Router;
use axum::routing::{get, post};
use axum::serve::ListenerExt as _;
use routes::Shape;

pub use engine::{Finish, Plan, count_tokens, plan, tokenize};
pub use profile::{Profile, Reply, Speaks};

/// The version string the simulator reports as its server version.
pub const VERSION: &str = concat!("servegate-sim ", env!("CARGO_PKG_VERSION"));

/// Shared state of one simulator.
#[derive(Debug)]
struct SimState {
    profile: Profile,
    running: AtomicUsize,
    requests: AtomicU64,
    prompt_tokens: AtomicU64,
    generation_tokens: AtomicU64,
    /// Tokens the running requests hold in the KV cache (prompts and what
    /// they generated so far).
    kv_tokens: AtomicU64,
    flushes: AtomicU64,
    counters: Counters,
    /// SGLang's gauges as it last wrote them (`routes::info`).
    gauges: std::sync::Mutex<Option<routes::Gauges>>,
    ttft: histogram::PromHistogram,
    e2e: histogram::PromHistogram,
    /// The gap before each chunk after the first, over the tokens it
    /// brought, once for each (SGLang's `observe_inter_token_latency`).
    itl: histogram::PromHistogram,
    /// Time in the queue: none waits in the simulator, each request is
    /// observed at 0.
    queue_time: histogram::PromHistogram,
    /// When health checks start answering 200; `None`: never.
    ready_at: Option<std::time::Instant>,
    /// Set by `hang_after`: nothing is answered any more.
    hung: std::sync::atomic::AtomicBool,
    /// Set by `scheduler_hang_after`: nothing is generated any more.
    scheduler_hung: std::sync::atomic::AtomicBool,
    /// Set by `crash_after` speaking as vLLM: its engine died, its front
    /// end answers with the error until it exits.
    engine_dead: std::sync::atomic::AtomicBool,
    /// How long `/health_generate` waits for a token before its 503:
    /// SGLang's `SGLANG_HEALTH_CHECK_TIMEOUT` (20 s by default).
    health_check_timeout: std::time::Duration,
    /// Whether `/health` generates as `/health_generate` does: SGLang's
    /// `SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION` (true by default).
    health_generates: bool,
    /// The prompts its prefix cache holds (tokenized), at most
    /// [`PREFIXES_KEPT`]; emptied by `/flush_cache`.
    prefixes: std::sync::Mutex<Vec<Vec<String>>>,
}

impl SimState {
    /// Whether it is past its loading: health checks may answer 200.
    fn started(&self) -> bool {
        self.ready_at
            .is_some_and(|at| std::time::Instant::now() >= at)
    }
}

/// The counters SGLang keeps beside its token counts, as `/metrics` shows
/// them (`sglang:num_aborted_requests_total`, …).
#[derive(Debug, Default)]
struct Counters {
    /// Requests that went before their end.
    aborted: AtomicU64,
    /// Retractions.
    retracted: AtomicU64,
    /// Prompt tokens served from the prefix cache.
    cached_tokens: AtomicU64,
    /// Speculative verify steps (one per chunk).
    verify_steps: AtomicU64,
    /// Requests that reached their end, by finish: stop, length (vLLM's
    /// `request_success_total`).
    finished: [AtomicU64; 2],
    /// Forward passes by SGLang's `mode`: prefill (never a graph here),
    /// decode with a CUDA graph, decode without (a chunk of one stream is
    /// one pass: the simulator has no batches).
    passes: [AtomicU64; 3],
}

impl Counters {
    /// Counts what a planned request will report.
    fn count(&self, plan: &Plan) {
        let s = &plan.server;
        self.retracted.fetch_add(s.retractions, Ordering::Relaxed);
        self.cached_tokens
            .fetch_add(s.cached_tokens, Ordering::Relaxed);
        if let Some(step) = s.spec_step {
            self.verify_steps.fetch_add(
                plan.completion_tokens().div_ceil(step.max(1) as u64),
                Ordering::Relaxed,
            );
        }
    }
}

/// Prompts the simulator's prefix cache keeps.
const PREFIXES_KEPT: usize = 256;

/// The simulator's routes for a profile.
pub fn app(profile: Profile) -> Router {
    let ready_at = profile
        .loading
        .and_then(|d| std::time::Instant::now().checked_add(d));
    let env = |k: &str| std::env::var(k).ok();
    let state = Arc::new(SimState {
        ready_at,
        health_check_timeout: std::time::Duration::from_secs(
            env("SGLANG_HEALTH_CHECK_TIMEOUT")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(20),
        ),
        // As SGLang's EnvBool reads it (`srt/environ.py`).
        health_generates: !env("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION")
            .is_some_and(|v| matches!(v.to_lowercase().as_str(), "false" | "0" | "no" | "n")),
        hung: std::sync::atomic::AtomicBool::new(false),
        scheduler_hung: std::sync::atomic::AtomicBool::new(false),
        engine_dead: std::sync::atomic::AtomicBool::new(false),
        profile,
        running: AtomicUsize::new(0),
        requests: AtomicU64::new(0),
        prompt_tokens: AtomicU64::new(0),
        generation_tokens: AtomicU64::new(0),
        kv_tokens: AtomicU64::new(0),
        flushes: AtomicU64::new(0),
        counters: Counters::default(),
        gauges: std::sync::Mutex::default(),
        prefixes: std::sync::Mutex::default(),
        ttft: histogram::PromHistogram::default(),
        e2e: histogram::PromHistogram::default(),
        itl: histogram::PromHistogram::default(),
        queue_time: histogram::PromHistogram::default(),
    });
    let openai = Router::new()
        .route("/v1/chat/completions", routes::generation(Shape::Chat))
        .route("/v1/completions", routes::generation(Shape::Completions))
        .route("/v1/models", get(routes::models))
        .route("/metrics", get(routes::metrics))
        // FastAPI's answer to a route it lacks, under SGLang and vLLM.
        .fallback(|| async {
            (
                axum::http::StatusCode::NOT_FOUND,
                axum::Json(serde_json::json!({"detail": "Not Found"})),
            )
        });
    let routes = match state.profile.speaks {
        Speaks::Sglang => openai
            .route("/generate", routes::generation(Shape::Generate))
            .route("/completion", routes::generation(Shape::Llama))
            .route("/health", get(routes::health_route))
            .route("/health_generate", get(routes::health_generate))
            .route("/get_model_info", get(routes::deprecated_model_info))
            .route("/model_info", get(routes::model_info))
            .route("/get_server_info", get(routes::deprecated_server_info))
            .route("/server_info", get(routes::server_info))
            .route("/flush_cache", post(routes::flush_cache)),
        Speaks::Vllm => openai
            .route("/health", get(routes::vllm_health))
            .route("/version", get(routes::version)),
    };
    routes
        // A request with the largest image a suite may send, base64 (4/3)
        // and a margin for the rest: axum's default (2 MB) would refuse
        // images SGLang and vLLM take.
        .layer(axum::extract::DefaultBodyLimit::max(
            crate::media::MAX_IMAGE_BYTES * 2,
        ))
        .layer(axum::middleware::from_fn_with_state(
            std::sync::Arc::clone(&state),
            routes::auth,
        ))
        .with_state(state)
}

/// A simulator serving in the background of the current tokio runtime.
#[derive(Debug)]
pub struct RunningSim {
    /// Where it listens.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl RunningSim {
    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for RunningSim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds `addr` with a deep accept queue: a load generator opens hundreds of
/// connections at once, and a queue of 128 drops SYNs, which cost a 1 s
/// retransmit.
pub fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(4096)
}

/// Binds `addr` (port 0 picks a free port) and serves the simulator in the
/// background of the current tokio runtime until the returned handle is
/// dropped.
pub fn spawn(profile: Profile, addr: SocketAddr) -> std::io::Result<RunningSim> {
    let listener = listen(addr)?;
    let addr = listener.local_addr()?;
    // Tokens are tiny writes: without TCP_NODELAY, Nagle's algorithm and
    // delayed ACKs hold them back by tens of milliseconds.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let router = app(profile);
    let task = tokio::spawn(async move {
        // Errors here mean the listener died; the clients see refused connections.
        let _ = axum::serve(listener, router).await;
    });
    Ok(RunningSim { addr, task })
}
