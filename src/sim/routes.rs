//! HTTP handlers of the simulator, speaking SGLang's dialect of the OpenAI
//! API (role-only first chunk, `reasoning_content`, usage chunk with empty
//! `choices`, `[DONE]`) and SGLang's native `/generate` (cumulative `text`,
//! `meta_info`), and llama.cpp's native `/completion` (`content` events, a
//! last `"stop": true` event with counts and the server's `timings`, no
//! `[DONE]`).

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

use super::engine::{Plan, plan};
use super::fault::Fault;
use super::{SimState, VERSION};

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

/// The reasoning switches of a chat request.
#[derive(Debug, Clone, Copy)]
struct ReasoningAsk {
    /// `chat_template_kwargs.enable_thinking` (default true).
    thinking: bool,
    /// `separate_reasoning` (default true): false puts the reasoning in the
    /// content, between `<think>` and `</think>`.
    separate: bool,
}

/// What a request asked for, whatever its API.
struct Ask {
    prompt: String,
    max_tokens: u32,
    ignore_eos: bool,
    seed: Option<u64>,
    /// An explicit temperature above 0: unseeded filler then differs
    /// from request to request, as sampling does.
    sampled: bool,
    /// Stop sequences.
    stop: Vec<String>,
    /// What the request asked of the reasoning.
    reasoning: ReasoningAsk,
    stream: bool,
    extras: Extras,
}

const DEFAULT_MAX_TOKENS: u32 = 256;

/// Sent down a stream's channel to drop the connection mid-response.
const ABORT: &[u8] = b"\0servegate-sim-abort";

/// The faults that strike before a stream starts: an HTTP error, no byte
/// ever, or headers late. `Some` is the response to send instead.
async fn fault_before_stream(fault: Option<Fault>) -> Option<Response> {
    let fault = fault?;
    if let Some(code) = fault.status() {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = Json(
            json!({"object": "error", "message": format!("simulated {fault}"), "type": "ServerError", "code": code}),
        );
        let mut r = (status, body).into_response();
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

/// Breaks a stream after its first tokens; `true` when the stream is over.
async fn fault_mid_stream(fault: Fault, tx: &mpsc::Sender<Bytes>) -> bool {
    match fault {
        Fault::StallMidStream => std::future::pending().await,
        Fault::DisconnectMidStream => {
            let _ = tx.send(Bytes::from_static(ABORT)).await;
        }
        Fault::Huge => {
            // 100 MB of one event that never ends its line.
            let piece = Bytes::from(vec![b'x'; 1 << 20]);
            if tx.send(Bytes::from_static(b"data: ")).await.is_ok() {
                for _ in 0..100 {
                    if tx.send(piece.clone()).await.is_err() {
                        break;
                    }
                }
            }
        }
        other => {
            if let Some(event) = other.event() {
                let _ = tx.send(Bytes::from(event)).await;
            }
        }
    }
    true
}

fn bad_request(message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(
            json!({"object": "error", "message": message, "type": "BadRequestError", "code": 400}),
        ),
    )
        .into_response()
}

fn u32_field(v: Option<&Value>) -> Option<u32> {
    v.and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
}

fn parse_ask(shape: Shape, body: &Value) -> Result<Ask, String> {
    let flag = |pointer: &str, default: bool| {
        body.pointer(pointer)
            .and_then(Value::as_bool)
            .unwrap_or(default)
    };
    let prompt = match shape {
        Shape::Chat => body
            .get("messages")
            .and_then(Value::as_array)
            .ok_or("`messages` must be a list")?
            .iter()
            .rev()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .and_then(|m| m.get("content"))
            .and_then(Value::as_str)
            .ok_or("no user message")?
            .to_owned(),
        Shape::Completions | Shape::Llama => body
            .get("prompt")
            .and_then(Value::as_str)
            .ok_or("`prompt` must be a string")?
            .to_owned(),
        Shape::Generate => body
            .get("text")
            .and_then(Value::as_str)
            .ok_or("`text` must be a string")?
            .to_owned(),
    };
    let params = if shape == Shape::Generate {
        body.get("sampling_params").cloned().unwrap_or(json!({}))
    } else {
        body.clone()
    };
    let max_tokens = match shape {
        Shape::Generate => u32_field(params.get("max_new_tokens")),
        // -1 (the default) is "until the end of the sequence".
        Shape::Llama => u32_field(params.get("n_predict")),
        _ => u32_field(params.get("max_tokens")).or(u32_field(params.get("max_completion_tokens"))),
    }
    .unwrap_or(DEFAULT_MAX_TOKENS);
    let seed_key = if shape == Shape::Generate {
        "sampling_seed"
    } else {
        "seed"
    };
    Ok(Ask {
        prompt,
        max_tokens,
        ignore_eos: params
            .get("ignore_eos")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        seed: params.get(seed_key).and_then(Value::as_u64),
        sampled: params
            .get("temperature")
            .and_then(Value::as_f64)
            .is_some_and(|t| t > 0.0),
        reasoning: ReasoningAsk {
            thinking: flag("/chat_template_kwargs/enable_thinking", true),
            separate: flag("/separate_reasoning", true),
        },
        stop: match params.get("stop") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        },
        stream: flag("/stream", false),
        extras: Extras {
            usage: flag("/stream_options/include_usage", false),
            continuous: flag("/stream_options/continuous_usage_stats", false),
        },
    })
}

