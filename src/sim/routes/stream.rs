//! A streamed answer: the tokens of a plan sent as SSE chunks at the
//! profile's pace (stretched past its capacity), with the faults that break
//! a stream once it started, and its closing events.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Bytes;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use super::answer::{
    Piece, chat_chunk, chat_usage, completions_finish, llama_stop, meta_info, reported_tokens,
    role_chunk, sse, token_chunk, usage, usage_at,
};
use super::ask::Extras;
use super::{ABORT, Running, Shape, vllm};
use crate::sim::engine::Plan;
use crate::sim::fault::Fault;
use crate::sim::{Profile, SimState, Speaks};

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

/// Where a stream is: when its next token is due, how many it has sent,
/// when the first went.
struct Cursor {
    at: Instant,
    sent: u64,
    first: Option<Duration>,
    started: Instant,
}

/// Streams the plan's tool call — its name, then its arguments in pieces,
/// a token each — as SGLang 0.5.23 (or vLLM 0.32) streams
/// `delta.tool_calls`; where the stream is then, `None` when the client
/// went away.
async fn tool_call(
    running: &Running,
    plan: &Plan,
    (model, id): (&str, &str),
    extras: Extras,
    mut cursor: Cursor,
    tx: &mpsc::Sender<Bytes>,
) -> Option<Cursor> {
    let Some((name, pieces)) = plan.tool_call.as_ref() else {
        return Some(cursor);
    };
    let opening = json!({"id": format!("call_{id}"), "index": 0, "type": "function",
        "function": {"name": name, "arguments": ""}});
    let rest = pieces
        .iter()
        .map(|a| json!({"index": 0, "type": "function", "function": {"arguments": a}}));
    for call in std::iter::once(opening).chain(rest) {
        if cursor.at > Instant::now() {
            sleep_until(cursor.at).await;
        }
        cursor.at += running.itl();
        cursor.sent += 1;
        running.generated(1);
        let as_vllm = running.0.profile.speaks == Speaks::Vllm;
        let choice = if as_vllm {
            // Its own id, when asked: each piece of the call is a token.
            let ids = extras
                .token_ids
                .then(|| plan.output_ids(cursor.sent - 1, cursor.sent));
            json!({"index": 0, "delta": {"tool_calls": [call]}, "logprobs": null, "finish_reason": null, "token_ids": ids})
        } else {
            json!({"index": 0, "delta": {"reasoning_content": null, "tool_calls": [call]}, "logprobs": null, "finish_reason": null, "matched_stop": null})
        };
        let mut chunk = json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [choice],
        });
        if extras.continuous {
            chunk["usage"] = if as_vllm {
                vllm::running_usage(plan, cursor.sent)
            } else {
                chat_usage(usage_at(plan, cursor.sent))
            };
        }
        if tx.send(sse(&chunk)).await.is_err() {
            return None;
        }
        if cursor.first.is_none() {
            let ttft = cursor.started.elapsed();
            cursor.first = Some(ttft);
            running.0.ttft.observe(ttft);
        }
    }
    Some(cursor)
}

/// The usage chunk that ends a chat or completions stream (no choices),
/// as SGLang 0.5.23 writes each.
fn usage_chunk(shape: Shape, model: &str, id: &str, plan: &Plan, profile: &Profile) -> Bytes {
    let (object, usage) = if shape == Shape::Chat {
        ("chat.completion.chunk", chat_usage(usage(plan, profile)))
    } else {
        ("text_completion", usage(plan, profile))
    };
    sse(&json!({
        "id": id, "object": object, "created": 0, "model": model,
        "choices": [], "usage": usage,
    }))
}

/// The events that close a stream of `sent` tokens, as the server the
/// simulator speaks as writes them: the finish where the last token did
/// not carry it, the usage chunk when asked, `[DONE]` (llama.cpp's last
/// event instead, with the time to the first token and to the end).
fn closing(
    state: &SimState,
    shape: Shape,
    plan: &Plan,
    extras: Extras,
    (model, id): (&str, &str),
    sent: u64,
    (first, end): (Duration, Duration),
) -> Vec<Bytes> {
    let done = Bytes::from_static(b"data: [DONE]\n\n");
    let mut tail = Vec::new();
    if state.profile.speaks == Speaks::Vllm {
        if !vllm::finishes_on_token(plan, sent) {
            tail.push(vllm::finish_chunk(shape, model, id, plan, extras));
        }
        if extras.usage {
            let reported = reported_tokens(plan, &state.profile);
            tail.push(vllm::usage_chunk(shape, model, id, plan, reported));
        }
        tail.push(done);
        return tail;
    }
    match shape {
        Shape::Chat => tail.push(chat_chunk(
            model,
            id,
            &json!({}),
            Some((plan.finish_reason(), plan.matched_stop())),
        )),
        Shape::Completions => tail.push(completions_finish(model, id, plan, extras)),
        Shape::Generate if plan.completion_tokens() == 0 => {
            tail.push(sse(
                &json!({"text": "", "output_ids": [], "meta_info": meta_info(plan, id, 0, Some((first, end)))}),
            ));
        }
        Shape::Generate => {}
        Shape::Llama => {
            tail.push(sse(&llama_stop(plan, &state.profile, "", first, end)));
            return tail;
        }
    }
    // SGLang 0.5.23 sends the asked details of a speculative request in a
    // chunk of their own, `sglext`, before the usage
    // (`entrypoints/openai/serving_chat.py`, `SpecTokensDetails`): the
    // figures its `/generate` puts in `meta_info`.
    if extras.spec_details && plan.server.spec_step.is_some() {
        let meta = meta_info(plan, id, sent, None);
        let spec: serde_json::Map<String, serde_json::Value> = SPEC_DETAILS
            .iter()
            .filter_map(|k| Some(((*k).to_owned(), meta.get(*k)?.clone())))
            .collect();
        tail.push(sse(&json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [], "usage": null, "sglext": {"spec_tokens_details": spec},
        })));
    }
    if extras.usage && matches!(shape, Shape::Chat | Shape::Completions) {
        tail.push(usage_chunk(shape, model, id, plan, &state.profile));
    }
    tail.push(done);
    tail
}

