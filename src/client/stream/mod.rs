//! One timed streaming call: request out, chunks in, every deadline enforced,
//! timestamps taken where bytes arrive. The client and what a call returns
//! are here; the reading is in the submodules.

mod deadlines;
mod document;
mod events;
mod headers;
mod http;
mod plausibility;
mod reader;
mod score;

use std::time::{Duration, Instant};

use tokio::time::timeout_at;

use super::api::{AdapterField, CallRequest, Usage, put_adapter};
use super::dialect::{self, Dialect, ServerReport, ServerTimings};
use super::error::{CallError, Deadline, ErrorKind, excerpt};
use super::raw;
use crate::suite::{Api, ReadLimits, Timeouts};
use deadlines::{Deadlines, ReqwestBody, read_body};
pub use document::{DOCUMENT_VALUES, document};
pub use headers::ContentHeaders;
use http::{ERROR_BODY, Http, bounded_text, classify_send_error, install_crypto_provider};
use reader::{MAX_MARKS, StreamReader};

/// Where a completion's token count came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's count at the end of the stream (`usage` of an
    /// OpenAI-compatible stream, `tokens_predicted` of llama.cpp's).
    ServerUsage,
    /// The count in every chunk of SGLang's native stream (`meta_info`).
    MetaInfo,
    /// The count in every event of llama.cpp's native stream
    /// (`tokens_predicted`).
    TokensPredicted,
    /// Token-bearing chunks counted by the client (no server count).
    #[default]
    ChunkCount,
}

impl TokenSource {
    /// How reports name the source.
    pub fn name(self) -> &'static str {
        match self {
            TokenSource::ServerUsage => "server usage",
            TokenSource::MetaInfo => "meta_info",
            TokenSource::TokensPredicted => "tokens_predicted",
            TokenSource::ChunkCount => "chunk count",
        }
    }
}

impl Completion {
    /// How reports name where its count came from: the source, and the
    /// ids that bear it out where the server listed them.
    pub fn count_source(&self) -> &'static str {
        match (self.token_source, self.ids_listed) {
            (TokenSource::ServerUsage, true) => "server usage = token ids",
            (TokenSource::MetaInfo, true) => "meta_info = output_ids",
            (source, _) => source.name(),
        }
    }
}

/// A chunk that carried tokens: when it arrived (since the request was sent)
/// and how many tokens it carried (1 when the server does not say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenMark {
    /// Arrival, relative to the send.
    pub at: Duration,
    /// Tokens in the chunk.
    pub tokens: u32,
    /// How much earlier than `at` it may really have arrived, µs: 0 but
    /// for a chunk read together with a later one (both carry the newer
    /// packet's stamp), when the client read late. The bound of the
    /// client's error on this mark ([`crate::stamp::Arrival`]).
    pub early_us: u32,
}

impl TokenMark {
    /// [`Self::early_us`] as a duration.
    pub fn early(&self) -> Duration {
        Duration::from_micros(u64::from(self.early_us))
    }
}

/// Monotonic timestamps of one call, relative to the moment it was sent.
#[derive(Debug, Clone, Default)]
pub struct Timing {
    /// Opening the connection, when the call opened one (`http://`
    /// targets; a pooled connection opens none).
    pub connect: Option<Duration>,
    /// How much of `connect` is surely not the client's: until the
    /// thread's last wake from sleep within it (a connection made wakes a
    /// sleeping thread; a thread awake finds it when it next looks, and
    /// its last wake came before). The rest can be the client's own delay.
    pub connected: Option<Duration>,
    /// The request's last byte handed to the kernel (`http://` targets).
    pub written: Option<Duration>,
    /// Response headers received.
    pub headers: Duration,
    /// First body byte received.
    pub first_byte: Option<Duration>,
    /// First token of any kind (reasoning or content).
    pub first_token: Option<Duration>,
    /// First token of the answer's text: not white space, nor a count
    /// without text.
    pub first_content: Option<Duration>,
    /// Every token-bearing chunk.
    pub marks: Vec<TokenMark>,
    /// Whether arrivals were dated where bytes came off the socket (the
    /// `http://` transport); through reqwest (`https://`) they are dated
    /// when hyper hands them over, and the client's error is not bounded.
    pub stamped: bool,
    /// End of the stream.
    pub end: Duration,
}

