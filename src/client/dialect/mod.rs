//! One file per API dialect: what a request looks like (path, body,
//! authorization), where the served model is named, how its stream's events
//! read (content, reasoning, counts, finish, errors, the server's own
//! timings) and how the stream ends. The client and the reader of a stream know only this trait; adding
//! a dialect is one file here, a name in the suite's `Api` and its
//! simulator route.

mod llamacpp;
mod openai;
mod sglang;

pub use sglang::server_config;

use serde_json::Value;

use super::api::CallRequest;
use super::stream::TokenSource;
use crate::suite::Api;

/// The server's own account of a request's time, where the dialect reports
/// it: set beside the client's figures.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(tag = "dialect", rename_all = "snake_case")]
pub enum ServerTimings {
    /// llama.cpp's `timings` on its `"stop": true` event.
    LlamaCpp {
        /// Prompt tokens processed.
        prompt_n: u64,
        /// Milliseconds spent on the prompt.
        prompt_ms: f64,
        /// Tokens generated.
        predicted_n: u64,
        /// Milliseconds spent generating.
        predicted_ms: f64,
    },
    /// SGLang's `/generate` `meta_info` on its last chunk (0.5.23,
    /// `tokenizer_manager.py` and `observability/req_time_stats.py`):
    /// `e2e_latency` always, the rest with `--enable-metrics`. Its clock
    /// starts when the tokenizer manager took the request.
    Sglang {
        /// `e2e_latency`: seconds from the request's receipt to its end.
        e2e_s: f64,
        /// `first_token_latency`: seconds from receipt to the first token.
        ttft_s: Option<f64>,
        /// `queue_time`: seconds the scheduler held it in its queue.
        queue_s: Option<f64>,
        /// `decode_throughput`: tokens after the first over the seconds
        /// after it.
        decode_tok_s: Option<f64>,
    },
}

/// A count a server reports of a request beside its token counts, where
/// its dialect carries it (SGLang 0.5.23: `usage.prompt_tokens_details`,
/// `usage.reasoning_tokens`, `/generate`'s `meta_info`; vLLM's
/// `prompt_tokens_details`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reported {
    /// Prompt tokens served from the prefix cache.
    CachedTokens,
    /// Completion tokens spent reasoning.
    ReasoningTokens,
    /// Times the request was retracted (preempted and decoded again).
    Retractions,
    /// Prompt tokens the request's images took.
    ImageTokens,
}

/// The last value of each [`Reported`] figure a stream carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct ServerReport {
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: Option<u64>,
    /// Completion tokens spent reasoning.
    pub reasoning_tokens: Option<u64>,
    /// Tokens per speculative verify step.
    pub spec_accept_length: Option<f64>,
    /// Times the request was retracted.
    pub retractions: Option<u64>,
    /// Prompt tokens the request's images took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_tokens: Option<u64>,
}

/// How a dialect's cumulative text (SGLang's `/generate` `text`) comes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TextMode {
    /// The text so far in every chunk.
    #[default]
    Cumulative,
    /// Each chunk's text alone (SGLang's `--incremental-streaming-output`).
    Segments,
}

