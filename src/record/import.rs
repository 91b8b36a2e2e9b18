//! `servegate import bench-serving`: the result files of SGLang's
//! `sglang.bench_serving` (0.5.23, `benchmark/serving.py`: one JSON object a
//! line, appended per run, `--output-file`) and of `vllm bench serve`
//! (`vllm/benchmarks/serve.py`: one JSON object, `--save-result`) turned
//! into a run record, so a team's numbers become figures that baselines,
//! reports and comparisons read.
//!
//! Each tool's names map to servegate's metrics: milliseconds become
//! seconds, `median` is `p50`, and a tool's ITL is servegate's metric of
//! the same meaning (see [`itl_of`]): the gap between chunks, however many
//! tokens a chunk carried, is `itl_chunk`; a gap shared among the chunk's
//! tokens is `itl` (k times smaller under k-token chunks). A figure a tool
//! does not write is left out, never guessed.

use serde_json::{Map, Value};

use super::{GateRecord, RunRecord, SCHEMA, SuiteRecord};
use crate::suite::Api;
use crate::suite::figures::{ByKey, Figures};
use crate::suite::metric::{Metric, MetricKey, Stat};

/// Which tool wrote a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `python -m sglang.bench_serving`.
    SglangBenchServing,
    /// `vllm bench serve`.
    VllmBenchServe,
}

impl Tool {
    /// How the tool is named in records and messages.
    pub fn name(self) -> &'static str {
        match self {
            Tool::SglangBenchServing => "sglang.bench_serving",
            Tool::VllmBenchServe => "vllm bench serve",
        }
    }

    /// The tool whose names a result uses: SGLang writes
    /// `mean_e2e_latency_ms` (and `random_input_len`), vLLM `mean_e2el_ms`
    /// (or its `endpoint_type`, `model_id`).
    fn of(result: &Map<String, Value>) -> Option<Tool> {
        if result.contains_key("mean_e2e_latency_ms") || result.contains_key("random_input_len") {
            Some(Tool::SglangBenchServing)
        } else if ["mean_e2el_ms", "endpoint_type", "model_id", "failed"]
            .iter()
            .any(|k| result.contains_key(*k))
        {
            Some(Tool::VllmBenchServe)
        } else {
            None
        }
    }

    /// Its name for a latency (`e2e` is SGLang's `e2e_latency`, vLLM's
    /// `e2el`).
    fn latency_name(self, metric: Metric) -> &'static str {
        match (self, metric) {
            (_, Metric::Ttft) => "ttft",
            (_, Metric::Tpot) => "tpot",
            (_, Metric::ItlChunk | Metric::Itl) => "itl",
            (Tool::SglangBenchServing, _) => "e2e_latency",
            (Tool::VllmBenchServe, _) => "e2el",
        }
    }
}

/// What names the imported figures.
#[derive(Debug, Clone, Default)]
pub struct Naming {
    /// The suite the figures belong to (`--suite`): a servegate suite's
    /// name, for its baselines to take them.
    pub suite: Option<String>,
    /// The gate (`--gate`), for a file of one result.
    pub gate: Option<String>,
    /// The configuration fingerprint (`--fingerprint`), in place of the one
    /// made from the result.
    pub fingerprint: Option<String>,
    /// The hardware it ran on (`--hardware`, `8 x NVIDIA H200`), which the
    /// result does not say; `unknown` without it.
    pub hardware: Option<String>,
}

/// Why a file cannot be imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// A line (or the file) is not JSON.
    #[error("line {line}: not JSON: {message}")]
    NotJson {
        /// 1-based.
        line: usize,
        /// The parser's words.
        message: String,
    },
    /// JSON, but no tool's result.
    #[error(
        "line {line}: not a result of sglang.bench_serving or vllm bench serve (it has none of `mean_e2e_latency_ms`, `random_input_len`, `mean_e2el_ms`, `endpoint_type`, `model_id`)"
    )]
    NotAResult {
        /// 1-based.
        line: usize,
    },
    /// Nothing in the file.
    #[error("the file holds no result")]
    Empty,
    /// `--gate` for a file of several results.
    #[error(
        "the file holds {0} results, and --gate names one gate: leave --gate out (each result becomes a gate named by its load)"
    )]
    OneGateForMany(usize),
}

