//! SGLang's router (`sglang-router` 0.3.2 from PyPI,
//! `python -m sglang_router.launch_router`) in front of two real SGLang
//! 0.5.23 CPU workers, all three launched by servegate from one suite:
//! each worker ready before the router starts, a probe and a gate
//! measured through the router with the server's figures read from both
//! workers' `/metrics`, and worker `b` killed mid-gate, which the router
//! hides from its clients by sending its requests to `a` and servegate
//! names as `b`'s failure.

use super::common::verdicts::failure_of as common_failure;
use super::{
    FAULT_PROBE, Installed, SGLANG_ENV, descendants_named, gauge, judged, run_watching,
    sglang_flags, suite_file,
};
use libtest_mimic::Failed;

/// The suite, its workers launched with the shipped suite's flags.
fn router_suite(servers: &Installed, dir: &std::path::Path) -> Result<std::path::PathBuf, Failed> {
    let python = servers.python.display().to_string();
    let flags = sglang_flags("pytorch").map(|f| format!("{f:?}")).join(", ");
    let env = SGLANG_ENV
        .iter()
        .map(|(k, v)| format!("{k}: {v:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let worker = |name: &str| {
        format!(
            "      - name: {name}\n        command: [{python:?}, -m, sglang.launch_server, --model-path, {checkpoint:?}, {flags}, --host, \"{{host}}\", --port, \"{{port}}\"]\n        env: {{ {env} }}\n        ready: {{ interval: 500ms, timeout: 300s }}\n        grace: 10s\n",
            checkpoint = servers.checkpoint.display().to_string(),
        )
    };
    suite_file(
        dir,
        "routed",
        &format!(
            "suite: routed\ntarget:\n  api: openai-chat\n  launch:\n    workers:\n{a}{b}    command: [{python:?}, -m, sglang_router.launch_router, --worker-urls, \"{{worker.a}}\", \"{{worker.b}}\", --policy, round_robin, --host, \"{{host}}\", --port, \"{{port}}\", --prometheus-host, 127.0.0.1, --prometheus-port, \"{{free_port.metrics}}\"]\n    ready: {{ path: /health_generate, interval: 500ms, timeout: 120s }}\n    grace: 10s\n  timeouts: {{ connect: 5s, first_token: 60s, idle: 30s, total: 600s }}\ndefaults: {{ temperature: 0 }}\ncorrectness:\n{FAULT_PROBE}performance:\n  - name: spread\n    load: {{ concurrency: 2, requests: 8, warmup: 2, input_tokens: 16, output_tokens: 16, ignore_eos: true }}\n    thresholds: {{ errors: \"== 0\", server.ttft.mean: \"< 60s\" }}\n  - name: killed\n    load: {{ concurrency: 1, requests: 12, warmup: 0, input_tokens: 16, output_tokens: 64, ignore_eos: true }}\n    thresholds: {{ errors: \"== 0\" }}\n",
            a = worker("a"),
            b = worker("b"),
        ),
    )
}

/// The number after `--port ` in `line`.
fn port_in(line: &str) -> Option<u16> {
    line.split("--port ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// The processes under `root` whose command line holds `--port <port>`
/// among its arguments.
fn listening_on(root: u32, port: u16) -> Vec<i32> {
    descendants_named(root, "")
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                args.windows(2)
                    .any(|w| w[0] == b"--port" && w[1] == port.to_string().as_bytes())
            })
        })
        .collect()
}

pub(super) fn sglang_router(servers: &Installed) -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let suite = router_suite(servers, dir.path())?;
    let killed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut port_b = None;
    let run = run_watching(&suite, servers, |line, servegate| {
        if line.starts_with("servegate: launched worker `b`") {
            port_b = port_in(line);
        }
        if line.starts_with("test routed::performance::spread ") {
            let (killed, port_b) = (std::sync::Arc::clone(&killed), port_b);
            std::thread::spawn(move || {
                let Some(port) = port_b else { return };
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
                while std::time::Instant::now() < deadline
                    && gauge(port, "sglang:num_running_reqs").unwrap_or(0.0) < 1.0
                {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                let pids = listening_on(servegate, port);
                for pid in &pids {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(*pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                killed.store(pids.len(), std::sync::atomic::Ordering::SeqCst);
            });
        }
    });
    if killed.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        return Err(format!("worker `b` was not found to kill\n{}", run.1).into());
    }
    judged(
        &run,
        "the router in front of two SGLang workers, `b` killed",
        &[
            ("routed::correctness::arithmetic", "ok"),
            ("routed::performance::spread", "ok"),
            ("routed::performance::killed", "FAILED"),
        ],
        &[
            "in front of 2 workers (`a` at http://127.0.0.1:",
            "(by worker: a ",
            "worker `b` (behind the router) was killed by signal 9 (SIGKILL) during routed::performance::killed",
            "routed.workers/b.log, last 40 lines:",
        ],
    )?;
    let spread = run
        .1
        .lines()
        .find(|l| l.contains("(by worker: a "))
        .unwrap_or_default();
    println!("  spread: {}", spread.trim());
    // What the gate's own client saw, beside the worker's death: the
    // router's retries may have hidden it.
    let killed = common_failure(&run.1, "routed::performance::killed");
    for line in killed
        .lines()
        .skip_while(|l| !l.contains("the trial's own failure"))
        .take(16)
    {
        println!("  | {line}");
    }
    Ok(())
}
