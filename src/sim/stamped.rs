//! The truth for a client's timing error: a bare HTTP/1.1 streamer that
//! writes each token with its own send time, taken right before the write
//! syscall, with no HTTP framework between the stamp and the socket; the
//! first token also carries when the request's last bytes reached this
//! host (the kernel's receive stamp) and when the streamer had read it,
//! the start of a server's own TTFT (`<arrived>:<read>:<sent> `, each in
//! microseconds since the epoch). With `pack` above one it writes the
//! tokens after the first that many at once, every `pack × itl`, the way a
//! loaded server's events reach its socket together: each carries the
//! write's stamp. Any other request than a POST (a gate's `GET /metrics`)
//! gets an empty 404: the streamer has nothing else to serve.
//! (`servegate sim --stamp-tokens [--pack-tokens N]`, used by
//! `servegate bench-client`.)

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, sleep_until};

use super::RunningSim;
use crate::stamp;

/// The pace of a stamped stream.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Before the first write.
    pub ttft: Duration,
    /// Between tokens.
    pub itl: Duration,
    /// Tokens per write (at least one).
    pub pack: u32,
}

/// Serves stamped streams on `listener` until the handle is dropped.
pub fn spawn(listener: TcpListener, pace: Pace) -> std::io::Result<RunningSim> {
    let addr: SocketAddr = listener.local_addr()?;
    let pace = Pace {
        pack: pace.pack.max(1),
        ..pace
    };
    let task = tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let _ = sock.set_nodelay(true);
            stamp::enable(&sock);
            tokio::spawn(connection(sock, pace));
        }
    });
    Ok(RunningSim { addr, task })
}

/// Largest request body read.
const MAX_BODY: usize = 1 << 20;

/// Reads what the socket has onto `buf`; `arrived` becomes when those
/// bytes reached this host. `None` at the end of the stream.
async fn read_more(sock: &TcpStream, buf: &mut Vec<u8>, arrived: &mut Instant) -> Option<()> {
    let len = buf.len();
    buf.resize(len + 16 * 1024, 0);
    match stamp::recv(sock, &mut buf[len..], arrived.into_std()).await {
        Ok((n, at, _)) if n > 0 => {
            buf.truncate(len + n);
            *arrived = Instant::from_std(at);
            Some(())
        }
        _ => {
            buf.truncate(len);
            None
        }
    }
}

/// What a request asks for.
enum Asked {
    /// A stream of this many tokens (a POST's `max_tokens`, default 64).
    Tokens(u64),
    /// Anything else (a `GET /metrics` scrape): the streamer has nothing
    /// but streams, and says so at once.
    Other,
}

/// Reads one request, or `None` at the end; `arrived` becomes when its
/// last bytes reached this host.
async fn request(sock: &TcpStream, buf: &mut Vec<u8>, arrived: &mut Instant) -> Option<Asked> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            // A server ignores empty lines before a request (RFC 9112 §2.2).
            let post = head.trim_start().starts_with("post ");
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            // A request body is a few hundred bytes; a larger claim ends
            // the connection rather than the memory.
            if len > MAX_BODY {
                return None;
            }
            while buf.len() < end + 4 + len {
                read_more(sock, buf, arrived).await?;
            }
            let asked = if post {
                let body: serde_json::Value =
                    serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap_or_default();
                Asked::Tokens(
                    body.get("max_tokens")
                        .and_then(serde_json::Value::as_u64)
                        .unwrap_or(64),
                )
            } else {
                Asked::Other
            };
            buf.drain(..end + 4 + len);
            return Some(asked);
        }
        if buf.len() > MAX_BODY {
            return None;
        }
        read_more(sock, buf, arrived).await?;
    }
}

/// Now, in microseconds since the epoch.
fn micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

fn frame(data: &str) -> String {
    format!("{:x}\r\n{data}\r\n", data.len())
}

