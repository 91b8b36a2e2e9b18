//! Benchmarks of the client's per-token hot path (SSE framing and chunk
//! decoding), of computing a gate's figures, and of importing runs into a
//! history (in one transaction, and in a transaction per run).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use servegate::client::api::OpenAiChunk;
use servegate::client::sse::SseParser;
use servegate::client::{Completion, Timing, TokenMark};
use servegate::load::metrics::{GateMetrics, Recorder, Slo};

/// An SGLang-style chat stream of `tokens` content chunks.
fn chat_stream(tokens: usize) -> Vec<u8> {
    let mut s = String::from(
        "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
    );
    for i in 0..tokens {
        s.push_str("data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok");
        s.push_str(&(i % 100).to_string());
        s.push_str("\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    }
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

fn sse_and_chunks(c: &mut Criterion) {
    let stream = chat_stream(1000);
    let mut group = c.benchmark_group("client");
    group.throughput(Throughput::Elements(1000));
    group.bench_function("sse_frame_1000_tokens", |b| {
        b.iter(|| {
            let mut p = SseParser::new();
            let mut n = 0;
            for piece in stream.chunks(1460) {
                p.feed(piece);
                while let Some(ev) = p.next_event() {
                    n += ev.data.len();
                }
            }
            black_box(n)
        });
    });
    group.bench_function("sse_and_json_1000_tokens", |b| {
        b.iter(|| {
            let mut p = SseParser::new();
            let mut text = String::new();
            for piece in stream.chunks(1460) {
                p.feed(piece);
                while let Some(ev) = p.next_event() {
                    if ev.data == b"[DONE]" {
                        continue;
                    }
                    let s = std::str::from_utf8(ev.data).unwrap();
                    let chunk: OpenAiChunk<'_> = serde_json::from_str(s).unwrap();
                    for choice in &chunk.choices {
                        if let Some(c) = choice.delta.as_ref().and_then(|d| d.content.as_deref()) {
                            text.push_str(c);
                        }
                    }
                }
            }
            black_box(text.len())
        });
    });
    group.finish();
}

fn figures(c: &mut Criterion) {
    let completions: Vec<Completion> = (0..256u64)
        .map(|r| Completion {
            completion_tokens: 512,
            timing: Timing {
                first_token: Some(Duration::from_millis(20 + r % 7)),
                marks: (0..512u64)
                    .map(|i| TokenMark {
                        at: Duration::from_micros(20_000 + i * 4_000 + (i * r) % 300),
                        tokens: 1,
                        early_us: 0,
                    })
                    .collect(),
                end: Duration::from_millis(2_100),
                ..Timing::default()
            },
            ..Completion::default()
        })
        .collect();
    let mut group = c.benchmark_group("metrics");
    group.throughput(Throughput::Elements(256 * 512));
    group.bench_function("gate_figures_256x512", |b| {
        b.iter(|| GateMetrics::compute(black_box(&completions), &[], Duration::from_secs(10)));
    });
    group.finish();
    // Per-token recording: one completion of 512 tokens into a recorder.
    let mut group = c.benchmark_group("recorder");
    group.throughput(Throughput::Elements(512));
    let mut rec = Recorder::new(Slo::default());
    group.bench_function("record_512_tokens", |b| {
        b.iter(|| rec.record(black_box(&completions[0]), Duration::ZERO, Duration::ZERO));
    });
    group.finish();
    // Merging the shards of a gate: histograms with realistic contents.
    let filled = |n: usize| {
        let mut r = Recorder::new(Slo::default());
        for c in &completions[..n] {
            r.record(c, Duration::ZERO, Duration::ZERO);
        }
        r
    };
    let (a, b) = (filled(128), filled(128));
    c.bench_function("recorder/merge_two_shards", |bench| {
        bench.iter(|| {
            let mut m = a.clone();
            m.merge(black_box(b.clone()));
            m
        });
    });
}

/// `n` run records of three gates of the eight key figures each, as an
/// import reads them.
fn records(n: usize) -> Vec<servegate::record::RunRecord> {
    let figures: serde_json::Map<String, serde_json::Value> = servegate::suite::metric::KEY_FIGURES
        .iter()
        .map(|k| (k.to_string(), serde_json::json!(1.5)))
        .collect();
    (0..n)
        .map(|i| {
            let gates: Vec<serde_json::Value> = (0..3)
                .map(|g| serde_json::json!({ "gate": format!("g{g}"), "load": "x", "repeats": 1, "figures": figures }))
                .collect();
            let run = serde_json::json!({
                "schema": "servegate.run/2", "run_id": format!("{i}-1"), "node": "n",
                "finished_unix": i, "complete": true,
                "suites": [{ "suite": "s", "fingerprint": "f", "target": "t", "gates": gates }]
            });
            servegate::record::from_json(run, std::path::Path::new("bench.json")).unwrap()
        })
        .collect()
}

/// 200 runs into a new SQLite history: in one transaction (`history
/// import`), and in one each (as it imported before 2026-12-06; each
/// commit syncs the file, so the ratio grows with the disk's sync time).
fn history_import(c: &mut Criterion) {
    use servegate::history::{History, Location};
    let runs = records(200);
    let refs: Vec<&servegate::record::RunRecord> = runs.iter().collect();
    let mut group = c.benchmark_group("history_import");
    group.sample_size(10).throughput(Throughput::Elements(200));
    let fresh = || {
        let dir = tempfile::tempdir().unwrap();
        let history = History::open(&Location::Sqlite(dir.path().join("h.sqlite"))).unwrap();
        (dir, history)
    };
    group.bench_function("200_runs_one_transaction", |b| {
        b.iter_batched(
            fresh,
            |(_dir, mut h)| h.record_all(&refs, "import").unwrap(),
            criterion::BatchSize::PerIteration,
        );
    });
    group.bench_function("200_runs_a_transaction_each", |b| {
        b.iter_batched(
            fresh,
            |(_dir, mut h)| {
                for r in &refs {
                    h.record(r, "import").unwrap();
                }
            },
            criterion::BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(benches, sse_and_chunks, figures, history_import);
criterion_main!(benches);
