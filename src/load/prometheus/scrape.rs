//! A scrape of `/metrics`: its samples by series, label sets, kinds,
//! buckets and per-process counters; the info series as a document.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::counters::SCHEDULER_CPU;

/// Every sample of a scrape, summed over label sets, by series name;
/// histogram buckets keyed by `name_bucket` and their `le`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    pub(super) values: BTreeMap<String, f64>,
    /// Label sets per series name: a gauge of a share (KV-cache use) is
    /// their mean, not their sum.
    pub(super) sets: BTreeMap<String, u32>,
    /// Counters by the label that splits them into kinds ([`KINDS`]),
    /// keyed by series name and the label's value: vLLM counts aborts in
    /// `request_success_total{finished_reason="abort"}` (those its engine
    /// decides; 0.32 does not count a request its client abandoned),
    /// SGLang its forward passes by `mode` (`decode_cuda_graph`,
    /// `decode_none`, …).
    pub(super) kinds: BTreeMap<(String, String), f64>,
    pub(super) buckets: BTreeMap<String, BTreeMap<String, f64>>,
    /// Counters of one process each ([`PER_PROCESS`]), by their whole
    /// label set: each rank's own, not copies of one figure.
    pub(super) processes: BTreeMap<(String, String), f64>,
    /// Each series' sum by the worker of a launched router that wrote it
    /// ([`WORKER_LABEL`]), keyed by series name and worker.
    pub(super) workers: BTreeMap<(String, String), f64>,
    /// When the client had the page: counters over a window are divided
    /// by the time between two reads.
    pub(super) at: Option<std::time::Instant>,
}

/// A histogram's copies (one per rank that writes it), each its buckets
/// by bound.
pub(super) type Copies = BTreeMap<String, BTreeMap<String, f64>>;

/// The labels that split a counter into kinds, read by their value.
pub(super) const KINDS: [&str; 2] = ["finished_reason", "mode"];

/// Counters each scheduler process keeps of itself: its ranks' are
/// different figures, the busiest of which is read (the others' copies
/// of one figure count once, [`COPIES`]).
pub(super) const PER_PROCESS: [&str; 1] = [SCHEDULER_CPU];

/// A series' label set as a key: its pairs (each value quoted as JSON, so
/// no value can pass for another pair), sorted, those named `without` left out.
pub(super) fn key_of(pairs: &[(String, String)], without: &[&str]) -> String {
    let mut kept: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| !without.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={}", serde_json::Value::String(v.clone())))
        .collect();
    kept.sort_unstable();
    kept.join(",")
}

/// The value of label `key` among `pairs`.
pub(super) fn pair<'p>(pairs: &'p [(String, String)], key: &str) -> Option<&'p str> {
    pairs
        .iter()
        .find_map(|(k, v)| (k == key).then_some(v.as_str()))
}

/// The label that tells the workers of a launched router apart in the
/// pages read together as the server's.
pub const WORKER_LABEL: &str = "servegate_worker";

/// One part of the server's series: its largest value, its kind
/// ([`KINDS`]) and the worker that wrote it ([`WORKER_LABEL`]).
type Part = (f64, Option<String>, Option<String>);

/// A page of Prometheus text with every sample labelled
/// `servegate_worker="<worker>"`: the workers' pages read as one are
/// each worker's series, summed as a server's parts are. A worker's name
/// is of the characters a suite's names take, which a label value holds
/// as they are.
pub fn labelled(text: &str, worker: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            out.push_str(line);
        } else {
            let name_ends = trimmed
                .find(|c: char| c == '{' || c.is_whitespace())
                .unwrap_or(trimmed.len());
            let (name, rest) = trimmed.split_at(name_ends);
            out.push_str(name);
            match rest.strip_prefix('{') {
                Some(labels) => {
                    let comma = if labels.trim_start().starts_with('}') {
                        ""
                    } else {
                        ","
                    };
                    let _ = write!(out, "{{{WORKER_LABEL}=\"{worker}\"{comma}{labels}");
                }
                None => {
                    let _ = write!(out, "{{{WORKER_LABEL}=\"{worker}\"}}{rest}");
                }
            }
        }
        out.push('\n');
    }
    out
}