async fn connection(mut sock: TcpStream, pace: Pace) {
    let mut buf = Vec::new();
    // The floor of the first read's stamp: its bytes may have waited in
    // the kernel before the connection was accepted.
    let mut arrived = Instant::now()
        .checked_sub(Duration::from_secs(1))
        .unwrap_or_else(Instant::now);
    let mut out = String::new();
    while let Some(asked) = request(&sock, &mut buf, &mut arrived).await {
        let read = micros();
        let tokens = match asked {
            Asked::Tokens(n) => n,
            // Not a paced stream, whose every token the asker's CPU would
            // parse (a gate's scrapes before and after its window were
            // each a whole answer, counted in bench-client's CPU and
            // not in its tokens).
            Asked::Other => {
                let none = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
                if sock.write_all(none).await.is_err() {
                    return;
                }
                continue;
            }
        };
        let arrived = stamp::epoch_micros(arrived.into_std());
        let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        if sock.write_all(head).await.is_err() {
            return;
        }
        // The first token on its own, then `pack` at a time, each write
        // when its last token is due.
        let mut at = Instant::now() + pace.ttft;
        let mut i = 0;
        while i < tokens {
            let n = if i == 0 {
                1
            } else {
                u64::from(pace.pack).min(tokens - i)
            };
            if i > 0 {
                at += pace.itl * u32::try_from(n).unwrap_or(1);
            }
            sleep_until(at).await;
            let us = micros();
            out.clear();
            for j in i..i + n {
                let stamp = if j == 0 {
                    format!("{arrived}:{read}:{us}")
                } else {
                    us.to_string()
                };
                out.push_str(&frame(&format!(
                    "data: {{\"choices\":[{{\"delta\":{{\"content\":\"{stamp} \"}}}}]}}\n\n"
                )));
            }
            i += n;
            // Unconstrained: a write that found tokio's cooperative budget
            // spent would yield between its stamp and its bytes, behind
            // every other stream's turn, and the truth would carry the
            // simulator's own lag.
            if tokio::task::unconstrained(sock.write_all(out.as_bytes()))
                .await
                .is_err()
            {
                return;
            }
        }
        let tail = format!(
            "{}{}0\r\n\r\n",
            frame("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n"),
            frame("data: [DONE]\n\n")
        );
        if sock.write_all(tail.as_bytes()).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// Reads from `sock` onto `got` until it ends with `end` (a minute at
    /// most: a streamer out of step with its requests never gets there).
    async fn read_until(sock: &mut TcpStream, got: &mut Vec<u8>, end: &[u8]) {
        let mut chunk = [0u8; 4096];
        while !got.ends_with(end) {
            let n = tokio::time::timeout(Duration::from_secs(60), sock.read(&mut chunk))
                .await
                .unwrap_or_else(|_| panic!("no {end:?} after {:?}", String::from_utf8_lossy(got)))
                .expect("read");
            assert!(
                n > 0,
                "the streamer closed; got {:?}",
                String::from_utf8_lossy(got)
            );
            got.extend_from_slice(&chunk[..n]);
        }
    }

    /// A scrape (`GET /metrics`) is told there is nothing there, at once
    /// and without a token, and the connection then streams a POST's
    /// tokens: a gate's scrapes cost the asker one small answer each. A
    /// GET with a body is read whole, so a request sent right behind it
    /// (in the same write) is answered in turn.
    #[tokio::test]
    async fn a_request_other_than_a_post_gets_no_stream() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let sim = spawn(
            listener,
            Pace {
                ttft: Duration::ZERO,
                itl: Duration::ZERO,
                pack: 1,
            },
        )
        .expect("spawn");
        let mut sock = TcpStream::connect(sim.addr).await.expect("connect");
        let not_found = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        sock.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .expect("write");
        let mut got = Vec::new();
        read_until(&mut sock, &mut got, b"\r\n\r\n").await;
        assert_eq!(String::from_utf8_lossy(&got), not_found);
        let body = r#"{"max_tokens":2}"#;
        let both = format!(
            "GET /x HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello\
             POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        sock.write_all(both.as_bytes()).await.expect("write");
        got.clear();
        read_until(&mut sock, &mut got, b"0\r\n\r\n").await;
        let text = String::from_utf8_lossy(&got);
        let stream = text
            .strip_prefix(not_found)
            .unwrap_or_else(|| panic!("not a 404 first: {text}"));
        assert!(stream.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert_eq!(stream.matches("\"content\":\"").count(), 2, "{text}");
    }
}
