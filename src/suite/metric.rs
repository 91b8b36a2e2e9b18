//! What a gate can measure: one table, `METRICS`, with a row per metric —
//! its name in suites, its unit, whether it is a distribution, how repeats
//! combine — and one list of the key figures every summary shows, that
//! every consumer reads (the threshold parser, the recorder, the judge,
//! baselines, the summary and the reports). Adding a metric is one row
//! here plus its recorder.

mod key;
pub use key::{KEY_FIGURES, KeyError, MetricKey, Stat, all_keys};

/// A measured quantity of a performance gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Time to first token (any token, reasoning included).
    Ttft,
    /// Time to the first token of the answer's text (after any reasoning; not
    /// white space, nor a count without text).
    TtftContent,
    /// Time from the moment the request was written to the first token:
    /// TTFT without the connect, the request's write and any late start.
    TtftFromSend,
    /// Time to open a connection: the window's, opened before it began or
    /// by a request of it (the warm-up's are not counted).
    Connect,
    /// Inter-token latency: a chunk of k tokens counts as k gaps of a k-th
    /// of its gap each.
    Itl,
    /// Inter-chunk latency: the gap before each chunk that brought tokens,
    /// whole, however many tokens it carried (`bench_serving`'s ITL).
    ItlChunk,
    /// Time per output token after the first.
    Tpot,
    /// End-to-end request latency.
    E2e,
    /// Per-request decode rate, tokens per second after the first token.
    DecodeTokS,
    /// Aggregate output tokens per second over the measured window.
    OutputTokS,
    /// Aggregate prompt tokens per second (server-reported counts).
    InputTokS,
    /// Aggregate prompt plus output tokens per second.
    TotalTokS,
    /// Completed requests per second over the measured window.
    RequestsPerS,
    /// Failed requests in the measured window.
    Errors,
    /// Requests per second that met every SLO of the gate.
    GoodputRequestsPerS,
    /// Output tokens per second of the requests that met every SLO.
    GoodputTokS,
    /// Requests that met every SLO over all requests sent, failed ones
    /// included (SGLang `bench_serving`'s `slo_attainment`).
    SloAttainment,
    /// Open loop: requests that started more than 5 ms after their intended time.
    LateStarts,
    /// Percent difference between server-reported output tokens and what
    /// the chunks carried (each chunk's rise, at most its text's bytes and
    /// one more), over requests with server counts.
    TokenDriftChunks,
    /// Percent difference between the server's `/metrics` generation-token
    /// counter delta and the output tokens the client received.
    TokenDriftMetrics,
    /// Per-request decode rate by the server's own clock, where its dialect
    /// reports timings (llama.cpp's `predicted_n / predicted_ms`, SGLang's
    /// `meta_info.decode_throughput`): to set beside the client's
    /// `decode_tok_s`.
    ServerDecodeTokS,
    /// Per-request time to the first token by the server's own clock, from
    /// its receipt of the request (SGLang's `meta_info.first_token_latency`):
    /// to set beside the client's `ttft`.
    ServerTtft,
    /// Per-request end-to-end latency by the server's own clock (SGLang's
    /// `meta_info.e2e_latency`): to set beside the client's `e2e`.
    ServerE2e,
    /// Per-request time in the server's scheduler queue (SGLang's
    /// `meta_info.queue_time`).
    ServerQueue,
    /// Prompt tokens the server served from its prefix cache, as a share of
    /// all prompt tokens (server-reported, every request).
    CacheHitRate,
    /// Per-request reasoning tokens, as the server counts them.
    ReasoningTokens,
    /// Per-request tokens per speculative verify step (the bonus token
    /// included), as the server reports it.
    SpecAcceptLength,
    /// Times the server retracted a request (ran short of KV cache and
    /// decoded it again), summed over requests.
    Retractions,
    /// Requests the server was running, sampled from its `/metrics` gauge
    /// through the window.
    ServerRunningReqs,
    /// Requests waiting in the server's queue, sampled the same way.
    ServerQueueReqs,
    /// The server's KV-cache use, 0 to 1, sampled the same way.
    ServerTokenUsage,
    /// The server's own generation throughput gauge, sampled the same way.
    ServerGenThroughput,
    /// KV-cache slots the running requests hold, in tokens, sampled the
    /// same way.
    ServerKvUsedTokens,
    /// KV-cache slots free, in tokens, sampled the same way.
    ServerKvAvailableTokens,
    /// Prompt tokens served from the prefix cache over all prompt tokens,
    /// by the server's counters over the window.
    ServerCacheHitRate,
    /// Generated tokens per speculative verify step, by the server's
    /// counters over the window.
    ServerSpecAcceptLength,
    /// Requests the server retracted (vLLM: preempted) in the window, by its
    /// counter.
    ServerRetractions,
    /// Requests the server aborted in the window, by its counter.
    ServerAborted,
    /// Decode passes that ran a CUDA graph over all decode passes, by the
    /// server's counter over the window.
    ServerCudaGraphShare,
    /// CPU seconds the server's scheduler process used per second of the
    /// window, by its counter.
    ServerSchedulerCpu,
    /// Time to first token by the server's own histogram over the window.
    ServerTtftHistogram,
    /// Inter-token latency by the server's own histogram.
    ServerItlHistogram,
    /// Time per output token by the server's own histogram.
    ServerTpotHistogram,
    /// End-to-end latency by the server's own histogram.
    ServerE2eHistogram,
    /// Time in the server's queue by its own histogram.
    ServerQueueTime,
}

