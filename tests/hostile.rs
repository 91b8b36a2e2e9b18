//! Hostile servers on raw sockets, every byte under the test's control: a
//! stream that never ends, a 3 GB document, token counts near 2^62, server
//! text that forges CI log lines, a key echoed back, a server that stalls
//! or never answers. Each run must end in bounded wall time and memory,
//! fail with a message naming the class, write its record, never panic,
//! and leak the canary key into nothing.
#![cfg(target_os = "linux")]

#[allow(dead_code)] // each test binary uses a subset of the shared helpers
mod common;
use common::run::command;
use common::verdicts::{assert_has, failure_of, verdict};

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A request as the hostile server read it.
struct Request {
    path: String,
    authorization: String,
    body: String,
}

type Handler = Arc<dyn Fn(&Request, &mut TcpStream) + Send + Sync>;

/// Serves `handler` on a loopback port, a thread per connection, one
/// request per connection; returns the port.
fn serve(handler: Handler) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let handler = Arc::clone(&handler);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut first = String::new();
                if reader.read_line(&mut first).is_err() {
                    return;
                }
                let path = first.split_whitespace().nth(1).unwrap_or("").to_owned();
                let (mut length, mut authorization) = (0usize, String::new());
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    if lower.starts_with("authorization:") {
                        line["authorization:".len()..]
                            .trim()
                            .clone_into(&mut authorization);
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let mut conn = conn;
                handler(
                    &Request {
                        path,
                        authorization,
                        body: String::from_utf8_lossy(&body).into_owned(),
                    },
                    &mut conn,
                );
            });
        }
    });
    port
}

