//! llama.cpp's native dialect: `POST /completion` with `n_predict`,
//! streamed as `{"content": …, "stop": false, "tokens_predicted": n,
//! "tokens_evaluated": p}` events (the counts cumulative, in every event; an
//! end-of-sequence token comes with empty content) and a last one with
//! `"stop": true`, the reason it stopped (`stop_type`) and the server's own
//! `timings` — the prompt and decode times llama.cpp measured, set beside
//! the client's. No `[DONE]`: the `stop` event ends the stream.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Counts, Dialect, EventError, Events, Reported, ServerTimings};
use crate::client::TokenSource;
use crate::client::api::{CallRequest, ErrorValue, SamplingNames, prompt_text, put_sampling};
use crate::suite::Api;

/// `POST /completion`.
#[derive(Debug)]
pub struct Completion;

/// One event of a `/completion` stream.
#[derive(Debug, Deserialize)]
struct Chunk<'a> {
    /// New text.
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    /// Set on the last event.
    #[serde(default)]
    stop: bool,
    /// `eos`, `word` (a stop string), `limit` (`n_predict`).
    #[serde(default, borrow)]
    stop_type: Option<Cow<'a, str>>,
    /// Tokens generated so far.
    #[serde(default)]
    tokens_predicted: Option<u64>,
    /// Prompt tokens.
    #[serde(default)]
    tokens_evaluated: Option<u64>,
    /// The server's timings, on the last event.
    #[serde(default)]
    timings: Option<Timings>,
    /// An error sent in place of an event.
    #[serde(default, borrow)]
    error: Option<ErrorValue<'a>>,
}

/// llama.cpp's `timings`.
#[derive(Debug, Deserialize)]
struct Timings {
    #[serde(default)]
    prompt_n: u64,
    #[serde(default)]
    prompt_ms: f64,
    #[serde(default)]
    predicted_n: u64,
    #[serde(default)]
    predicted_ms: f64,
    /// Prompt tokens reused from the slot's cache (llama.cpp since b4000s:
    /// `prompt_n` is what it evaluated beside them).
    #[serde(default)]
    cache_n: Option<u64>,
}

impl Dialect for Completion {
    fn api(&self) -> Api {
        Api::LlamacppCompletion
    }

    fn path(&self) -> &'static str {
        "/completion"
    }

    fn body(&self, _model: &str, req: &CallRequest) -> Value {
        let mut b = json!({"prompt": prompt_text(&req.input), "stream": true});
        put_sampling(
            &mut b,
            req,
            SamplingNames {
                max_tokens: "n_predict",
                seed: "seed",
            },
        );
        b
    }

    fn discovery(&self) -> &'static [(&'static str, &'static str)] {
        &[("/v1/models", "/data/0/id"), ("/props", "/model_alias")]
    }

    fn event(&self, data: &[u8], out: &mut dyn Events) -> Result<(), EventError> {
        let chunk: Chunk<'_> = serde_json::from_slice(data)?;
        if let Some(e) = &chunk.error {
            return Err(EventError::Server(e.message()));
        }
        if let Some(c) = &chunk.content
            && !c.is_empty()
        {
            out.content(c);
        }
        if let Some(n) = chunk.tokens_evaluated {
            out.prompt_tokens("tokens_evaluated", n);
        }
        if let Some(n) = chunk.tokens_predicted {
            out.completion_tokens("tokens_predicted", n);
        }
        if chunk.stop {
            out.finish(
                match chunk.stop_type.as_deref() {
                    Some("limit") => "length",
                    _ => "stop",
                },
                None,
            );
            if let Some(t) = chunk.timings {
                if let Some(n) = t.cache_n {
                    out.reported(Reported::CachedTokens, "timings.cache_n", n);
                }
                out.timings(ServerTimings::LlamaCpp {
                    prompt_n: t.prompt_n,
                    prompt_ms: t.prompt_ms,
                    predicted_n: t.predicted_n,
                    predicted_ms: t.predicted_ms,
                });
            }
            out.end();
        }
        Ok(())
    }

    fn counts(&self) -> Counts {
        Counts::EveryChunk
    }

    fn token_source(&self) -> TokenSource {
        TokenSource::TokensPredicted
    }

    fn end_marker(&self) -> &'static str {
        "an event with `\"stop\": true`"
    }
}