/// What a metric's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds, shown as `45.60ms`.
    Seconds,
    /// Tokens per second.
    TokPerS,
    /// Requests per second.
    ReqPerS,
    /// A count of requests.
    Count,
    /// A percentage.
    Percent,
    /// A share between 0 and 1.
    Ratio,
    /// Tokens.
    Tokens,
}

/// How the repeats of a gate combine into one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// The mean over repeats (rates, latencies), with its interval.
    Mean,
    /// The total over repeats (counts: one error in any repeat is an error
    /// of the gate).
    Sum,
}

/// One row of `METRICS`.
#[derive(Debug, Clone, Copy)]
pub struct MetricSpec {
    /// The metric.
    pub metric: Metric,
    /// Its name in suites and records.
    pub name: &'static str,
    /// Its unit.
    pub unit: Unit,
    /// A per-request distribution: thresholds name a statistic.
    pub distribution: bool,
    /// How repeats combine.
    pub combine: Combine,
    /// What a run needs besides successful requests for the figure to
    /// exist, said when it does not.
    pub needs: Option<&'static str>,
}

impl MetricSpec {
    /// The same row, needing `what` besides successful requests.
    const fn needs(self, what: &'static str) -> Self {
        MetricSpec {
            needs: Some(what),
            ..self
        }
    }
}

const fn row(
    metric: Metric,
    name: &'static str,
    unit: Unit,
    distribution: bool,
    combine: Combine,
) -> MetricSpec {
    MetricSpec {
        metric,
        name,
        unit,
        distribution,
        combine,
        needs: None,
    }
}

/// The namespace of the figures read from the server's `/metrics`.
pub const SERVER: &str = "server.";

/// What a `server.` gauge figure needs.
const GAUGE: &str = "the server's `/metrics` with this gauge (SGLang `--enable-metrics`), sampled every 250 ms while the window is open";
/// What SGLang's own timings of a request need, by its `meta_info` field.
const SGLANG_TTFT: &str = "SGLang's own timings (`api: sglang-generate`, `meta_info.first_token_latency`, with `--enable-metrics`)";
const SGLANG_E2E: &str = "SGLang's own timings (`api: sglang-generate`, `meta_info.e2e_latency`)";
const SGLANG_QUEUE: &str = "SGLang's own timings (`api: sglang-generate`, `meta_info.queue_time`, with `--enable-metrics`)";
/// What a `server.` histogram figure needs.
const HISTOGRAM: &str = "the server's `/metrics` with this histogram (SGLang `--enable-metrics`), read before and after the window";
/// What a `server.` counter figure needs.
const COUNTER: &str = "the server's `/metrics` with this counter (SGLang `--enable-metrics`), read before and after the window";

