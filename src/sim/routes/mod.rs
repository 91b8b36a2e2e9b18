//! HTTP handlers of the simulator, speaking SGLang's dialect of the OpenAI
//! API (role-only first chunk, `reasoning_content`, usage chunk with empty
//! `choices`, `[DONE]`) and SGLang's native `/generate` (cumulative `text`,
//! `meta_info`), and llama.cpp's native `/completion` (`content` events, a
//! last `"stop": true` event with counts and the server's `timings`, no
//! `[DONE]`).
//!
//! This file holds the generation route: a request read ([`ask`]), planned,
//! broken as the profile says, then answered whole ([`answer`]) or streamed
//! ([`stream`]); [`info`] holds the other endpoints (health, models, server
//! info, metrics, cache flush).

mod answer;
mod ask;
mod info;
mod stream;
mod vllm;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use super::engine::{Finish, plan};
use super::fault::Fault;
use super::profile::GenerateText;
use super::{SimState, Speaks};
use answer::whole;
use ask::{Extras, parse_ask};
pub(super) use info::Gauges;
pub(super) use info::{
    auth, deprecated_model_info, deprecated_server_info, flush_cache, health_generate,
    health_route, metrics, model_info, models, server_info, version, vllm_health,
};
use stream::stream;

/// Which response shape a request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// OpenAI chat completions.
    Chat,
    /// OpenAI completions.
    Completions,
    /// SGLang's `/generate`.
    Generate,
    /// llama.cpp's `/completion`.
    Llama,
}

/// Sent down a stream's channel to drop the connection mid-response.
const ABORT: &[u8] = b"\0servegate-sim-abort";

/// An error answer as the server the simulator speaks as writes one:
/// SGLang 0.5.23's `{"object": "error", …}`, vLLM 0.32's
/// `{"error": {"message", "type", "param", "code"}}`.
fn error(speaks: Speaks, code: u16, message: &str, kind: &str) -> Response {
    error_at(speaks, (code, ""), message, kind)
}

/// [`error`] naming the request's field at fault, as vLLM does
/// (`param`; "" for none).
fn error_at(speaks: Speaks, (code, param): (u16, &str), message: &str, kind: &str) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let param = if param.is_empty() {
        Value::Null
    } else {
        Value::from(param)
    };
    let body = match speaks {
        Speaks::Sglang => {
            json!({"object": "error", "message": message, "type": kind, "code": code})
        }
        Speaks::Vllm => {
            json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
        }
    };
    (status, Json(body)).into_response()
}

/// What vLLM 0.32 says of a request once its engine died.
const ENGINE_DEAD: &str =
    "EngineCore encountered an issue. See stack trace (above) for the root cause.";

