//! A minimal HTTP/1.1 transport for the streaming calls to `http://`
//! servers: one task reads the socket, de-chunks in place and hands the bytes
//! to the SSE parser, with keep-alive connections pooled per client. hyper
//! (through reqwest) moves every chunk from its connection task to the
//! caller's through a channel — two task wake-ups and a buffer per token —
//! which at hundreds of streams costs more than the token itself. `https://`
//! targets and the small administrative requests keep using reqwest.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

use super::error::{CallError, Deadline, ErrorKind};
use crate::stamp;

mod response;
pub use response::{HeadError, Response};

/// Where requests go: `host:port`, the `Host` header and a path prefix.
#[derive(Debug, Clone)]
pub struct Endpoint {
    authority: String,
    prefix: String,
}

impl Endpoint {
    /// The endpoint of an `http://` base URL; `None` for anything else.
    pub fn parse(base_url: &str) -> Option<Self> {
        let rest = base_url.strip_prefix("http://")?;
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains('@') {
            return None;
        }
        let authority = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        Some(Self {
            authority,
            prefix: prefix.to_owned(),
        })
    }
}

/// Idle keep-alive connections of one endpoint.
#[derive(Debug, Clone)]
pub struct Pool {
    endpoint: Endpoint,
    /// With when their last bytes were read.
    idle: Arc<Mutex<Vec<(TcpStream, std::time::Instant)>>>,
    /// Connections closed because the server had sent bytes on them that
    /// no request asked for; shared by every pool made `empty_like` this.
    unsolicited: Arc<AtomicU64>,
}

/// Most idle connections kept: more than a thread's streams will use (a
/// closed-loop worker's connection waits here between its requests, and
/// one turned away is opened again inside the window: at 4,096, a gate of
/// 10,000 streams reconnected 5,904 of them and their TTFT carried it).
/// The process's open-file limit bounds it first.
const MAX_IDLE: usize = 32_768;
/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Largest error body read.
const MAX_ERROR_BODY: usize = 64 * 1024;

