//! What every dialect shares: the request independent of its API, the input
//! as messages or plain text, token counts, the two shapes of an error, and
//! the lenient OpenAI-compatible chunk that SGLang, vLLM and llama.cpp send
//! (unknown fields are ignored; `content` may be null or absent; reasoning
//! arrives as `reasoning_content` or `reasoning`), which also reads an error
//! body of any of them.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::suite::image::Image;
use crate::suite::{Input, Message, Part, Sampling};

/// What one call sends, independent of the API.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The prompt or conversation.
    pub input: Input,
    /// Sampling parameters.
    pub sampling: Sampling,
    /// Ask the server to ignore end-of-sequence.
    pub ignore_eos: bool,
}

/// Where a request names its LoRA adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AdapterField {
    /// `model`: vLLM's way, and the OpenAI convention.
    Model,
    /// `lora_path`: SGLang's, on every API (its `model` names an adapter
    /// only as `base:adapter`, `serving_base.py` in 0.5.23).
    LoraPath,
    /// Both, for a server not identified: SGLang takes `lora_path` over a
    /// `model` it reads as the base model, vLLM ignores `lora_path` (and
    /// says so in its log); neither serves the base model in its place.
    #[default]
    Both,
}

/// Names `adapter` on `body` as `field` says.
pub fn put_adapter(body: &mut Value, adapter: Option<&str>, field: AdapterField) {
    let Some(a) = adapter else { return };
    if field != AdapterField::LoraPath {
        body["model"] = json!(a);
    }
    if field != AdapterField::Model {
        body["lora_path"] = json!(a);
    }
}

/// How a dialect names the sampling parameters whose names differ between
/// APIs.
#[derive(Debug, Clone, Copy)]
pub struct SamplingNames {
    /// The most tokens to generate (`max_tokens`, `max_new_tokens`,
    /// `n_predict`).
    pub max_tokens: &'static str,
    /// The sampling seed (`seed`, `sampling_seed`).
    pub seed: &'static str,
}

/// Sets the sampling parameters `req` has on the JSON object `obj`, named
/// as `names` says; `ignore_eos` is an extension SGLang, vLLM and llama.cpp
/// all honour, and with it `skip_special_tokens: false` (SGLang's and
/// vLLM's sampling parameter; llama.cpp ignores it, its `ignore_eos` never
/// samples an end-of-generation token).
pub fn put_sampling(obj: &mut Value, req: &CallRequest, names: SamplingNames) {
    let s = &req.sampling;
    if let Some(t) = s.temperature {
        obj["temperature"] = json!(t);
    }
    if let Some(m) = s.max_tokens {
        obj[names.max_tokens] = json!(m);
    }
    if let Some(seed) = s.seed {
        obj[names.seed] = json!(seed);
    }
    if let Some(p) = s.top_p {
        obj["top_p"] = json!(p);
    }
    if let Some(stop) = &s.stop {
        obj["stop"] = json!(stop);
    }
    if req.ignore_eos {
        obj["ignore_eos"] = json!(true);
        // A model that samples its end-of-sequence token again and again
        // would print nothing for it: printed, every token counted shows.
        obj["skip_special_tokens"] = json!(false);
    }
}

/// The conversation as chat `messages`: a message of one text has it as
/// its `content`; one with images has OpenAI content parts (`text`,
/// `image_url`), a prompt's images before its text.
pub fn messages(input: &Input) -> Value {
    match input {
        Input::Prompt {
            system,
            prompt,
            images,
        } => {
            let mut m = Vec::new();
            if let Some(sys) = system {
                m.push(json!({"role": "system", "content": sys}));
            }
            let content = if images.is_empty() {
                json!(prompt)
            } else {
                let mut parts: Vec<Value> = images.iter().map(image_part).collect();
                parts.push(json!({"type": "text", "text": prompt}));
                Value::Array(parts)
            };
            m.push(json!({"role": "user", "content": content}));
            Value::Array(m)
        }
        Input::Messages(list) => Value::Array(
            list.iter()
                .map(|m| {
                    let content = match m.content.as_slice() {
                        [Part::Text(t)] => json!(t),
                        parts => Value::Array(
                            parts
                                .iter()
                                .map(|p| match p {
                                    Part::Text(t) => json!({"type": "text", "text": t}),
                                    Part::Image(i) => image_part(i),
                                })
                                .collect(),
                        ),
                    };
                    json!({"role": m.role, "content": content})
                })
                .collect(),
        ),
    }
}

