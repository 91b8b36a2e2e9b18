//! Simulator profiles (`fixtures/sim/*.yaml`): the served model's name,
//! timing, capacity, and scripted answers.

use std::path::Path;
use std::time::Duration;

use regex::Regex;
use serde::{Deserialize, Deserializer};

/// A scripted answer: when the prompt matches, answer this.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Matched against the prompt (the last user message for chat).
    pub pattern: Regex,
    /// The answer.
    pub reply: String,
    /// Reasoning streamed before the answer, as `reasoning_content`.
    pub reasoning: Option<String>,
    /// A tool call made instead of `reply` when the request offers
    /// `tools`: the function's name and its arguments' JSON text.
    pub tool_call: Option<(String, String)>,
    /// Every Nth request this reply matches is answered with filler
    /// instead, as a server whose answers vary from request to request
    /// (batch-dependent numerics, a prompt cache) is now and then wrong.
    pub wrong_every: Option<std::num::NonZeroU64>,
    /// The LoRA adapter whose requests alone it answers (`None`: any
    /// request's).
    pub adapter: Option<String>,
    /// The requests this reply has matched.
    pub matched: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Reply {
    /// Whether this request, which matched, is answered as scripted
    /// (counts it).
    pub fn answers(&self) -> bool {
        let n = self
            .matched
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        self.wrong_every
            .is_none_or(|every| !n.is_multiple_of(every.get()))
    }
}

/// How the simulator behaves.
#[derive(Debug, Clone)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent switches of a simulated server, as its launch flags are"
)]
pub struct Profile {
    /// The served model id (`/v1/models`).
    pub model: String,
    /// Time to first token of a lone request.
    pub ttft: Duration,
    /// Inter-token latency of a lone request.
    pub itl: Duration,
    /// Streams decoded at full speed; beyond it ITL grows in proportion.
    pub capacity: usize,
    /// Seed of the filler text.
    pub seed: u64,
    /// Tokens per streamed chunk, as with `--num-continuous-decode-steps`
    /// or speculative decoding.
    pub tokens_per_chunk: usize,
    /// Whether usage is reported when asked (llama.cpp's Python server
    /// ignores `include_usage`: `usage: false` plays it).
    pub usage: bool,
    /// Scripted answers, first match wins.
    pub replies: Vec<Reply>,
    /// Fields added to (or replacing) `/get_server_info`'s, as server
    /// arguments appear there (`tp_size`, `attention_backend`, …).
    pub server_info: serde_json::Map<String, serde_json::Value>,
    /// How long `/health` and `/health_generate` answer 503 "Loading
    /// model" after start; `None`: forever (a start-up that hangs).
    pub loading: Option<Duration>,
    /// Abort the process (SIGABRT) when a generation request arrives after
    /// this many: a server that crashes mid-run.
    pub crash_after: Option<u64>,
    /// Stop answering anything, health checks included, when a generation
    /// request arrives after this many: a server that hangs mid-run.
    pub hang_after: Option<u64>,
    /// Stop generating when a generation request arrives after this many:
    /// generation requests hang, and `/health_generate` (and `/health`,
    /// which SGLang 0.5.23 serves from the same handler) answers 503 after
    /// `SGLANG_HEALTH_CHECK_TIMEOUT`: a scheduler that hangs under a live
    /// HTTP server. At 0 its warmup never gets a token, so it never says it
    /// is up (503 at once) unless `skip_server_warmup`.
    pub scheduler_hang_after: Option<u64>,
    /// SGLang's `--skip-server-warmup`: up without a warmup request.
    pub skip_server_warmup: bool,
    /// Server contracts this simulator breaks, for contract-probe tests:
    /// `ignore_eos`, `max_tokens`, `usage`, `stop`, `determinism`,
    /// `cached_tokens` (a forged cache hit: more cached than prompted),
    /// `tool_parser` (a tool call streamed as plain text, as with a wrong
    /// `--tool-call-parser`).
    pub breaks: Vec<String>,
    /// A fault every generation request meets (fault-matrix tests).
    pub fault: Option<super::fault::Fault>,
    /// Garbage instead of every token of a request that starts while more
    /// than this many streams run (its own included): a decode kernel that
    /// is right alone and wrong in a large batch.
    pub corrupt_above: Option<usize>,
    /// Report prompt tokens served from a prefix cache (SGLang with
    /// `--enable-cache-report`): the longest token prefix a prompt shares
    /// with an earlier one, in `usage.prompt_tokens_details.cached_tokens`
    /// and `meta_info.cached_tokens`.
    pub prefix_cache: bool,
    /// Report speculative decoding in `/generate`'s `meta_info` as SGLang
    /// 0.5.23 does (`spec_verify_ct`, `spec_accept_length` = tokens per
    /// verify step), each streamed chunk one verify step.
    pub speculative: bool,
    /// `meta_info.num_retractions` of every request: a server short of KV
    /// cache that retracts requests and decodes them again.
    pub retractions: u64,
    /// Broken numerics (a wrong attention backend's, a bad kernel's): the
    /// simulator scores a prompt's tokens (SGLang's `return_logprob`,
    /// vLLM's `prompt_logprobs`) as no model would, whatever it answers.
    pub broken_numerics: bool,
    /// How `/generate` streams its text: SGLang's
    /// `--incremental-streaming-output` (`incremental_output: true` in a
    /// profile) sends each chunk's text alone, and `/server_info` says so.
    pub generate_text: GenerateText,
    /// SGLang's `--api-key`: every route but health and metrics takes it.
    pub api_key: Option<String>,
    /// SGLang's `--admin-api-key`: `/flush_cache` takes it, and only it.
    pub admin_api_key: Option<String>,
    /// How the model behaves under SGLang's launch flags (`sglang:`).
    pub sglang: Behaviour,
    /// The line a crash (`crash_after`) writes to the log before it
    /// aborts, as the engine would (`RuntimeError: probability tensor
    /// contains either inf, nan or element < 0`).
    pub crash_message: Option<String>,
    /// The server it speaks as.
    pub speaks: Speaks,
    /// A vision model: it sees a request's images (`sim/vision.rs`) and
    /// `/model_info` says `has_image_understanding`; without it, a request
    /// with an image is refused as a text-only model's server refuses it.
    pub vision: bool,
    /// LoRA adapters it serves by name, listed in `/v1/models` with the
    /// model as their `parent` as SGLang 0.5.23 and vLLM 0.32 list theirs;
    /// a request names one as the server it speaks as takes it (SGLang's
    /// `lora_path` or `model: base:adapter`, vLLM's `model`), and one it
    /// does not serve is refused as that server refuses it.
    pub adapters: Vec<String>,
}