/// What a dialect's event says, told to the reader of the stream.
pub trait Events {
    /// New answer text.
    fn content(&mut self, text: &str);
    /// The whole answer so far (dialects that repeat it, SGLang's `/generate`).
    fn content_so_far(&mut self, text: &str);
    /// New reasoning text.
    fn reasoning(&mut self, text: &str);
    /// A piece of tool call `index`: its function's name (in its first
    /// piece) and a fragment of its arguments.
    fn tool_call(&mut self, index: u64, id: Option<&str>, name: Option<&str>, arguments: &str);
    /// The finish reason (`stop`, `length`, `abort`), with the server's
    /// words where the dialect carries them (SGLang's abort `message`).
    fn finish(&mut self, reason: &str, message: Option<&str>);
    /// The prompt's tokens, as the server's field `field` reports them.
    fn prompt_tokens(&mut self, field: &'static str, n: u64);
    /// Tokens generated so far in the request (cumulative), as the server's
    /// field `field` reports them.
    fn completion_tokens(&mut self, field: &'static str, n: u64);
    /// The server's own timings.
    fn timings(&mut self, timings: ServerTimings);
    /// A count the server reports beside its token counts, in its field
    /// `field` (the last one a stream carries counts: they are cumulative).
    fn reported(&mut self, what: Reported, field: &'static str, n: u64);
    /// Tokens per speculative verify step so far (the bonus token
    /// included), in the server's field `field`.
    fn spec_accept_length(&mut self, field: &'static str, length: f64);
    /// The stream ends with this event (dialects without `[DONE]`).
    fn end(&mut self);
    /// How many token ids the event listed in the server's field `field`
    /// (SGLang's `/generate` `output_ids`: all so far, or the chunk's own
    /// where its text comes in segments; the OpenAI APIs' `token_ids`: the
    /// chunk's own, see [`Dialect::ids_own`]): a witness of the count.
    fn output_ids(&mut self, field: &'static str, n: u64);
}

/// Why an event could not be read.
#[derive(Debug)]
pub enum EventError {
    /// The data is not the dialect's JSON.
    NotJson(serde_json::Error),
    /// The server sent an error in the stream.
    Server(String),
    /// Valid JSON that breaks the dialect's contract (a choice servegate
    /// did not ask for): what is wrong, naming the field.
    Contract(String),
}

impl From<serde_json::Error> for EventError {
    fn from(e: serde_json::Error) -> Self {
        EventError::NotJson(e)
    }
}

/// Where a completion's token count comes from in a dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counts {
    /// `usage` (cumulative in every chunk with continuous usage stats, or
    /// once at the end): tokens without text are not marks of their own.
    Usage,
    /// A count in every chunk (`meta_info`, `tokens_predicted`): a rise
    /// without text is a token too (an end-of-sequence or special token).
    EveryChunk,
}

/// An API dialect.
pub trait Dialect: Send + Sync + std::fmt::Debug {
    /// The suite's name for it.
    fn api(&self) -> Api;
    /// The URL path of a streaming request.
    fn path(&self) -> &'static str;
    /// The JSON body of a streaming request for `model`.
    fn body(&self, model: &str, req: &CallRequest) -> Value;
    /// The header that carries the API key.
    fn authorization(&self, key: &str) -> (&'static str, String) {
        ("Authorization", format!("Bearer {key}"))
    }
    /// Where the served model's id is asked: a path and the JSON pointer of
    /// the id in its answer, tried in order.
    fn discovery(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("/v1/models", "/data/0/id"),
            ("/model_info", "/model_path"),
            ("/get_model_info", "/model_path"),
        ]
    }
    /// Reads one event's data (not `[DONE]`) into `out`.
    fn event(&self, data: &[u8], out: &mut dyn Events) -> Result<(), EventError>;
    /// What a whole stream ends with: a stream that ends without it was cut
    /// short, whatever it carried.
    fn end_marker(&self) -> &'static str {
        "`data: [DONE]`"
    }
    /// How token counts come.
    fn counts(&self) -> Counts {
        Counts::Usage
    }
    /// Whether each event lists only its own token ids (the OpenAI APIs'
    /// `token_ids`), not all so far (`/generate`'s `output_ids`, unless its
    /// text comes in segments).
    fn ids_own(&self) -> bool {
        false
    }
    /// How a completion's count is named when the server gave it.
    fn token_source(&self) -> TokenSource {
        TokenSource::ServerUsage
    }
    /// The request that has the server score `text` — give the
    /// log-probability of each of its tokens — where the dialect can ask
    /// it: its path and body (not streamed). `None` where it cannot.
    fn score_request(&self, _model: &str, _text: &str) -> Option<(&'static str, Value)> {
        None
    }
    /// The log-probabilities of a scored text's tokens in the server's
    /// answer to [`Dialect::score_request`], the first token (which nothing
    /// before it predicts) left out; `Err` says what the answer lacks.
    fn scored(&self, _answer: &Value) -> Result<Vec<f64>, String> {
        Err("this API scores no prompt".to_owned())
    }
}

/// The log-probabilities of a scored text's tokens: the list at `pointer`
/// in the answer (`missing` where there is none), each entry but the
/// first's read by `each` (its number, or why it has none).
fn scored_list(
    answer: &Value,
    pointer: &str,
    missing: &str,
    each: impl Fn(&Value) -> Option<&Value>,
) -> Result<Vec<f64>, String> {
    let list = answer
        .pointer(pointer)
        .and_then(Value::as_array)
        .ok_or_else(|| missing.to_owned())?;
    list.iter()
        .enumerate()
        .skip(1)
        .map(|(i, t)| {
            each(t).and_then(Value::as_f64).ok_or_else(|| {
                format!(
                    "token {i}'s entry is {}, not one token's log-probability",
                    crate::text::printable(&t.to_string().chars().take(120).collect::<String>())
                )
            })
        })
        .collect()
}

static DIALECTS: [&dyn Dialect; 4] = [
    &openai::CHAT,
    &openai::COMPLETIONS,
    &sglang::Generate,
    &llamacpp::Completion,
];

/// The dialect of `api`.
pub fn of(api: Api) -> &'static dyn Dialect {
    DIALECTS
        .iter()
        .copied()
        .find(|d| d.api() == api)
        .expect("every Api has a dialect (checked by a test)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_has_one_dialect() {
        for (_, api) in Api::ALL {
            assert_eq!(
                DIALECTS.iter().filter(|d| d.api() == api).count(),
                1,
                "{}",
                api.name()
            );
        }
    }
}
