//! The field tables of a performance gate: its thresholds and curve (every
//! metric key, described by the README's cells), SLOs, repeats, recheck
//! and its `load`.

use serde_json::{Map, Value, json};

use super::vocabulary::{
    Field, boolean, closed, comparison, count, described, duration, name, names, non_empty, object,
    one_of, one_of_required, string, text, with_min_properties, with_required,
};
use super::{ADAPTER, EXTRA_BODY};
use crate::suite::decode::images::MAX_LOAD_IMAGES;
use crate::suite::decode::load::{CLIENT_LIMITED, MAX_CLIENT_THREADS, MAX_TURNS};
use crate::suite::decode::pace::{ARRIVALS, MAX_SLOWDOWN, MIN_SLOWDOWN};
use crate::suite::metric::{Metric, Stat, all_keys};
use crate::suite::model::VerdictMode;

/// The README's "what" cell of each metric.
fn metric_doc(metric: Metric) -> &'static str {
    match metric {
        Metric::Ttft => "send → first token of any kind (reasoning counts)",
        Metric::TtftContent => {
            "send → first token of the answer's text (after reasoning; not white space, nor a count without text)"
        }
        Metric::TtftFromSend => {
            "request written → first token (TTFT without connect, write or late start)"
        }
        Metric::Connect => {
            "time to open the window's connections: opened before it, or by a request of it"
        }
        Metric::Itl => "gap between tokens; a chunk of k tokens gives k gaps of gap/k",
        Metric::ItlChunk => {
            "gap before each chunk that brought tokens, whole however many it carried: `bench_serving`'s ITL (`p99_itl_ms`), k times `itl` under decode steps or speculative decoding"
        }
        Metric::Tpot => "(e2e − ttft) / (tokens − 1) per request",
        Metric::E2e => "send → end of stream",
        Metric::DecodeTokS => "(tokens − 1) / (e2e − ttft) per request",
        Metric::OutputTokS | Metric::InputTokS | Metric::TotalTokS => {
            "aggregate over the window (input from server-reported prompt tokens)"
        }
        Metric::RequestsPerS => "completed requests over the window",
        Metric::SloAttainment => {
            "requests that met every `slo:` objective over all requests sent, failed ones included, 0 to 1 (SGLang `bench_serving`'s `slo_attainment`); the self-check counts the requests the client could have moved across an objective"
        }
        Metric::GoodputRequestsPerS | Metric::GoodputTokS => {
            "the same, counting only requests that met every `slo:` objective (`ttft`, `tpot`, `e2e`)"
        }
        Metric::Errors => {
            "failed requests (counted by class: connect, timeout, http, in-stream error, protocol, transport, oversize, aborted, short)"
        }
        Metric::LateStarts => "open loop: requests that started more than 5 ms late",
        Metric::TokenDriftChunks => {
            "% difference between server-reported output tokens and what the chunks carried (each chunk's rise of the count, at most its text's bytes + 1)"
        }
        Metric::TokenDriftMetrics => {
            "% difference between the server's `/metrics` generation-token delta and the tokens received"
        }
        Metric::ServerDecodeTokS => {
            "the server's own decode rate per request: `predicted_n / predicted_ms` of llama.cpp's `timings` (`api: llamacpp-completion`), SGLang's `meta_info.decode_throughput` (`api: sglang-generate`, `--enable-metrics`); set it beside `decode_tok_s` to see what the transport and the client cost"
        }
        Metric::ServerTtft => {
            "the server's own time to first token per request, from its receipt of the request: SGLang's `meta_info.first_token_latency` (`api: sglang-generate`, `--enable-metrics`); beside `ttft`, what the network, the HTTP front end and the client add"
        }
        Metric::ServerE2e => {
            "the server's own end-to-end latency per request: SGLang's `meta_info.e2e_latency` (`api: sglang-generate`); beside `e2e`"
        }
        Metric::ServerQueue => {
            "time per request in the server's scheduler queue: SGLang's `meta_info.queue_time` (`api: sglang-generate`, `--enable-metrics`)"
        }
        Metric::CacheHitRate => {
            "prompt tokens served from the server's prefix cache over all prompt tokens, 0 to 1 (`usage.prompt_tokens_details.cached_tokens`, `meta_info.cached_tokens`, llama.cpp `timings.cache_n`); every request must report it"
        }
        Metric::ReasoningTokens => {
            "reasoning tokens per request as the server counts them (`usage.reasoning_tokens` or `completion_tokens_details`, `meta_info.reasoning_tokens`)"
        }
        Metric::SpecAcceptLength => {
            "tokens per speculative verify step per request, the bonus token included (SGLang `/generate` `meta_info.spec_accept_length`; its chat API's `sglext.spec_tokens_details.spec_accept_length`, sent when the request asks with `extra_body: {return_spec_tokens_details: true}`)"
        }
        Metric::Retractions => {
            "requests the server retracted and decoded again for want of KV cache, summed (`meta_info.num_retractions`)"
        }
        Metric::ServerRunningReqs => {
            "requests the server was running, its `/metrics` gauge read every 250 ms in the window (`sglang:num_running_reqs`, `vllm:num_requests_running`, `llamacpp:requests_processing`), of SGLang's only the reads that found it rewritten: `.max` proves the gate's concurrency reached it"
        }
        Metric::ServerQueueReqs => {
            "requests waiting in the server's queue, sampled the same way (`sglang:num_queue_reqs`, `vllm:num_requests_waiting`, `llamacpp:requests_deferred`)"
        }
        Metric::ServerTokenUsage => {
            "the server's KV-cache use, 0 to 1, sampled the same way (`sglang:token_usage`, `vllm:kv_cache_usage_perc`), averaged over data-parallel ranks"
        }
        Metric::ServerGenThroughput => {
            "the server's own generation throughput gauge, tok/s, sampled the same way (`sglang:gen_throughput`)"
        }
        Metric::ServerCacheHitRate => {
            "prompt tokens served from the prefix cache over all prompt tokens, by the server's counters over the window (`sglang:cached_tokens_total` / `sglang:prompt_tokens_total`; vLLM's `prefix_cache_hits_total` / `prefix_cache_queries_total`)"
        }
        Metric::ServerSpecAcceptLength => {
            "generated tokens per speculative verify step over the window, the bonus token included (`sglang:generation_tokens_total` / `sglang:spec_verify_calls_total`; vLLM 1 + accepted / drafts)"
        }
        Metric::ServerRetractions => {
            "requests the server retracted for want of KV cache in the window (`sglang:num_retracted_requests_total`, which SGLang makes at its first retraction, as the abort counter: none yet is 0; vLLM's preemptions, `num_preemptions_total`)"
        }
        Metric::ServerAborted => {
            "requests the server aborted in the window (`sglang:num_aborted_requests_total`; vLLM `request_success_total{finished_reason=\"abort\"}`). On SGLang the requests the client abandoned at a deadline count: the read after the window waits up to 5 s for the server to count them. vLLM 0.32 does not count them (its front end drops a request its client left, `v1/engine/output_processor.py::abort_requests`, and records no finish for it; shown against it in `tests/servers.rs`): there the figure counts only the aborts its engine decides, and the client's own `errors` count the abandoned requests"
        }
        Metric::ServerKvUsedTokens => {
            "KV-cache slots the running requests hold, in tokens, sampled the same way (`sglang:kv_used_tokens`): with `server.kv_available_tokens`, how near the cache is to retracting"
        }
        Metric::ServerKvAvailableTokens => {
            "KV-cache slots free, in tokens, sampled the same way (`sglang:kv_available_tokens`)"
        }
        Metric::ServerCudaGraphShare => {
            "decode passes that ran a CUDA graph over all decode passes in the window, 0 to 1 (`sglang:cuda_graph_passes_total` by `mode`, `decode_cuda_graph` over it and `decode_none`): below 1, batches outgrew `--cuda-graph-max-bs-decode` or graphs are off, a common cause when tok/s moves"
        }
        Metric::ServerSchedulerCpu => {
            "CPU seconds the scheduler process used per second between the reads before and after the window (`sglang:scheduler_process_cpu_seconds_total`; 1 is one core busy; of the busiest tensor-parallel rank where each writes its own): a scheduler near 1 is the bottleneck. SGLang adds to it about once a second, so a window shorter than 5 s has no figure"
        }
        Metric::ServerTtftHistogram => {
            "time to first token by the server's own histogram over the window (`sglang:time_to_first_token_seconds`, vLLM's the same): `.mean` exact (its sum over its count), a percentile the upper bound of the bucket that holds it, so gate percentiles with `<` or `<=` a fixed value"
        }
        Metric::ServerItlHistogram => {
            "inter-token latency by the server's own histogram (`sglang:inter_token_latency_seconds`, vLLM's the same), read as `server.ttft` is"
        }
        Metric::ServerTpotHistogram => {
            "time per output token by the server's own histogram (`sglang:request_time_per_output_token_seconds`, vLLM's the same), read as `server.ttft` is"
        }
        Metric::ServerE2eHistogram => {
            "end-to-end latency by the server's own histogram (`sglang:e2e_request_latency_seconds`, vLLM's the same), read as `server.ttft` is"
        }
        Metric::ServerQueueTime => {
            "time in the server's queue by its own histogram (`sglang:queue_time_seconds`, vLLM `request_queue_time_seconds`), read as `server.ttft` is"
        }
    }
}

