//! The server's gauges, sampled while a window is open.

use super::Scrape;
use crate::suite::metric::{Metric, Stat};

/// A gauge of the server's, sampled while a window is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gauge {
    /// Requests running.
    RunningReqs,
    /// Requests waiting in the queue.
    QueueReqs,
    /// KV-cache use, 0 to 1.
    TokenUsage,
    /// Generation throughput, tokens per second.
    GenThroughput,
    /// KV-cache slots held by running requests, in tokens.
    KvUsedTokens,
    /// KV-cache slots free, in tokens.
    KvAvailableTokens,
}

impl Gauge {
    /// Every gauge, in the order [`Samples`] keeps them.
    pub const ALL: [Gauge; GAUGES] = [
        Gauge::RunningReqs,
        Gauge::QueueReqs,
        Gauge::TokenUsage,
        Gauge::GenThroughput,
        Gauge::KvUsedTokens,
        Gauge::KvAvailableTokens,
    ];

    /// The gauge behind a `server.` metric.
    pub fn of(metric: Metric) -> Option<Gauge> {
        match metric {
            Metric::ServerRunningReqs => Some(Gauge::RunningReqs),
            Metric::ServerQueueReqs => Some(Gauge::QueueReqs),
            Metric::ServerTokenUsage => Some(Gauge::TokenUsage),
            Metric::ServerGenThroughput => Some(Gauge::GenThroughput),
            Metric::ServerKvUsedTokens => Some(Gauge::KvUsedTokens),
            Metric::ServerKvAvailableTokens => Some(Gauge::KvAvailableTokens),
            _ => None,
        }
    }

    /// Its series, the first present read: SGLang 0.5.23's
    /// (`srt/observability/metrics_collector.py`), vLLM's (V1, then the
    /// older V0 name) and llama.cpp's.
    pub fn series(self) -> &'static [&'static str] {
        match self {
            Gauge::RunningReqs => &[
                "sglang:num_running_reqs",
                "vllm:num_requests_running",
                "llamacpp:requests_processing",
            ],
            Gauge::QueueReqs => &[
                "sglang:num_queue_reqs",
                "vllm:num_requests_waiting",
                "llamacpp:requests_deferred",
            ],
            Gauge::TokenUsage => &[
                "sglang:token_usage",
                "vllm:kv_cache_usage_perc",
                "vllm:gpu_cache_usage_perc",
                "llamacpp:kv_cache_usage_ratio",
            ],
            Gauge::GenThroughput => &["sglang:gen_throughput"],
            // Written with the others (`pool_stats_observer.py`: the
            // pool's used and free slots).
            Gauge::KvUsedTokens => &["sglang:kv_used_tokens"],
            Gauge::KvAvailableTokens => &["sglang:kv_available_tokens"],
        }
    }

    /// Its value in one scrape: summed over label sets (one per
    /// data-parallel rank), a share averaged; and the series it was read
    /// from.
    pub(super) fn read(self, scrape: &Scrape) -> Option<(&'static str, f64)> {
        let (name, sum) = scrape.find(self.series())?;
        let sets = f64::from(scrape.sets.get(name).copied().unwrap_or(1).max(1));
        Some((
            name,
            if self == Gauge::TokenUsage {
                sum / sets
            } else {
                sum
            },
        ))
    }
}

/// How SGLang rewrites its gauges, in words: a value read between two
/// rewrites is the last one's, however often it is read (0.5.23,
/// `scheduler_components/metrics_reporter.py`).
pub(super) const SGLANG_REFRESH: &str = "SGLang rewrites its gauges at each prefill batch, every `decode_log_interval` decode steps (40 by default) and when it falls idle";

/// How many gauges are sampled.
pub(super) const GAUGES: usize = 6;

/// The gauges read while a window was open, a scrape every
/// [`SAMPLE_EVERY`]. vLLM's and llama.cpp's gauges are live (written at
/// each engine step, or at the scrape): every read is a sample. SGLang's
/// are rewritten now and then ([`SGLANG_REFRESH`]), so only a read that
/// found them rewritten is a sample — the first read of a window finds the
/// value from before it, and a read between two rewrites the same value
/// again, which counted would weigh the stale value by how often it was
/// read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    /// Scrapes read.
    pub scrapes: u32,
    /// Values read, by gauge in [`Gauge::ALL`]'s order.
    values: [Vec<f64>; GAUGES],
    /// Scrapes that failed, and the first one's error.
    pub failed: Option<(u32, String)>,
    /// The gauges of the scrape before (to tell a rewrite), and whether
    /// the server rewrites them now and then (SGLang's series).
    pub(super) previous: Option<[Option<f64>; GAUGES]>,
    pub(super) periodic: bool,
    /// Scrapes that found a periodic server's gauges rewritten.
    pub refreshes: u32,
}

/// How often the gauges are sampled while a window is open (only when a
/// gate names one: each scrape costs the server a `/metrics` page).
pub const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

impl Samples {
    /// Adds one scrape's gauges, or its failure.
    pub fn add(&mut self, scrape: Result<&Scrape, &str>) {
        match scrape {
            Ok(s) => {
                self.scrapes += 1;
                let read = Gauge::ALL.map(|g| g.read(s));
                // A value that is not a number is no reading (and NaN,
                // unequal to itself, would read as a rewrite every time).
                let now = read.map(|r| r.map(|(_, v)| v).filter(|v| v.is_finite()));
                let first = self.previous.is_none();
                if first {
                    self.periodic = read
                        .iter()
                        .flatten()
                        .any(|(name, _)| name.starts_with("sglang:"));
                }
                let fresh = if self.periodic {
                    // Any gauge moved: a rewrite (they are written together).
                    let rewritten = !first && self.previous != Some(now);
                    self.refreshes += u32::from(rewritten);
                    rewritten
                } else {
                    true
                };
                self.previous = Some(now);
                if fresh {
                    for (v, values) in now.iter().zip(&mut self.values) {
                        if let Some(v) = v {
                            values.push(*v);
                        }
                    }
                }
            }
            Err(e) => {
                let (n, _) = self.failed.get_or_insert_with(|| (0, e.to_owned()));
                *n += 1;
            }
        }
    }

    /// The values of `gauge` read.
    pub fn of(&self, gauge: Gauge) -> &[f64] {
        &self.values[gauge as usize]
    }

    /// Whether the gauges were rewritten too seldom in the window to stand
    /// for it: a periodic server's, rewritten fewer than twice (the window
    /// no longer than their refresh, one value standing for all of it).
    pub(super) fn too_few_refreshes(&self) -> bool {
        self.periodic && self.refreshes < 2
    }

    /// A statistic of `gauge` over the samples; `None` without any, or
    /// where a periodic server rewrote them fewer than twice.
    pub fn stat(&self, gauge: Gauge, stat: Stat) -> Option<f64> {
        let mut v = self.of(gauge).to_vec();
        if v.is_empty() || self.too_few_refreshes() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        #[expect(clippy::cast_precision_loss, reason = "a few thousand samples")]
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        Some(match stat {
            Stat::Mean => mean,
            Stat::Stddev => (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt(),
            Stat::Min => v[0],
            Stat::Max => v[v.len() - 1],
            q => {
                // Nearest rank.
                let q = q.quantile().unwrap_or(0.5);
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "a rank within the samples"
                )]
                let rank = ((q * n).ceil() as usize).clamp(1, v.len());
                v[rank - 1]
            }
        })
    }
}
