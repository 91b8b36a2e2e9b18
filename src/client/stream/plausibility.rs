//! Whether what a server reported can be true of the stream it sent: its
//! token counts against the bytes and events that carried them, its own
//! timings against the arrivals.

use std::time::Duration;

use super::reader::StreamReader;
use crate::client::dialect::ServerTimings;
use crate::client::error::{CallError, ErrorKind};

/// Completion tokens a stream may be counted beyond what its text and
/// events bear out: an end-of-sequence token and a reasoning model's think
/// markers print nothing.
const UNPRINTED_TOKENS: u64 = 4;

/// Completion tokens a tool call may be counted beyond the text its
/// events carried: a tool-call parser strips the call's framing from what
/// it streams. SGLang 0.5.23's `qwen` parser sends the name and the
/// arguments of `<tool_call>\n{"name": "get_weather", "arguments":
/// {"city": "Paris"}}\n</tool_call>` and not the rest: 43 tokens counted
/// for 28 bytes in 4 events, with the `SmolLM2` tokenizer; other formats frame
/// a call with a few special tokens. Granted to at most
/// [`FRAMED_CALLS`] calls of an answer, so that a server cannot buy
/// room for forged counts with calls.
const TOOL_CALL_FRAMING_TOKENS: u64 = 32;

/// The calls of one answer granted [`TOOL_CALL_FRAMING_TOKENS`].
pub(super) const FRAMED_CALLS: u64 = 4;

/// Prompt tokens a request can be charged beyond one per byte sent (chat
/// templates add tokens the request does not carry).
pub(super) const PROMPT_SLACK: u64 = 65_536;

