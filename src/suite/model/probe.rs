//! Correctness probes: what a probe sends, the assertions on its answer,
//! its contract checks, snapshots, code checks and their sandbox, and
//! dataset (accuracy) probes.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;

use super::Sampling;
use crate::suite::names::names;
use crate::suite::node::Loc;

/// One part of a message's content, in the order the suite wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Text.
    Text(String),
    /// An image (sent as an OpenAI `image_url` part).
    Image(crate::suite::image::Image),
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// Its parts: one text for a plain `content: "…"`.
    pub content: Vec<Part>,
}

impl Message {
    /// A message of text alone.
    #[must_use]
    pub fn text(role: &str, text: &str) -> Message {
        Message {
            role: role.to_owned(),
            content: vec![Part::Text(text.to_owned())],
        }
    }

    /// Its text parts, joined by newlines.
    #[must_use]
    pub fn joined_text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                Part::Image(_) => None,
            })
            .collect();
        texts.join("\n")
    }
}

/// What a probe sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A user prompt, with an optional system message and the images sent
    /// with it.
    Prompt {
        /// System message (chat API only).
        system: Option<String>,
        /// User prompt.
        prompt: String,
        /// Images sent with the prompt: before its text in a chat
        /// message's parts, as `image_data` to SGLang's `/generate`.
        images: Vec<crate::suite::image::Image>,
    },
    /// A whole conversation (chat API only).
    Messages(Vec<Message>),
}

impl Input {
    /// A prompt of text alone.
    #[must_use]
    pub fn prompt(system: Option<String>, prompt: String) -> Input {
        Input::Prompt {
            system,
            prompt,
            images: Vec::new(),
        }
    }

    /// Every image it sends, in order.
    pub fn images(&self) -> impl Iterator<Item = &crate::suite::image::Image> {
        let (own, messages): (&[crate::suite::image::Image], &[Message]) = match self {
            Input::Prompt { images, .. } => (images, &[]),
            Input::Messages(list) => (&[], list),
        };
        own.iter().chain(
            messages
                .iter()
                .flat_map(|m| &m.content)
                .filter_map(|p| match p {
                    Part::Image(i) => Some(i),
                    Part::Text(_) => None,
                }),
        )
    }
}

/// A correctness probe.
#[derive(Debug, Clone)]
pub struct Probe {
    /// Name, unique within the suite.
    pub name: String,
    /// Where the probe starts.
    pub loc: Loc,
    /// What is sent.
    pub input: Input,
    /// Suite defaults merged with the probe's overrides.
    pub sampling: Sampling,
    /// What the answer must satisfy.
    pub expect: Vec<Assertion>,
    /// Whether the answer is kept as a snapshot, and whether a changed
    /// answer gates the performance gates.
    pub snapshot: SnapshotMode,
    /// Ask this many times (at the probe's sampling) and require the same
    /// answer every time.
    pub deterministic: Option<u32>,
    /// A dataset accuracy probe: `input` is then its prompt template.
    pub dataset: Option<DatasetProbe>,
    /// Server-contract checks run with this probe's request.
    pub contract: Vec<Contract>,
    /// A numerics probe: the server scores a fixed text, which asks for
    /// nothing else.
    pub numerics: Option<Numerics>,
    /// A conversation probe (`turns:`): each turn a user message sent with
    /// the conversation so far (`input`'s messages, then every earlier
    /// turn and the model's own answer to it), its answer checked by the
    /// turn's assertions. `expect` is then empty.
    pub turns: Vec<Turn>,
}

/// One user turn of a conversation probe.
#[derive(Debug, Clone)]
pub struct Turn {
    /// Where the turn starts.
    pub loc: Loc,
    /// The user message (its text and images).
    pub message: Message,
    /// What the answer to it must satisfy.
    pub expect: Vec<Assertion>,
}

/// A numerics probe (`numerics:`): the server scores a fixed reference
/// text — the log-probability it gives each of its tokens — and their
/// mean must be the one a known-good configuration of the same model
/// gave, within `within`. A wrong attention backend, a broken kernel or a
/// bad quantization scores text it did not write differently, whatever
/// words it would write itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Numerics {
    /// The text scored.
    pub text: String,
    /// The mean token log-probability of a known-good configuration; `None`
    /// until the suite states it (the probe fails, saying what it measured).
    pub mean_logprob: Option<f64>,
    /// The largest difference from it that passes (nats per token).
    pub within: f64,
}