/// The faults that strike before a stream starts: an HTTP error, no byte
/// ever, or headers late. `Some` is the response to send instead.
async fn fault_before_stream(speaks: Speaks, fault: Option<Fault>) -> Option<Response> {
    let fault = fault?;
    if let Some(code) = fault.status() {
        let mut r = error(speaks, code, &format!("simulated {fault}"), "ServerError");
        if code == 429 {
            r.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        return Some(r);
    }
    match fault {
        Fault::HangBeforeFirstByte => std::future::pending().await,
        Fault::SlowHeaders => tokio::time::sleep(Duration::from_secs(3)).await,
        _ => {}
    }
    None
}

/// Counts a stream as running for as long as it lives, and as aborted
/// when it goes before its end (the client went away, a fault cut it);
/// and the KV cache it holds (its prompt and the tokens it generated).
struct Running(Arc<SimState>, bool, std::sync::atomic::AtomicU64);

impl Running {
    fn start(state: &Arc<SimState>, prompt_tokens: u64) -> Self {
        state.running.fetch_add(1, Ordering::SeqCst);
        state.kv_tokens.fetch_add(prompt_tokens, Ordering::SeqCst);
        state.queue_time.observe(Duration::ZERO);
        state.counters.passes[0].fetch_add(1, Ordering::Relaxed);
        // Its prefill batch: SGLang writes its gauges.
        if state.profile.speaks == Speaks::Sglang {
            info::gauges(state, info::Written::Prefill);
        }
        Self(
            Arc::clone(state),
            false,
            std::sync::atomic::AtomicU64::new(prompt_tokens),
        )
    }

    /// It generated `n` more tokens, held in the KV cache until it ends.
    fn generated(&self, n: u64) {
        let graph = info::cuda_graph(&self.0);
        self.0.counters.passes[if graph { 1 } else { 2 }].fetch_add(1, Ordering::Relaxed);
        self.0.generation_tokens.fetch_add(n, Ordering::Relaxed);
        self.0.kv_tokens.fetch_add(n, Ordering::SeqCst);
        self.2.fetch_add(n, Ordering::Relaxed);
    }

    /// The request reached its end, with `finish`.
    fn ended(&mut self, finish: Finish) {
        self.1 = true;
        let i = match finish {
            Finish::Stop => 0,
            Finish::Length => 1,
        };
        self.0.counters.finished[i].fetch_add(1, Ordering::Relaxed);
    }

    /// The ITL now: the base ITL, stretched once streams exceed capacity.
    fn itl(&self) -> Duration {
        let running = self.0.running.load(Ordering::SeqCst).max(1);
        let capacity = self.0.profile.capacity;
        let base = self.0.profile.itl;
        if running <= capacity {
            base
        } else {
            #[expect(clippy::cast_precision_loss, reason = "small counts")]
            base.mul_f64(running as f64 / capacity as f64)
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
        self.0
            .kv_tokens
            .fetch_sub(self.2.load(Ordering::Relaxed), Ordering::SeqCst);
        if !self.1 {
            self.0.counters.aborted.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The route of a generation endpoint answering in `shape`.
pub(super) fn generation(shape: Shape) -> MethodRouter<Arc<SimState>> {
    post(
        move |State(s): State<Arc<SimState>>, Json(body): Json<Value>| async move {
            generate_response(s, shape, &body).await
        },
    )
}

async fn generate_response(state: Arc<SimState>, shape: Shape, body: &Value) -> Response {
    let speaks = state.profile.speaks;
    let ask = match parse_ask(shape, speaks, body) {
        Ok(a) => a,
        Err(e) => return error(speaks, 400, &e, "BadRequestError"),
    };
    if let Some(refused) = vllm_refusal(&state, body) {
        return refused;
    }
    let adapter = match adapter_of(&state.profile, body) {
        Ok(a) => a,
        Err(refusal) => return error(speaks, 400, &refusal, "BadRequestError"),
    };
    let looked = match see_images(&state.profile, shape, &ask) {
        Ok(looked) => looked,
        Err(refusal) => return error(speaks, 400, &refusal, "BadRequestError"),
    };
    let before = state.requests.fetch_add(1, Ordering::Relaxed);
    if let Some(r) = fault_before_stream(speaks, state.profile.fault).await {
        return r;
    }
    let p = &state.profile;
    let reseed = ask.sampled || p.breaks("determinism");
    let seed = ask
        .seed
        .or_else(|| reseed.then(|| (before + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)));
    let p = &*replies_for(p, ask.reasoning.thinking, adapter);
    let mut plan = plan(
        p,
        &looked.prompt,
        ask.max_tokens,
        ask.ignore_eos && !p.breaks("ignore_eos"),
        seed,
    );
    plan.prompt_tokens = super::engine::count_tokens(&ask.context) + looked.tokens;
    plan.pad_to(ask.min_tokens as usize, p.seed);
    if shape == Shape::Chat
        && ask.tools > 0
        && let Some(call) = p
            .replies
            .iter()
            .find(|r| r.pattern.is_match(&looked.prompt))
            .and_then(|r| r.tool_call.as_ref())
    {
        plan.call_tool(call, !p.breaks("tool_parser"));
    }
    if !ask.reasoning.separate && !plan.reasoning.is_empty() {
        let mut inline = vec!["<think>".to_owned()];
        inline.append(&mut plan.reasoning);
        inline.push("</think>".to_owned());
        inline.append(&mut plan.content);
        inline.truncate(ask.max_tokens as usize);
        plan.content = inline;
    }
    if !p.breaks("stop") {
        plan.stop_at(&ask.stop);
    }
    if p.breaks("max_tokens") && plan.finish == super::engine::Finish::Length {
        plan.content
            .extend([" over", " the", " limit"].map(str::to_owned));
    }
    // A kernel wrong only in a large batch: every token of this request
    // is garbage when it joins more streams than the profile allows.
    if state
        .profile
        .corrupt_above
        .is_some_and(|n| state.running.load(Ordering::SeqCst) + 1 > n)
    {
        plan.content.fill_with(|| "!".to_owned());
    }
    hang_if_due(&state, before);
    if state.hung.load(Ordering::SeqCst) || state.scheduler_hung.load(Ordering::SeqCst) {
        return std::future::pending().await;
    }
    if let Some(last_words) = crash_if_due(&state, before, ask.stream) {
        return last_words;
    }
    state
        .prompt_tokens
        .fetch_add(plan.prompt_tokens, Ordering::Relaxed);
    plan.server = server_counts(&state, &ask.context, plan.prompt_tokens);
    plan.server.image_tokens = looked.tokens;
    state.counters.count(&plan);
    let id = format!("sim-{}", state.requests.load(Ordering::Relaxed));
    if ask.stream {
        let (tx, rx) = mpsc::channel::<Bytes>(32);
        tokio::spawn(stream(
            Arc::clone(&state),
            shape,
            (plan, prompt_ids(speaks, &ask)),
            Extras {
                usage: ask.extras.usage && state.profile.usage,
                continuous: ask.extras.continuous && state.profile.usage,
                segments: state.profile.generate_text == GenerateText::Segments,
                token_ids: ask.extras.token_ids,
                spec_details: ask.extras.spec_details,
            },
            id,
            tx,
        ));
        // The abort marker ends the body with an error: the connection drops
        // mid-response, as when a server process dies.
        let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
            let b = rx.recv().await?;
            if b == ABORT {
                return Some((Err(std::io::Error::other("simulated disconnect")), rx));
            }
            Some((Ok(b), rx))
        }));
        return Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(body)
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
    let mut running = Running::start(&state, plan.prompt_tokens);
    let started = Instant::now();
    let mut at = started + state.profile.ttft;
    for _ in 1..plan.completion_tokens() {
        at += running.itl();
    }
    sleep_until(at).await;
    running.generated(plan.completion_tokens());
    running.ended(plan.finish);
    drop(running);
    let mut body = match speaks {
        Speaks::Sglang => whole(shape, &plan, &state.profile, &id, started.elapsed()),
        Speaks::Vllm => vllm::whole(
            shape,
            &state.profile.model,
            &id,
            &plan,
            answer::reported_tokens(&plan, &state.profile),
        ),
    };
    if ask.score {
        answer::put_scores(
            &mut body,
            speaks,
            &answer::scores(&ask.prompt, state.profile.broken_numerics),
        );
    }
    Json(body).into_response()
}

/// Sets the profile's hangs (the whole server, or its scheduler) that
/// are due at request `before + 1`.
fn hang_if_due(state: &SimState, before: u64) {
    if state.profile.hang_after.is_some_and(|n| before >= n) {
        eprintln!(
            "servegate sim: simulated hang: no answer from now on (request {})",
            before + 1
        );
        state.hung.store(true, Ordering::SeqCst);
    }
    if state
        .profile
        .scheduler_hang_after
        .is_some_and(|n| before >= n)
    {
        eprintln!(
            "servegate sim: simulated scheduler hang: HTTP answers, nothing is generated from now on (request {})",
            before + 1
        );
        state.scheduler_hung.store(true, Ordering::SeqCst);
    }
}

/// The profile's crash, when due at request `before + 1`: the process
/// aborts (SGLang), or its engine dies and the request gets the answer of
/// a dead engine (vLLM).
fn crash_if_due(state: &SimState, before: u64, stream: bool) -> Option<Response> {
    if state.profile.crash_after.is_none_or(|n| before < n) {
        return None;
    }
    if let Some(line) = &state.profile.crash_message {
        eprintln!("{line}");
    }
    if state.profile.speaks == Speaks::Vllm {
        return Some(engine_died(state, stream, before + 1));
    }
    eprintln!(
        "servegate sim: simulated crash: fatal error in decode (request {})",
        before + 1
    );
    std::process::abort();
}

/// The profile a request is answered by: its replies without their
/// reasoning when the request does not think, and only those of its
/// adapter (or of any) when the profile serves adapters.
fn replies_for<'p>(
    p: &'p crate::sim::Profile,
    thinking: bool,
    adapter: Option<&str>,
) -> std::borrow::Cow<'p, crate::sim::Profile> {
    if thinking && p.adapters.is_empty() {
        return std::borrow::Cow::Borrowed(p);
    }
    let mut q = p.clone();
    q.replies
        .retain(|r| r.adapter.is_none() || r.adapter.as_deref() == adapter);
    for r in q.replies.iter_mut().filter(|_| !thinking) {
        r.reasoning = None;
    }
    std::borrow::Cow::Owned(q)
}

/// The LoRA adapter a request names, as the server the simulator speaks as
/// reads it: vLLM's `model` (a name `/v1/models` lists), SGLang 0.5.23's
/// `lora_path` or a `model` of `base:adapter` (`serving_base.py`); an
/// adapter SGLang has not loaded is refused with its words
/// (`lora_registry.py`, `tokenizer_manager.py`).
fn adapter_of<'b>(
    profile: &crate::sim::Profile,
    body: &'b Value,
) -> Result<Option<&'b str>, String> {
    let model = body.get("model").and_then(Value::as_str);
    let named = match profile.speaks {
        Speaks::Vllm => model.filter(|m| *m != profile.model),
        Speaks::Sglang => model
            .and_then(|m| m.strip_prefix(profile.model.as_str())?.strip_prefix(':'))
            .or_else(|| body.get("lora_path").and_then(Value::as_str)),
    };
    match named {
        Some(a) if profile.adapters.iter().any(|known| known == a) => Ok(Some(a)),
        Some(a) if profile.adapters.is_empty() => Err(format!(
            "LoRA adapter '{a}' was requested, but LoRA is not enabled. Please launch the server with `--enable-lora`."
        )),
        Some(a) => Err(format!(
            "The following requested LoRA adapters are not loaded: {a}\nLoaded adapters: {:?}.",
            profile.adapters
        )),
        None => Ok(None),
    }
}