/// The fields of SGLang's `SpecTokensDetails` the simulator knows (of its
/// nine; `protocol.py`).
const SPEC_DETAILS: [&str; 3] = ["spec_accept_rate", "spec_accept_length", "spec_verify_ct"];

/// Streams `plan` (with the prompt's ids, where vLLM lists them).
pub(super) async fn stream(
    state: Arc<SimState>,
    shape: Shape,
    (plan, prompt_ids): (Plan, Vec<u64>),
    extras: Extras,
    id: String,
    tx: mpsc::Sender<Bytes>,
) {
    let mut running = Running::start(&state, plan.prompt_tokens);
    let started = Instant::now();
    let model = state.profile.model.clone();
    let per_chunk = state.profile.tokens_per_chunk;
    let as_vllm = state.profile.speaks == Speaks::Vllm;
    let mut at = Instant::now() + state.profile.ttft;
    let role = if as_vllm {
        vllm::role_chunk(&model, &id, &plan, extras, &prompt_ids)
    } else {
        role_chunk(&model, &id)
    };
    if shape == Shape::Chat && tx.send(role).await.is_err() {
        return;
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
    let mut last_chunk: Option<Instant> = None;
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
        if as_vllm && state.engine_dead.load(Ordering::SeqCst) {
            // Every stream under way gets the dead engine's error.
            let _ = tx.send(super::engine_dead_events()).await;
            return;
        }
        at += running.itl();
        let from = sent;
        sent += n as u64;
        running.generated(n as u64);
        cumulative.push_str(&piece);
        let chunk = if as_vllm {
            vllm::token_chunk(
                &Piece::new(shape, (&model, &id), &piece, reasoning, from..sent),
                &plan,
                extras,
                &prompt_ids,
                vllm::finishes_on_token(&plan, sent),
            )
        } else {
            token_chunk(
                &Piece::new(shape, (&model, &id), &piece, reasoning, from..sent)
                    .clocked(first, started.elapsed()),
                &cumulative,
                &plan,
                extras,
            )
        };
        if tx.send(chunk).await.is_err() {
            return;
        }
        let now = Instant::now();
        if let Some(last) = last_chunk {
            let each = u32::try_from(n).unwrap_or(u32::MAX).max(1);
            state.itl.observe_each((now - last) / each, n as u64);
        }
        last_chunk = Some(now);
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
    let cursor = Cursor {
        at,
        sent,
        first,
        started,
    };
    let Some(c) = tool_call(&running, &plan, (&model, &id), extras, cursor, &tx).await else {
        return;
    };
    (at, sent, first) = (c.at, c.sent, c.first);
    if state.profile.fault == Some(Fault::Endless) {
        // max_tokens ignored: filler until the client goes away.
        loop {
            sleep_until(at).await;
            at = Instant::now().max(at) + running.itl().max(Duration::from_millis(1));
            sent += 1;
            cumulative.push_str(" more");
            let piece = Piece::new(shape, (&model, &id), " more", false, sent - 1..sent);
            let chunk = if as_vllm {
                vllm::token_chunk(&piece, &plan, extras, &prompt_ids, false)
            } else {
                token_chunk(&piece, &cumulative, &plan, extras)
            };
            if tx.send(chunk).await.is_err() {
                return;
            }
        }
    }
    let tail = closing(
        &state,
        shape,
        &plan,
        extras,
        (&model, &id),
        sent,
        (
            first.unwrap_or_else(|| started.elapsed()),
            started.elapsed(),
        ),
    );
    for b in tail {
        if tx.send(b).await.is_err() {
            return;
        }
    }
    running.ended(plan.finish);
    state.e2e.observe(started.elapsed());
}