/// A JSON answer, then the connection closes.
fn json(conn: &mut TcpStream, status: u16, body: &str) {
    let _ = write!(
        conn,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// The head of an event stream that ends when the connection closes.
fn stream_head(conn: &mut TcpStream) {
    let _ = conn.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
    );
}

/// What every hostile server answers about itself (discovery).
fn discovery(req: &Request, conn: &mut TcpStream) -> bool {
    match req.path.as_str() {
        "/v1/models" => json(conn, 200, r#"{"data":[{"id":"hostile"}]}"#),
        p if p.starts_with("/v1/") => return false,
        _ => json(conn, 404, r#"{"error":{"message":"no such endpoint"}}"#),
    }
    true
}

/// How a run of servegate went.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
    /// The peak resident memory of the servegate process, KiB.
    peak_kib: u64,
    out_dir: PathBuf,
}

impl Outcome {
    /// The record the run wrote.
    fn record(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(self.out_dir.join("latest/report.json"))
            .unwrap_or_else(|e| panic!("no run record: {e}\n{}", self.stdout));
        serde_json::from_str(&text).unwrap()
    }

    /// The trial's wall time, from the record.
    fn trial_seconds(&self, name: &str) -> f64 {
        self.record()["trials"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .and_then(|t| t["duration_s"].as_f64())
            .unwrap_or_else(|| panic!("{name} not in the record"))
    }

    fn assert_no_panic(&self) {
        assert!(
            !self.stderr.contains("panicked") && self.code != Some(101),
            "a panic:\n{}\n{}",
            self.stdout,
            self.stderr
        );
    }
}

/// Runs `servegate run` on `suite` (its `PORT` replaced) in a directory of
/// its own, watching its peak memory.
fn run(tag: &str, suite: &str, port: u16, env: &[(&str, &str)]) -> Outcome {
    run_with_files(tag, suite, &[], port, env)
}

/// As [`run`], with `files` (name, contents) beside the suite.
fn run_with_files(
    tag: &str,
    suite: &str,
    files: &[(&str, &str)],
    port: u16,
    env: &[(&str, &str)],
) -> Outcome {
    let dir = std::env::temp_dir().join(format!("servegate-hostile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, contents) in files {
        std::fs::write(dir.join(name), contents).unwrap();
    }
    let file = dir.join("suite.yaml");
    std::fs::write(&file, suite.replace("PORT", &port.to_string())).unwrap();
    let out_dir = dir.join("out");
    let started = Instant::now();
    let mut child = command(&[], &[])
        .arg("run")
        .arg(&file)
        .arg("--out-dir")
        .arg(&out_dir)
        .current_dir(&dir)
        .env_remove("CI")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_path)
            && let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "servegate ran for two minutes against `{tag}`"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let o = Outcome {
        code: status.code(),
        stdout: reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
        took: started.elapsed(),
        peak_kib,
        out_dir,
    };
    // What every case holds: no panic, bounded memory, a complete record.
    o.assert_no_panic();
    assert!(
        o.peak_kib < PEAK_KIB,
        "`{tag}`: servegate peaked at {} MiB",
        o.peak_kib / 1024
    );
    assert_eq!(o.record()["complete"], true, "`{tag}`: {}", o.stdout);
    o
}

/// The peak memory bound of a run against a hostile server.
const PEAK_KIB: u64 = 160 * 1024;

const PROBE: &str = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: TIMEOUTS\ncorrectness:\n  - name: probe\n    prompt: \"Hi.\"\n    expect: [{min_chars: 1}]\n";

fn probe_suite(timeouts: &str) -> String {
    PROBE.replace("TIMEOUTS", timeouts)
}

/// Tokens forever, a millisecond apart: the socket never idles, so only a
/// wall-clock total deadline can end the request — within 10% of it.
#[test]
fn an_endless_stream_is_cut_at_the_total_deadline() {
    let port = serve(Arc::new(|req, conn| {
        if discovery(req, conn) {
            return;
        }
        stream_head(conn);
        while conn
            .write_all(b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n")
            .is_ok()
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }));
    let o = run(
        "endless",
        &probe_suite("{ connect: 2s, first_token: 5s, idle: 1s, total: 2s }"),
        port,
        &[],
    );
    o.assert_no_panic();
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    assert_has(
        &failure_of(&o.stdout, "hostile::correctness::probe"),
        &["request exceeded the total deadline (2.000s)"],
    );
    let took = o.trial_seconds("hostile::correctness::probe");
    eprintln!(
        "endless stream, total 2s: the trial took {took:.2}s, servegate peaked at {} MiB",
        o.peak_kib / 1024
    );
    assert!(took < 2.0 * 1.1 + 0.2, "the trial took {took:.2}s");
    assert!(o.peak_kib < PEAK_KIB, "peak {} MiB", o.peak_kib / 1024);
}

/// Tokens forever as fast as the socket takes them: the answer cap ends
/// the request long before the total deadline, memory bounded.
#[test]
fn an_answer_past_its_cap_fails_as_oversize() {
    let port = serve(Arc::new(|req, conn| {
        if discovery(req, conn) {
            return;
        }
        stream_head(conn);
        let chunk = "data: {\"choices\":[{\"delta\":{\"content\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}]}\n\n".repeat(64);
        while conn.write_all(chunk.as_bytes()).is_ok() {}
    }));
    let o = run(
        "oversize",
        &probe_suite("{ connect: 2s, first_token: 5s, idle: 5s, total: 60s }"),
        port,
        &[],
    );
    o.assert_no_panic();
    assert_has(
        &failure_of(&o.stdout, "hostile::correctness::probe"),
        &["error: request failed: answer exceeded 8 MiB after "],
    );
    eprintln!(
        "endless fast stream: failed after {:.2}s, servegate peaked at {} MiB (cap 8 MiB)",
        o.took.as_secs_f64(),
        o.peak_kib / 1024
    );
    assert!(o.took < Duration::from_secs(30), "{:?}", o.took);
    assert!(o.peak_kib < PEAK_KIB, "peak {} MiB", o.peak_kib / 1024);
    assert_eq!(o.record()["complete"], true);
}

/// A dataset of 40 questions, each answered with 7 MiB (under the 8 MiB
/// cap): each answer is graded as it comes and dropped, an excerpt kept,
/// so memory holds the answers in flight, not the dataset's (it peaked at
/// 338 MiB when every answer was kept until the last came).
#[test]
fn dataset_answers_are_not_kept_whole() {
    let port = serve(Arc::new(|req, conn| {
        if discovery(req, conn) {
            return;
        }
        stream_head(conn);
        let chunk = format!(
            "data: {{\"choices\":[{{\"delta\":{{\"content\":\"{}\"}}}}]}}\n\n",
            "x".repeat(64 * 1024)
        );
        for _ in 0..112 {
            if conn.write_all(chunk.as_bytes()).is_err() {
                return;
            }
        }
        let _ = conn.write_all(
            b"data: {\"choices\":[{\"delta\":{\"content\":\" 42\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
        );
    }));
    let items = (0..40).fold(String::new(), |mut items, i| {
        let _ = writeln!(
            items,
            "{{\"question\": \"What is {i} + 42 - {i}?\", \"answer\": \"42\"}}"
        );
        items
    });
    let suite = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: { connect: 2s, first_token: 10s, idle: 10s, total: 60s }\ncorrectness:\n  - name: big_answers\n    dataset: { file: items.jsonl, concurrency: 4 }\n    thresholds: { accuracy: \">= 0.9\" }\n";
    let o = run_with_files("dataset", suite, &[("items.jsonl", &items)], port, &[]);
    eprintln!(
        "40 answers of 7 MiB, 4 at a time: servegate peaked at {} MiB",
        o.peak_kib / 1024
    );
    assert_eq!(
        verdict(&o.stdout, "hostile::correctness::big_answers"),
        "ok",
        "{}",
        o.stdout
    );
    let items = &o.record()["suites"][0]["datasets"][0]["items"];
    assert_eq!(items.as_array().map(Vec::len), Some(40));
    assert!(
        items[0]["answer"]
            .as_str()
            .is_some_and(|a| a.chars().count() <= 300),
        "{}",
        items[0]["answer"]
    );
    assert!(o.peak_kib < PEAK_KIB, "peak {} MiB", o.peak_kib / 1024);
}

/// A 3 GB `/v1/models`: read up to the document cap, never whole.
#[test]
fn a_huge_document_is_read_up_to_its_cap() {
    let port = serve(Arc::new(|req, conn| {
        if req.path == "/v1/models" {
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 3221225472\r\n\r\n"
            );
            let zeros = vec![b' '; 1 << 20];
            while conn.write_all(&zeros).is_ok() {}
        } else {
            json(conn, 404, "{}");
        }
    }));
    let o = run(
        "huge-doc",
        &probe_suite("{ connect: 2s, first_token: 30s, idle: 5s, total: 60s }"),
        port,
        &[],
    );
    o.assert_no_panic();
    assert_has(
        &failure_of(&o.stdout, "hostile::correctness::probe"),
        &[
            "failed discovery: /v1/models: the response body exceeded 4 MiB (target.limits.document)",
        ],
    );
    eprintln!(
        "3 GB /v1/models: failed after {:.2}s, servegate peaked at {} MiB (cap 4 MiB)",
        o.took.as_secs_f64(),
        o.peak_kib / 1024
    );
    assert!(o.took < Duration::from_secs(30), "{:?}", o.took);
    assert!(o.peak_kib < PEAK_KIB, "peak {} MiB", o.peak_kib / 1024);
    assert_eq!(o.record()["complete"], true);
}

/// `completion_tokens` near 2^62: a protocol error naming the field, in the
/// probe and in the gate — never a panic (this is a debug build) and never
/// a wrapped figure that passes.
#[test]
fn impossible_token_counts_fail_as_protocol_errors() {
    let port = serve(Arc::new(|req, conn| {
        if discovery(req, conn) {
            return;
        }
        stream_head(conn);
        let _ = conn.write_all(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"hello\"}}]}\n\n\
              data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n\
              data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4611686018427387904}}\n\n\
              data: [DONE]\n\n",
        );
    }));
    let suite = format!(
        "{}performance:\n  - name: gate\n    load: {{ concurrency: 1, requests: 2, input_tokens: 8, output_tokens: 8 }}\n    thresholds: {{ output_tok_s: \">= 1\" }}\n",
        probe_suite("{ connect: 2s, first_token: 5s, idle: 5s, total: 10s }")
    );
    let o = run("overflow", &suite, port, &[]);
    o.assert_no_panic();
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    assert_has(
        &failure_of(&o.stdout, "hostile::correctness::probe"),
        &["malformed response: usage.completion_tokens = 4611686018427387904 is implausible"],
    );
    let gate = failure_of(&o.stdout, "hostile::performance::gate");
    assert_has(&gate, &["gated: correctness probe probe failed"]);
    // The gate alone: every request fails as a protocol error; nothing passes.
    let gate_only = suite[suite.find("performance:").unwrap()..].to_owned();
    let o = run(
        "overflow-gate",
        &format!("suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n{gate_only}"),
        port,
        &[],
    );
    o.assert_no_panic();
    assert_has(
        &failure_of(&o.stdout, "hostile::performance::gate"),
        &[
            "could not measure: all 2 requests failed",
            "protocol ×2",
            "usage.completion_tokens = 4611686018427387904 is implausible",
        ],
    );
}

/// Newlines in `finish_reason`, an error message and the served model id
/// would print lines GitHub executes and a fake libtest summary: every
/// such line is escaped or indented.
#[test]
fn server_text_cannot_forge_log_lines() {
    let forged =
        r"stop\n::warning title=pwned::forged\ntest result: ok. 99 passed; 0 failed; 0 ignored";
    let port = serve(Arc::new(move |req, conn| match req.path.as_str() {
        "/v1/models" => json(
            conn,
            200,
            r#"{"data":[{"id":"m\n::error::model-forged\u001b[2J"}]}"#,
        ),
        "/v1/chat/completions" => {
            stream_head(conn);
            let _ = write!(
                conn,
                "data: {{\"choices\":[{{\"delta\":{{\"content\":\"hello\"}}}}]}}\n\ndata: {{\"choices\":[{{\"delta\":{{}},\"finish_reason\":\"{forged}\"}}]}}\n\ndata: [DONE]\n\n"
            );
        }
        _ => json(
            conn,
            500,
            r#"{"error":{"message":"boom\n::error title=x::error-forged"}}"#,
        ),
    }));
    let suite = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: { connect: 2s, first_token: 5s, idle: 5s, total: 10s }\ncorrectness:\n  - name: probe\n    prompt: \"Hi.\"\n    expect: [{finish_reason: stop}]\n  - name: completions\n    prompt: \"Hi.\"\n    messages: null\n";
    // A gate too: gated, it quotes the probe's failure.
    let suite = suite.replace(
        "    messages: null\n",
        "    expect: [{min_chars: 1}]\n    max_tokens: 2\nperformance:\n  - name: gate\n    load: { concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 2 }\n    thresholds: { errors: \"== 0\" }\n",
    );
    let o = run("forge", &suite, port, &[("GITHUB_ACTIONS", "true")]);
    o.assert_no_panic();
    // Annotations go to stderr, libtest's lines to stdout: neither is forged.
    for line in o.stdout.lines().chain(o.stderr.lines()) {
        for bad in [
            "::warning",
            "::error::model-forged",
            "::error title=x",
            "test result: ok. 99",
        ] {
            assert!(
                !line.starts_with(bad),
                "a forged line `{line}` in:\n{}\n{}",
                o.stdout,
                o.stderr
            );
        }
        assert!(!line.contains('\u{1b}'), "an escape sequence in `{line}`");
    }
    assert_has(
        &failure_of(&o.stdout, "hostile::correctness::probe"),
        &[r"finish_reason stop\n::warning title=pwned::forged\ntest result: ok. 99 passed"],
    );
    assert_has(
        &failure_of(&o.stdout, "hostile::performance::gate"),
        &[
            "  hostile::correctness::probe failed with:",
            r#"found:    finish_reason is "stop\n::warning title=pwned::forged"#,
        ],
    );
}

/// A server that echoes the API key (in an answer, in a 401 body, each
/// also where servegate cuts such text to show it; encoded: base64, hex,
/// percent-encoded, reversed) and reports it in its server info, its
/// version and the model id it serves, reached through a URL with a
/// password: neither secret, nor any part of one, is in anything
/// servegate prints or writes — the run history included, and what
/// `history list` and `history report` show of it where the key is not
/// in the environment.
#[test]
fn echoed_secrets_reach_no_sink() {
    // Characters each format escapes its own way (XML, HTML, annotations'
    // `%`, `:`, `,`): the secret must go before any of them is applied.
    let key = format!("sk-canary&<%,:'-{}-echo", std::process::id());
    let tail = format!("-{}-echo", std::process::id());
    let password = format!("pw-canary-{}-url", std::process::id());
    let port = serve(Arc::new(|req, conn| match req.path.as_str() {
        "/v1/models" => {
            let key = req.authorization.trim_start_matches("Bearer ");
            json(
                conn,
                200,
                &format!(r#"{{"data":[{{"id":"hostile-{key}"}}]}}"#),
            );
        }
        "/get_server_info" => {
            let key = req.authorization.trim_start_matches("Bearer ");
            json(
                conn,
                200,
                &format!(
                    r#"{{"version":"0.5.0-{key}","api_key":"{key}","admin_api_key":"outcome","tp_size":1}}"#
                ),
            );
        }
        // The key where an excerpt is cut, all of it but its last
        // character before the cut: at character 500 of an error body that
        // is not JSON and 1,200 of an answer.
        "/v1/chat/completions" if req.body.contains("Cut refusal") => {
            let key = req.authorization.trim_start_matches("Bearer ");
            let body = format!("{} bad key Bearer {key}", "x".repeat(485 - key.len()));
            let _ = write!(
                conn,
                "HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        "/v1/chat/completions" if req.body.contains("Cut answer") => {
            let key = req.authorization.trim_start_matches("Bearer ").to_owned();
            stream_head(conn);
            let _ = write!(
                conn,
                "data: {{\"choices\":[{{\"delta\":{{\"content\":\"{} {key}\"}}}}]}}\n\ndata: {{\"choices\":[{{\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n",
                "y".repeat(1200 - 1 - key.len())
            );
        }
        "/v1/chat/completions" if req.body.contains("Refuse") => json(
            conn,
            401,
            &format!(
                r#"{{"error":{{"message":"bad key {}"}}}}"#,
                req.authorization
            ),
        ),
        "/v1/chat/completions" => {
            let key = req.authorization.trim_start_matches("Bearer ").to_owned();
            stream_head(conn);
            let _ = write!(
                conn,
                "data: {{\"choices\":[{{\"delta\":{{\"content\":\"your key is {key}; {}\"}}}}]}}\n\ndata: {{\"choices\":[{{\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n",
                encoded(&key).join(" ")
            );
        }
        _ => json(
            conn,
            401,
            &format!(
                r#"{{"error":{{"message":"bad key {}"}}}}"#,
                req.authorization
            ),
        ),
    }));
    let dir =
        std::env::temp_dir().join(format!("servegate-hostile-secrets-{}", std::process::id()));
    let summary = dir.join("summary.md");
    let snapshots = dir.join("snapshots");
    let _ = std::fs::create_dir_all(&dir);
    let suite = format!(
        "suite: hostile\ntarget:\n  base_url: http://bob:{password}@127.0.0.1:PORT\n  api_key_env: SERVEGATE_HOSTILE_KEY\n  timeouts: {{ connect: 2s, first_token: 5s, idle: 5s, total: 10s }}\nexpect_server:\n  server_info: {{ tp_size: 1 }}\ncorrectness:\n  - name: echo\n    prompt: \"Hi.\"\n    snapshot: true\n    expect: [{{contains: \"nothing like this\"}}]\n  - name: refused\n    prompt: \"Refuse me.\"\n    expect: [{{min_chars: 1}}]\n  - name: cut-refusal\n    prompt: \"Cut refusal.\"\n    expect: [{{min_chars: 1}}]\n  - name: cut-answer\n    prompt: \"Cut answer.\"\n    expect: [{{contains: \"nothing like this\"}}]\nperformance:\n  - name: gate\n    load: {{ concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 8 }}\n    thresholds: {{ errors: \"== 0\" }}\n"
    );
    let o = run(
        "secrets",
        &suite,
        port,
        &[
            ("SERVEGATE_HOSTILE_KEY", key.as_str()),
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_STEP_SUMMARY", summary.to_str().unwrap()),
            ("SERVEGATE_SNAPSHOTS", snapshots.to_str().unwrap()),
            ("INSTA_UPDATE", "always"),
        ],
    );
    o.assert_no_panic();
    // The gate above is gated by the probes: a suite of the gate alone
    // measures, and its figures go into the run history.
    let gated = run(
        "secrets-history",
        &format!(
            "suite: hostile\ntarget:\n  base_url: http://bob:{password}@127.0.0.1:PORT\n  api_key_env: SERVEGATE_HOSTILE_KEY\n  timeouts: {{ connect: 2s, first_token: 5s, idle: 5s, total: 10s }}\nperformance:\n  - name: gate\n    load: {{ concurrency: 1, requests: 1, input_tokens: 8, output_tokens: 8 }}\n    thresholds: {{ errors: \"== 0\" }}\n"
        ),
        port,
        &[("SERVEGATE_HOSTILE_KEY", key.as_str())],
    );
    assert_eq!(gated.code, Some(0), "{}\n{}", gated.stdout, gated.stderr);
    // The history, read where the key is not in the environment: only what
    // was stored can hide it.
    let page = dir.join("history.html");
    let read_back = history_read_back(&gated.out_dir, &page);
    let text = format!(
        "{}{}{}{}{read_back}",
        o.stdout, o.stderr, gated.stdout, gated.stderr
    );
    assert_has(
        &text,
        &[
            "your key is <redacted>; <redacted>",
            "HTTP 401: bad key Bearer <redacted>",
            "bob:<redacted>@127.0.0.1",
        ],
    );
    // The key's head, as a cut made before the scrub would show it.
    let head = format!("{}-ech", std::process::id());
    let hex_tail = hex(&tail);
    let reversed_tail: String = tail.chars().rev().collect();
    let mut files = vec![summary.clone(), page.clone()];
    collect(&o.out_dir, &mut files);
    collect(&gated.out_dir, &mut files);
    collect(&snapshots, &mut files);
    assert!(files.len() >= 7, "{files:?}");
    assert!(
        files.iter().any(|f| f.ends_with("history.sqlite")),
        "the run wrote no history: {files:?}"
    );
    for secret in [&tail, &password, &head, &hex_tail, &reversed_tail] {
        assert_in_no_byte(secret, &text, &files);
    }
    // Each encoded echo's middle, which only the key decides.
    for form in encoded(&key) {
        let middle = form.len() / 2;
        assert_in_no_byte(&form[middle - 6..middle + 6], &text, &files);
    }
    let record = std::fs::read_to_string(o.out_dir.join("latest/report.json")).unwrap();
    assert_has(
        &record,
        &[
            "\"api_key\": \"<redacted>\"",
            "\"admin_api_key\": \"<redacted>\"",
        ],
    );
    // A short value a server calls secret hides its field, but does not
    // blank that word everywhere: the record and its reports stay whole.
    assert!(record.contains("\"outcome\": \"failed\""), "{record}");
    let junit = std::fs::read_to_string(o.out_dir.join("latest/junit.xml")).unwrap();
    assert!(
        junit.contains("<testcase") && !junit.contains("<<redacted>"),
        "{junit}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What `history list` (table and JSON) and `history report` print of the
/// history in `out`, run without the key in the environment; the page
/// goes to `page`.
fn history_read_back(out: &Path, page: &Path) -> String {
    let out = out.to_str().unwrap();
    let page = page.to_str().unwrap();
    let mut read_back = String::new();
    for args in [
        vec!["list", "--all"],
        vec!["list", "--all", "--format", "json"],
        vec!["report", "--all", "--output", page],
    ] {
        let h = command(&["history", "--out-dir", out], &[])
            .args(&args)
            .output()
            .unwrap();
        assert!(
            h.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&h.stderr)
        );
        read_back.push_str(&String::from_utf8_lossy(&h.stdout));
        read_back.push_str(&String::from_utf8_lossy(&h.stderr));
    }
    assert!(read_back.contains("hostile-<redacted>"), "{read_back}");
    read_back
}

/// `secret` is in no byte of `text`, of the files, nor of their names
/// (read as bytes: the history is a SQLite file).
fn assert_in_no_byte(secret: &str, text: &str, files: &[PathBuf]) {
    assert!(!text.contains(secret), "`{secret}` printed:\n{text}");
    for f in files {
        assert!(
            !f.to_string_lossy().contains(secret),
            "`{secret}` names a file: {}",
            f.display()
        );
        let body = std::fs::read(f).unwrap_or_default();
        assert!(
            !body.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "`{secret}` in {}",
            f.display()
        );
    }
}

/// `text` in lower-case hex.
fn hex(text: &str) -> String {
    text.bytes().fold(String::new(), |mut hex, b| {
        use std::fmt::Write as _;
        let _ = write!(hex, "{b:02x}");
        hex
    })
}

/// The forms a server echoes the key in besides its own: base64 of it
/// and of `Bearer <key>`, hex, percent-encoded, reversed.
fn encoded(key: &str) -> Vec<String> {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let percent: String = key
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    vec![
        b64(key),
        b64(&format!("Bearer {key}")),
        hex(key),
        percent,
        key.chars().rev().collect(),
    ]
}

/// Every file under `dir`.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// A server that sends the first token of every answer and then nothing:
/// the gate stops after three stalls in a row, not after 50 idle deadlines.
#[test]
fn a_stalled_server_stops_the_gate_early() {
    let port = serve(Arc::new(|req, conn| {
        if discovery(req, conn) {
            return;
        }
        stream_head(conn);
        let _ = conn.write_all(b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n");
        // Hold the connection open until the client gives up.
        let mut buf = [0u8; 1];
        let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
        let _ = conn.read(&mut buf);
    }));
    let suite = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: { connect: 2s, first_token: 5s, idle: 300ms, total: 60s }\nperformance:\n  - name: gate\n    load: { concurrency: 1, requests: 50, input_tokens: 8, output_tokens: 8 }\n    thresholds: { errors: \"== 0\" }\n";
    let o = run("stalled", suite, port, &[]);
    o.assert_no_panic();
    let gate = failure_of(&o.stdout, "hostile::performance::gate");
    assert_has(
        &gate,
        &[
            "error: stopping early: 3 consecutive requests stalled past the idle deadline (300.00ms)",
            "--> ",
        ],
    );
    let took = o.trial_seconds("hostile::performance::gate");
    assert!(
        took < 3.0,
        "the gate took {took:.2}s (50 stalls would take 15s)"
    );
    let record = o.record();
    assert_eq!(record["complete"], true);
    assert_eq!(record["suites"][0]["gates"][0]["gate"], "gate");
}

/// A server that accepts the connection and never answers: named as not
/// answering, within the suite's first-token deadline, not 30 s later.
#[test]
fn a_server_that_never_answers_is_named_so_within_its_deadline() {
    let port = serve(Arc::new(|_req, conn| {
        let mut buf = [0u8; 1];
        let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
        let _ = conn.read(&mut buf);
    }));
    let o = run(
        "silent",
        &probe_suite("{ connect: 2s, first_token: 1s, idle: 1s, total: 60s }"),
        port,
        &[],
    );
    o.assert_no_panic();
    assert_eq!(o.code, Some(3), "{}", o.stdout);
    assert_has(
        &failure_of(&o.stdout, "hostile::correctness::probe"),
        &["is not answering: it accepted the connection but sent no answer to discovery in 1."],
    );
    assert!(o.took < Duration::from_secs(10), "{:?}", o.took);
}

/// `${A:-${A:-…}}` nested 60,000 deep (a 780 KB suite): an error at its
/// line, not a stack overflow.
#[test]
fn deeply_nested_interpolation_is_an_error_at_its_line() {
    let depth = 60_000;
    let url = format!(
        "{}sim{}",
        "${SERVEGATE_UNSET_A:-".repeat(depth),
        "}".repeat(depth)
    );
    let suite = format!(
        "suite: deep\ntarget:\n  base_url: \"{url}\"\ncorrectness:\n  - name: p\n    prompt: \"Hi.\"\n    expect: [{{min_chars: 1}}]\n"
    );
    assert!(suite.len() > 700_000);
    let o = run("deep", &suite, 0, &[("SERVEGATE_UNSET_A", "")]);
    o.assert_no_panic();
    assert_eq!(o.code, Some(2), "{}\n{}", o.stdout, o.stderr);
    assert_has(
        &failure_of(&o.stdout, "suite::load"),
        &[
            "error: in target.base_url: `${…:-…}` defaults nested more than 16 deep at byte ",
            "--> suite.yaml:3:13",
        ],
    );
}

/// Two files with one `suite:` name would share trial names, snapshots and
/// baselines: the second is an error naming both. A name of dots would
/// write outside `snapshots/`: an error too.
#[test]
fn suite_names_cannot_collide_or_escape() {
    let dir = std::env::temp_dir().join(format!("servegate-hostile-names-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let body = "target: { base_url: sim }\ncorrectness:\n  - name: p\n    prompt: \"Hi.\"\n    expect: [{min_chars: 1}]\n";
    std::fs::write(dir.join("a.yaml"), format!("suite: twin\n{body}")).unwrap();
    std::fs::write(dir.join("b.yaml"), format!("suite: twin\n{body}")).unwrap();
    std::fs::write(dir.join("c.yaml"), format!("suite: ..\n{body}")).unwrap();
    let out = command(&[], &[])
        .args(["run", "--out-dir"])
        .arg(dir.join("out"))
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert_has(
        &failure_of(&text, "twin::load"),
        &[
            "error: suite `twin` is defined twice: in ",
            "a.yaml and in ",
            "b.yaml",
        ],
    );
    assert_has(
        &failure_of(&text, "c::load"),
        &["error: invalid suite name `..`"],
    );
    assert!(text.contains("test twin::correctness::p ... ok"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A one-byte answer charged 60,000 tokens: a protocol error, not a figure.
#[test]
fn inflated_token_counts_fail_as_protocol_errors() {
    let port = serve(Arc::new(|req, conn| {
        if discovery(req, conn) {
            return;
        }
        stream_head(conn);
        let _ = conn.write_all(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":60000}}\n\ndata: [DONE]\n\n",
        );
    }));
    let o = run(
        "inflated",
        &probe_suite("{ connect: 2s, first_token: 5s, idle: 5s, total: 10s }"),
        port,
        &[],
    );
    assert_has(
        &failure_of(&o.stdout, "hostile::correctness::probe"),
        &["malformed response: usage.completion_tokens = 60000 is implausible"],
    );
}

/// A plain OpenAI-compatible stream with usage, then `[DONE]`: a server
/// that answers well, for the cases about what else it lacks.
fn good_stream(conn: &mut TcpStream) {
    stream_head(conn);
    let _ = conn.write_all(
        b"data: {\"choices\":[{\"delta\":{\"content\":\"one\"}}]}\n\n\
          data: {\"choices\":[{\"delta\":{\"content\":\" two\"}}]}\n\n\
          data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n\
          data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n\
          data: [DONE]\n\n",
    );
}

/// `token_accounting` on a server without `/metrics` (404), and on one
/// whose `/metrics` has none of the counters: the gate fails saying which,
/// not that no request succeeded.
#[test]
fn token_accounting_names_what_metrics_lacked() {
    let suite = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: { connect: 2s, first_token: 5s, idle: 5s, total: 10s }\nperformance:\n  - name: gate\n    load: { concurrency: 1, requests: 2, input_tokens: 8, output_tokens: 2 }\n    thresholds: { errors: \"== 0\" }\n    token_accounting: { tolerance: 1% }\n";
    let without = serve(Arc::new(|req, conn| {
        if !discovery(req, conn) {
            good_stream(conn);
        }
    }));
    let o = run("no-metrics", suite, without, &[]);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let gate = failure_of(&o.stdout, "hostile::performance::gate");
    assert_has(
        &gate,
        &[
            "error: threshold failed: token_drift_metrics <= 1.00%",
            "measured: token_drift_metrics = nothing",
            "          the server has no /metrics (GET /metrics answered HTTP 404): this figure needs its generation-token counter",
        ],
    );
    assert!(!gate.contains("no successful request"), "{gate}");
    assert!(!gate.contains("token_drift_chunks <="), "{gate}");
    let unrelated = serve(Arc::new(|req, conn| match req.path.as_str() {
        "/metrics" => {
            let body = "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n";
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        _ if discovery(req, conn) => {}
        _ => good_stream(conn),
    }));
    let o = run("unrelated-metrics", suite, unrelated, &[]);
    assert_has(
        &failure_of(&o.stdout, "hostile::performance::gate"),
        &[
            "/metrics lacked the counter this figure needs: it has none of sglang:generation_tokens_total, vllm:generation_tokens_total, llamacpp:generation_tokens_total, sglang:tokens_predicted_total, vllm:tokens_predicted_total, llamacpp:tokens_predicted_total",
        ],
    );
}

/// Two tokens, then the connection closes: with the body framed by the
/// connection's end and with a chunked body cut short. Either is a broken
/// connection, said with how many tokens came and when, not a malformed
/// response.
#[test]
fn a_stream_cut_short_says_after_how_many_tokens() {
    const TWO: &[u8] = b"data: {\"choices\":[{\"delta\":{\"content\":\"one\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\" two\"}}]}\n\n";
    let until_close = serve(Arc::new(|req, conn| {
        if !discovery(req, conn) {
            stream_head(conn);
            let _ = conn.write_all(TWO);
        }
    }));
    let chunked = serve(Arc::new(|req, conn| {
        if !discovery(req, conn) {
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
                TWO.len()
            );
            let _ = conn.write_all(TWO);
            let _ = conn.write_all(b"\r\n");
        }
    }));
    for (tag, port) in [("cut-close", until_close), ("cut-chunked", chunked)] {
        let o = run(
            tag,
            &probe_suite("{ connect: 2s, first_token: 5s, idle: 5s, total: 10s }"),
            port,
            &[],
        );
        assert_eq!(o.code, Some(1), "{}", o.stdout);
        let probe = failure_of(&o.stdout, "hostile::correctness::probe");
        assert_has(
            &probe,
            &[
                "error: request failed: connection broken: the server closed the connection after 2 tokens (",
                " after the request was sent, ",
                " after the last token), without `data: [DONE]`",
                "received before the failure: \"one two\"",
            ],
        );
        assert!(!probe.contains("malformed"), "{tag}: {probe}");
    }
}

/// A page or a compressed body under HTTP 200 (a proxy's login page, a
/// gzip middleware): the failure names the content type or encoding that
/// came and the event stream that was expected.
#[test]
fn a_page_or_a_compressed_body_names_what_came() {
    let page = serve(Arc::new(|req, conn| {
        if !discovery(req, conn) {
            let body = "<html><body>Please log in</body></html>\n";
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    }));
    let gzip = serve(Arc::new(|req, conn| {
        if !discovery(req, conn) {
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\nContent-Length: 20\r\nConnection: close\r\n\r\n\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x4b\x49\x2c\x49\xb4\x52\x00\x00\x00\x00",
            );
        }
    }));
    let suite = probe_suite("{ connect: 2s, first_token: 5s, idle: 5s, total: 10s }");
    let o = run("html", &suite, page, &[]);
    let probe = failure_of(&o.stdout, "hostile::correctness::probe");
    assert_has(
        &probe,
        &[
            "error: request failed: malformed response: the server answered HTTP 200 with Content-Type `text/html; charset=utf-8`, not an event stream (text/event-stream); the body began: \"<html><body>Please log in</body></html>\\n\"",
        ],
    );
    assert!(!probe.contains("stream ended without"), "{probe}");
    let o = run("gzip", &suite, gzip, &[]);
    assert_has(
        &failure_of(&o.stdout, "hostile::correctness::probe"),
        &[
            "error: request failed: malformed response: the server answered HTTP 200 with Content-Encoding `gzip`: servegate asks for and reads an uncompressed event stream (text/event-stream)",
        ],
    );
}

/// A gate of two requests asking for exactly 64 tokens (`ignore_eos`), on
/// `api`, that must produce at least one output token per second.
fn exact_gate(api: &str) -> String {
    format!(
        "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  api: {api}\n  timeouts: {{ connect: 2s, first_token: 5s, idle: 5s, total: 10s }}\nperformance:\n  - name: gate\n    load: {{ concurrency: 1, requests: 2, input_tokens: 8, output_tokens: 64, ignore_eos: true }}\n    thresholds: {{ output_tok_s: \">= 1\" }}\n"
    )
}

/// SGLang's `/generate` chunk: cumulative `text`, `n` tokens so far, and
/// the finish reason (JSON, `null` until the last chunk).
fn generate_chunk(text: &str, n: u64, finish: &str) -> String {
    format!(
        "data: {{\"text\":\"{text}\",\"meta_info\":{{\"id\":\"r\",\"prompt_tokens\":8,\"completion_tokens\":{n},\"finish_reason\":{finish}}}}}\n\n"
    )
}

/// Streams that end without completing pass no gate: an OpenAI chat
/// stream aborted after 3 of 64 tokens (SGLang's `finish_reason: "abort"`,
/// then `[DONE]`), a `/generate` stream cut after 3 chunks (no finish
/// reason, no `[DONE]`), a `/generate` abort with SGLang's message, and a
/// server that stops after one token when 64 were asked with `ignore_eos`.
/// Each fails every request under a class of its own, with the server's
/// words; none is a measured figure.
#[test]
fn aborted_cut_and_short_streams_fail_their_gates() {
    let chat_abort = serve(Arc::new(|req, conn| {
        if !discovery(req, conn) {
            stream_head(conn);
            let _ = conn.write_all(
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n\
                  data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\n\
                  data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c\"}}]}\n\n\
                  data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"abort\"}]}\n\n\
                  data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":3}}\n\n\
                  data: [DONE]\n\n",
            );
        }
    }));
    let generate = |end: &'static str| {
        serve(Arc::new(move |req, conn| {
            if req.path != "/generate" {
                discovery(req, conn);
                return;
            }
            stream_head(conn);
            for (n, text) in [(1, "a"), (2, "ab")] {
                let _ = conn.write_all(generate_chunk(text, n, "null").as_bytes());
            }
            let _ = conn.write_all(end.as_bytes());
        }))
    };
    let cut = generate(
        "data: {\"text\":\"abc\",\"meta_info\":{\"completion_tokens\":3,\"finish_reason\":null}}\n\n",
    );
    let aborted = generate(
        "data: {\"text\":\"abc\",\"meta_info\":{\"completion_tokens\":3,\"finish_reason\":{\"type\":\"abort\",\"message\":\"Abort before prefill\",\"status_code\":null}}}\n\ndata: [DONE]\n\n",
    );
    let short = serve(Arc::new(|req, conn| {
        if !discovery(req, conn) {
            stream_head(conn);
            let _ = conn.write_all(
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n\
                  data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":1}}\n\n\
                  data: [DONE]\n\n",
            );
        }
    }));
    let cases: [(&str, u16, &str, &[&str]); 4] = [
        (
            "chat-abort",
            chat_abort,
            "openai-chat",
            &[
                "aborted ×2",
                "the server aborted the request: finish_reason `abort` after 3 tokens (",
            ],
        ),
        (
            "generate-cut",
            cut,
            "sglang-generate",
            &[
                "transport ×2",
                "the server closed the connection after 3 tokens (",
                "without `data: [DONE]`",
            ],
        ),
        (
            "generate-abort",
            aborted,
            "sglang-generate",
            &[
                "aborted ×2",
                "finish_reason `abort` (\"Abort before prefill\") after 3 tokens",
            ],
        ),
        (
            "short",
            short,
            "openai-chat",
            &[
                "short ×2",
                "short answer: 1 of the 64 tokens asked with ignore_eos (the server stopped early or ignores ignore_eos); finish_reason `stop`, counted by server usage",
            ],
        ),
    ];
    for (tag, port, api, needles) in cases {
        let o = run(tag, &exact_gate(api), port, &[]);
        assert_eq!(o.code, Some(1), "{tag}: {}", o.stdout);
        let gate = failure_of(&o.stdout, "hostile::performance::gate");
        assert_has(&gate, &["could not measure: all 2 requests failed"]);
        assert_has(&gate, needles);
    }
}

/// A chat server that streams `chunks` (text, its true tokens; a chunk
/// that starts with `{` is the delta itself), counting `times` each
/// chunk's tokens in the continuous usage and in its `/metrics`, then an
/// unprinted end-of-sequence token; it asserts that a request with
/// `ignore_eos` asks `skip_special_tokens: false`.
fn counting_server(chunks: &'static [(&'static str, u64)], times: u64) -> u16 {
    counting_server_by(chunks, move |_| times)
}

/// As [`counting_server`], multiplying the count of its `n`-th answer
/// (0 first) by `times(n)`.
fn counting_server_by(
    chunks: &'static [(&'static str, u64)],
    times: impl Fn(u64) -> u64 + Send + Sync + 'static,
) -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    let generated = Arc::new(AtomicU64::new(0));
    let answered = AtomicU64::new(0);
    serve(Arc::new(move |req, conn| {
        if req.path == "/metrics" {
            let body = format!(
                "# TYPE sglang:generation_tokens_total counter\nsglang:generation_tokens_total {}\n",
                generated.load(Ordering::SeqCst)
            );
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            return;
        }
        if discovery(req, conn) {
            return;
        }
        assert!(
            !req.body.contains("ignore_eos") || req.body.contains("\"skip_special_tokens\":false"),
            "{}",
            req.body
        );
        stream_head(conn);
        let times = times(answered.fetch_add(1, Ordering::SeqCst));
        let mut n = 0;
        for (text, tokens) in chunks {
            n += tokens * times;
            let delta = if text.starts_with('{') {
                (*text).to_owned()
            } else {
                format!("{{\"content\":\"{text}\"}}")
            };
            let _ = write!(
                conn,
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{delta}}}],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":{n}}}}}\n\n"
            );
        }
        n += 1;
        generated.fetch_add(n, Ordering::SeqCst);
        let _ = write!(
            conn,
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"length\"}}],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":{n}}}}}\n\ndata: [DONE]\n\n"
        );
    }))
}

