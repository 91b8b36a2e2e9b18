//! Typed failures of one call, each keeping what came back so far.

use std::fmt;
use std::time::Duration;

use crate::units::format_duration;

/// Which deadline expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// `timeouts.connect`
    Connect,
    /// `timeouts.first_token`
    FirstToken,
    /// `timeouts.idle`
    Idle,
    /// `timeouts.total`
    Total,
}

impl Deadline {
    /// The deadline's name in a suite (`timeouts.idle` → `idle`).
    pub fn name(self) -> &'static str {
        match self {
            Deadline::Connect => "connect",
            Deadline::FirstToken => "first_token",
            Deadline::Idle => "idle",
            Deadline::Total => "total",
        }
    }
}

/// The class of a failed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The server could not be reached.
    Connect,
    /// A deadline expired.
    Timeout(Deadline, Duration),
    /// A non-2xx status.
    Http(u16),
    /// An `error` object inside a 200 stream.
    InStream,
    /// Bytes that are not the protocol (bad JSON, invalid UTF-8, bad SSE).
    Protocol,
    /// The connection broke mid-response.
    Transport,
    /// More than servegate reads of one answer or document (the server
    /// would not stop sending).
    Oversize,
    /// The server ended the request itself: a finish reason its dialect
    /// documents as an error (SGLang's `abort` for a retracted, cancelled
    /// or failed request), with the server's words.
    Aborted,
    /// Asked for exactly `asked` tokens (`ignore_eos`), the stream ended
    /// complete with `got`: a server that does not honour `ignore_eos` (or
    /// stops early) would otherwise inflate every per-token figure.
    Short {
        /// Tokens asked (`max_tokens` with `ignore_eos`).
        asked: u64,
        /// Tokens the server counted (or the client, without a count).
        got: u64,
    },
}

/// A failed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    /// What went wrong, by class.
    pub kind: ErrorKind,
    /// Details: the server's message, the body excerpt, the I/O error.
    pub detail: String,
    /// Text received before the failure (content and reasoning).
    pub partial: String,
}

impl CallError {
    /// Whether the client gave up on the request at a deadline after it
    /// reached the server (any deadline but the connect's).
    pub fn abandoned(&self) -> bool {
        matches!(self.kind, ErrorKind::Timeout(d, _) if d != Deadline::Connect)
    }

    /// An error without partial output.
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            partial: String::new(),
        }
    }

    /// A short name of the class, for counting errors by class.
    pub fn class(&self) -> &'static str {
        match self.kind {
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout(..) => "timeout",
            ErrorKind::Http(_) => "http",
            ErrorKind::InStream => "in-stream error",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Transport => "transport",
            ErrorKind::Oversize => "oversize",
            ErrorKind::Aborted => "aborted",
            ErrorKind::Short { .. } => "short",
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The detail is often the server's own words: one line, escaped.
        let detail = crate::text::printable(&self.detail);
        match &self.kind {
            ErrorKind::Connect => write!(f, "could not connect: {detail}")?,
            ErrorKind::Timeout(which, after) => {
                let what = match which {
                    Deadline::Connect => "connect timeout",
                    Deadline::FirstToken => "no token before the first_token deadline",
                    Deadline::Idle => "stream stalled longer than the idle deadline",
                    Deadline::Total => "request exceeded the total deadline",
                };
                write!(f, "{what} ({})", format_duration(*after))?;
                if !self.detail.is_empty() {
                    write!(f, ": {detail}")?;
                }
            }
            ErrorKind::Http(status) => write!(f, "HTTP {status}: {detail}")?,
            ErrorKind::InStream => write!(f, "error in stream: {detail}")?,
            ErrorKind::Protocol => write!(f, "malformed response: {detail}")?,
            ErrorKind::Transport => write!(f, "connection broken: {detail}")?,
            ErrorKind::Oversize => write!(f, "{detail}")?,
            ErrorKind::Aborted => write!(f, "the server aborted the request: {detail}")?,
            ErrorKind::Short { asked, got } => write!(
                f,
                "short answer: {got} of the {asked} tokens asked with ignore_eos (the server stopped early or ignores ignore_eos){}{detail}",
                if self.detail.is_empty() { "" } else { "; " }
            )?,
        }
        if !self.partial.is_empty() {
            write!(
                f,
                "\n  received before the failure: {}",
                excerpt(&self.partial, 300)
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for CallError {}

/// At most `max` characters of `text`, secrets hidden before it is cut,
/// quoted, with an ellipsis when cut.
pub fn excerpt(text: &str, max: usize) -> String {
    match crate::secrets::cut(text, max) {
        (shown, None) => format!("{shown:?}"),
        (cut, Some(count)) => format!("{cut:?}… ({count} chars in all)"),
    }
}

/// The error and its causes on one line ("error sending request: connection refused").
pub fn source_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        cur = s.source();
    }
    text
}
