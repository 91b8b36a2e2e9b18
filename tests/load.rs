//! Load shapes and metrics against the in-process simulator and scripted
//! servers: sweeps, duration bounds, open loop, coordinated omission,
//! `flush_cache`, goodput, multi-token chunks, usage-less servers.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use servegate::client::Client;
use servegate::load::metrics::GateMetrics;
use servegate::load::runner::run_gate;
use servegate::load::threads::Threads;
use servegate::sim::{self, Profile, RunningSim};
use servegate::suite::{Api, Gate, Pace, Timeouts, load_text};
use tokio::time::Instant;

/// The gates of a suite holding only `performance:` items.
fn gates(performance: &str) -> Vec<Gate> {
    let text = format!("suite: t\nperformance:\n{performance}");
    load_text(Path::new("t.yaml"), &text, &|_| None)
        .unwrap_or_else(|e| panic!("{e}"))
        .gates
}

fn one_gate(load: &str, extra: &str) -> Gate {
    gates(&format!(
        "  - name: g\n    load: {load}\n    thresholds: {{errors: \"<= 1000\"}}\n{extra}"
    ))
    .remove(0)
}

fn simulator(profile: &str) -> RunningSim {
    sim::spawn(
        Profile::parse(profile).unwrap(),
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
    )
    .unwrap()
}

fn client(url: &str, api: Api) -> Client {
    Client::new(url, api, "m", None, Timeouts::default()).unwrap()
}

async fn measure(url: &str, api: Api, gate: &Gate) -> GateMetrics {
    run_gate(&client(url, api), gate, Threads::of(&gate.load, None))
        .await
        .unwrap()
}