/// Every metric, in report order (the order of [`Metric`]'s variants).
pub(crate) const METRICS: [MetricSpec; 45] = {
    use Combine::{Mean, Sum};
    use Metric as M;
    use Unit::{Count, Percent, Ratio, ReqPerS, Seconds, TokPerS, Tokens};
    [
        row(M::Ttft, "ttft", Seconds, true, Mean),
        row(M::TtftContent, "ttft_content", Seconds, true, Mean),
        row(M::TtftFromSend, "ttft_from_send", Seconds, true, Mean)
            .needs("an `http://` target (servegate's own transport stamps the request's write)"),
        row(M::Connect, "connect", Seconds, true, Mean).needs(
            "an `http://` target whose gate opened connections for its window (the warm-up's are reused)",
        ),
        row(M::Itl, "itl", Seconds, true, Mean),
        row(M::ItlChunk, "itl_chunk", Seconds, true, Mean),
        row(M::Tpot, "tpot", Seconds, true, Mean),
        row(M::E2e, "e2e", Seconds, true, Mean),
        row(M::DecodeTokS, "decode_tok_s", TokPerS, true, Mean),
        row(M::OutputTokS, "output_tok_s", TokPerS, false, Mean),
        row(M::InputTokS, "input_tok_s", TokPerS, false, Mean)
            .needs("prompt token counts from the server for every request"),
        row(M::TotalTokS, "total_tok_s", TokPerS, false, Mean)
            .needs("prompt token counts from the server for every request"),
        row(M::RequestsPerS, "requests_per_s", ReqPerS, false, Mean),
        row(M::Errors, "errors", Count, false, Sum),
        row(
            M::GoodputRequestsPerS,
            "goodput_requests_per_s",
            ReqPerS,
            false,
            Mean,
        )
        .needs("the gate's `slo:`"),
        row(M::GoodputTokS, "goodput_tok_s", TokPerS, false, Mean).needs("the gate's `slo:`"),
        row(M::SloAttainment, "slo_attainment", Ratio, false, Mean).needs("the gate's `slo:`"),
        row(M::LateStarts, "late_starts", Count, false, Sum),
        row(
            M::TokenDriftChunks,
            "token_drift_chunks",
            Percent,
            false,
            Mean,
        )
        .needs("token counts from the server"),
        row(
            M::TokenDriftMetrics,
            "token_drift_metrics",
            Percent,
            false,
            Mean,
        )
        .needs("the server's `/metrics` with a generation-token counter"),
        row(
            M::ServerDecodeTokS,
            "server_decode_tok_s",
            TokPerS,
            true,
            Mean,
        )
        .needs("an API whose server reports its own timings (`api: llamacpp-completion`, or `api: sglang-generate` against SGLang with `--enable-metrics`)"),
        row(M::ServerTtft, "server_ttft", Seconds, true, Mean).needs(SGLANG_TTFT),
        row(M::ServerE2e, "server_e2e", Seconds, true, Mean).needs(SGLANG_E2E),
        row(M::ServerQueue, "server_queue", Seconds, true, Mean).needs(SGLANG_QUEUE),
        row(M::CacheHitRate, "cache_hit_rate", Ratio, false, Mean).needs(
            "cached-token counts from the server for every request (SGLang `--enable-cache-report`, vLLM `--enable-prompt-tokens-details`, llama.cpp `timings.cache_n`)",
        ),
        row(M::ReasoningTokens, "reasoning_tokens", Tokens, true, Mean).needs(
            "reasoning-token counts from the server for every request (SGLang with `--reasoning-parser`)",
        ),
        row(M::SpecAcceptLength, "spec_accept_length", Tokens, true, Mean).needs(
            "speculative decoding reported for every request (SGLang `api: sglang-generate`, `meta_info.spec_accept_length`; or its chat API asked with `extra_body: {return_spec_tokens_details: true}`)",
        ),
        row(M::Retractions, "retractions", Count, false, Sum).needs(
            "retraction counts from the server for every request (SGLang `api: sglang-generate`, `meta_info.num_retractions`)",
        ),
        row(M::ServerRunningReqs, "server.num_running_reqs", Count, true, Mean).needs(GAUGE),
        row(M::ServerQueueReqs, "server.num_queue_reqs", Count, true, Mean).needs(GAUGE),
        row(M::ServerTokenUsage, "server.token_usage", Ratio, true, Mean).needs(GAUGE),
        row(M::ServerGenThroughput, "server.gen_throughput", TokPerS, true, Mean).needs(GAUGE),
        row(M::ServerKvUsedTokens, "server.kv_used_tokens", Tokens, true, Mean).needs(GAUGE),
        row(
            M::ServerKvAvailableTokens,
            "server.kv_available_tokens",
            Tokens,
            true,
            Mean,
        )
        .needs(GAUGE),
        row(M::ServerCacheHitRate, "server.cache_hit_rate", Ratio, false, Mean).needs(COUNTER),
        row(
            M::ServerSpecAcceptLength,
            "server.spec_accept_length",
            Tokens,
            false,
            Mean,
        )
        .needs(COUNTER),
        row(M::ServerRetractions, "server.retractions", Count, false, Sum).needs(COUNTER),
        row(M::ServerAborted, "server.aborted", Count, false, Sum).needs(COUNTER),
        row(M::ServerCudaGraphShare, "server.cuda_graph_share", Ratio, false, Mean)
            .needs("SGLang's `/metrics` with `sglang:cuda_graph_passes_total` (`--enable-metrics`), read before and after the window"),
        row(M::ServerSchedulerCpu, "server.scheduler_cpu", Ratio, false, Mean)
            .needs("SGLang's `/metrics` with `sglang:scheduler_process_cpu_seconds_total` (`--enable-metrics`), read before and after a window of 5 s or more"),
        row(M::ServerTtftHistogram, "server.ttft", Seconds, true, Mean).needs(HISTOGRAM),
        row(M::ServerItlHistogram, "server.itl", Seconds, true, Mean).needs(HISTOGRAM),
        row(M::ServerTpotHistogram, "server.tpot", Seconds, true, Mean).needs(HISTOGRAM),
        row(M::ServerE2eHistogram, "server.e2e", Seconds, true, Mean).needs(HISTOGRAM),
        row(M::ServerQueueTime, "server.queue_time", Seconds, true, Mean).needs(HISTOGRAM),
    ]
};

