//! Whether a suite's server is still there after a trial: a launched
//! server that exited or logged a fatal line, or any server that no longer
//! answers a one-token question after a failure, is lost, with its cause.

use std::fmt::Write as _;
use std::time::Duration;

use crate::check::message::Message;
use crate::client::{Client, Deadline, ErrorKind};
use crate::suite::Timeouts;

use super::outcome::Stop;
pub use super::outcome::Verdict;
use super::session::Execution;
use crate::record::FailureKind;

impl Execution {
    /// After a trial: a launched server that exited or logged a fatal line,
    /// or any server that no longer answers after a failure, is lost.
    pub(super) fn check_server(&self, name: &str, verdict: Verdict) -> Verdict {
        let Some(Ok(c)) = self.target.get() else {
            return verdict;
        };
        // A death names the fatal line its log has, whichever was seen
        // first: the crash and its cause in one message.
        let died = |s: &crate::server::Server, who: &str| {
            s.exited().map(|exit| {
                let fatal = s.fatal_line().map_or_else(String::new, |f| {
                    format!(", after its log's {}", s.describe_fatal(&f))
                });
                format!("{who} {exit} during {name}{fatal}\n{}", s.tail())
            })
        };
        // A worker's cause names it; the server's is said as it always was.
        let lost = |s: &crate::server::Server, worker: Option<&str>| {
            let who = worker.map(|w| format!("worker `{w}` (behind the router)"));
            died(s, who.as_deref().unwrap_or("the server")).or_else(|| {
                s.fatal_line().map(|f| {
                    let whose = who.as_ref().map_or_else(String::new, |w| format!("{w}: "));
                    format!(
                        "{whose}{} during {name}\n{}",
                        s.describe_fatal(&f),
                        s.tail()
                    )
                })
            })
        };
        // The router first, then each worker behind it: a router retries
        // a dead worker's requests on the others, so its clients may
        // never see the death that halves the server.
        let mut cause = c.server.as_ref().and_then(|s| lost(s, None)).or_else(|| {
            c.workers
                .iter()
                .find_map(|w| lost(&w.server, Some(&w.name)))
        });
        if cause.is_none() && verdict.is_err() {
            // A server that stopped answering may be on its way out: give
            // its exit a moment to show, to name the real cause.
            let named = |s: Option<&crate::server::Server>, who: &str, why: String| {
                let hung = silent(who, name, &why, s);
                s.and_then(|s| {
                    (0..100).find_map(|_| {
                        died(s, who).or_else(|| {
                            std::thread::sleep(Duration::from_millis(20));
                            None
                        })
                    })
                })
                .unwrap_or(hung)
            };
            // Each worker behind a router on its own, all at once, first:
            // the router's health asks whichever worker is next, so a hung
            // one behind it answers only every other time.
            let asked: Vec<_> = c
                .workers
                .iter()
                .filter_map(|w| {
                    let (_, client) = c.client.metrics_from().iter().find(|(n, _)| *n == w.name)?;
                    Some((w, client))
                })
                .collect();
            let whys = self.runtime.block_on(futures_util::future::join_all(
                asked
                    .iter()
                    .map(|(w, client)| question(client, Some(&w.server))),
            ));
            cause = asked
                .iter()
                .zip(whys)
                .find_map(|((w, _), why)| {
                    let who = format!("worker `{}` (behind the router)", w.name);
                    why.map(|why| named(Some(&w.server), &who, why))
                })
                .or_else(|| {
                    let why = self
                        .runtime
                        .block_on(question(&c.client, c.server.as_ref()))?;
                    Some(named(c.server.as_ref(), "the server", why))
                });
        }
        let Some(cause) = cause else {
            return verdict;
        };
        self.lifecycle().lost = Some(format!(
            "{}\n  (the remaining trials of `{}` fail with this cause)",
            cause.lines().next().unwrap_or(""),
            self.label
        ));
        // The trial's own failure keeps its marks and places: an
        // annotation still points at its assertion.
        let mut message = Message::of_error(&cause);
        match verdict {
            Err(Stop::Failed(own)) => {
                let _ = writeln!(message, "  the trial's own failure:");
                message.append(own.message);
            }
            Err(gated) => {
                let _ = write!(message, "  the trial's own failure:\n{gated}");
            }
            Ok(()) => {}
        }
        Err(Stop::failed(FailureKind::Server, message))
    }
}

