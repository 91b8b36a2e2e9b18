//! The server's own view of a gate: its Prometheus `/metrics` scraped before
//! and after the measured window, as deltas of token counters and latency
//! histograms (SGLang's `sglang:`, vLLM's `vllm:` and llama.cpp's
//! `llamacpp:` names, old and new), and its gauges sampled while the
//! window is open (running and queued requests, KV-cache use, its own
//! throughput).

mod counters;
mod gauge;
mod histogram;
mod scrape;
#[cfg(test)]
mod tests;

pub use counters::{SCHEDULER_CPU_WINDOW, generation_counter_names};
pub use gauge::{Gauge, SAMPLE_EVERY, Samples};
pub use histogram::HistogramDelta;
pub use scrape::{Scrape, WORKER_LABEL, info_document, labelled};

use std::fmt::Write as _;

use crate::suite::metric::{Metric, Stat};
use crate::units::format_secs;
use counters::{
    CUDA_GRAPH_PASSES, GENERATION_COUNTERS, SCHEDULER_CPU, busiest_delta, cache_delta,
    counter_delta, cuda_graph_delta, named_delta, no_counter, sglang_event_delta, spec_delta,
};
use gauge::SGLANG_REFRESH;
use histogram::histogram_delta;

/// What the server says about a window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerView {
    /// Generated tokens counted by the server.
    pub generation_tokens: Option<f64>,
    /// Of those, each worker's behind a launched router, by name: how the
    /// router spread the load (empty for a server alone).
    pub worker_tokens: Vec<(String, f64)>,
    /// Prompt tokens counted by the server.
    pub prompt_tokens: Option<f64>,
    /// Time to first token.
    pub ttft: Option<HistogramDelta>,
    /// Time per output token.
    pub tpot: Option<HistogramDelta>,
    /// Inter-token latency (vLLM's and newer SGLang's own histogram).
    pub itl: Option<HistogramDelta>,
    /// End-to-end latency.
    pub e2e: Option<HistogramDelta>,
    /// Requests retracted (vLLM: preempted) in the window.
    pub retractions: Option<f64>,
    /// Requests aborted in the window.
    pub aborted: Option<f64>,
    /// Prompt tokens served from the prefix cache, and all prompt tokens
    /// (vLLM: tokens its cache was asked for).
    pub cache: Option<(f64, f64)>,
    /// Generated tokens and the speculative verify steps that made them.
    pub spec: Option<(f64, f64)>,
    /// Time in the queue.
    pub queue_time: Option<HistogramDelta>,
    /// Decode passes that ran a CUDA graph, and all decode passes.
    pub cuda_graph: Option<(f64, f64)>,
    /// CPU seconds of the busiest scheduler process, and the seconds
    /// between the two reads (`None` where they were not timed).
    pub scheduler_cpu: Option<(f64, Option<f64>)>,
    /// How long the window lasted, seconds, where the runner says: a
    /// rate of a counter needs the reads around it to be about as far
    /// apart.
    pub window_s: Option<f64>,
    /// The gauges sampled while the window was open.
    pub samples: Samples,
}

/// Each worker's generated tokens between two scrapes of a launched
/// router's workers, by the first generation counter they keep (empty
/// for a server alone).
fn worker_tokens(before: &Scrape, after: &Scrape) -> Vec<(String, f64)> {
    let names = counters::generation_counter_names();
    let Some(name) = names.iter().find(|n| after.by_worker(n).next().is_some()) else {
        return Vec::new();
    };
    after
        .by_worker(name)
        .map(|(w, a)| {
            let b = before
                .by_worker(name)
                .find(|(bw, _)| *bw == w)
                .map_or(0.0, |(_, v)| v);
            (w.to_owned(), a - b)
        })
        .collect()
}

impl ServerView {
    /// The change between two scrapes.
    pub fn between(before: &Scrape, after: &Scrape) -> Self {
        Self {
            generation_tokens: GENERATION_COUNTERS
                .iter()
                .find_map(|suffix| counter_delta(before, after, suffix)),
            worker_tokens: worker_tokens(before, after),
            prompt_tokens: counter_delta(before, after, "prompt_tokens_total"),
            ttft: histogram_delta(before, after, &["time_to_first_token_seconds"]),
            // vLLM renamed it (and later removed the old name).
            tpot: histogram_delta(
                before,
                after,
                &[
                    "request_time_per_output_token_seconds",
                    "time_per_output_token_seconds",
                ],
            ),
            itl: histogram_delta(before, after, &["inter_token_latency_seconds"]),
            e2e: histogram_delta(before, after, &["e2e_request_latency_seconds"]),
            retractions: sglang_event_delta(before, after, "sglang:num_retracted_requests_total")
                .or_else(|| named_delta(before, after, &["vllm:num_preemptions_total"])),
            aborted: sglang_event_delta(before, after, "sglang:num_aborted_requests_total")
                .or_else(|| {
                    let name = "vllm:request_success_total";
                    Some(after.kind(name, "abort")? - before.kind(name, "abort").unwrap_or(0.0))
                }),
            cache: cache_delta(before, after),
            spec: spec_delta(before, after),
            queue_time: histogram_delta(
                before,
                after,
                &["queue_time_seconds", "request_queue_time_seconds"],
            ),
            cuda_graph: cuda_graph_delta(before, after),
            scheduler_cpu: busiest_delta(before, after, SCHEDULER_CPU).map(|cpu| {
                let span = before
                    .at
                    .zip(after.at)
                    .map(|(b, a)| a.saturating_duration_since(b).as_secs_f64());
                (cpu, span)
            }),
            samples: Samples::default(),
            window_s: None,
        }
    }

