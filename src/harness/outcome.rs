//! How a trial ended, as types: passed, failed (with what kind of failure
//! and its whole message), or gated (it did not run, and why). Rendered to
//! text only at the edges: libtest's failure section, the record, the
//! reports.

use std::fmt;

use crate::record::{FailureKind, TrialOutcome};

/// Why a trial did not pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// It ran and failed.
    Failed(Failure),
    /// It did not run: something it depends on failed first.
    Gated(Cause),
}

/// A trial that ran and failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// What failed.
    pub kind: FailureKind,
    /// Where in which file, what was sent, what came back, what was
    /// expected: the whole message.
    pub message: String,
}

/// What a gated trial waited for.
#[derive(Debug, Clone, PartialEq)]
pub enum Cause {
    /// The suite's config checks failed: the server runs another
    /// configuration than the one asserted.
    Config {
        /// `<suite>` or `<suite>[<variant>]`.
        label: String,
        /// The checks that failed.
        checks: Vec<String>,
        /// The gist of each one's failure ([`gist`]), in the same order:
        /// a filtered run may not show their trials.
        why: Vec<String>,
    },
    /// Correctness probes failed: a gate never passes on such a server.
    Probes {
        /// `<suite>` or `<suite>[<variant>]`.
        label: String,
        /// The probes that failed.
        probes: Vec<String>,
        /// The gist of each one's failure ([`gist`]), in the same order.
        why: Vec<String>,
    },
    /// Answers under `snapshot: gate` changed.
    Snapshots {
        /// `<suite>` or `<suite>[<variant>]`.
        label: String,
        /// Their probes.
        probes: Vec<String>,
    },
    /// A snapshot's probe got no answer to compare.
    NoAnswer {
        /// `<suite>` or `<suite>[<variant>]`.
        label: String,
        /// The probe.
        probe: String,
        /// The first line of the probe's failure.
        why: String,
    },
    /// The server died, hung or logged a fatal line in an earlier trial.
    ServerLost(String),
}

/// The result of one trial.
pub type Verdict = Result<(), Stop>;

impl Stop {
    /// A failure of `kind` with its message.
    pub fn failed(kind: FailureKind, message: impl Into<String>) -> Self {
        Stop::Failed(Failure {
            kind,
            message: message.into(),
        })
    }

    /// The trial's outcome, for the record.
    pub fn outcome(&self) -> TrialOutcome {
        match self {
            Stop::Failed(_) => TrialOutcome::Failed,
            Stop::Gated(_) => TrialOutcome::Gated,
        }
    }

    /// What failed, when the trial ran.
    pub fn kind(&self) -> Option<FailureKind> {
        match self {
            Stop::Failed(f) => Some(f.kind),
            Stop::Gated(_) => None,
        }
    }

    /// The same stop with the text that may hold a server's words passed
    /// through `f` (made safe for a log, secrets scrubbed).
    #[must_use]
    pub fn map_text(self, f: impl Fn(&str) -> String) -> Self {
        match self {
            Stop::Failed(failure) => Stop::Failed(Failure {
                message: f(&failure.message),
                ..failure
            }),
            Stop::Gated(Cause::ServerLost(text)) => Stop::Gated(Cause::ServerLost(f(&text))),
            Stop::Gated(Cause::Config { label, checks, why }) => Stop::Gated(Cause::Config {
                label,
                checks,
                why: why.iter().map(|w| f(w)).collect(),
            }),
            Stop::Gated(Cause::Probes { label, probes, why }) => Stop::Gated(Cause::Probes {
                label,
                probes,
                why: why.iter().map(|w| f(w)).collect(),
            }),
            Stop::Gated(Cause::NoAnswer { label, probe, why }) => Stop::Gated(Cause::NoAnswer {
                label,
                probe,
                why: f(&why),
            }),
            other @ Stop::Gated(_) => other,
        }
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Failed(failure) => f.write_str(&failure.message),
            Stop::Gated(cause) => cause.fmt(f),
        }
    }
}

