//! The simulator's endpoints besides generation: health (loading, hung),
//! models, model and server info, Prometheus metrics and the cache flush.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::sim::fault::Fault;
use crate::sim::{SimState, Speaks, VERSION};

/// SGLang answers 400 while requests run; so does the simulator.
pub(in crate::sim) async fn flush_cache(State(s): State<Arc<SimState>>) -> Response {
    if s.running.load(Ordering::SeqCst) > 0 {
        return (
            StatusCode::BAD_REQUEST,
            "Cache not flushed: requests are running",
        )
            .into_response();
    }
    s.flushes.fetch_add(1, Ordering::Relaxed);
    s.prefixes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clear();
    "Cache flushed.".into_response()
}

pub(in crate::sim) async fn health(State(s): State<Arc<SimState>>) -> Response {
    if s.hung.load(Ordering::SeqCst) {
        return std::future::pending().await;
    }
    if s.started() {
        return "".into_response();
    }
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"error": {"code": 503, "message": "Loading model"}})),
    )
        .into_response()
}

/// Keys as SGLang 0.5.23 checks them (`srt/utils/auth.py`): health and
/// metrics answer anyone; `/flush_cache` (`ADMIN_OPTIONAL`) takes the admin
/// key when one is set, else the API key; everything else the API key.
pub(in crate::sim) async fn auth(
    State(s): State<Arc<SimState>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let path = req.uri().path();
    let open = path.starts_with("/health") || path.starts_with("/metrics");
    let p = &s.profile;
    let wanted = if path == "/flush_cache" {
        p.admin_api_key.as_deref().or(p.api_key.as_deref())
    } else {
        p.api_key.as_deref()
    };
    let given = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match wanted {
        Some(key) if !open && given != Some(key) => (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "Unauthorized"})),
        )
            .into_response(),
        _ => next.run(req).await,
    }
}

/// `/health_generate`, and `/health` unless
/// `SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION` is false: as SGLang 0.5.23's
/// (`srt/entrypoints/http_server.py:722-799`), 503 at once while it
/// starts (until its warmup request got a token), else a token through
/// the scheduler — and a hung scheduler's 503 after
/// `SGLANG_HEALTH_CHECK_TIMEOUT`, with its log line.
pub(in crate::sim) async fn health_generate(State(s): State<Arc<SimState>>) -> Response {
    let from_start = s.profile.scheduler_hang_after == Some(0);
    if s.hung.load(Ordering::SeqCst) || !s.started() {
        return health(State(s)).await;
    }
    if s.profile.warmup_never_answers() {
        // The warmup request never got its token: SGLang stays `Starting`
        // (until SGLANG_WARMUP_TIMEOUT ends it, `servegate sim`).
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    if !from_start && !s.scheduler_hung.load(Ordering::SeqCst) {
        return health(State(s)).await;
    }
    tokio::time::sleep(s.health_check_timeout).await;
    eprintln!(
        "servegate sim: Health check failed. Server couldn't get a response from detokenizer for last {} seconds.",
        s.health_check_timeout.as_secs()
    );
    StatusCode::SERVICE_UNAVAILABLE.into_response()
}

/// `/health`: SGLang 0.5.23 serves it from `/health_generate`'s handler,
/// which answers without the scheduler only when
/// `SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION` is false.
pub(in crate::sim) async fn health_route(State(s): State<Arc<SimState>>) -> Response {
    if s.health_generates {
        health_generate(State(s)).await
    } else {
        health(State(s)).await
    }
}

/// The HTTP error a faulty server answers everything with, info included.
fn http_fault(s: &SimState) -> Option<Response> {
    let code = s.profile.fault.and_then(Fault::status)?;
    Some(super::error(
        s.profile.speaks,
        code,
        "simulated fault",
        "ServerError",
    ))
}

pub(in crate::sim) async fn models(State(s): State<Arc<SimState>>) -> Response {
    if let Some(r) = http_fault(&s) {
        return r;
    }
    // vLLM 0.32's cards name it their owner (which servegate reads to
    // tell vLLM).
    let mut model = json!({"id": s.profile.model, "object": "model", "created": 0,
              "owned_by": data_owner(s.profile.speaks), "root": s.profile.model, "parent": null,
              "max_model_len": 32768});
    if s.profile.speaks == Speaks::Vllm {
        // And the permission list OpenAI's once had.
        model["permission"] = json!([{"id": "modelperm-sim", "object": "model_permission",
            "created": 0, "allow_create_engine": false, "allow_sampling": true,
            "allow_logprobs": true, "allow_search_indices": false, "allow_view": true,
            "allow_fine_tuning": false, "organization": "*", "group": null, "is_blocking": false}]);
    }
    let mut data = vec![model];
    data.extend(s.profile.adapters.iter().map(|name| {
        json!({"id": name, "object": "model", "created": 0,
               "owned_by": data_owner(s.profile.speaks), "root": format!("/adapters/{name}"),
               "parent": s.profile.model, "max_model_len": null})
    }));
    Json(json!({"object": "list", "data": data})).into_response()
}

/// Who owns a card of `/v1/models`, as the server it speaks as says.
fn data_owner(speaks: Speaks) -> &'static str {
    match speaks {
        Speaks::Vllm => "vllm",
        Speaks::Sglang => "servegate-sim",
    }
}