    /// Whether the reads of `/metrics` were `span` seconds apart, more than
    /// the window's length and a second (or a tenth of it) of slack.
    fn outlasted(&self, span: f64) -> bool {
        self.window_s.is_some_and(|w| span > w + (0.1 * w).max(1.0))
    }

    /// The server's histogram behind a bucketed `server.` figure, and the
    /// series it is read from.
    fn histogram(&self, metric: Metric) -> Option<(Option<&HistogramDelta>, &'static str)> {
        Some(match metric {
            Metric::ServerTtftHistogram => (self.ttft.as_ref(), "time_to_first_token_seconds"),
            Metric::ServerItlHistogram => (self.itl.as_ref(), "inter_token_latency_seconds"),
            Metric::ServerTpotHistogram => {
                (self.tpot.as_ref(), "request_time_per_output_token_seconds")
            }
            Metric::ServerE2eHistogram => (self.e2e.as_ref(), "e2e_request_latency_seconds"),
            Metric::ServerQueueTime => (
                self.queue_time.as_ref(),
                "queue_time_seconds (vLLM request_queue_time_seconds)",
            ),
            _ => return None,
        })
    }

    /// The value of a `server.` figure (`None` for the others, and where
    /// the server lacks the series or its counters cannot be believed).
    pub fn value(&self, metric: Metric, stat: Option<Stat>) -> Option<f64> {
        if let Some(g) = Gauge::of(metric) {
            return self.samples.stat(g, stat.unwrap_or(Stat::Mean));
        }
        if let Some((h, _)) = self.histogram(metric) {
            let h = h.filter(|h| h.fault().is_none())?;
            return match stat.unwrap_or(Stat::Mean) {
                Stat::Mean => h.mean().filter(|m| m.is_finite() && *m >= 0.0),
                Stat::Max => h.quantile_bound(1.0),
                q => h.quantile_bound(q.quantile()?),
            }
            .filter(|v| v.is_finite());
        }
        let non_negative = |v: Option<f64>| v.filter(|n| *n >= 0.0);
        match metric {
            Metric::ServerRetractions => non_negative(self.retractions),
            Metric::ServerAborted => non_negative(self.aborted),
            Metric::ServerCacheHitRate => {
                let (cached, prompt) = self.cache?;
                let rate = cached / prompt;
                (prompt > 0.0 && (0.0..=1.0).contains(&rate)).then_some(rate)
            }
            Metric::ServerSpecAcceptLength => {
                let (tokens, steps) = self.spec?;
                (steps > 0.0 && tokens >= steps).then(|| tokens / steps)
            }
            Metric::ServerCudaGraphShare => {
                let (graph, all) = self.cuda_graph?;
                (all > 0.0 && (0.0..=all).contains(&graph)).then(|| graph / all)
            }
            Metric::ServerSchedulerCpu => {
                let (cpu, span) = self.scheduler_cpu?;
                let span = span.filter(|s| *s >= SCHEDULER_CPU_WINDOW && !self.outlasted(*s))?;
                (cpu >= 0.0).then(|| cpu / span)
            }
            _ => None,
        }
    }

