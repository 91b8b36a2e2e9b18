//! The OpenAI-compatible dialect (SGLang, vLLM, llama.cpp, TGI):
//! `/v1/chat/completions` and `/v1/completions`, streamed as chunks with
//! `choices[].delta` (chat) or `choices[].text`, usage when asked (every
//! chunk with continuous usage stats), and `data: [DONE]` at the end.

use serde_json::{Value, json};

use super::{Dialect, EventError, Events, Reported};
use crate::client::api::{
    CallRequest, OpenAiChunk, SamplingNames, messages, prompt_text, put_sampling,
};
use crate::suite::Api;

/// One of the two OpenAI endpoints.
#[derive(Debug)]
pub struct OpenAi {
    api: Api,
    path: &'static str,
}

/// `POST /v1/chat/completions`: the input as `messages`.
pub static CHAT: OpenAi = OpenAi {
    api: Api::OpenAiChat,
    path: "/v1/chat/completions",
};

/// `POST /v1/completions`: the input as a `prompt`.
pub static COMPLETIONS: OpenAi = OpenAi {
    api: Api::OpenAiCompletions,
    path: "/v1/completions",
};

impl Dialect for OpenAi {
    fn api(&self) -> Api {
        self.api
    }

    fn path(&self) -> &'static str {
        self.path
    }

    fn body(&self, model: &str, req: &CallRequest) -> Value {
        let s = &req.sampling;
        // Usage on every chunk (SGLang, vLLM) gives exact tokens per chunk;
        // servers that do not know the option ignore it.
        let mut b = json!({
            "model": model,
            "stream": true,
            "stream_options": {"include_usage": true, "continuous_usage_stats": true},
        });
        if self.api == Api::OpenAiChat {
            b["messages"] = messages(&req.input);
        } else {
            b["prompt"] = Value::String(prompt_text(&req.input));
        }
        put_sampling(
            &mut b,
            req,
            SamplingNames {
                max_tokens: "max_tokens",
                seed: "seed",
            },
        );
        // The chat API's limit is `max_completion_tokens` (SGLang 0.5.23
        // and vLLM take it first, `max_tokens` is deprecated there); both
        // are sent, so a server that knows only `max_tokens` still stops.
        if self.api == Api::OpenAiChat
            && let Some(m) = s.max_tokens
        {
            b["max_completion_tokens"] = json!(m);
        }
        if let Some(k) = &s.chat_template_kwargs {
            b["chat_template_kwargs"] = k.clone();
        }
        if let Some(sep) = s.separate_reasoning {
            b["separate_reasoning"] = json!(sep);
        }
        if let Some(tools) = &s.tools {
            b["tools"] = tools.iter().map(crate::suite::Tool::to_request).collect();
        }
        for (key, value) in [
            ("tool_choice", &s.tool_choice),
            ("response_format", &s.response_format),
            ("reasoning_effort", &s.reasoning_effort),
        ] {
            if let Some(v) = value {
                b[key] = v.clone();
            }
        }
        b
    }

    fn ids_own(&self) -> bool {
        true
    }

    /// One chunk of either: errors, deltas or text, finish, usage.
    fn event(&self, data: &[u8], out: &mut dyn Events) -> Result<(), EventError> {
        let chunk: OpenAiChunk<'_> = serde_json::from_slice(data)?;
        if let Some(message) = chunk.error_message() {
            return Err(EventError::Server(message));
        }
        // One choice was asked (no `n`): a second one, or an index other
        // than 0, would be merged into the answer and its timing.
        if chunk.choices.len() > 1 {
            return Err(EventError::Contract(format!(
                "a chunk carried {} choices where one was asked (`choices` has more than one element)",
                chunk.choices.len()
            )));
        }
        for choice in &chunk.choices {
            if let Some(i) = choice.index.filter(|&i| i != 0) {
                return Err(EventError::Contract(format!(
                    "`choices[].index` = {i} where one choice was asked (index 0)"
                )));
            }
            if let Some(d) = &choice.delta {
                for r in [&d.reasoning_content, &d.reasoning].into_iter().flatten() {
                    if !r.is_empty() {
                        out.reasoning(r);
                    }
                }
                if let Some(c) = &d.content
                    && !c.is_empty()
                {
                    out.content(c);
                }
                for call in d.tool_calls.iter().flatten() {
                    let f = call.function.as_ref();
                    let arguments = match f.and_then(|f| f.arguments.as_ref()) {
                        None | Some(Value::Null) => String::new(),
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => {
                            return Err(EventError::Contract(format!(
                                "`tool_calls[].function.arguments` is {}, not a string: OpenAI's format sends a call's arguments as JSON text (a client's SDK refuses this): {}",
                                match other {
                                    Value::Object(_) => "an object",
                                    Value::Array(_) => "an array",
                                    _ => "a number or a boolean",
                                },
                                crate::client::error::excerpt(&other.to_string(), 200)
                            )));
                        }
                    };
                    out.tool_call(
                        call.index.unwrap_or(0),
                        call.id.as_deref(),
                        f.and_then(|f| f.name.as_deref()),
                        &arguments,
                    );
                }
            }
            if let Some(t) = &choice.text
                && !t.is_empty()
            {
                out.content(t);
            }
            if let Some(ids) = &choice.token_ids {
                out.output_ids("choices[].token_ids", ids.0);
            }
            if let Some(f) = &choice.finish_reason {
                out.finish(f, None);
            }
        }
        if let Some(spec) = chunk.sglext.and_then(|e| e.spec_tokens_details) {
            let field = "sglext.spec_tokens_details.spec_accept_length";
            match spec.get("spec_accept_length") {
                Some(Value::Number(n)) => {
                    if let Some(l) = n.as_f64() {
                        out.spec_accept_length(field, l);
                    }
                }
                None | Some(Value::Null) if spec.is_object() => {}
                _ => {
                    return Err(EventError::Contract(format!(
                        "`sglext.spec_tokens_details` is not one choice's details with a numeric `spec_accept_length` (one choice was asked): {}",
                        crate::client::error::excerpt(&spec.to_string(), 200)
                    )));
                }
            }
        }
        if let Some(u) = chunk.usage {
            if let Some(n) = u.prompt_tokens {
                out.prompt_tokens("usage.prompt_tokens", n);
            }
            if let Some(n) = u.completion_tokens {
                out.completion_tokens("usage.completion_tokens", n);
            }
            let prompt_details = u.prompt_tokens_details.unwrap_or_default();
            if let Some(n) = prompt_details.cached_tokens {
                out.reported(
                    Reported::CachedTokens,
                    "usage.prompt_tokens_details.cached_tokens",
                    n,
                );
            }
            if let Some(n) = prompt_details.image_tokens {
                out.reported(
                    Reported::ImageTokens,
                    "usage.prompt_tokens_details.image_tokens",
                    n,
                );
            }
            let details = u.completion_tokens_details.and_then(|d| d.reasoning_tokens);
            if let Some(n) = details {
                out.reported(
                    Reported::ReasoningTokens,
                    "usage.completion_tokens_details.reasoning_tokens",
                    n,
                );
            } else if let Some(n) = u.reasoning_tokens {
                out.reported(Reported::ReasoningTokens, "usage.reasoning_tokens", n);
            }
        }
        Ok(())
    }

    /// vLLM 0.32's scoring on `/v1/completions`: `prompt_logprobs: 0` (each
    /// prompt token's own log-probability, no alternatives) beside one
    /// generated token, the fewest it allows. Chat scores no prompt.
    fn score_request(&self, model: &str, text: &str) -> Option<(&'static str, Value)> {
        (self.api == Api::OpenAiCompletions).then(|| {
            (
                self.path,
                json!({
                    "model": model,
                    "prompt": text,
                    "max_tokens": 1,
                    "temperature": 0,
                    "prompt_logprobs": 0,
                }),
            )
        })
    }

    /// `choices[0].prompt_logprobs`: `null` for the first token, then
    /// `{"<id>": {"logprob": …}}` a token (the token's own only, as
    /// `prompt_logprobs: 0` asks).
    fn scored(&self, answer: &Value) -> Result<Vec<f64>, String> {
        super::scored_list(
            answer,
            "/choices/0/prompt_logprobs",
            "the answer has no `choices[0].prompt_logprobs` list (vLLM's; SGLang scores a prompt through `/generate`)",
            |t| {
                let entries = t.as_object()?;
                (entries.len() == 1).then(|| entries.values().next()?.get("logprob"))?
            },
        )
    }
}