/// vLLM's `/version`: the simulator's own, never a vLLM release.
pub(in crate::sim) async fn version() -> Response {
    Json(json!({"version": VERSION})).into_response()
}

/// vLLM 0.32's `/health`: 200 with no body while its engine runs (even
/// hung: it asks nothing of it), 503 once the engine died.
pub(in crate::sim) async fn vllm_health(State(s): State<Arc<SimState>>) -> Response {
    if s.engine_dead.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    health(State(s)).await
}

pub(in crate::sim) async fn model_info(State(s): State<Arc<SimState>>) -> Response {
    if let Some(r) = http_fault(&s) {
        return r;
    }
    // The fields SGLang 0.5.23 reports of a text model; its parsers as the
    // profile's server_info names them.
    let parser = |name: &str| {
        s.profile
            .server_info
            .get(name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    Json(json!({
        "model_path": s.profile.model,
        "served_model_name": s.profile.model,
        "tokenizer_path": s.profile.model,
        "is_generation": true,
        "preferred_sampling_params": null,
        "weight_version": "default",
        "load_format": "auto",
        "reasoning_parser": parser("reasoning_parser"),
        "tool_call_parser": parser("tool_call_parser"),
        "disaggregation_mode": "null",
        "has_image_understanding": s.profile.vision,
        "has_audio_understanding": false,
    }))
    .into_response()
}

/// SGLang 0.5.23's `/get_model_info`: `/model_info` with a warning
/// logged for every call.
pub(in crate::sim) async fn deprecated_model_info(s: State<Arc<SimState>>) -> Response {
    deprecated("/get_model_info", "/model_info");
    model_info(s).await
}

/// SGLang 0.5.23's `/get_server_info`: `/server_info` with a warning
/// logged for every call.
pub(in crate::sim) async fn deprecated_server_info(s: State<Arc<SimState>>) -> Response {
    deprecated("/get_server_info", "/server_info");
    server_info(s).await
}

/// The warning SGLang 0.5.23's `http_server.py` logs for a deprecated
/// endpoint.
fn deprecated(old: &str, new: &str) {
    eprintln!(
        "WARNING: Endpoint '{old}' is deprecated and will be removed in a future version. Please use '{new}' instead."
    );
}

pub(in crate::sim) async fn server_info(State(s): State<Arc<SimState>>) -> Response {
    if let Some(r) = http_fault(&s) {
        return r;
    }
    let mut info = json!({
        "version": VERSION,
        "model_path": s.profile.model,
        "served_model_name": s.profile.model,
        "tp_size": 1,
        "attention_backend": "simulated",
        "max_running_requests": s.profile.capacity,
        // A speculative profile's chunks are verify steps, not decode steps.
        "num_continuous_decode_steps": if s.profile.speculative { 1 } else { s.profile.tokens_per_chunk },
        "incremental_streaming_output":
            s.profile.generate_text == crate::sim::profile::GenerateText::Segments,
        "internal_states": [{"last_gen_throughput": 0.0}],
        "decode_log_interval": DECODE_LOG_INTERVAL,
    });
    if let Some(map) = info.as_object_mut() {
        map.extend(s.profile.server_info.clone());
    }
    Json(info).into_response()
}

pub(in crate::sim) async fn metrics(State(s): State<Arc<SimState>>) -> Response {
    let body = match s.profile.speaks {
        Speaks::Sglang => sglang_metrics(&s),
        Speaks::Vllm => vllm_metrics(&s),
    };
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

/// The share of its KV cache the running streams hold.
fn usage(s: &SimState) -> f64 {
    let held = s.kv_tokens.load(Ordering::Relaxed);
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    let usage = held as f64 / kv_capacity(s).max(1) as f64;
    usage.min(1.0)
}

/// Its KV cache, in tokens: [`KV_TOKENS_PER_STREAM`] for each stream of
/// its capacity.
fn kv_capacity(s: &SimState) -> u64 {
    (s.profile.capacity.max(1) as u64).saturating_mul(KV_TOKENS_PER_STREAM)
}

/// The KV cache the simulator has for each stream of its capacity, in
/// tokens: its `token_usage` is the tokens the running requests hold over
/// this many of each.
const KV_TOKENS_PER_STREAM: u64 = 4096;

/// SGLang's scheduler gauges as it last wrote them: it rewrites them at
/// each prefill batch (`gen_throughput` kept from the last decode
/// interval), every `decode_log_interval` decode steps (the throughput
/// over that interval) and when it falls idle with a running count that
/// is no longer true, or 30 s after the last write (throughput 0); a
/// scrape between two writes reads the same values (0.5.23,
/// `scheduler_components/metrics_reporter.py`).
#[derive(Debug, Clone, Copy)]
pub(in crate::sim) struct Gauges {
    running: usize,
    usage: f64,
    /// KV-cache slots held and free, in tokens.
    kv_used: u64,
    kv_available: u64,
    throughput: f64,
    /// The last write of any kind.
    at: std::time::Instant,
    /// The last decode interval's write, and the tokens generated by then.
    decode_at: std::time::Instant,
    decode_generated: u64,
}

/// Why the gauges are looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::sim) enum Written {
    /// A prefill batch: written now.
    Prefill,
    /// A scrape: written if a decode interval passed, or the server fell
    /// idle, since the last write.
    Read,
}

/// The gauges as a scrape reads them, written first where SGLang would
/// have written them since.
pub(in crate::sim) fn gauges(s: &SimState, why: Written) -> Gauges {
    let mut last = s
        .gauges
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let now = std::time::Instant::now();
    let running = s.running.load(Ordering::Relaxed);
    let generated = s.generation_tokens.load(Ordering::Relaxed);
    let interval = s
        .profile
        .server_info
        .get("decode_log_interval")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(DECODE_LOG_INTERVAL);
    let decode_every = s
        .profile
        .itl
        .saturating_mul(u32::try_from(interval).unwrap_or(u32::MAX));
    let write = |throughput: f64, decode: Option<(std::time::Instant, u64)>, g: Option<Gauges>| {
        let (decode_at, decode_generated) = decode
            .or(g.map(|g| (g.decode_at, g.decode_generated)))
            .unwrap_or((now, generated));
        let kv_used = s.kv_tokens.load(Ordering::Relaxed);
        Gauges {
            running,
            usage: usage(s),
            kv_used,
            kv_available: kv_capacity(s).saturating_sub(kv_used),
            throughput,
            at: now,
            decode_at,
            decode_generated,
        }
    };
    let now_written = match *last {
        None => write(0.0, Some((now, generated)), None),
        Some(g) if running > 0 && now.duration_since(g.decode_at) >= decode_every => {
            let secs = now.duration_since(g.decode_at).as_secs_f64();
            #[expect(clippy::cast_precision_loss, reason = "token counts are small")]
            let made = generated.saturating_sub(g.decode_generated) as f64;
            let throughput = if secs > 0.0 {
                made / secs
            } else {
                g.throughput
            };
            write(throughput, Some((now, generated)), Some(g))
        }
        Some(g) if why == Written::Prefill => write(g.throughput, None, Some(g)),
        Some(g)
            if (running == 0 && g.running != 0)
                || now.duration_since(g.at) >= std::time::Duration::from_secs(30) =>
        {
            write(0.0, None, Some(g))
        }
        Some(g) => g,
    };
    *last = Some(now_written);
    now_written
}

/// Whether a decode pass now runs a CUDA graph: not where decode graphs
/// are off (`disable_cuda_graph`, `disable_decode_cuda_graph`,
/// `cuda_graph_backend_decode: disabled`), nor with more requests running
/// than `cuda_graph_max_bs_decode` (SGLang pads a batch up to a captured
/// size and runs without a graph past the largest), as `/server_info`
/// reports them (0.5.23's names, `arg_groups/cuda_graph_hook.py`).
pub(in crate::sim) fn cuda_graph(s: &SimState) -> bool {
    let info = &s.profile.server_info;
    let on = |key: &str| {
        info.get(key)
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false)
    };
    let disabled = on("disable_cuda_graph")
        || on("disable_decode_cuda_graph")
        || info
            .get("cuda_graph_backend_decode")
            .and_then(serde_json::Value::as_str)
            == Some("disabled");
    let most = info
        .get("cuda_graph_max_bs_decode")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(u64::MAX);
    !disabled && (s.running.load(Ordering::Relaxed) as u64) <= most
}

/// SGLang 0.5.23's `--decode-log-interval` default.
pub(in crate::sim) const DECODE_LOG_INTERVAL: u64 = 40;

/// The series of vLLM 0.32's `/metrics` the simulator keeps, in its names
/// and types, its counters and gauges with its labels (`engine`,
/// `model_name`; the histograms with `model_name` only): tokens,
/// requests running and waiting, the KV cache used, prefix-cache queries
/// and hits (in tokens), preemptions, requests finished by reason (an
/// abandoned request is not counted there: vLLM drops it in its front
/// end), its latency histograms and its cache configuration's info series.
fn vllm_metrics(s: &SimState) -> String {
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let c = &s.counters;
    let mut body = String::new();
    let labels = format!("engine=\"0\",model_name=\"{}\"", s.profile.model);
    let series = |body: &mut String, kind: &str, name: &str, extra: &str, value: String| {
        let _ = write!(
            body,
            "# TYPE vllm:{name} {kind}\nvllm:{name}{{{labels}{extra}}} {value}\n"
        );
    };
    series(
        &mut body,
        "gauge",
        "num_requests_running",
        "",
        s.running.load(Ordering::Relaxed).to_string(),
    );
    series(
        &mut body,
        "gauge",
        "num_requests_waiting",
        "",
        "0".to_owned(),
    );
    series(
        &mut body,
        "gauge",
        "kv_cache_usage_perc",
        "",
        format!("{:.4}", usage(s)),
    );
    for (name, count) in [
        ("prompt_tokens_total", &s.prompt_tokens),
        ("generation_tokens_total", &s.generation_tokens),
        ("prefix_cache_queries_total", &s.prompt_tokens),
        ("prefix_cache_hits_total", &c.cached_tokens),
        ("num_preemptions_total", &c.retracted),
    ] {
        series(&mut body, "counter", name, "", load(count).to_string());
    }
    let _ = writeln!(body, "# TYPE vllm:request_success_total counter");
    for (reason, count) in [
        ("stop", load(&c.finished[0])),
        ("length", load(&c.finished[1])),
        ("abort", 0),
        ("error", 0),
        ("repetition", 0),
    ] {
        let _ = writeln!(
            body,
            "vllm:request_success_total{{{labels},finished_reason=\"{reason}\"}} {count}"
        );
    }
    series(
        &mut body,
        "gauge",
        "cache_config_info",
        &format!(
            ",block_size=\"16\",enable_prefix_caching=\"{}\"",
            if s.profile.prefix_cache {
                "True"
            } else {
                "False"
            }
        ),
        "1.0".to_owned(),
    );
    body.push_str(
        &s.ttft
            .render("vllm:time_to_first_token_seconds", &s.profile.model),
    );
    body.push_str(
        &s.e2e
            .render("vllm:e2e_request_latency_seconds", &s.profile.model),
    );
    body.push_str(
        &s.itl
            .render("vllm:inter_token_latency_seconds", &s.profile.model),
    );
    body
}

/// The series of SGLang 0.5.23's `/metrics` the simulator keeps.
fn sglang_metrics(s: &SimState) -> String {
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let generated = load(&s.generation_tokens);
    let c = &s.counters;
    let Gauges {
        running,
        usage,
        throughput,
        kv_used,
        kv_available,
        ..
    } = gauges(s, Written::Read);
    let mut body = String::new();
    let labels = format!("model_name=\"{}\"", s.profile.model);
    let mut series = |kind: &str, name: &str, value: String| {
        let _ = write!(
            body,
            "# TYPE sglang:{name} {kind}\nsglang:{name}{{{labels}}} {value}\n"
        );
    };
    series(
        "counter",
        "prompt_tokens_total",
        load(&s.prompt_tokens).to_string(),
    );
    series("counter", "generation_tokens_total", generated.to_string());
    series(
        "counter",
        "num_requests_total",
        load(&s.requests).to_string(),
    );
    series("gauge", "num_running_reqs", running.to_string());
    // Streams beyond its capacity slow down; none waits.
    series("gauge", "num_queue_reqs", "0".to_owned());
    series("gauge", "token_usage", format!("{usage:.4}"));
    series("gauge", "gen_throughput", format!("{throughput:.2}"));
    series("gauge", "kv_used_tokens", kv_used.to_string());
    series("gauge", "kv_available_tokens", kv_available.to_string());
    // Its own process's CPU time stands for its scheduler's.
    if let Some(cpu) = crate::process::cpu_time() {
        series(
            "counter",
            "scheduler_process_cpu_seconds_total",
            format!("{:.6}", cpu.as_secs_f64()),
        );
    }
    // SGLang 0.5.23 makes each of these counters at its first event (an
    // abort, a retraction, a cache hit): a fresh server has none of them.
    for (name, count) in [
        ("num_aborted_requests_total", &c.aborted),
        ("num_retracted_requests_total", &c.retracted),
    ] {
        if load(count) > 0 {
            series("counter", name, load(count).to_string());
        }
    }
    if load(&c.cached_tokens) > 0 {
        series(
            "counter",
            "cached_tokens_total",
            load(&c.cached_tokens).to_string(),
        );
    }
    if s.profile.speculative {
        series(
            "counter",
            "spec_verify_calls_total",
            load(&c.verify_steps).to_string(),
        );
    }
    // Each mode's series made at its first pass, as SGLang's.
    let _ = writeln!(body, "# TYPE sglang:cuda_graph_passes_total counter");
    for (mode, count) in ["prefill_none", "decode_cuda_graph", "decode_none"]
        .into_iter()
        .zip(&c.passes)
    {
        if load(count) > 0 {
            let _ = writeln!(
                body,
                "sglang:cuda_graph_passes_total{{{labels},mode=\"{mode}\"}} {}",
                load(count)
            );
        }
    }
    let _ = write!(
        body,
        "# TYPE servegate_sim:cache_flushes_total counter\nservegate_sim:cache_flushes_total {}\n{}{}{}{}",
        load(&s.flushes),
        s.ttft
            .render("sglang:time_to_first_token_seconds", &s.profile.model),
        s.e2e
            .render("sglang:e2e_request_latency_seconds", &s.profile.model),
        s.queue_time
            .render("sglang:queue_time_seconds", &s.profile.model),
        s.itl
            .render("sglang:inter_token_latency_seconds", &s.profile.model),
    );
    body
}
