//! The reqwest side of the client: its clients and their redirect
//! policies, the classification of its send errors, small bodies read
//! within their caps.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::timeout_at;

use crate::client::error::{CallError, Deadline, ErrorKind, source_chain};
use crate::suite::Timeouts;
use crate::units::format_bytes;

/// Makes ring the process's rustls crypto provider, once: reqwest is
/// built without one (`rustls-no-provider`, so that aws-lc's C build is not
/// part of servegate's) and panics building a client when none is
/// installed. A provider installed before is kept.
pub(super) fn install_crypto_provider() {
    // An `Err` only says that one was installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The reqwest clients: of small requests, which follow redirects within
/// the server's origin ([`same_origin`]), and of `https://` targets'
/// generation requests, which follow none — as the raw transport of
/// `http://` targets, they fail saying where the redirect points (a
/// followed one would turn a POST into a GET, or put a second request's
/// round trip into the figures).
///
/// Built when first used: a reqwest client reads and parses the system's
/// root certificates (some 150 files here), which cost a gate's client
/// thread on an `http://` target, which never uses them, more CPU than
/// its first few hundred tokens.
#[derive(Debug, Clone)]
pub(super) struct Http {
    timeouts: Timeouts,
    built: Arc<OnceLock<Result<Built, CallError>>>,
}

#[derive(Debug)]
struct Built {
    small: reqwest::Client,
    stream: reqwest::Client,
}

impl Http {
    pub(super) fn new(timeouts: Timeouts) -> Http {
        Http {
            timeouts,
            built: Arc::default(),
        }
    }

    fn built(&self) -> Result<&Built, CallError> {
        self.built
            .get_or_init(|| {
                Ok(Built {
                    small: http_client(
                        self.timeouts,
                        reqwest::redirect::Policy::custom(same_origin),
                    )?,
                    stream: http_client(self.timeouts, reqwest::redirect::Policy::none())?,
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The client of small requests.
    pub(super) fn small(&self) -> Result<&reqwest::Client, CallError> {
        self.built().map(|b| &b.small)
    }

    /// The client of `https://` generation requests.
    pub(super) fn stream(&self) -> Result<&reqwest::Client, CallError> {
        self.built().map(|b| &b.stream)
    }
}

/// A reqwest client with its redirect policy.
fn http_client(
    timeouts: Timeouts,
    redirects: reqwest::redirect::Policy,
) -> Result<reqwest::Client, CallError> {
    // One proxy policy for both transports: none. The raw transport
    // connects directly, and a proxy between client and server would be
    // in every figure; `HTTP(S)_PROXY` and `NO_PROXY` are ignored (to go
    // through a proxy, make it the base URL).
    reqwest::Client::builder()
        .no_proxy()
        .redirect(redirects)
        .connect_timeout(timeouts.connect)
        .pool_max_idle_per_host(1024)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| CallError::new(ErrorKind::Transport, e.to_string()))
}

/// Redirects a small request follows: within the origin it was sent to,
/// at most [`MAX_REDIRECTS`] hops. Another origin's answer is never taken
/// for the server's (a `/get_server_info` sent to another port would be
/// recorded as its configuration): the request fails naming where it was
/// sent.
fn same_origin(attempt: reqwest::redirect::Attempt<'_>) -> reqwest::redirect::Action {
    let first = attempt.previous().first().map(reqwest::Url::origin);
    let to = attempt.url().clone();
    if first.is_some_and(|o| o != to.origin()) {
        let message = format!(
            "the server redirected to {}, another origin: not followed (nothing another server sends is taken for this one's)",
            crate::secrets::url_from_server(to.as_str())
        );
        return attempt.error(message);
    }
    if attempt.previous().len() > MAX_REDIRECTS {
        let message = format!(
            "more than {MAX_REDIRECTS} redirects, the last to {}",
            to.path()
        );
        return attempt.error(message);
    }
    attempt.follow()
}

/// Redirects followed within the server's origin.
const MAX_REDIRECTS: usize = 3;

/// The most of an error body kept (its message is shown, not stored).
pub(super) const ERROR_BODY: u64 = 64 * 1024;

/// The body of a response as text, read chunk by chunk: at most `limit`
/// bytes, by `deadline`. A longer body fails as oversize; a body still
/// arriving at the deadline fails as a total timeout.
pub(super) async fn bounded_text(
    mut resp: reqwest::Response,
    limit: u64,
    deadline: tokio::time::Instant,
    path: &str,
) -> Result<String, CallError> {
    let started = tokio::time::Instant::now();
    let mut body = Vec::new();
    loop {
        let chunk = timeout_at(deadline, resp.chunk()).await.map_err(|_| {
            CallError::new(
                ErrorKind::Timeout(Deadline::Total, deadline.saturating_duration_since(started)),
                format!("{path}: the body was still arriving"),
            )
        })?;
        match chunk {
            Ok(Some(bytes)) => {
                if (body.len() + bytes.len()) as u64 > limit {
                    return Err(CallError::new(
                        ErrorKind::Oversize,
                        format!(
                            "{path}: the response body exceeded {} (target.limits.document)",
                            format_bytes(limit)
                        ),
                    ));
                }
                body.extend_from_slice(&bytes);
            }
            Ok(None) => return Ok(String::from_utf8_lossy(&body).into_owned()),
            Err(e) => return Err(CallError::new(ErrorKind::Transport, source_chain(&e))),
        }
    }
}

pub(super) fn classify_send_error(e: &reqwest::Error, connect: Duration) -> CallError {
    if e.is_connect() {
        if e.is_timeout() {
            return CallError::new(
                ErrorKind::Timeout(Deadline::Connect, connect),
                source_chain(e),
            );
        }
        return CallError::new(ErrorKind::Connect, source_chain(e));
    }
    CallError::new(ErrorKind::Transport, source_chain(e))
}
