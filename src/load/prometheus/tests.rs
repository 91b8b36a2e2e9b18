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
        why.starts_with("the window, 2.000s between the reads of /metrics, is shorter than 5.000s"),
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