/// The server a simulator speaks as: its routes, the shapes of its
/// answers and errors, its metric names, how it dies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Speaks {
    /// SGLang 0.5.23: the OpenAI routes in its dialect, `/generate`,
    /// `/health_generate`, `/server_info`, `/model_info`, `/flush_cache`,
    /// `sglang:` metrics (and llama.cpp's `/completion`, for the tests of
    /// that API).
    #[default]
    Sglang,
    /// vLLM 0.32 (`vllm serve`): the OpenAI routes in its dialect (chat
    /// streams listing `token_ids` when asked, errors under `error`, an
    /// unknown model refused), `/version`, `vllm:` metrics; none of
    /// SGLang's routes. A crash (`crash_after`) is its engine dying: the
    /// request gets the error in its stream, `/health` 503, and the
    /// process exits 3 s later, as its watchdog stops it.
    Vllm,
}

/// How the model a profile stands for behaves under SGLang's flags.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Behaviour {
    /// The tool-call parser the model needs (`kimi_k2`): launched with
    /// another, or none, its calls stream as text.
    #[serde(default)]
    pub tool_call_parser: Option<String>,
    /// Tokens a verify step yields under `--speculative-algorithm` (the
    /// draft model's acceptance), at most `--speculative-num-draft-tokens`.
    #[serde(default)]
    pub speculative_step: Option<usize>,
    /// Attention backends whose first batch never finishes: launched with
    /// one, the scheduler hangs from the start (HTTP answers, nothing is
    /// generated), as flashinfer on SM120.
    #[serde(default)]
    pub hangs_with: Vec<String>,
    /// Attention backends whose numbers are wrong for this model: launched
    /// with one, the server answers as before and scores text as no model
    /// would (`broken_numerics`), as GLM-5 on flashmla "produced garbage".
    #[serde(default)]
    pub garbage_with: Vec<String>,
}

/// How `/generate` streams its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenerateText {
    /// The text so far in every chunk (SGLang's default).
    Cumulative,
    /// Each chunk's text alone (`--incremental-streaming-output`).
    Segments,
}

/// The contracts a profile can break.
pub(crate) const BREAKABLE: &[&str] = &[
    "tool_parser",
    "ignore_eos",
    "max_tokens",
    "usage",
    "stop",
    "determinism",
    "cached_tokens",
];

