//! Why a trial failed, as data beside its rendered message: what a reader
//! of the record (a dashboard, a bot that files the regression, a library
//! user's listener) can act on without parsing text. Every string in it
//! is bounded to [`KEPT_CHARS`](crate::text::KEPT_CHARS) characters when it
//! is made and passes through the same scrubbing as the message.

use serde::{Deserialize, Serialize};

use super::ThresholdVerdict;
use crate::suite::node::Loc;

/// Why a failed trial failed. Absent for a gated trial (its message names
/// the trials it waited for) and for the failures that have nothing to
/// say beyond their kind and message (a target not reached, a server lost,
/// a dataset's share, a numerics probe, a curve, a recheck).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FailureCause {
    /// The suite file did not load: every problem, at its place.
    Diagnostics {
        /// Each problem, in the file's order.
        problems: Vec<Diagnosed>,
    },
    /// A request got no answer: its class, as a gate's `errors` count them
    /// (`connect`, `timeout`, `http`, `in-stream error`, `protocol`,
    /// `transport`, `oversize`, `aborted`, `short`).
    Request {
        /// The class.
        class: String,
        /// The HTTP status, for the class `http`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
    },
    /// A config check (`expect_server`) that did not hold: the server runs
    /// another configuration than the one the suite asserts.
    Config {
        /// The document read: `server_info`, `model_info`, `models`, …
        document: String,
        /// The field checked, as the suite writes its path (`tp_size`,
        /// `data.0.id`).
        field: String,
        /// What was expected (`expected 8`, `one of "fa3", "triton"`).
        expected: String,
        /// The value found, as JSON, where the field was there.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        found: Option<String>,
        /// Whether the value differs, the field is missing, or the server
        /// did not report the document at all.
        state: ConfigState,
    },
    /// Checks of a probe's answer that did not hold.
    Assertions {
        /// Each one, the whole-answer checks (contract, determinism) first.
        failed: Vec<CheckFailed>,
    },
    /// The answer is not its reviewed snapshot.
    Snapshot {
        /// The snapshot file, as the message shows it.
        path: String,
        /// Whether there was one to compare with.
        state: SnapshotState,
    },
    /// Thresholds of a gate that did not hold, each with its verdict;
    /// `client_at_stake` when the client's own error could have changed a
    /// verdict and the gate fails for it.
    Thresholds {
        /// The verdicts of the thresholds that failed.
        failed: Vec<ThresholdVerdict>,
        /// Whether the client self-check failed the gate.
        #[serde(default)]
        client_at_stake: bool,
    },
}

/// One problem of a suite file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Diagnosed {
    /// The 1-based line (0 where the problem has no place in the file).
    pub line: u32,
    /// The 1-based column.
    pub column: u32,
    /// What is wrong.
    pub message: String,
    /// What would have been accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// A suggestion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

/// A check of an answer that did not hold.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckFailed {
    /// What was expected (`content matches regex \b4\b`), or what is wrong
    /// for a whole-answer check.
    pub expected: String,
    /// What was found instead, where more can be said than the answer
    /// itself (which is the trial's `exchange`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<String>,
    /// The 1-based line of the suite file the check is written at.
    pub line: u32,
}

/// How a config check failed.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ConfigState {
    /// The field holds another value than the one expected.
    Mismatch,
    /// The document has no such field.
    Missing,
    /// The server did not answer with the document (no path of it
    /// answered, or not with JSON): its configuration could not be read.
    Unreported,
}

/// A snapshot comparison that failed.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotState {
    /// No snapshot was recorded yet.
    New,
    /// The stored answer differs.
    Changed,
    /// The stored snapshot could not be read.
    Unreadable,
}

impl FailureCause {
    /// The same cause with every text passed through `f` (made safe for a
    /// log, secrets scrubbed), as the message's is, then bounded again:
    /// escaping makes a text longer.
    #[must_use]
    pub fn map_text(self, f: impl Fn(&str) -> String) -> Self {
        let g = |text: &str| bounded(&f(text));
        match self {
            FailureCause::Diagnostics { problems } => FailureCause::Diagnostics {
                problems: problems
                    .into_iter()
                    .map(|p| Diagnosed {
                        message: g(&p.message),
                        expected: p.expected.as_deref().map(g),
                        help: p.help.as_deref().map(g),
                        ..p
                    })
                    .collect(),
            },
            FailureCause::Assertions { failed } => FailureCause::Assertions {
                failed: failed
                    .into_iter()
                    .map(|c| CheckFailed {
                        expected: g(&c.expected),
                        found: c.found.as_deref().map(g),
                        line: c.line,
                    })
                    .collect(),
            },
            FailureCause::Snapshot { path, state } => FailureCause::Snapshot {
                path: g(&path),
                state,
            },
            FailureCause::Config {
                document,
                field,
                expected,
                found,
                state,
            } => FailureCause::Config {
                document,
                field: g(&field),
                expected: g(&expected),
                found: found.as_deref().map(g),
                state,
            },
            FailureCause::Thresholds {
                failed,
                client_at_stake,
            } => FailureCause::Thresholds {
                failed: failed
                    .into_iter()
                    .map(|v| ThresholdVerdict {
                        written: g(&v.written),
                        reference_from: v.reference_from.as_deref().map(g),
                        not_applied: v.not_applied.as_deref().map(g),
                        ..v
                    })
                    .collect(),
                client_at_stake,
            },
            other @ FailureCause::Request { .. } => other,
        }
    }
}

