//! The server's own view of a gate: its Prometheus `/metrics` scraped before
//! and after the measured window, as deltas of token counters and latency
//! histograms (SGLang's `sglang:`, vLLM's `vllm:` and llama.cpp's
//! `llamacpp:` names, old and new), and its gauges sampled while the
//! window is open (running and queued requests, KV-cache use, its own
//! throughput).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::suite::metric::{Metric, Stat};
use crate::units::format_secs;

/// Every sample of a scrape, summed over label sets, by series name;
/// histogram buckets keyed by `name_bucket` and their `le`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    values: BTreeMap<String, f64>,
    /// Label sets per series name: a gauge of a share (KV-cache use) is
    /// their mean, not their sum.
    sets: BTreeMap<String, u32>,
    /// Counters by the label that splits them into kinds ([`KINDS`]),
    /// keyed by series name and the label's value: vLLM counts aborts in
    /// `request_success_total{finished_reason="abort"}` (those its engine
    /// decides; 0.32 does not count a request its client abandoned),
    /// SGLang its forward passes by `mode` (`decode_cuda_graph`,
    /// `decode_none`, …).
    kinds: BTreeMap<(String, String), f64>,
    buckets: BTreeMap<String, BTreeMap<String, f64>>,
    /// Counters of one process each ([`PER_PROCESS`]), by their whole
    /// label set: each rank's own, not copies of one figure.
    processes: BTreeMap<(String, String), f64>,
    /// When the client had the page: counters over a window are divided
    /// by the time between two reads.
    at: Option<std::time::Instant>,
}

/// A histogram's copies (one per rank that writes it), each its buckets
/// by bound.
type Copies = BTreeMap<String, BTreeMap<String, f64>>;

/// The labels that split a counter into kinds, read by their value.
const KINDS: [&str; 2] = ["finished_reason", "mode"];

/// Counters each scheduler process keeps of itself: its ranks' are
/// different figures, the busiest of which is read (the others' copies
/// of one figure count once, [`COPIES`]).
const PER_PROCESS: [&str; 1] = [SCHEDULER_CPU];

/// A series' label set as a key: its pairs (each value quoted as JSON, so
/// no value can pass for another pair), sorted, those named `without` left out.
fn key_of(pairs: &[(String, String)], without: &[&str]) -> String {
    let mut kept: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| !without.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={}", serde_json::Value::String(v.clone())))
        .collect();
    kept.sort_unstable();
    kept.join(",")
}

/// The value of label `key` among `pairs`.
fn pair<'p>(pairs: &'p [(String, String)], key: &str) -> Option<&'p str> {
    pairs
        .iter()
        .find_map(|(k, v)| (k == key).then_some(v.as_str()))
}

impl Scrape {
    /// Parses Prometheus text exposition; malformed lines are skipped.
    pub fn parse(text: &str) -> Self {
        let mut s = Scrape::default();
        // The largest value of each series per label set that is one part
        // of the server (its labels less [`COPIES`]), with its kind.
        let mut groups: BTreeMap<(String, String), (f64, Option<String>)> = BTreeMap::new();
        // Each copy's buckets of each part, by bound: one copy's whole
        // histogram is read, never a mix of the copies' bounds.
        let mut bucket_groups: BTreeMap<(String, String), Copies> = BTreeMap::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((name, labels, value)) = sample(line) else {
                continue;
            };
            let pairs = label_pairs(labels);
            if let Some(base) = name.strip_suffix("_bucket") {
                if let Some(le) = pair(&pairs, "le") {
                    let part = key_of(&pairs, &[COPIES, &["le"]].concat());
                    let copy = key_of(&pairs, &["le"]);
                    bucket_groups
                        .entry((base.to_owned(), part))
                        .or_default()
                        .entry(copy)
                        .or_default()
                        .insert(le.to_owned(), value);
                }
                continue;
            }
            // SGLang with priority scheduling writes each gauge for all
            // (`priority=""`) and again per priority: the total is read.
            if pair(&pairs, "priority").is_some_and(|p| !p.is_empty()) {
                continue;
            }
            if PER_PROCESS.contains(&name) {
                s.processes
                    .insert((name.to_owned(), key_of(&pairs, &[])), value);
            }
            let kind = KINDS
                .iter()
                .find_map(|k| pair(&pairs, k))
                .map(str::to_owned);
            let seen = groups
                .entry((name.to_owned(), key_of(&pairs, COPIES)))
                .or_insert((value, kind));
            seen.0 = seen.0.max(value);
        }
        for ((name, _), (value, kind)) in groups {
            if let Some(kind) = kind {
                *s.kinds.entry((name.clone(), kind)).or_insert(0.0) += value;
            }
            *s.values.entry(name.clone()).or_insert(0.0) += value;
            *s.sets.entry(name).or_insert(0) += 1;
        }
        for ((base, _), copies) in bucket_groups {
            // The copy that observed the most (its `+Inf` bucket).
            let Some(copy) = copies.into_values().max_by(|a, b| {
                let all = |c: &BTreeMap<String, f64>| c.get("+Inf").copied().unwrap_or(0.0);
                all(a).total_cmp(&all(b))
            }) else {
                continue;
            };
            let buckets = s.buckets.entry(base).or_default();
            for (le, value) in copy {
                *buckets.entry(le).or_insert(0.0) += value;
            }
        }
        s
    }

    /// The same scrape, read by the client at `at`.
    #[must_use]
    pub fn read_at(self, at: std::time::Instant) -> Self {
        Self {
            at: Some(at),
            ..self
        }
    }

    /// The first of `names` present.
    fn find<'n>(&self, names: &[&'n str]) -> Option<(&'n str, f64)> {
        names
            .iter()
            .find_map(|n| self.values.get(*n).map(|v| (*n, *v)))
    }

    /// The counter `name` of kind `kind` ([`KINDS`]).
    fn kind(&self, name: &str, kind: &str) -> Option<f64> {
        self.kinds.get(&(name.to_owned(), kind.to_owned())).copied()
    }
}