impl Metric {
    /// All metrics, in report order.
    pub const ALL: [Metric; METRICS.len()] = {
        let mut all = [Metric::Ttft; METRICS.len()];
        let mut i = 0;
        while i < METRICS.len() {
            all[i] = METRICS[i].metric;
            i += 1;
        }
        all
    };

    /// Its row of `METRICS`.
    pub fn spec(self) -> &'static MetricSpec {
        &METRICS[self as usize]
    }

    /// The name used in suites.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Whether it is read from the server's `/metrics` (`server.…`).
    pub(crate) fn is_server(self) -> bool {
        self.name().starts_with(SERVER)
    }

    /// Whether it is read from the server's histogram buckets, which give
    /// its mean exactly and a quantile only as the upper bound of the
    /// bucket holding it.
    pub(crate) fn is_bucketed(self) -> bool {
        matches!(
            self,
            Metric::ServerTtftHistogram
                | Metric::ServerItlHistogram
                | Metric::ServerTpotHistogram
                | Metric::ServerE2eHistogram
                | Metric::ServerQueueTime
        )
    }

    /// Whether a threshold may name `stat` of it: a histogram has no
    /// smallest value nor spread.
    pub fn takes(self, stat: Stat) -> bool {
        !(self.is_bucketed() && matches!(stat, Stat::Min | Stat::Stddev))
    }

    /// Whether values are durations (stored in seconds).
    pub(crate) fn is_duration(self) -> bool {
        self.spec().unit == Unit::Seconds
    }

    /// Whether the metric is a per-request distribution that needs a statistic.
    pub(crate) fn is_distribution(self) -> bool {
        self.spec().distribution
    }

    /// The unit printed after a value.
    pub fn unit(self) -> &'static str {
        match self.spec().unit {
            Unit::Seconds => "s",
            Unit::TokPerS => "tok/s",
            Unit::ReqPerS => "req/s",
            Unit::Count | Unit::Ratio => "",
            Unit::Percent => "%",
            Unit::Tokens => "tokens",
        }
    }
}

