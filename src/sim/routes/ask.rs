//! What a generation request asks for, read from its body whatever its API:
//! the prompt, the token limit, seed and sampling, stop sequences, the
//! reasoning switches and what to stream besides tokens.

use serde_json::{Value, json};

use super::Shape;
use crate::sim::Speaks;

/// The reasoning switches of a chat request.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReasoningAsk {
    /// `chat_template_kwargs.enable_thinking` (default true).
    pub(super) thinking: bool,
    /// `separate_reasoning` (default true): false puts the reasoning in the
    /// content, between `<think>` and `</think>`.
    pub(super) separate: bool,
}

/// What a request asked for, whatever its API.
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent switches of one request: its end, sampling, streaming, scoring"
)]
pub(in crate::sim) struct Ask {
    /// What replies match: the last user message's text on the chat API.
    pub(super) prompt: String,
    /// The whole prompt the model reads: on the chat API every message's
    /// text in order (system, earlier turns, the model's own answers), so
    /// a conversation's tokens are all counted and its earlier turns are a
    /// prefix the cache can hold; the prompt otherwise.
    pub(super) context: String,
    /// The URLs of the request's images, in order: chat `image_url` parts
    /// of every message, `/generate`'s `image_data`.
    pub(super) images: Vec<String>,
    pub(super) max_tokens: u32,
    pub(super) ignore_eos: bool,
    /// SGLang's `min_tokens` (`min_new_tokens` in `/generate`'s sampling
    /// parameters): no end of sequence before this many.
    pub(super) min_tokens: u32,
    pub(super) seed: Option<u64>,
    /// An explicit temperature above 0: unseeded filler then differs
    /// from request to request, as sampling does.
    pub(super) sampled: bool,
    /// Stop sequences.
    pub(super) stop: Vec<String>,
    /// What the request asked of the reasoning.
    pub(super) reasoning: ReasoningAsk,
    pub(super) stream: bool,
    pub(super) extras: Extras,
    /// How many `tools` the request offers: with any, a scripted tool call
    /// may be made.
    pub(super) tools: usize,
    /// The prompt's tokens scored: SGLang's `return_logprob` from
    /// `logprob_start_len: 0` on `/generate`, vLLM's `prompt_logprobs` on
    /// its completions.
    pub(super) score: bool,
}

const DEFAULT_MAX_TOKENS: u32 = 256;

/// What the client asked to receive besides tokens.
#[derive(Debug, Clone, Copy)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent switches of one request: usage, its continuity, segments, token ids"
)]
pub(super) struct Extras {
    /// A usage chunk at the end.
    pub(super) usage: bool,
    /// Usage on every chunk (`continuous_usage_stats`).
    pub(super) continuous: bool,
    /// `/generate`'s text as disjoint segments, not cumulative (the
    /// server's `--incremental-streaming-output`, not the client's ask).
    pub(super) segments: bool,
    /// Each chunk's token ids (`return_token_ids`): on completions, and
    /// on chat speaking as vLLM (SGLang refuses them on a chat stream).
    pub(super) token_ids: bool,
    /// SGLang's chat `return_spec_tokens_details`: an `sglext` chunk with
    /// the request's speculative figures before the usage.
    pub(super) spec_details: bool,
}

fn u32_field(v: Option<&Value>) -> Option<u32> {
    v.and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
}