impl FailureCause {
    /// The same cause scrubbed of every secret known now (a record is
    /// scrubbed again when it is written, with the secrets registered since
    /// the cause was made) and bounded again: `<redacted>` can be longer
    /// than what it replaces.
    #[must_use]
    pub(crate) fn rescrubbed(self) -> Self {
        self.map_text(str::to_owned)
    }
}

/// `text` as a cause keeps it: scrubbed of every known secret and cut to
/// [`KEPT_CHARS`](crate::text::KEPT_CHARS) characters, an ellipsis saying
/// it was.
pub(crate) fn bounded(text: &str) -> String {
    // Scrubbed before it is cut: a secret cut in two would no longer be
    // found.
    match crate::secrets::cut_scrubbed(&crate::secrets::scrub(text), crate::text::KEPT_CHARS) {
        (whole, None) => whole,
        (mut cut, Some(_)) => {
            cut.push('…');
            cut
        }
    }
}

impl Diagnosed {
    /// A suite file's problem as the record keeps it.
    pub fn of(d: &crate::suite::diagnostics::Diagnostic) -> Self {
        let Loc { line, column, .. } = d.loc;
        Diagnosed {
            line,
            column,
            message: bounded(&d.message),
            expected: d.expected.as_deref().map(bounded),
            help: d.help.as_deref().map(bounded),
        }
    }
}

impl CheckFailed {
    /// A check at `loc` that expected `expected` and found `found`.
    pub fn new(expected: &str, found: Option<&str>, loc: Loc) -> Self {
        CheckFailed {
            expected: bounded(expected),
            found: found.map(bounded),
            line: loc.line,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_reads_back_as_written_and_its_texts_are_bounded() {
        let long = "x".repeat(crate::text::KEPT_CHARS + 10);
        let loc = Loc {
            line: 7,
            column: 3,
            len: 1,
        };
        let cause = FailureCause::Assertions {
            failed: vec![CheckFailed::new("content contains \"4\"", Some(&long), loc)],
        };
        let json = serde_json::to_value(&cause).unwrap();
        assert_eq!(json["type"], "assertions");
        assert_eq!(json["failed"][0]["line"], 7);
        let found = json["failed"][0]["found"].as_str().unwrap();
        assert_eq!(found.chars().count(), crate::text::KEPT_CHARS + 1);
        assert!(found.ends_with('…'));
        let back: FailureCause = serde_json::from_value(json).unwrap();
        assert_eq!(back, cause);
        let request = FailureCause::Request {
            class: "http".into(),
            status: Some(503),
        };
        assert_eq!(
            serde_json::to_string(&request).unwrap(),
            r#"{"type":"request","class":"http","status":503}"#
        );
    }

    #[test]
    fn its_texts_pass_through_the_scrubber_the_message_does() {
        let cause = FailureCause::Assertions {
            failed: vec![CheckFailed::new(
                "content is not degenerate",
                Some("\u{1b}[2Jwiped"),
                Loc::default(),
            )],
        };
        let FailureCause::Assertions { failed } = cause.map_text(crate::text::for_log) else {
            panic!("the kind of cause changed");
        };
        assert_eq!(failed[0].found.as_deref(), Some("\\u{1b}[2Jwiped"));
        // Escaping makes a text longer: it is bounded again after.
        let escapes = "\u{1b}".repeat(crate::text::KEPT_CHARS);
        let cause = FailureCause::Assertions {
            failed: vec![CheckFailed::new("x", Some(&escapes), Loc::default())],
        };
        let FailureCause::Assertions { failed } = cause.map_text(crate::text::for_log) else {
            panic!("the kind of cause changed");
        };
        let found = failed[0].found.as_deref().unwrap_or_default();
        assert_eq!(found.chars().count(), crate::text::KEPT_CHARS + 1);
        assert!(found.starts_with("\\u{1b}\\u{1b}"), "{found:.20}");
        // A threshold's verdict's texts too: the history's words in
        // `reference_from`.
        let verdict = ThresholdVerdict {
            key: "ttft.p99".parse().expect("a key"),
            op: crate::suite::threshold::Op::Le,
            bound: None,
            reference: None,
            measured: None,
            repeats: Vec::new(),
            line: 1,
            implicit: false,
            not_applied: None,
            client_error: None,
            written: "baseline".into(),
            reference_from: Some(escapes.clone()),
        };
        let cause = FailureCause::Thresholds {
            failed: vec![verdict],
            client_at_stake: false,
        };
        let FailureCause::Thresholds { failed, .. } = cause.map_text(crate::text::for_log) else {
            panic!("the kind of cause changed");
        };
        let from = failed[0].reference_from.as_deref().unwrap_or_default();
        assert_eq!(from.chars().count(), crate::text::KEPT_CHARS + 1);
    }
}
