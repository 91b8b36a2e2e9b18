//! Validated suite types. Every probe, assertion and threshold knows where it
//! was written, so a failure can point at its YAML line.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;

use super::names::names;
use super::node::Loc;
pub use super::tokenizer::Tokenizer;
use crate::suite::metric::MetricKey;
use crate::suite::threshold::Threshold;

/// A loaded, validated suite file.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The suite's name (`suite:`), the first segment of its trial names.
    pub name: String,
    /// The file it came from.
    pub file: SourceFile,
    /// The server under test.
    pub target: Target,
    /// Simulator settings, used when the target is the embedded simulator.
    pub sim: SimSpec,
    /// Assertions on the configuration the server reports, checked first.
    pub expect_server: Vec<ConfigCheck>,
    /// Launch overrides: the suite runs once per variant, each on its own
    /// freshly launched server. Empty: one run, no variant in trial names.
    pub variants: Vec<Variant>,
    /// Correctness probes, in file order.
    pub probes: Vec<Probe>,
    /// Performance gates, in file order (a sweep gives one per level).
    pub gates: Vec<Gate>,
    /// Checks across the levels of sweeps.
    pub curves: Vec<Curve>,
}

/// Checks of how a figure moves across the levels of a sweep.
#[derive(Debug, Clone)]
pub struct Curve {
    /// The sweep gate's name (without the level).
    pub gate: String,
    /// The names of its level gates, in sweep order.
    pub levels: Vec<String>,
    /// What must hold from each level to the next.
    pub checks: Vec<CurveCheck>,
    /// Where `curve:` is written.
    pub loc: Loc,
}

/// One figure's direction across a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct CurveCheck {
    /// The figure.
    pub key: MetricKey,
    /// `true`: must not fall from a level to the next; `false`: must not rise.
    pub rising: bool,
    /// Slack in percent of the previous level's value.
    pub tolerance: f64,
    /// Where the check is written.
    pub loc: Loc,
}

/// A suite file's path (as given) and text, kept for diagnostics.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path as the user named it.
    pub path: PathBuf,
    /// The file's text.
    pub text: Arc<str>,
    /// Its project, absolute: where `snapshots/`, `baselines/` and
    /// `target/servegate/` are (see [`project_root`](super::load::project_root)).
    pub root: PathBuf,
}

impl SourceFile {
    /// The path for messages, with `/` separators.
    pub fn display(&self) -> String {
        self.path.display().to_string()
    }

    /// The path relative to its project (`suites/x.yaml`), as snapshots
    /// record their source.
    pub fn in_project(&self) -> String {
        let abs = super::load::absolute(&self.path);
        abs.strip_prefix(&self.root)
            .unwrap_or(&abs)
            .display()
            .to_string()
    }
}

/// Where the suite's server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseUrl {
    /// The embedded simulator (`sim`, or no `base_url`).
    Sim,
    /// A server at this URL (root, without `/v1`).
    Url(String),
}

/// Which HTTP API requests use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/chat/completions`.
    OpenAiChat,
    /// `POST /v1/completions`.
    OpenAiCompletions,
    /// SGLang's native `POST /generate`.
    SglangGenerate,
    /// llama.cpp's native `POST /completion` (with the server's timings).
    LlamacppCompletion,
}

names!(Api {
    OpenAiChat => "openai-chat",
    OpenAiCompletions => "openai-completions",
    SglangGenerate => "sglang-generate",
    LlamacppCompletion => "llamacpp-completion",
});

/// Deadlines of every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP connect.
    pub connect: Duration,
    /// From sending the request to the first token.
    pub first_token: Duration,
    /// Longest allowed gap between two chunks of a stream.
    pub idle: Duration,
    /// Whole request.
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_token: Duration::from_secs(120),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(600),
        }
    }
}

/// How much of a server's answers is read: past a cap the request fails
/// (a server that never stops sending must not exhaust memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Text of one answer (content and reasoning together).
    pub answer: u64,
    /// Body of one small GET (`/v1/models`, info, health, `/metrics`).
    pub document: u64,
    /// What the streams in flight hold together (line buffers, kept text).
    pub buffers: u64,
}

impl Default for ReadLimits {
    fn default() -> Self {
        Self {
            answer: 8 << 20,
            document: 4 << 20,
            buffers: 256 << 20,
        }
    }
}