/// Counts a stream as running for as long as it lives.
struct Running(Arc<SimState>);

impl Running {
    fn start(state: &Arc<SimState>) -> Self {
        state.running.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(state))
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
    let ask = match parse_ask(shape, body) {
        Ok(a) => a,
        Err(e) => return bad_request(&e),
    };
    let before = state.requests.fetch_add(1, Ordering::Relaxed);
    if let Some(r) = fault_before_stream(state.profile.fault).await {
        return r;
    }
    let p = &state.profile;
    let reseed = ask.sampled || p.breaks("determinism");
    let seed = ask
        .seed
        .or_else(|| reseed.then(|| (before + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)));
    let unthinking;
    let p = if ask.reasoning.thinking {
        p
    } else {
        let mut q = p.clone();
        for r in &mut q.replies {
            r.reasoning = None;
        }
        unthinking = q;
        &unthinking
    };
    let mut plan = plan(
        p,
        &ask.prompt,
        ask.max_tokens,
        ask.ignore_eos && !p.breaks("ignore_eos"),
        seed,
    );
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
    if state.profile.hang_after.is_some_and(|n| before >= n) {
        eprintln!(
            "servegate sim: simulated hang: no answer from now on (request {})",
            before + 1
        );
        state.hung.store(true, Ordering::SeqCst);
    }
    if state.hung.load(Ordering::SeqCst) {
        return std::future::pending().await;
    }
    if state.profile.crash_after.is_some_and(|n| before >= n) {
        eprintln!(
            "servegate sim: simulated crash: fatal error in decode (request {})",
            before + 1
        );
        std::process::abort();
    }
    state
        .prompt_tokens
        .fetch_add(plan.prompt_tokens, Ordering::Relaxed);
    let id = format!("sim-{}", state.requests.load(Ordering::Relaxed));
    if ask.stream {
        let (tx, rx) = mpsc::channel::<Bytes>(32);
        tokio::spawn(stream(
            Arc::clone(&state),
            shape,
            plan,
            Extras {
                usage: ask.extras.usage && state.profile.usage,
                continuous: ask.extras.continuous && state.profile.usage,
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
    let running = Running::start(&state);
    let started = Instant::now();
    let mut at = started + state.profile.ttft;
    for _ in 1..plan.completion_tokens() {
        at += running.itl();
    }
    sleep_until(at).await;
    drop(running);
    state
        .generation_tokens
        .fetch_add(plan.completion_tokens(), Ordering::Relaxed);
    Json(whole(shape, &plan, &state.profile, &id, started.elapsed())).into_response()
}

/// The completion count the server reports: breaking `usage` makes it one
/// that the stream contradicts.
fn reported_tokens(plan: &Plan, profile: &super::Profile) -> u64 {
    if profile.breaks("usage") {
        1
    } else {
        plan.completion_tokens()
    }
}

fn usage(plan: &Plan, profile: &super::Profile) -> Value {
    let completion = reported_tokens(plan, profile);
    json!({
        "prompt_tokens": plan.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": plan.prompt_tokens + completion,
    })
}

fn meta_info(plan: &Plan, id: &str, completion_tokens: u64, finished: bool) -> Value {
    let finish = if finished {
        match plan.finish {
            super::engine::Finish::Length => json!({"type": "length", "length": completion_tokens}),
            super::engine::Finish::Stop => json!({"type": "stop", "matched": 2}),
        }
    } else {
        Value::Null
    };
    json!({
        "id": id,
        "finish_reason": finish,
        "prompt_tokens": plan.prompt_tokens,
        "completion_tokens": completion_tokens,
        "cached_tokens": 0,
    })
}

/// llama.cpp's last event (and non-streaming body): the whole `content`
/// there, counts, why it stopped and the server's timings, `prompt_ms` the
/// time to the first token and `predicted_ms` the rest.
fn llama_stop(
    plan: &Plan,
    profile: &super::Profile,
    content: &str,
    first: Duration,
    end: Duration,
) -> Value {
    let predicted = reported_tokens(plan, profile);
    let predicted_ms = end.saturating_sub(first).as_secs_f64() * 1000.0;
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    let per_second = if predicted_ms > 0.0 {
        predicted as f64 * 1000.0 / predicted_ms
    } else {
        0.0
    };
    json!({
        "content": content,
        "id_slot": 0,
        "stop": true,
        "model": profile.model,
        "tokens_predicted": predicted,
        "tokens_evaluated": plan.prompt_tokens,
        "stop_type": match plan.finish {
            super::engine::Finish::Length => "limit",
            super::engine::Finish::Stop => "eos",
        },
        "timings": {
            "prompt_n": plan.prompt_tokens,
            "prompt_ms": first.as_secs_f64() * 1000.0,
            "predicted_n": predicted,
            "predicted_ms": predicted_ms,
            "predicted_per_second": per_second,
        },
    })
}

/// Non-streaming body.
fn whole(shape: Shape, plan: &Plan, profile: &super::Profile, id: &str, took: Duration) -> Value {
    let model = &profile.model;
    let content = plan.content.concat();
    let reasoning = plan.reasoning.concat();
    match shape {
        Shape::Chat => json!({
            "id": id, "object": "chat.completion", "created": 0, "model": model,
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": if content.is_empty() { Value::Null } else { Value::String(content) },
                    "reasoning_content": if reasoning.is_empty() { Value::Null } else { Value::String(reasoning) },
                },
                "finish_reason": plan.finish.name(),
            }],
            "usage": usage(plan, profile),
        }),
        Shape::Completions => json!({
            "id": id, "object": "text_completion", "created": 0, "model": model,
            "choices": [{"index": 0, "text": inline_reasoning(&reasoning, &content), "finish_reason": plan.finish.name()}],
            "usage": usage(plan, profile),
        }),
        Shape::Generate => json!({
            "text": inline_reasoning(&reasoning, &content),
            "meta_info": meta_info(plan, id, plan.completion_tokens(), true),
        }),
        Shape::Llama => llama_stop(
            plan,
            profile,
            &inline_reasoning(&reasoning, &content),
            profile.ttft,
            took,
        ),
    }
}

/// Completion-style APIs have no reasoning channel: the text carries it.
fn inline_reasoning(reasoning: &str, content: &str) -> String {
    if reasoning.is_empty() {
        content.to_owned()
    } else {
        format!("<think>{reasoning}</think>{content}")
    }
}

fn sse(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

fn chat_chunk(model: &str, id: &str, delta: &Value, finish: Option<&str>) -> Bytes {
    sse(&json!({
        "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    }))
}

/// A JSON string literal.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

/// What the client asked to receive besides tokens.
#[derive(Debug, Clone, Copy)]
struct Extras {
    /// A usage chunk at the end.
    usage: bool,
    /// Usage on every chunk (`continuous_usage_stats`).
    continuous: bool,
}

/// The SSE bytes of one chunk of `tokens` tokens. Token chunks are the hot
/// path of a benchmark, so they are formatted directly, not through a JSON
/// tree.
#[expect(clippy::too_many_arguments, reason = "one chunk is many small facts")]
fn token_chunk(
    shape: Shape,
    model: &str,
    id: &str,
    piece: &str,
    reasoning: bool,
    cumulative: &str,
    plan: &Plan,
    sent: u64,
    extras: Extras,
) -> Bytes {
    let usage = if extras.continuous {
        format!(
            ",\"usage\":{{\"prompt_tokens\":{p},\"completion_tokens\":{sent},\"total_tokens\":{t}}}",
            p = plan.prompt_tokens,
            t = plan.prompt_tokens + sent
        )
    } else {
        String::new()
    };
    let text = match shape {
        Shape::Chat => {
            let delta = if reasoning {
                format!(
                    "{{\"reasoning_content\":{},\"content\":null}}",
                    quoted(piece)
                )
            } else {
                format!("{{\"content\":{}}}", quoted(piece))
            };
            format!(
                "data: {{\"id\":\"{id}\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":{},\"choices\":[{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":null}}]{usage}}}\n\n",
                quoted(model)
            )
        }
        Shape::Completions => format!(
            "data: {{\"id\":\"{id}\",\"object\":\"text_completion\",\"created\":0,\"model\":{},\"choices\":[{{\"index\":0,\"text\":{},\"finish_reason\":null}}]{usage}}}\n\n",
            quoted(model),
            quoted(piece)
        ),
        Shape::Llama => format!(
            "data: {{\"index\":0,\"content\":{},\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":{sent},\"tokens_evaluated\":{}}}\n\n",
            quoted(piece),
            plan.prompt_tokens
        ),
        Shape::Generate => {
            let done = sent == plan.completion_tokens();
            format!(
                "data: {{\"text\":{},\"meta_info\":{}}}\n\n",
                quoted(cumulative),
                meta_info(plan, id, sent, done)
            )
        }
    };
    Bytes::from(text)
}