/// A throughput gate of two requests with `token_accounting`, its load's
/// other keys `load`.
fn counted_gate(load: &str) -> String {
    format!(
        "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: {{ connect: 2s, first_token: 5s, idle: 5s, total: 10s }}\nperformance:\n  - name: gate\n    load: {{ concurrency: 1, requests: 2, input_tokens: 8, {load}, client_limited: warn }}\n    thresholds: {{ output_tok_s: \">= 1\", errors: \"== 0\" }}\n    token_accounting: {{ tolerance: 50% }}\n"
    )
}

/// Token counts are evidence, not claims: a server that counts 20 tokens
/// for each one-byte chunk it sends (under the bytes its JSON took), in
/// the chunks' continuous usage and in a `/metrics` counter that agrees,
/// fails every request of a throughput gate (it passed with `errors 0` and
/// 20× the true rate, and its `token_drift_chunks` read 0%: the drift came
/// from the usage deltas); the same stream counted honestly (a multi-byte
/// character of three tokens, an unprinted end-of-sequence token) passes,
/// with the drift taken from the events that arrived. A gate's
/// `ignore_eos` request asks `skip_special_tokens: false`, so repeated end
/// tokens print.
#[test]
fn token_counts_the_stream_does_not_bear_out_fail_as_protocol_errors() {
    // The emoji is 4 bytes: honestly up to 4 tokens.
    const CHUNKS: &[(&str, u64)] = &[("a", 1), ("b", 1), ("\u{1F642}", 3)];
    forged_counts_fail(
        "forged-count",
        &counted_gate("output_tokens: 512"),
        counting_server(CHUNKS, 20),
        &[
            "could not measure: all 2 requests failed",
            "protocol ×2",
            "the server counts 101 completion tokens, but the stream carried 6 bytes of text in 4 events: at most 14 tokens can have been sent",
        ],
    );
    honest_counts_pass(
        "honest-count",
        &counted_gate("output_tokens: 6, ignore_eos: true"),
        counting_server(CHUNKS, 1),
    );
}

