//! Counters' changes over a window, by the names SGLang, vLLM and
//! llama.cpp give them.

use super::Scrape;

/// SGLang, vLLM and llama.cpp name their series with these.
pub(super) const PREFIXES: [&str; 3] = ["sglang:", "vllm:", "llamacpp:"];

pub(super) fn counter_delta(before: &Scrape, after: &Scrape, suffix: &str) -> Option<f64> {
    let names: Vec<String> = PREFIXES.iter().map(|p| format!("{p}{suffix}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    named_delta(before, after, &refs)
}

pub(super) fn no_counter() -> String {
    "no counter of it".to_owned()
}

/// The change of the first of the counters `names` present after (none
/// where it is no number: an infinite counter is no count).
pub(super) fn named_delta(before: &Scrape, after: &Scrape, names: &[&str]) -> Option<f64> {
    let (name, a) = after.find(names)?;
    Some(a - before.values.get(name).copied().unwrap_or(0.0)).filter(|d| d.is_finite())
}

/// The change of an SGLang counter of events (aborts, retractions): SGLang
/// 0.5.23 makes such a series at its first event
/// (`srt/observability/metrics_collector.py`: `.labels(..).inc()` in the
/// event's handler), so on a server that counts prompt tokens its absence
/// is none yet, not a server without the counter (seen on real SGLang: a
/// fresh server's `/metrics` has no `num_aborted_requests_total` sample
/// until a client disconnects).
pub(super) fn sglang_event_delta(before: &Scrape, after: &Scrape, name: &str) -> Option<f64> {
    named_delta(before, after, &[name]).or_else(|| {
        after
            .values
            .contains_key("sglang:prompt_tokens_total")
            .then_some(0.0)
    })
}

/// Cached and all prompt tokens over the window: SGLang's
/// `cached_tokens_total` (made at its first hit: none yet is none cached)
/// over `prompt_tokens_total`; vLLM's prefix-cache hits over its queries.
pub(super) fn cache_delta(before: &Scrape, after: &Scrape) -> Option<(f64, f64)> {
    if let Some(prompt) = named_delta(before, after, &["sglang:prompt_tokens_total"]) {
        let cached = named_delta(before, after, &["sglang:cached_tokens_total"]).unwrap_or(0.0);
        return Some((cached, prompt));
    }
    Some((
        named_delta(before, after, &["vllm:prefix_cache_hits_total"])?,
        named_delta(before, after, &["vllm:prefix_cache_queries_total"])?,
    ))
}

/// Generated tokens and verify steps over the window: SGLang counts its
/// verify calls (its per-request `spec_accept_length` is tokens over
/// them); vLLM counts drafts and accepted draft tokens (each draft also
/// yields one token of its own).
pub(super) fn spec_delta(before: &Scrape, after: &Scrape) -> Option<(f64, f64)> {
    if let Some(steps) = named_delta(before, after, &["sglang:spec_verify_calls_total"]) {
        let tokens = named_delta(before, after, &["sglang:generation_tokens_total"])?;
        return Some((tokens, steps));
    }
    let drafts = named_delta(before, after, &["vllm:spec_decode_num_drafts_total"])?;
    let accepted = named_delta(
        before,
        after,
        &["vllm:spec_decode_num_accepted_tokens_total"],
    )?;
    Some((drafts + accepted, drafts))
}

/// SGLang's counter of its decode passes by `mode`.
pub(super) const CUDA_GRAPH_PASSES: &str = "sglang:cuda_graph_passes_total";

/// SGLang's counter of its scheduler process's CPU time.
pub(super) const SCHEDULER_CPU: &str = "sglang:scheduler_process_cpu_seconds_total";

/// The shortest window whose scheduler CPU is a figure: SGLang adds to the
/// counter once at least a second has passed since it last did
/// (`scheduler_components/metrics_reporter.py`,
/// `_SCHEDULER_TIME_ACCOUNTING_INTERVAL_NS`), so each read lags by up to a
/// second of the scheduler's time.
pub const SCHEDULER_CPU_WINDOW: f64 = 5.0;

/// The largest change of a [`PER_PROCESS`] counter among the processes
/// read both times (a rank that appeared in the window has no change to
/// read); `None` where none was.
pub(super) fn busiest_delta(before: &Scrape, after: &Scrape, name: &str) -> Option<f64> {
    after
        .processes
        .iter()
        .filter(|((n, _), _)| n == name)
        .filter_map(|(key, a)| Some(a - before.processes.get(key)?))
        .filter(|d| d.is_finite())
        .max_by(f64::total_cmp)
}

/// Decode passes that ran a CUDA graph, and all decode passes, over the
/// window: SGLang 0.5.23 counts each decode batch under `mode`
/// `decode_cuda_graph` or `decode_none` (`batch_result_processor.py`),
/// each made at its first pass (a server without graphs has no
/// `decode_cuda_graph` series: none yet is 0 where the family is).
pub(super) fn cuda_graph_delta(before: &Scrape, after: &Scrape) -> Option<(f64, f64)> {
    after.values.get(CUDA_GRAPH_PASSES)?;
    let delta = |mode: &str| {
        after.kind(CUDA_GRAPH_PASSES, mode).unwrap_or(0.0)
            - before.kind(CUDA_GRAPH_PASSES, mode).unwrap_or(0.0)
    };
    let graph = delta("decode_cuda_graph");
    Some((graph, graph + delta("decode_none"))).filter(|(g, a)| g.is_finite() && a.is_finite())
}

/// The counters of generated tokens read, in the order tried (llama.cpp
/// counts them as `tokens_predicted_total`).
pub(super) const GENERATION_COUNTERS: [&str; 2] =
    ["generation_tokens_total", "tokens_predicted_total"];

/// Every series name that holds generated tokens, as a failure names them
/// when a server has none.
pub fn generation_counter_names() -> Vec<String> {
    GENERATION_COUNTERS
        .iter()
        .flat_map(|suffix| PREFIXES.iter().map(move |p| format!("{p}{suffix}")))
        .collect()
}