    /// What stands behind a `server.` figure, in words.
    pub fn sample_size(&self, metric: Metric, window: &str) -> String {
        if let Some(g) = Gauge::of(metric) {
            let s = &self.samples;
            return if s.periodic {
                format!(
                    "{} fresh values in {window}: the server rewrote its gauges {} times in {} scrapes, only those reads count ({SGLANG_REFRESH})",
                    s.of(g).len(),
                    s.refreshes,
                    s.scrapes
                )
            } else {
                format!(
                    "{} samples of {} scrapes in {window}",
                    s.of(g).len(),
                    s.scrapes
                )
            };
        }
        match metric {
            Metric::ServerCacheHitRate => self.cache.map_or_else(no_counter, |(c, p)| {
                format!("{c:.0} cached of {p:.0} prompt tokens by the server's counters")
            }),
            Metric::ServerSpecAcceptLength => self.spec.map_or_else(no_counter, |(t, s)| {
                format!("{t:.0} tokens in {s:.0} verify steps by the server's counters")
            }),
            Metric::ServerCudaGraphShare => self.cuda_graph.map_or_else(no_counter, |(g, a)| {
                format!("{g:.0} of {a:.0} decode passes ran a CUDA graph, by the server's counter")
            }),
            Metric::ServerSchedulerCpu => match self.scheduler_cpu {
                Some((cpu, Some(span))) => format!(
                    "{} of CPU in the {} between two reads of /metrics (SGLang adds to the counter about once a second: each read lags by up to a second of it)",
                    format_secs(cpu),
                    format_secs(span)
                ),
                _ => no_counter(),
            },
            m if m.is_bucketed() => match self.histogram(m) {
                Some((Some(h), _)) => format!(
                    "{:.0} observations in the server's histogram over {window}; a percentile is the upper bound of its bucket",
                    h.count
                ),
                _ => "no histogram of it".to_owned(),
            },
            _ => format!("the server's counter over {window}"),
        }
    }

    /// Why a `server.` figure has no value, where the window says.
    pub fn missing(&self, metric: Metric) -> Option<String> {
        if let Some(g) = Gauge::of(metric) {
            let s = &self.samples;
            let failed = s.failed.as_ref().map_or_else(String::new, |(n, e)| {
                format!(" ({n} scrapes failed, the first: {e})")
            });
            return Some(if s.scrapes == 0 {
                format!(
                    "no read of /metrics fell inside the window (one every {}){failed}",
                    format_secs(SAMPLE_EVERY.as_secs_f64())
                )
            } else if s.too_few_refreshes() && s.previous.is_some_and(|p| p[g as usize].is_some()) {
                format!(
                    "the server rewrote its gauges {} in the window's {} scrapes: the window is no longer than their refresh, so {} ({SGLANG_REFRESH}); lengthen the window{failed}",
                    match s.refreshes {
                        0 => "not once".to_owned(),
                        1 => "once".to_owned(),
                        n => format!("{n} times"),
                    },
                    s.scrapes,
                    if s.refreshes == 0 {
                        "every read found the value from before it"
                    } else {
                        "one value would stand for all of it"
                    }
                )
            } else {
                format!(
                    "/metrics has none of {} ({} scrapes read){failed}",
                    g.series().join(", "),
                    s.scrapes
                )
            });
        }
        let backwards = "the server's counter went backwards in the window (did it restart?)";
        match metric {
            Metric::ServerRetractions => Some(match self.retractions {
                None => "/metrics has none of sglang:num_retracted_requests_total, vllm:num_preemptions_total".to_owned(),
                Some(_) => backwards.to_owned(),
            }),
            Metric::ServerAborted => Some(match self.aborted {
                None => "/metrics has none of sglang:num_aborted_requests_total, vllm:request_success_total{finished_reason=\"abort\"}".to_owned(),
                Some(_) => backwards.to_owned(),
            }),
            Metric::ServerCacheHitRate => Some(match self.cache {
                None => "/metrics has neither sglang:prompt_tokens_total nor vllm:prefix_cache_queries_total".to_owned(),
                Some((_, p)) if p <= 0.0 => "the server counted no prompt tokens in the window (vLLM counts only those looked up in its prefix cache: none with the cache off)".to_owned(),
                Some((c, p)) => format!("the server's counters cannot be believed: {c:.0} prompt tokens cached of {p:.0}"),
            }),
            Metric::ServerCudaGraphShare => Some(match self.cuda_graph {
                None => format!("/metrics has no {CUDA_GRAPH_PASSES} (SGLang 0.5.23 writes it with `--enable-metrics`)"),
                Some((_, a)) if a <= 0.0 => "the server counted no decode pass in the window".to_owned(),
                Some((g, a)) => format!("the server's counter cannot be believed: {g:.0} decode passes with a CUDA graph of {a:.0}"),
            }),
            Metric::ServerSchedulerCpu => Some(match self.scheduler_cpu {
                None => format!("/metrics has no {SCHEDULER_CPU} (SGLang 0.5.23 writes it with `--enable-metrics`)"),
                Some((_, None)) => "the reads of /metrics before and after the window were not timed".to_owned(),
                Some((_, Some(span))) if self.outlasted(span) => format!(
                    "the reads of /metrics were {} apart for a window of {} (the read after it waited for the server to count abandoned requests, or for a recheck to end): the scheduler's CPU in the window cannot be told from its time after it",
                    format_secs(span),
                    format_secs(self.window_s.unwrap_or_default())
                ),
                Some((_, Some(span))) if span < SCHEDULER_CPU_WINDOW => format!(
                    "the window, {} between the reads of /metrics, is shorter than {}: SGLang adds to its CPU counter about once a second, so a read can lag by a second of it; lengthen the window",
                    format_secs(span),
                    format_secs(SCHEDULER_CPU_WINDOW)
                ),
                Some(_) => backwards.to_owned(),
            }),
            m if m.is_bucketed() => self.histogram(m).map(|(h, series)| match h.map(|h| (h, h.fault())) {
                None => format!("/metrics has no histogram {series} (SGLang `--enable-metrics`)"),
                Some((_, Some(fault))) => {
                    format!("the server's histogram cannot be believed: {fault}")
                }
                Some((h, None)) if h.count <= 0.0 => {
                    "the server's histogram observed nothing in the window".to_owned()
                }
                Some((h, None)) => format!(
                    "the server's histogram cannot bound it: the figure lies in its last bucket, above {}",
                    h.buckets
                        .iter()
                        .rev()
                        .map(|(le, _)| *le)
                        .find(|le| le.is_finite())
                        .map_or_else(|| "its every bound".to_owned(), format_secs)
                ),
            }),
            Metric::ServerSpecAcceptLength => Some(match self.spec {
                None => "/metrics has neither sglang:spec_verify_calls_total nor vllm:spec_decode_num_drafts_total: is speculative decoding on?".to_owned(),
                Some((_, s)) if s <= 0.0 => "the server counted no speculative verify step in the window".to_owned(),
                Some((t, s)) => format!("the server's counters cannot be believed: {t:.0} tokens from {s:.0} verify steps"),
            }),
            _ => None,
        }
    }

