//! The simulator's endpoints besides generation: health (loading, hung),
//! models, model and server info, Prometheus metrics and the cache flush.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::sim::fault::Fault;
use crate::sim::{SimState, VERSION};

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
    if s.ready_at.is_some_and(|at| std::time::Instant::now() >= at) {
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

/// `/health_generate`: as `/health`, but through the scheduler, so a hung
/// one hangs it too.
pub(in crate::sim) async fn health_generate(State(s): State<Arc<SimState>>) -> Response {
    if s.scheduler_hung.load(Ordering::SeqCst) {
        return std::future::pending().await;
    }
    health(State(s)).await
}

/// The HTTP error a faulty server answers everything with, info included.
fn http_fault(s: &SimState) -> Option<Response> {
    let code = s.profile.fault.and_then(Fault::status)?;
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    Some(
        (
            status,
            Json(json!({"object": "error", "message": "simulated fault", "code": code})),
        )
            .into_response(),
    )
}

pub(in crate::sim) async fn models(State(s): State<Arc<SimState>>) -> Response {
    if let Some(r) = http_fault(&s) {
        return r;
    }
    Json(json!({
        "object": "list",
        "data": [{"id": s.profile.model, "object": "model", "created": 0,
                  "owned_by": "servegate-sim", "root": s.profile.model, "max_model_len": 32768}],
    }))
    .into_response()
}

pub(in crate::sim) async fn model_info(State(s): State<Arc<SimState>>) -> Response {
    if let Some(r) = http_fault(&s) {
        return r;
    }
    Json(json!({
        "model_path": s.profile.model,
        "tokenizer_path": s.profile.model,
        "is_generation": true,
        "preferred_sampling_params": null,
        "weight_version": "default",
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
        "num_continuous_decode_steps": s.profile.tokens_per_chunk,
        "incremental_streaming_output":
            s.profile.generate_text == crate::sim::profile::GenerateText::Segments,
        "internal_states": [{"last_gen_throughput": 0.0}],
    });
    if let Some(map) = info.as_object_mut() {
        map.extend(s.profile.server_info.clone());
    }
    Json(info).into_response()
}

pub(in crate::sim) async fn metrics(State(s): State<Arc<SimState>>) -> Response {
    let body = format!(
        "# TYPE sglang:prompt_tokens_total counter\nsglang:prompt_tokens_total{{model_name=\"{m}\"}} {p}\n\
         # TYPE sglang:generation_tokens_total counter\nsglang:generation_tokens_total{{model_name=\"{m}\"}} {g}\n\
         # TYPE sglang:num_requests_total counter\nsglang:num_requests_total{{model_name=\"{m}\"}} {r}\n\
         # TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{{model_name=\"{m}\"}} {n}\n\
         # TYPE servegate_sim:cache_flushes_total counter\nservegate_sim:cache_flushes_total {f}\n{ttft}{e2e}",
        m = s.profile.model,
        p = s.prompt_tokens.load(Ordering::Relaxed),
        g = s.generation_tokens.load(Ordering::Relaxed),
        r = s.requests.load(Ordering::Relaxed),
        n = s.running.load(Ordering::Relaxed),
        f = s.flushes.load(Ordering::Relaxed),
        ttft = s
            .ttft
            .render("sglang:time_to_first_token_seconds", &s.profile.model),
        e2e = s
            .e2e
            .render("sglang:e2e_request_latency_seconds", &s.profile.model),
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}