/// A value of a metric for people: durations in a fitting unit, counts
/// whole, percentages to two places, rates to one.
pub(crate) fn format_value(metric: Metric, value: f64) -> String {
    match metric.spec().unit {
        Unit::Seconds => crate::units::format_secs(value),
        Unit::Count => format!("{value}"),
        Unit::Percent => format!("{value:.2}%"),
        Unit::Ratio => format!("{value:.3}"),
        Unit::Tokens => format!("{value:.2} tokens"),
        Unit::TokPerS | Unit::ReqPerS => format!("{value:.1} {}", metric.unit()),
    }
}

/// A value of the figure named `key` (`ttft.p99`) as the run shows it
/// (`12.30ms`, `512.4 tok/s`); a name that is no figure's, the number.
pub(crate) fn format_named(key: &str, value: f64) -> String {
    format_stored(key, "", value)
}

/// A value the history holds, as the run shows it: by its figure's name
/// where that is a metric, else by its unit (the figures of
/// `servegate bench-client`: seconds in a fitting unit, a rate with its
/// unit).
pub fn format_stored(key: &str, unit: &str, value: f64) -> String {
    match key.parse::<MetricKey>() {
        Ok(k) => format_value(k.metric, value),
        Err(_) if unit == "s" => crate::units::format_secs(value),
        Err(_) if unit.is_empty() => value.to_string(),
        Err(_) => format!("{value:.1} {unit}"),
    }
}

/// A figure of a run record for a table (the Markdown and HTML reports):
/// durations in a fitting unit, whole numbers whole, the rest to one
/// place, no unit.
pub(crate) fn format_figure(key: MetricKey, value: f64) -> String {
    if key.metric.is_duration() {
        crate::units::format_secs(value)
    } else if value.fract() == 0.0 && value.abs() < 1e12 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> MetricKey {
        s.parse().unwrap()
    }

    /// The table is in the order of the enum, so `spec()` indexes it.
    #[test]
    fn the_table_has_a_row_per_metric_in_order() {
        for (i, spec) in METRICS.iter().enumerate() {
            assert_eq!(spec.metric as usize, i, "{}", spec.name);
        }
    }

    #[test]
    fn parses_keys() {
        assert_eq!(
            key("ttft.p99"),
            MetricKey {
                metric: Metric::Ttft,
                stat: Some(Stat::P99)
            }
        );
        assert_eq!(key("errors").stat, None);
        assert!(
            "ttft"
                .parse::<MetricKey>()
                .unwrap_err()
                .to_string()
                .contains("ttft.p99")
        );
        assert!("latensy.p99".parse::<MetricKey>().unwrap_err().is_unknown());
        assert!("errors.p99".parse::<MetricKey>().is_err());
        assert!("ttft.p42".parse::<MetricKey>().is_err());
        assert_eq!(key("itl.p99.9").stat, Some(Stat::P999));
        assert_eq!(key("ttft_content.p50").metric, Metric::TtftContent);
        assert!("latency".parse::<MetricKey>().is_err());
        assert_eq!(
            key("server.num_running_reqs.max"),
            MetricKey::stat(Metric::ServerRunningReqs, Stat::Max)
        );
        assert_eq!(key("server.aborted").stat, None);
        assert!("server.aborted.max".parse::<MetricKey>().is_err());
        assert!("server.num_running_reqs".parse::<MetricKey>().is_err());
        assert!("server".parse::<MetricKey>().unwrap_err().is_unknown());
    }

    /// Every key figure is a key a threshold could name.
    #[test]
    fn key_figures_are_valid_keys() {
        for k in KEY_FIGURES {
            assert_eq!(k.to_string().parse::<MetricKey>(), Ok(k));
        }
    }
}