/// The run record of a result file's text.
pub fn bench_serving(text: &str, naming: &Naming) -> Result<RunRecord, ImportError> {
    let results = results(text)?;
    if results.len() > 1 && naming.gate.is_some() {
        return Err(ImportError::OneGateForMany(results.len()));
    }
    let mut suites: Vec<SuiteRecord> = Vec::new();
    for (line, result) in &results {
        let tool = Tool::of(result).ok_or(ImportError::NotAResult { line: *line })?;
        // A configuration the import names (`--fingerprint`) is the user's
        // word; its whole is not known.
        let (fingerprint, config) = naming.fingerprint.clone().map_or_else(
            || fingerprint(tool, result),
            |f| (f, crate::load::fingerprint::Config::new()),
        );
        let mut gate = gate(tool, result, naming.gate.as_deref());
        // Runs of one load (a sweep of input lengths at one concurrency)
        // are gates of their own, never one baseline overwriting another.
        if suites
            .iter()
            .flat_map(|s| &s.gates)
            .any(|g| g.gate == gate.gate)
        {
            gate.gate = format!("{}_line{line}", gate.gate);
        }
        let label = naming
            .suite
            .clone()
            .unwrap_or_else(|| "bench_serving".to_owned());
        // One suite record per configuration: results of one server join.
        match suites
            .iter_mut()
            .find(|s| s.fingerprint == fingerprint && s.suite == label)
        {
            Some(s) => s.gates.push(gate),
            None => suites.push(SuiteRecord {
                suite: label,
                variant: None,
                suite_commit: None,
                server: None,
                server_info: result.get("server_info").filter(|v| !v.is_null()).cloned(),
                model_info: None,
                datasets: Vec::new(),
                target: format!("IMPORTED from {}", tool.name()),
                fingerprint,
                config,
                model: Some(identity(result).0),
                pinned_model: None,
                model_unreported: false,
                server_version: identity(result).1,
                baselines: None,
                gates: vec![gate],
            }),
        }
    }
    // vLLM dates its result (`date`, its local time without a zone: read
    // as UTC); SGLang does not, and the file's own time stands in
    // ([`file_record`]).
    let dated = results
        .iter()
        .filter_map(|(_, r)| r.get("date")?.as_str().and_then(parse_date))
        .max()
        .unwrap_or_else(super::now_unix);
    Ok(RunRecord {
        schema: SCHEMA.to_owned(),
        run_id: String::new(),
        started_unix: dated,
        finished_unix: dated,
        complete: true,
        servegate: env!("CARGO_PKG_VERSION").to_owned(),
        node: String::new(),
        gpus: None,
        // Not seen: servegate was not there. Never "no GPU".
        hardware: Some(
            naming
                .hardware
                .clone()
                .unwrap_or_else(|| "unknown".to_owned()),
        ),
        trials: Vec::new(),
        suites,
        comparisons: Vec::new(),
    })
}

/// The run record of a result file, as both of its routes import it
/// (`servegate import bench-serving` and `servegate history import`): its
/// run id from the file's content (`import-<16 hex digits of its
/// SHA-256>`), so that the same file is the same run whichever route and
/// however often it is imported; dated when the tool ran (vLLM's `date`,
/// else the file's modification time — SGLang writes no date — else now).
pub fn file_record(
    text: &str,
    naming: &Naming,
    file: &std::path::Path,
) -> Result<RunRecord, ImportError> {
    let mut record = bench_serving(text, naming)?;
    record.run_id = format!("import-{}", &crate::text::sha256_hex(text.as_bytes())[..16]);
    let undated = results(text).is_ok_and(|r| {
        r.iter().all(|(_, r)| {
            r.get("date")
                .and_then(Value::as_str)
                .and_then(parse_date)
                .is_none()
        })
    });
    if undated
        && let Some(written) = std::fs::metadata(file)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
    {
        record.started_unix = written.as_secs();
        record.finished_unix = written.as_secs();
    }
    Ok(record)
}