/// Why the server at `client` does not show it is alive within
/// 10 s in all: SGLang's `GET /health_generate` generates a token
/// through the scheduler (its `/health` does too by default in 0.5.23,
/// but answers 200 without it under
/// `SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0`, so a hung scheduler
/// would pass), and answers 503 when none came. Any other answer (a
/// 404 from vLLM or llama.cpp, which lack the route) sends the
/// question to `GET /health`, and then, as its answer proves only the HTTP
/// front alive (vLLM 0.32 answers 200 while its engine process is
/// stopped), to a generation of one token in the suite's API: whatever
/// comes back is an answer (a token, even one the stream then stalls
/// after; an error in words; bytes that are not the protocol; a
/// connection closed at once: the trials judge those); no first token
/// in time, or a refused connection, is not — all within what is left
/// of the same 10 s. A launched server whose `/health` answered 5xx and
/// that then exits within those 10 s is not alive either: its exit,
/// and its log's tail, name the cause. Those of several servers are
/// asked at once.
async fn question(client: &Client, server: Option<&crate::server::Server>) -> Option<String> {
    let quick = Timeouts {
        connect: Duration::from_secs(5),
        total: WITHIN,
        ..Timeouts::default()
    };
    let client = client.with_timeouts(quick);
    let started = tokio::time::Instant::now();
    // The question under way when the deadline came.
    let asking = std::cell::Cell::new("GET /health_generate");
    let asked = async {
        match client.get("/health_generate").await {
            Ok((200..=299, _)) => None,
            Ok((503, _)) => Some(
                "GET /health_generate answered 503: the server could not generate a token"
                    .to_owned(),
            ),
            Ok(_) => {
                asking.set("GET /health_generate, then GET /health");
                let health = match client.get("/health").await {
                    Ok((status, _)) => status,
                    Err(e) => return Some(format!("GET /health: {e}")),
                };
                asking.set("GET /health_generate, then GET /health, then a one-token generation");
                let hung = one_token_answered(&client, started).await;
                if hung.is_some() || health < 500 {
                    return hung;
                }
                let s = server?;
                asking.set("GET /health (5xx), then the launched server's exit");
                exit_within(s, started)
                    .await
                    .then(|| format!("GET /health answered {health}, and the server exited"))
            }
            Err(e) => Some(format!("GET /health_generate: {e}")),
        }
    };
    match tokio::time::timeout(WITHIN, asked).await {
        Ok(why) => why,
        Err(_) => Some(format!(
            "{}: no answer within {}",
            asking.get(),
            crate::units::format_secs(WITHIN.as_secs_f64())
        )),
    }
}

/// The cause of a server (`who`) that did not show it is alive after the
/// trial `name`, with its log's tail where servegate launched it.
fn silent(who: &str, name: &str, why: &str, server: Option<&crate::server::Server>) -> String {
    let tail = server.map_or_else(String::new, |s| format!("\n{}", s.tail()));
    format!("{who} stopped answering during {name} ({why}){tail}")
}

/// How long the liveness question may take in all.
const WITHIN: Duration = Duration::from_secs(10);

/// `Some(cause)` when a one-token generation brings no token within what
/// is left of the liveness check's 10 s since `started`. A token that
/// came, then a stall, is a token: asked first with a 1 s idle deadline,
/// the stall ends the question quickly, not the server (the text kept
/// says whether one came). As that deadline also runs between the
/// answer's headers and its first token (vLLM sends its headers with no
/// token behind them while its engine is stopped), a question stalled
/// there without a token is asked again with all that is left, so a slow
/// first token still counts.
async fn one_token_answered(client: &Client, started: tokio::time::Instant) -> Option<String> {
    let left = || {
        WITHIN
            .saturating_sub(started.elapsed())
            .saturating_sub(Duration::from_millis(300))
    };
    let ask = |idle: Duration| {
        let left = left();
        let c = client.with_timeouts(Timeouts {
            connect: left.min(Duration::from_secs(5)),
            first_token: left,
            idle,
            total: left,
        });
        async move { c.sample(&one_token()).await }
    };
    let no_token = |e: &crate::client::CallError| {
        e.kind == ErrorKind::Connect
            || (matches!(e.kind, ErrorKind::Timeout(..)) && e.partial.is_empty())
    };
    let mut answer = ask(Duration::from_secs(1)).await;
    if let Err(e) = &answer
        && e.kind == ErrorKind::Timeout(Deadline::Idle, Duration::from_secs(1))
        && e.partial.is_empty()
    {
        answer = ask(left()).await;
    }
    match answer {
        Err(e) if no_token(&e) => Some(format!(
            "GET /health answered, but a one-token generation got no token: {e}"
        )),
        _ => None,
    }
}

/// Whether the launched server `s` exits within what is left of the
/// liveness check's 10 s since `started`. A server whose `/health` says
/// it is failing may be on its way out: vLLM 0.32, its engine dead,
/// answers `/health` 503 and requests with the error in words until its
/// watchdog (every 5 s, `entrypoints/launchers/launcher.py`) shuts it
/// down; its exit, with its log's tail (the engine's stack trace), is the
/// cause to name.
async fn exit_within(s: &crate::server::Server, started: tokio::time::Instant) -> bool {
    while started.elapsed() + Duration::from_millis(400) < WITHIN {
        if s.exited().is_some() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// The liveness question's generation: one token of a one-word prompt,
/// greedy.
fn one_token() -> crate::client::CallRequest {
    crate::client::CallRequest {
        input: crate::suite::Input::prompt(None, "Hi".to_owned()),
        sampling: crate::suite::Sampling {
            max_tokens: Some(1),
            temperature: Some(0.0),
            ..crate::suite::Sampling::default()
        },
        ignore_eos: false,
    }
}
