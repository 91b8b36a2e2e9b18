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

use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

use super::body::{Decoder, Framing};
use super::error::{CallError, Deadline, ErrorKind, excerpt};
use crate::stamp;

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

/// Why no response head arrived.
#[derive(Debug)]
pub enum HeadError {
    /// The connection was closed before a byte came back.
    Stale,
    /// The head deadline passed.
    Deadline,
    /// The response's head had reached this host before the request was
    /// written: bytes the server sent unasked (counted by the pool).
    Early,
    /// Anything else.
    Call(CallError),
}

/// A response being read.
#[derive(Debug)]
pub struct Response {
    conn: TcpStream,
    /// Initialised once: reads go into `buf[filled..]`.
    buf: Vec<u8>,
    filled: usize,
    pos: usize,
    /// When the bytes of the latest read reached this host.
    arrived: std::time::Instant,
    /// Since when the bytes of the latest read can have waited.
    since: std::time::Instant,
    /// When the latest read that emptied the socket returned.
    emptied: std::time::Instant,
    /// How long opening its connection took, when it opened one.
    pub connect: Option<std::time::Duration>,
    /// Of it, the time until the thread's last wake from sleep (see
    /// `Timing::connected`).
    pub connected: Option<std::time::Duration>,
    /// When the request's last byte was handed to the kernel.
    pub written: std::time::Instant,
    /// The status code.
    pub status: u16,
    /// The `Content-Type` and `Content-Encoding` headers, when present.
    pub content: super::stream::ContentHeaders,
    body: Decoder,
    keep_alive: bool,
    eof: bool,
}

fn transport(e: &std::io::Error) -> CallError {
    CallError::new(ErrorKind::Transport, e.to_string())
}

impl Response {
    /// Writes `request` on `conn` (whose bytes were last read at `read`)
    /// and reads the response's head.
    async fn exchange(
        mut conn: TcpStream,
        read: std::time::Instant,
        request: &[u8],
        deadline: Instant,
    ) -> Result<Self, HeadError> {
        let writing = std::time::Instant::now();
        match timeout_at(deadline, conn.write_all(request)).await {
            Err(_) => return Err(HeadError::Deadline),
            Ok(Err(_)) => return Err(HeadError::Stale),
            Ok(Ok(())) => {}
        }
        let written = std::time::Instant::now();
        let mut response = Self {
            conn,
            connect: None,
            connected: None,
            written,
            buf: vec![0; 16 * 1024],
            filled: 0,
            pos: 0,
            // Bytes may have come since the last read: the kernel's stamp
            // says when, which tells an answer from bytes sent before the
            // question.
            arrived: read,
            since: writing,
            emptied: writing,
            status: 0,
            content: super::stream::ContentHeaders::default(),
            body: Decoder::new(Framing::UntilClose),
            keep_alive: false,
            eof: false,
        };
        loop {
            let n = match timeout_at(deadline, response.read()).await {
                Err(_) => return Err(HeadError::Deadline),
                Ok(Err(_)) if response.filled == 0 => return Err(HeadError::Stale),
                Ok(Err(e)) => return Err(HeadError::Call(e)),
                Ok(Ok(n)) => n,
            };
            if n == 0 {
                return Err(if response.filled == 0 {
                    HeadError::Stale
                } else {
                    HeadError::Call(CallError::new(
                        ErrorKind::Transport,
                        "connection closed inside the response head",
                    ))
                });
            }
            // A read may hold more than one head: parsed until one is
            // the response's or more bytes are needed.
            loop {
                let mut headers = [httparse::EMPTY_HEADER; 64];
                let mut head = httparse::Response::new(&mut headers);
                match head.parse(&response.buf[..response.filled]) {
                    // An informational answer (`100 Continue`, `103 Early
                    // Hints`) comes before the response: skipped.
                    Ok(httparse::Status::Complete(len))
                        if head
                            .code
                            .is_some_and(|c| (100..200).contains(&c) && c != 101) =>
                    {
                        response.buf.copy_within(len..response.filled, 0);
                        response.filled -= len;
                        if response.filled == 0 {
                            break;
                        }
                    }
                    // A protocol switch is no answer to a completion request,
                    // and its body would be read until the connection closed.
                    Ok(httparse::Status::Complete(_)) if head.code == Some(101) => {
                        return Err(HeadError::Call(CallError::new(
                            ErrorKind::Protocol,
                            "the server switched protocols (HTTP 101) instead of answering",
                        )));
                    }
                    // Stamped before the request began to go out: not its answer.
                    Ok(httparse::Status::Complete(_)) if response.arrived < writing => {
                        return Err(HeadError::Early);
                    }
                    Ok(httparse::Status::Complete(len)) => {
                        let header = |name: &str| {
                            head.headers
                                .iter()
                                .find(|h| h.name.eq_ignore_ascii_case(name))
                                .and_then(|h| std::str::from_utf8(h.value).ok())
                                .map(str::trim)
                        };
                        let chunked = header("transfer-encoding")
                            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
                        let length = header("content-length").and_then(|v| v.parse::<u64>().ok());
                        let close = header("connection")
                            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
                            || head.version == Some(0);
                        let framing = match (chunked, length) {
                            (true, _) => Framing::Chunked,
                            (false, Some(n)) => Framing::Length(n),
                            (false, None) => Framing::UntilClose,
                        };
                        response.status = head.code.unwrap_or(0);
                        response.content = super::stream::ContentHeaders {
                            content_type: header("content-type").map(str::to_owned),
                            content_encoding: header("content-encoding").map(str::to_owned),
                            location: header("location").map(str::to_owned),
                        };
                        response.pos = len;
                        response.body = Decoder::new(framing);
                        response.keep_alive = !close && framing != Framing::UntilClose;
                        // Answered: the request's bytes have all left, and
                        // the kernel dated their going.
                        response.written = stamp::sent(&response.conn, writing, response.written);
                        return Ok(response);
                    }
                    Ok(httparse::Status::Partial) if response.filled < MAX_HEAD => break,
                    Ok(httparse::Status::Partial) => {
                        return Err(HeadError::Call(CallError::new(
                            ErrorKind::Protocol,
                            "response head over 64 KiB",
                        )));
                    }
                    Err(e) => {
                        return Err(HeadError::Call(CallError::new(
                            ErrorKind::Protocol,
                            format!(
                                "not an HTTP response ({e}): {}",
                                excerpt(
                                    &String::from_utf8_lossy(&response.buf[..response.filled]),
                                    200
                                )
                            ),
                        )));
                    }
                }
            }
        }
    }