/// A tool call's framing is counted but not streamed: SGLang's `qwen`
/// parser sends `get_weather` and `{"city": "Paris"}` of the model's
/// `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`, counting 43
/// tokens for 28 bytes in 4 events (SGLang 0.5.23, `SmolLM2`). That count
/// passes where the request offered tools, and fails where it did not. A
/// server that makes eight one-letter calls of `{}` and counts 35 tokens
/// for each fails: framing is granted to four calls of an answer, not
/// bought with calls; nor with an empty delta at index 3 that names no
/// function.
#[test]
fn a_tool_calls_framing_is_counted_and_cannot_be_bought_with_calls() {
    macro_rules! call {
        ($i:literal) => {
            (
                concat!(
                    r#"{"tool_calls":[{"index":"#,
                    $i,
                    r#","id":"c"#,
                    $i,
                    r#"","type":"function","function":{"name":"f","arguments":"{}"}}]}"#
                ),
                35,
            )
        };
    }
    const MANY: &[(&str, u64)] = &[
        call!(0),
        call!(1),
        call!(2),
        call!(3),
        call!(4),
        call!(5),
        call!(6),
        call!(7),
    ];
    const SGLANG: &[(&str, u64)] = &[
        (
            r#"{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}"#,
            14,
        ),
        (
            r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \""}}]}"#,
            20,
        ),
        (
            r#"{"tool_calls":[{"index":0,"function":{"arguments":"Paris"}}]}"#,
            1,
        ),
        (
            r#"{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]}"#,
            7,
        ),
    ];
    const EMPTY_CALL: &[(&str, u64)] = &[("a", 1), (r#"{"tool_calls":[{"index":3}]}"#, 127)];
    // The gate offers a tool, as a tool-calling gate does.
    let offered = |load: &str| {
        counted_gate(load).replace(
            "performance:",
            "defaults:\n  tools: [{ name: get_weather }]\nperformance:",
        )
    };
    honest_counts_pass(
        "framed-call",
        &offered("output_tokens: 64"),
        counting_server(SGLANG, 1),
    );
    forged_counts_fail(
        "framed-call-no-tools",
        &counted_gate("output_tokens: 64"),
        counting_server(SGLANG, 1),
        &[
            "the server counts 43 completion tokens, but the stream carried 28 bytes of text in 5 events: at most 37 tokens can have been sent",
        ],
    );
    forged_counts_fail(
        "bought-with-calls",
        &offered("output_tokens: 512"),
        counting_server(MANY, 1),
        &[
            "the server counts 281 completion tokens, but the stream carried 24 bytes of text in 9 events and 8 tool call(s): at most 165 tokens can have been sent",
            "32 per tool call for its framing (at most 4 calls)",
        ],
    );
    forged_counts_fail(
        "bought-with-an-empty-call",
        &offered("output_tokens: 128, ignore_eos: true"),
        counting_server(EMPTY_CALL, 1),
        &[
            "the server counts 129 completion tokens, but the stream carried 1 bytes of text in 3 events: at most 8 tokens can have been sent",
        ],
    );
}

/// A counted gate's suite ([`counted_gate`]) against the server on
/// `port` passes.
fn honest_counts_pass(name: &str, suite: &str, port: u16) {
    let o = run(name, suite, port, &[]);
    assert_eq!(o.code, Some(0), "{}", o.stdout);
}

/// A counted gate's suite ([`counted_gate`]) against the server on
/// `port` fails, its failure holding every needle.
/// A `/generate` stream of 16 chunks of four bytes each, whose
/// `meta_info.completion_tokens` rises by `per_chunk` a chunk while its
/// `output_ids` lists one id a chunk: the count is within what the bytes
/// bear out (four a chunk), so only the ids can witness it. A gate with
/// `ignore_eos` fails the forged
/// count (4 a chunk) and passes the honest one (1), with or without ids in
/// its last chunk; no tokenizer is named, so only the ids witness it.
#[test]
fn a_count_its_own_token_ids_do_not_bear_out_fails() {
    let generate = |per_chunk: u64, ids_at_end: bool| {
        serve(Arc::new(move |req, conn| {
            if req.path != "/generate" {
                discovery(req, conn);
                return;
            }
            stream_head(conn);
            for k in 1..=16u64 {
                let ids: Vec<u64> = (0..k).map(|i| 100 + i).collect();
                let finish = if k == 16 {
                    "{\"type\":\"length\",\"length\":16}"
                } else {
                    "null"
                };
                let ids = if k < 16 || ids_at_end {
                    format!("\"output_ids\":{ids:?},")
                } else {
                    String::new()
                };
                let _ = write!(
                    conn,
                    "data: {{\"text\":\"{}\",{ids}\"meta_info\":{{\"id\":\"r\",\"prompt_tokens\":8,\"completion_tokens\":{},\"finish_reason\":{finish}}}}}\n\n",
                    "abcd".repeat(usize::try_from(k).unwrap()),
                    k * per_chunk
                );
            }
            let _ = conn.write_all(b"data: [DONE]\n\n");
        }))
    };
    let gate = |tokens: u64| {
        exact_gate("sglang-generate")
            .replace("output_tokens: 64", &format!("output_tokens: {tokens}"))
    };
    forged_counts_fail(
        "generate-forged-ids",
        &gate(64),
        generate(4, true),
        &[
            "the server counts 64 completion tokens, but lists 16 token ids (`output_ids`): its two accounts of one request disagree",
        ],
    );
    let o = run("generate-honest-ids", &gate(16), generate(1, true), &[]);
    assert_eq!(o.code, Some(0), "{}", o.stdout);
    // A last chunk that lists no ids leaves its count unwitnessed, not
    // contradicted (the ids before it fall short of it by one).
    let o = run(
        "generate-last-without-ids",
        &gate(16),
        generate(1, false),
        &[],
    );
    assert_eq!(o.code, Some(0), "{}", o.stdout);
}

/// The same forgery on the OpenAI chat API of a server that says it is
/// vLLM (`/version`, and `owned_by: vllm` in `/v1/models`): servegate asks it to list each chunk's token ids
/// (`return_token_ids`), and a count of 4 a chunk against one id a chunk
/// fails every request, naming the field; counted honestly it passes. Its
/// first chunk counts 0 and lists no ids, as vLLM 0.32's role chunk does,
/// and its last repeats the count in a usage chunk without a choice: a
/// count that did not rise needs no ids, and both leave it witnessed. A server that does not say what it is
/// is not sent the field (a strict OpenAI-compatible server refuses
/// fields it does not know: this one answers 400 to a request whose
/// `return_token_ids` is not what it expects).
#[test]
fn a_chat_count_its_token_ids_do_not_bear_out_fails() {
    let chat = |per_chunk: u64, says_vllm: bool| {
        serve(Arc::new(move |req, conn| {
            if says_vllm && req.path == "/version" {
                json(conn, 200, r#"{"version":"0.32.0"}"#);
                return;
            }
            if says_vllm && req.path == "/v1/models" {
                json(
                    conn,
                    200,
                    r#"{"data":[{"id":"hostile","owned_by":"vllm"}]}"#,
                );
                return;
            }
            if discovery(req, conn) {
                return;
            }
            if req.body.contains("return_token_ids") != says_vllm {
                json(
                    conn,
                    400,
                    r#"{"error":{"message":"return_token_ids: not what this server expected"}}"#,
                );
                return;
            }
            stream_head(conn);
            let _ = conn.write_all(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":0}}\n\n");
            for k in 1..=16u64 {
                let finish = if k == 16 { "\"length\"" } else { "null" };
                let _ = write!(
                    conn,
                    "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"abcd\"}},\"token_ids\":[{}],\"finish_reason\":{finish}}}],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":{}}}}}\n\n",
                    100 + k,
                    k * per_chunk
                );
            }
            // vLLM's last chunk: the usage alone, no choice, no ids.
            let _ = write!(
                conn,
                "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
                16 * per_chunk
            );
        }))
    };
    let gate = |tokens: u64| {
        exact_gate("openai-chat").replace("output_tokens: 64", &format!("output_tokens: {tokens}"))
    };
    forged_counts_fail(
        "chat-forged-ids",
        &gate(64),
        chat(4, true),
        &[
            "the server counts 64 completion tokens, but lists 16 token ids (`choices[].token_ids`): its two accounts of one request disagree",
        ],
    );
    for (name, says_vllm) in [("chat-honest-ids", true), ("chat-unknown-server", false)] {
        let o = run(name, &gate(16), chat(1, says_vllm), &[]);
        assert_eq!(o.code, Some(0), "{}", o.stdout);
        // Ids listed unasked witness the count all the same.
        assert_has(&o.stderr, &["counts from server usage = token ids ×2"]);
    }
}