fn stat_doc(stat: Stat) -> &'static str {
    match stat {
        Stat::Mean => "the mean",
        Stat::Stddev => "the standard deviation",
        Stat::Min => "the smallest",
        Stat::P50 => "the median",
        Stat::P90 => "the 90th percentile",
        Stat::P95 => "the 95th percentile",
        Stat::P99 => "the 99th percentile",
        Stat::P999 => "the 99.9th percentile",
        Stat::Max => "the largest",
    }
}

/// An object of every metric key (`ttft.p99`, `output_tok_s`, …), each
/// described and valued by `value`: the metrics' own table names them.
fn metric_keys(value: impl Fn(&str) -> Value) -> Value {
    let mut properties = Map::new();
    for key in all_keys() {
        let parsed: crate::suite::metric::MetricKey =
            key.parse().expect("all_keys() names metric keys");
        let doc = metric_doc(parsed.metric);
        let what = match parsed.stat {
            Some(s) => format!("{} of `{}`: {doc}", stat_doc(s), parsed.metric.name()),
            None => format!("`{}`: {doc}", parsed.metric.name()),
        };
        properties.insert(key.clone(), described(value(&key), &what));
    }
    closed(properties)
}

/// A gate's `thresholds`: a bound for each metric key.
pub(super) fn thresholds() -> Value {
    metric_keys(|key| {
        let metric = key
            .parse::<crate::suite::metric::MetricKey>()
            .expect("all_keys() names metric keys")
            .metric;
        // What `threshold::parse_amount` reads: a duration, or a number
        // with the metric's own unit or none.
        let value = if metric.is_duration() {
            crate::units::duration_pattern()
        } else {
            let number = "[-+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][-+]?[0-9]+)?";
            match metric.unit() {
                "" => number.to_owned(),
                unit => format!("{number}(\\s*{})?", regex::escape(unit)),
            }
        };
        comparison(
            &value,
            &format!(
                "A bound on `{key}`, such as `\">= 12.5\"`, `\"<= 2s\"`, `\"== 0\"`, `\"<= baseline + 10%\"`, `\">= variant(base) * 1.05\"`, `\">= history.median(10) * 0.97\"` or `\">= no_regression\"`."
            ),
        )
    })
}

