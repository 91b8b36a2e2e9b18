//! Checks of a probe that ask the server again: the serving API's promises
//! (`contract:`: `max_tokens`, `ignore_eos`, `usage`, `stop`, `cache_determinism`) and
//! the same answer every time (`deterministic: N`). The harness asks; these
//! judge.

use super::failure::{Problem, Sent, request_failed};
use super::message::Message;
use crate::client::error::excerpt;
use crate::client::{CallError, CallRequest, Client, Completion};
use crate::suite::node::Loc;
use crate::suite::{Contract, Probe, SourceFile};

/// What the checks ask with: the suite file (for messages), the client (to
/// show what was sent) and the call that asks the server.
pub struct Asker<'a> {
    /// The suite file.
    pub file: &'a SourceFile,
    /// The client, for the URL and body of a request.
    pub client: &'a Client,
    /// Sends a request and reads its answer.
    pub ask: &'a dyn Fn(&CallRequest) -> Result<Completion, CallError>,
}

/// The probe's server-contract checks, on its answer and on the extra
/// requests some of them need.
pub fn contract(
    a: &Asker<'_>,
    probe: &Probe,
    req: &CallRequest,
    c: &Completion,
) -> Result<Vec<Problem>, Message> {
    let file = a.file;
    let ask = |req: &CallRequest| {
        let sent = Sent::of(a.client, req);
        (a.ask)(req).map_err(|e| request_failed(file, probe.loc, &sent, &e))
    };
    let broken = |what: &str, why: String| Problem {
        error: format!("contract broken: {what}: {why}"),
        detail: String::new(),
        loc: probe.loc,
    };
    let max = u64::from(probe.sampling.max_tokens.unwrap_or(0));
    // The larger of the server's count and the stream's: a server whose
    // usage is wrong does not hide an overrun.
    let tokens = |c: &Completion| {
        let received: u64 = c.timing.marks.iter().map(|m| u64::from(m.tokens)).sum();
        c.completion_tokens.max(received)
    };
    let mut problems = Vec::new();
    for contract in &probe.contract {
        match contract {
                Contract::MaxTokens if tokens(c) > max => problems.push(broken(
                    "max_tokens",
                    format!(
                        "asked for at most {max} tokens, the server generated {} ({} by {}, {} in the stream)",
                        tokens(c),
                        c.completion_tokens,
                        c.token_source.name(),
                        c.timing.marks.iter().map(|m| u64::from(m.tokens)).sum::<u64>()
                    ),
                )),
                Contract::Usage => {
                    let chunks = c.timing.marks.len();
                    let why = match &c.usage {
                        None => Some("no usage reported, though `stream_options.include_usage` was asked".to_owned()),
                        Some(u) => match (u.prompt_tokens, u.completion_tokens) {
                            (None | Some(0), _) => Some("usage reports no prompt tokens".to_owned()),
                            (_, None) => Some("usage reports no completion tokens".to_owned()),
                            (_, Some(n)) if n < chunks as u64 => Some(format!(
                                "usage says {n} completion tokens, but {chunks} chunks of the stream carried tokens"
                            )),
                            _ => None,
                        },
                    };
                    problems.extend(why.map(|w| broken("usage", w)));
                }
                Contract::Stop => {
                    let stops = probe.sampling.stop.clone().unwrap_or_default();
                    if let Some((s, at)) = stops
                        .iter()
                        .find_map(|s| c.content.find(s.as_str()).map(|at| (s, at)))
                    {
                        problems.push(broken(
                            "stop",
                            format!(
                                "the stop sequence {s:?} is in the answer at character {}",
                                c.content[..at].chars().count()
                            ),
                        ));
                    }
                }
                Contract::IgnoreEos => {
                    // Without stop sequences: they end a stream even with ignore_eos.
                    let again = ask(&CallRequest {
                        ignore_eos: true,
                        sampling: crate::suite::Sampling {
                            stop: None,
                            ..req.sampling.clone()
                        },
                        ..req.clone()
                    })?;
                    let finish = again.finish_reason.as_deref().unwrap_or("absent");
                    if tokens(&again) != max || finish != "length" {
                        problems.push(broken(
                            "ignore_eos",
                            format!(
                                "with ignore_eos and max_tokens {max} the server generated {} token(s), finish_reason {finish}: fixed-length benchmarks on it measure other lengths than they ask for",
                                tokens(&again)
                            ),
                        ));
                    }
                }
                Contract::CacheDeterminism => {
                    let greedy = CallRequest {
                        sampling: crate::suite::Sampling {
                            temperature: Some(0.0),
                            ..req.sampling.clone()
                        },
                        ..req.clone()
                    };
                    let first = ask(&greedy)?;
                    let head = "contract broken: cache_determinism: at temperature 0 the same request, asked again (a prefix-cache hit), answered differently";
                    problems.extend(determinism(a, &greedy, &first, 2, probe.loc, Some(head))?);
                }
                Contract::MaxTokens => {}
            }
    }
    Ok(problems)
}

/// Asks `n - 1` more times; a problem when any answer differs from the
/// first, its error `head` (else `answers differ: ask k of n differs from
/// the first`) and where.
pub(crate) fn determinism(
    a: &Asker<'_>,
    req: &CallRequest,
    first: &Completion,
    n: u32,
    loc: Loc,
    head: Option<&str>,
) -> Result<Option<Problem>, Message> {
    let file = a.file;
    let sent = Sent::of(a.client, req);
    let parts = |c: &Completion| {
        [
            ("content", c.content.clone()),
            ("reasoning", c.reasoning.clone()),
            ("finish_reason", c.finish_reason.clone().unwrap_or_default()),
        ]
    };
    let want = parts(first);
    for k in 2..=n {
        let again = (a.ask)(req).map_err(|e| request_failed(file, loc, &sent, &e))?;
        let got = parts(&again);
        let Some(((what, a), (_, b))) = want.iter().zip(&got).find(|(a, b)| a.1 != b.1) else {
            continue;
        };
        let at = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
        let around = |t: &str| {
            let from = at.saturating_sub(20);
            let piece: String = t.chars().skip(from).take(80).collect();
            format!(
                "{}{}",
                if from > 0 { "…" } else { "" },
                excerpt(&piece, 100)
            )
        };
        let head = head.map_or_else(
            || format!("answers differ: ask {k} of {n} differs from the first"),
            str::to_owned,
        );
        return Ok(Some(Problem {
            error: format!("{head} in its {what} at character {at}"),
            detail: format!("first:    {}\nask {k}:    {}\n", around(a), around(b)),
            loc,
        }));
    }
    Ok(None)
}
