//! Wire types: request bodies per API, and the lenient chunk shapes that
//! SGLang, vLLM and llama.cpp send (unknown fields are ignored; `content` may
//! be null or absent; reasoning arrives as `reasoning_content` or `reasoning`).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::suite::{Api, Input, Sampling};

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

/// The URL path of an API.
pub fn path(api: Api) -> &'static str {
    match api {
        Api::OpenAiChat => "/v1/chat/completions",
        Api::OpenAiCompletions => "/v1/completions",
        Api::SglangGenerate => "/generate",
    }
}

/// The JSON body of a streaming request.
pub fn body(api: Api, model: &str, req: &CallRequest) -> Value {
    let s = &req.sampling;
    match api {
        Api::OpenAiChat | Api::OpenAiCompletions => {
            // Usage on every chunk (SGLang, vLLM) gives exact tokens per
            // chunk; servers that do not know the option ignore it.
            let mut b = json!({
                "model": model,
                "stream": true,
                "stream_options": {"include_usage": true, "continuous_usage_stats": true},
            });
            if api == Api::OpenAiChat {
                b["messages"] = messages(&req.input);
            } else {
                b["prompt"] = Value::String(prompt_text(&req.input));
            }
            if let Some(t) = s.temperature {
                b["temperature"] = json!(t);
            }
            if let Some(m) = s.max_tokens {
                b["max_tokens"] = json!(m);
            }
            if let Some(seed) = s.seed {
                b["seed"] = json!(seed);
            }
            if let Some(p) = s.top_p {
                b["top_p"] = json!(p);
            }
            if let Some(stop) = &s.stop {
                b["stop"] = json!(stop);
            }
            if req.ignore_eos {
                // An extension honoured by SGLang, vLLM and llama.cpp.
                b["ignore_eos"] = json!(true);
            }
            if let Some(k) = &s.chat_template_kwargs {
                b["chat_template_kwargs"] = k.clone();
            }
            if let Some(sep) = s.separate_reasoning {
                b["separate_reasoning"] = json!(sep);
            }
            b
        }
        Api::SglangGenerate => {
            let mut sp = json!({});
            if let Some(t) = s.temperature {
                sp["temperature"] = json!(t);
            }
            if let Some(m) = s.max_tokens {
                sp["max_new_tokens"] = json!(m);
            }
            if let Some(seed) = s.seed {
                sp["sampling_seed"] = json!(seed);
            }
            if let Some(p) = s.top_p {
                sp["top_p"] = json!(p);
            }
            if let Some(stop) = &s.stop {
                sp["stop"] = json!(stop);
            }
            if req.ignore_eos {
                sp["ignore_eos"] = json!(true);
            }
            json!({"text": prompt_text(&req.input), "sampling_params": sp, "stream": true})
        }
    }
}

fn messages(input: &Input) -> Value {
    match input {
        Input::Prompt { system, prompt } => {
            let mut m = Vec::new();
            if let Some(sys) = system {
                m.push(json!({"role": "system", "content": sys}));
            }
            m.push(json!({"role": "user", "content": prompt}));
            Value::Array(m)
        }
        Input::Messages(list) => Value::Array(
            list.iter()
                .map(|m| json!({"role": m.role, "content": m.content}))
                .collect(),
        ),
    }
}

/// The prompt as plain text, for completion-style APIs (validation keeps
/// `messages` and `system` to the chat API).
pub fn prompt_text(input: &Input) -> String {
    match input {
        Input::Prompt { prompt, .. } => prompt.clone(),
        Input::Messages(list) => list
            .iter()
            .map(|m| m.content.as_str())
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
    pub usage: Option<Usage>,
    /// An error object sent in place of a chunk.
    #[serde(default, borrow)]
    pub error: Option<ErrorValue<'a>>,
    /// `"error"` in vLLM's error shape.
    #[serde(default, borrow)]
    pub object: Option<Cow<'a, str>>,
    /// vLLM's error message.
    #[serde(default, borrow)]
    pub message: Option<Cow<'a, str>>,
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

/// One choice of a chunk.
#[derive(Debug, Deserialize)]
pub struct OpenAiChoice<'a> {
    /// Chat delta.
    #[serde(default, borrow)]
    pub delta: Option<Delta<'a>>,
    /// Completions text.
    #[serde(default, borrow)]
    pub text: Option<Cow<'a, str>>,
    /// Set in the last chunk of the choice.
    #[serde(default, borrow)]
    pub finish_reason: Option<Cow<'a, str>>,
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
}

/// One chunk of SGLang's native `/generate` stream.
#[derive(Debug, Deserialize)]
pub struct GenerateChunk<'a> {
    /// Cumulative text so far.
    #[serde(default, borrow)]
    pub text: Option<Cow<'a, str>>,
    /// Counts and finish reason.
    #[serde(default)]
    pub meta_info: Option<MetaInfo>,
    /// An error object sent in place of a chunk.
    #[serde(default, borrow)]
    pub error: Option<ErrorValue<'a>>,
}

/// SGLang's `meta_info`.
#[derive(Debug, Deserialize)]
pub struct MetaInfo {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Generated tokens so far.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// `{"type": "length" | "stop", ...}` on the last chunk.
    #[serde(default)]
    pub finish_reason: Option<Value>,
}