/// The simulator's `/metrics`.
async fn metrics_of(s: &RunningSim) -> String {
    reqwest::get(format!("{}/metrics", s.base_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

fn value(m: &GateMetrics, key: &str) -> f64 {
    m.value(key.parse().unwrap())
        .unwrap_or_else(|| panic!("{key} not measured"))
}

const FAST: &str = "model: m\nttft: 5ms\nitl: 1ms\n";

#[test]
fn sweeps_become_one_gate_per_level() {
    let g = gates(
        "  - name: sweep\n    load: {concurrency: [1, 4], requests: 4, input_tokens: 8, output_tokens: 8}\n    thresholds: {errors: \"== 0\"}\n\
         \x20 - name: rates\n    load: {rate: [5, 2.5], concurrency: 8, requests: 4, input_tokens: 8, output_tokens: 8}\n    thresholds: {errors: \"== 0\"}\n\
         \x20 - name: solo\n    load: {concurrency: [4], requests: 4, input_tokens: 8, output_tokens: 8}\n    thresholds: {errors: \"== 0\"}\n",
    );
    let names: Vec<&str> = g.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "sweep::concurrency_1",
            "sweep::concurrency_4",
            "rates::rate_5",
            "rates::rate_2_5",
            "solo"
        ]
    );
    assert_eq!(g[1].load.pace, Pace::Closed { concurrency: 4 });
    let sweeps: Vec<Option<(&str, &str)>> = g
        .iter()
        .map(|g| {
            g.sweep
                .as_ref()
                .map(|s| (s.sweep.as_str(), s.level.as_str()))
        })
        .collect();
    assert_eq!(
        sweeps,
        [
            Some(("sweep", "concurrency_1")),
            Some(("sweep", "concurrency_4")),
            Some(("rates", "rate_5")),
            Some(("rates", "rate_2_5")),
            None
        ]
    );
    assert!(
        matches!(g[3].load.pace, Pace::Open { rate, max_in_flight: Some(8), .. } if (rate - 2.5).abs() < 1e-12)
    );
}

#[tokio::test]
async fn duration_bounds_a_closed_loop() {
    let s = simulator(FAST);
    let gate = one_gate(
        "{concurrency: 2, duration: 300ms, input_tokens: 8, output_tokens: 8, ignore_eos: true}",
        "",
    );
    let start = Instant::now();
    let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
    let took = start.elapsed();
    assert!(m.completed >= 10, "{} requests in 300ms", m.completed);
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert_eq!(m.errors, 0);
}

#[tokio::test]
async fn open_loop_keeps_its_rate() {
    let s = simulator(FAST);
    let gate = one_gate(
        "{rate: 50, requests: 25, input_tokens: 8, output_tokens: 4, ignore_eos: true}",
        "",
    );
    let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
    assert_eq!(m.completed, 25);
    // 25 starts, 20ms apart: the last starts at 480ms.
    assert!(m.wall >= Duration::from_millis(480), "{:?}", m.wall);
    let rps = value(&m, "requests_per_s");
    assert!((35.0..=55.0).contains(&rps), "{rps} req/s");
}

/// Three client threads share one closed loop: each owns its share of the
/// streams, every request index is sent once, and the figures merge.
#[tokio::test]
async fn client_threads_split_a_closed_loop_and_merge_its_figures() {
    let s = simulator(FAST);
    let gate = one_gate(
        "{concurrency: 7, requests: 42, warmup: 7, input_tokens: 8, output_tokens: 4, ignore_eos: true, client_threads: 3}",
        "",
    );
    let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
    assert_eq!((m.completed, m.errors, m.output_tokens), (42, 0, 42 * 4));
    assert_eq!(m.ttft.len(), 42);
    assert_eq!(m.client.chosen, "suite");
    let streams: Vec<u32> = m.client.threads.iter().map(|t| t.streams).collect();
    assert_eq!(streams, [3, 2, 2]);
    // The measured requests reuse the connections their thread's warm-up
    // opened: the chunked terminator of the previous answer is read before
    // the next request looks for one. (Only a terminator that came in a
    // packet of its own, on a machine busy with the other tests of this
    // binary, is drained in the background, and its worker's next request
    // opens a connection; reading the terminator late made every worker
    // open a second connection: 7.)
    assert!(
        m.connect.len() < 3,
        "{} connections opened",
        m.connect.len()
    );
    assert_eq!(m.ttft_from_send.len(), 42);
    assert!(value(&m, "ttft_from_send.mean") <= value(&m, "ttft.mean"));
    #[cfg(target_os = "linux")]
    assert!(
        m.client
            .threads
            .iter()
            .all(|t| t.busy.is_some_and(|b| b > 0.0)),
        "{:?}",
        m.client
    );
}

/// A gate's window starts with the connections its streams will use, even
/// with no warm-up to open them: no request of the window pays a connect
/// in its TTFT (before, 8 workers without a warm-up opened 8 inside it),
/// an open loop opens its `max_in_flight` the same way, and the connects
/// stay a figure of their own.
#[tokio::test]
async fn the_window_starts_with_its_connections_open() {
    let s = simulator(FAST);
    for load in [
        "{concurrency: 8, requests: 32, warmup: 0, input_tokens: 8, output_tokens: 4, ignore_eos: true, client_threads: 2}",
        "{rate: 400, requests: 32, concurrency: 8, warmup: 0, input_tokens: 8, output_tokens: 4, ignore_eos: true, client_threads: 1}",
    ] {
        let gate = one_gate(load, "");
        let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
        assert_eq!((m.completed, m.errors), (32, 0), "{load}");
        // The 8 opened before the window, and (as above: only a terminator
        // drained in the background sends its worker's next request to a
        // new connection) at most 2 inside it. Without the opening before
        // the window: 8 inside it, in their requests' TTFT.
        assert_eq!(m.preopened, 8, "{load}");
        assert!(
            m.connect.len() < 8 + 3,
            "{load}: {} connects, 8 of them before the window",
            m.connect.len()
        );
    }
}

/// An open loop on two threads keeps its one global schedule: request `i`
/// starts at `i / rate` on thread `i % 2`, and the self-check counts each
/// thread's starts.
#[tokio::test]
async fn client_threads_share_one_open_loop_schedule() {
    let s = simulator(FAST);
    let gate = one_gate(
        "{rate: 100, requests: 30, input_tokens: 8, output_tokens: 4, ignore_eos: true, client_threads: 2}",
        "",
    );
    let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
    assert_eq!((m.completed, m.errors), (30, 0));
    // 30 starts 10ms apart: the last at 290ms.
    assert!(m.wall >= Duration::from_millis(290), "{:?}", m.wall);
    let starts: Vec<u64> = m.client.threads.iter().map(|t| t.starts).collect();
    assert_eq!(starts, [15, 15]);
    #[cfg(target_os = "linux")]
    assert!(
        m.client.threads.iter().all(|t| t.waited.is_some()),
        "each thread's wait for a CPU, from the kernel: {:?}",
        m.client
    );
}

/// The warm-up sends every request it says, on any number of client
/// threads: an open loop warms one request at a time, on one thread, and
/// the threads without a warm-up worker leave no share of it unsent (they
/// once did: with two threads, half of an open loop's warm-up never went).
#[tokio::test]
async fn the_warm_up_sends_every_request_on_any_number_of_threads() {
    for (load, sent) in [
        (
            "{rate: 200, requests: 4, warmup: 5, input_tokens: 8, output_tokens: 2, ignore_eos: true, client_threads: 2}",
            9,
        ),
        (
            "{concurrency: 3, requests: 6, warmup: 7, input_tokens: 8, output_tokens: 2, ignore_eos: true, client_threads: 2}",
            13,
        ),
        (
            "{concurrency: 1, requests: 2, warmup: 3, input_tokens: 8, output_tokens: 2, ignore_eos: true, client_threads: 3}",
            5,
        ),
    ] {
        let s = simulator(FAST);
        let gate = one_gate(load, "");
        let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
        assert_eq!(m.errors, 0, "{load}");
        let metrics = metrics_of(&s).await;
        let total = metrics
            .lines()
            .find(|l| l.starts_with("sglang:num_requests_total"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok());
        assert_eq!(total, Some(f64::from(sent)), "{load}: {metrics}");
    }
}

/// A schedule whose next start no clock reaches (a rate near zero) ends
/// there: the first request is sent, and nothing panics adding the next
/// start to the window's.
#[tokio::test]
async fn a_start_past_any_clock_ends_the_schedule() {
    let s = simulator(FAST);
    let gate = one_gate(
        "{rate: 1e-19, requests: 3, duration: 5s, input_tokens: 8, output_tokens: 2}",
        "",
    );
    let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
    assert_eq!((m.completed, m.errors), (1, 0));
}

/// An open loop held back by its cap on requests in flight starts late
/// because of the server: the late starts are counted, but not against the
/// client, whose self-check stays clear.
#[tokio::test]
async fn waits_for_max_in_flight_are_the_servers_not_the_clients() {
    let s = simulator("model: m\nttft: 40ms\nitl: 1ms\n");
    let gate = one_gate(
        "{rate: 100, concurrency: 1, requests: 10, input_tokens: 8, output_tokens: 4, ignore_eos: true, client_threads: 1}",
        "",
    );
    let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
    assert_eq!((m.completed, m.errors), (10, 0));
    assert!(m.late_starts >= 5, "{} late starts", m.late_starts);
    // Every start after the first waited ~40 ms for the one permit; the
    // client's own wake-ups are late only when the machine is busy (the
    // other tests of this binary run beside it), never nine times in ten.
    let t = &m.client.threads[0];
    assert_eq!(t.starts, 10, "{:?}", m.client);
    assert!(t.late_starts <= 2, "{:?}", m.client);
    // Nor are those waits in the client's error of the TTFT they are in.
    let (bounds, _) = m.client_bounds(&["ttft.p50".parse().unwrap()]);
    let (ttft, bound) = (bounds[0].value, bounds[0].bound.unwrap());
    assert!(ttft > 0.05 && bound < ttft / 4.0, "{bounds:?}");
}

/// A server that freezes for one second, 300ms after its first request, as a
/// GC pause or a stuck scheduler would; otherwise it answers at once.
async fn stalling_server() -> String {
    let first: Arc<Mutex<Option<Instant>>> = Arc::default();
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let first = Arc::clone(&first);
            async move {
                let t0 = *first.lock().unwrap().get_or_insert_with(Instant::now);
                let (from, to) = (t0 + Duration::from_millis(300), t0 + Duration::from_millis(1300));
                let now = Instant::now();
                if now >= from && now < to {
                    tokio::time::sleep_until(to).await;
                }
                "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n\
                 data: {\"choices\":[{\"delta\":{\"content\":\"b\"},\"finish_reason\":\"length\"}]}\n\n\
                 data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

#[tokio::test]
async fn a_stall_shows_in_open_loop_latency_but_hides_from_a_closed_loop() {
    // Closed loop, one worker: only the one request caught in the stall is slow.
    let url = stalling_server().await;
    let closed = one_gate(
        "{concurrency: 1, duration: 2s, prompt: x, output_tokens: 2}",
        "",
    );
    let m = measure(&url, Api::OpenAiChat, &closed).await;
    assert!(
        value(&m, "ttft.max") >= 0.9,
        "the stalled request itself is slow"
    );
    assert!(
        value(&m, "ttft.p90") < 0.1,
        "closed loop: p90 {}",
        value(&m, "ttft.p90")
    );
    // Open loop at 20 req/s with one request in flight at most: requests due
    // during the stall start late, and their latency counts from when they
    // were due, so about 20 of 40 requests show it.
    let url = stalling_server().await;
    let open = one_gate(
        "{rate: 20, concurrency: 1, requests: 40, prompt: x, output_tokens: 2}",
        "",
    );
    let m = measure(&url, Api::OpenAiChat, &open).await;
    assert_eq!(m.completed, 40);
    assert!(m.late_starts >= 15, "late starts {}", m.late_starts);
    assert!(
        value(&m, "ttft.p90") >= 0.3,
        "open loop: p90 {}",
        value(&m, "ttft.p90")
    );
    assert!(
        value(&m, "ttft.mean") >= 0.15,
        "open loop: mean {}",
        value(&m, "ttft.mean")
    );
    assert!(value(&m, "ttft.max") >= 0.9);
}

#[tokio::test]
async fn flush_cache_runs_before_measuring_or_fails_the_gate() {
    let s = simulator(FAST);
    let gate = one_gate(
        "{requests: 2, warmup: 1, input_tokens: 8, output_tokens: 4, flush_cache: true}",
        "",
    );
    measure(&s.base_url(), Api::OpenAiChat, &gate).await;
    let metrics = metrics_of(&s).await;
    assert!(
        metrics.contains("servegate_sim:cache_flushes_total 1"),
        "{metrics}"
    );
    // A server without the endpoint: the gate cannot run as asked.
    let url = stalling_server().await;
    let err = run_gate(&client(&url, Api::OpenAiChat), &gate, Threads::ONE)
        .await
        .unwrap_err();
    assert!(
        matches!(err, servegate::load::runner::LoadError::FlushCache(_))
            && err
                .to_string()
                .starts_with("flush_cache failed before measuring: HTTP 404"),
        "{err}"
    );
}

#[tokio::test]
async fn goodput_counts_requests_within_the_slo() {
    let s = simulator(FAST);
    let load = "{concurrency: 2, requests: 6, input_tokens: 8, output_tokens: 8, ignore_eos: true}";
    let m = measure(
        &s.base_url(),
        Api::OpenAiChat,
        &one_gate(load, "    slo: {ttft: 2s, tpot: 500ms}\n"),
    )
    .await;
    assert_eq!(m.good_requests, Some(6));
    assert!((value(&m, "goodput_requests_per_s") - value(&m, "requests_per_s")).abs() < 1e-9);
    let m = measure(
        &s.base_url(),
        Api::OpenAiChat,
        &one_gate(load, "    slo: {ttft: 1ms}\n"),
    )
    .await;
    assert_eq!(m.good_requests, Some(0));
    assert!(value(&m, "goodput_tok_s").abs() < 1e-12);
}

#[tokio::test]
async fn multi_token_chunks_give_per_token_itl() {
    // Four tokens per chunk, 2ms per token: a chunk every 8ms.
    let s = simulator("model: m\nttft: 5ms\nitl: 2ms\ntokens_per_chunk: 4\n");
    let gate = one_gate(
        "{requests: 2, input_tokens: 8, output_tokens: 32, ignore_eos: true}",
        "",
    );
    for api in [Api::SglangGenerate, Api::OpenAiChat] {
        let m = measure(&s.base_url(), api, &gate).await;
        assert_eq!(m.output_tokens, 64, "{api:?}");
        // 8 chunks a request: 7 gaps, each split into 4 per-token gaps.
        assert_eq!(m.itl.len(), 2 * 7 * 4, "{api:?}");
        let itl = value(&m, "itl.mean");
        assert!(
            (0.0015..0.004).contains(&itl),
            "{api:?}: per-token ITL {itl}"
        );
    }
}

/// The simulator lists token ids as SGLang 0.5.23 does, four tokens a
/// chunk: every `/generate` chunk's `output_ids` (all so far, or the
/// chunk's own with incremental output), a completions chunk's own
/// `token_ids` when asked; a streaming chat that asks for them is refused
/// (400, SGLang's words). Each witnessed count says so.
#[tokio::test]
async fn the_simulator_lists_token_ids_as_sglang_does() {
    const CHUNKS: &str = "model: m\nttft: 5ms\nitl: 1ms\ntokens_per_chunk: 4\n";
    const SEGMENTS: &str =
        "model: m\nttft: 5ms\nitl: 1ms\ntokens_per_chunk: 4\nincremental_output: true\n";
    let gate = one_gate(
        "{requests: 2, input_tokens: 8, output_tokens: 32, ignore_eos: true}",
        "",
    );
    let run = |profile: &'static str, api: Api| {
        let gate = gate.clone();
        async move {
            let s = simulator(profile);
            // What discovery would read of it: `/server_info`'s text mode,
            // and SGLang's name.
            let client = client(&s.base_url(), api)
                .with_incremental_output(profile.contains("incremental_output: true"))
                .with_token_ids(api != Api::SglangGenerate);
            run_gate(&client, &gate, Threads::of(&gate.load, None))
                .await
                .unwrap()
        }
    };
    for (profile, api, source) in [
        (CHUNKS, Api::SglangGenerate, "meta_info = output_ids"),
        (SEGMENTS, Api::SglangGenerate, "meta_info = output_ids"),
        (CHUNKS, Api::OpenAiCompletions, "server usage = token ids"),
    ] {
        let m = run(profile, api).await;
        assert_eq!(m.errors, 0, "{api:?}: {:?}", m.first_errors);
        assert_eq!(
            m.token_sources.get(source),
            Some(&2),
            "{api:?}: {:?}",
            m.token_sources
        );
    }
    let m = run(CHUNKS, Api::OpenAiChat).await;
    assert_eq!(m.errors, 2, "{:?}", m.token_sources);
    assert!(
        m.first_errors[0]
            .contains("return_token_ids is not supported with streaming on /v1/chat/completions"),
        "{:?}",
        m.first_errors
    );
}

/// Speaking as vLLM 0.32, the simulator lists each chunk's `token_ids`
/// when asked on chat streams too (SGLang refuses them there); each count
/// is witnessed by them, and its `vllm:` series are read over the window.
#[tokio::test]
async fn the_simulator_speaking_as_vllm_lists_token_ids_on_chat_too() {
    let gate = one_gate(
        "{requests: 2, input_tokens: 8, output_tokens: 32, ignore_eos: true}",
        "",
    );
    for api in [Api::OpenAiChat, Api::OpenAiCompletions] {
        let s = simulator("speaks: vllm\nmodel: m\nttft: 5ms\nitl: 1ms\n");
        let client = client(&s.base_url(), api).with_token_ids(true);
        let m = run_gate(&client, &gate, Threads::of(&gate.load, None))
            .await
            .unwrap();
        assert_eq!(m.errors, 0, "{api:?}: {:?}", m.first_errors);
        assert_eq!(
            m.token_sources.get("server usage = token ids"),
            Some(&2),
            "{api:?}: {:?}",
            m.token_sources
        );
        let server = m.server.as_ref().expect("vLLM's series read");
        assert_eq!(server.generation_tokens, Some(64.0), "{api:?}");
    }
}

#[tokio::test]
async fn a_server_without_usage_is_counted_by_chunks_and_says_so() {
    let s = simulator("model: m\nttft: 5ms\nitl: 1ms\nusage: false\n");
    let gate = one_gate(
        "{requests: 2, input_tokens: 8, output_tokens: 16, ignore_eos: true}",
        "",
    );
    let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
    assert_eq!(m.output_tokens, 32);
    assert_eq!(m.token_sources.get("chunk count"), Some(&2));
    assert!(m.input_tokens.is_none(), "no prompt counts without usage");
    assert!(m.value("input_tok_s".parse().unwrap()).is_none());
}

#[tokio::test]
async fn reasoning_delays_the_first_content_token() {
    let s = simulator(
        "model: r\nttft: 5ms\nitl: 20ms\nreplies:\n  - match: '2\\+2'\n    reasoning: 'one two three four five six seven eight'\n    reply: '4'\n",
    );
    let gate = one_gate(
        "{requests: 2, prompt: 'What is 2+2?', output_tokens: 64}",
        "",
    );
    let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
    let (first, content) = (value(&m, "ttft.mean"), value(&m, "ttft_content.mean"));
    // Eight reasoning tokens 20 ms apart: 160 ms, of which a loaded machine
    // (bunching the simulator that shares it) leaves well over half.
    assert!(
        content >= first + 0.08,
        "ttft {first}, ttft_content {content}"
    );
}

#[tokio::test]
async fn dataset_and_shared_prefix_workloads() {
    let s = simulator(FAST);
    // 16 prompts of different lengths, sent in turn.
    let gate = one_gate(
        "{concurrency: 2, requests: 16, dataset: fixtures/datasets/conversations.jsonl, output_tokens: 4}",
        "",
    );
    let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
    assert_eq!(m.completed, 16);
    let input = m.input_tokens.expect("the simulator reports prompt tokens");
    assert!((50..400).contains(&input), "{input} prompt tokens");
    // Two groups share a ~64-token prefix; each request adds ~8 of its own.
    let gate = one_gate(
        "{requests: 4, input_tokens: 8, shared_prefix: {tokens: 64, groups: 2}, output_tokens: 4}",
        "",
    );
    let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
    assert_eq!(m.completed, 4);
    assert!(m.input_tokens.unwrap() >= 4 * 72, "{:?}", m.input_tokens);
}

/// `output_tokens: dataset`: each request asks for as many tokens as its
/// record's answer holds, counted by the load's tokenizer; with
/// `ignore_eos` the server generates exactly the dataset's answers' tokens.
#[cfg(feature = "tokenizers")]
#[tokio::test]
async fn each_request_asks_for_its_records_answer_length() {
    let path = "fixtures/datasets/conversations.jsonl";
    let tokenizer =
        servegate::suite::Tokenizer::load(Path::new("fixtures/tokenizers/words.json")).unwrap();
    let lengths: Vec<u64> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            let answer = record["conversations"][1]["value"].as_str().unwrap();
            tokenizer.count(answer).unwrap() as u64
        })
        .collect();
    let gate = one_gate(
        &format!(
            "{{concurrency: 2, requests: 16, dataset: {path}, output_tokens: dataset, ignore_eos: true, tokenizer: fixtures/tokenizers/words.json}}"
        ),
        "",
    );
    assert_eq!(
        u64::from(gate.load.output_tokens),
        *lengths.iter().max().unwrap()
    );
    let s = simulator(FAST);
    let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
    assert_eq!(m.completed, 16);
    assert_eq!(m.output_tokens, lengths.iter().sum::<u64>(), "{lengths:?}");
}

/// `output_tokens: dataset` where no answer can give the length: no
/// dataset, a conversation, a record without an answer, answers of text
/// and no tokenizer to count them.
#[test]
fn output_lengths_from_a_dataset_need_its_answers() {
    let err = |load: &str| {
        load_text(
            Path::new("t.yaml"),
            &format!("target: {{base_url: sim, api: openai-chat}}\nperformance:\n  - name: g\n    load: {load}\n    thresholds: {{errors: \"== 0\"}}\n"),
            &|_| None,
        )
        .unwrap_err()
    };
    let cases = [
        (
            "{requests: 1, input_tokens: 4, output_tokens: dataset}",
            "`output_tokens: dataset` needs a `dataset`",
        ),
        (
            "{requests: 1, dataset: fixtures/datasets/conversations.jsonl, output_tokens: dataset, conversation: {turns: 2}}",
            "`conversation` does not go with `output_tokens: dataset`",
        ),
        (
            "{requests: 1, dataset: fixtures/datasets/mt-bench.jsonl, output_tokens: dataset}",
            "line 1 of the dataset keeps no answer",
        ),
        (
            "{requests: 1, dataset: fixtures/datasets/conversations.jsonl, output_tokens: dataset}",
            "the dataset's answers are text (line 1 first): counting them needs a `tokenizer`",
        ),
    ];
    for (load, expected) in cases {
        let e = err(load);
        assert!(e.contains(expected), "{load}: {e}");
        assert!(e.contains("--> t.yaml:4:"), "{e}");
    }
}

#[test]
fn a_bad_dataset_is_a_suite_error_at_its_line() {
    let err = load_text(
        Path::new("t.yaml"),
        "performance:\n  - name: g\n    load: {requests: 1, dataset: no/such.jsonl, output_tokens: 4}\n    thresholds: {errors: \"== 0\"}\n",
        &|_| None,
    )
    .unwrap_err();
    assert!(
        err.contains("error: dataset `no/such.jsonl` not found"),
        "{err}"
    );
    assert!(err.contains("--> t.yaml:3:34"), "{err}");
}

fn tokenizer_suite(tokenizer: &str) -> String {
    format!(
        "performance:\n  - name: g\n    load: {{requests: 1, input_tokens: 16, tokenizer: {tokenizer}, output_tokens: 4}}\n    thresholds: {{errors: \"== 0\"}}\n"
    )
}

#[cfg(feature = "tokenizers")]
#[test]
fn a_tokenizer_is_loaded_with_the_suite() {
    let text = tokenizer_suite;
    let suite = load_text(
        Path::new("t.yaml"),
        &text("fixtures/tokenizers/words.json"),
        &|_| None,
    )
    .unwrap();
    assert!(suite.gates[0].load.tokenizer.is_some());
    let err = load_text(
        Path::new("t.yaml"),
        &text("fixtures/datasets/conversations.jsonl"),
        &|_| None,
    )
    .unwrap_err();
    assert!(err.contains("error: invalid tokenizer"), "{err}");
}

/// A build without the `tokenizers` feature (CI runs this file so) reads
/// the suite and says at the `tokenizer:` line why it cannot be used.
#[cfg(not(feature = "tokenizers"))]
#[test]
fn a_build_without_tokenizers_says_so_at_the_line() {
    let err = load_text(
        Path::new("t.yaml"),
        &tokenizer_suite("fixtures/tokenizers/words.json"),
        &|_| None,
    )
    .unwrap_err();
    assert!(
        err.contains("error: tokenizer ") && err.contains("built without its `tokenizers` feature"),
        "{err}"
    );
    assert!(err.contains("--> t.yaml:3:"), "{err}");
    assert!(err.contains("or no `tokenizer:`"), "{err}");
}

#[tokio::test]
async fn the_servers_own_metrics_sit_beside_the_clients() {
    let s = simulator(FAST);
    let gate = one_gate(
        "{concurrency: 2, requests: 6, warmup: 2, input_tokens: 8, output_tokens: 16, ignore_eos: true}",
        "    token_accounting: {tolerance: 0.5%}\n",
    );
    let m = measure(&s.base_url(), Api::OpenAiChat, &gate).await;
    let server = m.server.clone().expect("the simulator serves /metrics");
    // Warm-up requests fall outside the window on both sides.
    assert_eq!(server.generation_tokens, Some(96.0));
    assert_eq!(m.output_tokens, 96);
    assert_eq!(server.ttft.as_ref().map(|h| h.count), Some(6.0));
    assert!(value(&m, "token_drift_metrics").abs() < 1e-9);
    assert!(value(&m, "token_drift_chunks").abs() < 1e-9);
    assert_eq!(
        gate.thresholds.len(),
        3,
        "errors bound plus two accounting thresholds"
    );
    assert!(
        m.render()
            .contains("server /metrics over the window: generation tokens 96")
    );
    // A server without /metrics: no server view, so no drift figure.
    let url = stalling_server().await;
    let m = measure(
        &url,
        Api::OpenAiChat,
        &one_gate("{requests: 2, prompt: x, output_tokens: 2}", ""),
    )
    .await;
    assert!(m.server.is_err());
    assert!(m.value("token_drift_metrics".parse().unwrap()).is_none());
}

#[test]
fn a_curve_needs_a_sweep_and_a_known_direction() {
    let text = |load: &str, curve: &str| {
        format!(
            "performance:\n  - name: g\n    load: {load}\n    thresholds: {{errors: \"== 0\"}}\n    curve: {curve}\n"
        )
    };
    let sweep = "{concurrency: [1, 2], requests: 1, prompt: x, output_tokens: 4}";
    let suite = load_text(
        Path::new("t.yaml"),
        &text(sweep, "{output_tok_s: non_decreasing within 5%}"),
        &|_| None,
    )
    .unwrap();
    assert_eq!(suite.curves.len(), 1);
    let levels = |suite: &servegate::suite::Suite| -> Vec<String> {
        suite.gates[suite.curves[0].levels.clone()]
            .iter()
            .map(|g| g.name.clone())
            .collect()
    };
    assert_eq!(levels(&suite), ["g::concurrency_1", "g::concurrency_2"]);
    // A gate before the sweep: the levels are placed after it.
    let after = load_text(
        Path::new("t.yaml"),
        &text(sweep, "{output_tok_s: non_decreasing}").replace(
            "performance:\n",
            "performance:\n  - name: first\n    load: {concurrency: 1, requests: 1, prompt: x, output_tokens: 4}\n    thresholds: {errors: \"== 0\"}\n",
        ),
        &|_| None,
    )
    .unwrap();
    assert_eq!(after.curves[0].levels, 1..3);
    assert_eq!(levels(&after), ["g::concurrency_1", "g::concurrency_2"]);
    assert!((suite.curves[0].checks[0].tolerance - 5.0).abs() < 1e-12);
    let single = "{concurrency: 2, requests: 1, prompt: x, output_tokens: 4}";
    let err = load_text(
        Path::new("t.yaml"),
        &text(single, "{output_tok_s: non_decreasing}"),
        &|_| None,
    )
    .unwrap_err();
    assert!(err.contains("error: `curve` needs a sweep"), "{err}");
    let err = load_text(
        Path::new("t.yaml"),
        &text(sweep, "{output_tok_s: non_decreasng}"),
        &|_| None,
    )
    .unwrap_err();
    assert!(
        err.contains("help: did you mean `non_decreasing`?"),
        "{err}"
    );
}