impl Scrape {
    /// Parses Prometheus text exposition; malformed lines are skipped.
    pub fn parse(text: &str) -> Self {
        let mut s = Scrape::default();
        // The largest value of each series per label set that is one part
        // of the server (its labels less [`COPIES`]), with its kind.
        let mut groups: BTreeMap<(String, String), Part> = BTreeMap::new();
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
            let worker = pair(&pairs, WORKER_LABEL).map(str::to_owned);
            let seen = groups
                .entry((name.to_owned(), key_of(&pairs, COPIES)))
                .or_insert((value, kind, worker));
            seen.0 = seen.0.max(value);
        }
        for ((name, _), (value, kind, worker)) in groups {
            if let Some(worker) = worker {
                *s.workers.entry((name.clone(), worker)).or_insert(0.0) += value;
            }
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
    pub(crate) fn read_at(self, at: std::time::Instant) -> Self {
        Self {
            at: Some(at),
            ..self
        }
    }

    /// The first of `names` present.
    pub(super) fn find<'n>(&self, names: &[&'n str]) -> Option<(&'n str, f64)> {
        names
            .iter()
            .find_map(|n| self.values.get(*n).map(|v| (*n, *v)))
    }

    /// Each worker's value of the series `name`, by worker.
    pub(super) fn by_worker<'s>(&'s self, name: &'s str) -> impl Iterator<Item = (&'s str, f64)> {
        self.workers
            .iter()
            .filter(move |((n, _), _)| n == name)
            .map(|((_, w), v)| (w.as_str(), *v))
    }

    /// The counter `name` of kind `kind` ([`KINDS`]).
    pub(super) fn kind(&self, name: &str, kind: &str) -> Option<f64> {
        self.kinds.get(&(name.to_owned(), kind.to_owned())).copied()
    }
}

/// Labels that name a copy of one figure, not a part of the server: with
/// `--enable-metrics-for-all-schedulers` every tensor-, pipeline- and
/// expert-parallel rank of SGLang 0.5.23 writes the same scheduler series
/// (`srt/observability/metrics_collector.py`), so those copies count once
/// (their largest); data-parallel ranks, vLLM's engines and the other
/// labels (`cache_source`, `is_streaming`) are parts, summed.
pub(super) const COPIES: &[&str] = &[
    "tp_rank",
    "pp_rank",
    "moe_ep_rank",
    "attn_tp_rank",
    "attn_cp_rank",
];

/// Most info series an info document keeps, and most labels of each.
pub(super) const INFO_SERIES: usize = 64;
pub(super) const INFO_LABELS: usize = 256;

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
pub(super) fn label_pairs(labels: &str) -> Vec<(String, String)> {
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
pub(super) fn sample(line: &str) -> Option<(&str, &str, f64)> {
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

#[cfg(test)]
mod tests {
    use super::super::ServerView;
    use super::*;

    /// Two workers' pages read as one server's: summed, each worker's tokens
    /// kept apart, the copies of one figure in a worker counted once.
    #[test]
    fn workers_pages_are_one_servers_and_each_workers_own() {
        let page = |tokens: u32, ttft: u32| {
            format!(
                "# HELP sglang:generation_tokens_total x\n\
                 sglang:generation_tokens_total{{model_name=\"m\",tp_rank=\"0\"}} {tokens}\n\
                 sglang:generation_tokens_total{{model_name=\"m\",tp_rank=\"1\"}} {tokens}\n\
                 sglang:time_to_first_token_seconds_bucket{{le=\"0.1\"}} {ttft}\n\
                 sglang:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {ttft}\n\
                 sglang:time_to_first_token_seconds_sum {}\n\
                 sglang:time_to_first_token_seconds_count {ttft}\n\
                 sglang:num_running_reqs{{}} 1\n",
                f64::from(ttft) * 0.05
            )
        };
        let both = |a: (u32, u32), b: (u32, u32)| {
            labelled(&page(a.0, a.1), "a") + &labelled(&page(b.0, b.1), "b")
        };
        let marked = labelled("up 1\nx{} 2\n", "w");
        assert!(marked.contains("up{servegate_worker=\"w\"} 1\nx{servegate_worker=\"w\"} 2"));
        let (before, after) = (both((100, 2), (50, 1)), both((160, 5), (150, 4)));
        let v = ServerView::between(&Scrape::parse(&before), &Scrape::parse(&after));
        assert_eq!(v.generation_tokens, Some(160.0));
        assert_eq!(
            v.worker_tokens,
            vec![("a".to_owned(), 60.0), ("b".to_owned(), 100.0)]
        );
        assert!((v.ttft.as_ref().unwrap().count - 6.0).abs() < 1e-9);
        let line = v.render();
        assert!(
            line.contains("generation tokens 160 (by worker: a 60, b 100)"),
            "{line}"
        );
        // A server alone keeps its line as it was.
        let alone =
            ServerView::between(&Scrape::parse(&page(100, 2)), &Scrape::parse(&page(160, 5)));
        assert!(alone.worker_tokens.is_empty());
        assert!(!alone.render().contains("by worker"), "{}", alone.render());
    }
}