    /// One line for the run output; empty when the server reported none
    /// of these series.
    pub fn render(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(g) = self.generation_tokens {
            let each: Vec<String> = self
                .worker_tokens
                .iter()
                .map(|(w, n)| format!("{w} {n:.0}"))
                .collect();
            parts.push(if each.is_empty() {
                format!("generation tokens {g:.0}")
            } else {
                format!("generation tokens {g:.0} (by worker: {})", each.join(", "))
            });
        }
        if let Some(p) = self.prompt_tokens {
            parts.push(format!("prompt tokens {p:.0}"));
        }
        for (name, h) in [
            ("ttft", &self.ttft),
            ("tpot", &self.tpot),
            ("itl", &self.itl),
            ("e2e", &self.e2e),
            ("queue", &self.queue_time),
        ] {
            if let Some(h) = h.as_ref().filter(|h| h.fault().is_none())
                && let Some(mean) = h.mean()
            {
                let mut part = format!("{name} mean {}", format_secs(mean));
                if let Some(p99) = h.quantile_bound(0.99) {
                    let _ = write!(
                        part,
                        " p99 ≤ {}",
                        if p99.is_finite() {
                            format_secs(p99)
                        } else {
                            "+Inf".into()
                        }
                    );
                }
                parts.push(part);
            }
        }
        for metric in [
            Metric::ServerCacheHitRate,
            Metric::ServerSpecAcceptLength,
            Metric::ServerRetractions,
            Metric::ServerAborted,
            Metric::ServerCudaGraphShare,
        ] {
            if let Some(v) = self.value(metric, None) {
                let name = metric
                    .name()
                    .trim_start_matches(crate::suite::metric::SERVER);
                parts.push(format!(
                    "{name} {}",
                    crate::suite::metric::format_value(metric, v)
                ));
            }
        }
        // The reading, however short the window (its figure needs 5 s).
        if let Some((cpu, Some(span))) = self.scheduler_cpu {
            parts.push(format!(
                "scheduler cpu {} in {}",
                format_secs(cpu),
                format_secs(span)
            ));
        }
        for metric in [
            Metric::ServerRunningReqs,
            Metric::ServerQueueReqs,
            Metric::ServerTokenUsage,
            Metric::ServerGenThroughput,
            Metric::ServerKvUsedTokens,
            Metric::ServerKvAvailableTokens,
        ] {
            let Some(g) = Gauge::of(metric) else { continue };
            if let (Some(mean), Some(max)) = (
                self.samples.stat(g, Stat::Mean),
                self.samples.stat(g, Stat::Max),
            ) {
                let name = metric
                    .name()
                    .trim_start_matches(crate::suite::metric::SERVER);
                parts.push(format!(
                    "{name} mean {mean:.2} max {max:.2} ({} samples)",
                    self.samples.of(g).len()
                ));
            }
        }
        if parts.is_empty() {
            return String::new();
        }
        format!(
            "    server /metrics over the window: {}\n",
            parts.join(", ")
        )
    }
}