/// `vllm bench serve`'s `date` (`20261206-031500`, `%Y%m%d-%H%M%S`) as
/// seconds since the epoch, read as UTC.
fn parse_date(date: &str) -> Option<u64> {
    let (day, time) = date.split_once('-')?;
    if day.len() != 8 || time.len() != 6 || !date.chars().all(|c| c.is_ascii_digit() || c == '-') {
        return None;
    }
    let rfc3339 = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &day[..4],
        &day[4..6],
        &day[6..],
        &time[..2],
        &time[2..4],
        &time[4..]
    );
    humantime::parse_rfc3339(&rfc3339)
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// A result and its 1-based line.
type Numbered = (usize, Map<String, Value>);

/// The results of a file, with their 1-based lines: one JSON object a
/// line (SGLang appends), or one object over many lines (vLLM).
fn results(text: &str) -> Result<Vec<Numbered>, ImportError> {
    let text = &python_json(text);
    let whole = serde_json::from_str::<Value>(text);
    let mut out = Vec::new();
    if let Ok(Value::Object(m)) = whole {
        out.push((1, m));
    } else {
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(line) {
                Ok(Value::Object(m)) => out.push((i + 1, m)),
                Ok(_) => return Err(ImportError::NotAResult { line: i + 1 }),
                Err(e) => {
                    return Err(ImportError::NotJson {
                        line: i + 1,
                        message: e.to_string(),
                    });
                }
            }
        }
    }
    if out.is_empty() {
        return Err(ImportError::Empty);
    }
    Ok(out)
}