/// A performance gate (`performance:`).
pub(in crate::suite::decode) const GATE: &[Field] = &[
    Field {
        key: "name",
        value: name,
        doc: "The gate's name: `<suite>::performance::<name>`.",
    },
    Field {
        key: "load",
        value: load,
        doc: "The load: its pace (`concurrency` or `rate`), its window (`requests` and/or `duration`) and its workload (one of `prompt`, `input_tokens`, `dataset`).",
    },
    Field {
        key: "thresholds",
        value: || with_min_properties(thresholds()),
        doc: "Bounds on the figures measured: metric (`ttft.p99`, `decode_tok_s.mean`, `output_tok_s`, `errors`) to comparison.",
    },
    Field {
        key: "slo",
        value: || with_min_properties(object(&[SLO])),
        doc: "Per-request objectives (`ttft`, `tpot`, `e2e`) that `goodput_*` counts.",
    },
    Field {
        key: "repeats",
        value: || count(1),
        doc: "Run the load N times and judge the repeats together.",
    },
    Field {
        key: "verdict",
        value: names::<VerdictMode>,
        doc: "With repeats: `mean` (default) compares the mean, `lenient` fails only when the whole 95% interval is past the bound, `strict` passes only when the whole interval meets it.",
    },
    Field {
        key: "token_accounting",
        value: || object(&[TOKEN_ACCOUNTING]),
        doc: "Adds `token_drift_chunks` and `token_drift_metrics` bounds at this tolerance.",
    },
    Field {
        key: "curve",
        value: || {
            metric_keys(|_| {
                json!({
                    "type": "string",
                    "pattern": "^\\s*(non_decreasing|non_increasing)(\\s+within\\s+[0-9.]+\\s*%?)?\\s*$",
                })
            })
        },
        doc: "With a sweep: metric to `non_decreasing` or `non_increasing`, optionally `within 5%`, checked from one level to the next.",
    },
    Field {
        key: "recheck",
        value: || json!({"anyOf": [{"const": "all"}, non_empty(name())]}),
        doc: "Probes asked again while the load runs (`all`, or their names); a trial `<gate>::recheck` judges them and the load's answers.",
    },
    Field {
        key: "needs",
        value: || non_empty(name()),
        doc: "The correctness probes whose pass this gate waits for (default: every probe). A probe it does not name may fail without gating it; config checks gate it always.",
    },
    EXTRA_BODY,
    ADAPTER,
];

