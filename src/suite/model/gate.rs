//! Performance gates: the load a gate applies, its thresholds, SLOs and
//! repeats, the levels of a sweep and the curve checks across them, and
//! the probes rechecked under load.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{Sampling, Tokenizer};
use crate::suite::metric::MetricKey;
use crate::suite::names::names;
use crate::suite::node::Loc;
use crate::suite::threshold::Threshold;

/// Checks of how a figure moves across the levels of a sweep.
#[derive(Debug, Clone)]
pub struct Curve {
    /// The sweep gate's name (without the level).
    pub gate: String,
    /// Its level gates, in sweep order: where they stand in the suite's
    /// `gates`.
    pub levels: std::ops::Range<usize>,
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
    /// The probes whose pass it waits for (`needs:`), as indexes into the
    /// suite's probes; `None`: every probe.
    pub needs: Option<Vec<usize>>,
}

impl Gate {
    /// The probes it waits for, of a suite with `probes` probes: those it
    /// `needs`, else every one.
    pub fn needed(&self, probes: usize) -> Vec<usize> {
        self.needs.clone().unwrap_or_else(|| (0..probes).collect())
    }

    /// Its name as a file's path: the gate's, or its sweep's and level.
    pub(crate) fn file_parts(&self) -> Vec<&str> {
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
pub(crate) fn file_parts<'a>(gate: &'a str, sweep: Option<(&'a str, &'a str)>) -> Vec<&'a str> {
    sweep.map_or_else(|| vec![gate], |(s, l)| vec![s, l])
}

/// A gate that is one level of a sweep (the record keeps it as written
/// here: `sweep`, `level`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// Tokens in one block of a Mooncake trace's `hash_ids`.
pub const TRACE_BLOCK_TOKENS: u32 = 512;

/// What one record of a load's dataset sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordPrompt {
    /// Its user turns, in order (at least one).
    Turns(Vec<String>),
    /// A Mooncake trace's prompt, of which only lengths are known: `tokens`
    /// tokens in blocks of [`TRACE_BLOCK_TOKENS`], block `hash_ids[j]` the
    /// same words wherever the trace names it (so the trace's shared
    /// prefixes are shared), the last block cut to length.
    Blocks {
        /// The blocks, in order.
        hash_ids: Vec<u64>,
        /// The prompt's length.
        tokens: u32,
    },
}

impl RecordPrompt {
    /// How many user turns it has.
    #[must_use]
    pub fn turns(&self) -> usize {
        match self {
            Self::Turns(t) => t.len(),
            Self::Blocks { .. } => 1,
        }
    }
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
        /// What each record sends.
        prompts: Arc<Vec<RecordPrompt>>,
        /// Each record's answer's length in tokens, asked of its request
        /// as `max_tokens` (`output_tokens: dataset`).
        outputs: Option<Arc<Vec<u32>>>,
        /// Each record's time from the first record's (`arrival: trace`),
        /// before any slowdown.
        times: Option<Arc<Vec<Duration>>>,
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

impl Pace {
    /// This pace with an open loop's rate set (a trace's mean, known once
    /// its records are read); a closed loop as it is.
    #[must_use]
    pub fn with_rate(self, rate: f64) -> Self {
        match self {
            Self::Open {
                arrival,
                seed,
                max_in_flight,
                ..
            } => Self::Open {
                rate,
                arrival,
                seed,
                max_in_flight,
            },
            closed @ Self::Closed { .. } => closed,
        }
    }
}

/// Spacing of an open-loop schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// Evenly spaced.
    Constant,
    /// Exponential gaps (a Poisson process), seeded.
    Poisson,
    /// Gamma-distributed gaps of mean `1 / rate`, seeded: `burstiness`
    /// is the shape (1 is Poisson; below 1 burstier, above more even),
    /// as vLLM's `bench serve --burstiness` draws them (SGLang 0.5.23's `bench_serving` has Poisson only).
    Gamma {
        /// The gamma distribution's shape.
        burstiness: f64,
    },
    /// At the times the dataset's records carry (`timestamp`, in ms),
    /// each gap `slowdown` times as long.
    Trace {
        /// How many times slower than recorded the trace is played.
        slowdown: f64,
    },
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
    /// Output tokens asked for (`max_tokens`); the most of any request
    /// when a dataset's answers set each request's own.
    pub output_tokens: u32,
    /// Ask the server to ignore end-of-sequence so every request generates
    /// exactly `output_tokens`.
    pub ignore_eos: bool,
    /// `POST /flush_cache` (SGLang) after the warm-up, before measuring.
    pub flush_cache: bool,
    /// Cuts synthetic prompts to their exact token counts.
    pub tokenizer: Option<Tokenizer>,
    /// Requests come in sessions of several turns, each carrying the
    /// conversation so far.
    pub conversation: Option<Conversation>,
    /// Images each request sends beside its prompt.
    pub images: Option<LoadImages>,
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
    /// Whether its requests are meant to share prompts' beginnings: a
    /// shared prefix, a conversation's history, a trace's blocks.
    #[must_use]
    pub fn asks_for_reuse(&self) -> bool {
        self.conversation.is_some()
            || match &self.prompt {
                LoadPrompt::SharedPrefix { .. } => true,
                LoadPrompt::Dataset { prompts, .. } => prompts
                    .iter()
                    .any(|p| matches!(p, RecordPrompt::Blocks { .. })),
                LoadPrompt::Text(_) | LoadPrompt::Tokens(_) => false,
            }
    }

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
            conversation: None,
            images: None,
            abort_after: 3,
            client_threads: ClientThreads::Auto,
            client_limited: None,
        }
    }
}

/// The images each request of a load sends beside its prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadImages {
    /// How many a request.
    pub count: u32,
    /// What they are.
    pub source: ImageSource,
}

/// Where a load's images come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageSource {
    /// One-colour PNGs of a size, another colour for every request of a
    /// window (no server's image cache serves one from another).
    Generated {
        /// Pixels across.
        width: u32,
        /// Pixels down.
        height: u32,
        /// The PNG each request's copy is recoloured from
        /// ([`crate::media::flat_png`]).
        png: Arc<[u8]>,
    },
    /// The image files of a directory, read when the suite loads, sent in
    /// turn from one a window draws.
    Files {
        /// The directory, for reports.
        path: PathBuf,
        /// Its images, in name order.
        images: Arc<Vec<crate::suite::image::Image>>,
    },
}

/// A conversation load's sessions: each worker sends a session's turns
/// one after another, every turn with the messages before it (the model's
/// own answers among them), so that a prefix cache serves what the
/// conversation already said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conversation {
    /// Requests of each session.
    pub turns: u32,
    /// A user's pause between an answer and the next turn.
    pub think: Duration,
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