/// Python's `json.dumps` writes what JSON has no word for as bare
/// `Infinity`, `-Infinity` and `NaN` (SGLang's `"request_rate": Infinity`
/// for an unbounded rate): outside strings, the infinities become strings
/// of their name and `NaN` becomes `null`.
fn python_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut quoted, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if quoted {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => quoted = false,
                _ => {}
            }
        } else if c == '"' {
            quoted = true;
        } else {
            let word = ["-Infinity", "Infinity", "NaN"]
                .into_iter()
                .find(|w| rest.starts_with(w));
            if let Some(w) = word {
                out.push_str(if w == "NaN" {
                    "null"
                } else if w == "Infinity" {
                    "\"Infinity\""
                } else {
                    "\"-Infinity\""
                });
                rest = &rest[w.len()..];
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The fingerprint a servegate run against the same server would have, and
/// the whole configuration it digests, where the result says enough:
/// SGLang's results carry the server's `/server_info` (its version, model
/// and resolved configuration); vLLM's name the model only.
fn fingerprint(tool: Tool, r: &Map<String, Value>) -> (String, crate::load::fingerprint::Config) {
    let (model, version) = identity(r);
    let info = r.get("server_info").filter(|v| v.is_object());
    let shown = info
        .map(crate::client::dialect::server_config)
        .unwrap_or_default();
    let whole = info
        .map(crate::load::fingerprint::sglang_config)
        .unwrap_or_default();
    (
        crate::load::fingerprint::fingerprint(
            api(tool, r),
            &model,
            version.as_deref(),
            &shown,
            &whole,
        ),
        whole,
    )
}

/// The served model and the server's version a result names.
fn identity(r: &Map<String, Value>) -> (String, Option<String>) {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let info = r.get("server_info").filter(|v| v.is_object());
    let model = text(info.and_then(|i| i.get("served_model_name")))
        .or_else(|| text(r.get("model_id")))
        .unwrap_or_else(|| "of unknown name".to_owned());
    (model, text(info.and_then(|i| i.get("version"))))
}

/// The API the tool's backend spoke: SGLang's `sglang` backend is
/// `/generate`, `sglang-oai` the completions API, `*-chat` the chat API;
/// vLLM's `openai` the completions API.
fn api(tool: Tool, r: &Map<String, Value>) -> Api {
    let backend = r
        .get("endpoint_type")
        .or_else(|| r.get("backend"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if backend.contains("chat") {
        Api::OpenAiChat
    } else if tool == Tool::SglangBenchServing && backend == "sglang" {
        Api::SglangGenerate
    } else {
        Api::OpenAiCompletions
    }
}

/// The gate of one result: its figures, its load in words, its name.
fn gate(tool: Tool, r: &Map<String, Value>, name: Option<&str>) -> GateRecord {
    let num = |k: &str| r.get(k).and_then(Value::as_f64);
    let concurrency = num("max_concurrency");
    // SGLang writes an unbounded rate as Python's `Infinity`, vLLM as "inf";
    // anything but a rate (a file's text, which names the gate) is none.
    let rate = r.get("request_rate").and_then(|v| match v {
        Value::String(s) if s == "Infinity" || s == "inf" => Some("inf".to_owned()),
        Value::Number(n) => n
            .as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0)
            .map(|f| f.to_string()),
        _ => None,
    });
    let rate_word = rate.as_deref().unwrap_or("inf").replace('.', "_");
    let gate = name.map_or_else(
        || match concurrency {
            Some(c) => format!("c{c}_rate_{rate_word}"),
            None => format!("rate_{rate_word}"),
        },
        str::to_owned,
    );
    let completed = num("completed");
    let duration = num("duration");
    let load = format!(
        "imported from {}: {} requests in {}, max concurrency {}, request rate {}{}",
        tool.name(),
        completed.map_or_else(|| "?".to_owned(), |c| format!("{c:.0}")),
        duration.map_or_else(|| "?".to_owned(), crate::units::format_secs),
        concurrency.map_or_else(|| "unbounded".to_owned(), |c| format!("{c:.0}")),
        rate.as_deref().unwrap_or("?"),
        r.get("dataset_name")
            .and_then(Value::as_str)
            .filter(|d| d.len() <= 64
                && d.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)))
            .map_or_else(String::new, |d| format!(", dataset {d}")),
    ) + &slos(r);
    let (figures, samples) = figures(tool, r);
    GateRecord {
        gate,
        load,
        repeats: 1,
        figures,
        series: Vec::new(),
        samples,
        token_sources: std::collections::BTreeMap::new(),
        thresholds: Vec::new(),
        client: None,
        sweep: None,
        trends: Vec::new(),
        probes_skipped: Vec::new(),
    }
}

/// The SLOs a result's goodput was counted against, as its load says
/// them (`, SLOs ttft ≤ 200.00ms, e2e ≤ 5.000s`): SGLang 0.5.23's
/// `goodput_slos_ms` (by `ttft`, `tpot`, `e2el`, in milliseconds; other
/// names, and values that are no duration, are left out). vLLM 0.32
/// writes its goodput without them.
fn slos(r: &Map<String, Value>) -> String {
    let Some(slos) = r.get("goodput_slos_ms").and_then(Value::as_object) else {
        return String::new();
    };
    let said: Vec<String> = ["ttft", "tpot", "e2el"]
        .iter()
        .filter_map(|name| {
            let ms = slos
                .get(*name)?
                .as_f64()
                .filter(|v| v.is_finite() && *v >= 0.0)?;
            Some(format!(
                "{} ≤ {}",
                if *name == "e2el" { "e2e" } else { name },
                crate::units::format_secs(ms / 1e3)
            ))
        })
        .collect();
    if said.is_empty() {
        String::new()
    } else {
        format!(", SLOs {}", said.join(", "))
    }
}

/// What a result's ITL is. SGLang 0.5.23's `bench_serving` shares each
/// chunk's gap among its new tokens on its native backends (`sglang`,
/// `sglang-native`: `benchmark/serving.py:792-797`), and on `sglang-oai` and
/// `sglang-oai-chat` when the server reported a speculative accept length
/// (each chunk retokenized, 1153-1181): per token, `itl`. Otherwise, and
/// in `vllm bench serve`'s results, it is the gap between chunks:
/// `itl_chunk`.
fn itl_of(tool: Tool, r: &Map<String, Value>) -> Metric {
    let backend = r.get("backend").and_then(Value::as_str).unwrap_or_default();
    let accepted = r
        .get("accept_length")
        .and_then(Value::as_f64)
        .is_some_and(|a| a > 0.0);
    match tool {
        Tool::SglangBenchServing
            if matches!(backend, "sglang" | "sglang-native")
                || (matches!(backend, "sglang-oai" | "sglang-oai-chat") && accepted) =>
        {
            Metric::Itl
        }
        _ => Metric::ItlChunk,
    }
}

/// A result's figures in servegate's metrics, and what stands behind each.
fn figures(tool: Tool, r: &Map<String, Value>) -> (Figures, ByKey<String>) {
    let num = |k: &str| r.get(k).and_then(Value::as_f64).filter(|v| v.is_finite());
    let mut figures = Figures::default();
    let mut samples = ByKey::default();
    let behind = format!(
        "{} requests, as {} reported",
        num("completed").map_or_else(|| "?".to_owned(), |c| format!("{c:.0}")),
        tool.name()
    );
    let mut put = |key: MetricKey, value: Option<f64>, from: &str| {
        if let Some(v) = value {
            figures.insert(key, v);
            samples.insert(key, format!("{behind} (`{from}`)"));
        }
    };
    for metric in [Metric::Ttft, Metric::Tpot, itl_of(tool, r), Metric::E2e] {
        let name = tool.latency_name(metric);
        for (stat, prefix) in [
            (Stat::Mean, "mean"),
            (Stat::P50, "median"),
            (Stat::Stddev, "std"),
            (Stat::P90, "p90"),
            (Stat::P95, "p95"),
            (Stat::P99, "p99"),
            (Stat::P999, "p99.9"),
        ] {
            let field = format!("{prefix}_{name}_ms");
            put(
                MetricKey::stat(metric, stat),
                num(&field).map(|ms| ms / 1e3),
                &field,
            );
        }
    }
    let single = MetricKey::single;
    put(
        single(Metric::OutputTokS),
        num("output_throughput"),
        "output_throughput",
    );
    put(
        single(Metric::InputTokS),
        num("input_throughput"),
        "input_throughput",
    );
    let total = if tool == Tool::SglangBenchServing {
        "total_throughput"
    } else {
        "total_token_throughput"
    };
    put(single(Metric::TotalTokS), num(total), total);
    put(
        single(Metric::RequestsPerS),
        num("request_throughput"),
        "request_throughput",
    );
    // vLLM counts its failures. SGLang's result does only with its
    // per-request details (`--output-details`: each request's error, empty
    // when it succeeded, `benchmark/serving.py:1951`); without them its
    // errors stay unknown, never 0.
    let failed = num("failed").map(|f| (f, "failed")).or_else(|| {
        let errors = r.get("errors")?.as_array()?;
        #[expect(clippy::cast_precision_loss, reason = "a count of requests")]
        let n = errors
            .iter()
            .filter(|e| e.as_str().is_some_and(|e| !e.is_empty()))
            .count() as f64;
        Some((n, "errors"))
    });
    if let Some((n, from)) = failed {
        put(single(Metric::Errors), Some(n), from);
    }
    // Both write the rate of requests within every SLO when given some.
    put(
        single(Metric::GoodputRequestsPerS),
        num("request_goodput"),
        "request_goodput",
    );
    // SGLang's also the share of requests sent that met them
    // (`benchmark/goodput.py`), failed ones counted as not.
    put(
        single(Metric::SloAttainment),
        num("slo_attainment").filter(|a| (0.0..=1.0).contains(a)),
        "slo_attainment",
    );
    // Both read the server's own acceptance: SGLang from `/server_info`,
    // vLLM from `/metrics` counters over the run.
    let accept = if tool == Tool::SglangBenchServing {
        "accept_length"
    } else {
        "spec_decode_acceptance_length"
    };
    put(single(Metric::ServerSpecAcceptLength), num(accept), accept);
    let hit = r
        .get("cache_report")
        .and_then(|c| c.get("cache_hit_rate_pct"))
        .and_then(Value::as_f64)
        .map(|pct| pct / 100.0);
    put(
        single(Metric::CacheHitRate),
        hit,
        "cache_report.cache_hit_rate_pct",
    );
    (figures, samples)
}

#[cfg(test)]
mod tests;