/// A gate's `slo:`.
pub(in crate::suite::decode) const SLO: &[Field] = &[
    Field {
        key: "ttft",
        value: duration,
        doc: "",
    },
    Field {
        key: "tpot",
        value: duration,
        doc: "",
    },
    Field {
        key: "e2e",
        value: duration,
        doc: "",
    },
];

/// A gate's `token_accounting:`.
pub(in crate::suite::decode) const TOKEN_ACCOUNTING: &[Field] = &[Field {
    key: "tolerance",
    value: || json!({"type": ["string", "number"], "pattern": "^\\s*[0-9.]+\\s*%?\\s*$"}),
    doc: "A percentage such as `1%` (default).",
}];

/// A gate (an item of `performance:`).
pub(super) fn gate() -> Value {
    described(
        with_required(object(&[GATE]), &["name", "load", "thresholds"]),
        "A performance gate: a load, and bounds on what it measured.",
    )
}

/// A sweep's levels: one value, or a list of them.
fn levels(one: &Value) -> Value {
    json!({"anyOf": [one.clone(), {"type": "array", "items": one, "minItems": 1}]})
}

/// A gate's `load:`.
pub(in crate::suite::decode) const LOAD: &[Field] = &[
    Field {
        key: "concurrency",
        value: || levels(&count(1)),
        doc: "Closed loop: N workers, each sending its next request when the previous ends; a list sweeps (one trial per level). With `rate`: a cap on requests in flight.",
    },
    Field {
        key: "rate",
        value: || levels(&json!({"type": "number", "exclusiveMinimum": 0})),
        doc: "Open loop: requests per second, started on a schedule; a list sweeps.",
    },
    Field {
        key: "arrival",
        value: || one_of(ARRIVALS),
        doc: "Spacing of the open-loop schedule (default `constant`): `poisson`, `gamma` (with `burstiness`), or `trace` (the dataset's records at their `timestamp`s, without `rate`).",
    },
    Field {
        key: "seed",
        value: || count(0),
        doc: "Seed of the Poisson or gamma schedule.",
    },
    Field {
        key: "burstiness",
        value: || json!({"type": "number", "exclusiveMinimum": 0}),
        doc: "`arrival: gamma`: the shape of the gaps' gamma distribution, as vLLM's `bench serve --burstiness` takes it: 1 is Poisson, below 1 burstier, above 1 more even.",
    },
    Field {
        key: "slowdown",
        value: || json!({"type": "number", "minimum": MIN_SLOWDOWN, "maximum": MAX_SLOWDOWN}),
        doc: "`arrival: trace`: play the trace this many times slower than recorded (default 1; 0.001 to 1000).",
    },
    Field {
        key: "requests",
        value: || count(1),
        doc: "The measured window ends after N requests (or at `duration`).",
    },
    Field {
        key: "duration",
        value: duration,
        doc: "The measured window ends at this duration (or after `requests`).",
    },
    Field {
        key: "warmup",
        value: || count(0),
        doc: "Requests sent first and left out of every figure.",
    },
    Field {
        key: "prompt",
        value: text,
        doc: "A fixed prompt for every request.",
    },
    Field {
        key: "input_tokens",
        value: || count(1),
        doc: "A synthetic prompt of about N tokens, different per request.",
    },
    Field {
        key: "output_tokens",
        value: || json!({"anyOf": [count(1), {"const": "dataset"}]}),
        doc: "`max_tokens` of every request; `dataset`: each request's record's answer's length (its `output_tokens`, or its `completion` or ShareGPT `gpt` turn counted by `tokenizer`).",
    },
    Field {
        key: "ignore_eos",
        value: boolean,
        doc: "The server generates exactly `output_tokens`.",
    },
    Field {
        key: "flush_cache",
        value: boolean,
        doc: "`POST /flush_cache` (SGLang) after the warm-up.",
    },
    Field {
        key: "abort_after",
        value: || count(0),
        doc: "Stop after this many consecutive stalls, timeouts or refusals (default 3; 0: never).",
    },
    Field {
        key: "client_threads",
        value: || json!({"anyOf": [{"const": "auto"}, {"type": "integer", "minimum": 1, "maximum": MAX_CLIENT_THREADS}]}),
        doc: "Client threads driving the load, each owning a shard of the streams (default `auto`: from the load, within the machine's cores; `--client-threads` overrides).",
    },
    Field {
        key: "client_limited",
        value: || one_of(CLIENT_LIMITED),
        doc: "When the self-check finds the client was the bottleneck: `fail` the gate or `warn` (figures marked client-limited, judged as they are); default: `fail` against a server, `warn` against the embedded simulator.",
    },
    Field {
        key: "dataset",
        value: string,
        doc: "A JSONL (or ShareGPT JSON) file of prompts, relative to the suite or a parent.",
    },
    Field {
        key: "shared_prefix",
        value: || with_required(object(&[SHARED_PREFIX]), &["tokens"]),
        doc: "With `input_tokens`: one of G prefixes of about P tokens, then N unique tokens.",
    },
    Field {
        key: "tokenizer",
        value: string,
        doc: "A Hugging Face `tokenizer.json` that cuts synthetic prompts to exactly `input_tokens`, counts a dataset's answers for `output_tokens: dataset`, and checks the server's token counts of about one answer in 16.",
    },
    Field {
        key: "images",
        value: || {
            let mut v = object(&[LOAD_IMAGES]);
            v["oneOf"] = json!([{"required": ["size"]}, {"required": ["dir"]}]);
            v
        },
        doc: "Images each request sends beside its prompt (`openai-chat`, `sglang-generate`): `{count: 1, size: 512x512}` or `{count: 1, dir: images/}`.",
    },
    Field {
        key: "conversation",
        value: || with_required(object(&[CONVERSATION]), &["turns"]),
        doc: "Sessions of several turns (closed loop, chat API): each worker sends a session's turns in order, each with the conversation so far, the model's answers included.",
    },
];