/// The server under test.
#[derive(Debug, Clone)]
pub struct Target {
    /// Where it is.
    pub base_url: BaseUrl,
    /// How to talk to it.
    pub api: Api,
    /// The model name sent in requests; the served id when absent.
    pub model: Option<String>,
    /// The NAME of the environment variable that holds the API key.
    pub api_key_env: Option<String>,
    /// NAMES of environment variables whose values are secrets: scrubbed
    /// from everything servegate prints or writes.
    pub secrets: Vec<String>,
    /// Request deadlines.
    pub timeouts: Timeouts,
    /// Byte caps on what is read.
    pub limits: ReadLimits,
    /// A server process servegate starts and stops; its URL is then
    /// `http://<host>:<port>`.
    pub launch: Option<Launch>,
    /// Where `target:` is written.
    pub loc: Loc,
}

/// How to start the server under test.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The argv; `{port}` and `{host}` are replaced in each element.
    pub command: Vec<String>,
    /// Environment variables set for the server (on top of servegate's own);
    /// `{port}` and `{host}` are replaced in values.
    pub env: Vec<(String, String)>,
    /// Working directory; the suite's directory when absent.
    pub cwd: Option<PathBuf>,
    /// Address the server listens on, as the client reaches it.
    pub host: String,
    /// Port; a free one is picked when absent.
    pub port: Option<u16>,
    /// Readiness polling.
    pub ready: Ready,
    /// Log lines that mean the server is broken (regular expressions).
    pub fatal_log_patterns: Vec<Regex>,
    /// Time between SIGTERM and SIGKILL at teardown.
    pub grace: Duration,
    /// Where `launch:` is written.
    pub loc: Loc,
}

/// How readiness is polled.
#[derive(Debug, Clone)]
pub struct Ready {
    /// The path polled until it answers 2xx: `/health_generate` for SGLang
    /// (`sglang-generate`, or `sglang` in the command), `/health` otherwise.
    pub path: String,
    /// Time between polls.
    pub interval: Duration,
    /// How long start-up may take.
    pub timeout: Duration,
}

/// One launch variant of an A/B run.
#[derive(Debug, Clone)]
pub struct Variant {
    /// The name, in trial names as `<suite>[<name>]`.
    pub name: String,
    /// Environment variables set on top of the launch's.
    pub env: Vec<(String, String)>,
    /// Arguments appended to the launch command.
    pub args: Vec<String>,
    /// Where the variant is written.
    pub loc: Loc,
}

/// Which document a configuration check reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// `/get_server_info` (or `/server_info`): the server's arguments.
    ServerInfo,
    /// `/get_model_info` (or `/model_info`).
    ModelInfo,
    /// `/v1/models`.
    Models,
}

names!(ConfigSource {
    ServerInfo => "server_info",
    ModelInfo => "model_info",
    Models => "models",
});

impl ConfigSource {
    /// The paths tried in order.
    pub fn paths(self) -> &'static [&'static str] {
        match self {
            ConfigSource::ServerInfo => &["/get_server_info", "/server_info"],
            ConfigSource::ModelInfo => &["/get_model_info", "/model_info"],
            ConfigSource::Models => &["/v1/models"],
        }
    }
}

/// What a reported configuration value must be.
#[derive(Debug, Clone)]
pub enum ConfigExpect {
    /// Equal (numbers compared as numbers).
    Equals(serde_json::Value),
    /// A string containing this text.
    Contains(String),
    /// A string matching this regex.
    Matches(Regex),
    /// Equal to one of these.
    OneOf(Vec<serde_json::Value>),
}

/// One `expect_server:` assertion.
#[derive(Debug, Clone)]
pub struct ConfigCheck {
    /// The trial name: `<source>.<field path>`.
    pub name: String,
    /// The document read.
    pub source: ConfigSource,
    /// The field: keys and list indexes.
    pub path: Vec<String>,
    /// What it must be.
    pub expect: ConfigExpect,
    /// Where it is written.
    pub loc: Loc,
}

/// Simulator settings of a suite.
#[derive(Debug, Clone, Default)]
pub struct SimSpec {
    /// A profile file (`fixtures/sim/*.yaml`), resolved to a path that exists.
    pub profile: Option<PathBuf>,
}

/// Sampling parameters; `None` leaves the server's default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sampling {
    /// Temperature.
    pub temperature: Option<f64>,
    /// Output token limit.
    pub max_tokens: Option<u32>,
    /// Sampling seed.
    pub seed: Option<u64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Stop sequences.
    pub stop: Option<Vec<String>>,
    /// Chat template arguments (`enable_thinking: false`), chat API only.
    pub chat_template_kwargs: Option<serde_json::Value>,
    /// SGLang's `separate_reasoning`: reasoning in `reasoning_content`
    /// (true) or inline in the content (false). Chat API only.
    pub separate_reasoning: Option<bool>,
}