/// What vLLM 0.32 answers before it plans a request: an unknown model's
/// 404 (SGLang serves any), and the 500 of a dead engine.
fn vllm_refusal(state: &SimState, body: &Value) -> Option<Response> {
    if state.profile.speaks != Speaks::Vllm {
        return None;
    }
    if let Some(model) = body.get("model").and_then(Value::as_str)
        && model != state.profile.model
        && !state.profile.adapters.iter().any(|a| a == model)
    {
        let valid = std::iter::once(&state.profile.model)
            .chain(&state.profile.adapters)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        let message = format!("The model `{model}` does not exist. Valid aliases: {valid}.");
        return Some(error_at(
            Speaks::Vllm,
            (404, "model"),
            &message,
            "NotFoundError",
        ));
    }
    state
        .engine_dead
        .load(Ordering::SeqCst)
        .then(|| error(Speaks::Vllm, 500, ENGINE_DEAD, "InternalServerError"))
}

/// The prompt's ids, where vLLM lists them (asked, speaking as vLLM).
fn prompt_ids(speaks: Speaks, ask: &ask::Ask) -> Vec<u64> {
    if speaks == Speaks::Vllm && ask.extras.token_ids {
        super::engine::prompt_ids(&ask.context)
    } else {
        Vec::new()
    }
}

