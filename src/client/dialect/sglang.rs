//! SGLang's native dialect: `POST /generate` with `sampling_params`,
//! streamed as cumulative `text` and `meta_info` (counts in every chunk,
//! the finish reason as an object: `{"type": "abort", "message": …}` for an
//! aborted request) and `data: [DONE]` at the end, after an error too
//! (SGLang 0.5.23, `srt/entrypoints/http_server.py` `stream_results`, and
//! `FINISH_*.to_json` in `srt/managers/schedule_batch.py`).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Counts, Dialect, EventError, Events, Reported, ServerTimings};
use crate::client::TokenSource;
use crate::client::api::{
    CallRequest, ErrorValue, IdCount, SamplingNames, prompt_text, put_sampling,
};
use crate::suite::Api;

/// `POST /generate`.
#[derive(Debug)]
pub struct Generate;

/// The fields of SGLang's `/server_info` (0.5.23: its resolved server
/// arguments, flat) that change what a performance figure means: how the
/// model is split, which kernels and numerics run it, how many tokens a
/// decode step yields.
const CONFIG_FIELDS: &[&str] = &[
    "tp_size",
    "dp_size",
    "pp_size",
    "ep_size",
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    "quantization",
    "kv_cache_dtype",
    "num_continuous_decode_steps",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
];

/// The [`CONFIG_FIELDS`] a `/server_info` document reports, in that
/// order, null ones left out.
pub fn server_config(info: &Value) -> Vec<(&'static str, String)> {
    CONFIG_FIELDS
        .iter()
        .filter_map(|&k| match info.get(k)? {
            Value::Null => None,
            Value::String(s) => Some((k, s.clone())),
            other => Some((k, other.to_string())),
        })
        .collect()
}

/// One chunk of SGLang's native `/generate` stream.
#[derive(Debug, Deserialize)]
struct GenerateChunk<'a> {
    /// Cumulative text so far.
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    /// Counts and finish reason.
    #[serde(default)]
    meta_info: Option<MetaInfo>,
    /// An error object sent in place of a chunk.
    #[serde(default, borrow)]
    error: Option<ErrorValue<'a>>,
    /// The ids of the tokens generated so far (cumulative; each chunk's
    /// own with `--incremental-streaming-output`): counted, not kept.
    #[serde(default)]
    output_ids: Option<IdCount>,
}

/// SGLang's `meta_info`.
#[derive(Debug, Deserialize)]
struct MetaInfo {
    /// Prompt tokens.
    #[serde(default)]
    prompt_tokens: Option<u64>,
    /// Generated tokens so far.
    #[serde(default)]
    completion_tokens: Option<u64>,
    /// `{"type": "length" | "stop", ...}` on the last chunk.
    #[serde(default)]
    finish_reason: Option<Value>,
    /// Prompt tokens served from the prefix cache.
    #[serde(default)]
    cached_tokens: Option<u64>,
    /// Prompt tokens the request's images took.
    #[serde(default)]
    image_tokens: Option<u64>,
    /// Generated tokens spent reasoning (with a reasoning parser).
    #[serde(default)]
    reasoning_tokens: Option<u64>,
    /// Times the request was retracted.
    #[serde(default)]
    num_retractions: Option<u64>,
    /// Completion tokens per verify step, with speculative decoding.
    #[serde(default)]
    spec_accept_length: Option<f64>,
    /// Seconds from the request's receipt to its end (the last chunk).
    #[serde(default)]
    e2e_latency: Option<f64>,
    /// Seconds from receipt to the first token (`--enable-metrics`).
    #[serde(default)]
    first_token_latency: Option<f64>,
    /// Seconds in the scheduler's queue (`--enable-metrics`).
    #[serde(default)]
    queue_time: Option<f64>,
    /// Tokens per second after the first (`--enable-metrics`).
    #[serde(default)]
    decode_throughput: Option<f64>,
}

impl Dialect for Generate {
    fn api(&self) -> Api {
        Api::SglangGenerate
    }