/// Labels that name a copy of one figure, not a part of the server: with
/// `--enable-metrics-for-all-schedulers` every tensor-, pipeline- and
/// expert-parallel rank of SGLang 0.5.23 writes the same scheduler series
/// (`srt/observability/metrics_collector.py`), so those copies count once
/// (their largest); data-parallel ranks, vLLM's engines and the other
/// labels (`cache_source`, `is_streaming`) are parts, summed.
const COPIES: &[&str] = &[
    "tp_rank",
    "pp_rank",
    "moe_ep_rank",
    "attn_tp_rank",
    "attn_cp_rank",
];

/// Most info series an info document keeps, and most labels of each.
const INFO_SERIES: usize = 64;
const INFO_LABELS: usize = 256;

/// The server's info series as a document: each family whose name ends
/// in `_info` (a gauge set to 1 whose labels carry a configuration, as
/// vLLM 0.32.0's `vllm:cache_config_info{block_size="128",…}`), by name,
/// the labels of its first series as strings. `expect_server`'s
/// `metrics` source reads it.
pub fn info_document(text: &str) -> serde_json::Value {
    let mut doc = serde_json::Map::new();
    for line in text.lines().map(str::trim) {
        if doc.len() >= INFO_SERIES {
            break;
        }
        let Some((name, labels, _)) = sample(line).filter(|(n, ..)| n.ends_with("_info")) else {
            continue;
        };
        if doc.contains_key(name) {
            continue;
        }
        let labels = label_pairs(labels)
            .into_iter()
            .take(INFO_LABELS)
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect();
        doc.insert(name.to_owned(), serde_json::Value::Object(labels));
    }
    serde_json::Value::Object(doc)
}

/// `a="x",b="y, z"` as pairs, each value unescaped (`\"`, `\\`, `\n`)
/// and free to hold commas; a malformed rest is dropped.
fn label_pairs(labels: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut rest = labels.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let Some(quoted) = after.trim_start().strip_prefix('"') else {
            break;
        };
        let mut value = String::new();
        let mut chars = quoted.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => break,
                },
                '"' => {
                    end = Some(i);
                    break;
                }
                c => value.push(c),
            }
        }
        let Some(end) = end else {
            break;
        };
        pairs.push((key.trim().trim_start_matches(',').trim().to_owned(), value));
        rest = quoted[end + 1..].trim_start().trim_start_matches(',');
    }
    pairs
}

/// One sample line: `name{labels} value [timestamp]`, the labels' values
/// quoted (and free to hold spaces, braces and escaped quotes); the
/// timestamp, when there is one, is not the value.
fn sample(line: &str) -> Option<(&str, &str, f64)> {
    let (name, labels, rest) = match line.find(['{', ' ', '\t']) {
        Some(i) if line.as_bytes()[i] == b'{' => {
            let mut quoted = false;
            let mut escaped = false;
            let close = line[i..].char_indices().find_map(|(j, c)| {
                match c {
                    _ if escaped => escaped = false,
                    '\\' if quoted => escaped = true,
                    '"' => quoted = !quoted,
                    '}' if !quoted => return Some(i + j),
                    _ => {}
                }
                None
            })?;
            (&line[..i], &line[i + 1..close], &line[close + 1..])
        }
        Some(i) => (&line[..i], "", &line[i..]),
        None => return None,
    };
    let mut fields = rest.split_whitespace();
    let value = fields.next()?.parse::<f64>().ok()?;
    // At most a timestamp (milliseconds) after the value.
    match (fields.next(), fields.next()) {
        (None, _) => Some((name, labels, value)),
        (Some(ts), None) if ts.parse::<i64>().is_ok() => Some((name, labels, value)),
        _ => None,
    }
}

/// A latency histogram's change over the window.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramDelta {
    /// Observations in the window.
    pub count: f64,
    /// Their sum, seconds.
    pub sum: f64,
    /// Cumulative counts by upper bound, ascending.
    pub buckets: Vec<(f64, f64)>,
}

impl HistogramDelta {
    /// The mean, seconds.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }

    /// Why the histogram's change cannot be believed, if it cannot: a
    /// count or sum that went backwards (a restart in the window) or is no
    /// number, no `+Inf` bucket or one that disagrees with the count,
    /// buckets that are not cumulative, a mean above the bound of the
    /// largest observation's bucket. A quantile is read off the buckets,
    /// so buckets that say less than the server saw would make it look
    /// faster than it was.
    pub fn fault(&self) -> Option<String> {
        let (count, sum) = (self.count, self.sum);
        if !(count.is_finite() && sum.is_finite()) || count < 0.0 || sum < 0.0 {
            return Some(format!(
                "its count or its sum went backwards or is no number ({count} observations, {sum} s in all)"
            ));
        }
        let Some(&(last, all)) = self.buckets.last() else {
            return Some("it has no buckets".to_owned());
        };
        if last != f64::INFINITY {
            return Some("it has no `+Inf` bucket".to_owned());
        }
        if (all - count).abs() > 0.5 {
            return Some(format!(
                "its `+Inf` bucket counts {all} observations, its `_count` {count}"
            ));
        }
        if self.buckets.first().is_some_and(|(_, c)| *c < 0.0)
            || self.buckets.windows(2).any(|w| w[1].1 < w[0].1)
        {
            return Some("its buckets are not cumulative".to_owned());
        }
        if let (Some(mean), Some(top)) = (self.mean(), self.quantile_bound(1.0))
            && mean > top
        {
            return Some(format!(
                "its mean, {}, is above the bucket of its largest observation, ≤ {}",
                format_secs(mean),
                format_secs(top)
            ));
        }
        None
    }

