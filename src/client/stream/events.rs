//! Each event of a stream: what its dialect says it holds (through
//! [`Events`]), then the checks and token marks the reader applies, the
//! same for every dialect.

use std::time::Duration;

use super::TokenMark;
use super::plausibility::PROMPT_SLACK;
use super::reader::StreamReader;
use crate::client::api::ToolCall;
use crate::client::dialect::{Counts, EventError, Events, Reported, ServerTimings, TextMode};
use crate::client::error::{CallError, ErrorKind, excerpt};
use crate::units::format_duration;

/// What one event said, gathered while its dialect reads it and applied
/// after: the marks and checks are the reader's, the same for every dialect.
#[derive(Debug, Default)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts of one event: text, visible text, reasoning, token ids"
)]
pub(super) struct EventSaid {
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
    /// It listed token ids (SGLang's `output_ids`, the OpenAI APIs'
    /// `token_ids`).
    ids: bool,
}

/// Finish reasons that end a request without completing it: SGLang's
/// `abort` (a retracted, cancelled or failed request; `FINISH_ABORT` in
/// SGLang 0.5.23's `srt/managers/schedule_batch.py`, sent as the chat
/// chunk's `finish_reason` when it has no status code) and vLLM's `abort`
/// and `error`.
const ERROR_FINISHES: &[&str] = &["abort", "error"];

/// Most tool calls one answer may make.
const MAX_TOOL_CALLS: usize = 64;

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
        if self.text_mode == TextMode::Segments {
            if !text.is_empty() {
                self.content(text);
            }
            return;
        }
        let had = self.content_len;
        if text.len() >= had && text.is_char_boundary(had) {
            if text.len() > had {
                self.content(&text[had..]);
            }
        } else {
            self.event.broken.get_or_insert(CallError::new(
                ErrorKind::Protocol,
                "cumulative `text` shrank or changed between chunks (a server started with `--incremental-streaming-output` sends segments: its /server_info says so, and servegate reads them as such)",
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

    fn tool_call(&mut self, index: u64, id: Option<&str>, name: Option<&str>, arguments: &str) {
        // One choice makes a few calls; an index beyond them is no call.
        let Some(i) = usize::try_from(index).ok().filter(|&i| i < MAX_TOOL_CALLS) else {
            self.event.broken.get_or_insert(CallError::new(
                ErrorKind::Protocol,
                format!("`tool_calls[].index` = {index}: more than {MAX_TOOL_CALLS} tool calls in one answer"),
            ));
            return;
        };
        let bytes = name.map_or(0, str::len) + arguments.len();
        self.tool_len += bytes;
        if name.is_some_and(|n| !n.is_empty()) {
            self.named_calls |= 1 << i;
        }
        if self.keep_text {
            if self.tool_calls.len() <= i {
                self.tool_calls.resize_with(i + 1, ToolCall::default);
            }
            let call = &mut self.tool_calls[i];
            // A call's pieces share its id: a new id at the same index is
            // another call's, whose name and arguments would otherwise be
            // read as this one's.
            if let Some(id) = id.filter(|id| !id.is_empty()) {
                if call.id.is_empty() {
                    id.clone_into(&mut call.id);
                } else if call.id != id {
                    self.event.broken.get_or_insert(CallError::new(
                        ErrorKind::Protocol,
                        format!(
                            "tool call {index} changed its id from {} to {} mid-stream: one call's name and arguments belong to one id",
                            excerpt(&call.id, 80),
                            excerpt(id, 80)
                        ),
                    ));
                    return;
                }
            }
            if let Some(n) = name {
                call.name.push_str(n);
            }
            call.arguments.push_str(arguments);
        }
        // A tool call is the answer: its pieces are tokens of it.
        self.event.content = true;
        self.event.visible |= bytes > 0;
        self.event.bytes += bytes;
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

    fn reported(&mut self, what: Reported, field: &'static str, n: u64) {
        if n > u64::from(u32::MAX) {
            self.event.broken.get_or_insert(CallError::new(
                ErrorKind::Protocol,
                format!("{field} = {n} is implausible: more than 2^32 tokens in a request"),
            ));
            return;
        }
        let r = &mut self.server_report;
        let slot = match what {
            Reported::CachedTokens => &mut r.cached_tokens,
            Reported::ReasoningTokens => &mut r.reasoning_tokens,
            Reported::Retractions => &mut r.retractions,
            Reported::ImageTokens => &mut r.image_tokens,
        };
        *slot = Some(n);
    }

    fn spec_accept_length(&mut self, field: &'static str, length: f64) {
        if length.is_finite() {
            self.server_report.spec_accept_length = Some(length);
        } else {
            self.event.broken.get_or_insert(CallError::new(
                ErrorKind::Protocol,
                format!("{field} = {length} is implausible: not a length"),
            ));
        }
    }

    fn end(&mut self) {
        self.done = true;
    }

    fn output_ids(&mut self, field: &'static str, n: u64) {
        let listed = match (self.ids_own(), self.listed_ids) {
            (true, before) => before.unwrap_or(0).saturating_add(n),
            (false, Some(before)) if n < before => {
                self.event.broken.get_or_insert(CallError::new(
                    ErrorKind::Protocol,
                    format!(
                        "`{field}` listed {before} token ids, then {n}: a cumulative list shrank"
                    ),
                ));
                return;
            }
            (false, _) => n,
        };
        self.listed_ids = Some(listed);
        self.event.ids = true;
    }
}

impl StreamReader {
    /// Whether each event lists only its own token ids: the dialect's
    /// way, or `/generate`'s where its text comes in segments.
    fn ids_own(&self) -> bool {
        self.dialect.ids_own() || self.text_mode == TextMode::Segments
    }

    pub(super) fn event(
        &mut self,
        data: &[u8],
        is_error_event: bool,
        now: Duration,
    ) -> Result<(), CallError> {
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
    pub(super) fn later_bytes(&mut self, now: Duration) {
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
        // A count the same event listed no ids for has no witness: the
        // last one's, where the list is cumulative; any that rose, where
        // each event lists its own (vLLM's first chat chunk counts 0 and
        // lists none).
        if let Some(n) = said.completion {
            let gap = !said.ids;
            self.ids_gap = if self.ids_own() {
                self.ids_gap || (gap && n > self.reported.unwrap_or(0))
            } else {
                gap
            };
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
}
