//! The bytes of an answer in each shape: the whole body of a request that
//! does not stream, and the SSE chunks of one that does (token chunks
//! formatted directly, the rest through JSON), with their usage, SGLang's
//! `meta_info` and llama.cpp's last event.

use std::time::Duration;

use axum::body::Bytes;
use serde_json::{Value, json};

use super::Shape;
use super::ask::Extras;
use crate::sim::Profile;
use crate::sim::engine::{Finish, Plan};

/// The completion count the server reports: breaking `usage` makes it one
/// that the stream contradicts.
pub(super) fn reported_tokens(plan: &Plan, profile: &Profile) -> u64 {
    if profile.breaks("usage") {
        1
    } else {
        plan.completion_tokens()
    }
}

pub(super) fn usage(plan: &Plan, profile: &Profile) -> Value {
    usage_at(plan, reported_tokens(plan, profile))
}

/// A chat answer's usage: SGLang 0.5.23's chat serializer writes both
/// details fields, `null` where there are none (its completions serializer
/// leaves them out).
pub(super) fn chat_usage(usage: Value) -> Value {
    let mut usage = usage;
    for details in ["prompt_tokens_details", "completion_tokens_details"] {
        if usage.get(details).is_none() {
            usage[details] = Value::Null;
        }
    }
    usage
}

/// Usage as SGLang 0.5.23's `UsageProcessor` writes it after `completion`
/// tokens: `reasoning_tokens` always (its own field), OpenAI's
/// `completion_tokens_details` when there are some, and
/// `prompt_tokens_details.cached_tokens` only with the cache report on.
pub(super) fn usage_at(plan: &Plan, completion: u64) -> Value {
    let reasoning = reasoning_so_far(plan, completion);
    let mut usage = json!({
        "prompt_tokens": plan.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": plan.prompt_tokens + completion,
        "reasoning_tokens": reasoning,
    });
    if reasoning > 0 {
        usage["completion_tokens_details"] = json!({"reasoning_tokens": reasoning});
    }
    if plan.server.cache_report {
        usage["prompt_tokens_details"] = json!({"cached_tokens": plan.server.cached_tokens});
    }
    // SGLang 0.5.23 `calculate_token_usage`: the details made for images
    // when there is no cache report, `cached_tokens` then 0.
    if plan.server.image_tokens > 0 {
        usage["prompt_tokens_details"]["cached_tokens"] = json!(plan.server.cached_tokens);
        usage["prompt_tokens_details"]["image_tokens"] = json!(plan.server.image_tokens);
    }
    usage
}

/// Reasoning tokens among the first `completion` (reasoning streams first).
fn reasoning_so_far(plan: &Plan, completion: u64) -> u64 {
    (plan.reasoning.len() as u64).min(completion)
}

/// SGLang's `meta_info` after `completion_tokens`; `finished` with the
/// time to its first token and to its end, where it is its last.
pub(super) fn meta_info(
    plan: &Plan,
    id: &str,
    completion_tokens: u64,
    finished: Option<(Duration, Duration)>,
) -> Value {
    let finish = if finished.is_some() {
        match plan.finish {
            Finish::Length => json!({"type": "length", "length": completion_tokens}),
            Finish::Stop => json!({"type": "stop", "matched": plan.matched_stop()}),
        }
    } else {
        Value::Null
    };
    let mut meta = json!({
        "id": id,
        "finish_reason": finish,
        "prompt_tokens": plan.prompt_tokens,
        "num_retractions": plan.server.retractions,
        "reasoning_tokens": reasoning_so_far(plan, completion_tokens),
        "completion_tokens": completion_tokens,
        "cached_tokens": plan.server.cached_tokens,
        "weight_version": "default",
    });
    if plan.server.image_tokens > 0 {
        meta["image_tokens"] = json!(plan.server.image_tokens);
    }
    // SGLang's `_calculate_spec_decoding_metrics`: accept length is
    // completion tokens per verify step (the bonus token included).
    if let Some(step) = plan.server.spec_step
        && completion_tokens > 0
    {
        let verify = completion_tokens.div_ceil(step as u64);
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        let length = completion_tokens as f64 / verify as f64;
        meta["spec_verify_ct"] = json!(verify);
        meta["spec_accept_length"] = json!(length);
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        let rate = if step > 1 {
            (length - 1.0) / (step - 1) as f64
        } else {
            0.0
        };
        meta["spec_accept_rate"] = json!(rate);
    }
    // SGLang 0.5.23's timings of a finished request (`e2e_latency`, and
    // with `--enable-metrics`, which its shipped launch lines set, the
    // rest; `observability/req_time_stats.py`). The simulator has no
    // queue: its requests start at once.
    if let Some((first, end)) = finished {
        let received = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_sub(end);
        meta["e2e_latency"] = json!(end.as_secs_f64());
        meta["request_received_ts"] = json!(received.as_secs_f64());
        meta["first_token_latency"] = json!(first.as_secs_f64());
        meta["queue_time"] = json!(0.0);
        let decode = end.saturating_sub(first).as_secs_f64();
        if completion_tokens > 1 && decode > 0.0 {
            #[expect(clippy::cast_precision_loss, reason = "small counts")]
            let rate = (completion_tokens - 1) as f64 / decode;
            meta["decode_throughput"] = json!(rate);
        }
    }
    meta
}