/// What a probe's snapshot is: `snapshot: false | true | review | gate`.
///
/// A snapshot comparison is a trial of its own, `<suite>::snapshot::<probe>`.
/// `review` (also `true`): a changed answer fails that trial, a review item,
/// and gates nothing. `gate`: it also gates the suite's performance gates,
/// as a failed correctness probe does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SnapshotMode {
    /// No snapshot.
    #[default]
    Off,
    /// Compared and reported; gates nothing.
    Review,
    /// Compared; a changed answer gates the performance gates.
    Gate,
}

impl SnapshotMode {
    /// Every mode by its suite name (`true`/`false` are read as `review`/off).
    pub const ALL: [(&'static str, SnapshotMode); 2] = [
        ("review", SnapshotMode::Review),
        ("gate", SnapshotMode::Gate),
    ];
}

/// A promise of the serving API that a probe can check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    /// No more tokens than `max_tokens`.
    MaxTokens,
    /// With `ignore_eos`, exactly `max_tokens` tokens.
    IgnoreEos,
    /// Usage reported and consistent with the stream.
    Usage,
    /// No stop sequence in the answer.
    Stop,
    /// At temperature 0 the same request twice (the second a prefix-cache
    /// hit) gives the same answer.
    CacheDeterminism,
}

names!(Contract {
    MaxTokens => "max_tokens",
    IgnoreEos => "ignore_eos",
    Usage => "usage",
    Stop => "stop",
    CacheDeterminism => "cache_determinism",
});

/// One question of an accuracy dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QaItem {
    /// The question.
    pub question: String,
    /// The reference answer (GSM8K's `… #### 42` form works).
    pub answer: String,
    /// Its 1-based line in the file.
    pub line: usize,
}

/// How the answer is read from a completion.
#[derive(Debug, Clone)]
pub enum Extract {
    /// The last number, compared as a number with the reference's last number.
    LastNumber,
    /// The whole answer, trimmed, compared with the reference, trimmed.
    Exact,
    /// The regex's first group (or whole match), compared with the reference.
    Regex(Regex),
}

/// Which accuracy figure a threshold reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccuracyStat {
    /// Correct / scored.
    Point,
    /// The lower end of the Wilson 95% interval.
    Lower95,
}

/// `accuracy >= 0.62` / `accuracy.lower95 >= 0.55`.
#[derive(Debug, Clone)]
pub struct AccuracyThreshold {
    /// The figure.
    pub stat: AccuracyStat,
    /// The comparison.
    pub op: crate::suite::threshold::Op,
    /// The bound, between 0 and 1.
    pub bound: f64,
    /// Where it is written.
    pub loc: Loc,
}

/// A probe over a dataset: every scored item asked, graded, and the share
/// right judged by thresholds.
#[derive(Debug, Clone)]
pub struct DatasetProbe {
    /// The file.
    pub path: PathBuf,
    /// What its items are and how they are graded.
    pub task: DatasetTask,
    /// At most this many scored items.
    pub limit: Option<usize>,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// What the share right must be.
    pub thresholds: Vec<AccuracyThreshold>,
}

/// The kinds of dataset (`dataset.format`).
#[derive(Debug, Clone)]
pub enum DatasetTask {
    /// Questions with reference answers (`format: qa`, the default).
    Qa(QaTask),
    /// Code problems run against their own tests in the sandbox
    /// (`format: humaneval`).
    HumanEval(CodeTask),
}

impl DatasetTask {
    /// The name of the share right in thresholds and output: `accuracy`,
    /// or `pass_at_1` for code.
    pub fn figure(&self) -> &'static str {
        match self {
            DatasetTask::Qa(_) => "accuracy",
            DatasetTask::HumanEval(_) => "pass_at_1",
        }
    }
}

/// A question/answer dataset.
#[derive(Debug, Clone)]
pub struct QaTask {
    /// Its items (the first `shots` are the examples, not scored).
    pub items: Arc<Vec<QaItem>>,
    /// Few-shot examples taken from the start of the file.
    pub shots: usize,
    /// The prompt of one item: `{question}` is replaced.
    pub template: String,
    /// How the answer is read.
    pub extract: Extract,
}

/// A code-generation dataset in `HumanEval`'s format.
#[derive(Debug, Clone)]
pub struct CodeTask {
    /// Its problems.
    pub problems: Arc<Vec<CodeProblem>>,
    /// How each program runs in the sandbox.
    pub limits: ProgramLimits,
}

/// One `HumanEval` problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeProblem {
    /// `HumanEval/0`.
    pub task_id: String,
    /// The function's imports, signature and docstring.
    pub prompt: String,
    /// The function's name, passed to `check`.
    pub entry_point: String,
    /// Python defining `check(candidate)`.
    pub test: String,
    /// Its 1-based line in the (decompressed) file.
    pub line: usize,
}

