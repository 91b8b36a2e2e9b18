//! SGLang's launch flags, as the simulator takes them: `servegate sim
//! --model-path … --tp-size 8 --attention-backend flashinfer …` stands in
//! for `python3 -m sglang.launch_server` with the same arguments (through
//! `fixtures/sim/sglang-python`), so a GPU suite's launch, variants and
//! `expect_server` checks run against the simulator. Each flag is reported
//! in `/server_info` under SGLang 0.5.23's name for it, and changes what
//! the simulator does where the profile's `sglang:` section says how the
//! model behaves under it: the tool-call parser it needs, the tokens a
//! speculative verify step yields, the attention backends it hangs with or
//! whose numbers are wrong.

use serde_json::{Value, json};

use super::profile::Profile;

/// SGLang's launch flags the simulator takes (`None`: not given).
#[derive(Debug, Clone, Default, clap::Args)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "SGLang's own switches, a field each as its parser has them"
)]
pub struct Flags {
    /// SGLang's `--model-path`: the model served and reported.
    #[arg(long, value_name = "PATH")]
    pub model_path: Option<String>,
    /// SGLang's `--tp-size` (reported).
    #[arg(long, value_name = "N")]
    pub tp_size: Option<u32>,
    /// SGLang's `--attention-backend` (reported; the profile's
    /// `sglang.hangs_with` backends hang the scheduler).
    #[arg(long, value_name = "NAME")]
    pub attention_backend: Option<String>,
    /// SGLang's `--quantization` (reported).
    #[arg(long, value_name = "NAME")]
    pub quantization: Option<String>,
    /// SGLang's `--speculative-algorithm` (reported; decodes speculatively,
    /// the profile's `sglang.speculative_step` tokens a verify step).
    #[arg(long, value_name = "NAME")]
    pub speculative_algorithm: Option<String>,
    /// SGLang's `--speculative-draft-model-path` (reported).
    #[arg(long, value_name = "PATH")]
    pub speculative_draft_model_path: Option<String>,
    /// SGLang's `--speculative-num-steps` (reported).
    #[arg(long, value_name = "N")]
    pub speculative_num_steps: Option<u32>,
    /// SGLang's `--speculative-eagle-topk` (reported).
    #[arg(long, value_name = "N")]
    pub speculative_eagle_topk: Option<u32>,
    /// SGLang's `--speculative-num-draft-tokens` (reported; a verify step
    /// yields at most this many tokens).
    #[arg(long, value_name = "N")]
    pub speculative_num_draft_tokens: Option<usize>,
    /// SGLang's `--reasoning-parser` (reported).
    #[arg(long, value_name = "NAME")]
    pub reasoning_parser: Option<String>,
    /// SGLang's `--tool-call-parser` (reported; not the profile's
    /// `sglang.tool_call_parser`: tool calls stream as text).
    #[arg(long, value_name = "NAME")]
    pub tool_call_parser: Option<String>,
    /// SGLang's `--trust-remote-code` (taken, as a launch passes it).
    #[arg(long)]
    pub trust_remote_code: bool,
    /// SGLang's `--enable-metrics` (taken: the simulator always serves
    /// `/metrics`).
    #[arg(long)]
    pub enable_metrics: bool,
    /// SGLang's `--enable-cache-report` (reported; usage then says how many
    /// prompt tokens its prefix cache served, as the profile's
    /// `prefix_cache` does).
    #[arg(long)]
    pub enable_cache_report: bool,
    /// SGLang's `--disable-cuda-graph` (deprecated in 0.5.23 for
    /// `--cuda-graph-backend-{decode,prefill}=disabled`, still taken;
    /// reported; every decode pass is counted without a CUDA graph,
    /// `decode_none`).
    #[arg(long)]
    pub disable_cuda_graph: bool,
    /// SGLang's `--cuda-graph-max-bs-decode` (reported; a decode pass with
    /// more requests running is counted without a CUDA graph).
    #[arg(long, value_name = "N")]
    pub cuda_graph_max_bs_decode: Option<u32>,
    /// SGLang's `--skip-server-warmup` (reported; up without the warmup
    /// request, so a scheduler hung from the start answers its health
    /// checks with 503 after their timeout instead of at once).
    #[arg(long)]
    pub skip_server_warmup: bool,
}