async fn stream(
    state: Arc<SimState>,
    shape: Shape,
    plan: Plan,
    extras: Extras,
    id: String,
    tx: mpsc::Sender<Bytes>,
) {
    let running = Running::start(&state);
    let started = Instant::now();
    let model = state.profile.model.clone();
    let per_chunk = state.profile.tokens_per_chunk;
    let mut at = Instant::now() + state.profile.ttft;
    if shape == Shape::Chat {
        // SGLang's role-only first chunk: not a token.
        let first = chat_chunk(
            &model,
            &id,
            &json!({"role": "assistant", "content": ""}),
            None,
        );
        if tx.send(first).await.is_err() {
            return;
        }
    }
    let tokens: Vec<(&String, bool)> = plan
        .reasoning
        .iter()
        .map(|t| (t, true))
        .chain(plan.content.iter().map(|t| (t, false)))
        .collect();
    let mut cumulative = String::new();
    let mut in_think = false;
    let mut sent: u64 = 0;
    let mut first = None;
    let mut i = 0;
    while i < tokens.len() {
        // A chunk: up to `per_chunk` tokens of one kind, each costing an ITL.
        let reasoning = tokens[i].1;
        let mut piece = String::new();
        if shape != Shape::Chat && reasoning != in_think {
            piece.push_str(if reasoning { "<think>" } else { "</think>" });
            in_think = reasoning;
        }
        let mut n = 0;
        while i < tokens.len() && n < per_chunk && tokens[i].1 == reasoning {
            if n > 0 {
                at += running.itl();
            }
            piece.push_str(tokens[i].0);
            i += 1;
            n += 1;
        }
        if at > Instant::now() {
            sleep_until(at).await;
        }
        at += running.itl();
        sent += n as u64;
        state
            .generation_tokens
            .fetch_add(n as u64, Ordering::Relaxed);
        cumulative.push_str(&piece);
        let chunk = token_chunk(
            shape,
            &model,
            &id,
            &piece,
            reasoning,
            &cumulative,
            &plan,
            sent,
            extras,
        );
        if tx.send(chunk).await.is_err() {
            return;
        }
        if sent == n as u64 {
            let ttft = started.elapsed();
            first = Some(ttft);
            state.ttft.observe(ttft);
        }
        if let Some(f) = state.profile.fault.filter(|f| f.mid_stream())
            && sent >= 3
            && fault_mid_stream(f, &tx).await
        {
            return;
        }
    }
    if state.profile.fault == Some(Fault::Endless) {
        // max_tokens ignored: filler until the client goes away.
        loop {
            sleep_until(at).await;
            at = Instant::now().max(at) + running.itl().max(Duration::from_millis(1));
            sent += 1;
            cumulative.push_str(" more");
            let chunk = token_chunk(
                shape,
                &model,
                &id,
                " more",
                false,
                &cumulative,
                &plan,
                sent,
                extras,
            );
            if tx.send(chunk).await.is_err() {
                return;
            }
        }
    }
    let mut tail = Vec::new();
    match shape {
        Shape::Chat => tail.push(chat_chunk(
            &model,
            &id,
            &json!({}),
            Some(plan.finish.name()),
        )),
        Shape::Completions => tail.push(sse(&json!({
            "id": id, "object": "text_completion", "created": 0, "model": model,
            "choices": [{"index": 0, "text": "", "finish_reason": plan.finish.name()}],
        }))),
        Shape::Generate if plan.completion_tokens() == 0 => {
            tail.push(sse(
                &json!({"text": "", "meta_info": meta_info(&plan, &id, 0, true)}),
            ));
        }
        Shape::Generate => {}
        Shape::Llama => tail.push(sse(&llama_stop(
            &plan,
            &state.profile,
            "",
            first.unwrap_or_else(|| started.elapsed()),
            started.elapsed(),
        ))),
    }
    if extras.usage && matches!(shape, Shape::Chat | Shape::Completions) {
        tail.push(sse(&json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [], "usage": usage(&plan, &state.profile),
        })));
    }
    if shape != Shape::Llama {
        tail.push(Bytes::from_static(b"data: [DONE]\n\n"));
    }
    for b in tail {
        if tx.send(b).await.is_err() {
            return;
        }
    }
    state.e2e.observe(started.elapsed());
}

/// SGLang answers 400 while requests run; so does the simulator.
pub(super) async fn flush_cache(State(s): State<Arc<SimState>>) -> Response {
    if s.running.load(Ordering::SeqCst) > 0 {
        return (
            StatusCode::BAD_REQUEST,
            "Cache not flushed: requests are running",
        )
            .into_response();
    }
    s.flushes.fetch_add(1, Ordering::Relaxed);
    "Cache flushed.".into_response()
}

pub(super) async fn health(State(s): State<Arc<SimState>>) -> Response {
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

pub(super) async fn models(State(s): State<Arc<SimState>>) -> Response {
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

pub(super) async fn model_info(State(s): State<Arc<SimState>>) -> Response {
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

pub(super) async fn server_info(State(s): State<Arc<SimState>>) -> Response {
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
        "internal_states": [{"last_gen_throughput": 0.0}],
    });
    if let Some(map) = info.as_object_mut() {
        map.extend(s.profile.server_info.clone());
    }
    Json(info).into_response()
}

pub(super) async fn metrics(State(s): State<Arc<SimState>>) -> Response {
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
