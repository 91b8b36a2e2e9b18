//! A gate's figures as the run output's table.

use std::fmt::Write as _;

use super::GateMetrics;
use crate::client::TokenSource;
use crate::load::distribution::Distribution;
use crate::suite::metric::{Metric, MetricKey, Stat, format_value};
use crate::units::format_secs;

impl GateMetrics {
    /// The server's own timings beside the client's, where its dialect
    /// reported them: llama.cpp's prompt and decode, SGLang's time to
    /// first token, end to end, queue and decode.
    fn server_timings_line(&self) -> Option<String> {
        let stat = |d: &Distribution, s| d.stat(s).unwrap_or(f64::NAN);
        let secs = |name: &str, d: &Distribution, client: Option<&Distribution>| {
            (!d.is_empty()).then(|| {
                format!(
                    "{name} mean {} p99 {}{}",
                    format_secs(stat(d, Stat::Mean)),
                    format_secs(stat(d, Stat::P99)),
                    client.map_or_else(String::new, |c| format!(
                        " (client {name} mean {})",
                        format_secs(stat(c, Stat::Mean))
                    ))
                )
            })
        };
        let decode = (!self.server_decode_tok_s.is_empty()).then(|| {
            format!(
                "decode mean {:.1} tok/s p50 {:.1} (client decode_tok_s mean {:.1})",
                stat(&self.server_decode_tok_s, Stat::Mean),
                stat(&self.server_decode_tok_s, Stat::P50),
                stat(&self.decode_tok_s, Stat::Mean),
            )
        });
        let parts: Vec<String> = [
            secs("prompt", &self.server_prompt, None),
            secs("ttft", &self.server_ttft, Some(&self.ttft)),
            secs("e2e", &self.server_e2e, Some(&self.e2e)),
            secs("queue", &self.server_queue, None),
            decode,
        ]
        .into_iter()
        .flatten()
        .collect();
        let n = [
            &self.server_prompt,
            &self.server_e2e,
            &self.server_decode_tok_s,
        ]
        .iter()
        .map(|d| d.len())
        .max()
        .unwrap_or(0);
        (!parts.is_empty())
            .then(|| format!("    server's own timings (n={n}): {}\n", parts.join(", ")))
    }

    /// A table of every figure, for the run output.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let stats = [
            Stat::Mean,
            Stat::Stddev,
            Stat::P50,
            Stat::P90,
            Stat::P99,
            Stat::P999,
            Stat::Max,
        ];
        for metric in [
            Metric::Ttft,
            Metric::TtftContent,
            Metric::TtftFromSend,
            Metric::Connect,
            Metric::Itl,
            Metric::Tpot,
            Metric::E2e,
            Metric::DecodeTokS,
        ] {
            let d = self.distribution(metric).expect("distribution metric");
            // Connections opened in the warm-up are not the window's.
            if metric == Metric::Connect && d.is_empty() {
                continue;
            }
            let _ = write!(out, "    {:<14}", metric.name());
            if d.is_empty() {
                out.push_str("  no samples\n");
                continue;
            }
            for stat in stats {
                let v = d.stat(stat).unwrap_or(f64::NAN);
                let shown = format_value(metric, v).replace(" tok/s", "");
                let _ = write!(out, " {} {:<9}", stat.name(), shown);
            }
            let unit = if metric == Metric::DecodeTokS {
                "tok/s "
            } else {
                ""
            };
            let before = if metric == Metric::Connect && self.preopened > 0 {
                format!(", {} before the window", self.preopened)
            } else {
                String::new()
            };
            let _ = writeln!(out, "{unit}(n={}{before})", d.len());
        }
        let rate = |m: Metric| {
            self.value(MetricKey {
                metric: m,
                stat: None,
            })
            .map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
        };
        // A server's count passed only where the text that came bears it
        // out (`StreamReader::evidenced`): said beside it.
        let chunks = TokenSource::ChunkCount.name();
        let sources: Vec<String> = self
            .token_sources
            .iter()
            .map(|(s, n)| {
                let checked = if *s == chunks {
                    ""
                } else {
                    ", borne out by the text"
                };
                format!("{s} ×{n}{checked}")
            })
            .collect();
        let _ = writeln!(
            out,
            "    tok/s output {} input {} total {}  requests/s {}  errors {}  ({} output tokens in {}, counts from {})",
            rate(Metric::OutputTokS),
            rate(Metric::InputTokS),
            rate(Metric::TotalTokS),
            rate(Metric::RequestsPerS),
            self.errors,
            self.output_tokens,
            format_secs(self.wall.as_secs_f64()),
            if sources.is_empty() {
                "-".into()
            } else {
                sources.join(", ")
            },
        );
        if self.unsolicited > 0 {
            let _ = writeln!(
                out,
                "    {} kept-alive connection{} closed before reuse: the server had sent bytes on {} that no request asked for (a server bug; they were not read as an answer)",
                self.unsolicited,
                if self.unsolicited == 1 { "" } else { "s" },
                if self.unsolicited == 1 { "it" } else { "them" },
            );
        }
        if let Some(good) = self.good_requests {
            let _ = writeln!(
                out,
                "    goodput {good} of {} requests sent met the SLOs (slo_attainment {}): {} req/s, {} tok/s",
                self.completed + self.errors,
                self.value(MetricKey::single(Metric::SloAttainment))
                    .map_or_else(|| "none".to_owned(), |a| format!("{a:.3}")),
                rate(Metric::GoodputRequestsPerS),
                rate(Metric::GoodputTokS),
            );
        }
        if let Some(line) = self.server_timings_line() {
            out.push_str(&line);
        }
        if let Ok(server) = &self.server {
            out.push_str(&server.render());
        }
        if let Some(rate) = self.cache_unasked {
            let _ = writeln!(
                out,
                "    note: the server's prefix cache served {:.0}% of this window's prompt tokens, though the load did not ask for reuse: its TTFT is largely of cached prompts (a load that measures reuse says so with `shared_prefix` or `conversation`; one that measures prefill gives each request its own prompt, `input_tokens`)",
                100.0 * rate
            );
        }
        if self.late_starts > 0 {
            let _ = writeln!(
                out,
                "    late starts {} (more than 5ms after the intended time)",
                self.late_starts
            );
        }
        if !self.client.threads.is_empty() {
            out.push_str(&self.client.render());
        }
        out
    }
}
