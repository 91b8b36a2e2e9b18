//! A trial in the record: how it ended (outcome, failure kind), what it
//! is (its typed id: suite, stage, item, part) and what a probe sent and
//! got back (its exchange, kept scrubbed and cut).

use serde::{Deserialize, Serialize};

/// How a trial ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialOutcome {
    /// It passed.
    Passed,
    /// It ran and failed.
    Failed,
    /// It did not run: something it depends on failed first (a probe, a
    /// config check, the server). It counts as failed everywhere.
    Gated,
}

impl TrialOutcome {
    /// Whether the trial passed.
    pub fn passed(self) -> bool {
        self == TrialOutcome::Passed
    }

    /// As the record writes it.
    pub fn name(self) -> &'static str {
        match self {
            TrialOutcome::Passed => "passed",
            TrialOutcome::Failed => "failed",
            TrialOutcome::Gated => "gated",
        }
    }
}

/// What failed in a failed trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The suite file could not be loaded (its `<suite>::load` trial).
    Suite,
    /// The target could not be reached or launched.
    Target,
    /// The server's configuration is not the one asserted.
    Config,
    /// A correctness probe's answer (or its request).
    Probe,
    /// An answer differs from its reviewed snapshot.
    Snapshot,
    /// A performance gate: a threshold, or a load that could not run.
    Gate,
    /// The server died, hung or logged a fatal line during the trial.
    Server,
}

/// The stages of a suite's run, in their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The suite file itself, when it cannot be loaded: its one trial is
    /// `<suite>::load`, and nothing else of it runs.
    Load,
    /// `expect_server` checks.
    Config,
    /// Correctness probes.
    Correctness,
    /// Snapshot comparisons of the probes' answers.
    Snapshot,
    /// Performance gates, their rechecks and curves.
    Performance,
}

impl Stage {
    /// As a trial's name and the record write it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Load => "load",
            Stage::Config => "config",
            Stage::Correctness => "correctness",
            Stage::Snapshot => "snapshot",
            Stage::Performance => "performance",
        }
    }
}

/// The trial of a gate other than the gate itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// `<gate>::recheck`: the probes asked again under the gate's load.
    Recheck,
    /// `<sweep>::curve`: how a figure moves across a sweep's levels.
    Curve,
}

impl Part {
    /// As a trial's name writes it.
    pub fn name(self) -> &'static str {
        match self {
            Part::Recheck => "recheck",
            Part::Curve => "curve",
        }
    }
}

/// Which trial: built once from the suite, its name rendered from it and
/// never parsed back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TrialId {
    /// `<suite>` or `<suite>[<variant>]`.
    pub suite: String,
    /// Its stage.
    pub stage: Stage,
    /// The item of the suite (a check, probe or gate; a sweep's level
    /// gate is `<sweep>::concurrency_8`, a curve's item its sweep).
    #[serde(default)]
    pub item: String,
    /// What of the item, when not the item itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<Part>,
}

impl TrialId {
    /// The item itself.
    pub fn new(suite: &str, stage: Stage, item: &str) -> TrialId {
        TrialId {
            suite: suite.to_owned(),
            stage,
            item: item.to_owned(),
            part: None,
        }
    }

    /// A part of the item.
    #[must_use]
    pub fn part(mut self, part: Part) -> TrialId {
        self.part = Some(part);
        self
    }

    /// The one trial of a suite file that could not be loaded.
    pub fn load(suite: &str) -> TrialId {
        TrialId::new(suite, Stage::Load, "")
    }

    /// The libtest name: `<suite>::<stage>::<item>[::<part>]`, or
    /// `<suite>::load` for a suite file that could not be loaded.
    pub fn name(&self) -> String {
        format!("{}::{}", self.suite, self.within_suite())
    }

    /// The name within its suite: `<stage>::<item>[::<part>]`, or `load`.
    pub(crate) fn within_suite(&self) -> String {
        if self.stage == Stage::Load {
            return Stage::Load.name().to_owned();
        }
        format!("{}::{}", self.stage.name(), self.within_stage())
    }

    /// The item with its part, as the name writes them after the stage.
    pub(crate) fn within_stage(&self) -> String {
        match self.part {
            Some(p) => format!("{}::{}", self.item, p.name()),
            None => self.item.clone(),
        }
    }
}

/// How one trial ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrialRecord {
    /// The libtest name (`suite[variant]::stage::item`).
    pub name: String,
    /// Which trial: `suite`, `stage`, `item` and `part`.
    #[serde(flatten)]
    pub id: TrialId,
    /// How it ended.
    pub outcome: TrialOutcome,
    /// What failed, for a failed trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FailureKind>,
    /// Wall time of the trial, seconds.
    pub duration_s: f64,
    /// The suite file.
    pub file: String,
    /// The 1-based line of the item in it.
    pub line: u32,
    /// The 1-based line in `file` its failure points at (the assertion
    /// or threshold that failed), where it points at one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub points_at: Option<u32>,
    /// The whole failure message, for a failed trial.
    #[serde(default)]
    pub message: Option<String>,
    /// Why it failed, as data, where there is more to say than its kind
    /// ([`super::FailureCause`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<super::FailureCause>,
    /// A correctness probe's request and answer.
    #[serde(default)]
    pub exchange: Option<Exchange>,
}

/// What a probe sent and what came back. An answer is kept scrubbed, and
/// as an excerpt of its first `crate::text::KEPT_CHARS` characters when longer: its
/// length and hash say what the whole was.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Exchange {
    /// The request body.
    pub request: serde_json::Value,
    /// The answer (scrubbed; its first `crate::text::KEPT_CHARS` characters).
    pub content: String,
    /// Characters of the whole (scrubbed) answer.
    #[serde(default)]
    pub content_chars: usize,
    /// SHA-256 of the whole scrubbed answer's UTF-8, lower-case hex.
    #[serde(default)]
    pub content_sha256: String,
    /// The reasoning, when the server separated it (kept as the answer is).
    #[serde(default)]
    pub reasoning: String,
    /// Characters of the whole reasoning.
    #[serde(default)]
    pub reasoning_chars: usize,
    /// SHA-256 of the whole scrubbed reasoning.
    #[serde(default)]
    pub reasoning_sha256: String,
    /// The finish reason.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Prompt tokens the request's images took, where the server reported
    /// them (SGLang's `prompt_tokens_details.image_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_tokens: Option<u64>,
    /// The programs its code checks ran: the sandbox layers that held
    /// each, how long it ran, what the sandbox stopped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandbox: Vec<crate::check::code::CodeRun>,
}

impl Exchange {
    /// What the record keeps of a probe's request and answer.
    #[must_use]
    pub fn new(
        request: serde_json::Value,
        answer: &crate::client::Completion,
        sandbox: Vec<crate::check::code::CodeRun>,
    ) -> Exchange {
        let content = crate::text::Kept::of(&answer.content);
        let reasoning = crate::text::Kept::of(&answer.reasoning);
        Exchange {
            request,
            content: content.text,
            content_chars: content.chars,
            content_sha256: content.sha256,
            reasoning: reasoning.text,
            reasoning_chars: reasoning.chars,
            reasoning_sha256: reasoning.sha256,
            finish_reason: answer.finish_reason.clone(),
            image_tokens: answer.server_report.image_tokens,
            sandbox,
        }
    }

    /// The answer as kept.
    #[must_use]
    pub fn answer(&self) -> crate::text::Kept {
        crate::text::Kept {
            text: self.content.clone(),
            chars: self.content_chars,
            sha256: self.content_sha256.clone(),
        }
    }
}
