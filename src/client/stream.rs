//! One timed streaming call: request out, chunks in, every deadline enforced,
//! timestamps taken where bytes arrive.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use tokio::time::timeout_at;

use super::api::{CallRequest, OpenAiChunk, Usage};
use super::dialect::{self, Counts, Dialect, EventError, Events, ServerTimings};
use super::error::{CallError, Deadline, ErrorKind, excerpt, source_chain};
use super::raw;
use super::sse::SseParser;
use crate::stamp::Arrival;
use crate::suite::{Api, ReadLimits, Timeouts};
use crate::units::{format_bytes, format_duration};

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
    /// `stop`, `length`, …
    pub finish_reason: Option<String>,
    /// What the server reported.
    pub usage: Option<Usage>,
    /// Generated tokens, from the best source available.
    pub completion_tokens: u64,
    /// Where `completion_tokens` came from.
    pub token_source: TokenSource,
    /// The server's own timings, where its dialect reports them.
    pub server_timings: Option<ServerTimings>,
    /// Timestamps.
    pub timing: Timing,
}

/// What a response says its body is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContentHeaders {
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// `Content-Encoding`.
    pub content_encoding: Option<String>,
    /// `Location`, of a redirect.
    pub location: Option<String>,
}

impl ContentHeaders {
    fn of(headers: &reqwest::header::HeaderMap) -> Self {
        let get = |name| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.trim().to_owned())
        };
        Self {
            content_type: get(reqwest::header::CONTENT_TYPE),
            content_encoding: get(reqwest::header::CONTENT_ENCODING),
            location: get(reqwest::header::LOCATION),
        }
    }

    /// What a non-success answer says: the message of its error body, the
    /// body itself, or, for a redirect, where it points (a request's
    /// redirect is not followed: its body would be sent to another place).
    fn failure(&self, status: u16, body: &str) -> CallError {
        let detail = match (&self.location, (300..400).contains(&status)) {
            (Some(to), true) => format!(
                "the server redirects this request to {} (Location), and servegate does not follow a request's redirects: set `base_url` to where it points",
                excerpt(&crate::secrets::url_from_server(to), 300)
            ),
            _ => error_message_of(body).unwrap_or_else(|| excerpt(body, 500)),
        };
        CallError::new(ErrorKind::Http(status), detail)
    }

    /// `Err` when the body is compressed: the client asks for none and
    /// cannot read one.
    fn readable(&self, status: u16) -> Result<(), CallError> {
        match self.content_encoding.as_deref() {
            Some(e) if !e.is_empty() && !e.eq_ignore_ascii_case("identity") => Err(CallError::new(
                ErrorKind::Protocol,
                format!(
                    "the server answered HTTP {status} with Content-Encoding `{e}`: servegate asks for and reads an uncompressed event stream ({EVENT_STREAM})"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The content type, when it is stated and is not an event stream.
    fn not_event_stream(&self) -> Option<&str> {
        self.content_type.as_deref().filter(|t| {
            !t.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case(EVENT_STREAM))
        })
    }
}

/// The media type of a streamed answer.
const EVENT_STREAM: &str = "text/event-stream";

/// Makes ring the process's rustls crypto provider, once: reqwest is
/// built without one (`rustls-no-provider`, so that aws-lc's C build is not
/// part of servegate's) and panics building a client when none is
/// installed. A provider installed before is kept.
fn install_crypto_provider() {
    // An `Err` only says that one was installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The reqwest clients: of small requests, which follow redirects within
/// the server's origin ([`same_origin`]), and of `https://` targets'
/// generation requests, which follow none — as the raw transport of
/// `http://` targets, they fail saying where the redirect points (a
/// followed one would turn a POST into a GET, or put a second request's
/// round trip into the figures).
#[derive(Debug, Clone)]
struct Http {
    small: reqwest::Client,
    stream: reqwest::Client,
}

impl Http {
    fn new(timeouts: Timeouts) -> Result<Http, CallError> {
        Ok(Http {
            small: http_client(timeouts, reqwest::redirect::Policy::custom(same_origin))?,
            stream: http_client(timeouts, reqwest::redirect::Policy::none())?,
        })
    }
}

/// A reqwest client with its redirect policy.
fn http_client(
    timeouts: Timeouts,
    redirects: reqwest::redirect::Policy,
) -> Result<reqwest::Client, CallError> {
    // One proxy policy for both transports: none. The raw transport
    // connects directly, and a proxy between client and server would be
    // in every figure; `HTTP(S)_PROXY` and `NO_PROXY` are ignored (to go
    // through a proxy, make it the base URL).
    reqwest::Client::builder()
        .no_proxy()
        .redirect(redirects)
        .connect_timeout(timeouts.connect)
        .pool_max_idle_per_host(1024)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| CallError::new(ErrorKind::Transport, e.to_string()))
}

/// Redirects a small request follows: within the origin it was sent to,
/// at most [`MAX_REDIRECTS`] hops. Another origin's answer is never taken
/// for the server's (a `/get_server_info` sent to another port would be
/// recorded as its configuration): the request fails naming where it was
/// sent.
fn same_origin(attempt: reqwest::redirect::Attempt<'_>) -> reqwest::redirect::Action {
    let first = attempt.previous().first().map(reqwest::Url::origin);
    let to = attempt.url().clone();
    if first.is_some_and(|o| o != to.origin()) {
        let message = format!(
            "the server redirected to {}, another origin: not followed (nothing another server sends is taken for this one's)",
            crate::secrets::url_from_server(to.as_str())
        );
        return attempt.error(message);
    }
    if attempt.previous().len() > MAX_REDIRECTS {
        let message = format!(
            "more than {MAX_REDIRECTS} redirects, the last to {}",
            to.path()
        );
        return attempt.error(message);
    }
    attempt.follow()
}

/// Redirects followed within the server's origin.
const MAX_REDIRECTS: usize = 3;

/// A client for one server and API.
#[derive(Debug, Clone)]
pub struct Client {
    http: Http,
    base_url: String,
    dialect: &'static dyn Dialect,
    model: String,
    /// The header that carries the API key, when there is one.
    auth: Option<(&'static str, String)>,
    timeouts: Timeouts,
    limits: ReadLimits,
    /// Keep-alive connections for `http://` servers; `None` sends through reqwest.
    raw: Option<raw::Pool>,
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
        let http = Http::new(timeouts)?;
        let dialect = dialect::of(api);
        Ok(Self {
            http,
            base_url: base_url.to_owned(),
            dialect,
            model: model.to_owned(),
            auth: api_key.map(|k| dialect.authorization(&k)),
            timeouts,
            limits: ReadLimits::default(),
            raw: raw::Endpoint::parse(base_url).map(raw::Pool::new),
        })
    }

    /// The same client with connections of its own: a client thread's
    /// sockets belong to that thread's runtime, the only one that drives
    /// them (a current-thread runtime polls its sockets only inside its own
    /// `block_on`).
    pub fn for_thread(&self) -> Result<Self, CallError> {
        Ok(Self {
            http: Http::new(self.timeouts)?,
            raw: self.raw.as_ref().map(raw::Pool::empty_like),
            ..self.clone()
        })
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

    /// The full URL requests go to.
    pub fn url(&self) -> String {
        format!("{}{}", self.base_url, self.dialect.path())
    }

    /// The JSON body a request sends, for failure messages.
    pub fn body(&self, req: &CallRequest) -> serde_json::Value {
        self.dialect.body(&self.model, req)
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
    ) -> Result<reqwest::Response, CallError> {
        if let Some((name, value)) = &self.auth {
            req = req.header(*name, value);
        }
        let (which, limit) = self.small_deadline();
        timeout_at(deadline, req.send())
            .await
            .map_err(|_| CallError::new(ErrorKind::Timeout(which, limit), format!("GET {path}")))?
            .map_err(|e| classify_send_error(&e, self.timeouts.connect))
    }

    /// `POST`s to an administrative endpoint such as SGLang's `/flush_cache`.
    pub async fn post_admin(&self, path: &str) -> Result<(), CallError> {
        let url = format!("{}{path}", self.base_url);
        let deadline = tokio::time::Instant::now() + self.small_deadline().1;
        let resp = self
            .send_small(self.http.small.post(url), path, deadline)
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
        let resp = self
            .send_small(self.http.small.get(url), path, deadline)
            .await?;
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
        reader.max_buffers = self.limits.buffers;
        reader.stop_bytes = req.sampling.stop_bytes();
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
            .stream
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

/// The most values (keys, elements, members) a server's JSON document may
/// hold to be parsed. SGLang 0.5.23's `/get_server_info` holds a few
/// hundred (its server arguments, each rank's internal state); a parsed
/// tree costs ~40× its text in small values (a 4 MiB body of 250,000
/// keys took ~170 MiB).
pub const DOCUMENT_VALUES: usize = 100_000;

/// A server's JSON document, parsed when it holds at most
/// [`DOCUMENT_VALUES`] values; the error says why not.
pub fn document(text: &str) -> Result<serde_json::Value, String> {
    let values = json_values(text.as_bytes());
    if values > DOCUMENT_VALUES {
        return Err(format!(
            "a document of about {values} JSON values, more than servegate parses ({DOCUMENT_VALUES}): not parsed"
        ));
    }
    serde_json::from_str(text).map_err(|e| format!("a body that is not JSON ({e})"))
}

/// About how many values a JSON text holds, counted without parsing it:
/// one, and one more for each `,`, `:` and `[` outside strings.
fn json_values(text: &[u8]) -> usize {
    let (mut values, mut in_string, mut escaped) = (1, false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b',' | b':' | b'[' => values += 1,
                _ => {}
            }
        }
    }
    values
}

/// The most of an error body kept (its message is shown, not stored).
const ERROR_BODY: u64 = 64 * 1024;

/// The body of a response as text, read chunk by chunk: at most `limit`
/// bytes, by `deadline`. A longer body fails as oversize; a body still
/// arriving at the deadline fails as a total timeout.
async fn bounded_text(
    mut resp: reqwest::Response,
    limit: u64,
    deadline: tokio::time::Instant,
    path: &str,
) -> Result<String, CallError> {
    let started = tokio::time::Instant::now();
    let mut body = Vec::new();
    loop {
        let chunk = timeout_at(deadline, resp.chunk()).await.map_err(|_| {
            CallError::new(
                ErrorKind::Timeout(Deadline::Total, deadline.saturating_duration_since(started)),
                format!("{path}: the body was still arriving"),
            )
        })?;
        match chunk {
            Ok(Some(bytes)) => {
                if (body.len() + bytes.len()) as u64 > limit {
                    return Err(CallError::new(
                        ErrorKind::Oversize,
                        format!(
                            "{path}: the response body exceeded {} (target.limits.document)",
                            format_bytes(limit)
                        ),
                    ));
                }
                body.extend_from_slice(&bytes);
            }
            Ok(None) => return Ok(String::from_utf8_lossy(&body).into_owned()),
            Err(e) => return Err(CallError::new(ErrorKind::Transport, source_chain(&e))),
        }
    }
}

/// The deadlines of one call.
#[derive(Debug, Clone, Copy)]
struct Deadlines {
    t: Timeouts,
    total_at: tokio::time::Instant,
    first_at: tokio::time::Instant,
}

impl Deadlines {
    /// The total or first-token deadline, when `now` is past it.
    fn passed(
        &self,
        reader: &StreamReader,
        now: tokio::time::Instant,
    ) -> Option<(Deadline, Duration)> {
        if now >= self.total_at {
            Some((Deadline::Total, self.t.total))
        } else if reader.timing.first_token.is_none() && now >= self.first_at {
            Some((Deadline::FirstToken, self.t.first_token))
        } else {
            None
        }
    }

    /// The deadline that applies after a chunk arrived at `last`.
    fn after(
        &self,
        reader: &StreamReader,
        last: tokio::time::Instant,
    ) -> (tokio::time::Instant, Deadline, Duration) {
        let t = self.t;
        let mut d = (last + t.idle, Deadline::Idle, t.idle);
        if self.total_at < d.0 {
            d = (self.total_at, Deadline::Total, t.total);
        }
        if reader.timing.first_token.is_none() && self.first_at < d.0 {
            d = (self.first_at, Deadline::FirstToken, t.first_token);
        }
        d
    }
}

/// A response body read piece by piece.
trait BodySource {
    /// The next piece and when it arrived; `Ok(None)` at the end.
    async fn piece(&mut self) -> Result<Option<(&[u8], Arrival)>, CallError>;

    /// Whether the end of the body is the server closing the connection.
    fn ends_with_connection(&self) -> bool {
        false
    }
}

impl BodySource for raw::Response {
    async fn piece(&mut self) -> Result<Option<(&[u8], Arrival)>, CallError> {
        self.next().await
    }

    fn ends_with_connection(&self) -> bool {
        raw::Response::ends_with_connection(self)
    }
}

/// reqwest's body stream, for `https://` servers: read in hyper's task,
/// dated when it reaches this one, older bytes since the piece before.
struct ReqwestBody<S> {
    stream: S,
    current: bytes::Bytes,
    last: Instant,
}

impl<S> BodySource for ReqwestBody<S>
where
    S: futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin,
{
    async fn piece(&mut self) -> Result<Option<(&[u8], Arrival)>, CallError> {
        match self.stream.next().await {
            None => Ok(None),
            Some(Err(e)) => Err(CallError::new(ErrorKind::Transport, e.to_string())),
            Some(Ok(b)) => {
                self.current = b;
                let at = Instant::now();
                let since = std::mem::replace(&mut self.last, at);
                Ok(Some((&self.current, Arrival { at, since })))
            }
        }
    }
}

/// Reads a body into the reader until `[DONE]` or its end, every deadline
/// enforced. One timer for the whole stream, re-armed only when it fires:
/// the deadlines move with every chunk, but touching the timer wheel per
/// token costs more than the token itself at high concurrency.
async fn read_body<B: BodySource>(
    reader: &mut StreamReader,
    body: &mut B,
    deadlines: Deadlines,
) -> Result<(), CallError> {
    let mut last = tokio::time::Instant::now();
    let timer = tokio::time::sleep_until(deadlines.after(reader, last).0);
    tokio::pin!(timer);
    loop {
        let next = tokio::select! {
            biased;
            next = body.piece() => next,
            () = &mut timer => {
                let (at, which, limit) = deadlines.after(reader, last);
                if tokio::time::Instant::now() >= at {
                    return Err(reader.fail(CallError::new(ErrorKind::Timeout(which, limit), "")));
                }
                timer.as_mut().reset(at);
                continue;
            }
        };
        match next {
            Ok(None) => {
                reader.closed = body.ends_with_connection();
                return Ok(());
            }
            Err(e) if e.kind == ErrorKind::Transport => {
                let detail = format!("{} {}", e.detail, reader.so_far());
                return Err(reader.fail(CallError::new(ErrorKind::Transport, detail)));
            }
            Err(e) => return Err(reader.fail(e)),
            Ok(Some((chunk, arrived))) => {
                // The arrival serves both the deadline and the timing.
                last = tokio::time::Instant::from_std(arrived.at);
                if let Err(e) = reader.feed(chunk, arrived) {
                    return Err(reader.fail(e));
                }
                if reader.done {
                    return Ok(());
                }
                // A server that never pauses never lets the timer fire:
                // the total and first-token deadlines are also checked
                // against each arrival (a comparison, not a timer).
                if let Some((which, limit)) = deadlines.passed(reader, last) {
                    return Err(reader.fail(CallError::new(
                        ErrorKind::Timeout(which, limit),
                        "bytes were still arriving",
                    )));
                }
            }
        }
    }
}

/// The error message of a JSON error body, if it is one.
fn error_message_of(text: &str) -> Option<String> {
    serde_json::from_str::<OpenAiChunk<'_>>(text)
        .ok()
        .and_then(|b| b.error_message())
}

fn classify_send_error(e: &reqwest::Error, connect: Duration) -> CallError {
    if e.is_connect() {
        if e.is_timeout() {
            return CallError::new(
                ErrorKind::Timeout(Deadline::Connect, connect),
                source_chain(e),
            );
        }
        return CallError::new(ErrorKind::Connect, source_chain(e));
    }
    CallError::new(ErrorKind::Transport, source_chain(e))
}

/// Parses a response body as it arrives and accumulates the completion.
struct StreamReader {
    dialect: &'static dyn Dialect,
    sent: Instant,
    sse: SseParser,
    timing: Timing,
    content: String,
    reasoning: String,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    /// The highest completion count the server reported.
    reported: Option<u64>,
    chunk_tokens: u64,
    server_timings: Option<ServerTimings>,
    done: bool,
    /// What the event being read said.
    event: EventSaid,
    /// Cap on content and reasoning together.
    max_answer: u64,
    /// Cap on what every stream in flight holds together ([`HELD`]), and
    /// what this one counts in it.
    max_buffers: u64,
    held: u64,
    /// Whether the text is kept (probes) or only counted (gates).
    keep_text: bool,
    /// Bytes of content and of reasoning received so far.
    content_len: usize,
    reasoning_len: usize,
    /// Most token-bearing chunks this request may have.
    max_marks: usize,
    /// Bytes of the request body and of the response so far: token counts
    /// beyond what they could carry are implausible.
    sent_bytes: u64,
    received: u64,
    /// Events that brought text or a rise of the count: each is evidence of
    /// a token even when what it carried prints nothing.
    token_events: u64,
    /// Bytes of the request's stop sequences, whose tokens the server counts
    /// but cuts from the text.
    stop_bytes: u64,
    /// The status and what the headers said the body is.
    status: u16,
    headers: ContentHeaders,
    /// The first bytes of the body, to show when it is not a stream.
    body_head: Vec<u8>,
    /// The body ended with the connection (no framing said where).
    closed: bool,
    /// Since when the bytes of the read being parsed can have waited, and
    /// when the latest bytes arrived (both relative to the send).
    since: Duration,
    last_arrival: Option<Duration>,
}

/// What the buffers of every stream in flight in this process hold: a run's
/// streams share one budget (`target.limits.buffers`).
static HELD: AtomicU64 = AtomicU64::new(0);

impl Drop for StreamReader {
    fn drop(&mut self) {
        HELD.fetch_sub(self.held, Ordering::Relaxed);
    }
}

/// Bytes of the body kept to show what came instead of a stream.
const BODY_HEAD: usize = 200;

/// What one event said, gathered while its dialect reads it and applied
/// after: the marks and checks are the reader's, the same for every dialect.
#[derive(Debug, Default)]
struct EventSaid {
    /// New answer text came.
    content: bool,
    /// Some of it was more than white space: the answer has begun.
    visible: bool,
    /// New reasoning text came.
    reasoning: bool,
    /// Bytes of text (answer and reasoning) it brought.
    bytes: usize,
    /// The completion count it reported.
    completion: Option<u64>,
    /// Why it cannot be true, when it cannot.
    broken: Option<CallError>,
    /// The error finish it gave (`abort`), with the server's words.
    aborted: Option<String>,
}

/// Finish reasons that end a request without completing it: SGLang's
/// `abort` (a retracted, cancelled or failed request; `FINISH_ABORT` in
/// SGLang 0.5.23's `srt/managers/schedule_batch.py`, sent as the chat
/// chunk's `finish_reason` when it has no status code) and vLLM's `abort`
/// and `error`.
const ERROR_FINISHES: &[&str] = &["abort", "error"];

/// Most token-bearing chunks kept per request (16 bytes each): a million is
/// far past any real answer.
const MAX_MARKS: usize = 1 << 20;

/// Completion tokens a stream may be counted beyond what its text and
/// events bear out: an end-of-sequence token and a reasoning model's think
/// markers print nothing.
const UNPRINTED_TOKENS: u64 = 4;

/// Prompt tokens a request can be charged beyond one per byte sent (chat
/// templates add tokens the request does not carry).
const PROMPT_SLACK: u64 = 65_536;

impl Events for StreamReader {
    fn content(&mut self, text: &str) {
        self.content_len += text.len();
        if self.keep_text {
            self.content.push_str(text);
        }
        self.event.content = true;
        self.event.bytes += text.len();
        self.event.visible |= !text.trim().is_empty();
    }

    fn content_so_far(&mut self, text: &str) {
        let had = self.content_len;
        if text.len() >= had && text.is_char_boundary(had) {
            if text.len() > had {
                self.content(&text[had..]);
            }
        } else {
            self.event.broken.get_or_insert(CallError::new(
                ErrorKind::Protocol,
                "cumulative `text` shrank or changed between chunks",
            ));
        }
    }

    fn reasoning(&mut self, text: &str) {
        self.reasoning_len += text.len();
        if self.keep_text {
            self.reasoning.push_str(text);
        }
        self.event.reasoning = true;
        self.event.bytes += text.len();
    }

    fn finish(&mut self, reason: &str, message: Option<&str>) {
        if ERROR_FINISHES.contains(&reason) {
            self.event.aborted = Some(format!(
                "finish_reason `{reason}`{}",
                message.map_or_else(String::new, |m| format!(" ({})", excerpt(m, 300)))
            ));
        }
        self.finish_reason = Some(reason.to_owned());
    }

    fn prompt_tokens(&mut self, field: &'static str, n: u64) {
        match Self::plausible(field, n, self.sent_bytes, PROMPT_SLACK) {
            Ok(()) => self.usage.get_or_insert_default().prompt_tokens = Some(n),
            Err(e) => {
                self.event.broken.get_or_insert(e);
            }
        }
    }

    fn completion_tokens(&mut self, field: &'static str, n: u64) {
        match Self::plausible(field, n, self.received, 0) {
            Ok(()) => self.event.completion = Some(n),
            Err(e) => {
                self.event.broken.get_or_insert(e);
            }
        }
    }

    fn timings(&mut self, timings: ServerTimings) {
        self.server_timings = Some(timings);
    }

    fn end(&mut self) {
        self.done = true;
    }
}

impl StreamReader {
    fn new(
        dialect: &'static dyn Dialect,
        sent: Instant,
        max_answer: u64,
        sent_bytes: usize,
    ) -> Self {
        Self {
            dialect,
            sent,
            sse: SseParser::new(),
            timing: Timing::default(),
            content: String::new(),
            reasoning: String::new(),
            finish_reason: None,
            usage: None,
            reported: None,
            chunk_tokens: 0,
            server_timings: None,
            done: false,
            event: EventSaid::default(),
            max_answer,
            max_buffers: u64::MAX,
            held: 0,
            keep_text: true,
            content_len: 0,
            reasoning_len: 0,
            max_marks: MAX_MARKS,
            sent_bytes: sent_bytes as u64,
            received: 0,
            token_events: 0,
            stop_bytes: 0,
            status: 0,
            headers: ContentHeaders::default(),
            body_head: Vec::new(),
            closed: false,
            since: Duration::ZERO,
            last_arrival: None,
        }
    }

    /// Notes a 2xx answer's headers; `Err` when its body cannot be read.
    fn answered(&mut self, status: u16, headers: ContentHeaders) -> Result<(), CallError> {
        headers.readable(status)?;
        self.status = status;
        self.headers = headers;
        Ok(())
    }

    /// How far a stream got: "after 2 tokens (12.30ms after the request
    /// was sent, 1.00ms after the last token), without `data: [DONE]`".
    fn so_far(&self) -> String {
        let now = self.sent.elapsed();
        let tokens = self.chunk_tokens.max(self.reported.unwrap_or(0));
        let last = self.timing.marks.last().map_or_else(
            || "before any token".to_owned(),
            |m| {
                format!(
                    "{} after the last token",
                    format_duration(now.saturating_sub(m.at))
                )
            },
        );
        let marker = if self.done {
            String::new()
        } else {
            format!(", without {}", self.dialect.end_marker())
        };
        format!(
            "after {tokens} token{} ({} after the request was sent, {last}){marker}",
            if tokens == 1 { "" } else { "s" },
            format_duration(now)
        )
    }

    /// Counts what this stream's buffers hold (the SSE parser's, the text
    /// kept) against the run's budget, shared by every stream in flight:
    /// `Err` when the streams together hold more. A cap per answer alone
    /// lets 256 streams of 15 MiB lines take 4 GiB.
    fn hold(&mut self) -> Result<(), CallError> {
        let kept = if self.keep_text {
            self.content.capacity() + self.reasoning.capacity()
        } else {
            0
        };
        let now = (self.sse.held() + kept + self.body_head.capacity()) as u64;
        if now <= self.held {
            return Ok(());
        }
        let more = now - self.held;
        self.held = now;
        let total = HELD.fetch_add(more, Ordering::Relaxed) + more;
        if total > self.max_buffers {
            return Err(CallError::new(
                ErrorKind::Oversize,
                format!(
                    "the run's answer buffers passed {} (target.limits.buffers): {} held by the streams in flight, {} of them by this one {}",
                    format_bytes(self.max_buffers),
                    format_bytes(total),
                    format_bytes(now),
                    self.so_far()
                ),
            ));
        }
        Ok(())
    }

    /// `Err` when the answer grew past its cap.
    fn check_size(&self) -> Result<(), CallError> {
        let size = (self.content_len + self.reasoning_len) as u64;
        if size > self.max_answer {
            return Err(CallError::new(
                ErrorKind::Oversize,
                format!(
                    "answer exceeded {} after {} token chunks (target.limits.answer); the server did not stop",
                    format_bytes(self.max_answer),
                    self.timing.marks.len()
                ),
            ));
        }
        if self.timing.marks.len() > self.max_marks {
            return Err(CallError::new(
                ErrorKind::Oversize,
                format!(
                    "more than {} token-bearing chunks in one answer{}",
                    self.max_marks,
                    if self.max_marks < MAX_MARKS {
                        " (twice its max_tokens and more): the server does not stop at max_tokens"
                    } else {
                        ""
                    }
                ),
            ));
        }
        Ok(())
    }

    /// `Err` when a token count the server reported cannot be true: beyond
    /// 2^32 per request, or more tokens than the bytes that carried them
    /// (`slack` more for a prompt).
    fn plausible(field: &str, n: u64, carried_by: u64, slack: u64) -> Result<(), CallError> {
        let bound = carried_by.saturating_add(slack);
        if n > u64::from(u32::MAX) || n > bound {
            return Err(CallError::new(
                ErrorKind::Protocol,
                format!(
                    "{field} = {n} is implausible: more than {carried_by} bytes carried it (a broken or lying server)"
                ),
            ));
        }
        Ok(())
    }

    /// `Err` when the server counts more completion tokens than the stream
    /// can have carried: every token prints at least one byte of text (a
    /// byte-level or byte-fallback vocabulary splits a character into at
    /// most one token per byte) except those that print nothing — at most
    /// one per event that brought text or a rise of the count, the tokens
    /// of the request's stop sequences (at most one per byte), and
    /// [`UNPRINTED_TOKENS`] more (the end-of-sequence token, a reasoning
    /// model's think markers). Gates that ask for `ignore_eos` also ask
    /// `skip_special_tokens: false`, so a model that samples its
    /// end-of-sequence token again and again prints it.
    fn evidenced(&self, counted: u64) -> Result<(), CallError> {
        let text = (self.content_len as u64).saturating_add(self.reasoning_len as u64);
        let bound = text
            .saturating_add(self.token_events)
            .saturating_add(self.stop_bytes)
            .saturating_add(UNPRINTED_TOKENS);
        if counted > bound {
            let (stops, per_stop) = if self.stop_bytes > 0 {
                (
                    format!(" and {} bytes of stop sequences", self.stop_bytes),
                    ", one per stop byte",
                )
            } else {
                (String::new(), "")
            };
            return Err(CallError::new(
                ErrorKind::Protocol,
                format!(
                    "the server counts {counted} completion tokens, but the stream carried {text} bytes of text in {} events{stops}: at most {bound} tokens can have been sent (one per byte of text, one unprinted per event{per_stop}, {UNPRINTED_TOKENS} more) — a count the stream does not bear out",
                    self.token_events,
                ),
            ));
        }
        Ok(())
    }

    /// `Err` when the server's own timings cannot be true of this stream:
    /// not finite or negative; more time on the prompt than passed before
    /// the first token reached the client, or on the whole request than it
    /// lasted (the server cannot have worked longer than it was asked);
    /// less decode time than half the spread of the tokens' arrivals
    /// (delivery can bunch tokens a server spread out, by the transit of
    /// the first and last of them, but not spread tokens it produced at
    /// once). Each bound allows 10 ms and 10% for clocks and transit.
    fn check_timings(&self) -> Result<(), CallError> {
        let Some(t) = self.server_timings else {
            return Ok(());
        };
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let slack = |v: f64| v * 1.1 + 10.0;
        let e2e = ms(self.timing.end);
        let first = self.timing.first_token.map_or(e2e, ms);
        let spread = match (self.timing.marks.first(), self.timing.marks.last()) {
            (Some(a), Some(b)) => ms(b.at.saturating_sub(a.at)),
            _ => 0.0,
        };
        let wrong = |field: &str, v: f64, why: String| {
            // 1e-300 as written, not as 301 digits.
            let shown = if v == 0.0 || (1e-3..1e9).contains(&v.abs()) {
                format!("{v}")
            } else {
                format!("{v:e}")
            };
            Err(CallError::new(
                ErrorKind::Protocol,
                format!("timings.{field} = {shown} is implausible: {why}"),
            ))
        };
        for (field, v) in [("prompt_ms", t.prompt_ms), ("predicted_ms", t.predicted_ms)] {
            if !v.is_finite() || v < 0.0 {
                return wrong(field, v, "not a duration".into());
            }
        }
        if t.prompt_ms > slack(first) {
            return wrong(
                "prompt_ms",
                t.prompt_ms,
                format!("the first token reached the client {first:.1} ms after the request"),
            );
        }
        if t.prompt_ms + t.predicted_ms > slack(e2e) {
            return wrong(
                "predicted_ms",
                t.predicted_ms,
                format!("the whole request lasted {e2e:.1} ms"),
            );
        }
        if t.predicted_ms < spread / 2.0 - 10.0 {
            return wrong(
                "predicted_ms",
                t.predicted_ms,
                format!("the tokens' arrivals were spread over {spread:.1} ms"),
            );
        }
        Ok(())
    }

    fn fail(&self, mut e: CallError) -> CallError {
        let mut partial = self.reasoning.clone();
        partial.push_str(&self.content);
        e.partial = partial;
        e
    }

    fn feed(&mut self, bytes: &[u8], arrived: Arrival) -> Result<(), CallError> {
        let now = arrived.at.saturating_duration_since(self.sent);
        self.since = arrived.since.saturating_duration_since(self.sent);
        self.last_arrival = Some(now);
        self.timing.first_byte.get_or_insert(now);
        if self.body_head.len() < BODY_HEAD {
            let room = BODY_HEAD - self.body_head.len();
            self.body_head
                .extend_from_slice(&bytes[..room.min(bytes.len())]);
        }
        self.received = self.received.saturating_add(bytes.len() as u64);
        // Take the parser out so events can borrow its buffer while `self`
        // accumulates: no copy per chunk.
        let mut sse = std::mem::take(&mut self.sse);
        sse.feed(bytes);
        let mut result = Ok(());
        while let Some(ev) = sse.next_event() {
            let is_error_event = ev.event == b"error";
            // serde_json checks UTF-8 as it reads strings: no separate pass.
            result = self.event(ev.data, is_error_event, now);
            if result.is_err() || self.done {
                break;
            }
        }
        self.sse = sse;
        if self.sse.pending() > 0 {
            self.later_bytes(now);
        }
        result?;
        self.check_size()?;
        self.hold()?;
        if self.sse.pending() > 16 * 1024 * 1024 {
            return Err(CallError::new(
                ErrorKind::Protocol,
                "more than 16 MiB without a complete SSE line",
            ));
        }
        Ok(())
    }

    fn event(&mut self, data: &[u8], is_error_event: bool, now: Duration) -> Result<(), CallError> {
        let marks = self.timing.marks.len();
        let result = self.event_of(data, is_error_event, now);
        if self.timing.marks.len() == marks {
            self.later_bytes(now);
        }
        result
    }

    /// More bytes in the read that carried the last token (a later token,
    /// a finish chunk, usage, `[DONE]`, part of the next event) date it
    /// with their packet: it came at most `at − since` earlier.
    fn later_bytes(&mut self, now: Duration) {
        if let Some(m) = self.timing.marks.last_mut()
            && m.at == now
        {
            m.early_us =
                u32::try_from(now.saturating_sub(self.since).as_micros()).unwrap_or(u32::MAX);
        }
    }

    fn event_of(
        &mut self,
        data: &[u8],
        is_error_event: bool,
        now: Duration,
    ) -> Result<(), CallError> {
        let trimmed = data.trim_ascii();
        if trimmed == b"[DONE]" {
            self.done = true;
            return Ok(());
        }
        if trimmed.is_empty() {
            return Ok(());
        }
        let shown = |max: usize| excerpt(&String::from_utf8_lossy(trimmed), max);
        self.event = EventSaid::default();
        let finished = self.finish_reason.clone();
        let dialect = self.dialect;
        match dialect.event(trimmed, self) {
            // An `event: error` whose data is not a chunk is still an error.
            Err(EventError::NotJson(_)) | Ok(()) if is_error_event => {
                return Err(CallError::new(ErrorKind::InStream, shown(500)));
            }
            Err(EventError::NotJson(e)) => {
                return Err(CallError::new(
                    ErrorKind::Protocol,
                    format!("chunk is not valid JSON ({e}): {}", shown(300)),
                ));
            }
            Err(EventError::Server(m)) => return Err(CallError::new(ErrorKind::InStream, m)),
            Err(EventError::Contract(m)) => {
                return Err(CallError::new(
                    ErrorKind::Protocol,
                    format!("{m}: {}", shown(200)),
                ));
            }
            Ok(()) => {}
        }
        let said = std::mem::take(&mut self.event);
        if let Some(e) = said.broken {
            return Err(e);
        }
        // The finish ends the choice: text in a later event is not part of
        // the answer the server says it gave ("4" … stop, then " and more").
        if let Some(reason) = finished
            && (said.content || said.reasoning)
        {
            return Err(CallError::new(
                ErrorKind::Protocol,
                format!(
                    "text after the choice's finish_reason `{reason}`: {}",
                    shown(200)
                ),
            ));
        }
        let before = self.reported;
        if let Some(n) = said.completion {
            // A high-water mark: a count that goes down and up again must
            // not add its rise twice.
            self.reported = Some(before.map_or(n, |b| b.max(n)));
            self.usage.get_or_insert_default().completion_tokens = Some(n);
        }
        let rise = said
            .completion
            .map(|n| n.saturating_sub(before.unwrap_or(0)));
        if said.content || said.reasoning || rise.is_some_and(|r| r > 0) {
            self.token_events += 1;
        }
        // What a chunk carried: the count's rise, at most one token per byte
        // of its text and one that prints nothing (a count that rises by 20
        // for one byte carried 2, whatever it says).
        let carried = |r: u64| r.min(said.bytes as u64 + 1);
        match dialect.counts() {
            // The count is cumulative: its rise is this chunk's tokens; text
            // whose count did not rise is one token.
            Counts::Usage if said.content || said.reasoning => {
                self.mark(now, rise.map_or(1, |r| carried(r.max(1))), said.visible);
            }
            Counts::Usage => {}
            // A count in every chunk: a rise without new text is a token too
            // (an end-of-sequence token, a special token).
            Counts::EveryChunk => {
                let tokens = rise.map_or(u64::from(said.content || said.reasoning), carried);
                if tokens > 0 {
                    self.mark(now, tokens, said.visible);
                }
            }
        }
        // Counted with the event's own tokens: "after 3 tokens" of an abort
        // chunk that carried the third.
        if let Some(finish) = said.aborted {
            let tokens = self.chunk_tokens.max(self.reported.unwrap_or(0));
            return Err(CallError::new(
                ErrorKind::Aborted,
                format!(
                    "{finish} after {tokens} token{} ({} after the request was sent)",
                    if tokens == 1 { "" } else { "s" },
                    format_duration(now),
                ),
            ));
        }
        Ok(())
    }

    /// A token-bearing event at `at`; `visible` when it began the answer's
    /// text (TTFT to content stops at it, not at white space or a count
    /// without text).
    fn mark(&mut self, at: Duration, tokens: u64, visible: bool) {
        // Read together with this one, the previous chunk carries this
        // one's stamp.
        self.later_bytes(at);
        self.timing.first_token.get_or_insert(at);
        if visible {
            self.timing.first_content.get_or_insert(at);
        }
        self.chunk_tokens = self.chunk_tokens.saturating_add(tokens);
        let tokens = u32::try_from(tokens).unwrap_or(u32::MAX);
        self.timing.marks.push(TokenMark {
            at,
            tokens,
            early_us: 0,
        });
    }

    fn finish(&mut self) -> Result<Completion, CallError> {
        let now = self.sent.elapsed();
        if !self.done {
            let mut sse = std::mem::take(&mut self.sse);
            if let Some(ev) = sse.finish() {
                self.event(ev.data, false, now)?;
            }
        }
        if !self.done
            && let Some(other) = self.headers.not_event_stream()
        {
            return Err(CallError::new(
                ErrorKind::Protocol,
                format!(
                    "the server answered HTTP {} with Content-Type `{other}`, not an event stream ({EVENT_STREAM}); the body began: {}",
                    self.status,
                    excerpt(&String::from_utf8_lossy(&self.body_head), BODY_HEAD)
                ),
            ));
        }
        if !self.done {
            return Err(if self.closed {
                CallError::new(
                    ErrorKind::Transport,
                    format!("the server closed the connection {}", self.so_far()),
                )
            } else {
                CallError::new(
                    ErrorKind::Protocol,
                    format!("the response ended {}", self.so_far()),
                )
            });
        }
        // The end is when its last bytes arrived, not when they were read.
        self.timing.end = self.last_arrival.unwrap_or(now).min(now);
        Self::plausible(
            "the tokens the stream's chunks carried",
            self.chunk_tokens,
            self.received,
            0,
        )?;
        let (completion_tokens, token_source) = match (self.dialect.counts(), self.reported) {
            (Counts::EveryChunk, Some(n)) => (n, self.dialect.token_source()),
            (Counts::Usage, Some(_)) => (
                self.usage.and_then(|u| u.completion_tokens).unwrap_or(0),
                self.dialect.token_source(),
            ),
            (_, None) => (self.chunk_tokens, TokenSource::ChunkCount),
        };
        if token_source != TokenSource::ChunkCount {
            self.evidenced(completion_tokens)?;
        }
        let Some(finish_reason) = self.finish_reason.take() else {
            return Err(CallError::new(
                ErrorKind::Protocol,
                format!(
                    "the stream ended ({}) {}, but no event gave a finish reason: a complete answer cannot be told from a cut one",
                    self.dialect.end_marker(),
                    self.so_far()
                ),
            ));
        };
        self.check_timings()?;
        Ok(Completion {
            content: std::mem::take(&mut self.content),
            reasoning: std::mem::take(&mut self.reasoning),
            finish_reason: Some(finish_reason),
            usage: self.usage,
            completion_tokens,
            token_source,
            server_timings: self.server_timings,
            timing: std::mem::take(&mut self.timing),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// reqwest, the transport of `https://` targets, follows no redirect of
    /// a generation request (it followed a same-origin 307, a second round
    /// trip in the figures; a 302 would have turned the POST into a GET):
    /// the request fails saying where it points, as over the raw transport.
    /// Plain HTTP here, the raw transport set aside: the policy is the
    /// client's, not TLS's.
    #[tokio::test]
    async fn a_generation_request_through_reqwest_follows_no_redirect() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let mut asked = Vec::new();
            // The request may be slow to come on a loaded machine; a
            // followed redirect would come at once after it.
            let mut wait = Duration::from_secs(30);
            while let Ok(Ok((mut sock, _))) = tokio::time::timeout(wait, listener.accept()).await {
                wait = Duration::from_secs(1);
                let mut head = vec![0u8; 64 * 1024];
                let n = sock.read(&mut head).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&head[..n]).into_owned();
                asked.push(head.lines().next().unwrap_or("").to_owned());
                let answer = if head.starts_with("POST /v1/chat/completions") {
                    "HTTP/1.1 307 Temporary Redirect\r\nLocation: /elsewhere\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned()
                } else {
                    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"4\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                };
                let _ = sock.write_all(answer.as_bytes()).await;
            }
            asked
        });
        let timeouts = Timeouts {
            connect: Duration::from_secs(2),
            first_token: Duration::from_secs(5),
            idle: Duration::from_secs(5),
            total: Duration::from_secs(10),
        };
        let mut client =
            Client::new(&base, crate::suite::Api::OpenAiChat, "m", None, timeouts).unwrap();
        client.raw = None;
        let req = CallRequest {
            input: crate::suite::Input::Prompt {
                system: None,
                prompt: "What is 2+2?".into(),
            },
            sampling: crate::suite::Sampling::default(),
            ignore_eos: false,
        };
        let e = client.complete(&req).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Http(307), "{e}");
        assert!(
            e.detail
                .contains("the server redirects this request to \"/elsewhere\" (Location)"),
            "{e}"
        );
        let asked = server.await.unwrap();
        assert_eq!(asked, ["POST /v1/chat/completions HTTP/1.1"]);
    }

    #[test]
    fn values_are_counted_outside_strings_only() {
        assert_eq!(json_values(br#"{"a":1,"b":[2,3]}"#), 6);
        assert_eq!(json_values(br#"{"a, b: [c":"d\", e: ["}"#), 2);
        assert!(document(&format!("[{}0]", "0,".repeat(DOCUMENT_VALUES))).is_err());
        assert!(document(&format!("[{}0]", "0,".repeat(DOCUMENT_VALUES - 2))).is_ok());
    }
}