fn image_part(image: &Image) -> Value {
    json!({"type": "image_url", "image_url": {"url": &*image.url}})
}

/// The prompt as plain text, for completion-style APIs (validation keeps
/// `messages` and `system` to the chat API).
pub fn prompt_text(input: &Input) -> String {
    match input {
        Input::Prompt { prompt, .. } => prompt.clone(),
        Input::Messages(list) => list
            .iter()
            .map(Message::joined_text)
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// Token counts a server reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct Usage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Generated tokens (reasoning included).
    #[serde(default)]
    pub completion_tokens: Option<u64>,
}

/// A chunk's `usage`: the counts, and what SGLang 0.5.23's `UsageInfo`
/// (`srt/entrypoints/openai/protocol.py`) and vLLM add to them.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct ChunkUsage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Generated tokens (reasoning included).
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// `cached_tokens`: with SGLang's `--enable-cache-report`, vLLM's
    /// `--enable-prompt-tokens-details`.
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// SGLang's own field (0 without a reasoning parser).
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
    /// OpenAI's place for them, set by SGLang when there are some.
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens served from the prefix cache.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    /// Prompt tokens the request's images took (SGLang 0.5.23, where
    /// there were images).
    #[serde(default)]
    pub image_tokens: Option<u64>,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct CompletionTokensDetails {
    /// Completion tokens spent reasoning.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl ErrorValue<'_> {
    /// The message.
    pub fn message(&self) -> String {
        error_message(Some(self), None, None).unwrap_or_default()
    }
}

/// The `error` member: an object with a message, or a bare string.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum ErrorValue<'a> {
    /// `{"message": ...}`
    Object {
        /// The message.
        #[serde(default, borrow)]
        message: Option<Cow<'a, str>>,
    },
    /// `"error": "text"`
    Text(#[serde(borrow)] Cow<'a, str>),
}

/// The message of an error in either shape, if the fields make an error.
fn error_message(
    error: Option<&ErrorValue<'_>>,
    object: Option<&str>,
    message: Option<&str>,
) -> Option<String> {
    match error {
        Some(ErrorValue::Object { message }) => Some(
            message
                .as_deref()
                .unwrap_or("error object without a message")
                .to_owned(),
        ),
        Some(ErrorValue::Text(t)) => Some(t.clone().into_owned()),
        None if object == Some("error") => {
            Some(message.unwrap_or("error without a message").to_owned())
        }
        None => None,
    }
}

/// One chunk of an OpenAI-compatible stream (chat or completions). Its error
/// fields also read an error body: `{"error": {...}}` (SGLang, OpenAI) or
/// `{"object": "error", "message": ...}` (vLLM).
#[derive(Debug, Deserialize)]
pub struct OpenAiChunk<'a> {
    /// Choices; empty in the usage-only chunk.
    #[serde(default, borrow)]
    pub choices: Vec<OpenAiChoice<'a>>,
    /// Usage, in the final chunk when `include_usage` was asked, and in
    /// every chunk (cumulative) with `continuous_usage_stats`.
    #[serde(default)]
    pub usage: Option<ChunkUsage>,
    /// An error object sent in place of a chunk.
    #[serde(default, borrow)]
    pub error: Option<ErrorValue<'a>>,
    /// `"error"` in vLLM's error shape.
    #[serde(default, borrow)]
    pub object: Option<Cow<'a, str>>,
    /// vLLM's error message.
    #[serde(default, borrow)]
    pub message: Option<Cow<'a, str>>,
    /// SGLang's extensions, in a chunk of their own before the usage
    /// (0.5.23 `SglExt`): the request's speculative figures when it asked
    /// `return_spec_tokens_details`.
    #[serde(default)]
    pub sglext: Option<SglExt>,
}

