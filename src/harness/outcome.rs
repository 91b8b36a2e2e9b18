//! How a trial ended, as types: passed, failed (with what kind of failure
//! and its whole message), or gated (it did not run, and why). Rendered to
//! text only at the edges: libtest's failure section, the record, the
//! reports.

use std::fmt;

use crate::check::message::Message;
use crate::record::{FailureCause, FailureKind, Stage, TrialId, TrialOutcome};
use crate::suite::node::Loc;

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
    /// Why, as data, where there is more to say than the kind (boxed: a
    /// verdict is passed by value, and most are `Ok`).
    pub cause: Option<Box<FailureCause>>,
    /// Where in which file, what was sent, what came back, what was
    /// expected: the whole message, its gist and places marked.
    pub message: Message,
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
        /// The gist of each one's failure ([`Stop::gist`]), in the same
        /// order: a filtered run may not show their trials.
        why: Vec<String>,
    },
    /// Correctness probes failed: a gate never passes on such a server.
    Probes {
        /// `<suite>` or `<suite>[<variant>]`.
        label: String,
        /// The probes that failed.
        probes: Vec<String>,
        /// The gist of each one's failure ([`Stop::gist`]), in the same order.
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
    pub fn failed(kind: FailureKind, message: impl Into<Message>) -> Self {
        Stop::Failed(Failure {
            kind,
            cause: None,
            message: message.into(),
        })
    }

    /// A failure of `kind` for `cause`, with its message.
    pub(crate) fn failed_for(
        kind: FailureKind,
        cause: FailureCause,
        message: impl Into<Message>,
    ) -> Self {
        Stop::Failed(Failure {
            kind,
            cause: Some(Box::new(cause)),
            message: message.into(),
        })
    }

    /// Why a failed trial failed, as data.
    pub fn cause(&self) -> Option<&FailureCause> {
        match self {
            Stop::Failed(f) => f.cause.as_deref(),
            Stop::Gated(_) => None,
        }
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

    /// The gist of a failure, for the trials it gates: the lines its
    /// message marks as gist; a gated trial's first line.
    pub fn gist(&self) -> String {
        match self {
            Stop::Failed(f) => f.message.gist(),
            Stop::Gated(cause) => cause.to_string().lines().next().unwrap_or("").to_owned(),
        }
    }

    /// What went wrong in one line: a failure's first `error:` (without
    /// the label), a gated trial's first line.
    pub fn headline(&self) -> String {
        match self {
            Stop::Failed(f) => f.message.headline(),
            Stop::Gated(cause) => cause.to_string().lines().next().unwrap_or("").to_owned(),
        }
    }

    /// The place in the trial's suite file a failure points at: the
    /// assertion or threshold that failed.
    pub fn points_at(&self) -> Option<Loc> {
        match self {
            Stop::Failed(f) => f.message.points_at(),
            Stop::Gated(_) => None,
        }
    }

    /// The same stop with the text that may hold a server's words passed
    /// through `f` (made safe for a log, secrets scrubbed).
    #[must_use]
    pub(crate) fn map_text(self, f: impl Fn(&str) -> String) -> Self {
        match self {
            Stop::Failed(failure) => Stop::Failed(Failure {
                message: failure.message.map_text(&f),
                cause: failure.cause.map(|c| Box::new(c.map_text(&f))),
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
            Stop::Failed(failure) => failure.message.fmt(f),
            Stop::Gated(cause) => cause.fmt(f),
        }
    }
}

/// `a, b` and `s::stage::a, s::stage::b`: the items and their trials'
/// names, each rendered from its [`TrialId`].
fn names(label: &str, stage: Stage, items: &[String]) -> (String, String) {
    let trials: Vec<String> = items
        .iter()
        .map(|n| TrialId::new(label, stage, n).name())
        .collect();
    (items.join(", "), trials.join(", "))
}

/// Each failed item's trial and the gist of its failure, indented under
/// a gated trial's message.
fn write_causes(
    f: &mut fmt::Formatter<'_>,
    label: &str,
    stage: Stage,
    items: &[String],
    why: &[String],
) -> fmt::Result {
    for (item, why) in items.iter().zip(why) {
        write!(
            f,
            "\n  {} failed with:",
            TrialId::new(label, stage, item).name()
        )?;
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
                let (list, trials) = names(label, Stage::Config, checks);
                write!(
                    f,
                    "gated: config check {list} failed\n  the server does not run the configuration this suite asserts; see {trials}"
                )?;
                write_causes(f, label, Stage::Config, checks, why)
            }
            Cause::Probes { label, probes, why } => {
                let (list, trials) = names(label, Stage::Correctness, probes);
                write!(
                    f,
                    "gated: correctness probe {list} failed\n  a performance gate never passes on a server that failed its correctness probes; see {trials}"
                )?;
                write_causes(f, label, Stage::Correctness, probes, why)
            }
            Cause::Snapshots { label, probes } => {
                let (list, trials) = names(label, Stage::Snapshot, probes);
                write!(
                    f,
                    "gated: snapshot {list} changed (`snapshot: gate`)\n  the answer differs from the reviewed one; see {trials}"
                )
            }
            Cause::NoAnswer { label, probe, why } => write!(
                f,
                "gated: correctness probe {probe} got no answer to compare\n  see {}: {why}",
                TrialId::new(label, Stage::Correctness, probe).name()
            ),
            Cause::ServerLost(text) => write!(f, "gated: {text}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;
    use std::path::PathBuf;

    use super::*;
    use crate::check::message::Label;
    use crate::suite::SourceFile;

    /// A probe's failure: an assertion at line 3, what was sent, what
    /// came back.
    fn wrong() -> Message {
        let file = SourceFile {
            path: PathBuf::from("s.yaml"),
            text: "a:\nb:\n    x\n".into(),
            root: PathBuf::from("."),
        };
        let mut m = Message::of_error("wrong");
        m.at(
            &file,
            Loc {
                line: 3,
                column: 5,
                len: 1,
            },
        );
        let _ = writeln!(m, "\nsent:     POST u\n          {{}}");
        m.line(Label::Received, "1 token")
            .line(Label::Content, "\"5\"");
        m
    }

    #[test]
    fn causes_render_their_trials() {
        let c = Cause::Probes {
            label: "s".into(),
            probes: vec!["a".into(), "b".into()],
            why: vec![
                Stop::failed(FailureKind::Probe, wrong()).gist(),
                Stop::failed(FailureKind::Probe, "no line of the gist").gist(),
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