/// llama.cpp's last event (and non-streaming body): the whole `content`
/// there, counts, why it stopped and the server's timings, `prompt_ms` the
/// time to the first token and `predicted_ms` the rest.
pub(super) fn llama_stop(
    plan: &Plan,
    profile: &Profile,
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
            Finish::Length => "limit",
            Finish::Stop => "eos",
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
pub(super) fn whole(
    shape: Shape,
    plan: &Plan,
    profile: &Profile,
    id: &str,
    took: Duration,
) -> Value {
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
                "logprobs": null,
                "finish_reason": plan.finish.name(),
                "matched_stop": plan.matched_stop(),
            }],
            "usage": chat_usage(usage(plan, profile)),
        }),
        Shape::Completions => json!({
            "id": id, "object": "text_completion", "created": 0, "model": model,
            "choices": [{"index": 0, "text": inline_reasoning(&reasoning, &content), "logprobs": null, "finish_reason": plan.finish.name(), "matched_stop": plan.matched_stop()}],
            "usage": usage(plan, profile),
        }),
        Shape::Generate => json!({
            "text": inline_reasoning(&reasoning, &content),
            "output_ids": plan.output_ids(0, plan.completion_tokens()),
            "meta_info": meta_info(plan, id, plan.completion_tokens(), Some((profile.ttft, took))),
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
pub(super) fn inline_reasoning(reasoning: &str, content: &str) -> String {
    if reasoning.is_empty() {
        content.to_owned()
    } else {
        format!("<think>{reasoning}</think>{content}")
    }
}

pub(super) fn sse(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

/// A chat chunk as SGLang 0.5.23 streams one: `matched_stop` beside the
/// finish reason (`null` but in the last), and `reasoning_content`
/// written in every delta, `null` where there is none.
pub(super) fn chat_chunk(
    model: &str,
    id: &str,
    delta: &Value,
    finish: Option<(&str, Value)>,
) -> Bytes {
    let mut delta = delta.clone();
    if delta.get("reasoning_content").is_none() {
        delta["reasoning_content"] = Value::Null;
    }
    let (finish, matched) = finish.map_or((None, Value::Null), |(f, m)| (Some(f), m));
    sse(&json!({
        "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish, "matched_stop": matched}],
    }))
}

/// SGLang's role-only first chunk of a chat stream: not a token.
pub(super) fn role_chunk(model: &str, id: &str) -> Bytes {
    chat_chunk(
        model,
        id,
        &json!({"role": "assistant", "content": ""}),
        None,
    )
}

/// A JSON string literal.
pub(super) fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

/// A completions stream's last chunk: its finish, no text (and no ids,
/// where `return_token_ids` asked for them).
pub(super) fn completions_finish(model: &str, id: &str, plan: &Plan, extras: Extras) -> Bytes {
    let mut finish = json!({
        "id": id, "object": "text_completion", "created": 0, "model": model,
        "choices": [{"index": 0, "text": "", "logprobs": null, "finish_reason": plan.finish.name(), "matched_stop": plan.matched_stop()}],
        "usage": null,
    });
    if extras.token_ids {
        finish["choices"][0]["token_ids"] = json!([]);
    }
    sse(&finish)
}

/// One chunk of a stream: its shape, the model and request it belongs to,
/// its text, whether that is reasoning, and which of the answer's tokens
/// it carries.
pub(super) struct Piece<'a> {
    pub(super) shape: Shape,
    pub(super) model: &'a str,
    pub(super) id: &'a str,
    pub(super) text: &'a str,
    pub(super) reasoning: bool,
    pub(super) tokens: std::ops::Range<u64>,
    /// The time to the stream's first token and the time now, for the
    /// last chunk's timings.
    pub(super) clock: Option<(Duration, Duration)>,
}

impl<'a> Piece<'a> {
    pub(super) fn new(
        shape: Shape,
        (model, id): (&'a str, &'a str),
        text: &'a str,
        reasoning: bool,
        tokens: std::ops::Range<u64>,
    ) -> Self {
        Self {
            shape,
            model,
            id,
            text,
            reasoning,
            tokens,
            clock: None,
        }
    }

    /// The piece with the stream's clock: the time to its first token (or
    /// now, for the first) and the time now.
    pub(super) fn clocked(self, first: Option<Duration>, now: Duration) -> Self {
        Self {
            clock: Some((first.unwrap_or(now), now)),
            ..self
        }
    }
}

/// The SSE bytes of one chunk, `cumulative` the text so far. Token chunks
/// are the hot path of a benchmark, so they are formatted directly, not
/// through a JSON tree.
pub(super) fn token_chunk(p: &Piece<'_>, cumulative: &str, plan: &Plan, extras: Extras) -> Bytes {
    let Piece {
        shape,
        model,
        id,
        text: piece,
        reasoning,
        ..
    } = *p;
    let tokens = p.tokens.clone();
    let sent = tokens.end;
    // SGLang 0.5.23's running usage: chat's with both details (`null`
    // where none), completions' without; a completions chunk without it
    // says `"usage":null`, a chat chunk leaves it out.
    let usage = match (extras.continuous, shape) {
        (true, Shape::Chat) => format!(",\"usage\":{}", chat_usage(usage_at(plan, sent))),
        (true, _) => format!(",\"usage\":{}", usage_at(plan, sent)),
        (false, Shape::Completions) => ",\"usage\":null".to_owned(),
        (false, _) => String::new(),
    };
    let text = match shape {
        Shape::Chat => {
            let delta = if reasoning {
                format!(
                    "{{\"reasoning_content\":{},\"content\":null}}",
                    quoted(piece)
                )
            } else {
                format!(
                    "{{\"reasoning_content\":null,\"content\":{}}}",
                    quoted(piece)
                )
            };
            format!(
                "data: {{\"id\":\"{id}\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":{},\"choices\":[{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":null,\"matched_stop\":null}}]{usage}}}\n\n",
                quoted(model)
            )
        }
        // With `return_token_ids`, the chunk's own ids (SGLang 0.5.23's
        // `CompletionResponseStreamChoice.token_ids`).
        Shape::Completions => format!(
            "data: {{\"id\":\"{id}\",\"object\":\"text_completion\",\"created\":0,\"model\":{},\"choices\":[{{\"index\":0,\"text\":{},\"logprobs\":null,\"finish_reason\":null,\"matched_stop\":null{}}}]{usage}}}\n\n",
            quoted(model),
            quoted(piece),
            if extras.token_ids {
                format!(",\"token_ids\":{:?}", plan.output_ids(tokens.start, sent))
            } else {
                String::new()
            }
        ),
        Shape::Llama => format!(
            "data: {{\"index\":0,\"content\":{},\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":{sent},\"tokens_evaluated\":{}}}\n\n",
            quoted(piece),
            plan.prompt_tokens
        ),
        Shape::Generate => {
            let done = sent == plan.completion_tokens();
            // SGLang's `output_ids`: every token's so far, or the chunk's
            // own with incremental output.
            let ids = plan.output_ids(if extras.segments { tokens.start } else { 0 }, sent);
            format!(
                "data: {{\"text\":{},\"output_ids\":{ids:?},\"meta_info\":{}}}\n\n",
                quoted(if extras.segments { piece } else { cumulative }),
                meta_info(plan, id, sent, done.then(|| p.clock.unwrap_or_default()))
            )
        }
    };
    Bytes::from(text)
}

/// The simulator's scores of a prompt's tokens: the first `None`
/// (nothing predicts it), each other a log-probability drawn from it and
/// the token before, as a model's are fixed by the text. With broken
/// numerics (`sglang.garbage_with`), each is nine nats lower: text scored
/// as no model would.
pub(super) fn scores(prompt: &str, broken: bool) -> Vec<(Option<f64>, u64, String)> {
    let tokens = crate::sim::engine::tokenize(prompt);
    tokens
        .iter()
        .enumerate()
        .map(|(i, token)| {
            let before = if i > 0 { tokens[i - 1].as_str() } else { "" };
            let h = crate::sim::engine::hash(&format!("{before}\u{0}{token}"));
            #[expect(clippy::cast_precision_loss, reason = "a small remainder")]
            let lp = -0.05 - (h % 400) as f64 / 100.0 - if broken { 9.0 } else { 0.0 };
            (
                (i > 0).then_some(lp),
                crate::sim::engine::token_id(token),
                token.clone(),
            )
        })
        .collect()
}

/// Puts a prompt's scores into a whole answer as the server it speaks as
/// does: SGLang's `meta_info.input_token_logprobs` (`[logprob, id, null]`
/// a token), vLLM's `choices[0].prompt_logprobs` (`null`, then
/// `{"<id>": {"logprob", "rank", "decoded_token"}}` a token).
pub(super) fn put_scores(
    body: &mut Value,
    speaks: crate::sim::Speaks,
    scores: &[(Option<f64>, u64, String)],
) {
    match speaks {
        crate::sim::Speaks::Sglang => {
            body["meta_info"]["input_token_logprobs"] = scores
                .iter()
                .map(|(lp, id, _)| json!([lp, id, null]))
                .collect();
        }
        crate::sim::Speaks::Vllm => {
            body["choices"][0]["prompt_logprobs"] = scores
                .iter()
                .map(|(lp, id, word)| match lp {
                    None => Value::Null,
                    Some(lp) => {
                        json!({ id.to_string(): {"logprob": lp, "rank": 1, "decoded_token": word} })
                    }
                })
                .collect();
        }
    }
}