/// Which text of a completion an assertion reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The answer (`content`).
    Content,
    /// The reasoning (`reasoning_content`).
    Reasoning,
    /// Reasoning, then content.
    All,
    /// The tool calls (`delta.tool_calls`), as a JSON list of
    /// `{"name", "arguments"}` (arguments parsed where they are JSON).
    ToolCalls,
}

names!(Field {
    Content => "content",
    Reasoning => "reasoning",
    All => "all",
    ToolCalls => "tool_calls",
});

/// One assertion on a completion.
#[derive(Debug, Clone)]
pub struct Assertion {
    /// What is checked.
    pub check: Check,
    /// Which text is checked.
    pub field: Field,
    /// Where the assertion is written.
    pub loc: Loc,
}

/// The kinds of assertion.
#[derive(Debug, Clone)]
pub enum Check {
    /// The text, trimmed, equals this.
    Equals(String),
    /// The text contains this.
    Contains(String),
    /// The text does not contain this.
    NotContains(String),
    /// The text matches.
    Regex(Regex),
    /// The text does not match.
    NotRegex(Regex),
    /// The text, leading whitespace trimmed, starts with this.
    StartsWith(String),
    /// The last number in the text is within `tolerance` of `value`.
    Number {
        /// Expected value.
        value: f64,
        /// Allowed absolute difference.
        tolerance: f64,
    },
    /// The text, trimmed, equals one of these.
    OneOf(Vec<String>),
    /// The text is JSON; optionally the value at `pointer` equals `equals`.
    Json {
        /// A JSON pointer (`/a/0/b`) and the value expected there.
        pointer: Option<(String, serde_json::Value)>,
    },
    /// The finish reason is this (`stop`, `length`).
    FinishReason(String),
    /// At least this many characters.
    MinChars(usize),
    /// At most this many characters.
    MaxChars(usize),
    /// The answer's code passes tests when run in the sandbox.
    Code(CodeSpec),
    /// The text is not degenerate (`crate::check::degenerate`).
    NotDegenerate(Degeneracy),
    /// The answer calls the tool `name` with arguments that are JSON valid
    /// against `arguments` (the offered tool's parameters, where the probe
    /// offers it through `tools:`).
    ToolCall {
        /// The function a call must name.
        name: String,
        /// The JSON Schema its arguments must meet; `None`: JSON at all.
        arguments: Option<serde_json::Value>,
    },
    /// The text is JSON valid against this JSON Schema (`None` until the
    /// probe's `response_format` schema fills it in: `json_schema: true`).
    JsonSchema(Option<serde_json::Value>),
}

/// What `not_degenerate` tolerates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Degeneracy {
    /// The largest share of the text that may copy an earlier stretch of it
    /// (judged from 64 characters).
    pub max_repeat_share: f64,
    /// The longest run of one non-whitespace character.
    pub max_char_run: usize,
    /// Replacement (U+FFFD) and control characters allowed.
    pub max_bad_chars: usize,
}

impl Default for Degeneracy {
    /// Prose repeats under 30% of itself, working code under 40%, a list
    /// of similar asserts about 55%; a decode loop 90% and more. A run of 80
    /// is a full line of `=`.
    fn default() -> Self {
        Self {
            max_repeat_share: 0.6,
            max_char_run: 80,
            max_bad_chars: 0,
        }
    }
}

/// An executable code check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeSpec {
    /// The language of the fenced block taken from the answer (`python`).
    pub language: String,
    /// Lines appended to the code (`assert is_prime(97)`).
    pub tests: Vec<String>,
    /// How it runs.
    pub limits: ProgramLimits,
}

/// What a suite demands of the sandbox (`sandbox:` at its top level).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SandboxPolicy {
    /// Use every layer the host allows.
    #[default]
    Best,
    /// Refuse to run a program unless every layer the sandbox requires is active.
    Strict,
}

names!(SandboxPolicy {
    Best => "best",
    Strict => "strict",
});

/// How a code check's program runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramLimits {
    /// The interpreter's argv; the program's file is appended.
    pub interpreter: Vec<String>,
    /// The file name the program is written to (`probe.py`).
    pub file_name: String,
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Address-space limit of each process and, where a cgroup is
    /// available, of all of them together, in MiB.
    pub memory_mib: u64,
    /// What the suite demands of the sandbox.
    pub policy: SandboxPolicy,
    /// Paths the program may read beyond the system's (`sandbox.read`).
    pub read: Vec<std::path::PathBuf>,
}
