//! The fault matrix: every fault the simulator can play, met by a
//! correctness probe and by a performance gate. Each run must end by
//! itself, fail the affected trial with a message naming the fault's
//! class, write its run record, and never panic.

#[allow(dead_code)] // each test binary uses a subset of the shared helpers
mod common;
use common::run::command;
use std::path::Path;
use std::time::{Duration, Instant};

/// A fault and the words its failure must carry.
const MATRIX: &[(&str, &str)] = &[
    ("http_500", "HTTP 500: "),
    ("http_503", "HTTP 503: "),
    ("http_429", "HTTP 429: "),
    (
        "hang_before_first_byte",
        "no token before the first_token deadline",
    ),
    ("slow_headers", "no token before the first_token deadline"),
    (
        "stall_mid_stream",
        "stream stalled longer than the idle deadline",
    ),
    (
        "disconnect_mid_stream",
        "connection broken: the server closed the connection after ",
    ),
    (
        "error_in_stream",
        "error in stream: simulated in-stream error: NaN in logits",
    ),
    ("malformed_sse", "malformed response"),
    ("malformed_json", "malformed response"),
    ("invalid_utf8", "malformed response"),
    ("endless", "request exceeded the total deadline"),
    (
        "huge",
        "malformed response: more than 16 MiB without a complete SSE line",
    ),
];

const CORRECTNESS: &str = r#"
correctness:
  - name: probe
    prompt: "Tell me anything."
    expect: [{min_chars: 1}]
"#;

/// The configuration stage meets only the HTTP faults: the others strike
/// generation, and the info endpoints of such a server answer.
const CONFIG: &str = r#"
expect_server:
  server_info: { tp_size: 1 }
correctness:
  - name: probe
    prompt: "Tell me anything."
    expect: [{min_chars: 1}]
"#;

const PERFORMANCE: &str = r#"
performance:
  - name: gate
    load: { concurrency: 2, requests: 2, input_tokens: 8, output_tokens: 16, ignore_eos: true }
    thresholds: { errors: "== 0" }
"#;

struct Case {
    fault: &'static str,
    stage: &'static str,
    expect: String,
}

/// Runs one case; `Err` says what went wrong.
fn run(dir: &Path, case: &Case) -> Result<(), String> {
    let here = dir.join(format!("{}-{}", case.fault, case.stage));
    std::fs::create_dir_all(&here).map_err(|e| e.to_string())?;
    std::fs::write(
        here.join("profile.yaml"),
        format!(
            "model: sim-faulty\nttft: 2ms\nitl: 1ms\nfault: {}\n",
            case.fault
        ),
    )
    .map_err(|e| e.to_string())?;
    let (body, item) = match case.stage {
        "config" => (CONFIG, "server_info.tp_size"),
        "correctness" => (CORRECTNESS, "probe"),
        _ => (PERFORMANCE, "gate"),
    };
    std::fs::write(
        here.join("suite.yaml"),
        format!(
            "suite: faulty\ntarget:\n  base_url: sim\n  timeouts: {{ connect: 1s, first_token: 1s, idle: 1s, total: 3s }}\nsim: {{ profile: profile.yaml }}\n{body}"
        ),
    )
    .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let out = command(&[], &[])
        .args(["run"])
        .arg(here.join("suite.yaml"))
        .env("CARGO_TARGET_DIR", here.join("target"))
        .output()
        .map_err(|e| e.to_string())?;
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let whole = format!("{stdout}\n--- stderr ---\n{stderr}");
    if stderr.contains("panicked") {
        return Err(format!("a panic:\n{whole}"));
    }
    if out.status.code() != Some(1) {
        return Err(format!(
            "exit {:?}, expected 1:\n{whole}",
            out.status.code()
        ));
    }
    if took > Duration::from_secs(30) {
        return Err(format!("took {took:?}"));
    }
    let trial = format!("faulty::{}::{item}", case.stage);
    if !stdout.contains(&format!("test {trial} ... FAILED")) {
        return Err(format!("{trial} did not fail:\n{whole}"));
    }
    if !stdout.contains(case.expect.as_str()) {
        return Err(format!("`{}` not in the failure:\n{whole}", case.expect));
    }
    let record = std::fs::read_to_string(here.join("target/servegate/latest/report.json"))
        .map_err(|e| format!("no run record: {e}"))?;
    let record: serde_json::Value = serde_json::from_str(&record).map_err(|e| e.to_string())?;
    if record["complete"] != true
        || record["trials"][0]["name"] != trial.as_str()
        || record["trials"][0]["outcome"] != "failed"
    {
        return Err(format!(
            "the record does not hold the failed trial: {}",
            record["trials"]
        ));
    }
    Ok(())
}

#[test]
fn every_fault_fails_the_affected_trial_with_its_class_and_the_run_goes_on() {
    let dir = std::env::temp_dir().join(format!("servegate-faults-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cases: Vec<Case> = MATRIX
        .iter()
        .flat_map(|&(fault, expect)| {
            ["correctness", "performance"].map(|stage| Case {
                fault,
                stage,
                expect: match (fault, stage) {
                    // A gate asks for 16 tokens: a stream past twice that
                    // is a server that ignores max_tokens, caught long
                    // before the total deadline.
                    ("endless", "performance") => {
                        "more than 48 token-bearing chunks in one answer (twice its max_tokens and more): the server does not stop at max_tokens".to_owned()
                    }
                    _ => expect.to_owned(),
                },
            })
        })
        .collect();
    for (fault, code) in [("http_500", 500), ("http_503", 503), ("http_429", 429)] {
        cases.push(Case {
            fault,
            stage: "config",
            expect: format!("GET /server_info: {code}; GET /get_server_info: {code}"),
        });
    }
    // Four at a time: most cases wait on a deadline, not on a core.
    let mut failures = Vec::new();
    for batch in cases.chunks(4) {
        let results: Vec<(String, Result<(), String>)> = std::thread::scope(|s| {
            let handles: Vec<_> = batch
                .iter()
                .map(|c| s.spawn(|| (format!("{} × {}", c.fault, c.stage), run(&dir, c))))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("case thread"))
                .collect()
        });
        failures.extend(
            results
                .into_iter()
                .filter_map(|(name, r)| r.err().map(|e| format!("{name}: {e}"))),
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Memory stays bounded: no run held the 100 MB event (or the endless
    // stream) in memory. The peak of the largest child, KiB on Linux.
    #[cfg(target_os = "linux")]
    {
        use nix::sys::resource::{UsageWho, getrusage};
        let peak_kib = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap().max_rss();
        eprintln!("largest peak of a run: {} MiB", peak_kib / 1024);
        assert!(
            peak_kib < 256 * 1024,
            "a run peaked at {} MiB",
            peak_kib / 1024
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A thousand streams held for three short windows: no error, and files,
/// threads and memory of the client flat (`servegate soak` judges; the
/// docs/src/client-performance.md records a longer run).
#[test]
fn a_thousand_streams_hold_without_errors_or_leaks() {
    let out = command(&[], &[])
        .args([
            "soak",
            "--streams",
            "1000",
            "--windows",
            "3",
            "--window",
            "2s",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("held: ") && text.contains(" 0 errors"),
        "{text}"
    );
}