    /// Reads what the socket has after the buffered bytes, making room
    /// first; the count read, 0 at the end of the stream.
    async fn read(&mut self) -> Result<usize, CallError> {
        if self.pos == self.filled {
            self.filled = 0;
            self.pos = 0;
        } else if self.pos > 0 && self.buf.len() - self.filled < 4096 {
            self.buf.copy_within(self.pos..self.filled, 0);
            self.filled -= self.pos;
            self.pos = 0;
        }
        if self.buf.len() - self.filled < 4096 {
            // Only a head or a size line longer than the buffer gets here.
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let room = self.buf.len() - self.filled;
        let (n, at, began) = stamp::recv(&self.conn, &mut self.buf[self.filled..], self.arrived)
            .await
            .map_err(|e| transport(&e))?;
        self.filled += n;
        self.arrived = at;
        let thread_wake = stamp::woke();
        let woke = thread_wake.map_or(self.emptied, |w| w.max(self.emptied));
        // A wake dated after the bytes it read is no bound: the emptying
        // read alone is, and the thread's later wakes allow the kernel's
        // path from stamp to wake that much more.
        self.since = if woke <= at {
            woke
        } else {
            if let Some(w) = thread_wake.filter(|&w| w > at) {
                stamp::woke_late(w - at);
            }
            self.emptied
        };
        // A read that filled the buffer may have left older bytes behind.
        if n < room {
            self.emptied = began;
        }
        Ok(n)
    }

    /// Reads more bytes from the socket; `false` at end of stream.
    async fn fill(&mut self) -> Result<bool, CallError> {
        let n = self.read().await?;
        self.eof = n == 0;
        Ok(n > 0)
    }

    /// The next piece of the body and when it reached this host; `Ok(None)`
    /// when the body is complete. Waits for the socket: the caller bounds it
    /// with its deadlines.
    pub async fn next(&mut self) -> Result<Option<(&[u8], stamp::Arrival)>, CallError> {
        loop {
            if let Some(range) = self.step()? {
                let arrival = stamp::Arrival {
                    at: self.arrived,
                    since: self.since.min(self.arrived),
                };
                return Ok(Some((&self.buf[range.0..range.1], arrival)));
            }
            if self.done() {
                return Ok(None);
            }
            if !self.fill().await? {
                return match self.body.framing() {
                    Framing::UntilClose => Ok(None),
                    _ => Err(CallError::new(
                        ErrorKind::Transport,
                        "the server closed the connection",
                    )),
                };
            }
        }
    }

    fn done(&self) -> bool {
        self.body.done(self.eof)
    }

    /// Whether the body ends only when the server closes the connection
    /// (neither chunked nor of a stated length).
    pub fn ends_with_connection(&self) -> bool {
        self.body.framing() == Framing::UntilClose
    }

    /// Decodes what is buffered: the range of the next body bytes, if any.
    fn step(&mut self) -> Result<Option<(usize, usize)>, CallError> {
        let r = self
            .body
            .step(&self.buf[..self.filled], &mut self.pos)
            .map_err(|e| CallError::new(ErrorKind::Protocol, e.to_string()))?;
        Ok(r.map(|r| (r.start, r.end)))
    }

    /// Reads the rest of an error body (bounded), as text.
    pub async fn text(&mut self, deadline: Instant) -> String {
        let mut out = Vec::new();
        while out.len() < MAX_ERROR_BODY {
            match timeout_at(deadline, self.next()).await {
                Ok(Ok(Some((piece, _)))) => out.extend_from_slice(piece),
                _ => break,
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Finishes the response: a connection whose body is read to its end
    /// goes back to the pool — at once when the rest of the body (the
    /// chunked terminator after `[DONE]`) is already buffered, so that the
    /// caller's next request finds it; a tail still to come is drained in
    /// the background, so the caller does not wait and the connection is
    /// not lost. Any other connection is closed.
    pub fn release(mut self, pool: &Pool) {
        if !self.keep_alive {
            return;
        }
        while !self.done() {
            match self.step() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => return,
            }
        }
        if self.done() {
            self.give_back_clean(pool);
            return;
        }
        let pool = pool.clone();
        tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                match timeout_at(deadline, self.next()).await {
                    Ok(Ok(Some(_))) => {}
                    Ok(Ok(None)) => break,
                    _ => return,
                }
            }
            self.give_back_clean(&pool);
        });
    }

    /// Pools the connection of a complete body, unless bytes came after
    /// the body's end (counted as unsolicited, and the connection closed).
    fn give_back_clean(self, pool: &Pool) {
        if self.pos == self.filled {
            pool.give_back(self.conn, self.arrived);
        } else {
            pool.unsolicited.fetch_add(1, Ordering::Relaxed);
        }
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