/// SGLang's `sglext`, the part servegate reads.
#[derive(Debug, Deserialize)]
pub struct SglExt {
    /// `SpecTokensDetails` of the one choice asked (a list of them where
    /// a request asked several choices).
    #[serde(default)]
    pub spec_tokens_details: Option<Value>,
}

impl OpenAiChunk<'_> {
    /// The error message, if the chunk is an error.
    pub fn error_message(&self) -> Option<String> {
        error_message(
            self.error.as_ref(),
            self.object.as_deref(),
            self.message.as_deref(),
        )
    }
}

/// How many token ids a JSON array holds (each an unsigned integer).
#[derive(Debug)]
pub struct IdCount(pub u64);

impl<'de> Deserialize<'de> for IdCount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Counter;
        impl<'de> serde::de::Visitor<'de> for Counter {
            type Value = IdCount;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of token ids")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<IdCount, A::Error> {
                let mut n = 0;
                while seq.next_element::<u64>()?.is_some() {
                    n += 1;
                }
                Ok(IdCount(n))
            }
        }
        d.deserialize_seq(Counter)
    }
}

/// One choice of a chunk.
#[derive(Debug, Deserialize)]
pub struct OpenAiChoice<'a> {
    /// Which choice (servegate asks for one: `n` = 1, index 0).
    #[serde(default)]
    pub index: Option<u64>,
    /// Chat delta.
    #[serde(default, borrow)]
    pub delta: Option<Delta<'a>>,
    /// Completions text.
    #[serde(default, borrow)]
    pub text: Option<Cow<'a, str>>,
    /// Set in the last chunk of the choice.
    #[serde(default, borrow)]
    pub finish_reason: Option<Cow<'a, str>>,
    /// The ids of the chunk's own tokens, when `return_token_ids` was
    /// asked (SGLang 0.5.23's completions, `CompletionResponseStreamChoice`;
    /// vLLM 0.32's chat and completions): counted, not kept.
    #[serde(default)]
    pub token_ids: Option<IdCount>,
}

/// A chat delta.
#[derive(Debug, Deserialize)]
pub struct Delta<'a> {
    /// Answer text; null or absent while reasoning.
    #[serde(default, borrow)]
    pub content: Option<Cow<'a, str>>,
    /// Reasoning text (SGLang, vLLM with a reasoning parser).
    #[serde(default, borrow)]
    pub reasoning_content: Option<Cow<'a, str>>,
    /// Reasoning text under the newer vLLM name.
    #[serde(default, borrow)]
    pub reasoning: Option<Cow<'a, str>>,
    /// Tool calls, streamed in pieces (SGLang 0.5.23 `DeltaMessage`): the
    /// first of a call with its `id` and function `name`, then fragments
    /// of its `arguments`.
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

/// One piece of a streamed tool call.
#[derive(Debug, Deserialize)]
pub struct ToolCallDelta {
    /// Which call of the answer it belongs to (0 when absent).
    #[serde(default)]
    pub index: Option<u64>,
    /// The call's id, in its first piece (OpenAI; SGLang and vLLM send it
    /// there too).
    #[serde(default)]
    pub id: Option<String>,
    /// The function called, and a fragment of its arguments.
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

/// `tool_calls[].function`.
#[derive(Debug, Deserialize)]
pub struct FunctionDelta {
    /// The function's name, in the call's first piece.
    #[serde(default)]
    pub name: Option<String>,
    /// A fragment of the arguments' JSON text: a string in OpenAI's
    /// format (SGLang 0.5.23's type allows an object, its parsers send
    /// text: `srt/function_call/core_types.py` `parameters: str`); read as
    /// any value to name what came when it is not one.
    #[serde(default)]
    pub arguments: Option<serde_json::Value>,
}

/// A tool call the model made, whole.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ToolCall {
    /// Its id, as the server gave it (empty where none came).
    #[serde(skip)]
    pub id: String,
    /// The function's name.
    pub name: String,
    /// Its arguments, as the server sent them (JSON text when valid).
    pub arguments: String,
}