/// vLLM 0.32's engine dying under request `n`: its front end logs the
/// `EngineDeadError`, sends the request the error in its stream (a 500
/// when it does not stream), answers `/health` 503 and every later
/// request 500, and exits 3 s later, when its watchdog (every 5 s) finds
/// the engine dead.
fn engine_died(state: &SimState, stream: bool, n: u64) -> Response {
    state.engine_dead.store(true, Ordering::SeqCst);
    eprintln!(
        "servegate sim: simulated engine death (request {n})\nERROR [core_client.py] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.\nvllm.v1.engine.exceptions.EngineDeadError: {ENGINE_DEAD}"
    );
    tokio::spawn(async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        eprintln!("INFO:     Shutting down");
        std::process::exit(0);
    });
    if !stream {
        return error(Speaks::Vllm, 500, ENGINE_DEAD, "InternalServerError");
    }
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(engine_dead_events()))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The events that end every stream of a vLLM whose engine died: the
/// error, then `[DONE]`.
fn engine_dead_events() -> Bytes {
    let event = json!({"error": {"message": ENGINE_DEAD, "type": "InternalServerError", "param": null, "code": 500}});
    Bytes::from(format!("data: {event}\n\ndata: [DONE]\n\n"))
}

/// What a model sees of a request: its prompt, each image after it as
/// `<image: red>` for a vision profile, and the images' prompt tokens.
struct Seen {
    prompt: String,
    tokens: u64,
}