impl Sampling {
    /// Bytes of the stop sequences: their tokens (at most one per byte)
    /// are counted by a server and cut from the text it sends.
    pub fn stop_bytes(&self) -> u64 {
        self.stop.iter().flatten().map(|s| s.len() as u64).sum()
    }

    /// `self` with every unset field taken from `defaults`.
    #[must_use]
    pub fn or(&self, defaults: &Sampling) -> Sampling {
        Sampling {
            temperature: self.temperature.or(defaults.temperature),
            max_tokens: self.max_tokens.or(defaults.max_tokens),
            seed: self.seed.or(defaults.seed),
            top_p: self.top_p.or(defaults.top_p),
            stop: self.stop.clone().or_else(|| defaults.stop.clone()),
            chat_template_kwargs: self
                .chat_template_kwargs
                .clone()
                .or_else(|| defaults.chat_template_kwargs.clone()),
            separate_reasoning: self.separate_reasoning.or(defaults.separate_reasoning),
        }
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// What a probe sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A user prompt, with an optional system message.
    Prompt {
        /// System message (chat API only).
        system: Option<String>,
        /// User prompt.
        prompt: String,
    },
    /// A whole conversation (chat API only).
    Messages(Vec<Message>),
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
}

names!(Field {
    Content => "content",
    Reasoning => "reasoning",
    All => "all",
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

/// `recheck: [arithmetic, is_prime]` or `recheck: all`: the suite's probes
/// asked again, with their own requests, while a gate's load runs; judged
/// as the idle probe was, compared with its answer, and the load's sampled
/// answers checked for degenerate text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recheck {
    /// Indexes of the probes in the suite's `correctness` list.
    pub probes: Vec<usize>,
    /// Where it is written.
    pub loc: Loc,
}

/// A performance gate.
#[derive(Debug, Clone)]
pub struct Gate {
    /// Name, unique within the suite.
    pub name: String,
    /// Where the gate starts.
    pub loc: Loc,
    /// The load it applies.
    pub load: Load,
    /// The sampling used (suite defaults, output length from `load`).
    pub sampling: Sampling,
    /// What the figures must satisfy.
    pub thresholds: Vec<LocatedThreshold>,
    /// What a request must meet to count as goodput.
    pub slo: Slo,
    /// How many times the load runs; thresholds judge the repeats together.
    pub repeats: u32,
    /// How repeats are judged against a bound.
    pub verdict: VerdictMode,
    /// Probes asked again while the load runs (`recheck:`).
    pub recheck: Option<Recheck>,
    /// The sweep this gate is a level of.
    pub sweep: Option<SweepLevel>,
}

impl Gate {
    /// Its name as a file's path: the gate's, or its sweep's and level.
    pub fn file_parts(&self) -> Vec<&str> {
        file_parts(
            &self.name,
            self.sweep
                .as_ref()
                .map(|s| (s.sweep.as_str(), s.level.as_str())),
        )
    }
}

/// A gate's name as a file's path: `[gate]`, or `[sweep, level]` for a
/// level of a sweep (a directory per sweep).
pub fn file_parts<'a>(gate: &'a str, sweep: Option<(&'a str, &'a str)>) -> Vec<&'a str> {
    sweep.map_or_else(|| vec![gate], |(s, l)| vec![s, l])
}

/// A gate that is one level of a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepLevel {
    /// The sweep's own name (the gate's is `<sweep>::<level>`).
    pub sweep: String,
    /// The level: `concurrency_8`, `rate_2_5`.
    pub level: String,
}

/// How the repeats of a gate are judged against a bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VerdictMode {
    /// The mean of the repeats must meet the bound.
    #[default]
    Mean,
    /// Fail only when the whole 95% interval of the mean is past the bound:
    /// noise alone never fails the gate.
    Lenient,
    /// Pass only when the whole 95% interval meets the bound: noise alone
    /// never passes the gate.
    Strict,
}

names!(VerdictMode {
    Mean => "mean",
    Lenient => "lenient",
    Strict => "strict",
});

/// A threshold and where it is written.
#[derive(Debug, Clone)]
pub struct LocatedThreshold {
    /// The comparison.
    pub threshold: Threshold,
    /// Its YAML location.
    pub loc: Loc,
}

