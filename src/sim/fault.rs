//! Faults the simulator can play, for the fault-matrix tests: a profile's
//! `fault:` (or `servegate sim --fault`) breaks every generation request the
//! same way.

use std::fmt;
use std::str::FromStr;

/// One way a serving engine goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// HTTP 500 with a JSON error body.
    Http500,
    /// HTTP 503 (overloaded, loading).
    Http503,
    /// HTTP 429 with `retry-after`.
    Http429,
    /// Accept the request, never send a byte.
    HangBeforeFirstByte,
    /// Send the headers after three seconds.
    SlowHeaders,
    /// Three tokens, then nothing, the connection open.
    StallMidStream,
    /// Three tokens, then the connection drops (a crashed decode).
    DisconnectMidStream,
    /// Three tokens, then `{"error": …}` under HTTP 200, as SGLang reports
    /// a failure mid-stream.
    ErrorInStream,
    /// An event whose data is not JSON at all.
    MalformedSse,
    /// An event whose JSON is cut off.
    MalformedJson,
    /// Bytes that are not UTF-8 inside a chunk.
    InvalidUtf8,
    /// Tokens forever, `max_tokens` ignored.
    Endless,
    /// One event of 100 MB.
    Huge,
}

/// Every fault, by name.
pub const ALL: [(&str, Fault); 13] = [
    ("http_500", Fault::Http500),
    ("http_503", Fault::Http503),
    ("http_429", Fault::Http429),
    ("hang_before_first_byte", Fault::HangBeforeFirstByte),
    ("slow_headers", Fault::SlowHeaders),
    ("stall_mid_stream", Fault::StallMidStream),
    ("disconnect_mid_stream", Fault::DisconnectMidStream),
    ("error_in_stream", Fault::ErrorInStream),
    ("malformed_sse", Fault::MalformedSse),
    ("malformed_json", Fault::MalformedJson),
    ("invalid_utf8", Fault::InvalidUtf8),
    ("endless", Fault::Endless),
    ("huge", Fault::Huge),
];

impl FromStr for Fault {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ALL.iter()
            .find(|(n, _)| *n == s)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                format!(
                    "unknown fault `{s}` (known: {})",
                    ALL.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                )
            })
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = ALL.iter().find(|(_, x)| x == self).map_or("?", |(n, _)| n);
        f.write_str(name)
    }
}

impl Fault {
    /// The HTTP status this fault answers with instead of a stream.
    pub fn status(self) -> Option<u16> {
        match self {
            Fault::Http500 => Some(500),
            Fault::Http503 => Some(503),
            Fault::Http429 => Some(429),
            _ => None,
        }
    }

    /// Whether the fault strikes after the first tokens of a stream.
    pub(crate) fn mid_stream(self) -> bool {
        matches!(
            self,
            Fault::StallMidStream
                | Fault::DisconnectMidStream
                | Fault::ErrorInStream
                | Fault::MalformedSse
                | Fault::MalformedJson
                | Fault::InvalidUtf8
                | Fault::Huge
        )
    }

    /// The bytes that break the stream after its first tokens (`None`:
    /// the fault is not one event).
    pub fn event(self) -> Option<Vec<u8>> {
        Some(match self {
            Fault::ErrorInStream => {
                b"data: {\"error\": {\"message\": \"simulated in-stream error: NaN in logits\", \"type\": \"InternalServerError\", \"code\": 500}}\n\n".to_vec()
            }
            Fault::MalformedSse => b"data: <html>502 Bad Gateway</html>\n\n".to_vec(),
            Fault::MalformedJson => b"data: {\"choices\": [{\"delta\": {\"content\": \"x\"\n\n".to_vec(),
            Fault::InvalidUtf8 => {
                let mut e = b"data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"".to_vec();
                e.extend_from_slice(&[0xff, 0xfe, 0xfd]);
                e.extend_from_slice(b"\"}}]}\n\n");
                e
            }
            _ => return None,
        })
    }
}