impl StreamReader {
    /// `Err` when a token count the server reported cannot be true: beyond
    /// 2^32 per request, or more tokens than the bytes that carried them
    /// (`slack` more for a prompt).
    pub(super) fn plausible(
        field: &str,
        n: u64,
        carried_by: u64,
        slack: u64,
    ) -> Result<(), CallError> {
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
    /// model's think markers), and [`TOOL_CALL_FRAMING_TOKENS`] for each
    /// tool call that named its function, where the request offered tools
    /// (of the first [`FRAMED_CALLS`]). Gates that ask for `ignore_eos` also ask
    /// `skip_special_tokens: false`, so a model that samples its
    /// end-of-sequence token again and again prints it.
    pub(super) fn evidenced(&self, counted: u64) -> Result<(), CallError> {
        let text = (self.content_len as u64)
            .saturating_add(self.reasoning_len as u64)
            .saturating_add(self.tool_len as u64);
        // Framing is granted only to calls that named a function, of a
        // request that offered tools: an empty delta at some index buys
        // nothing.
        let named = u64::from(self.named_calls.count_ones());
        let calls = named.min(self.framed_calls);
        let bound = text
            .saturating_add(self.token_events)
            .saturating_add(self.stop_bytes)
            .saturating_add(UNPRINTED_TOKENS)
            .saturating_add(calls * TOOL_CALL_FRAMING_TOKENS);
        if counted > bound {
            let (stops, per_stop) = if self.stop_bytes > 0 {
                (
                    format!(" and {} bytes of stop sequences", self.stop_bytes),
                    ", one per stop byte",
                )
            } else {
                (String::new(), "")
            };
            let (calls, per_call) = if calls > 0 {
                (
                    format!(" and {named} tool call(s)"),
                    format!(
                        ", {TOOL_CALL_FRAMING_TOKENS} per tool call for its framing (at most {FRAMED_CALLS} calls)"
                    ),
                )
            } else {
                (String::new(), String::new())
            };
            return Err(CallError::new(
                ErrorKind::Protocol,
                format!(
                    "the server counts {counted} completion tokens, but the stream carried {text} bytes of text in {} events{stops}{calls}: at most {bound} tokens can have been sent (one per byte of text, one unprinted per event{per_stop}{per_call}, {UNPRINTED_TOKENS} more) — a count the stream does not bear out",
                    self.token_events,
                ),
            ));
        }
        Ok(())
    }

    /// `Err` when the server lists a different number of token ids than it
    /// counts: SGLang's `/generate` sends both (`output_ids`, the ids
    /// themselves; `meta_info.completion_tokens`), from one list, equal in
    /// every stream of SGLang 0.5.23 (the end token and a stop string's
    /// tokens in both); so do its completions and vLLM 0.32's chat and
    /// completions when asked (`return_token_ids`: each chunk's
    /// `token_ids`; usage). A server that forges its count must forge the
    /// ids as well; where a dialect lists none, or the count's event listed
    /// none, nothing is checked. `Ok(true)`: the ids bear the count out.
    pub(super) fn witnessed(&self, counted: u64) -> Result<bool, CallError> {
        match self.listed_ids {
            Some(listed) if listed != counted && !self.ids_gap => Err(CallError::new(
                ErrorKind::Protocol,
                format!(
                    "the server counts {counted} completion tokens, but lists {listed} token ids (`{}`): its two accounts of one request disagree",
                    if self.dialect.ids_own() {
                        "choices[].token_ids"
                    } else {
                        "output_ids"
                    }
                ),
            )),
            Some(_) => Ok(!self.ids_gap),
            None => Ok(false),
        }
    }

    /// `Err` when what the server reported beside its counts cannot be
    /// true of the request: more prompt tokens cached than it had, more
    /// reasoning tokens than it generated, a speculative step of fewer than
    /// one token or more than it generated. A server that forges a cache
    /// hit or an acceptance length would make a gate on it pass.
    pub(super) fn check_report(&self, completion: u64) -> Result<(), CallError> {
        let r = &self.server_report;
        let wrong = |what: String| Err(CallError::new(ErrorKind::Protocol, what));
        let prompt = self.usage.and_then(|u| u.prompt_tokens);
        if let (Some(cached), Some(prompt)) = (r.cached_tokens, prompt)
            && cached > prompt
        {
            return wrong(format!(
                "the server reports {cached} cached prompt tokens of a {prompt}-token prompt: a cache hit it cannot have had"
            ));
        }
        if let Some(reasoning) = r.reasoning_tokens
            && reasoning > completion
        {
            return wrong(format!(
                "the server reports {reasoning} reasoning tokens of {completion} generated"
            ));
        }
        #[expect(clippy::cast_precision_loss, reason = "token counts are small")]
        if let Some(length) = r.spec_accept_length
            && completion > 0
            && !(1.0..=completion as f64).contains(&length)
        {
            return wrong(format!(
                "the server reports a speculative accept length of {length} tokens per verify step for {completion} tokens generated: each step yields at least 1 and at most all of them"
            ));
        }
        Ok(())
    }

    /// `Err` when the server's own timings cannot be true of this stream:
    /// not finite or negative; more time before its first token (llama.cpp's
    /// prompt, SGLang's `first_token_latency`) than passed before the first
    /// token reached the client, or on the whole request than it lasted
    /// (the server cannot have worked longer than it was asked); less
    /// decode time than half the spread of the tokens' arrivals (delivery
    /// can bunch tokens a server spread out, by the transit of the first
    /// and last of them, but not spread tokens it produced at once); a
    /// queue longer than the time to the first token. Each bound allows
    /// 10 ms and 10% for clocks and transit.
    pub(super) fn check_timings(&self) -> Result<(), CallError> {
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
        let wrong = |(field, v, _): Said, why: String| {
            // 1e-300 as written, not as 301 digits.
            let shown = if v == 0.0 || (1e-3..1e9).contains(&v.abs()) {
                format!("{v}")
            } else {
                format!("{v:e}")
            };
            Err(CallError::new(
                ErrorKind::Protocol,
                format!("{field} = {shown} is implausible: {why}"),
            ))
        };
        let said = Timings::of(t);
        for d in said.durations.iter().flatten() {
            if !d.1.is_finite() || d.1 < 0.0 {
                return wrong(*d, "not a duration".into());
            }
        }
        if let Some(rate) = said.rate
            && (!rate.1.is_finite() || rate.1 < 0.0)
        {
            return wrong(rate, "not a rate".into());
        }
        if let Some(f) = said.first
            && f.2 > slack(first)
        {
            return wrong(
                f,
                format!("the first token reached the client {first:.1} ms after the request"),
            );
        }
        if let Some(w) = said.whole
            && w.2 > slack(e2e)
        {
            return wrong(w, format!("the whole request lasted {e2e:.1} ms"));
        }
        if let Some(d) = said.decode
            && d.2 < spread / 2.0 - 10.0
        {
            return wrong(
                d,
                format!("the tokens' arrivals were spread over {spread:.1} ms"),
            );
        }
        if let (Some(q), Some(f)) = (said.queue, said.first.or(said.whole))
            && q.2 > slack(f.2)
        {
            return wrong(q, format!("the server's own {} was {:.1} ms", f.0, f.2));
        }
        Ok(())
    }
}

/// A figure of the server's timings: the field as the server names it, the
/// value it sent, and what it says in milliseconds.
type Said = (&'static str, f64, f64);

/// What a server's timings say, each checkable against the stream: the
/// time before its first token, the whole request, the decode after the
/// first token, the queue; every duration it sent, and a rate.
struct Timings {
    durations: [Option<Said>; 3],
    rate: Option<Said>,
    first: Option<Said>,
    whole: Option<Said>,
    decode: Option<Said>,
    queue: Option<Said>,
}

impl Timings {
    fn of(t: ServerTimings) -> Self {
        match t {
            ServerTimings::LlamaCpp {
                prompt_ms,
                predicted_ms,
                ..
            } => {
                let prompt = ("timings.prompt_ms", prompt_ms, prompt_ms);
                let predicted = ("timings.predicted_ms", predicted_ms, predicted_ms);
                Timings {
                    durations: [Some(prompt), Some(predicted), None],
                    rate: None,
                    first: Some(prompt),
                    // The prompt's time and the generation's, together.
                    whole: Some((
                        "timings.predicted_ms",
                        predicted_ms,
                        prompt_ms + predicted_ms,
                    )),
                    decode: Some(predicted),
                    queue: None,
                }
            }
            ServerTimings::Sglang {
                e2e_s,
                ttft_s,
                queue_s,
                decode_tok_s,
            } => {
                let secs = |field, v: f64| (field, v, v * 1000.0);
                let whole = secs("meta_info.e2e_latency", e2e_s);
                let first = ttft_s.map(|v| secs("meta_info.first_token_latency", v));
                let queue = queue_s.map(|v| secs("meta_info.queue_time", v));
                Timings {
                    durations: [Some(whole), first, queue],
                    rate: decode_tok_s.map(|v| ("meta_info.decode_throughput", v, v)),
                    first,
                    whole: Some(whole),
                    // After the first token: the whole less the time to it.
                    decode: first.map(|f| ("meta_info.e2e_latency", e2e_s, whole.2 - f.2)),
                    queue,
                }
            }
        }
    }
}