/// The result of a successful call.
#[derive(Debug, Clone, Default)]
pub struct Completion {
    /// The answer.
    pub content: String,
    /// The reasoning, when the server separates it.
    pub reasoning: String,
    /// The tool calls it made (`delta.tool_calls`), whole.
    pub tool_calls: Vec<super::api::ToolCall>,
    /// `stop`, `length`, …
    pub finish_reason: Option<String>,
    /// What the server reported.
    pub usage: Option<Usage>,
    /// Generated tokens, from the best source available.
    pub completion_tokens: u64,
    /// The server listed the ids of the tokens it sent, as many as it
    /// counts (SGLang's `output_ids`, `token_ids` where asked).
    pub ids_listed: bool,
    /// Where `completion_tokens` came from.
    pub token_source: TokenSource,
    /// The server's own timings, where its dialect reports them.
    pub server_timings: Option<ServerTimings>,
    /// What else the server reported of it (cached and reasoning tokens,
    /// speculative acceptance, retractions).
    pub server_report: ServerReport,
    /// Timestamps.
    pub timing: Timing,
}

/// A client for one server and API.
#[derive(Debug, Clone)]
pub struct Client {
    http: Http,
    base_url: String,
    dialect: &'static dyn Dialect,
    model: String,
    /// The header that carries the API key, when there is one.
    auth: Option<(&'static str, String)>,
    /// The header that carries the admin key to administrative endpoints
    /// (SGLang's `--admin-api-key`), when there is one.
    admin_auth: Option<(&'static str, String)>,
    /// How the server sends a dialect's cumulative text (SGLang's
    /// `--incremental-streaming-output`: as segments).
    text_mode: dialect::TextMode,
    /// Ask the server to list each chunk's token ids (`return_token_ids`).
    token_ids: bool,
    /// Where a request names its LoRA adapter.
    adapter_field: AdapterField,
    timeouts: Timeouts,
    limits: ReadLimits,
    /// Keep-alive connections for `http://` servers; `None` sends through reqwest.
    raw: Option<raw::Pool>,
    /// The workers behind a launched router, by name, whose `/metrics`
    /// are the server's: empty to read this client's own.
    metrics_from: std::sync::Arc<[(String, Client)]>,
}

impl Client {
    /// A client for `base_url` (the server root).
    pub fn new(
        base_url: &str,
        api: Api,
        model: &str,
        api_key: Option<String>,
        timeouts: Timeouts,
    ) -> Result<Self, CallError> {
        install_crypto_provider();
        let http = Http::new(timeouts);
        // Built now, outside any request's deadline: parsing the system's
        // root certificates takes tens of milliseconds in a debug build,
        // and a discovery deadline of 40 ms met it (threads' clients stay
        // lazy: theirs are built when an https:// stream needs them).
        http.small()?;
        let dialect = dialect::of(api);
        Ok(Self {
            http,
            base_url: base_url.to_owned(),
            dialect,
            model: model.to_owned(),
            auth: api_key.map(|k| dialect.authorization(&k)),
            admin_auth: None,
            text_mode: dialect::TextMode::Cumulative,
            token_ids: false,
            adapter_field: AdapterField::Both,
            timeouts,
            limits: ReadLimits::default(),
            raw: raw::Endpoint::parse(base_url).map(raw::Pool::new),
            metrics_from: std::sync::Arc::new([]),
        })
    }

    /// The same client with connections of its own: a client thread's
    /// sockets belong to that thread's runtime, the only one that drives
    /// them (a current-thread runtime polls its sockets only inside its own
    /// `block_on`).
    #[must_use]
    pub fn for_thread(&self) -> Self {
        Self {
            http: Http::new(self.timeouts),
            raw: self.raw.as_ref().map(raw::Pool::empty_like),
            ..self.clone()
        }
    }

    /// The same client with other byte caps.
    #[must_use]
    pub fn with_limits(&self, limits: ReadLimits) -> Self {
        Self {
            limits,
            ..self.clone()
        }
    }

    /// Where the served model's id is asked (the dialect's paths).
    pub fn discovery(&self) -> &'static [(&'static str, &'static str)] {
        self.dialect.discovery()
    }

    /// Kept-alive connections closed so far, by this client and every one
    /// made [`Self::for_thread`] from it, because bytes no request asked
    /// for were waiting on them.
    pub fn unsolicited(&self) -> u64 {
        self.raw.as_ref().map_or(0, raw::Pool::unsolicited)
    }

    /// Opens keep-alive connections until `count` wait idle (`http://`
    /// targets; reqwest keeps its own): what a gate's streams will use,
    /// opened before its window. How long each one opened took.
    pub async fn preconnect(&self, count: usize) -> Vec<Duration> {
        match &self.raw {
            Some(pool) => pool.fill(count, self.timeouts.connect).await,
            None => Vec::new(),
        }
    }

    /// The API it speaks.
    pub fn api(&self) -> Api {
        self.dialect.api()
    }

    /// The server root.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The same client with other deadlines (sharing its connections).
    #[must_use]
    pub fn with_timeouts(&self, timeouts: Timeouts) -> Self {
        Self {
            timeouts,
            ..self.clone()
        }
    }

    /// This client, reading text a dialect sends cumulatively as disjoint
    /// segments when `incremental` (SGLang's
    /// `--incremental-streaming-output`, as its `/server_info` reports it).
    #[must_use]
    pub fn with_incremental_output(mut self, incremental: bool) -> Self {
        self.text_mode = if incremental {
            dialect::TextMode::Segments
        } else {
            dialect::TextMode::Cumulative
        };
        self
    }

    /// This client, asking the server to list the ids of the tokens each
    /// chunk carries (`return_token_ids: true`) when `ask`: a witness of
    /// every request's count, for servers known to take it (SGLang 0.5.23's
    /// `/v1/completions`, vLLM 0.32's chat and completions; SGLang refuses
    /// it on a streaming chat, and a strict OpenAI-compatible server may
    /// refuse a field it does not know). A suite's `extra_body` overrides
    /// it.
    #[must_use]
    pub fn with_token_ids(mut self, ask: bool) -> Self {
        self.token_ids = ask;
        self
    }

    /// This client, naming a request's LoRA adapter in `field` (SGLang's
    /// `/generate` always takes `lora_path`).
    #[must_use]
    pub fn with_adapter_field(mut self, field: AdapterField) -> Self {
        self.adapter_field = field;
        self
    }

    /// This client, reading the server's `/metrics` from `workers` (a
    /// launched router's, by name).
    #[must_use]
    pub fn with_metrics_from(mut self, workers: Vec<(String, Client)>) -> Self {
        self.metrics_from = workers.into();
        self
    }

    /// The workers whose `/metrics` are the server's; empty: this client's.
    pub fn metrics_from(&self) -> &[(String, Client)] {
        &self.metrics_from
    }

    /// This client, sending `key` to administrative endpoints in place of
    /// the API key.
    #[must_use]
    pub fn with_admin_key(mut self, key: Option<String>) -> Self {
        self.admin_auth = key.map(|k| self.dialect.authorization(&k));
        self
    }

    /// The full URL requests go to.
    pub fn url(&self) -> String {
        format!("{}{}", self.base_url, self.dialect.path())
    }

    /// The JSON body a request sends (failure messages show it): the
    /// dialect's, with the suite's `extra_body` fields merged in.
    pub fn body(&self, req: &CallRequest) -> serde_json::Value {
        let mut body = self.dialect.body(&self.model, req);
        if self.token_ids {
            body["return_token_ids"] = serde_json::Value::Bool(true);
        }
        let adapter = req.sampling.adapter.as_deref();
        put_adapter(&mut body, adapter, self.field_of(self.dialect.api()));
        if let (Some(extra), Some(obj)) = (&req.sampling.extra_body, body.as_object_mut()) {
            obj.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        body
    }

    /// How long a small request (not a generation) may take in all: its
    /// answer is due within the first-token deadline (and the total one).
    fn small_deadline(&self) -> (Deadline, Duration) {
        let t = self.timeouts;
        if t.first_token < t.total {
            (Deadline::FirstToken, t.first_token)
        } else {
            (Deadline::Total, t.total)
        }
    }

    /// Sends a small request (not a generation) with the key, bounded by
    /// [`Self::small_deadline`].
    async fn send_small(
        &self,
        mut req: reqwest::RequestBuilder,
        path: &str,
        deadline: tokio::time::Instant,
        auth: Option<&(&'static str, String)>,
    ) -> Result<reqwest::Response, CallError> {
        if let Some((name, value)) = auth {
            req = req.header(*name, value);
        }
        let (which, limit) = self.small_deadline();
        timeout_at(deadline, req.send())
            .await
            .map_err(|_| CallError::new(ErrorKind::Timeout(which, limit), format!("GET {path}")))?
            .map_err(|e| classify_send_error(&e, self.timeouts.connect))
    }

    /// `POST`s to an administrative endpoint such as SGLang's
    /// `/flush_cache`, with the admin key where there is one (SGLang takes
    /// only it there when it has one), else the API key.
    pub async fn post_admin(&self, path: &str) -> Result<(), CallError> {
        let url = format!("{}{path}", self.base_url);
        let deadline = tokio::time::Instant::now() + self.small_deadline().1;
        let auth = self.admin_auth.as_ref().or(self.auth.as_ref());
        let resp = self
            .send_small(self.http.small()?.post(url), path, deadline, auth)
            .await?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let text = bounded_text(resp, ERROR_BODY, deadline, path)
            .await
            .unwrap_or_else(|e| e.detail);
        Err(CallError::new(
            ErrorKind::Http(status.as_u16()),
            format!("{path}: {}", excerpt(&text, 300)),
        ))
    }

    /// GETs a text endpoint such as `/metrics`; `Ok(None)` when the server
    /// answers but not with success (it has no such endpoint).
    pub async fn get_text(&self, path: &str) -> Result<Option<String>, CallError> {
        let (status, text) = self.get(path).await?;
        Ok((200..300).contains(&status).then_some(text))
    }

    /// GETs a path: the status code and the body as text.
    pub async fn get(&self, path: &str) -> Result<(u16, String), CallError> {
        let url = format!("{}{path}", self.base_url);
        let deadline = tokio::time::Instant::now() + self.small_deadline().1;
        let send = || async {
            self.send_small(
                self.http.small()?.get(&url),
                path,
                deadline,
                self.auth.as_ref(),
            )
            .await
        };
        let resp = match send().await {
            // A kept-alive connection the server closed while it idled
            // (uvicorn, SGLang's and vLLM's, closes one after 5 s) fails
            // the request before the server read it: a GET is asked again,
            // once, on a new connection, within the same deadline.
            Err(e) if e.kind == ErrorKind::Transport => send().await?,
            answered => answered?,
        };
        let status = resp.status().as_u16();
        let text = bounded_text(resp, self.limits.document, deadline, path).await?;
        Ok((status, text))
    }

    /// Sends one streaming request and reads it to the end, on a
    /// connection of its own (`http://` targets): a probe's answer is never
    /// bytes a server sent before the question.
    pub async fn complete(&self, req: &CallRequest) -> Result<Completion, CallError> {
        self.call(req, true, false).await
    }

    /// Sends one streaming request of a gate, on a kept-alive connection
    /// (checked for waiting bytes before its reuse), keeping its text.
    pub async fn sample(&self, req: &CallRequest) -> Result<Completion, CallError> {
        self.call(req, true, true).await
    }

    /// Sends one streaming request for its timing and token counts only: the
    /// answer's text is counted (against its cap), not kept, so a gate's
    /// memory does not grow with its concurrency times the answer.
    pub async fn measure(&self, req: &CallRequest) -> Result<Completion, CallError> {
        self.call(req, false, true).await
    }

    async fn call(
        &self,
        req: &CallRequest,
        keep_text: bool,
        reuse: bool,
    ) -> Result<Completion, CallError> {
        let body = serde_json::to_vec(&self.body(req))
            .map_err(|e| CallError::new(ErrorKind::Protocol, e.to_string()))?;
        let t = self.timeouts;
        let sent = Instant::now();
        let deadlines = Deadlines {
            t,
            total_at: tokio::time::Instant::from_std(sent + t.total),
            first_at: tokio::time::Instant::from_std(sent + t.first_token),
        };
        let head_timeout = || {
            let which = if deadlines.first_at <= deadlines.total_at {
                (Deadline::FirstToken, t.first_token)
            } else {
                (Deadline::Total, t.total)
            };
            CallError::new(ErrorKind::Timeout(which.0, which.1), "no response headers")
        };
        let head_deadline = deadlines.first_at.min(deadlines.total_at);
        let mut reader = StreamReader::new(self.dialect, sent, self.limits.answer, body.len());
        reader.keep_text = keep_text;
        reader.text_mode = self.text_mode;
        reader.max_buffers = self.limits.buffers;
        reader.stop_bytes = req.sampling.stop_bytes();
        if req.sampling.tools.as_ref().is_some_and(|t| !t.is_empty()) {
            reader.framed_calls = plausibility::FRAMED_CALLS;
        }
        reader.max_marks = req
            .sampling
            .max_tokens
            .map_or(MAX_MARKS, |m| (2 * m as usize + 16).min(MAX_MARKS));
        if let Some(pool) = &self.raw {
            let mut response = match pool
                .post(
                    self.dialect.path(),
                    &body,
                    self.auth.as_ref().map(|(n, v)| (*n, v.as_str())),
                    t.connect,
                    head_deadline,
                    reuse,
                )
                .await
            {
                Ok(r) => r,
                Err(raw::HeadError::Deadline) => return Err(head_timeout()),
                Err(raw::HeadError::Call(e)) => return Err(e),
                Err(raw::HeadError::Stale) => {
                    return Err(CallError::new(ErrorKind::Transport, "connection closed"));
                }
                Err(raw::HeadError::Early) => {
                    return Err(CallError::new(
                        ErrorKind::Protocol,
                        "the response's head reached this host before the request was written: the server sent it unasked (the connection was closed)",
                    ));
                }
            };
            reader.timing.headers = sent.elapsed();
            reader.timing.stamped = true;
            reader.timing.connect = response.connect;
            reader.timing.connected = response.connected;
            reader.timing.written = Some(response.written.saturating_duration_since(sent));
            if !(200..300).contains(&response.status) {
                let text = response.text(deadlines.total_at).await;
                return Err(response.content.failure(response.status, &text));
            }
            reader.answered(response.status, std::mem::take(&mut response.content))?;
            read_body(&mut reader, &mut response, deadlines).await?;
            response.release(pool);
            return reader.finish().map_err(|e| reader.fail(e));
        }
        let mut builder = self
            .http
            .stream()?
            .post(self.url())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body);
        if let Some((name, value)) = &self.auth {
            builder = builder.header(*name, value);
        }
        let response = match timeout_at(head_deadline, builder.send()).await {
            Err(_) => return Err(head_timeout()),
            Ok(Err(e)) => return Err(classify_send_error(&e, t.connect)),
            Ok(Ok(r)) => r,
        };
        reader.timing.headers = sent.elapsed();
        let status = response.status();
        if !status.is_success() {
            let headers = ContentHeaders::of(response.headers());
            let text = bounded_text(response, ERROR_BODY, deadlines.total_at, "")
                .await
                .unwrap_or_else(|e| e.detail);
            return Err(headers.failure(status.as_u16(), &text));
        }
        reader.answered(status.as_u16(), ContentHeaders::of(response.headers()))?;
        let mut body = ReqwestBody {
            stream: response.bytes_stream(),
            current: bytes::Bytes::new(),
            last: sent,
        };
        read_body(&mut reader, &mut body, deadlines).await?;
        reader.finish().map_err(|e| reader.fail(e))
    }
}

#[cfg(test)]
mod tests;
