//! What a response's headers say its body is, and what a failed answer
//! says went wrong.

use crate::client::api::OpenAiChunk;
pub use crate::client::body::ContentHeaders;
use crate::client::error::{CallError, ErrorKind, excerpt};

impl ContentHeaders {
    pub(super) fn of(headers: &reqwest::header::HeaderMap) -> Self {
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
    pub(super) fn failure(&self, status: u16, body: &str) -> CallError {
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
    pub(super) fn readable(&self, status: u16) -> Result<(), CallError> {
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
    pub(super) fn not_event_stream(&self) -> Option<&str> {
        self.content_type.as_deref().filter(|t| {
            !t.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case(EVENT_STREAM))
        })
    }
}

/// The media type of a streamed answer.
pub(super) const EVENT_STREAM: &str = "text/event-stream";

/// The error message of a JSON error body, if it is one.
fn error_message_of(text: &str) -> Option<String> {
    serde_json::from_str::<OpenAiChunk<'_>>(text)
        .ok()
        .and_then(|b| b.error_message())
}