/// `a, b` and `s::stage::a, s::stage::b`.
fn names(label: &str, stage: &str, items: &[String]) -> (String, String) {
    let trials: Vec<String> = items
        .iter()
        .map(|n| format!("{label}::{stage}::{n}"))
        .collect();
    (items.join(", "), trials.join(", "))
}

/// Lines of a failure kept in its gist: what went wrong, where, what was
/// found and what came back; not the source snippet or the request.
const GIST: [&str; 8] = [
    "error:",
    "-->",
    "found:",
    "note:",
    "help:",
    "received:",
    "content:",
    "reasoning:",
];

/// At most this many lines of each failure in a gated trial's message.
const GIST_LINES: usize = 12;

/// The gist of a failure message, for the trials it gates: its `error:`
/// and `-->` lines, what was found and what came back, as written.
pub fn gist(message: &str) -> String {
    let lines: Vec<&str> = message
        .lines()
        .filter(|l| GIST.iter().any(|p| l.trim_start().starts_with(p)))
        .take(GIST_LINES)
        .collect();
    if lines.is_empty() {
        message.lines().next().unwrap_or("").to_owned()
    } else {
        lines.join("\n")
    }
}

/// Each failed item's trial and the gist of its failure, indented under
/// a gated trial's message.
fn write_causes(
    f: &mut fmt::Formatter<'_>,
    label: &str,
    stage: &str,
    items: &[String],
    why: &[String],
) -> fmt::Result {
    for (item, why) in items.iter().zip(why) {
        write!(f, "\n  {label}::{stage}::{item} failed with:")?;
        for line in why.lines() {
            write!(f, "\n    {line}")?;
        }
    }
    Ok(())
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Config { label, checks, why } => {
                let (list, trials) = names(label, "config", checks);
                write!(
                    f,
                    "gated: config check {list} failed\n  the server does not run the configuration this suite asserts; see {trials}"
                )?;
                write_causes(f, label, "config", checks, why)
            }
            Cause::Probes { label, probes, why } => {
                let (list, trials) = names(label, "correctness", probes);
                write!(
                    f,
                    "gated: correctness probe {list} failed\n  a performance gate never passes on a server that failed its correctness probes; see {trials}"
                )?;
                write_causes(f, label, "correctness", probes, why)
            }
            Cause::Snapshots { label, probes } => {
                let (list, trials) = names(label, "snapshot", probes);
                write!(
                    f,
                    "gated: snapshot {list} changed (`snapshot: gate`)\n  the answer differs from the reviewed one; see {trials}"
                )
            }
            Cause::NoAnswer { label, probe, why } => write!(
                f,
                "gated: correctness probe {probe} got no answer to compare\n  see {label}::correctness::{probe}: {why}"
            ),
            Cause::ServerLost(text) => write!(f, "gated: {text}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_render_their_trials() {
        let c = Cause::Probes {
            label: "s".into(),
            probes: vec!["a".into(), "b".into()],
            why: vec![
                gist(
                    "error: wrong\n --> s.yaml:3:5\n  |\n3 | x\n\nsent:     POST u\n          {}\nreceived: 1 token\n  content:   \"5\"\n",
                ),
                gist("no line of the gist"),
            ],
        };
        assert_eq!(
            c.to_string(),
            "gated: correctness probe a, b failed\n  a performance gate never passes on a server that failed its correctness probes; see s::correctness::a, s::correctness::b\n  s::correctness::a failed with:\n    error: wrong\n     --> s.yaml:3:5\n    received: 1 token\n      content:   \"5\"\n  s::correctness::b failed with:\n    no line of the gist"
        );
        assert_eq!(Stop::Gated(c).outcome(), TrialOutcome::Gated);
        let f = Stop::failed(FailureKind::Probe, "error: x");
        assert_eq!(
            (f.outcome(), f.kind()),
            (TrialOutcome::Failed, Some(FailureKind::Probe))
        );
    }
}