impl Profile {
    /// Whether SGLang's warmup request never gets its token: the
    /// scheduler hangs from the start and the warmup was not skipped, so
    /// the server stays starting until `SGLANG_WARMUP_TIMEOUT` ends it.
    pub fn warmup_never_answers(&self) -> bool {
        self.scheduler_hang_after == Some(0) && !self.skip_server_warmup
    }

    /// Whether this simulator breaks `contract`.
    pub fn breaks(&self, contract: &str) -> bool {
        self.breaks.iter().any(|b| b == contract)
    }
}

impl Default for Profile {
    fn default() -> Self {
        Self {
            model: "servegate-sim".into(),
            ttft: Duration::from_millis(20),
            itl: Duration::from_millis(4),
            capacity: 32,
            seed: 0,
            tokens_per_chunk: 1,
            usage: true,
            replies: Vec::new(),
            server_info: serde_json::Map::new(),
            loading: Some(Duration::ZERO),
            crash_after: None,
            hang_after: None,
            scheduler_hang_after: None,
            skip_server_warmup: false,
            breaks: Vec::new(),
            fault: None,
            corrupt_above: None,
            prefix_cache: false,
            speculative: false,
            retractions: 0,
            broken_numerics: false,
            generate_text: GenerateText::Cumulative,
            api_key: None,
            admin_api_key: None,
            sglang: Behaviour::default(),
            crash_message: None,
            speaks: Speaks::Sglang,
            vision: false,
            adapters: Vec::new(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "a profile file's independent switches, a field each as it writes them"
)]
struct ProfileFile {
    #[serde(default)]
    model: Option<String>,
    #[serde(default, deserialize_with = "duration")]
    ttft: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    itl: Option<Duration>,
    #[serde(default)]
    capacity: Option<usize>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    tokens_per_chunk: Option<usize>,
    #[serde(default)]
    usage: Option<bool>,
    #[serde(default)]
    replies: Vec<ReplyFile>,
    /// Files of more replies (`replies:` lists), relative to the profile,
    /// read after its own: answers several profiles share.
    #[serde(default)]
    replies_from: Vec<String>,
    #[serde(default)]
    server_info: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    breaks: Vec<String>,
    #[serde(default)]
    fault: Option<String>,
    #[serde(default)]
    corrupt_above: Option<usize>,
    #[serde(default)]
    prefix_cache: bool,
    #[serde(default)]
    speculative: bool,
    #[serde(default)]
    retractions: u64,
    #[serde(default)]
    broken_numerics: bool,
    #[serde(default)]
    incremental_output: bool,
    #[serde(default)]
    crash_after: Option<u64>,
    #[serde(default)]
    crash_message: Option<String>,
    #[serde(default)]
    sglang: Behaviour,
    #[serde(default)]
    speaks: Speaks,
    #[serde(default)]
    vision: bool,
    #[serde(default)]
    adapters: Vec<String>,
}

/// A file of replies only (`replies_from`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RepliesFile {
    replies: Vec<ReplyFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyFile {
    #[serde(rename = "match")]
    pattern: String,
    reply: String,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_call: Option<ToolCallFile>,
    #[serde(default)]
    wrong_every: Option<std::num::NonZeroU64>,
    #[serde(default)]
    adapter: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCallFile {
    name: String,
    #[serde(default)]
    arguments: serde_json::Map<String, serde_json::Value>,
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    crate::units::parse_duration(&text)
        .map(Some)
        .map_err(|e| serde::de::Error::custom(format!("invalid duration `{text}`: {e}")))
}

impl Profile {
    /// Reads a profile file.
    pub fn load(path: &Path) -> Result<Self, String> {
        let shown = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("failed to read simulator profile {shown}: {e}"))?;
        Self::parse_in(&text, path.parent())
            .map_err(|e| format!("invalid simulator profile {shown}: {e}"))
    }

    /// Parses profile text.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::parse_in(text, None)
    }

    /// Parses profile text whose `replies_from` files are relative to
    /// `dir` (none without a directory).
    fn parse_in(text: &str, dir: Option<&Path>) -> Result<Self, String> {
        let mut file: ProfileFile = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        for from in std::mem::take(&mut file.replies_from) {
            let dir = dir.ok_or_else(|| {
                format!("`replies_from: {from}` needs the profile to be a file: its path is relative to it")
            })?;
            let path = dir.join(&from);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("failed to read `replies_from` {}: {e}", path.display()))?;
            let more: RepliesFile = serde_saphyr::from_str(&text)
                .map_err(|e| format!("invalid `replies_from` {}: {e}", path.display()))?;
            file.replies.extend(more.replies);
        }
        let defaults = Profile::default();
        let replies = file
            .replies
            .into_iter()
            .map(|r| {
                Ok(Reply {
                    pattern: Regex::new(&r.pattern)
                        .map_err(|e| format!("invalid `match` regex {:?}: {e}", r.pattern))?,
                    reply: r.reply,
                    reasoning: r.reasoning,
                    tool_call: r
                        .tool_call
                        .map(|t| (t.name, serde_json::Value::Object(t.arguments).to_string())),
                    wrong_every: r.wrong_every,
                    adapter: r.adapter,
                    matched: std::sync::Arc::default(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        if let Some(a) = replies
            .iter()
            .filter_map(|r| r.adapter.as_ref())
            .find(|a| !file.adapters.contains(a))
        {
            return Err(format!(
                "a reply's `adapter: {a}` is not one of the profile's `adapters`"
            ));
        }
        let capacity = file.capacity.unwrap_or(defaults.capacity);
        if capacity == 0 {
            return Err("capacity must be at least 1".into());
        }
        if let Some(b) = file
            .breaks
            .iter()
            .find(|b| !BREAKABLE.contains(&b.as_str()))
        {
            return Err(format!(
                "unknown contract `{b}` in `breaks` (known: {})",
                BREAKABLE.join(", ")
            ));
        }
        let tokens_per_chunk = file.tokens_per_chunk.unwrap_or(1);
        if tokens_per_chunk == 0 {
            return Err("tokens_per_chunk must be at least 1".into());
        }
        Ok(Self {
            model: file.model.unwrap_or(defaults.model),
            ttft: file.ttft.unwrap_or(defaults.ttft),
            itl: file.itl.unwrap_or(defaults.itl),
            capacity,
            seed: file.seed.unwrap_or(defaults.seed),
            tokens_per_chunk,
            usage: file.usage.unwrap_or(defaults.usage),
            replies,
            server_info: file.server_info,
            breaks: file.breaks,
            fault: file.fault.as_deref().map(str::parse).transpose()?,
            corrupt_above: file.corrupt_above,
            prefix_cache: file.prefix_cache,
            speculative: file.speculative,
            retractions: file.retractions,
            broken_numerics: file.broken_numerics,
            generate_text: if file.incremental_output {
                GenerateText::Segments
            } else {
                GenerateText::Cumulative
            },
            crash_after: file.crash_after,
            crash_message: file.crash_message,
            sglang: file.sglang,
            speaks: file.speaks,
            vision: file.vision,
            adapters: file.adapters,
            ..defaults
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_profile() {
        let p = Profile::parse(
            "model: m\nttft: 5ms\nitl: 1ms\ncapacity: 4\nreplies:\n  - match: '2\\+2'\n    reply: '4'\n",
        )
        .unwrap();
        assert_eq!(p.model, "m");
        assert_eq!(p.ttft, Duration::from_millis(5));
        assert_eq!(p.replies.len(), 1);
        assert!(Profile::parse("bogus: 1\n").unwrap_err().contains("bogus"));
        assert!(Profile::parse("ttft: soon\n").is_err());
    }

    /// `replies_from` files add their replies after the profile's own,
    /// relative to the profile; a profile that is no file cannot name one,
    /// and a missing or malformed file is an error naming it.
    #[test]
    fn replies_come_from_files_beside_the_profile() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("shared.yaml"),
            "replies:\n  - match: 'capital'\n    reply: Paris\n",
        )
        .unwrap();
        let profile = dir.path().join("p.yaml");
        std::fs::write(
            &profile,
            "replies_from: [shared.yaml]\nreplies:\n  - match: '2\\+2'\n    reply: '4'\n",
        )
        .unwrap();
        let p = Profile::load(&profile).unwrap();
        let replies: Vec<&str> = p.replies.iter().map(|r| r.reply.as_str()).collect();
        assert_eq!(replies, ["4", "Paris"]);
        assert!(
            Profile::parse("replies_from: [shared.yaml]\n")
                .unwrap_err()
                .contains("needs the profile to be a file")
        );
        std::fs::write(&profile, "replies_from: [gone.yaml]\n").unwrap();
        assert!(Profile::load(&profile).unwrap_err().contains("gone.yaml"));
        std::fs::write(dir.path().join("shared.yaml"), "model: x\n").unwrap();
        std::fs::write(&profile, "replies_from: [shared.yaml]\n").unwrap();
        assert!(
            Profile::load(&profile)
                .unwrap_err()
                .contains("invalid `replies_from`")
        );
    }
}