/// A message's text: its `content` string, or its text parts joined.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// The URLs of a message's `image_url` parts.
fn image_urls(content: Option<&Value>) -> Vec<String> {
    let Some(Value::Array(parts)) = content else {
        return Vec::new();
    };
    parts
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("image_url"))
        .filter_map(|p| p.pointer("/image_url/url").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

pub(super) fn parse_ask(shape: Shape, speaks: Speaks, body: &Value) -> Result<Ask, String> {
    let flag = |pointer: &str, default: bool| {
        body.pointer(pointer)
            .and_then(Value::as_bool)
            .unwrap_or(default)
    };
    let mut images = Vec::new();
    let mut context = None;
    let prompt = match shape {
        Shape::Chat => {
            let messages = body
                .get("messages")
                .and_then(Value::as_array)
                .ok_or("`messages` must be a list")?;
            let mut texts = Vec::new();
            for m in messages {
                images.extend(image_urls(m.get("content")));
                texts.extend(m.get("content").and_then(content_text));
            }
            context = Some(texts.join("\n"));
            messages
                .iter()
                .rev()
                .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
                .and_then(|m| content_text(m.get("content")?))
                .ok_or("no user message")?
        }
        Shape::Completions | Shape::Llama => body
            .get("prompt")
            .and_then(Value::as_str)
            .ok_or("`prompt` must be a string")?
            .to_owned(),
        Shape::Generate => {
            // SGLang 0.5.23 (`tokenizer_manager.py`): one image or a list.
            match body.get("image_data") {
                Some(Value::String(url)) => images.push(url.clone()),
                Some(Value::Array(urls)) => {
                    images.extend(urls.iter().filter_map(|u| u.as_str().map(str::to_owned)));
                }
                _ => {}
            }
            body.get("text")
                .and_then(Value::as_str)
                .ok_or("`text` must be a string")?
                .to_owned()
        }
    };
    // SGLang 0.5.23 refuses the field on a streaming chat
    // (`serving_chat.py`: a `ValueError`, answered 400 by
    // `serving_base.py`).
    if speaks == Speaks::Sglang
        && shape == Shape::Chat
        && flag("/stream", false)
        && flag("/return_token_ids", false)
    {
        return Err("return_token_ids is not supported with streaming on /v1/chat/completions. Please set stream=false when using return_token_ids=true.".to_owned());
    }
    let params = if shape == Shape::Generate {
        body.get("sampling_params").cloned().unwrap_or(json!({}))
    } else {
        body.clone()
    };
    let max_tokens = match shape {
        Shape::Generate => u32_field(params.get("max_new_tokens")),
        // -1 (the default) is "until the end of the sequence".
        Shape::Llama => u32_field(params.get("n_predict")),
        // SGLang 0.5.23: `max_completion_tokens or max_tokens`.
        _ => u32_field(params.get("max_completion_tokens")).or(u32_field(params.get("max_tokens"))),
    }
    .unwrap_or(DEFAULT_MAX_TOKENS);
    let seed_key = if shape == Shape::Generate {
        "sampling_seed"
    } else {
        "seed"
    };
    Ok(Ask {
        context: context.unwrap_or_else(|| prompt.clone()),
        prompt,
        images,
        max_tokens,
        ignore_eos: params
            .get("ignore_eos")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        min_tokens: u32_field(params.get(if shape == Shape::Generate {
            "min_new_tokens"
        } else {
            "min_tokens"
        }))
        .unwrap_or(0)
        .min(max_tokens),
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
        tools: body
            .get("tools")
            .and_then(Value::as_array)
            .map_or(0, Vec::len),
        score: match (shape, speaks) {
            (Shape::Generate, Speaks::Sglang) => {
                flag("/return_logprob", false)
                    && body.get("logprob_start_len").and_then(Value::as_i64) == Some(0)
            }
            (Shape::Completions, Speaks::Vllm) => {
                body.get("prompt_logprobs").is_some_and(Value::is_u64)
            }
            _ => false,
        },
        extras: Extras {
            usage: flag("/stream_options/include_usage", false),
            continuous: flag("/stream_options/continuous_usage_stats", false),
            segments: false,
            token_ids: (shape == Shape::Completions || speaks == Speaks::Vllm)
                && flag("/return_token_ids", false),
            spec_details: shape == Shape::Chat
                && speaks == Speaks::Sglang
                && flag("/return_spec_tokens_details", false),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replies match the last user message; the model reads, counts and
    /// caches the whole conversation, its images' URLs gathered in order.
    #[test]
    fn a_conversation_is_read_whole_and_answered_by_its_last_turn() {
        let body = json!({"messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:a"}},
                {"type": "text", "text": "What is 2+2?"},
            ]},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "And times ten?"},
        ]});
        let ask = parse_ask(Shape::Chat, Speaks::Sglang, &body).unwrap();
        assert_eq!(ask.prompt, "And times ten?");
        assert_eq!(ask.context, "Be brief.\nWhat is 2+2?\n4\nAnd times ten?");
        assert_eq!(ask.images, ["data:a"]);
        let generate = json!({"text": "hi", "image_data": "data:b"});
        let ask = parse_ask(Shape::Generate, Speaks::Sglang, &generate).unwrap();
        assert_eq!(
            (ask.context.as_str(), ask.images.as_slice()),
            ("hi", &["data:b".to_owned()][..])
        );
    }
}
