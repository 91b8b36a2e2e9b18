//! A response body read piece by piece from either transport, every
//! deadline of the call enforced.

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;

use super::reader::StreamReader;
use crate::client::error::{CallError, Deadline, ErrorKind};
use crate::client::raw;
use crate::stamp::Arrival;
use crate::suite::Timeouts;

/// The deadlines of one call.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadlines {
    pub(super) t: Timeouts,
    pub(super) total_at: tokio::time::Instant,
    pub(super) first_at: tokio::time::Instant,
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
pub(super) trait BodySource {
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
pub(super) struct ReqwestBody<S> {
    pub(super) stream: S,
    pub(super) current: bytes::Bytes,
    pub(super) last: Instant,
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
pub(super) async fn read_body<B: BodySource>(
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
