//! A response read off a pooled connection: its head, then its body
//! de-chunked in place, each piece with the kernel's stamp of its arrival.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

use super::{MAX_ERROR_BODY, MAX_HEAD, Pool};
use crate::client::body::{ContentHeaders, Decoder, Framing};
use crate::client::error::{CallError, ErrorKind, excerpt};
use crate::stamp;

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
    pub content: ContentHeaders,
    body: Decoder,
    pub(super) keep_alive: bool,
    eof: bool,
}

fn transport(e: &std::io::Error) -> CallError {
    CallError::new(ErrorKind::Transport, e.to_string())
}

impl Response {
    /// Writes `request` on `conn` (whose bytes were last read at `read`)
    /// and reads the response's head.
    pub(super) async fn exchange(
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
            content: ContentHeaders::default(),
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
                        response.content = ContentHeaders {
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