/// Eight words of `fixtures/tokenizers/words.json`, a token each.
const EIGHT_WORDS: &[(&str, u64)] = &[
    (" time", 1),
    (" year", 1),
    (" people", 1),
    (" way", 1),
    (" day", 1),
    (" man", 1),
    (" thing", 1),
    (" woman", 1),
];

/// A server honest on the answers an audit of every 16th request would
/// check (0, 16, 32, …) and forging the rest fails all the same: which
/// answers are audited is drawn with a key the server never sees. (With 200
/// requests, about 13 are audited; the chance that every one falls on an
/// honest answer is about 4 in 10 million.)
#[test]
fn the_audited_answers_cannot_be_told_in_advance() {
    let tokenizer = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokenizers/words.json");
    let load = format!("output_tokens: 64, tokenizer: {}", tokenizer.display());
    let suite = counted_gate(&load).replace("requests: 2,", "requests: 200,");
    forged_counts_fail(
        "tokenizer-predicted",
        &suite,
        counting_server_by(EIGHT_WORDS, |n| if n % 16 == 0 { 1 } else { 4 }),
        &["the server counts 33 completion tokens, but the suite's tokenizer ("],
    );
}

fn forged_counts_fail(name: &str, suite: &str, port: u16, needles: &[&str]) {
    let o = run(name, suite, port, &[]);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    assert_has(
        &failure_of(&o.stdout, "hostile::performance::gate"),
        needles,
    );
}

/// With the suite's tokenizer, a count within the bytes' bound is still
/// checked: eight one-word chunks counted as four tokens each (the bytes
/// allow five or more) fail the requests the tokenizer splits, naming it;
/// the same words counted one each pass.
#[test]
fn a_suite_tokenizer_checks_the_servers_count() {
    let tokenizer = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokenizers/words.json");
    let load = format!("output_tokens: 64, tokenizer: {}", tokenizer.display());
    forged_counts_fail(
        "tokenizer-forged",
        &counted_gate(&load),
        counting_server(EIGHT_WORDS, 4),
        &[
            "the server counts 33 completion tokens, but the suite's tokenizer (",
            "words.json) splits the text that came into 8: at most 26 can have been sent",
        ],
    );
    let o = run(
        "tokenizer-honest",
        &counted_gate(&load),
        counting_server(EIGHT_WORDS, 1),
        &[],
    );
    assert_eq!(o.code, Some(0), "{}", o.stdout);
}

/// The issue's headline case, under `ignore_eos` (the usual gate setting,
/// which the audit once skipped): eight one-word chunks counted as four
/// tokens each fail the audited request; forty newlines counted one each
/// pass, though the tokenizer splits them into none: each repeated
/// character may have been a token of its own.
#[test]
fn the_tokenizer_audits_ignore_eos_loads() {
    const NEWLINES: &[(&str, u64)] = &[("\\n", 1); 40];
    let tokenizer = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokenizers/words.json");
    let load = |tokens: u32| {
        format!(
            "output_tokens: {tokens}, ignore_eos: true, tokenizer: {}",
            tokenizer.display()
        )
    };
    forged_counts_fail(
        "tokenizer-ignore-eos-forged",
        &counted_gate(&load(33)),
        counting_server(EIGHT_WORDS, 4),
        &[
            "the server counts 33 completion tokens, but the suite's tokenizer (",
            "words.json) splits the text that came into 8: at most 26 can have been sent (a quarter more for a sampled split, 0 for repeated characters, 16 unprinted)",
        ],
    );
    let o = run(
        "tokenizer-ignore-eos-newlines",
        &counted_gate(&load(41)),
        counting_server(NEWLINES, 1),
        &[],
    );
    assert_eq!(o.code, Some(0), "{}", o.stdout);
}

/// Text after the choice's finish ("4", stop, then " and more") and a
/// second choice merged into the first (index 1 "4", index 0 "5") are not
/// the answer a probe reads: each is a protocol error naming the field,
/// where the probe would have passed on the merged text.
#[test]
fn text_after_the_finish_and_a_second_choice_are_protocol_errors() {
    let after = serve(Arc::new(|req, conn| {
        if !discovery(req, conn) {
            stream_head(conn);
            let _ = conn.write_all(
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"4\"},\"finish_reason\":\"stop\"}]}\n\n\
                  data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" and more\"}}]}\n\n\
                  data: [DONE]\n\n",
            );
        }
    }));
    let second = serve(Arc::new(|req, conn| {
        if !discovery(req, conn) {
            stream_head(conn);
            let _ = conn.write_all(
                b"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"4\"}}]}\n\n\
                  data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"5\"},\"finish_reason\":\"stop\"}]}\n\n\
                  data: [DONE]\n\n",
            );
        }
    }));
    let suite = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: { connect: 2s, first_token: 5s, idle: 5s, total: 10s }\ncorrectness:\n  - name: probe\n    prompt: \"What is 2+2?\"\n    expect: [{regex: '^4'}]\n";
    for (tag, port, needle) in [
        (
            "after-finish",
            after,
            "malformed response: text after the choice's finish_reason `stop`: \"{\\\"choices\\\":[{\\\"index\\\":0,\\\"delta\\\":{\\\"content\\\":\\\" and more\\\"}}]}\"",
        ),
        (
            "second-choice",
            second,
            "malformed response: `choices[].index` = 1 where one choice was asked (index 0): ",
        ),
    ] {
        let o = run(tag, suite, port, &[]);
        assert_eq!(o.code, Some(1), "{tag}: {}", o.stdout);
        assert_has(
            &failure_of(&o.stdout, "hostile::correctness::probe"),
            &["error: request failed: ", needle],
        );
    }
}