impl Flags {
    /// Whether any flag was given: only then are `/server_info`'s fields
    /// and the profile's `sglang:` behaviour applied.
    fn given(&self) -> bool {
        self.model_path.is_some()
            || self.tp_size.is_some()
            || self.attention_backend.is_some()
            || self.quantization.is_some()
            || self.speculative_algorithm.is_some()
            || self.speculative_draft_model_path.is_some()
            || self.speculative_num_steps.is_some()
            || self.speculative_eagle_topk.is_some()
            || self.speculative_num_draft_tokens.is_some()
            || self.reasoning_parser.is_some()
            || self.tool_call_parser.is_some()
            || self.trust_remote_code
            || self.enable_metrics
            || self.enable_cache_report
            || self.skip_server_warmup
            || self.disable_cuda_graph
            || self.cuda_graph_max_bs_decode.is_some()
    }

    /// The profile as a server launched with these flags runs it; what it
    /// says of itself at start, for its log.
    pub fn apply(&self, p: &mut Profile) -> Vec<String> {
        let mut said = Vec::new();
        if !self.given() {
            return said;
        }
        if let Some(m) = &self.model_path {
            p.model.clone_from(m);
        }
        let mut report = |key: &str, value: Value| {
            p.server_info.insert(key.to_owned(), value);
        };
        report("model_path", json!(p.model));
        report("served_model_name", json!(p.model));
        for (key, value) in [
            ("tp_size", self.tp_size.map(|n| json!(n))),
            (
                "attention_backend",
                self.attention_backend.as_ref().map(|b| json!(b)),
            ),
            ("quantization", Some(json!(self.quantization))),
            (
                "speculative_algorithm",
                Some(json!(self.speculative_algorithm)),
            ),
            (
                "speculative_draft_model_path",
                Some(json!(self.speculative_draft_model_path)),
            ),
            (
                "speculative_num_steps",
                Some(json!(self.speculative_num_steps)),
            ),
            (
                "speculative_eagle_topk",
                Some(json!(self.speculative_eagle_topk)),
            ),
            (
                "speculative_num_draft_tokens",
                Some(json!(self.speculative_num_draft_tokens)),
            ),
            ("reasoning_parser", Some(json!(self.reasoning_parser))),
            ("tool_call_parser", Some(json!(self.tool_call_parser))),
            ("disable_cuda_graph", Some(json!(self.disable_cuda_graph))),
            (
                "cuda_graph_max_bs_decode",
                Some(json!(self.cuda_graph_max_bs_decode)),
            ),
        ] {
            if let Some(v) = value {
                report(key, v);
            }
        }
        if self.enable_cache_report {
            report("enable_cache_report", json!(true));
            p.prefix_cache = true;
        }
        if self.skip_server_warmup {
            report("skip_server_warmup", json!(true));
            p.skip_server_warmup = true;
        }
        let b = p.sglang.clone();
        if self.speculative_algorithm.is_some() {
            let step = b.speculative_step.unwrap_or(1);
            let most = self.speculative_num_draft_tokens.unwrap_or(step);
            p.speculative = true;
            p.tokens_per_chunk = step.min(most).max(1);
        }
        if b.tool_call_parser.is_some() && b.tool_call_parser != self.tool_call_parser {
            p.breaks.push("tool_parser".to_owned());
            said.push(format!(
                "servegate sim: tool calls stream as text: this model's parser is {}, launched with {}",
                b.tool_call_parser.as_deref().unwrap_or("none"),
                self.tool_call_parser.as_deref().unwrap_or("none"),
            ));
        }
        if let Some(backend) = &self.attention_backend
            && b.garbage_with.contains(backend)
        {
            p.broken_numerics = true;
            said.push(format!(
                "servegate sim: simulated broken numerics: attention backend {backend} scores text as no model would"
            ));
        }
        if let Some(backend) = &self.attention_backend
            && b.hangs_with.contains(backend)
        {
            // Nothing generated from the start: `/health_generate`, itself
            // a generation, hangs too.
            p.scheduler_hang_after = Some(0);
            said.push(format!(
                "servegate sim: simulated hang: attention backend {backend} never finishes its first batch; nothing will be generated"
            ));
        }
        said
    }
}