    /// The upper bound of the bucket holding quantile `q`: the server only
    /// knows its buckets, so this is "at most".
    pub fn quantile_bound(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last()?.1;
        if total <= 0.0 {
            return None;
        }
        self.buckets
            .iter()
            .find(|(_, c)| *c >= q * total)
            .map(|(le, _)| *le)
    }
}

/// What the server says about a window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerView {
    /// Generated tokens counted by the server.
    pub generation_tokens: Option<f64>,
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
    fn read(self, scrape: &Scrape) -> Option<(&'static str, f64)> {
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
const SGLANG_REFRESH: &str = "SGLang rewrites its gauges at each prefill batch, every `decode_log_interval` decode steps (40 by default) and when it falls idle";

/// How many gauges are sampled.
const GAUGES: usize = 6;

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
    previous: Option<[Option<f64>; GAUGES]>,
    periodic: bool,
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
    fn too_few_refreshes(&self) -> bool {
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

/// SGLang, vLLM and llama.cpp name their series with these.
const PREFIXES: [&str; 3] = ["sglang:", "vllm:", "llamacpp:"];

fn counter_delta(before: &Scrape, after: &Scrape, suffix: &str) -> Option<f64> {
    let names: Vec<String> = PREFIXES.iter().map(|p| format!("{p}{suffix}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    named_delta(before, after, &refs)
}

fn no_counter() -> String {
    "no counter of it".to_owned()
}

/// The change of the first of the counters `names` present after (none
/// where it is no number: an infinite counter is no count).
fn named_delta(before: &Scrape, after: &Scrape, names: &[&str]) -> Option<f64> {
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
fn sglang_event_delta(before: &Scrape, after: &Scrape, name: &str) -> Option<f64> {
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
fn cache_delta(before: &Scrape, after: &Scrape) -> Option<(f64, f64)> {
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
fn spec_delta(before: &Scrape, after: &Scrape) -> Option<(f64, f64)> {
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
const CUDA_GRAPH_PASSES: &str = "sglang:cuda_graph_passes_total";

/// SGLang's counter of its scheduler process's CPU time.
const SCHEDULER_CPU: &str = "sglang:scheduler_process_cpu_seconds_total";

/// The shortest window whose scheduler CPU is a figure: SGLang adds to the
/// counter once at least a second has passed since it last did
/// (`scheduler_components/metrics_reporter.py`,
/// `_SCHEDULER_TIME_ACCOUNTING_INTERVAL_NS`), so each read lags by up to a
/// second of the scheduler's time.
pub const SCHEDULER_CPU_WINDOW: f64 = 5.0;

/// The largest change of a [`PER_PROCESS`] counter among the processes
/// read both times (a rank that appeared in the window has no change to
/// read); `None` where none was.
fn busiest_delta(before: &Scrape, after: &Scrape, name: &str) -> Option<f64> {
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
fn cuda_graph_delta(before: &Scrape, after: &Scrape) -> Option<(f64, f64)> {
    after.values.get(CUDA_GRAPH_PASSES)?;
    let delta = |mode: &str| {
        after.kind(CUDA_GRAPH_PASSES, mode).unwrap_or(0.0)
            - before.kind(CUDA_GRAPH_PASSES, mode).unwrap_or(0.0)
    };
    let graph = delta("decode_cuda_graph");
    Some((graph, graph + delta("decode_none"))).filter(|(g, a)| g.is_finite() && a.is_finite())
}

/// The first of the histograms named `suffixes` (new names before old)
/// that the server has.
fn histogram_delta(before: &Scrape, after: &Scrape, suffixes: &[&str]) -> Option<HistogramDelta> {
    suffixes
        .iter()
        .find_map(|s| one_histogram_delta(before, after, s))
}

fn one_histogram_delta(before: &Scrape, after: &Scrape, suffix: &str) -> Option<HistogramDelta> {
    PREFIXES.iter().find_map(|p| {
        let base = format!("{p}{suffix}");
        let count = after.values.get(&format!("{base}_count"))?
            - before
                .values
                .get(&format!("{base}_count"))
                .copied()
                .unwrap_or(0.0);
        let sum = after.values.get(&format!("{base}_sum"))?
            - before
                .values
                .get(&format!("{base}_sum"))
                .copied()
                .unwrap_or(0.0);
        let empty = BTreeMap::new();
        let was = before.buckets.get(&base).unwrap_or(&empty);
        let mut buckets: Vec<(f64, f64)> = after
            .buckets
            .get(&base)?
            .iter()
            .filter_map(|(le, c)| {
                // A bound that is no number is no bucket.
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok().filter(|b: &f64| b.is_finite())?
                };
                Some((bound, c - was.get(le).copied().unwrap_or(0.0)))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Some(HistogramDelta {
            count,
            sum,
            buckets,
        })
    })
}

/// The counters of generated tokens read, in the order tried (llama.cpp
/// counts them as `tokens_predicted_total`).
const GENERATION_COUNTERS: [&str; 2] = ["generation_tokens_total", "tokens_predicted_total"];

/// Every series name that holds generated tokens, as a failure names them
/// when a server has none.
pub fn generation_counter_names() -> Vec<String> {
    GENERATION_COUNTERS
        .iter()
        .flat_map(|suffix| PREFIXES.iter().map(move |p| format!("{p}{suffix}")))
        .collect()
}

impl ServerView {
    /// The change between two scrapes.
    pub fn between(before: &Scrape, after: &Scrape) -> Self {
        Self {
            generation_tokens: GENERATION_COUNTERS
                .iter()
                .find_map(|suffix| counter_delta(before, after, suffix)),
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
                Some((_, p)) if p <= 0.0 => "the server counted no prompt tokens in the window".to_owned(),
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
            parts.push(format!("generation tokens {g:.0}"));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_series_are_a_document_of_their_labels() {
        let text = "# TYPE vllm:cache_config_info gauge\n\
            vllm:cache_config_info{block_size=\"128\",kv_cache_dtype_skip_layers=\"[a, b]\",note=\"say \\\"hi\\\"\",engine=\"0\"} 1.0\n\
            vllm:cache_config_info{block_size=\"64\",engine=\"1\"} 1.0\n\
            vllm:num_requests_running{engine=\"0\"} 3\n\
            python_info{implementation=\"CPython\"} 1.0\n";
        assert_eq!(
            info_document(text),
            serde_json::json!({
                "vllm:cache_config_info": {"block_size": "128", "kv_cache_dtype_skip_layers": "[a, b]", "note": "say \"hi\"", "engine": "0"},
                "python_info": {"implementation": "CPython"},
            })
        );
    }

    const BEFORE: &str = "# TYPE sglang:generation_tokens_total counter\n\
        sglang:generation_tokens_total{model_name=\"m\",tp_rank=\"0\"} 100\n\
        sglang:time_to_first_token_seconds_bucket{le=\"0.05\"} 1\n\
        sglang:time_to_first_token_seconds_bucket{le=\"0.1\"} 2\n\
        sglang:time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n\
        sglang:time_to_first_token_seconds_sum 0.1\n\
        sglang:time_to_first_token_seconds_count 2\n";
    const AFTER: &str = "sglang:generation_tokens_total{model_name=\"m\",tp_rank=\"0\"} 612\n\
        sglang:time_to_first_token_seconds_bucket{le=\"0.05\"} 5\n\
        sglang:time_to_first_token_seconds_bucket{le=\"0.1\"} 11\n\
        sglang:time_to_first_token_seconds_bucket{le=\"+Inf\"} 12\n\
        sglang:time_to_first_token_seconds_sum 0.9\n\
        sglang:time_to_first_token_seconds_count 12\n";

    #[test]
    fn deltas_of_counters_and_histograms() {
        let v = ServerView::between(&Scrape::parse(BEFORE), &Scrape::parse(AFTER));
        assert_eq!(v.generation_tokens, Some(512.0));
        let ttft = v.ttft.clone().unwrap();
        assert!((ttft.count - 10.0).abs() < 1e-9);
        assert!((ttft.mean().unwrap() - 0.08).abs() < 1e-9);
        assert_eq!(ttft.quantile_bound(0.5), Some(0.1));
        assert_eq!(ttft.quantile_bound(0.99), Some(f64::INFINITY));
        assert!(
            v.render()
                .contains("generation tokens 512, ttft mean 80.00ms p99 ≤ +Inf")
        );
    }

    #[test]
    fn timestamps_quoted_labels_and_vllms_names() {
        let before = Scrape::parse(
            "vllm:generation_tokens_total{model_name=\"a b}c\",path=\"x\\\"y\"} 10 1700000000000\n\
             vllm:request_time_per_output_token_seconds_count 1\n\
             vllm:request_time_per_output_token_seconds_sum 0.01\n\
             vllm:request_time_per_output_token_seconds_bucket{le=\"0.02\"} 1\n\
             vllm:request_time_per_output_token_seconds_bucket{le=\"+Inf\"} 1\n\
             vllm:time_per_output_token_seconds_count 1000\n\
             vllm:inter_token_latency_seconds_count 3\n\
             vllm:inter_token_latency_seconds_sum 0.03\n\
             vllm:inter_token_latency_seconds_bucket{le=\"+Inf\"} 3\n\
             broken{le=\"1\"} 1 2 3\n",
        );
        let after = Scrape::parse(
            "vllm:generation_tokens_total{model_name=\"a b}c\",path=\"x\\\"y\"} 25 1700000005000\n\
             vllm:request_time_per_output_token_seconds_count 3\n\
             vllm:request_time_per_output_token_seconds_sum 0.05\n\
             vllm:request_time_per_output_token_seconds_bucket{le=\"0.02\"} 3\n\
             vllm:request_time_per_output_token_seconds_bucket{le=\"+Inf\"} 3\n\
             vllm:time_per_output_token_seconds_count 2000\n\
             vllm:inter_token_latency_seconds_count 13\n\
             vllm:inter_token_latency_seconds_sum 0.13\n\
             vllm:inter_token_latency_seconds_bucket{le=\"+Inf\"} 13\n",
        );
        assert!(!before.values.contains_key("broken"), "{before:?}");
        let v = ServerView::between(&before, &after);
        // The value, not the trailing timestamp.
        assert_eq!(v.generation_tokens, Some(15.0));
        let tpot = v.tpot.unwrap();
        assert!((tpot.count - 2.0).abs() < 1e-9 && (tpot.sum - 0.04).abs() < 1e-9);
        assert!((v.itl.unwrap().mean().unwrap() - 0.01).abs() < 1e-9);
    }

    /// vLLM's series for the same figures: preemptions, aborts by finish
    /// reason, prefix-cache hits over queries, drafts and accepted tokens;
    /// its KV-cache share averaged over two engines, its running requests
    /// summed.
    #[test]
    fn vllms_counters_and_gauges() {
        const SERIES: [&str; 7] = [
            "vllm:num_preemptions_total",
            "vllm:request_success_total{finished_reason=\"stop\"}",
            "vllm:request_success_total{finished_reason=\"abort\"}",
            "vllm:prefix_cache_hits_total",
            "vllm:prefix_cache_queries_total",
            "vllm:spec_decode_num_drafts_total",
            "vllm:spec_decode_num_accepted_tokens_total",
        ];
        let page = |values: [u32; 7]| {
            let mut text = String::new();
            for (s, v) in SERIES.iter().zip(values) {
                let _ = writeln!(text, "{s} {v}");
            }
            Scrape::parse(&text)
        };
        let before = page([1, 10, 2, 100, 200, 10, 15]);
        let after = page([4, 30, 5, 250, 400, 110, 215]);
        let mut v = ServerView::between(&before, &after);
        assert_eq!(v.value(Metric::ServerRetractions, None), Some(3.0));
        assert_eq!(v.value(Metric::ServerAborted, None), Some(3.0));
        assert_eq!(v.value(Metric::ServerCacheHitRate, None), Some(0.75));
        // 100 drafts, each a token of its own, and 200 accepted.
        assert_eq!(v.value(Metric::ServerSpecAcceptLength, None), Some(3.0));
        for running in ["3", "9"] {
            let page = format!(
                "vllm:num_requests_running{{engine=\"0\"}} {running}\n\
                 vllm:num_requests_running{{engine=\"1\"}} 1\n\
                 vllm:kv_cache_usage_perc{{engine=\"0\"}} 0.2\n\
                 vllm:kv_cache_usage_perc{{engine=\"1\"}} 0.4\n"
            );
            v.samples.add(Ok(&Scrape::parse(&page)));
        }
        v.samples.add(Err("GET /metrics failed: timeout"));
        let stat = |m, s| v.value(m, Some(s));
        assert_eq!(stat(Metric::ServerRunningReqs, Stat::Max), Some(10.0));
        assert_eq!(stat(Metric::ServerRunningReqs, Stat::Min), Some(4.0));
        assert_eq!(stat(Metric::ServerRunningReqs, Stat::Mean), Some(7.0));
        let usage = stat(Metric::ServerTokenUsage, Stat::Max).unwrap();
        assert!((usage - 0.3).abs() < 1e-9, "{usage}");
        assert_eq!(stat(Metric::ServerGenThroughput, Stat::Max), None);
        let why = v.missing(Metric::ServerGenThroughput).unwrap();
        assert!(
            why.contains("none of sglang:gen_throughput (2 scrapes read) (1 scrapes failed, the first: GET /metrics failed: timeout)"),
            "{why}"
        );
    }

    /// SGLang's gauges count only where a scrape found them rewritten: the
    /// window's first read (the value from before it) and the reads
    /// between two rewrites are not samples; rewritten fewer than twice,
    /// the window is no longer than their refresh and gives no figure,
    /// saying why. (Every read of vLLM's live gauges counts: above.)
    #[test]
    fn sglangs_gauges_count_only_when_rewritten() {
        let page = |running: u32, throughput: f64| {
            Scrape::parse(&format!(
                "sglang:num_running_reqs {running}
sglang:num_queue_reqs 0
                 sglang:token_usage 0.1
sglang:gen_throughput {throughput}
"
            ))
        };
        let mut v = ServerView::default();
        // Idle before the window; then rewritten at 8 running, read four
        // times; once more at 8, read twice.
        for (running, throughput) in [(0, 0.0), (8, 95.5), (8, 95.5), (8, 95.5), (8, 95.5)] {
            v.samples.add(Ok(&page(running, throughput)));
        }
        assert_eq!(v.samples.refreshes, 1);
        assert_eq!(v.value(Metric::ServerRunningReqs, Some(Stat::Max)), None);
        let why = v.missing(Metric::ServerRunningReqs).unwrap();
        assert!(
            why.starts_with("the server rewrote its gauges once in the window's 5 scrapes: the window is no longer than their refresh, so one value would stand for all of it (SGLang rewrites its gauges at each prefill batch"),
            "{why}"
        );
        for (running, throughput) in [(8, 97.25), (8, 97.25)] {
            v.samples.add(Ok(&page(running, throughput)));
        }
        let stat = |m, s| v.value(m, Some(s));
        assert_eq!(stat(Metric::ServerRunningReqs, Stat::Min), Some(8.0));
        assert_eq!(stat(Metric::ServerGenThroughput, Stat::Mean), Some(96.375));
        assert_eq!(
            v.sample_size(Metric::ServerRunningReqs, "the window"),
            "2 fresh values in the window: the server rewrote its gauges 2 times in 7 scrapes, only those reads count (SGLang rewrites its gauges at each prefill batch, every `decode_log_interval` decode steps (40 by default) and when it falls idle)"
        );
        // Never rewritten: every read found the value from before. A
        // gauge that is not a number reads as no value, not as a rewrite
        // every time.
        let mut idle = ServerView::default();
        for _ in 0..3 {
            idle.samples.add(Ok(&page(0, f64::NAN)));
        }
        assert_eq!(idle.samples.refreshes, 0);
        assert!(
            idle.missing(Metric::ServerQueueReqs)
                .unwrap()
                .starts_with("the server rewrote its gauges not once in the window's 3 scrapes: the window is no longer than their refresh, so every read found the value from before it")
        );
    }

    /// Counters that went backwards (a restart in the window) or forge an
    /// impossible figure give none, saying why.
    #[test]
    fn counters_that_cannot_be_believed_give_nothing() {
        let before = Scrape::parse(
            "sglang:num_aborted_requests_total 9\nsglang:prompt_tokens_total 10\n\
             sglang:cached_tokens_total{cache_source=\"device\"} 0\n\
             sglang:spec_verify_calls_total 0\nsglang:generation_tokens_total 0\n",
        );
        let after = Scrape::parse(
            "sglang:num_aborted_requests_total 1\nsglang:prompt_tokens_total 20\n\
             sglang:cached_tokens_total{cache_source=\"device\"} 50\n\
             sglang:spec_verify_calls_total 10\nsglang:generation_tokens_total 5\n",
        );
        let v = ServerView::between(&before, &after);
        for (metric, why) in [
            (Metric::ServerAborted, "went backwards"),
            (Metric::ServerCacheHitRate, "50 prompt tokens cached of 10"),
            (
                Metric::ServerSpecAcceptLength,
                "5 tokens from 10 verify steps",
            ),
        ] {
            assert_eq!(v.value(metric, None), None, "{metric:?}");
            let said = v.missing(metric).unwrap();
            assert!(said.contains(why), "{said}");
        }
        // SGLang makes its cached-token counter at the first hit: none yet
        // is a hit rate of 0.
        let cold = ServerView::between(
            &Scrape::parse("sglang:prompt_tokens_total 0\n"),
            &Scrape::parse("sglang:prompt_tokens_total 64\n"),
        );
        assert_eq!(cold.value(Metric::ServerCacheHitRate, None), Some(0.0));
        // Its abort and retraction counters too, at the first event: none
        // yet is none; a server without SGLang's counters has no figure.
        assert_eq!(cold.value(Metric::ServerAborted, None), Some(0.0));
        assert_eq!(cold.value(Metric::ServerRetractions, None), Some(0.0));
        let first = ServerView::between(
            &Scrape::parse("sglang:prompt_tokens_total 0\n"),
            &Scrape::parse(
                "sglang:prompt_tokens_total 64\nsglang:num_aborted_requests_total{model_name=\"m\"} 2\n",
            ),
        );
        assert_eq!(first.value(Metric::ServerAborted, None), Some(2.0));
        let other = ServerView::between(
            &Scrape::parse("llamacpp:prompt_tokens_total 0\n"),
            &Scrape::parse("llamacpp:prompt_tokens_total 64\n"),
        );
        assert_eq!(other.value(Metric::ServerAborted, None), None);
        assert_eq!(other.value(Metric::ServerRetractions, None), None);
    }

    /// Every TP rank's copy of a scheduler series counts once, each DP
    /// rank's is summed, a per-priority copy is left out: 8 TP ranks of 2
    /// DP ranks running 5 and 3 requests are 8 running, not 64.
    #[test]
    fn rank_copies_count_once_and_parts_add_up() {
        let mut page = String::new();
        for dp in [0, 1] {
            for tp in 0..8 {
                let n = if dp == 0 { 5 } else { 3 };
                let _ = writeln!(
                    page,
                    "sglang:num_running_reqs{{tp_rank=\"{tp}\",dp_rank=\"{dp}\",priority=\"\"}} {n}"
                );
                let _ = writeln!(
                    page,
                    "sglang:num_retracted_requests_total{{tp_rank=\"{tp}\",dp_rank=\"{dp}\"}} 2"
                );
            }
            let _ = writeln!(
                page,
                "sglang:num_running_reqs{{tp_rank=\"0\",dp_rank=\"{dp}\",priority=\"1\"}} 9"
            );
        }
        page.push_str(
            "sglang:cached_tokens_total{cache_source=\"device\"} 10\n\
             sglang:cached_tokens_total{cache_source=\"host\"} 5\n",
        );
        let s = Scrape::parse(&page);
        assert_eq!(
            Gauge::RunningReqs.read(&s),
            Some(("sglang:num_running_reqs", 8.0))
        );
        assert_eq!(
            s.values.get("sglang:num_retracted_requests_total"),
            Some(&4.0)
        );
        assert_eq!(s.values.get("sglang:cached_tokens_total"), Some(&15.0));
    }

    #[test]
    fn servers_without_these_series_give_nothing() {
        let v = ServerView::between(&Scrape::parse(""), &Scrape::parse("up 1\n"));
        assert_eq!(v, ServerView::default());
    }

    /// SGLang 0.5.23's series as a CPU server wrote them (seen on the real
    /// one: its `decode_cuda_graph` series is made at the first graph pass,
    /// so a server without graphs has none), then a GPU one whose batches
    /// outgrew its graphs: the share of decode passes on a graph, the
    /// scheduler's CPU per second of a timed window, each read once where
    /// every tensor-parallel rank writes its copy.
    #[test]
    fn cuda_graph_passes_and_scheduler_cpu_are_figures() {
        let labels = |tp: u32| format!("model_name=\"m\",tp_rank=\"{tp}\"");
        let page = |graph: Option<u32>, none: u32, cpu: f64| {
            let mut text = String::new();
            for tp in 0..2 {
                let l = labels(tp);
                let _ = write!(
                    text,
                    "sglang:cuda_graph_passes_total{{{l},mode=\"prefill_none\"}} 3\n\
                     sglang:cuda_graph_passes_total{{{l},mode=\"decode_none\"}} {none}\n\
                     sglang:scheduler_process_cpu_seconds_total{{{l}}} {cpu}\n"
                );
                if let Some(g) = graph {
                    let _ = writeln!(
                        text,
                        "sglang:cuda_graph_passes_total{{{l},mode=\"decode_cuda_graph\"}} {g}"
                    );
                }
            }
            text
        };
        let t0 = std::time::Instant::now();
        let at = |secs: f64| t0 + std::time::Duration::from_secs_f64(secs);
        let cpu_box = ServerView::between(
            &Scrape::parse(&page(None, 7, 2.0)).read_at(at(0.0)),
            &Scrape::parse(&page(None, 57, 8.0)).read_at(at(10.0)),
        );
        assert_eq!(cpu_box.value(Metric::ServerCudaGraphShare, None), Some(0.0));
        assert_eq!(
            cpu_box.sample_size(Metric::ServerCudaGraphShare, "10s"),
            "0 of 50 decode passes ran a CUDA graph, by the server's counter"
        );
        let cpu = cpu_box.value(Metric::ServerSchedulerCpu, None).unwrap();
        assert!((cpu - 0.6).abs() < 1e-9, "{cpu}");
        let outgrown = ServerView::between(
            &Scrape::parse(&page(Some(100), 0, 0.0)),
            &Scrape::parse(&page(Some(190), 10, 1.0)),
        );
        assert_eq!(
            outgrown.value(Metric::ServerCudaGraphShare, None),
            Some(0.9)
        );
        // Untimed reads, and a window shorter than SGLang's accounting
        // interval allows, give no CPU figure, saying why.
        assert_eq!(outgrown.value(Metric::ServerSchedulerCpu, None), None);
        assert!(
            outgrown
                .missing(Metric::ServerSchedulerCpu)
                .unwrap()
                .contains("were not timed")
        );
        let short = ServerView::between(
            &Scrape::parse(&page(None, 0, 1.0)).read_at(at(0.0)),
            &Scrape::parse(&page(None, 5, 2.0)).read_at(at(2.0)),
        );
        assert_eq!(short.value(Metric::ServerSchedulerCpu, None), None);
        let why = short.missing(Metric::ServerSchedulerCpu).unwrap();
        assert!(
            why.starts_with(
                "the window, 2.000s between the reads of /metrics, is shorter than 5.000s"
            ),
            "{why}"
        );
        // No decode pass in the window, and a server without the series.
        let idle = ServerView::between(
            &Scrape::parse(&page(None, 5, 1.0)),
            &Scrape::parse(&page(None, 5, 1.0)),
        );
        assert_eq!(
            idle.missing(Metric::ServerCudaGraphShare).unwrap(),
            "the server counted no decode pass in the window"
        );
        let vllm = ServerView::between(
            &Scrape::parse("vllm:prompt_tokens_total 0\n"),
            &Scrape::parse("vllm:prompt_tokens_total 9\n"),
        );
        for metric in [Metric::ServerCudaGraphShare, Metric::ServerSchedulerCpu] {
            assert_eq!(vllm.value(metric, None), None);
            assert!(
                vllm.missing(metric)
                    .unwrap()
                    .starts_with("/metrics has no sglang:")
            );
        }
    }

    /// The server's histograms as figures: the mean exact, a percentile
    /// and the largest as the upper bound of their bucket, nothing where
    /// it lies past the last finite bound; a tensor-parallel rank's copy
    /// of a scheduler histogram (queue time) counted once.
    #[test]
    fn the_servers_histograms_are_figures_bounded_by_their_buckets() {
        let v = ServerView::between(&Scrape::parse(BEFORE), &Scrape::parse(AFTER));
        let mean = v
            .value(Metric::ServerTtftHistogram, Some(Stat::Mean))
            .unwrap();
        assert!((mean - 0.08).abs() < 1e-9, "{mean}");
        assert_eq!(
            v.value(Metric::ServerTtftHistogram, Some(Stat::P50)),
            Some(0.1)
        );
        // 9 of 10 observations at or under 0.1s: the p99 and the largest
        // lie past the last finite bound.
        for stat in [Stat::P99, Stat::Max] {
            assert_eq!(v.value(Metric::ServerTtftHistogram, Some(stat)), None);
        }
        assert_eq!(
            v.missing(Metric::ServerTtftHistogram).unwrap(),
            "the server's histogram cannot bound it: the figure lies in its last bucket, above 100.00ms"
        );
        assert!(
            v.missing(Metric::ServerQueueTime)
                .unwrap()
                .starts_with("/metrics has no histogram queue_time_seconds")
        );
        let queue = |tp: u32, n: u32, sum: f64| {
            format!(
                "sglang:queue_time_seconds_bucket{{tp_rank=\"{tp}\",le=\"0.001\"}} {n}\n\
                 sglang:queue_time_seconds_bucket{{tp_rank=\"{tp}\",le=\"0.01\"}} {}\n\
                 sglang:queue_time_seconds_bucket{{tp_rank=\"{tp}\",le=\"+Inf\"}} {}\n\
                 sglang:queue_time_seconds_sum{{tp_rank=\"{tp}\"}} {sum}\n\
                 sglang:queue_time_seconds_count{{tp_rank=\"{tp}\"}} {}\n",
                n * 2,
                n * 2,
                n * 2
            )
        };
        let v = ServerView::between(
            &Scrape::parse(""),
            &Scrape::parse(&(queue(0, 50, 0.3) + &queue(1, 50, 0.3))),
        );
        let q = v.queue_time.as_ref().unwrap();
        assert!((q.count - 100.0).abs() < 1e-9, "{}", q.count);
        assert_eq!(q.buckets.last(), Some(&(f64::INFINITY, 100.0)));
        assert_eq!(
            v.value(Metric::ServerQueueTime, Some(Stat::P50)),
            Some(0.001)
        );
        assert_eq!(
            v.value(Metric::ServerQueueTime, Some(Stat::Max)),
            Some(0.01)
        );
        assert_eq!(
            v.sample_size(Metric::ServerQueueTime, "3s"),
            "100 observations in the server's histogram over 3s; a percentile is the upper bound of its bucket"
        );
    }

    /// A page that lies about its histogram gives no figure of it, saying
    /// why, where its buckets would make the server look faster than its
    /// count and sum say: no `+Inf` bucket, a bound that is no number
    /// standing in for the total, a restart in the window, copies of a
    /// rank that disagree (one copy's whole histogram is read, never the
    /// most optimistic bucket of each).
    #[test]
    fn a_histogram_that_cannot_be_believed_gives_no_figure() {
        let h = |lines: &str| ServerView::between(&Scrape::parse(""), &Scrape::parse(lines));
        let no_inf = h("sglang:time_to_first_token_seconds_bucket{le=\"0.1\"} 10\n\
             sglang:time_to_first_token_seconds_sum 5000\n\
             sglang:time_to_first_token_seconds_count 1000\n");
        let nan_total = h(
            "sglang:time_to_first_token_seconds_bucket{le=\"0.1\"} 1000\n\
             sglang:time_to_first_token_seconds_bucket{le=\"+Inf\"} 1000\n\
             sglang:time_to_first_token_seconds_bucket{le=\"NaN\"} 99999\n\
             sglang:time_to_first_token_seconds_sum 5000\n\
             sglang:time_to_first_token_seconds_count 1000\n",
        );
        for (v, why) in [
            (&no_inf, "it has no `+Inf` bucket"),
            (
                &nan_total,
                "its mean, 5.000s, is above the bucket of its largest observation, ≤ 100.00ms",
            ),
        ] {
            for stat in [Stat::Mean, Stat::P99, Stat::Max] {
                assert_eq!(v.value(Metric::ServerTtftHistogram, Some(stat)), None);
            }
            let said = v.missing(Metric::ServerTtftHistogram).unwrap();
            assert_eq!(
                said,
                format!("the server's histogram cannot be believed: {why}")
            );
            assert!(!v.render().contains("ttft"), "{}", v.render());
        }
        let restarted = ServerView::between(
            &Scrape::parse(BEFORE),
            &Scrape::parse(
                "sglang:time_to_first_token_seconds_bucket{le=\"0.1\"} 1\n\
             sglang:time_to_first_token_seconds_bucket{le=\"+Inf\"} 1\n\
             sglang:time_to_first_token_seconds_sum 2\n\
             sglang:time_to_first_token_seconds_count 1\n",
            ),
        );
        assert_eq!(
            restarted.value(Metric::ServerTtftHistogram, Some(Stat::P99)),
            None
        );
        assert!(
            restarted
                .missing(Metric::ServerTtftHistogram)
                .unwrap()
                .contains("went backwards")
        );
        // Rank 1's copy saw its requests slower: its whole histogram is
        // read (the one that observed the most), not each bound's largest.
        let copies = h(
            "sglang:queue_time_seconds_bucket{tp_rank=\"0\",le=\"0.1\"} 10\n\
             sglang:queue_time_seconds_bucket{tp_rank=\"0\",le=\"+Inf\"} 10\n\
             sglang:queue_time_seconds_bucket{tp_rank=\"1\",le=\"0.1\"} 0\n\
             sglang:queue_time_seconds_bucket{tp_rank=\"1\",le=\"+Inf\"} 11\n\
             sglang:queue_time_seconds_sum{tp_rank=\"1\"} 55\n\
             sglang:queue_time_seconds_count{tp_rank=\"1\"} 11\n",
        );
        assert_eq!(copies.value(Metric::ServerQueueTime, Some(Stat::P50)), None);
        assert!(
            copies
                .missing(Metric::ServerQueueTime)
                .unwrap()
                .contains("lies in its last bucket")
        );
    }

    /// Labels are read with their quotes: a comma inside a value is no
    /// second label (it cannot turn a `decode_none` pass into a graph one,
    /// nor pass for a rank); an infinite counter is no count.
    #[test]
    fn a_label_value_cannot_pass_for_another_label() {
        let page = |none: u32| {
            format!(
                "sglang:cuda_graph_passes_total{{model_name=\"m,mode =decode_cuda_graph\",mode=\"decode_none\"}} {none}\n\
                 sglang:cuda_graph_passes_total{{model_name=\"m\",mode=\"decode_cuda_graph\"}} 0\n"
            )
        };
        let v = ServerView::between(&Scrape::parse(&page(0)), &Scrape::parse(&page(100)));
        assert_eq!(v.value(Metric::ServerCudaGraphShare, None), Some(0.0));
        let inf = ServerView::between(
            &Scrape::parse("sglang:cuda_graph_passes_total{mode=\"decode_none\"} 1\n"),
            &Scrape::parse("sglang:cuda_graph_passes_total{mode=\"decode_none\"} +Inf\n"),
        );
        assert_eq!(inf.value(Metric::ServerCudaGraphShare, None), None);
    }

    /// The scheduler's CPU is each rank's own: the busiest rank's change is
    /// read (rank 1, 9 s of CPU in 10 s), never the change of the largest
    /// counter (rank 0's, 1 s); and a read after the window that waited
    /// past it gives no figure, the idle time after it diluting the rate.
    #[test]
    fn the_scheduler_cpu_is_the_busiest_ranks_over_the_window_alone() {
        let page = |r0: f64, r1: f64| {
            format!(
                "sglang:scheduler_process_cpu_seconds_total{{tp_rank=\"0\"}} {r0}\n\
                 sglang:scheduler_process_cpu_seconds_total{{tp_rank=\"1\"}} {r1}\n"
            )
        };
        let t0 = std::time::Instant::now();
        let mut v = ServerView::between(
            &Scrape::parse(&page(100.0, 50.0)).read_at(t0),
            &Scrape::parse(&page(101.0, 59.0)).read_at(t0 + std::time::Duration::from_secs(10)),
        );
        v.window_s = Some(9.5);
        let cpu = v.value(Metric::ServerSchedulerCpu, None).unwrap();
        assert!((cpu - 0.9).abs() < 1e-9, "{cpu}");
        v.window_s = Some(5.0);
        assert_eq!(v.value(Metric::ServerSchedulerCpu, None), None);
        let why = v.missing(Metric::ServerSchedulerCpu).unwrap();
        assert!(
            why.starts_with("the reads of /metrics were 10.000s apart for a window of 5.000s"),
            "{why}"
        );
    }
}