/// A load's `conversation:`.
pub(in crate::suite::decode) const CONVERSATION: &[Field] = &[
    Field {
        key: "turns",
        value: || json!({"type": "integer", "minimum": 2, "maximum": MAX_TURNS}),
        doc: "Requests of each session, each with the messages before it (a dataset's records with that many user turns).",
    },
    Field {
        key: "think",
        value: duration,
        doc: "A user's pause between an answer and the session's next turn (default none).",
    },
];

/// A load's `shared_prefix:`.
pub(in crate::suite::decode) const SHARED_PREFIX: &[Field] = &[
    Field {
        key: "tokens",
        value: || count(1),
        doc: "Tokens of each shared prefix.",
    },
    Field {
        key: "groups",
        value: || count(1),
        doc: "How many prefixes (default 1).",
    },
];

/// A load's `images:`.
pub(in crate::suite::decode) const LOAD_IMAGES: &[Field] = &[
    Field {
        key: "count",
        value: || json!({"type": "integer", "minimum": 1, "maximum": MAX_LOAD_IMAGES}),
        doc: "Images each request sends beside its prompt (default 1).",
    },
    Field {
        key: "size",
        value: || json!({"type": "string", "pattern": "^\\s*[0-9]+\\s*[x×]\\s*[0-9]+\\s*$"}),
        doc: "One-colour PNGs of this many pixels across and down (`512x512`), another colour for every request of a window.",
    },
    Field {
        key: "dir",
        value: string,
        doc: "A directory whose image files (`.png`, `.jpg`, `.jpeg`, `.gif`, `.webp`) are read when the suite loads and sent in turn.",
    },
];

/// A gate's `load:`: exactly one workload, a window (a replayed trace's
/// is its records).
fn load() -> Value {
    let mut load = one_of_required(
        with_required(object(&[LOAD]), &["output_tokens"]),
        &[&["prompt"], &["input_tokens"], &["dataset"]],
    );
    load["anyOf"] = json!([
        {"required": ["requests"]},
        {"required": ["duration"]},
        {"required": ["arrival"], "properties": {"arrival": {"const": "trace"}}},
    ]);
    load
}