/// What each request of a gate sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadPrompt {
    /// This exact prompt.
    Text(String),
    /// A synthetic prompt of about this many tokens.
    Tokens(u32),
    /// Prompts from a JSONL dataset, in turn.
    Dataset {
        /// The file, for reports.
        path: PathBuf,
        /// Its prompts.
        prompts: Arc<Vec<String>>,
    },
    /// A prefix shared by every request of a group, then a unique suffix.
    SharedPrefix {
        /// Tokens of each group's prefix.
        prefix_tokens: u32,
        /// How many distinct prefixes.
        groups: u32,
        /// Tokens of each request's own suffix.
        suffix_tokens: u32,
    },
}

/// How requests are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// Closed loop: this many workers, each sending its next request when
    /// the previous one ends.
    Closed {
        /// Requests in flight at once.
        concurrency: u32,
    },
    /// Open loop: requests start on a schedule, whether or not earlier ones
    /// have finished; latency counts from each request's intended start.
    Open {
        /// Requests per second.
        rate: f64,
        /// Spacing of the schedule.
        arrival: Arrival,
        /// Seed of a Poisson schedule.
        seed: u64,
        /// At most this many in flight; a request that must wait starts late.
        max_in_flight: Option<u32>,
    },
}

/// Spacing of an open-loop schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Evenly spaced.
    Constant,
    /// Exponential gaps (a Poisson process), seeded.
    Poisson,
}

/// The load of a performance gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    /// How requests are paced.
    pub pace: Pace,
    /// Measured requests; with `duration`, whichever ends first.
    pub requests: Option<u32>,
    /// Longest measured window: no request starts after it.
    pub duration: Option<Duration>,
    /// Requests sent first and left out of every figure.
    pub warmup: u32,
    /// What each request sends.
    pub prompt: LoadPrompt,
    /// Output tokens asked for (`max_tokens`).
    pub output_tokens: u32,
    /// Ask the server to ignore end-of-sequence so every request generates
    /// exactly `output_tokens`.
    pub ignore_eos: bool,
    /// `POST /flush_cache` (SGLang) after the warm-up, before measuring.
    pub flush_cache: bool,
    /// Cuts synthetic prompts to their exact token counts.
    pub tokenizer: Option<Tokenizer>,
    /// Stop the gate after this many consecutive requests failed the same
    /// way (timed out, stalled, or could not connect); 0 never stops.
    pub abort_after: u32,
    /// How many threads of the client drive the load.
    pub client_threads: ClientThreads,
    /// What a gate whose client was the bottleneck does; unset: fail
    /// against a server, warn against the embedded simulator (it shares
    /// the client's process and cores, so the check cannot tell the two
    /// apart, and its figures are no server's).
    pub client_limited: Option<OnClientLimited>,
}

impl Load {
    /// A load of `pace` sending `prompt` for `output_tokens` each, with
    /// every other setting at its default (no bound, no warm-up).
    pub fn new(pace: Pace, prompt: LoadPrompt, output_tokens: u32) -> Self {
        Self {
            pace,
            requests: None,
            duration: None,
            warmup: 0,
            prompt,
            output_tokens,
            ignore_eos: false,
            flush_cache: false,
            tokenizer: None,
            abort_after: 3,
            client_threads: ClientThreads::Auto,
            client_limited: None,
        }
    }
}

/// How many client threads drive a gate's load, each with a runtime of its
/// own and a shard of the streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientThreads {
    /// Chosen from the load (its streams and expected tokens per second),
    /// within the cores the machine has.
    #[default]
    Auto,
    /// This many.
    Fixed(u32),
}

/// What a gate does when its self-check finds that the client, not the
/// server, set its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnClientLimited {
    /// The gate fails, whatever its thresholds say.
    Fail,
    /// The figures are marked `client-limited` and judged as they are.
    Warn,
}

impl OnClientLimited {
    /// `fail` or `warn`.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "fail" => Some(Self::Fail),
            "warn" => Some(Self::Warn),
            _ => None,
        }
    }
}

/// Service-level objectives a request must meet to count as goodput.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slo {
    /// Longest time to first token.
    pub ttft: Option<Duration>,
    /// Longest time per output token.
    pub tpot: Option<Duration>,
    /// Longest end-to-end latency.
    pub e2e: Option<Duration>,
}

impl Slo {
    /// Whether any objective is set.
    pub fn is_set(&self) -> bool {
        self.ttft.is_some() || self.tpot.is_some() || self.e2e.is_some()
    }
}