impl Pool {
    /// A pool for an endpoint.
    pub fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            idle: Arc::default(),
            unsolicited: Arc::default(),
        }
    }

    /// A pool for the same endpoint with no connections of its own (and
    /// the same count of unsolicited bytes).
    #[must_use]
    pub fn empty_like(&self) -> Self {
        Self {
            idle: Arc::default(),
            ..self.clone()
        }
    }

    /// Connections closed so far because bytes no request asked for were
    /// waiting on them: a server bug (an extra response, or the next one
    /// sent early) that would otherwise be read as the next answer.
    pub fn unsolicited(&self) -> u64 {
        self.unsolicited.load(Ordering::Relaxed)
    }

    /// An idle connection with nothing waiting on it: one the server has
    /// closed is dropped, and so is one with bytes waiting (counted).
    fn take_idle(&self) -> Option<(TcpStream, std::time::Instant)> {
        loop {
            let (conn, read) = self.idle.lock().ok()?.pop()?;
            match waiting(&conn) {
                Waiting::Nothing => return Some((conn, read)),
                Waiting::Closed => {}
                Waiting::Bytes => {
                    self.unsolicited.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn give_back(&self, conn: TcpStream, read: std::time::Instant) {
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < MAX_IDLE
        {
            idle.push((conn, read));
        }
    }

    /// Opens connections, all at once, until `count` are idle (at most
    /// [`MAX_IDLE`]): a gate's window then starts with the connections its
    /// streams will use, and no request of it pays for a connect in its
    /// TTFT. How long each one opened took; one that fails to connect is
    /// left to the request that would have used it, which connects then
    /// (its `connect` is in its figures) or fails saying why.
    pub async fn fill(&self, count: usize, connect: Duration) -> Vec<Duration> {
        let have = self.idle.lock().map_or(count, |idle| idle.len());
        let want = count.min(MAX_IDLE).saturating_sub(have);
        let deadline = Instant::now() + connect;
        let opened = futures_util::future::join_all((0..want).map(|_| async {
            let opening = std::time::Instant::now();
            let conn = self.connect(connect, deadline).await.ok()?;
            Some((conn, opening.elapsed()))
        }))
        .await;
        opened
            .into_iter()
            .flatten()
            .map(|(conn, took)| {
                self.give_back(conn, std::time::Instant::now());
                took
            })
            .collect()
    }

    async fn connect(&self, connect: Duration, deadline: Instant) -> Result<TcpStream, CallError> {
        let by = deadline.min(Instant::now() + connect);
        let conn = timeout_at(by, TcpStream::connect(&self.endpoint.authority))
            .await
            .map_err(|_| {
                CallError::new(
                    ErrorKind::Timeout(Deadline::Connect, connect),
                    self.endpoint.authority.clone(),
                )
            })?
            .map_err(|e| {
                CallError::new(
                    ErrorKind::Connect,
                    format!("{}: {e}", self.endpoint.authority),
                )
            })?;
        // Tokens are tiny writes and reads: no Nagle.
        let _ = conn.set_nodelay(true);
        stamp::enable(&conn);
        stamp::enable_sends(&conn);
        Ok(conn)
    }

    /// Sends `POST path` and reads the response head. A pooled connection
    /// the server has closed meanwhile is replaced once. Without `reuse`
    /// the request goes out on a connection of its own, closed after it
    /// (`Connection: close`): nothing the server sent before the question
    /// can be taken for its answer.
    pub async fn post(
        &self,
        path: &str,
        body: &[u8],
        auth: Option<(&str, &str)>,
        connect: Duration,
        head_deadline: Instant,
        reuse: bool,
    ) -> Result<Response, HeadError> {
        let mut request = format!(
            "POST {}{path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: {}\r\n",
            self.endpoint.prefix,
            self.endpoint.authority,
            body.len()
        );
        if let Some((name, value)) = auth {
            request.push_str(name);
            request.push_str(": ");
            request.push_str(value);
            request.push_str("\r\n");
        }
        if !reuse {
            request.push_str("Connection: close\r\n");
        }
        request.push_str("\r\n");
        let mut bytes = request.into_bytes();
        bytes.extend_from_slice(body);
        if reuse && let Some((conn, read)) = self.take_idle() {
            match Response::exchange(conn, read, &bytes, head_deadline).await {
                Ok(r) => return Ok(r),
                // Closed while idle: nothing was processed; try a fresh one.
                Err(HeadError::Stale) => {}
                Err(HeadError::Early) => {
                    self.unsolicited.fetch_add(1, Ordering::Relaxed);
                    return Err(HeadError::Early);
                }
                Err(e) => return Err(e),
            }
        }
        let opening = std::time::Instant::now();
        let conn = self
            .connect(connect, head_deadline)
            .await
            .map_err(HeadError::Call)?;
        let opened = opening.elapsed();
        let connected = stamp::woke()
            .map_or(Duration::ZERO, |w| w.saturating_duration_since(opening))
            .min(opened);
        match Response::exchange(conn, opening, &bytes, head_deadline).await {
            Err(HeadError::Stale) => Err(HeadError::Call(CallError::new(
                ErrorKind::Transport,
                "the server closed the connection without a response",
            ))),
            Ok(mut r) => {
                r.connect = Some(opened);
                r.connected = Some(connected);
                r.keep_alive &= reuse;
                Ok(r)
            }
            other => other,
        }
    }
}

/// What waits on an idle connection.
#[derive(Debug, PartialEq, Eq)]
enum Waiting {
    Nothing,
    /// The server closed it (or it broke).
    Closed,
    /// Bytes no request asked for.
    Bytes,
}

/// Looks at an idle connection without reading from it: a non-blocking
/// `MSG_PEEK` of one byte, a system call of its own (tokio's readiness
/// would miss bytes its reactor has not polled yet).
#[cfg(unix)]
fn waiting(conn: &TcpStream) -> Waiting {
    use std::os::fd::AsRawFd as _;

    use nix::errno::Errno;
    use nix::sys::socket::{MsgFlags, recv};
    let mut byte = [0u8; 1];
    match recv(
        conn.as_raw_fd(),
        &mut byte,
        MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(0) => Waiting::Closed,
        Ok(_) => Waiting::Bytes,
        Err(Errno::EAGAIN | Errno::EINTR) => Waiting::Nothing,
        Err(_) => Waiting::Closed,
    }
}

/// Looks at an idle connection (readiness only, where there is no peek).
#[cfg(not(unix))]
fn waiting(conn: &TcpStream) -> Waiting {
    let mut byte = [0u8; 1];
    match conn.try_read(&mut byte) {
        Ok(0) => Waiting::Closed,
        Ok(_) => Waiting::Bytes,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Waiting::Nothing,
        Err(_) => Waiting::Closed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_of_base_urls() {
        let e = Endpoint::parse("http://127.0.0.1:30000").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.prefix.as_str()),
            ("127.0.0.1:30000", "")
        );
        let e = Endpoint::parse("http://gpu-7/sglang/").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.prefix.as_str()),
            ("gpu-7:80", "/sglang")
        );
        assert!(Endpoint::parse("https://x").is_none());
        assert!(Endpoint::parse("http://user@x").is_none());
    }
}
