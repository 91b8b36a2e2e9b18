//! `servegate sim --route URL --route URL …`: a round-robin router in
//! front of workers, standing where SGLang's (`sglang_router.launch_router
//! --worker-urls … --policy round_robin`) stands in front of its engines,
//! for the tests of launches with workers on machines without it. Every
//! request goes to the next worker whole — method, path, query, body, the
//! content type and the key — and its answer comes back as it arrives; a
//! worker that refuses the connection is passed over for the next (as the
//! real router retries), and only when none takes it does the client get
//! a 502; `/flush_cache` goes to every worker. A worker that fails
//! mid-answer is not retried elsewhere (SGLang's router retries up to 5
//! times). The workers' figures are theirs: this router counts nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;

use super::RunningSim;

/// The largest request body passed on: SGLang's router's default
/// `--max-payload-size` (512 MiB) is more than a test sends.
const MAX_BODY: usize = 64 << 20;

/// The headers a request keeps on its way to a worker.
const PASSED: [HeaderName; 3] = [header::CONTENT_TYPE, header::AUTHORIZATION, header::ACCEPT];

/// The workers and whose turn it is.
struct Routes {
    workers: Vec<String>,
    next: AtomicUsize,
    http: reqwest::Client,
}

/// Serves the router on `listener` in the background of the current tokio
/// runtime until the returned handle is dropped.
pub fn spawn(listener: TcpListener, workers: Vec<String>) -> std::io::Result<RunningSim> {
    let addr = listener.local_addr()?;
    // reqwest is built without a provider of its own; plain http needs
    // none, but its builder wants one installed (`Err`: one already was).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(std::io::Error::other)?;
    let routes = Arc::new(Routes {
        workers: workers
            .into_iter()
            .map(|w| w.trim_end_matches('/').to_owned())
            .collect(),
        next: AtomicUsize::new(0),
        http,
    });
    let app = axum::Router::new().fallback(forward).with_state(routes);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(RunningSim { addr, task })
}

/// The request of `parts` and `body`, sent on to `url` with the headers
/// it keeps.
fn passed_on(
    routes: &Routes,
    parts: &axum::http::request::Parts,
    url: &str,
    body: &axum::body::Bytes,
) -> reqwest::RequestBuilder {
    let mut sent = routes
        .http
        .request(parts.method.clone(), url)
        .body(body.clone());
    for name in &PASSED {
        if let Some(v) = parts.headers.get(name) {
            sent = sent.header(name, v);
        }
    }
    sent
}

/// Passes `req` to the next worker that takes the connection.
async fn forward(State(routes): State<Arc<Routes>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(body) = to_bytes(body, MAX_BODY).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    if parts.uri.path() == "/flush_cache" {
        return flush_every_worker(&routes, &parts, body).await;
    }
    let n = routes.workers.len();
    let first = routes.next.fetch_add(1, Ordering::Relaxed);
    let mut refused = Vec::new();
    for k in 0..n {
        let worker = &routes.workers[(first + k) % n];
        match passed_on(routes.as_ref(), &parts, &format!("{worker}{path}"), &body)
            .send()
            .await
        {
            Ok(answer) => {
                let mut out = Response::builder().status(answer.status().as_u16());
                if let Some(v) = answer.headers().get(header::CONTENT_TYPE) {
                    out = out.header(header::CONTENT_TYPE, v);
                }
                return out
                    .body(Body::from_stream(answer.bytes_stream()))
                    .unwrap_or_else(|e| {
                        (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
                    });
            }
            Err(e) if e.is_connect() => refused.push(format!("{worker}: {e}")),
            Err(e) => return (StatusCode::BAD_GATEWAY, format!("{worker}: {e}")).into_response(),
        }
    }
    (
        StatusCode::BAD_GATEWAY,
        format!("no worker took the request: {}", refused.join("; ")),
    )
        .into_response()
}

/// `/flush_cache` goes to every worker, as SGLang's routers send it
/// (`sglang_router/mini_lb.py`, `flush_cache`): one cache emptied of two
/// would leave a gate's `flush_cache: true` half done. The first worker
/// that refuses is the answer.
async fn flush_every_worker(
    routes: &Routes,
    parts: &axum::http::request::Parts,
    body: axum::body::Bytes,
) -> Response {
    for worker in &routes.workers {
        match passed_on(routes, parts, &format!("{worker}/flush_cache"), &body)
            .send()
            .await
        {
            Ok(answer) if answer.status().is_success() => {}
            Ok(answer) => {
                let status = answer.status().as_u16();
                let text = answer.text().await.unwrap_or_default();
                return (
                    StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
                    format!("{worker}: {text}"),
                )
                    .into_response();
            }
            Err(e) => return (StatusCode::BAD_GATEWAY, format!("{worker}: {e}")).into_response(),
        }
    }
    (StatusCode::OK, "Cache flushed.").into_response()
}