/// Looks at a request's images. A text-only profile refuses them on the
/// chat API as its server does for a text-only model: SGLang 0.5.23
/// (`serving_chat.py`, `_validate_media_content`: 400) and vLLM 0.32
/// (`multimodal/registry.py`, `create_processor`: 400); SGLang's
/// `/generate` has no multimodal processor for a text-only model
/// (`tokenizer_manager.py`) and ignores its `image_data`.
fn see_images(
    profile: &super::profile::Profile,
    shape: Shape,
    ask: &ask::Ask,
) -> Result<Seen, String> {
    let mut seen = Seen {
        prompt: ask.prompt.clone(),
        tokens: 0,
    };
    if ask.images.is_empty() || (!profile.vision && shape == Shape::Generate) {
        return Ok(seen);
    }
    if !profile.vision {
        return Err(match profile.speaks {
            Speaks::Sglang => {
                "Model only supports text input; received unsupported content type 'image_url'."
                    .to_owned()
            }
            Speaks::Vllm => format!("{} is not a multimodal model", profile.model),
        });
    }
    for url in &ask.images {
        let image = super::vision::look(url)?;
        seen.prompt.push_str(" <image: ");
        seen.prompt.push_str(image.colour);
        seen.prompt.push('>');
        seen.tokens += image.tokens;
    }
    Ok(seen)
}

/// What the server reports of a request to `prompt` beside its counts:
/// its prefix-cache hit (and the prompt kept for later ones), its verify
/// step and retractions, as the profile says.
fn server_counts(
    state: &SimState,
    prompt: &str,
    prompt_tokens: u64,
) -> super::engine::ServerCounts {
    let profile = &state.profile;
    let mut cached_tokens = 0;
    if profile.prefix_cache {
        let tokens = super::engine::tokenize(prompt);
        let mut kept = state
            .prefixes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cached_tokens = super::engine::cached_prefix(&tokens, &kept);
        if kept.len() == super::PREFIXES_KEPT {
            kept.remove(0);
        }
        kept.push(tokens);
    }
    if profile.breaks("cached_tokens") {
        cached_tokens = prompt_tokens + 5;
    }
    super::engine::ServerCounts {
        cache_report: profile.prefix_cache || profile.breaks("cached_tokens"),
        cached_tokens,
        spec_step: profile.speculative.then_some(profile.tokens_per_chunk),
        retractions: profile.retractions,
        image_tokens: 0,
    }
}