    fn path(&self) -> &'static str {
        "/generate"
    }

    fn body(&self, _model: &str, req: &CallRequest) -> Value {
        let mut sp = json!({});
        put_sampling(
            &mut sp,
            req,
            SamplingNames {
                max_tokens: "max_new_tokens",
                seed: "sampling_seed",
            },
        );
        let mut body =
            json!({"text": prompt_text(&req.input), "sampling_params": sp, "stream": true});
        // SGLang 0.5.23 `load_image` (`srt/utils/common.py`) reads `data:`
        // and http(s) URLs alike; the prompt holds the model's image
        // placeholder where the suite put it.
        let images: Vec<&str> = req.input.images().map(|i| &*i.url).collect();
        if !images.is_empty() {
            body["image_data"] = json!(images);
        }
        body
    }

    fn event(&self, data: &[u8], out: &mut dyn Events) -> Result<(), EventError> {
        let chunk: GenerateChunk<'_> = serde_json::from_slice(data)?;
        if let Some(e) = &chunk.error {
            return Err(EventError::Server(e.message()));
        }
        if let Some(meta) = &chunk.meta_info {
            if let Some(n) = meta.prompt_tokens {
                out.prompt_tokens("meta_info.prompt_tokens", n);
            }
            if let Some(n) = meta.completion_tokens {
                out.completion_tokens("meta_info.completion_tokens", n);
            }
            let reported = [
                (
                    Reported::CachedTokens,
                    "meta_info.cached_tokens",
                    meta.cached_tokens,
                ),
                (
                    Reported::ReasoningTokens,
                    "meta_info.reasoning_tokens",
                    meta.reasoning_tokens,
                ),
                (
                    Reported::Retractions,
                    "meta_info.num_retractions",
                    meta.num_retractions,
                ),
                (
                    Reported::ImageTokens,
                    "meta_info.image_tokens",
                    meta.image_tokens,
                ),
            ];
            for (what, field, n) in reported {
                if let Some(n) = n {
                    out.reported(what, field, n);
                }
            }
            if let Some(l) = meta.spec_accept_length {
                out.spec_accept_length("meta_info.spec_accept_length", l);
            }
            if let Some(e2e_s) = meta.e2e_latency {
                out.timings(ServerTimings::Sglang {
                    e2e_s,
                    ttft_s: meta.first_token_latency,
                    queue_s: meta.queue_time,
                    decode_tok_s: meta.decode_throughput,
                });
            }
            if let Some(f) = &meta.finish_reason
                && !f.is_null()
            {
                out.finish(
                    f.get("type")
                        .and_then(|t| t.as_str())
                        .or_else(|| f.as_str())
                        .unwrap_or("unknown"),
                    f.get("message").and_then(|m| m.as_str()),
                );
            }
        }
        if let Some(text) = &chunk.text {
            out.content_so_far(text);
        }
        if let Some(ids) = &chunk.output_ids {
            out.output_ids("output_ids", ids.0);
        }
        Ok(())
    }

    fn counts(&self) -> Counts {
        Counts::EveryChunk
    }

    fn token_source(&self) -> TokenSource {
        TokenSource::MetaInfo
    }

    /// SGLang 0.5.23's scoring: `return_logprob` from the prompt's first
    /// token (`logprob_start_len: 0`), nothing generated
    /// (`max_new_tokens: 0`).
    fn score_request(&self, _model: &str, text: &str) -> Option<(&'static str, Value)> {
        Some((
            "/generate",
            json!({
                "text": text,
                "sampling_params": {"max_new_tokens": 0, "temperature": 0},
                "return_logprob": true,
                "logprob_start_len": 0,
            }),
        ))
    }

    /// `meta_info.input_token_logprobs`: `[logprob, token id, text]` a
    /// token, the first's logprob `null`.
    fn scored(&self, answer: &Value) -> Result<Vec<f64>, String> {
        super::scored_list(
            answer,
            "/meta_info/input_token_logprobs",
            "the answer has no `meta_info.input_token_logprobs` list",
            |t| t.get(0),
        )
    }
}
