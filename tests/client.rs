//! The streaming client against the in-process simulator and against
//! scripted misbehaving servers: content, reasoning, token counts, timing,
//! and every deadline and error class.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use servegate::client::dialect::ServerTimings;
use servegate::client::{CallRequest, Client, Deadline, ErrorKind, TokenSource};
use servegate::sim::{self, Profile, RunningSim};
use servegate::suite::{Api, Input, Sampling, Timeouts};

fn timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(2),
        first_token: Duration::from_secs(5),
        idle: Duration::from_secs(5),
        total: Duration::from_secs(20),
    }
}

fn simulator(profile_yaml: &str) -> RunningSim {
    let profile = Profile::parse(profile_yaml).unwrap();
    sim::spawn(profile, SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap()
}

const PROFILE: &str =
    "model: m\nttft: 5ms\nitl: 1ms\nreplies:\n  - match: '2\\+2'\n    reply: 'The answer is 4.'\n";
const REASONING: &str = "model: r\nttft: 5ms\nitl: 2ms\nreplies:\n  - match: '2\\+2'\n    reasoning: 'two and two make four'\n    reply: '4'\n";

fn ask(prompt: &str, max_tokens: u32, ignore_eos: bool) -> CallRequest {
    CallRequest {
        input: Input::prompt(Some("Be brief.".into()), prompt.into()),
        sampling: Sampling {
            temperature: Some(0.0),
            max_tokens: Some(max_tokens),
            ..Sampling::default()
        },
        ignore_eos,
    }
}

fn client(base: &str, api: Api) -> Client {
    Client::new(base, api, "m", None, timeouts()).unwrap()
}

#[tokio::test]
async fn every_api_streams_the_same_answer_with_server_counts() {
    let s = simulator(PROFILE);
    for (api, source) in [
        (Api::OpenAiChat, TokenSource::ServerUsage),
        (Api::OpenAiCompletions, TokenSource::ServerUsage),
        (Api::SglangGenerate, TokenSource::MetaInfo),
        (Api::LlamacppCompletion, TokenSource::TokensPredicted),
    ] {
        let c = client(&s.base_url(), api)
            .complete(&ask("What is 2+2?", 64, false))
            .await
            .unwrap();
        assert_eq!(c.content, "The answer is 4.", "{api:?}");
        assert_eq!(c.token_source, source, "{api:?}");
        assert_eq!(c.finish_reason.as_deref(), Some("stop"), "{api:?}");
        // The role-only first chunk and the usage chunk are not tokens.
        let marked: u32 = c.timing.marks.iter().map(|m| m.tokens).sum();
        assert_eq!(u64::from(marked), c.completion_tokens, "{api:?}");
        let t = &c.timing;
        assert!(t.first_byte.unwrap() <= t.first_token.unwrap(), "{api:?}");
        assert!(
            t.first_token.unwrap() >= Duration::from_millis(5),
            "{api:?}"
        );
        assert!(t.first_token.unwrap() <= t.end, "{api:?}");
        // Only the native streams carry the server's own timings:
        // llama.cpp's and SGLang's.
        assert_eq!(
            c.server_timings.is_some(),
            matches!(api, Api::LlamacppCompletion | Api::SglangGenerate),
            "{api:?}"
        );
    }
}

/// llama.cpp's `/completion`: counts in every event, the reason it stopped,
/// and the server's own prompt and decode times beside the client's.
#[tokio::test]
async fn llamacpp_completion_sets_the_servers_timings_beside_the_clients() {
    let s = simulator(PROFILE);
    let c = client(&s.base_url(), Api::LlamacppCompletion)
        .complete(&ask("What is 2+2?", 40, true))
        .await
        .unwrap();
    assert_eq!(c.completion_tokens, 40);
    assert_eq!(c.finish_reason.as_deref(), Some("length"));
    let Some(ServerTimings::LlamaCpp {
        prompt_n,
        prompt_ms,
        predicted_n,
        predicted_ms,
    }) = c.server_timings
    else {
        panic!(
            "no llama.cpp timings in the stop event: {:?}",
            c.server_timings
        );
    };
    assert_eq!(predicted_n, 40);
    assert_eq!(Some(prompt_n), c.usage.and_then(|u| u.prompt_tokens));
    // The server's clock runs inside the client's: its prompt time is at
    // least the simulator's 5 ms TTFT, and its prompt and decode times fit
    // within the time the client waited for the whole answer.
    let client_end = c.timing.end.as_secs_f64() * 1000.0;
    assert!(
        prompt_ms >= 5.0 && predicted_ms > 0.0 && prompt_ms + predicted_ms <= client_end,
        "{:?} vs the whole answer in {client_end} ms",
        c.server_timings
    );
}

/// SGLang's `/generate`: the last chunk's `meta_info` carries the
/// server's own time to first token, end to end, queue and decode rate,
/// which sit inside the client's.
#[tokio::test]
async fn sglang_generate_sets_the_servers_timings_beside_the_clients() {
    let s = simulator(PROFILE);
    let c = client(&s.base_url(), Api::SglangGenerate)
        .complete(&ask("What is 2+2?", 40, true))
        .await
        .unwrap();
    let Some(ServerTimings::Sglang {
        e2e_s,
        ttft_s: Some(ttft_s),
        queue_s: Some(queue_s),
        decode_tok_s: Some(decode_tok_s),
    }) = c.server_timings
    else {
        panic!(
            "no SGLang timings in the last chunk: {:?}",
            c.server_timings
        );
    };
    let client_e2e = c.timing.end.as_secs_f64();
    let client_ttft = c.timing.first_token.unwrap().as_secs_f64();
    assert!(
        ttft_s >= 0.005
            && ttft_s <= client_ttft
            && e2e_s <= client_e2e
            && queue_s == 0.0
            && decode_tok_s > 0.0,
        "{:?} vs the client's {client_ttft} s to the first token, {client_e2e} s to the end",
        c.server_timings
    );
}

#[tokio::test]
async fn ignore_eos_generates_exactly_max_tokens() {
    let s = simulator(PROFILE);
    for api in [
        Api::OpenAiChat,
        Api::SglangGenerate,
        Api::LlamacppCompletion,
    ] {
        let c = client(&s.base_url(), api)
            .complete(&ask("What is 2+2?", 40, true))
            .await
            .unwrap();
        assert_eq!(c.completion_tokens, 40, "{api:?}");
        assert_eq!(c.finish_reason.as_deref(), Some("length"), "{api:?}");
        let c = client(&s.base_url(), api)
            .complete(&ask("What is 2+2?", 3, false))
            .await
            .unwrap();
        assert_eq!(c.completion_tokens, 3, "{api:?}");
        assert_eq!(c.finish_reason.as_deref(), Some("length"), "{api:?}");
    }
}

#[tokio::test]
async fn reasoning_is_kept_apart_from_content_and_starts_ttft() {
    let s = simulator(REASONING);
    let c = client(&s.base_url(), Api::OpenAiChat)
        .complete(&ask("What is 2+2?", 64, false))
        .await
        .unwrap();
    assert_eq!(c.reasoning, "two and two make four");
    assert_eq!(c.content, "4");
    let t = &c.timing;
    let (first, content) = (t.first_token.unwrap(), t.first_content.unwrap());
    // Five reasoning tokens come before the first content token: TTFT stops
    // at the first of them, TTFT to content at the sixth token. Judged by
    // the marks, not by their spacing: a loaded machine bunches a simulator
    // that shares it.
    assert_eq!(t.marks.len(), 6, "{:?}", t.marks);
    assert_eq!(first, t.marks[0].at);
    assert_eq!(content, t.marks[5].at);
    assert!(content >= first, "first {first:?}, content {content:?}");
    assert_eq!(c.completion_tokens, 6);
}

/// A server that answers `path` with `parts` at the given delays, then
/// closes.
async fn scripted(
    path: &str,
    status: StatusCode,
    parts: Vec<(u64, &'static [u8])>,
) -> (String, tokio::task::JoinHandle<()>) {
    let app = Router::new().route(
        path,
        post(move || {
            let parts = parts.clone();
            async move {
                let stream = futures_util::stream::unfold(parts.into_iter(), |mut it| async move {
                    let (delay, text) = it.next()?;
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    Some((
                        Ok::<_, std::convert::Infallible>(Bytes::from_static(text)),
                        it,
                    ))
                });
                Response::builder()
                    .status(status)
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(stream))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, task)
}

const TOKEN: &[u8] = b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";

async fn fail(
    status: StatusCode,
    parts: Vec<(u64, &'static [u8])>,
    t: Timeouts,
) -> servegate::client::CallError {
    fail_in(Api::OpenAiChat, status, parts, t).await
}

async fn fail_in(
    api: Api,
    status: StatusCode,
    parts: Vec<(u64, &'static [u8])>,
    t: Timeouts,
) -> servegate::client::CallError {
    let client = Client::new("http://127.0.0.1:1", api, "m", None, t).unwrap();
    let path = client
        .url()
        .trim_start_matches(client.base_url())
        .to_owned();
    let (url, _task) = scripted(&path, status, parts).await;
    Client::new(&url, api, "m", None, t)
        .unwrap()
        .complete(&ask("x", 8, false))
        .await
        .unwrap_err()
}

#[tokio::test]
async fn http_errors_keep_the_server_message() {
    let e = fail(
        StatusCode::SERVICE_UNAVAILABLE,
        vec![(
            0,
            b"{\"object\":\"error\",\"message\":\"Server is overloaded\"}",
        )],
        timeouts(),
    )
    .await;
    assert_eq!(e.kind, ErrorKind::Http(503));
    assert_eq!(e.to_string(), "HTTP 503: Server is overloaded");
}

#[tokio::test]
async fn an_error_object_in_a_200_stream_is_an_error() {
    let e = fail(
        StatusCode::OK,
        vec![
            (0, TOKEN),
            (
                0,
                b"data: {\"error\": {\"message\": \"CUDA error: an illegal memory access\"}}\n\n",
            ),
            (0, b"data: [DONE]\n\n"),
        ],
        timeouts(),
    )
    .await;
    assert_eq!(e.kind, ErrorKind::InStream);
    assert!(e.to_string().contains("CUDA error"), "{e}");
    assert_eq!(e.partial, "hi");
}

#[tokio::test]
async fn malformed_chunks_and_cut_streams_are_protocol_errors() {
    let e = fail(
        StatusCode::OK,
        vec![(0, TOKEN), (0, b"data: {\"choices\": [\n\n")],
        timeouts(),
    )
    .await;
    assert_eq!(e.kind, ErrorKind::Protocol);
    assert!(e.detail.contains("not valid JSON"), "{e}");
    // A response that ends (its chunked body complete) before [DONE]:
    // how far it got, and what it lacked.
    let e = fail(StatusCode::OK, vec![(0, TOKEN), (0, TOKEN)], timeouts()).await;
    assert_eq!(e.kind, ErrorKind::Protocol);
    assert!(
        e.detail.starts_with("the response ended after 2 tokens (")
            && e.detail
                .ends_with("after the last token), without `data: [DONE]`"),
        "{e}"
    );
    assert_eq!(e.partial, "hihi");
    // llama.cpp's stream ends with its `"stop": true` event instead; one
    // cut before it is cut short too, and says what was missing.
    let event: &[u8] = b"data: {\"content\":\"hi\",\"stop\":false,\"tokens_predicted\":1}\n\n";
    let e = fail_in(
        Api::LlamacppCompletion,
        StatusCode::OK,
        vec![(0, event), (0, event)],
        timeouts(),
    )
    .await;
    assert_eq!(e.kind, ErrorKind::Protocol);
    assert!(
        e.detail.contains("without an event with `\"stop\": true`"),
        "{e}"
    );
    assert_eq!(e.partial, "hihi");
    // Its error object is an error in the stream.
    let e = fail_in(
        Api::LlamacppCompletion,
        StatusCode::OK,
        vec![
            (0, event),
            (
                0,
                b"data: {\"error\":{\"code\":500,\"message\":\"failed to decode\"}}\n\n",
            ),
        ],
        timeouts(),
    )
    .await;
    assert_eq!(e.kind, ErrorKind::InStream);
    assert!(e.detail.contains("failed to decode"), "{e}");
}

#[tokio::test]
async fn invalid_utf8_in_a_chunk_is_a_protocol_error() {
    let e = fail(
        StatusCode::OK,
        vec![
            (0, TOKEN),
            (
                0,
                b"data: {\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}\n\n",
            ),
        ],
        timeouts(),
    )
    .await;
    assert_eq!(e.kind, ErrorKind::Protocol, "{e}");
    assert!(e.detail.contains("not valid JSON"), "{e}");
    assert_eq!(e.partial, "hi");
}

#[tokio::test]
async fn every_deadline_is_enforced() {
    let short = |first: u64, idle: u64, total: u64| Timeouts {
        connect: Duration::from_secs(1),
        first_token: Duration::from_millis(first),
        idle: Duration::from_millis(idle),
        total: Duration::from_millis(total),
    };
    // Headers come, the first token never does.
    let e = fail(
        StatusCode::OK,
        vec![(0, b": ping\n\n"), (3000, TOKEN)],
        short(200, 5000, 5000),
    )
    .await;
    assert!(
        matches!(e.kind, ErrorKind::Timeout(Deadline::FirstToken, _)),
        "{e}"
    );
    // One token, then the stream stalls.
    let e = fail(
        StatusCode::OK,
        vec![(0, TOKEN), (3000, TOKEN)],
        short(1000, 200, 5000),
    )
    .await;
    assert!(
        matches!(e.kind, ErrorKind::Timeout(Deadline::Idle, _)),
        "{e}"
    );
    assert_eq!(e.partial, "hi");
    // Tokens keep coming, but the whole request is too long.
    let slow: Vec<(u64, &[u8])> = std::iter::repeat_n((100, TOKEN), 30).collect();
    let e = fail(StatusCode::OK, slow, short(1000, 1000, 500)).await;
    assert!(
        matches!(e.kind, ErrorKind::Timeout(Deadline::Total, _)),
        "{e}"
    );
}

#[tokio::test]
async fn refused_connections_are_connect_errors() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = client(&format!("http://127.0.0.1:{port}"), Api::OpenAiChat)
        .complete(&ask("x", 8, false))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Connect, "{e}");
}

/// A hand-written HTTP/1.1 server: for each accepted connection, reads one
/// request per entry of `responses` and writes that entry's pieces (with the
/// given pauses), then closes. Returns the base URL and the number of
/// connections accepted so far.
async fn raw_server(
    responses: Vec<Vec<(u64, &'static [u8])>>,
    per_connection: usize,
) -> (String, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        let mut queue = responses.into_iter();
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            for _ in 0..per_connection {
                let Some(parts) = queue.next() else { return };
                // Read one request: its head, then Content-Length bytes.
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = sock.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    req.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&req).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len: usize = text
                            .lines()
                            .find_map(|l| l.strip_prefix("Content-Length: "))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        if req.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                for (pause, bytes) in parts {
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                    if sock.write_all(bytes).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    (url, accepted)
}

const CHUNKED_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

#[tokio::test]
async fn chunked_bodies_split_anywhere_with_extensions_and_trailers() {
    let sse = "data: {\"choices\":[{\"delta\":{\"content\":\"hel\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let body: &'static str = Box::leak(
        format!(
            "{:x};name=value\r\n{sse}\r\n0\r\nx-trailer: 1\r\n\r\n",
            sse.len()
        )
        .into_boxed_str(),
    );
    // The whole response cut into 7-byte writes with pauses between them.
    let mut whole = CHUNKED_HEAD.to_vec();
    whole.extend_from_slice(body.as_bytes());
    let whole: &'static [u8] = Box::leak(whole.into_boxed_slice());
    let parts: Vec<(u64, &'static [u8])> = whole.chunks(7).map(|c| (1, c)).collect();
    let (url, _) = raw_server(vec![parts], 1).await;
    let c = client(&url, Api::OpenAiChat)
        .complete(&ask("x", 8, false))
        .await
        .unwrap();
    assert_eq!(c.content, "hello");
    assert_eq!(c.completion_tokens, 2);
}

#[tokio::test]
async fn content_length_and_close_delimited_bodies() {
    const SSE: &[u8] =
        b"data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let with_length: &'static [u8] = Box::leak(
        format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", SSE.len())
            .into_bytes()
            .into_boxed_slice(),
    );
    let closed: &'static [u8] = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n";
    for head in [with_length, closed] {
        let (url, _) = raw_server(vec![vec![(0, head), (0, SSE)]], 1).await;
        let c = client(&url, Api::OpenAiChat)
            .complete(&ask("x", 8, false))
            .await
            .unwrap();
        assert_eq!(c.content, "ok");
    }
}

#[tokio::test]
async fn keep_alive_connections_are_reused_and_a_stale_one_replaced() {
    // A gate's requests (`sample`, `measure`) keep their connections;
    // a probe's (`complete`) has one of its own.
    const ONE: &[u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n46\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n\r\n\
        e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n";
    // Two requests on one connection: one accept.
    let (url, accepted) = raw_server(vec![vec![(0, ONE)], vec![(0, ONE)], vec![(0, ONE)]], 2).await;
    let cl = client(&url, Api::OpenAiChat);
    for _ in 0..2 {
        assert_eq!(cl.sample(&ask("x", 8, false)).await.unwrap().content, "a");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "the second request reused the connection"
    );
    // A probe's question goes out on a connection of its own.
    assert_eq!(cl.complete(&ask("x", 8, false)).await.unwrap().content, "a");
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "the probe opened one");
    // A server that closes after each response: the pooled connection is
    // stale, and the request goes out again on a new one.
    let (url, accepted) = raw_server(vec![vec![(0, ONE)], vec![(0, ONE)]], 1).await;
    let cl = client(&url, Api::OpenAiChat);
    for _ in 0..2 {
        assert_eq!(cl.sample(&ask("x", 8, false)).await.unwrap().content, "a");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

/// A server that writes a second, unasked response after the first one
/// on a gate's kept-alive connection: those bytes are never read as the
/// next answer. The idle connection is closed before reuse (counted), and the
/// next request gets its own answer on a new one.
#[tokio::test]
async fn bytes_sent_unasked_on_an_idle_connection_are_never_the_next_answer() {
    fn response(text: &str) -> &'static [u8] {
        let sse = format!(
            "data: {{\"choices\":[{{\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n"
        );
        Box::leak(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{sse}\r\n0\r\n\r\n",
                sse.len()
            )
            .into_bytes()
            .into_boxed_slice(),
        )
    }
    // The stale answer arrives 5 ms after the first one is complete (and
    // pooled); the connection then stays open until the next accept.
    let (url, accepted) = raw_server(
        vec![
            vec![(0, response("first")), (5, response("stale"))],
            vec![(0, response("fresh"))],
        ],
        1,
    )
    .await;
    let cl = client(&url, Api::OpenAiChat);
    assert_eq!(
        cl.sample(&ask("x", 8, false)).await.unwrap().content,
        "first"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        cl.sample(&ask("x", 8, false)).await.unwrap().content,
        "fresh"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert_eq!(cl.unsolicited(), 1, "the stale connection is counted");
}

#[tokio::test]
async fn a_response_that_is_not_http_is_a_protocol_error() {
    let (url, _) = raw_server(vec![vec![(0, b"SSH-2.0-OpenSSH_9.6\r\n\r\n")]], 1).await;
    let e = client(&url, Api::OpenAiChat)
        .complete(&ask("x", 8, false))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Protocol, "{e}");
    assert!(e.detail.contains("not an HTTP response"), "{e}");
}

/// `https://` goes through reqwest and rustls, with ring as the crypto
/// provider (no aws-lc): the client opens with a TLS handshake record (its
/// key share made by ring), and a server that answers in plain HTTP is a
/// failed call, not a panic for want of a provider.
#[tokio::test]
async fn https_opens_with_a_tls_handshake() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut record = [0u8; 5];
        sock.read_exact(&mut record).await.unwrap();
        let _ = sock.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
        record
    });
    let e = client(&url, Api::OpenAiChat)
        .complete(&ask("x", 8, false))
        .await
        .unwrap_err();
    let record = server.await.unwrap();
    // A handshake record (22) of TLS (3.x), long enough for a ClientHello.
    assert_eq!(record[..2], [22, 3], "{record:?}");
    assert!(
        u16::from_be_bytes([record[3], record[4]]) > 100,
        "{record:?}"
    );
    assert!(
        matches!(e.kind, ErrorKind::Connect | ErrorKind::Transport),
        "{e}"
    );
}
