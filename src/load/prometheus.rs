//! The server's own view of a gate: its Prometheus `/metrics` scraped before
//! and after the measured window, as deltas of token counters and latency
//! histograms (SGLang's `sglang:`, vLLM's `vllm:` and llama.cpp's
//! `llamacpp:` names, old and new).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::units::format_secs;

/// Every sample of a scrape, summed over label sets, by series name;
/// histogram buckets keyed by `name_bucket` and their `le`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    values: BTreeMap<String, f64>,
    buckets: BTreeMap<String, BTreeMap<String, f64>>,
}

impl Scrape {
    /// Parses Prometheus text exposition; malformed lines are skipped.
    pub fn parse(text: &str) -> Self {
        let mut s = Scrape::default();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((name, labels, value)) = sample(line) else {
                continue;
            };
            if let Some(base) = name.strip_suffix("_bucket") {
                let le = labels
                    .split(',')
                    .find_map(|kv| kv.trim().strip_prefix("le="))
                    .map(|v| v.trim_matches('"').to_owned());
                if let Some(le) = le {
                    *s.buckets
                        .entry(base.to_owned())
                        .or_default()
                        .entry(le)
                        .or_insert(0.0) += value;
                }
                continue;
            }
            *s.values.entry(name.to_owned()).or_insert(0.0) += value;
        }
        s
    }

    /// The first of `names` present.
    fn find<'n>(&self, names: &[&'n str]) -> Option<(&'n str, f64)> {
        names
            .iter()
            .find_map(|n| self.values.get(*n).map(|v| (*n, *v)))
    }
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
}

/// SGLang, vLLM and llama.cpp name their series with these.
const PREFIXES: [&str; 3] = ["sglang:", "vllm:", "llamacpp:"];

fn counter_delta(before: &Scrape, after: &Scrape, suffix: &str) -> Option<f64> {
    let names: Vec<String> = PREFIXES.iter().map(|p| format!("{p}{suffix}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let (name, a) = after.find(&refs)?;
    let b = before.values.get(name).copied().unwrap_or(0.0);
    Some(a - b)
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
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
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
        }
    }

    /// One line for the run output; empty when the server reported none
    /// of these series.
    pub fn render(&self) -> String {
        if self.generation_tokens.is_none()
            && self.prompt_tokens.is_none()
            && [&self.ttft, &self.tpot, &self.itl, &self.e2e]
                .iter()
                .all(|h| h.is_none())
        {
            return String::new();
        }
        let mut out = String::from("    server /metrics over the window:");
        if let Some(g) = self.generation_tokens {
            let _ = write!(out, " generation tokens {g:.0}");
        }
        if let Some(p) = self.prompt_tokens {
            let _ = write!(out, ", prompt tokens {p:.0}");
        }
        for (name, h) in [
            ("ttft", &self.ttft),
            ("tpot", &self.tpot),
            ("itl", &self.itl),
            ("e2e", &self.e2e),
        ] {
            if let Some(h) = h
                && let Some(mean) = h.mean()
            {
                let _ = write!(out, ", {name} mean {}", format_secs(mean));
                if let Some(p99) = h.quantile_bound(0.99) {
                    let _ = write!(
                        out,
                        " p99 ≤ {}",
                        if p99.is_finite() {
                            format_secs(p99)
                        } else {
                            "+Inf".into()
                        }
                    );
                }
            }
        }
        out.push('\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn servers_without_these_series_give_nothing() {
        let v = ServerView::between(&Scrape::parse(""), &Scrape::parse("up 1\n"));
        assert_eq!(v, ServerView::default());
    }
}