/// llama.cpp's own timings that cannot be true of the stream that carried
/// them: a decode time of 1e-300 ms for tokens that arrived 20 ms apart
/// (3.6e9 tok/s by the server's account), a negative prompt time; and
/// SGLang's `/generate` timings: a first token 5 s after the request that
/// reached the client within 100 ms, a queue longer than the time to the
/// first token, a rate that is no number. Each fails the request as a
/// protocol error; none becomes a figure.
#[test]
fn server_timings_that_cannot_be_true_are_protocol_errors() {
    let llama = |timings: &'static str| {
        serve(Arc::new(move |req, conn| {
            if req.path != "/completion" {
                discovery(req, conn);
                return;
            }
            stream_head(conn);
            for n in 1..=3 {
                let _ = write!(
                    conn,
                    "data: {{\"content\":\"x\",\"stop\":false,\"tokens_predicted\":{n},\"tokens_evaluated\":8}}\n\n"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = write!(
                conn,
                "data: {{\"content\":\"\",\"stop\":true,\"stop_type\":\"limit\",\"tokens_predicted\":3,\"tokens_evaluated\":8,\"timings\":{timings}}}\n\n"
            );
        }))
    };
    let suite = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  api: llamacpp-completion\n  timeouts: { connect: 2s, first_token: 5s, idle: 5s, total: 10s }\nperformance:\n  - name: gate\n    load: { concurrency: 1, requests: 2, input_tokens: 8, output_tokens: 3 }\n    thresholds: { server_decode_tok_s.mean: \">= 1\" }\n";
    let sglang = |timings: &'static str| {
        serve(Arc::new(move |req, conn| {
            if req.path != "/generate" {
                discovery(req, conn);
                return;
            }
            stream_head(conn);
            for n in 1..=3 {
                let last = if n == 3 {
                    format!(",\"finish_reason\":{{\"type\":\"length\",\"length\":3}},{timings}")
                } else {
                    ",\"finish_reason\":null".to_owned()
                };
                let _ = write!(
                    conn,
                    "data: {{\"text\":\"{}\",\"meta_info\":{{\"prompt_tokens\":8,\"completion_tokens\":{n}{last}}}}}\n\n",
                    "x".repeat(n)
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = write!(conn, "data: [DONE]\n\n");
        }))
    };
    let generate = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  api: sglang-generate\n  timeouts: { connect: 2s, first_token: 5s, idle: 5s, total: 10s }\nperformance:\n  - name: gate\n    load: { concurrency: 1, requests: 2, input_tokens: 8, output_tokens: 3 }\n    thresholds: { server_ttft.mean: \"<= 10s\" }\n";
    for (tag, suite, port, needle) in [
        (
            "first-token-5s",
            generate,
            sglang(r#""e2e_latency":5.1,"first_token_latency":5.0,"queue_time":0.0"#),
            "meta_info.first_token_latency = 5 is implausible: the first token reached the client ",
        ),
        (
            "queue-past-first",
            generate,
            sglang(r#""e2e_latency":0.05,"first_token_latency":0.001,"queue_time":0.04"#),
            "meta_info.queue_time = 0.04 is implausible: the server's own meta_info.first_token_latency was 1.0 ms",
        ),
        (
            "rate-negative",
            generate,
            sglang(r#""e2e_latency":0.05,"first_token_latency":0.001,"decode_throughput":-3"#),
            "meta_info.decode_throughput = -3 is implausible: not a rate",
        ),
    ] {
        let o = run(tag, suite, port, &[]);
        assert_eq!(o.code, Some(1), "{tag}: {}", o.stdout);
        let gate = failure_of(&o.stdout, "hostile::performance::gate");
        assert_has(&gate, &["protocol ×2", needle]);
    }
    for (tag, port, needle) in [
        (
            "decode-1e-300",
            llama(r#"{"prompt_n":8,"prompt_ms":1.0,"predicted_n":3,"predicted_ms":1e-300}"#),
            "timings.predicted_ms = 1e-300 is implausible: the tokens' arrivals were spread over ",
        ),
        (
            "prompt-negative",
            llama(r#"{"prompt_n":8,"prompt_ms":-5,"predicted_n":3,"predicted_ms":40.0}"#),
            "timings.prompt_ms = -5 is implausible: not a duration",
        ),
    ] {
        let o = run(tag, suite, port, &[]);
        assert_eq!(o.code, Some(1), "{tag}: {}", o.stdout);
        let gate = failure_of(&o.stdout, "hostile::performance::gate");
        assert_has(&gate, &["protocol ×2", needle]);
        assert!(!gate.contains("NaN"), "{tag}: {gate}");
    }
}

/// A kept-alive server that writes a second, unasked answer ("6") after
/// its first, then answers the next question wrongly ("7"): the next probe
/// reads its own answer on a new connection and fails, where reading the
/// stale bytes would have passed it.
#[test]
fn an_answer_sent_unasked_is_never_the_next_probes_answer() {
    fn answer(conn: &mut TcpStream, text: &str) {
        let sse = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n"
        );
        let _ = write!(
            conn,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{sse}\r\n0\r\n\r\n",
            sse.len()
        );
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut conn = conn;
                // Requests one after another on this connection.
                loop {
                    let mut first = String::new();
                    if reader.read_line(&mut first).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    let _ = reader.read_exact(&mut body);
                    if first.starts_with("GET /v1/models") {
                        let models = r#"{"data":[{"id":"hostile"}]}"#;
                        let _ = write!(
                            conn,
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{models}",
                            models.len()
                        );
                        continue;
                    }
                    let body = String::from_utf8_lossy(&body);
                    if body.contains("2+3") {
                        answer(&mut conn, "5");
                        std::thread::sleep(Duration::from_millis(5));
                        answer(&mut conn, "6");
                    } else if body.contains("3+3") {
                        answer(&mut conn, "7");
                    } else {
                        answer(&mut conn, "ok");
                    }
                }
            });
        }
    });
    let suite = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: { connect: 2s, first_token: 5s, idle: 5s, total: 10s }\ncorrectness:\n  - name: first\n    prompt: \"What is 2+3?\"\n    expect: [{regex: '^5$'}]\n  - name: second\n    prompt: \"What is 3+3?\"\n    expect: [{regex: '^6$'}]\n";
    let o = run("unsolicited", suite, port, &[]);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    assert!(
        o.stdout
            .lines()
            .any(|l| l.starts_with("test hostile::correctness::first ") && l.ends_with(" ok")),
        "{}",
        o.stdout
    );
    assert_has(
        &failure_of(&o.stdout, "hostile::correctness::second"),
        &["\"7\""],
    );
}

/// A token of white space sent at once and the answer 300 ms later (chat),
/// and llama.cpp's first event carrying a count but no text: neither is the
/// answer's first token, so `ttft_content` waits for the text and a bound
/// of 100 ms fails, where stopping at the first event passed it.
#[test]
fn white_space_or_a_bare_count_does_not_start_the_answer() {
    let chat = serve(Arc::new(|req, conn| {
        if !discovery(req, conn) {
            stream_head(conn);
            let _ = conn.write_all(
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\n\\n\"}}]}\n\n",
            );
            std::thread::sleep(Duration::from_millis(300));
            let _ = conn.write_all(
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"4\"},\"finish_reason\":\"stop\"}]}\n\n\
                  data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":2}}\n\n\
                  data: [DONE]\n\n",
            );
        }
    }));
    let llama = serve(Arc::new(|req, conn| {
        if req.path != "/completion" {
            discovery(req, conn);
            return;
        }
        stream_head(conn);
        let _ = conn.write_all(
            b"data: {\"content\":\"\",\"stop\":false,\"tokens_predicted\":1,\"tokens_evaluated\":8}\n\n",
        );
        std::thread::sleep(Duration::from_millis(300));
        let _ = conn.write_all(
            b"data: {\"content\":\"4\",\"stop\":false,\"tokens_predicted\":2,\"tokens_evaluated\":8}\n\n\
              data: {\"content\":\"\",\"stop\":true,\"stop_type\":\"eos\",\"tokens_predicted\":2,\"tokens_evaluated\":8}\n\n",
        );
    }));
    for (tag, port, api) in [
        ("white-space", chat, "openai-chat"),
        ("bare-count", llama, "llamacpp-completion"),
    ] {
        let suite = format!(
            "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  api: {api}\n  timeouts: {{ connect: 2s, first_token: 5s, idle: 5s, total: 10s }}\nperformance:\n  - name: gate\n    load: {{ concurrency: 1, requests: 2, input_tokens: 8, output_tokens: 2 }}\n    thresholds: {{ ttft_content.p50: \"<= 100ms\" }}\n"
        );
        let o = run(tag, &suite, port, &[]);
        assert_eq!(o.code, Some(1), "{tag}: {}", o.stdout);
        let gate = failure_of(&o.stdout, "hostile::performance::gate");
        assert_has(
            &gate,
            &["error: threshold failed: ttft_content.p50 <= 100.00ms"],
        );
        let measured = gate
            .lines()
            .find_map(|l| l.strip_prefix("measured: ttft_content.p50 = "))
            .unwrap_or_else(|| panic!("{tag}: {gate}"));
        let secs = servegate::units::parse_duration(measured.trim())
            .unwrap_or_else(|e| panic!("{measured}: {e}"));
        assert!(secs >= Duration::from_millis(290), "{tag}: {gate}");
    }
}

/// Redirects are never followed across origins: a `/get_server_info` that
/// answers 302 to another port's JSON (with a database password in it) is
/// not recorded as the server's configuration and passes no
/// `expect_server` (it did, and the password was stored); a request's
/// `307` says where it points instead of `HTTP 307: ""`.
#[test]
fn redirects_to_another_origin_are_not_followed() {
    let password = format!("pw-other-origin-{}", std::process::id());
    let other = {
        let password = password.clone();
        serve(Arc::new(move |_, conn| {
            json(
                conn,
                200,
                &format!(r#"{{"tp_size":1,"db_url":"postgres://u:{password}@db/x"}}"#),
            );
        }))
    };
    let port = serve(Arc::new(move |req, conn| match req.path.as_str() {
        "/get_server_info" => {
            let _ = write!(
                conn,
                "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{other}/get_server_info\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
        "/v1/chat/completions" => {
            let _ = write!(
                conn,
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{other}/v1/chat/completions\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
        _ => {
            discovery(req, conn);
        }
    }));
    let config = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: { connect: 2s, first_token: 5s, idle: 5s, total: 10s }\nexpect_server:\n  server_info: { tp_size: 1 }\ncorrectness:\n  - name: p\n    prompt: \"Hi.\"\n    expect: [{min_chars: 1}]\n";
    let o = run("redirect-config", config, port, &[]);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    assert_has(
        &failure_of(&o.stdout, "hostile::config::server_info.tp_size"),
        &[&format!(
            "the server redirected to http://127.0.0.1:{other}/get_server_info, another origin: not followed"
        )],
    );
    let record = std::fs::read_to_string(o.out_dir.join("latest/report.json")).unwrap();
    assert!(!record.contains(&password), "{record}");
    assert!(!record.contains("db_url"), "{record}");
    let o = run(
        "redirect-request",
        &probe_suite("{ connect: 2s, first_token: 5s, idle: 5s, total: 10s }"),
        port,
        &[],
    );
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let probe = failure_of(&o.stdout, "hostile::correctness::probe");
    assert_has(
        &probe,
        &[&format!(
            "the server redirects this request to \"http://127.0.0.1:{other}/v1/chat/completions\" (Location)"
        )],
    );
    assert!(!probe.contains("HTTP 307: \"\""), "{probe}");
}

/// A chat stream of one chunk of `text`, finished, with usage.
fn one_chunk(conn: &mut TcpStream, text: &str) {
    stream_head(conn);
    let text = serde_json::to_string(text).unwrap();
    let _ = write!(
        conn,
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{text}}},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n"
    );
}

/// Each sink escapes for its own format: a model id that is HTML and a
/// Markdown link stays text in the step summary; U+FFFE and U+FFFF in an
/// answer leave junit.xml well-formed; a 1 MiB snapshot answer is an
/// excerpt everywhere but its file (it was copied whole into stdout, an
/// annotation, the summary and JUnit); the run record and its journal keep
/// its first 4,096 characters, its length and its SHA-256 (they kept it
/// whole).
#[test]
fn every_sink_escapes_for_its_own_format_and_a_long_answer_is_an_excerpt() {
    const MODEL: &str = "<img src=x onerror=alert(1)>[click](http://evil.example)";
    let port = serve(Arc::new(|req, conn| match req.path.as_str() {
        "/v1/models" => json(
            conn,
            200,
            &format!(
                r#"{{"data":[{{"id":{}}}]}}"#,
                serde_json::to_string(MODEL).unwrap()
            ),
        ),
        "/v1/chat/completions" if req.body.contains("Long") => {
            one_chunk(conn, &"x".repeat(1 << 20));
        }
        "/v1/chat/completions" => one_chunk(conn, "5\u{fffe}\u{ffff}"),
        _ => {
            discovery(req, conn);
        }
    }));
    let dir = std::env::temp_dir().join(format!("servegate-hostile-sinks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let summary = dir.join("summary.md");
    let snapshots = dir.join("snapshots");
    let suite = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: { connect: 2s, first_token: 5s, idle: 5s, total: 10s }\ncorrectness:\n  - name: sum\n    prompt: \"What is 2+2?\"\n    expect: [{contains: \"4\"}]\n  - name: long\n    prompt: \"Long answer.\"\n    snapshot: true\n";
    let o = run(
        "sinks",
        suite,
        port,
        &[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_STEP_SUMMARY", summary.to_str().unwrap()),
            ("SERVEGATE_SNAPSHOTS", snapshots.to_str().unwrap()),
        ],
    );
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let md = std::fs::read_to_string(&summary).unwrap();
    // Outside fenced code (which Markdown shows as it is), no markup.
    let prose: String = md.split("```").step_by(2).collect::<Vec<_>>().join("");
    assert!(
        !prose.contains("<img") && !prose.contains("[click](http"),
        "{md}"
    );
    assert!(
        md.contains("&lt;img src=x onerror=alert(1)&gt;\\[click\\](http://evil.example)"),
        "{md}"
    );
    let junit = o.out_dir.join("latest/junit.xml");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(!xml.contains('\u{fffe}') && !xml.contains('\u{ffff}'));
    let parsed = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])",
        ])
        .arg(&junit)
        .output()
        .unwrap();
    assert!(
        parsed.status.success(),
        "{}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    // The record keeps an excerpt, the whole one's length and its hash.
    let latest = o.out_dir.join("latest");
    let json = std::fs::read_to_string(latest.join("report.json")).unwrap();
    let record: serde_json::Value = serde_json::from_str(&json).unwrap();
    let long = record["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "hostile::correctness::long")
        .expect("the long probe's trial");
    let kept = &long["exchange"];
    assert_eq!(kept["content"].as_str().unwrap(), "x".repeat(4096));
    assert_eq!(kept["content_chars"], 1 << 20);
    // python3 -c "import hashlib; print(hashlib.sha256(b'x' * (1 << 20)).hexdigest())"
    assert_eq!(
        kept["content_sha256"],
        "8f990ba0b577b51cf009ea049368c16bbda1b21e1b93be07a824758bb253c39b"
    );
    let run_dir = std::fs::read_dir(o.out_dir.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("trials.jsonl").exists())
        .expect("the run's directory");
    let journal = std::fs::read_to_string(run_dir.join("trials.jsonl")).unwrap();
    let html = std::fs::read_to_string(latest.join("report.html")).unwrap();
    assert!(
        html.contains("… (1048576 characters in all; the record keeps the first 4096)"),
        "{html}"
    );
    for (sink, text) in [
        ("stdout", &o.stdout),
        ("summary", &md),
        ("junit", &xml),
        ("report.json", &json),
        ("trials.jsonl", &journal),
        ("report.html", &html),
    ] {
        assert!(text.len() < 64 * 1024, "{sink}: {} bytes", text.len());
    }
    assert_has(
        &o.stdout,
        &[
            "… (1048576 chars in all)",
            "bytes of answer in all; the whole is in its file)",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `103 Early Hints` before the response is skipped, not taken for it.
#[test]
fn an_informational_answer_before_the_response_is_skipped() {
    let port = serve(Arc::new(|req, conn| {
        if !discovery(req, conn) {
            let _ = conn
                .write_all(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n");
            good_stream(conn);
        }
    }));
    let o = run(
        "early-hints",
        &probe_suite("{ connect: 2s, first_token: 5s, idle: 5s, total: 10s }"),
        port,
        &[],
    );
    assert_eq!(o.code, Some(0), "{}", o.stdout);
}

/// A key whose value ends in a newline is named with its variable, not
/// `failed to parse header value`.
#[test]
fn a_key_a_header_cannot_carry_names_its_variable() {
    let port = serve(Arc::new(|req, conn| {
        if !discovery(req, conn) {
            good_stream(conn);
        }
    }));
    let suite = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  api_key_env: SERVEGATE_HOSTILE_KEY\n  timeouts: { connect: 2s, first_token: 5s, idle: 5s, total: 10s }\ncorrectness:\n  - name: probe\n    prompt: \"Hi.\"\n    expect: [{min_chars: 1}]\n";
    let o = run(
        "key-newline",
        suite,
        port,
        &[("SERVEGATE_HOSTILE_KEY", "sk-newline-key-1234\n")],
    );
    // 3: the suite could not run (as an unset key)
    assert_eq!(o.code, Some(3), "{}", o.stdout);
    assert_has(
        &format!("{}{}", o.stdout, o.stderr),
        &[
            "target.api_key_env names `SERVEGATE_HOSTILE_KEY`, whose value holds a newline at byte 19 of 20",
        ],
    );
    assert!(
        !o.stdout.contains("failed to parse header value"),
        "{}",
        o.stdout
    );
}

/// `servegate init` against a server whose model id holds a newline and a
/// YAML key, and which sends every token of an answer in one chunk: it
/// writes a suite that loads (it panicked, exit 101), the id shown on one
/// line, and no bound of 0 (it wrote `decode_tok_s.mean >= 0.0000`, which
/// any server passes).
#[test]
fn init_never_panics_on_server_strings() {
    let port = serve(Arc::new(|req, conn| match req.path.as_str() {
        "/v1/models" => json(conn, 200, r#"{"data":[{"id":"evil\nmodel: injected"}]}"#),
        "/v1/chat/completions" => {
            // Every token asked for: one, then 40 ms later the rest. (At
            // 2 ms a loaded machine's late read took both chunks at once in
            // every request of a repeat: no decode figure, rightly a failed
            // calibration, and this test red under load.)
            let body: serde_json::Value = serde_json::from_str(&req.body).unwrap();
            let n = body["max_tokens"].as_u64().unwrap_or(16);
            stream_head(conn);
            let _ = conn.write_all(
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"4 \"}}]}\n\n",
            );
            std::thread::sleep(Duration::from_millis(40));
            let _ = write!(
                conn,
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{}\"}},\"finish_reason\":\"length\"}}],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":{n}}}}}\n\ndata: [DONE]\n\n",
                "4 ".repeat(usize::try_from(n).unwrap() - 1)
            );
        }
        _ => {
            discovery(req, conn);
        }
    }));
    let dir = std::env::temp_dir().join(format!("servegate-hostile-init-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("first.yaml");
    let o = command(&[], &[])
        .args([
            "init",
            "--target",
            &format!("http://127.0.0.1:{port}"),
            "--client-limited",
            "warn",
            "--out",
        ])
        .arg(&file)
        .current_dir(&dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(0), "{text}");
    let suite = std::fs::read_to_string(&file).unwrap();
    assert!(suite.contains(r"evil\nmodel: injected"), "{suite}");
    assert!(!suite.contains("\nmodel: injected"), "{suite}");
    let listed = command(&[], &[])
        .arg("run")
        .arg(&file)
        .args(["--", "--list"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Discovery has one deadline: a server that answers each discovery GET
/// just inside `first_token` (a slow drip of 404s) took that long for each
/// of its eleven GETs; now the run starts its probe within one.
#[test]
fn discovery_has_one_deadline_not_one_per_get() {
    let port = serve(Arc::new(|req, conn| {
        if req.path.starts_with("/v1/chat") {
            good_stream(conn);
        } else {
            std::thread::sleep(Duration::from_millis(900));
            json(conn, 404, r#"{"error":{"message":"no such endpoint"}}"#);
        }
    }));
    let o = run(
        "slow-discovery",
        &probe_suite("{ connect: 2s, first_token: 1s, idle: 5s, total: 10s }"),
        port,
        &[],
    );
    assert_eq!(o.code, Some(0), "{}", o.stdout);
    // Eleven GETs of 0.9 s each (model, version, the record's documents)
    // took 9.9 s; one deadline of 1 s and the probe leave 5 s to spare for
    // a loaded machine.
    assert!(
        o.took < Duration::from_secs(6),
        "took {:?}:\n{}",
        o.took,
        o.stdout
    );
    assert_has(&o.stderr, &["served model unknown"]);
}

/// The liveness question after a failed trial has one deadline: a server
/// whose `/health_generate` answers 404 after 6 s and whose `/health`
/// never answers took 6 s and then 10 s more (each GET bounded alone);
/// now 10 s in all, naming both GETs.
#[test]
fn the_liveness_check_has_one_deadline() {
    let port = serve(Arc::new(|req, conn| match req.path.as_str() {
        "/v1/chat/completions" => std::thread::sleep(Duration::from_secs(4)),
        "/health_generate" => {
            std::thread::sleep(Duration::from_secs(6));
            json(conn, 404, r#"{"error":{"message":"no such endpoint"}}"#);
        }
        "/health" => std::thread::sleep(Duration::from_secs(30)),
        _ => {
            discovery(req, conn);
        }
    }));
    let o = run(
        "hung-liveness",
        &probe_suite("{ connect: 2s, first_token: 1s, idle: 5s, total: 3s }"),
        port,
        &[],
    );
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    assert_has(
        &failure_of(&o.stdout, "hostile::correctness::probe"),
        &[
            "the server stopped answering during hostile::correctness::probe (GET /health_generate, then GET /health: no answer within 10",
        ],
    );
    // The probe's 1 s, the liveness check's 10 s: 16 s of GETs before, 5 s
    // to spare for a loaded machine now.
    let trial = o.trial_seconds("hostile::correctness::probe");
    assert!(trial < 14.0, "the trial took {trial:.1} s:\n{}", o.stdout);
}

/// A live HTTP front over a hung engine (vLLM 0.32 answers `/health` 200
/// while its engine process is stopped): after the probe missed its
/// deadline, `/health` answers at once, and a one-token generation gets no
/// token within the liveness check's 10 s — no answer at all, or the
/// answer's headers and nothing behind them, as vLLM does — so the server
/// is named hung, and the suite's next probe fails with that cause
/// instead of waiting out its own deadline. A first token that comes 2 s
/// after the headers is an answer: the server is alive, and the next
/// probe fails on its own.
#[test]
fn a_live_front_over_a_hung_engine_is_named() {
    // How the chat route answers: nothing, headers alone, or headers and a
    // token 2 s later.
    #[derive(Clone, Copy)]
    enum Engine {
        Silent,
        HeadersOnly,
        Slow,
    }
    let server = |engine: Engine| {
        serve(Arc::new(move |req, conn| match req.path.as_str() {
            "/v1/chat/completions" => match engine {
                Engine::Silent => std::thread::sleep(Duration::from_secs(30)),
                Engine::HeadersOnly => {
                    stream_head(conn);
                    std::thread::sleep(Duration::from_secs(30));
                }
                Engine::Slow => {
                    stream_head(conn);
                    std::thread::sleep(Duration::from_secs(2));
                    let _ = conn.write_all(
                        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"4\"},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n",
                    );
                }
            },
            "/health" => json(conn, 200, "{}"),
            _ => {
                discovery(req, conn);
            }
        }))
    };
    let suite = probe_suite("{ connect: 2s, first_token: 1s, idle: 5s, total: 20s }").replace(
        "correctness:\n",
        "correctness:\n  - name: next\n    prompt: \"again\"\n    expect: [{ contains: \"4\" }]\n",
    );
    for (name, engine) in [
        ("hung-silent", Engine::Silent),
        ("hung-headers", Engine::HeadersOnly),
    ] {
        let o = run(name, &suite, server(engine), &[]);
        assert_eq!(o.code, Some(1), "{}", o.stdout);
        assert_has(
            &o.stdout,
            &[
                "the server stopped answering during hostile::correctness::next (GET /health answered, but a one-token generation got no token: ",
                "gated: the server stopped answering during hostile::correctness::next",
            ],
        );
    }
    let o = run("slow-first-token", &suite, server(Engine::Slow), &[]);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    assert!(!o.stdout.contains("stopped answering"), "{}", o.stdout);
    assert_has(
        &failure_of(&o.stdout, "hostile::correctness::probe"),
        &["no token before the first_token deadline (1.000s)"],
    );
}

/// Memory is bounded per run, not only per request: 32 streams each sent
/// a 15 MiB SSE line that never ends took 32 × 15 MiB (499 MiB peak); with
/// the streams' buffers sharing `target.limits.buffers: 64 MiB` the
/// requests past it fail as `oversize` naming the budget, and servegate's
/// peak stays under the run's bound (`PEAK_KIB`).
#[test]
fn answer_buffers_share_one_budget_across_the_streams_in_flight() {
    let port = serve(Arc::new(|req, conn| {
        if discovery(req, conn) {
            return;
        }
        stream_head(conn);
        let _ = conn.write_all(b"data: ");
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..15 {
            if conn.write_all(&chunk).is_err() {
                return;
            }
        }
        // Held open, the line unended, while the others fill the budget:
        // on a busy machine, where the streams arrive one after another,
        // one that ended early would be a protocol error and free its
        // buffer (a loaded run once saw 15 of those and 17 past the
        // budget; the first of each class is in the message).
        std::thread::sleep(Duration::from_secs(3));
    }));
    let suite = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: { connect: 2s, first_token: 20s, idle: 20s, total: 30s }\n  limits: { buffers: 64 MiB }\nperformance:\n  - name: gate\n    load: { concurrency: 32, requests: 32, input_tokens: 8, output_tokens: 8, abort_after: 0 }\n    thresholds: { errors: \"== 0\" }\n";
    let o = run("buffers", suite, port, &[]);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    assert_has(
        &failure_of(&o.stdout, "hostile::performance::gate"),
        &[
            "the run's answer buffers passed 64",
            "(target.limits.buffers)",
        ],
    );
    println!("peak {} MiB", o.peak_kib / 1024);
}

/// A `/get_server_info` of 4 MiB holding 250,000 keys (under the document
/// cap) is refused before it is parsed: its tree took ~170 MiB.
#[test]
fn a_document_of_too_many_values_is_refused_unparsed() {
    let port = serve(Arc::new(|req, conn| match req.path.as_str() {
        "/get_server_info" => {
            let mut body = String::from("{");
            for i in 0..250_000 {
                let _ = std::fmt::Write::write_fmt(&mut body, format_args!("\"k{i:06}\":{i},"));
            }
            body.push_str("\"tp_size\":1}");
            json(conn, 200, &body);
        }
        _ => {
            discovery(req, conn);
        }
    }));
    let config = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: { connect: 2s, first_token: 5s, idle: 5s, total: 10s }\nexpect_server:\n  server_info: { tp_size: 1 }\ncorrectness:\n  - name: p\n    prompt: \"Hi.\"\n    expect: [{min_chars: 1}]\n";
    let o = run("many-values", config, port, &[]);
    eprintln!(
        "a 4 MiB document of 250,000 keys: servegate peaked at {} MiB",
        o.peak_kib / 1024
    );
    assert_eq!(o.code, Some(1), "{}", o.stdout);
}

/// Tool calls as OpenAI defines them, from servers that bend them: the
/// arguments sent as a JSON object instead of JSON text, a second call's
/// id arriving at the first call's index (its name would be glued onto the
/// first's), and two calls of one function of which one misses its
/// schema. Each fails the probe, naming what came; none passes.
#[test]
fn tool_calls_are_held_to_openais_format() {
    let chunk = |call: &str| {
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{call}]}}}}]}}\n\n")
    };
    let cases: [(&str, Vec<String>, &str); 3] = [
        (
            "object-arguments",
            vec![chunk(
                r#"{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}}"#,
            )],
            "malformed response: `tool_calls[].function.arguments` is an object, not a string: OpenAI's format sends a call's arguments as JSON text",
        ),
        (
            "id-changed",
            vec![
                chunk(
                    r#"{"index":0,"id":"call_a","type":"function","function":{"name":"get_","arguments":""}}"#,
                ),
                chunk(
                    r#"{"index":0,"id":"call_b","type":"function","function":{"name":"weather","arguments":"{\"city\": \"Paris\"}"}}"#,
                ),
            ],
            "tool call 0 changed its id from \"call_a\" to \"call_b\" mid-stream: one call's name and arguments belong to one id",
        ),
        (
            "one-bad-of-two",
            vec![
                chunk(
                    r#"{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}"#,
                ),
                chunk(
                    r#"{"index":1,"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\"city\": 12}"}}"#,
                ),
            ],
            "1 of 2 calls of `get_weather` failed: tool_calls[1] (id `call_b`): its arguments {\"city\":12} miss the schema: /city: 12 is not of type \"string\"",
        ),
    ];
    let suite = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: { connect: 2s, first_token: 5s, idle: 5s, total: 10s }\ncorrectness:\n  - name: probe\n    prompt: \"What is the weather in Paris?\"\n    tools:\n      - name: get_weather\n        parameters: { type: object, properties: { city: { type: string } }, required: [city] }\n    expect: [{ tool_call: get_weather }]\n";
    for (tag, chunks, needle) in cases {
        let body: String = chunks.concat()
            + "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
        let port = serve(Arc::new(move |req, conn| {
            if !discovery(req, conn) {
                stream_head(conn);
                let _ = conn.write_all(body.as_bytes());
            }
        }));
        let o = run(tag, suite, port, &[]);
        assert_eq!(o.code, Some(1), "{tag}: {}", o.stdout);
        assert_has(
            &failure_of(&o.stdout, "hostile::correctness::probe"),
            &[needle],
        );
    }
}

/// `expect_server`'s `metrics` source reads the labels of the server's
/// info series, as vLLM writes `vllm:cache_config_info`: a label that
/// holds commas and escaped quotes is read whole, a value other than the
/// one expected fails its check saying what came and from where, and a
/// label the series does not carry is named as absent, with the labels it
/// does carry.
#[test]
fn info_series_labels_are_configuration_checked() {
    let port = serve(Arc::new(move |req, conn| {
        if req.path == "/metrics" {
            let body = "# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"64\",kv_cache_dtype_skip_layers=\"[a, b]\",note=\"say \\\"hi\\\"\",engine=\"0\"} 1.0\nvllm:num_requests_running{engine=\"0\"} 0\n";
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        } else {
            discovery(req, conn);
        }
    }));
    let config = "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  timeouts: { connect: 2s, first_token: 5s, idle: 5s, total: 10s }\nexpect_server:\n  metrics:\n    vllm:cache_config_info.kv_cache_dtype_skip_layers: \"[a, b]\"\n    vllm:cache_config_info.note: 'say \"hi\"'\n    vllm:cache_config_info.block_size: \"128\"\n    vllm:cache_config_info.enable_prefix_caching: \"True\"\ncorrectness:\n  - name: p\n    prompt: \"Hi.\"\n    expect: [{min_chars: 1}]\n";
    let o = run("info-metrics", config, port, &[]);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    for ok in [
        "vllm:cache_config_info.kv_cache_dtype_skip_layers",
        "vllm:cache_config_info.note",
    ] {
        assert_eq!(
            crate::common::verdicts::verdict(&o.stdout, &format!("hostile::config::metrics.{ok}")),
            "ok",
            "{}",
            o.stdout
        );
    }
    assert_has(
        &failure_of(
            &o.stdout,
            "hostile::config::metrics.vllm:cache_config_info.block_size",
        ),
        &["\"64\"", "\"128\"", "GET /metrics"],
    );
    assert_has(
        &failure_of(
            &o.stdout,
            "hostile::config::metrics.vllm:cache_config_info.enable_prefix_caching",
        ),
        &[
            "the server's metrics has no field `vllm:cache_config_info.enable_prefix_caching`",
            "= read from GET /metrics; the fields of `vllm:cache_config_info`: block_size, engine, kv_cache_dtype_skip_layers, note",
        ],
    );
}

/// SGLang's chat API sends a request's speculative figures, when asked, in
/// an `sglext` chunk of their own. One that cannot be true of the stream
/// (50 tokens a verify step of 4 generated) and one that is not one
/// choice's details (a list, where one choice was asked) fail the request
/// as a protocol error naming the field; neither is a figure.
#[test]
fn a_chat_streams_speculative_details_are_held_to_the_stream() {
    for (tag, details, said) in [
        (
            "sglext-impossible",
            "{\"spec_accept_length\":50.0,\"spec_verify_ct\":1}",
            "speculative accept length of 50 tokens per verify step for 4 tokens generated",
        ),
        (
            "sglext-list",
            "[{\"spec_accept_length\":2.0},{\"spec_accept_length\":3.0}]",
            "`sglext.spec_tokens_details` is not one choice's details",
        ),
    ] {
        let body = format!(
            "data: {{\"choices\":[{{\"delta\":{{\"content\":\"one two three four\"}}}}]}}\n\n\
             data: {{\"choices\":[{{\"delta\":{{}},\"finish_reason\":\"length\"}}]}}\n\n\
             data: {{\"choices\":[],\"sglext\":{{\"spec_tokens_details\":{details}}}}}\n\n\
             data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":5,\"completion_tokens\":4}}}}\n\n\
             data: [DONE]\n\n"
        );
        let port = serve(Arc::new(move |req, conn| {
            if discovery(req, conn) {
                return;
            }
            stream_head(conn);
            let _ = conn.write_all(body.as_bytes());
        }));
        let o = run(
            tag,
            "suite: hostile\ntarget:\n  base_url: http://127.0.0.1:PORT\n  api: openai-chat\nperformance:\n  - name: gate\n    load: { concurrency: 1, requests: 2, input_tokens: 8, output_tokens: 4 }\n    extra_body: { return_spec_tokens_details: true }\n    thresholds: { spec_accept_length.mean: \">= 1\" }\n",
            port,
            &[],
        );
        o.assert_no_panic();
        assert_eq!(o.code, Some(1), "{}", o.stdout);
        assert_has(
            &failure_of(&o.stdout, "hostile::performance::gate"),
            &["could not measure: all 2 requests failed", said],
        );
    }
}
