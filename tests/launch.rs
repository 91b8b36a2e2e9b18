//! Servers servegate launches itself: the simulator binary as a real
//! process, through start-up, readiness, crashes, configuration checks,
//! variants and teardown — and no process may outlive the run (checked in
//! `/proc`, hence Linux only).
#![cfg(target_os = "linux")]

#[allow(dead_code)] // each test binary uses a subset of the shared helpers
mod common;
use common::run::merged;
use common::verdicts::{assert_has, client_kept_from_cpu, failure_of, verdict};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A run of the binary in its own target directory (so parallel tests keep
/// their figures apart), with a marker only its servers carry.
struct Run {
    dir: PathBuf,
    marker: String,
}

impl Run {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("servegate-launch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self {
            dir,
            marker: format!("servegate-test-marker-{name}-{}", std::process::id()),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        self.command_via(&[env!("CARGO_BIN_EXE_servegate")], args)
    }

    /// [`Run::command`], started through `prefix` (a program and its
    /// arguments that end in servegate's path).
    fn command_via(&self, prefix: &[&str], args: &[&str]) -> Command {
        let mut cmd = Command::new(prefix[0]);
        cmd.args(&prefix[1..])
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("SERVEGATE_BIN", env!("CARGO_BIN_EXE_servegate"))
            .env("SERVEGATE_MARKER", &self.marker)
            .env("CARGO_TARGET_DIR", &self.dir)
            .env_remove("SERVEGATE_TARGET")
            .env_remove("SERVEGATE_SIM_ITL")
            .env_remove("SERVEGATE_SIM_TTFT");
        cmd
    }

    /// Its exit code and everything it printed, both streams in order.
    fn run(&self, args: &[&str]) -> (Option<i32>, String) {
        merged(self.command(args))
    }

    fn figures(&self) -> serde_json::Value {
        let path = self.dir.join("servegate/latest/report.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap()
    }

    /// Processes whose command line carries this run's marker.
    fn survivors(&self) -> Vec<String> {
        common::run::processes_with(&self.marker)
    }

    fn assert_no_survivors(&self) {
        // Teardown is synchronous; allow the kernel a moment to reap.
        let until = Instant::now() + Duration::from_secs(5);
        while !self.survivors().is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(
            self.survivors(),
            Vec::<String>::new(),
            "processes outlived the run"
        );
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
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

/// A daemon the server started in a session of its own (`setsid`), holding
/// a port, is stopped at teardown with the server.
#[test]
fn a_daemon_that_left_the_process_group_is_stopped_too() {
    let run = Run::new("escape");
    let (code, text) = run.run(&["run", "tests/suites/launch/escape.yaml"]);
    assert_eq!(code, Some(0), "{text}");
    assert_has(&text, &["servegate: stopped the server of `escape`"]);
    run.assert_no_survivors();
}

/// `kill -9` of servegate (an OOM kill, a CI hard timeout) mid-gate: the
/// server dies with it, through its parent-death signal.
#[test]
fn a_killed_servegate_takes_its_server_with_it() {
    let run = Run::new("kill9");
    let mut child = run
        .command(&["run", "tests/suites/launch/slow.yaml"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while run.survivors().is_empty() {
        assert!(Instant::now() < until, "the server never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Well into the gate.
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    run.assert_no_survivors();
}

#[test]
fn a_launched_server_is_checked_measured_recorded_and_stopped_with_its_group() {
    let run = Run::new("ok");
    let (code, text) = run.run(&["run", "tests/suites/launch/ok.yaml"]);
    assert_eq!(code, Some(0), "{text}");
    for name in [
        "launched::config::server_info.tp_size",
        "launched::config::models.data.0.id",
        "launched::correctness::answers",
        "launched::performance::decode",
    ] {
        assert_eq!(verdict(&text, name), "ok", "{name}");
    }
    assert_has(
        &text,
        &[
            "servegate: launched `NCCL_PROTO=LL HF_TOKEN='<redacted>' sh -c",
            "ready after",
            "→ LAUNCHED server `NCCL_PROTO=LL HF_TOKEN='<redacted>' sh -c",
            "servegate: stopped the server of `launched` (was killed by signal 15 (SIGTERM))",
        ],
    );
    // Config checks run first, then probes, then gates.
    let pos = |n: &str| text.find(&format!("test {n} ")).unwrap();
    assert!(pos("launched::config::models.data.0.id") < pos("launched::correctness::answers"));
    let f = run.figures();
    let suite = &f["suites"][0];
    assert_eq!(suite["suite"], "launched");
    assert_eq!(suite["server"]["env"]["NCCL_PROTO"], "LL");
    assert_eq!(suite["server"]["env"]["HF_TOKEN"], "<redacted>");
    assert!(
        !f.to_string().contains("not-for-the-record"),
        "a secret reached the record"
    );
    assert_eq!(suite["server"]["argv"][0], "sh");
    assert!(suite["server"]["timeline"]["ready_s"].is_f64());
    assert_eq!(suite["server_info"]["tp_size"], 8);
    assert_eq!(suite["model_info"]["model_path"], "servegate-sim");
    assert!(suite["suite_commit"].is_string() || suite["suite_commit"].is_null());
    let log = suite["server"]["log"].as_str().unwrap();
    let log_text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(log))
        .or_else(|_| std::fs::read_to_string(log))
        .unwrap();
    assert!(log_text.contains(&run.marker), "{log_text}");
    // SGLang 0.5.23 logs a warning for every call of the deprecated
    // `/get_server_info` and `/get_model_info`: servegate asks their
    // replacements first, so a server that has them never logs one.
    assert!(!log_text.contains("is deprecated"), "{log_text}");
    run.assert_no_survivors();
}

/// servegate started holding descriptors 7 and 8 (as a CI runner or a
/// shell's `7>file` leave them): the server it launches holds neither, or
/// it would refuse to start.
#[test]
fn a_launched_server_reaches_no_descriptor_servegate_inherited() {
    let run = Run::new("fds");
    let host = run.dir.join("host-file");
    std::fs::write(&host, "").unwrap();
    let host = host.to_str().unwrap();
    let via = [
        "/bin/sh",
        "-c",
        "exec 7>>\"$0\" 8<\"$0\" && exec \"$@\"",
        host,
        env!("CARGO_BIN_EXE_servegate"),
    ];
    let (code, text) = merged(run.command_via(&via, &["run", "tests/suites/launch/fds.yaml"]));
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(verdict(&text, "fds::correctness::answers"), "ok");
    run.assert_no_survivors();
}

/// A suite named by its bare file name in the working directory, whose
/// launch has no `cwd`: the server starts in that directory (it failed
/// `chdir("")`, the suite path's empty parent).
#[test]
fn a_suite_in_the_working_directory_launches_its_server_there() {
    let run = Run::new("bare");
    let suite = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suites/launch/fds.yaml"),
    )
    .unwrap();
    std::fs::write(run.dir.join("suite.yaml"), suite).unwrap();
    let mut cmd = run.command(&["run", "suite.yaml"]);
    cmd.current_dir(&run.dir);
    let (code, text) = merged(cmd);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(verdict(&text, "fds::correctness::answers"), "ok");
    run.assert_no_survivors();
}

/// A server that is up but generates nothing (SGLang with
/// `--skip-server-warmup`, its `/health_generate` held for its timeout and
/// then 503, each time) is named hung after three such answers in a row,
/// not at the end of its ready deadline (10 minutes here), with the
/// server's own log line. Without the flag SGLang's warmup request never
/// gets its token: it stays starting (503 at once) and kills itself after
/// `SGLANG_WARMUP_TIMEOUT`, which the run names with its log line.
#[test]
fn a_server_up_but_generating_nothing_is_named_hung_before_its_deadline() {
    let run = Run::new("up_but_hung");
    let (code, text) = run.run(&["run", "tests/suites/launch/up-but-hung.yaml"]);
    assert_eq!(code, Some(3), "{text}");
    let failure = failure_of(&text, "up_but_hung::correctness::answers");
    assert_has(
        &failure,
        &[
            "launch failed: the server is up but generates nothing: GET /health_generate was held ",
            " without a 2xx, 3 times in a row (",
            "last: 503); SGLang answers so once it is up",
            "its scheduler is hung",
            "| servegate sim: Health check failed. Server couldn't get a response from detokenizer for last 5 seconds.",
        ],
    );
    // Each answer was held at least SGLang's 5 s here.
    let held = failure
        .split("was held ")
        .nth(1)
        .and_then(|rest| rest.split(" without").next())
        .unwrap_or_default();
    let each: Vec<f64> = held
        .split(", ")
        .filter_map(|s| s.strip_suffix('s')?.parse().ok())
        .collect();
    assert!(
        each.len() == 3 && each.iter().all(|&s| s >= 5.0),
        "{held}\n{failure}"
    );
    assert!(!failure.contains("not ready after"), "{failure}");

    let (code, text) = run.run(&["run", "tests/suites/launch/hung-in-warmup.yaml"]);
    assert_eq!(code, Some(3), "{text}");
    assert_has(
        &failure_of(&text, "hung_in_warmup::correctness::answers"),
        &[
            "launch failed: the server was killed by signal 9 (SIGKILL) before it was ready",
            "| servegate sim: Initialization failed. warmup error:",
        ],
    );
    run.assert_no_survivors();
}

#[test]
fn a_start_up_that_hangs_fails_at_its_deadline_with_the_last_answer_and_the_log() {
    let run = Run::new("hang");
    let started = Instant::now();
    let (code, text) = run.run(&["run", "tests/suites/launch/hang.yaml"]);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(code, Some(3), "{text}");
    let failure = failure_of(&text, "hang::correctness::answers");
    assert_has(
        &failure,
        &[
            "launch failed: the server is not ready after 2s: GET /health last answered: 503",
            "Loading model",
            "last 40 lines:",
            "| loading weights 3/61",
        ],
    );
    run.assert_no_survivors();
}

#[test]
fn a_fatal_log_line_fails_the_start_up_at_once() {
    let run = Run::new("fatal");
    let started = Instant::now();
    let (code, text) = run.run(&["run", "tests/suites/launch/fatal.yaml"]);
    // The readiness timeout is 10 minutes; the fatal line ends it at once.
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(code, Some(3), "{text}");
    let failure = failure_of(&text, "fatal::correctness::answers");
    assert_has(
        &failure,
        &[
            "launch failed: fatal log pattern `CUDA out of memory` at ",
            "before the server was ready",
        ],
    );
    // The line's number depends on how the simulator's stdout and stderr
    // lines interleave in the log (2 or 3); the file:line form does not.
    let at = regex::Regex::new(
        r"fatal\.log:[23]: RuntimeError: CUDA out of memory\. Tried to allocate 2\.00 GiB",
    )
    .unwrap();
    assert!(at.is_match(&failure), "{failure}");
    run.assert_no_survivors();
}

#[test]
fn a_server_that_dies_mid_run_fails_the_trial_in_flight_and_gates_the_rest() {
    let run = Run::new("crash");
    let (code, text) = run.run(&[
        "run",
        "tests/suites/launch/crash.yaml",
        "tests/suites/launch/mismatch.yaml",
    ]);
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(verdict(&text, "crash::correctness::first"), "ok");
    assert_eq!(verdict(&text, "crash::correctness::second"), "ok");
    let third = failure_of(&text, "crash::correctness::third");
    assert_has(
        &third,
        &[
            "error: the server was killed by signal 6 (SIGABRT) during crash::correctness::third",
            "| servegate sim: simulated crash: fatal error in decode (request 3)",
            "the trial's own failure:",
            "--> tests/suites/launch/crash.yaml:18:5",
        ],
    );
    let gate = failure_of(&text, "crash::performance::decode");
    assert_has(
        &gate,
        &["gated: the server was killed by signal 6 (SIGABRT) during crash::correctness::third"],
    );
    // The next suite goes on, on its own server.
    assert_eq!(verdict(&text, "mismatch::correctness::answers"), "FAILED");
    assert_has(&text, &["servegate: launched `", "mismatch.log"]);
    // What was measured is written: the crashed suite is in the record.
    let f = run.figures();
    assert_eq!(f["suites"][0]["suite"], "crash");
    run.assert_no_survivors();
}

/// Two workers, then a router in front of them (`servegate sim --route`,
/// where SGLang's stands on a GPU host): each worker ready before the
/// router starts, each with its own log, the gate measured through the
/// router and the server's figures read from both workers' `/metrics`,
/// each worker's share shown; all three stopped, none outliving the run.
#[test]
fn a_router_starts_after_its_workers_and_its_gates_read_every_workers_metrics() {
    let run = Run::new("router");
    let (code, text) = run.run(&["run", "tests/suites/launch/router.yaml"]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(verdict(&text, "routed::config::server_info.tp_size"), "ok");
    assert_eq!(verdict(&text, "routed::correctness::answers"), "ok");
    assert_eq!(verdict(&text, "routed::performance::decode"), "ok");
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("no `{needle}` in:\n{text}"))
    };
    // Both workers ready before the router is started, `b` after its 1 s
    // of loading (as a prefill worker may take longer than its decode
    // worker).
    let (a, b) = ("worker `a` of `routed`", "worker `b` of `routed`");
    assert!(at(&format!("`{a}` ready after")) < at("servegate: launched `"));
    assert!(at(&format!("`{b}` ready after")) < at("servegate: launched `"));
    let b_ready: f64 = text
        [at(&format!("`{b}` ready after ")) + format!("`{b}` ready after ").len()..]
        .split('s')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(b_ready >= 1.0, "{text}");
    assert_has(
        &text,
        &[
            "in front of 2 workers (`a` at http://127.0.0.1:",
            "servegate: stopped worker `a` of `routed` (was killed by signal 15 (SIGTERM))",
            "servegate: stopped worker `b` of `routed` (was killed by signal 15 (SIGTERM))",
        ],
    );
    // 8 requests of 8 tokens, counted by the workers, spread over both.
    let line = text
        .lines()
        .find(|l| l.contains("server /metrics over the window"))
        .unwrap_or_else(|| panic!("no server line in:\n{text}"));
    let by_worker = line
        .split("generation tokens 64 (by worker: ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("no tokens by worker in: {line}"));
    let counts: Vec<f64> = by_worker
        .split(", ")
        .map(|w| w.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(counts.len(), 2, "{line}");
    assert!(counts.iter().all(|&n| n > 0.0), "{line}");
    assert!((counts.iter().sum::<f64>() - 64.0).abs() < 1e-9, "{line}");
    let f = run.figures();
    // The first worker's documents, not whichever worker the router chose.
    assert_eq!(f["suites"][0]["server_info"]["tp_size"], 4);
    // The figures' configuration holds the workers and the router's
    // command as written (URLs as placeholders, ports left out, the
    // program by its name: the same next run and on another machine), so
    // that another policy or one worker more is another series.
    let config = &f["suites"][0]["config"];
    assert_eq!(config["launch:workers"], "a,b", "{config}");
    let router = config["launch:router"].as_str().unwrap_or_default();
    assert!(
        router.starts_with("servegate sim --route {worker.a} --route {worker.b}")
            && !router.contains("--port"),
        "{config}"
    );
    assert!(
        config["worker.b:command"]
            .as_str()
            .is_some_and(|c| c.contains("--loading 1s")),
        "{config}"
    );
    let server = &f["suites"][0]["server"];
    for w in ["a", "b"] {
        let log = server["workers"][w]["log"].as_str().unwrap();
        assert!(log.ends_with(&format!("routed.workers/{w}.log")), "{log}");
        let log_text = std::fs::read_to_string(log).unwrap();
        assert!(log_text.contains(&run.marker), "{log_text}");
        assert!(server["workers"][w]["timeline"]["ready_s"].is_f64());
    }
    assert!(
        server["argv"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--route"),
        "{server}"
    );
    // `{free_port.metrics}`: a free port, not the router's own.
    let argv: Vec<&str> = server["argv"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let second = argv
        .iter()
        .find_map(|a| a.strip_prefix("a second port: "))
        .unwrap_or_else(|| panic!("{server}"));
    assert!(second.parse::<u16>().is_ok_and(|p| p > 0), "{second}");
    let own = argv[argv.iter().position(|a| *a == "--port").unwrap() + 1];
    assert_ne!(own, second, "{server}");
    // The same NAME is the same port in every process of the launch.
    assert!(
        server["workers"]["a"]["argv"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a.as_str() == Some(&format!("the same second port: {second}"))),
        "{server}"
    );
    run.assert_no_survivors();
}

/// A worker behind the router dies: the trial whose request it had fails
/// naming that worker, its exit and its log; the rest are gated on it.
/// A worker that never becomes ready fails the launch in its name at its
/// own deadline, and the worker still loading is stopped with it. A
/// worker that hangs is asked on its own after the failed trial, and
/// named.
#[test]
fn a_worker_that_dies_or_never_starts_fails_in_its_own_name() {
    let run = Run::new("router-crash");
    let started = Instant::now();
    let (code, text) = run.run(&[
        "run",
        "tests/suites/launch/router-crash.yaml",
        "tests/suites/launch/router-not-ready.yaml",
        "tests/suites/launch/router-hung.yaml",
    ]);
    // `b`'s 2 s deadline ended the launch, not `a`'s minute of loading.
    assert!(started.elapsed() < Duration::from_secs(50), "{text}");
    // A suite whose server never started: the run's code says so.
    assert_eq!(code, Some(3), "{text}");
    let failed: Vec<&str> = ["first", "second", "third", "fourth"]
        .into_iter()
        .filter(|p| verdict(&text, &format!("routed-crash::correctness::{p}")) != "ok")
        .collect();
    assert_eq!(failed.len(), 1, "one probe meets the crash:\n{text}");
    let name = format!("routed-crash::correctness::{}", failed[0]);
    let failure = failure_of(&text, &name);
    assert_has(
        &failure,
        &[
            &format!(
                "error: worker `b` (behind the router) was killed by signal 6 (SIGABRT) during {name}"
            ),
            "routed-crash.workers/b.log, last 40 lines:",
            "| servegate sim: simulated crash: fatal error in decode (request 2)",
            "the trial's own failure:",
        ],
    );
    assert_has(
        &failure_of(&text, "routed-crash::performance::decode"),
        &["gated: worker `b` (behind the router) was killed by signal 6 (SIGABRT)"],
    );
    assert_has(
        &failure_of(&text, "routed-not-ready::correctness::answers"),
        &[
            "error: launch failed: worker `b`: the server is not ready after 2s: GET /health last answered: 503",
            "routed-not-ready.workers/b.log, last 40 lines:",
        ],
    );
    // A worker that hangs behind the router is asked on its own, and named.
    let hung: Vec<&str> = ["first", "second", "third", "fourth", "fifth"]
        .into_iter()
        .filter(|p| verdict(&text, &format!("routed-hung::correctness::{p}")) != "ok")
        .collect();
    let first_hung = failure_of(&text, &format!("routed-hung::correctness::{}", hung[0]));
    assert_has(
        &first_hung,
        &[
            "error: worker `b` (behind the router) stopped answering during routed-hung::correctness::",
            "GET /health_generate answered 503",
            "routed-hung.workers/b.log, last 40 lines:",
            "| servegate sim: simulated scheduler hang",
        ],
    );
    for later in &hung[1..] {
        assert_has(
            &failure_of(&text, &format!("routed-hung::correctness::{later}")),
            &["gated: worker `b` (behind the router) stopped answering"],
        );
    }
    assert!(
        !text.contains("for `routed-not-ready` (log"),
        "the router started:\n{text}"
    );
    run.assert_no_survivors();
}

/// A server speaking as vLLM 0.32 whose engine dies mid-gate: both of the
/// gate's streams get the error in their stream (the one under way at its
/// next token); the front end then answers `/health` 503 until it exits
/// 3 s later (vLLM's watchdog), and that exit, waited for within the
/// liveness check, is named with the log's tail (the `EngineDeadError`);
/// the gate after it is gated on it.
#[test]
fn a_vllm_whose_engine_died_is_named_by_its_exit_with_its_log() {
    let run = Run::new("vllm_dies");
    let (code, text) = run.run(&["run", "tests/suites/launch/vllm-engine-dies.yaml"]);
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(verdict(&text, "vllm-dies::correctness::first"), "ok");
    assert_has(
        &failure_of(&text, "vllm-dies::performance::decode"),
        &[
            "error: the server exited with code 0 during vllm-dies::performance::decode",
            "| vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
            "the trial's own failure:",
            "in-stream error ×2",
            "EngineCore encountered an issue. See stack trace (above) for the root cause.",
        ],
    );
    assert_has(
        &failure_of(&text, "vllm-dies::performance::after"),
        &["gated: the server exited with code 0 during vllm-dies::performance::decode"],
    );
    run.assert_no_survivors();
}

#[test]
fn a_configuration_mismatch_fails_its_check_and_gates_every_later_stage() {
    let run = Run::new("mismatch");
    let (code, text) = run.run(&["run", "tests/suites/launch/mismatch.yaml"]);
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(
        verdict(&text, "mismatch::config::server_info.tp_size"),
        "ok"
    );
    let check = failure_of(&text, "mismatch::config::server_info.attention_backend");
    assert_has(
        &check,
        &[
            "error: server configuration mismatch: server_info.attention_backend is \"triton\", expected \"fa3\"",
            "--> tests/suites/launch/mismatch.yaml:12:5",
            "= read from GET /server_info of http://127.0.0.1:",
        ],
    );
    // The record says it as data: which document, which field, what was
    // expected, what was found.
    let record = run.figures();
    let cause = record["trials"]
        .as_array()
        .and_then(|t| {
            t.iter()
                .find(|t| t["name"] == "mismatch::config::server_info.attention_backend")
        })
        .map(|t| t["cause"].clone())
        .unwrap_or_default();
    assert_eq!(
        cause,
        serde_json::json!({
            "type": "config",
            "document": "server_info",
            "field": "attention_backend",
            "expected": "expected \"fa3\"",
            "found": "\"triton\"",
            "state": "mismatch",
        })
    );
    for later in [
        "mismatch::correctness::answers",
        "mismatch::performance::decode",
    ] {
        assert_has(
            &failure_of(&text, later),
            &[
                "gated: config check server_info.attention_backend failed",
                // The check's own failure, for a run that filtered it out.
                "\n  mismatch::config::server_info.attention_backend failed with:\n    error: server configuration mismatch: server_info.attention_backend is \"triton\", expected \"fa3\"\n",
            ],
        );
    }
    run.assert_no_survivors();
}

/// The fastest variant failed its gate: the table shows its figure, says
/// why it is no candidate, and names the best of those that passed.
#[test]
fn a_variant_that_failed_is_never_the_best() {
    let run = Run::new("ab-failed");
    let (code, text) = run.run(&["run", "tests/suites/launch/ab-failed.yaml"]);
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(
        verdict(&text, "ab_failed[fast]::performance::decode"),
        "FAILED"
    );
    assert_has(
        &text,
        &[
            "variants of ab_failed::performance::decode (delta against `slow`):",
            "(no candidate: `ab_failed[fast]::performance::decode` failed)",
            "best: `mid`",
        ],
    );
    let c = &run.figures()["comparisons"][0];
    assert_eq!(c["best"], "mid", "{c}");
    assert_eq!(c["rows"][2]["variant"], "fast", "{c}");
    assert!(
        c["rows"][2]["value"].as_f64() > c["rows"][1]["value"].as_f64(),
        "{c}"
    );
    run.assert_no_survivors();
}

/// A variant states what its launch must have changed: `steps4` passes the
/// flag and its server reports 4 decode steps (the suite's check of the
/// same field, 1, replaced); `forgot` expects the same of a launch without
/// it, so its check fails at the variant's line and its gate is not
/// measured.
#[test]
fn a_variants_expect_server_proves_its_launch_took_effect() {
    let run = Run::new("variant-config");
    let (code, text) = run.run(&["run", "tests/suites/launch/variant-config.yaml"]);
    assert_eq!(code, Some(1), "{text}");
    for (name, want) in [
        (
            "variant_config[steps4]::config::server_info.num_continuous_decode_steps",
            "ok",
        ),
        ("variant_config[steps4]::config::server_info.tp_size", "ok"),
        ("variant_config[steps4]::performance::decode", "ok"),
        ("variant_config[forgot]::config::server_info.tp_size", "ok"),
        (
            "variant_config[forgot]::config::server_info.num_continuous_decode_steps",
            "FAILED",
        ),
        ("variant_config[forgot]::performance::decode", "FAILED"),
        (
            "variant_config[triton]::config::server_info.attention_backend",
            "ok",
        ),
        ("variant_config[triton]::performance::decode", "ok"),
    ] {
        assert_eq!(verdict(&text, name), want, "{name}\n{text}");
    }
    assert_has(
        &failure_of(
            &text,
            "variant_config[forgot]::config::server_info.num_continuous_decode_steps",
        ),
        &[
            "error: server configuration mismatch: server_info.num_continuous_decode_steps is 1, expected 4\n  --> tests/suites/launch/variant-config.yaml:25:22",
        ],
    );
    assert_has(
        &failure_of(&text, "variant_config[forgot]::performance::decode"),
        &["gated: config check server_info.num_continuous_decode_steps failed"],
    );
    run.assert_no_survivors();
}

/// Two attention backends as variants, one breaking the model's numbers
/// (the simulator's `sglang.garbage_with`): its numerics probe fails and
/// its gate is not measured; the other passes both.
#[test]
fn a_backend_that_breaks_the_numbers_fails_its_numerics_probe() {
    let run = Run::new("backends");
    let (code, text) = run.run(&["run", "tests/suites/launch/numerics.yaml"]);
    assert_eq!(code, Some(1), "{text}");
    for (name, want) in [
        ("backends[fa3]::correctness::scores", "ok"),
        ("backends[fa3]::performance::decode", "ok"),
        ("backends[flashmla]::correctness::scores", "FAILED"),
        ("backends[flashmla]::performance::decode", "FAILED"),
    ] {
        assert_eq!(verdict(&text, name), want, "{name}\n{text}");
    }
    assert_has(
        &failure_of(&text, "backends[flashmla]::correctness::scores"),
        &[
            "error: numerics changed: mean token log-probability -10.9853, a known-good configuration's -1.9853 ± 0.1",
        ],
    );
    run.assert_no_survivors();
}

/// A servegate whose own file was replaced while it ran (`cargo install`
/// of a new version mid-run, or `cargo build` beside a long suite) still
/// launches each variant's server: it re-executes itself by
/// `/proc/self/exe`, not by a path that now names nothing (the second
/// variant's launch failed with "No such file or directory" when a build
/// replaced the binary under a real SGLang suite).
#[test]
fn a_servegate_whose_file_was_replaced_still_launches_its_servers() {
    let run = Run::new("replaced");
    let copy = run.dir.join("servegate-copy");
    std::fs::copy(env!("CARGO_BIN_EXE_servegate"), &copy).unwrap();
    let copy_path = copy.to_str().unwrap().to_owned();
    let mut cmd = run.command_via(&[&copy_path], &["run", "tests/suites/launch/ab.yaml"]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    // Started: its file can go.
    std::fs::remove_file(&copy).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    for name in [
        "ab[slow]::performance::decode",
        "ab[fast]::performance::decode",
    ] {
        assert_eq!(verdict(&text, name), "ok", "{name}: {text}");
    }
    run.assert_no_survivors();
}

#[test]
fn variants_run_on_their_own_servers_and_the_table_names_the_faster() {
    let run = Run::new("ab");
    let (code, text) = run.run(&["run", "tests/suites/launch/ab.yaml"]);
    assert_eq!(code, Some(0), "{text}");
    for name in [
        "ab[slow]::correctness::answers",
        "ab[slow]::performance::decode",
        "ab[fast]::correctness::answers",
        "ab[fast]::performance::decode",
    ] {
        assert_eq!(verdict(&text, name), "ok", "{name}");
    }
    // Sequential: the first variant's server is stopped (inside its last
    // trial, so before that trial's `test` line) before the second is
    // launched (inside its first trial, before that trial's line).
    let stopped = text.find("stopped the server of `ab[slow]`").unwrap();
    let slow_done = text.find("test ab[slow]::performance::decode ").unwrap();
    let second = text.find("for `ab-fast`").unwrap();
    let fast_first = text.find("test ab[fast]::correctness::answers ").unwrap();
    assert!(
        stopped < slow_done && stopped < second && second < fast_first,
        "{text}"
    );
    assert_has(
        &text,
        &[
            "variants of ab::performance::decode (delta against `slow`):",
            "decode_tok_s.mean (higher is better)",
            "(beyond noise)",
            "best: `fast`",
            "tpot.mean (lower is better)",
        ],
    );
    // Each launch line shows the variant's environment as well as its argv.
    let launched = |label: &str| {
        text.lines()
            .find(|l| l.starts_with("servegate: launched `") && l.contains(label))
            .unwrap_or_else(|| panic!("no launch line for {label}:\n{text}"))
    };
    assert!(
        launched("for `ab-slow`").starts_with("servegate: launched `SERVEGATE_SIM_ITL=24ms "),
        "{text}"
    );
    assert!(
        !launched("for `ab-fast`").contains("SERVEGATE_SIM_ITL"),
        "{text}"
    );
    // A tie has no best, and says so.
    assert_has(
        &text,
        &[
            "    errors (lower is better)\n      slow                          0  (n=3)\n      fast                          0  (n=3)\n      no best: `slow` and `fast` tie at 0\n",
        ],
    );
    let f = run.figures();
    assert_eq!(f["comparisons"][2]["figure"], "errors");
    assert_eq!(f["comparisons"][2]["best"], serde_json::Value::Null);
    assert_eq!(f["comparisons"][2]["no_best"], "`slow` and `fast` tie at 0");
    let c = &f["comparisons"][0];
    assert_eq!(c["best"], "fast");
    let delta = c["rows"][1]["delta_pct"].as_f64().unwrap();
    // ITL 24 ms against 8 ms: about 3× the decode rate.
    assert!(delta > 150.0, "{c}");
    assert_eq!(f["suites"][0]["variant"], "slow");
    // Every threshold with its verdict, passing ones too, for the reports.
    let thresholds = &f["suites"][1]["gates"][0]["thresholds"];
    assert_eq!(thresholds.as_array().map(Vec::len), Some(4), "{thresholds}");
    assert!(
        thresholds[3]["check"]
            .as_str()
            .unwrap()
            .starts_with("client self-check: 1 thread (auto), "),
        "{thresholds}"
    );
    assert!(
        thresholds[1]["check"]
            .as_str()
            .unwrap()
            .starts_with("tpot.mean <= variant(slow) * 0.5 = "),
        "{thresholds}"
    );
    assert_eq!(thresholds[1]["passed"], true);
    assert_eq!(f["suites"][0]["server"]["env"]["SERVEGATE_SIM_ITL"], "24ms");
    // The environment that configures a server is part of its
    // configuration: each variant's is recorded, and their fingerprints
    // differ by it alone.
    let (slow, fast) = (&f["suites"][0], &f["suites"][1]);
    assert_eq!(slow["config"]["env:NCCL_ALGO"], "Ring", "{slow}");
    assert_eq!(fast["config"]["env:NCCL_ALGO"], "Tree", "{fast}");
    assert!(
        slow["config"].get("env:SERVEGATE_SIM_ITL").is_none(),
        "{slow}"
    );
    assert_ne!(slow["fingerprint"], fast["fingerprint"]);
    let digestless = |s: &serde_json::Value| {
        let f = s["fingerprint"].as_str().unwrap();
        f[..f.rfind(", config ").unwrap_or(f.len())].to_owned()
    };
    assert_eq!(digestless(slow), digestless(fast));
    run.assert_no_survivors();
}

#[test]
fn ctrl_c_stops_the_launched_server_too() {
    let run = Run::new("sigint");
    let mut child: Child = run
        .command(&["run", "tests/suites/launch/long.yaml"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // servegate's own lines (the server ready) are on its stderr.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("ready after") {
            break;
        }
    }
    // Keep reading: a closed pipe would end servegate before the signal does.
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).count());
    assert!(seen.contains("ready after"), "{seen}");
    assert!(!run.survivors().is_empty(), "the server should be running");
    std::thread::sleep(Duration::from_millis(300));
    let pid = child.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let status = child.wait().unwrap();
    let _ = drain.join();
    assert_eq!(status.code(), Some(130));
    run.assert_no_survivors();
}

#[test]
fn a_variant_bound_fails_the_variant_that_regressed_against_the_other() {
    let run = Run::new("regress");
    let (code, text) = run.run(&["run", "tests/suites/launch/regress.yaml"]);
    assert_eq!(code, Some(1), "{text}");
    // `fast` passes, or fails only where the self-check rightly found its
    // client kept from a CPU (a heavily loaded machine: at load 10–11 on
    // two cores, 3 runs of 8 read a first token together with the second,
    // 8 ms late: tpot.mean off by up to 164 µs, 155 µs allowed). Its
    // figure still bounds `slow`'s: the client can only have understated
    // its TPOT, which makes `slow`'s bound stricter, never looser.
    let fast = "regress[fast]::performance::decode";
    assert!(
        verdict(&text, fast) == "ok" || client_kept_from_cpu(&failure_of(&text, fast)),
        "{fast} failed, and not for a client kept from its CPU:\n{text}"
    );
    let failure = failure_of(&text, "regress[slow]::performance::decode");
    assert_has(
        &failure,
        &[
            "error: threshold failed: tpot.mean <= variant(fast) * 1.1",
            "--> tests/suites/launch/regress.yaml:",
            "from variant `fast`'s ",
        ],
    );
    assert_has(
        &text,
        &["tpot.mean <= variant(fast) * 1.1 (not applied: this is variant `fast`)"],
    );
    run.assert_no_survivors();
}

#[test]
fn a_fixed_port_already_in_use_fails_the_launch_instead_of_measuring_the_squatter() {
    let run = Run::new("taken");
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = squatter.local_addr().unwrap().port().to_string();
    let mut cmd = run.command(&["run", "tests/suites/launch/taken.yaml"]);
    cmd.env("SERVEGATE_TEST_PORT", &port);
    let (code, text) = merged(cmd);
    assert_eq!(code, Some(3), "{text}");
    assert_has(
        &failure_of(&text, "taken::correctness::answers"),
        &[&format!(
            "launch failed: port {port} on 127.0.0.1 is not free"
        )],
    );
    run.assert_no_survivors();
}

#[test]
fn a_server_that_stops_answering_mid_run_is_named_as_hung_and_gates_the_rest() {
    let run = Run::new("hung");
    let (code, text) = run.run(&["run", "tests/suites/launch/hung.yaml"]);
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(verdict(&text, "hung::correctness::second"), "ok");
    let third = failure_of(&text, "hung::correctness::third");
    assert_has(
        &third,
        &[
            "error: the server stopped answering during hung::correctness::third (GET /health_generate: ",
            "| servegate sim: simulated hang: no answer from now on (request 3)",
            "the trial's own failure:",
            "no token before the first_token deadline (2.000s)",
        ],
    );
    assert_has(
        &failure_of(&text, "hung::performance::decode"),
        &["gated: the server stopped answering during hung::correctness::third"],
    );
    run.assert_no_survivors();
}

/// A scheduler that hangs behind a live HTTP server: the liveness check
/// asks `/health_generate`, which generates a token (SGLang 0.5.23's
/// `/health` too, unless `SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0`);
/// the trial is named as the one the server hung in, and the rest are
/// gated on it.
#[test]
fn a_hung_scheduler_behind_a_live_health_endpoint_is_named_as_hung() {
    let run = Run::new("scheduler_hung");
    let (code, text) = run.run(&["run", "tests/suites/launch/scheduler-hung.yaml"]);
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(verdict(&text, "scheduler_hung::correctness::second"), "ok");
    assert_has(
        &failure_of(&text, "scheduler_hung::correctness::third"),
        &[
            "error: the server stopped answering during scheduler_hung::correctness::third (GET /health_generate: ",
            "| servegate sim: simulated scheduler hang: HTTP answers, nothing is generated from now on (request 3)",
            "no token before the first_token deadline (2.000s)",
        ],
    );
    assert_has(
        &failure_of(&text, "scheduler_hung::performance::decode"),
        &["gated: the server stopped answering during scheduler_hung::correctness::third"],
    );
    run.assert_no_survivors();
}

#[test]
fn a_panic_while_a_server_runs_stops_it_on_the_way_out() {
    use servegate::server::Server;
    use servegate::suite::{Launch, Ready};
    let run = Run::new("panic");
    let launch = Launch {
        command: vec![
            env!("CARGO_BIN_EXE_servegate").to_owned(),
            "sim".to_owned(),
            "--port".to_owned(),
            "{port}".to_owned(),
            "--say".to_owned(),
            run.marker.clone(),
        ],
        env: Vec::new(),
        cwd: None,
        host: "127.0.0.1".to_owned(),
        port: None,
        ready: Ready {
            path: "/health".to_owned(),
            interval: Duration::from_millis(50),
            timeout: Duration::from_secs(30),
        },
        fatal_log_patterns: Vec::new(),
        workers: Vec::new(),
        grace: Duration::from_secs(2),
        loc: servegate::suite::node::Loc::default(),
    };
    let dir = run.dir.clone();
    let marker = run.marker.clone();
    let unwound = std::panic::catch_unwind(move || {
        let server = Server::spawn(&launch, None, (&dir, &dir, "panic"), &[]).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(server.wait_ready(&launch.ready)).unwrap();
        let alive = std::fs::read_to_string(&server.log_path).unwrap();
        assert!(alive.contains(&marker));
        panic!("a bug in the harness");
    });
    assert!(unwound.is_err());
    run.assert_no_survivors();
}

#[test]
fn a_canary_api_key_leaks_into_nothing_servegate_prints_or_writes() {
    let run = Run::new("secret");
    let canary = format!("canary-{}-7f3e9c", std::process::id());
    let token = format!("hf-canary-{}-0d1e", std::process::id());
    let snapshots = run.dir.join("snapshots");
    let out = run
        .command(&["run", "tests/suites/launch/secret.yaml"])
        .env("SERVEGATE_TEST_API_KEY", &canary)
        .env("SERVEGATE_TEST_HF_TOKEN", &token)
        .env("SERVEGATE_SNAPSHOTS", &snapshots)
        .env("INSTA_UPDATE", "always")
        .env_remove("CI")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    // The crash's log tail is in the failure, with the key scrubbed; the
    // launch line shows the environment, its secrets redacted: one by its
    // name, one by its value.
    assert_has(
        &text,
        &[
            "| server_args: api_key=<redacted>",
            "was killed by signal 6",
            "servegate: launched `SGLANG_API_KEY='<redacted>' EXTRA_SETTING='<redacted>' ",
        ],
    );
    assert!(!text.contains(&canary), "the key is in the output:\n{text}");
    assert!(
        !text.contains(&token),
        "the token is in the output:\n{text}"
    );
    // Everything under the output directory (record, reports, the server's
    // log) and every snapshot.
    let mut files = Vec::new();
    collect(&run.dir.join("servegate"), &mut files);
    collect(&snapshots, &mut files);
    assert!(
        files
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "log")),
        "{files:?}"
    );
    assert!(files.len() >= 8, "{files:?}");
    for f in &files {
        let body = std::fs::read_to_string(f).unwrap_or_default();
        assert!(!body.contains(&canary), "the key is in {}", f.display());
        assert!(!body.contains(&token), "the token is in {}", f.display());
    }
    let record = std::fs::read_to_string(run.dir.join("servegate/latest/report.json")).unwrap();
    assert_has(
        &record,
        &[
            "\"SGLANG_API_KEY\": \"<redacted>\"",
            "\"EXTRA_SETTING\": \"<redacted>\"",
            "\"api_key\": \"<redacted>\"",
            "server_args: api_key=<redacted>",
        ],
    );
    run.assert_no_survivors();
}
