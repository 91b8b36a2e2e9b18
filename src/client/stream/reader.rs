//! The reader of one streamed answer: bytes in, the completion out, its
//! caps (answer size, token-bearing chunks, the run's shared buffers)
//! enforced as it grows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::events::EventSaid;
use super::headers::{ContentHeaders, EVENT_STREAM};
use super::{Completion, Timing, TokenSource};
use crate::client::api::{ToolCall, Usage};
use crate::client::dialect::{Counts, Dialect, ServerReport, ServerTimings, TextMode};
use crate::client::error::{CallError, ErrorKind, excerpt};
use crate::client::sse::SseParser;
use crate::stamp::Arrival;
use crate::units::{format_bytes, format_duration};

/// Parses a response body as it arrives and accumulates the completion.
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts of one stream: its end, its text kept, a closed connection, a count without ids"
)]
pub(super) struct StreamReader {
    pub(super) dialect: &'static dyn Dialect,
    sent: Instant,
    sse: SseParser,
    pub(super) timing: Timing,
    pub(super) content: String,
    pub(super) reasoning: String,
    pub(super) finish_reason: Option<String>,
    pub(super) usage: Option<Usage>,
    /// The highest completion count the server reported.
    pub(super) reported: Option<u64>,
    pub(super) chunk_tokens: u64,
    pub(super) server_timings: Option<ServerTimings>,
    pub(super) server_report: ServerReport,
    pub(super) done: bool,
    /// What the event being read said.
    pub(super) event: EventSaid,
    /// Cap on content and reasoning together.
    max_answer: u64,
    /// Cap on what every stream in flight holds together ([`HELD`]), and
    /// what this one counts in it.
    pub(super) max_buffers: u64,
    held: u64,
    /// Whether the text is kept (probes) or only counted (gates).
    pub(super) keep_text: bool,
    /// How text the dialect sends cumulatively comes.
    pub(super) text_mode: TextMode,
    /// How many token ids the server listed, where its dialect lists them
    /// (SGLang's `output_ids`): the witness of its count.
    pub(super) listed_ids: Option<u64>,
    /// A count came in an event that listed no ids (see `witnessed`).
    pub(super) ids_gap: bool,
    /// Bytes of content and of reasoning received so far.
    pub(super) content_len: usize,
    pub(super) reasoning_len: usize,
    /// Bytes of tool calls (names and arguments) received so far.
    pub(super) tool_len: usize,
    /// The tool calls that named their function so far, one bit per
    /// `tool_calls[].index`, counted whether or not their text is kept.
    pub(super) named_calls: u64,
    /// How many tool calls' framing the server's count may hold: none
    /// unless the request offered tools.
    pub(super) framed_calls: u64,
    /// The tool calls so far (kept as text is).
    pub(super) tool_calls: Vec<ToolCall>,
    /// Most token-bearing chunks this request may have.
    pub(super) max_marks: usize,
    /// Bytes of the request body and of the response so far: token counts
    /// beyond what they could carry are implausible.
    pub(super) sent_bytes: u64,
    pub(super) received: u64,
    /// Events that brought text or a rise of the count: each is evidence of
    /// a token even when what it carried prints nothing.
    pub(super) token_events: u64,
    /// Bytes of the request's stop sequences, whose tokens the server counts
    /// but cuts from the text.
    pub(super) stop_bytes: u64,
    /// The status and what the headers said the body is.
    status: u16,
    headers: ContentHeaders,
    /// The first bytes of the body, to show when it is not a stream.
    body_head: Vec<u8>,
    /// The body ended with the connection (no framing said where).
    pub(super) closed: bool,
    /// Since when the bytes of the read being parsed can have waited, and
    /// when the latest bytes arrived (both relative to the send).
    pub(super) since: Duration,
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

/// Most token-bearing chunks kept per request (16 bytes each): a million is
/// far past any real answer.
pub(super) const MAX_MARKS: usize = 1 << 20;

impl StreamReader {
    pub(super) fn new(
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
            server_report: ServerReport::default(),
            done: false,
            event: EventSaid::default(),
            max_answer,
            max_buffers: u64::MAX,
            held: 0,
            keep_text: true,
            text_mode: TextMode::Cumulative,
            listed_ids: None,
            ids_gap: false,
            content_len: 0,
            tool_len: 0,
            named_calls: 0,
            framed_calls: 0,
            tool_calls: Vec::new(),
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
    pub(super) fn answered(
        &mut self,
        status: u16,
        headers: ContentHeaders,
    ) -> Result<(), CallError> {
        headers.readable(status)?;
        self.status = status;
        self.headers = headers;
        Ok(())
    }

    /// How far a stream got: "after 2 tokens (12.30ms after the request
    /// was sent, 1.00ms after the last token), without `data: [DONE]`".
    pub(super) fn so_far(&self) -> String {
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
        let size = (self.content_len + self.reasoning_len + self.tool_len) as u64;
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

    pub(super) fn fail(&self, mut e: CallError) -> CallError {
        let mut partial = self.reasoning.clone();
        partial.push_str(&self.content);
        e.partial = partial;
        e
    }

    pub(super) fn feed(&mut self, bytes: &[u8], arrived: Arrival) -> Result<(), CallError> {
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

    pub(super) fn finish(&mut self) -> Result<Completion, CallError> {
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
        let ids_listed = token_source != TokenSource::ChunkCount && {
            self.evidenced(completion_tokens)?;
            self.witnessed(completion_tokens)?
        };
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
        self.check_report(completion_tokens)?;
        Ok(Completion {
            content: std::mem::take(&mut self.content),
            reasoning: std::mem::take(&mut self.reasoning),
            tool_calls: std::mem::take(&mut self.tool_calls),
            finish_reason: Some(finish_reason),
            usage: self.usage,
            completion_tokens,
            ids_listed,
            token_source,
            server_timings: self.server_timings,
            server_report: self.server_report,
            timing: std::mem::take(&mut self.timing),
        })
    }
}
