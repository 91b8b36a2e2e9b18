//! `servegate bench-client`: the client's own cost and accuracy, measured
//! against the simulator running in a separate process (pinned to another
//! core when `taskset` exists), so that only the client's work is counted.
//!
//! Two tables: the ceiling (ITL = 0: tokens/s ingested and CPU µs per token
//! at each concurrency) and the timing error (TTFT = 100 ms, ITL = 10 ms:
//! measured percentiles against that truth).

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::client::{CallRequest, Client};
use crate::load::distribution::Distribution;
use crate::load::metrics::GateMetrics;
use crate::load::runner::run_gate;
use crate::suite::Slo;
use crate::suite::metric::Stat;
use crate::suite::node::Loc;
use crate::suite::{Api, Gate, Load, LoadPrompt, Pace, Sampling, Timeouts};
use crate::units::format_secs;

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Concurrency levels of the ceiling table.
    pub ceiling: Vec<u32>,
    /// Concurrency levels of the timing table.
    pub timing: Vec<u32>,
    /// Tokens per stream.
    pub tokens: u32,
    /// Measured window per level.
    pub duration: Duration,
    /// Runtime worker threads of the client.
    pub threads: usize,
}

/// A simulator in a child process, killed when dropped.
struct SimProcess {
    child: Child,
    url: String,
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_sim(ttft: &str, itl: &str, stamp: bool, pin: bool) -> Result<SimProcess, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    // Capacity beyond any level measured: the batching model must not
    // stretch the truth the client is compared with.
    let mut args = vec![
        "sim",
        "--port",
        "0",
        "--ttft",
        ttft,
        "--itl",
        itl,
        "--capacity",
        "1000000",
    ];
    if stamp {
        args.push("--stamp-tokens");
    }
    let mut cmd = if pin {
        let mut c = Command::new("taskset");
        c.args(["-c", "1"]).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let mut child = cmd
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("failed to start the simulator process: {e}"))?;
    let stdout = child.stdout.take().ok_or("no simulator stdout")?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| format!("failed to read the simulator's address: {e}"))?;
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .ok_or_else(|| format!("the simulator printed no address: {line:?}"))?
        .to_owned();
    Ok(SimProcess { child, url })
}

/// Whether client and simulator can be pinned to separate cores.
fn pinning() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
        && Command::new("taskset")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// Pins every thread of this process to CPU 0 (threads started later
/// inherit it), leaving CPU 1 to the simulator.
fn pin_self() -> bool {
    Command::new("taskset")
        .args(["-a", "-cp", "0", &std::process::id().to_string()])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// CPU time of this process (user + system), from `/proc/self/stat`.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 12th and 13th of them, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn gate(concurrency: u32, tokens: u32, duration: Duration) -> Gate {
    Gate {
        name: format!("concurrency_{concurrency}"),
        loc: Loc::default(),
        load: Load {
            duration: Some(duration),
            warmup: concurrency,
            ignore_eos: true,
            ..Load::new(
                Pace::Closed { concurrency },
                LoadPrompt::Text("Tell me a story.".into()),
                tokens,
            )
        },
        sampling: Sampling {
            temperature: Some(0.0),
            max_tokens: Some(tokens),
            ..Sampling::default()
        },
        thresholds: Vec::new(),
        slo: Slo::default(),
        repeats: 1,
        verdict: crate::suite::VerdictMode::Mean,
        recheck: None,
    }
}

fn measure(
    rt: &tokio::runtime::Runtime,
    url: &str,
    g: &Gate,
) -> Result<(GateMetrics, Option<Duration>), String> {
    let client = Client::new(url, Api::OpenAiChat, "bench", None, Timeouts::default())
        .map_err(|e| e.to_string())?;
    let before = cpu_time();
    let m = rt.block_on(run_gate(&client, g, crate::load::threads::Threads::ONE))?;
    let cpu = before.zip(cpu_time()).map(|(b, a)| a.saturating_sub(b));
    Ok((m, cpu))
}

fn shown(d: &Distribution, s: Stat) -> String {
    d.stat(s).map_or_else(|| "-".into(), format_secs)
}

/// Runs both tables and returns them as text.
pub fn run(opts: &BenchOptions) -> Result<String, String> {
    let can_pin = pinning();
    let pinned = can_pin && pin_self();
    let rt = if opts.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(opts.threads);
        b
    }
    .enable_all()
    .build()
    .map_err(|e| e.to_string())?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "servegate bench-client: client on {} runtime thread(s){}, simulator in its own process{}; {} tokens per stream, {} per level\n",
        opts.threads,
        if pinned { " pinned to CPU 0" } else { "" },
        if can_pin { " pinned to CPU 1" } else { "" },
        opts.tokens,
        format_secs(opts.duration.as_secs_f64()),
    );
    let sim = spawn_sim("0ms", "0ms", false, can_pin)?;
    let _ = writeln!(
        out,
        "(a) ceiling: ITL = 0, every token as fast as the simulator can send it"
    );
    let _ = writeln!(
        out,
        "{:>8} {:>14} {:>16} {:>10} {:>8}",
        "streams", "tokens/s", "client CPU/token", "CPU busy", "errors"
    );
    for &c in &opts.ceiling {
        let start = Instant::now();
        let (m, cpu) = measure(&rt, &sim.url, &gate(c, opts.tokens, opts.duration))?;
        let wall = start.elapsed();
        let per_token = cpu.map_or_else(
            || "n/a".into(),
            |cpu| {
                #[expect(clippy::cast_precision_loss, reason = "token counts are small")]
                let us = cpu.as_secs_f64() * 1e6 / m.output_tokens.max(1) as f64;
                format!("{us:.2} µs")
            },
        );
        let busy = cpu.map_or_else(
            || "n/a".into(),
            |cpu| format!("{:.0}%", 100.0 * cpu.as_secs_f64() / wall.as_secs_f64()),
        );
        let rate = m
            .value("output_tok_s".parse().expect("metric"))
            .unwrap_or(0.0);
        let _ = writeln!(
            out,
            "{c:>8} {rate:>14.0} {per_token:>16} {busy:>10} {:>8}",
            m.errors
        );
    }
    drop(sim);
    let sim = spawn_sim("100ms", "10ms", true, can_pin)?;
    let _ = writeln!(
        out,
        "\n(b) timing error: nominal TTFT = 100ms, ITL = 10ms; truth = each token's send time, stamped right before its write"
    );
    let _ = writeln!(
        out,
        "{:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12} {:>7}",
        "streams",
        "TTFT p50",
        "TTFT p99",
        "ITL p50",
        "ITL p99",
        "true p50",
        "true p99",
        "|err| p50",
        "|err| p99",
        "errors"
    );
    for &c in &opts.timing {
        let t = rt.block_on(timing(&sim.url, c, opts.duration))?;
        let _ = writeln!(
            out,
            "{c:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12} {:>7}",
            shown(&t.ttft, Stat::P50),
            shown(&t.ttft, Stat::P99),
            shown(&t.itl, Stat::P50),
            shown(&t.itl, Stat::P99),
            shown(&t.truth, Stat::P50),
            shown(&t.truth, Stat::P99),
            shown(&t.error, Stat::P50),
            shown(&t.error, Stat::P99),
            t.errors,
        );
    }
    Ok(out)
}

/// Timing of streams whose tokens carry their send times.
struct Timing {
    ttft: Distribution,
    itl: Distribution,
    truth: Distribution,
    error: Distribution,
    errors: u64,
}

/// `concurrency` streams of 64 stamped tokens for `duration`: each gap the
/// client measured is compared with the gap between the send stamps.
async fn timing(url: &str, concurrency: u32, duration: Duration) -> Result<Timing, String> {
    let client = Client::new(url, Api::OpenAiChat, "bench", None, Timeouts::default())
        .map_err(|e| e.to_string())?;
    let g = gate(concurrency, 64, duration);
    let end = tokio::time::Instant::now() + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..concurrency {
        let (client, g) = (client.clone(), g.clone());
        tasks.spawn(async move {
            let mut done = Vec::new();
            let mut errors = 0;
            while tokio::time::Instant::now() < end {
                let req = CallRequest {
                    input: crate::suite::Input::Prompt {
                        system: None,
                        prompt: format!("stream {i}"),
                    },
                    sampling: g.sampling.clone(),
                    ignore_eos: true,
                };
                match client.complete(&req).await {
                    Ok(c) => done.push(c),
                    Err(_) => errors += 1,
                }
            }
            (done, errors)
        });
    }
    let mut t = Timing {
        ttft: Distribution::seconds(),
        itl: Distribution::seconds(),
        truth: Distribution::seconds(),
        error: Distribution::seconds(),
        errors: 0,
    };
    while let Some(joined) = tasks.join_next().await {
        let (done, errors) = joined.map_err(|e| e.to_string())?;
        t.errors += errors;
        for c in &done {
            t.ttft
                .record(c.timing.first_token.unwrap_or_default().as_secs_f64());
            let stamps: Vec<f64> = c
                .content
                .split_whitespace()
                .filter_map(|s| s.parse::<f64>().ok())
                .map(|us| us / 1e6)
                .collect();
            if stamps.len() != c.timing.marks.len() {
                t.errors += 1;
                continue;
            }
            for (m, s) in c.timing.marks.windows(2).zip(stamps.windows(2)) {
                let measured = m[1].at.saturating_sub(m[0].at).as_secs_f64();
                let truth = s[1] - s[0];
                t.itl.record(measured);
                t.truth.record(truth);
                t.error.record((measured - truth).abs());
            }
        }
    }
    Ok(t)
}

/// What `servegate soak` runs.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// Concurrent streams.
    pub streams: u32,
    /// Windows run back to back; the process is sampled after each.
    pub windows: u32,
    /// Length of each window.
    pub window: Duration,
}

/// The client after a soak window.
struct Sample {
    completed: u64,
    errors: u64,
    rss_mib: Option<f64>,
    fds: Option<f64>,
    threads: Option<f64>,
}

/// A number of this process's `/proc/self/status` (`VmRSS:` in KiB,
/// `Threads:`).
fn status_field(name: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Open file descriptors of this process.
fn open_fds() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

/// Holds `streams` streams against the simulator (TTFT and ITL 20 ms, in
/// its own process) window after window, and samples the client after
/// each: tokens/s, errors, resident memory, open files, threads. Returns
/// the table and whether the soak held: no error, and neither files,
/// threads nor memory growing from the third window to the last (every
/// window's client threads are new: the allocator's arenas for them fill
/// during the first two).
pub fn soak(opts: &SoakOptions) -> Result<(String, bool), String> {
    let can_pin = pinning();
    let pinned = can_pin && pin_self();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let sim = spawn_sim("20ms", "20ms", false, can_pin)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "servegate soak: {} streams of 64 tokens (simulator TTFT 20ms, ITL 20ms), {} windows of {}, client on one runtime thread{}\n",
        opts.streams,
        opts.windows,
        format_secs(opts.window.as_secs_f64()),
        if pinned { " pinned to CPU 0" } else { "" }
    );
    let _ = writeln!(
        out,
        "{:>6} {:>10} {:>10} {:>7} {:>10} {:>6} {:>8}",
        "window", "tokens/s", "requests", "errors", "RSS MiB", "fds", "threads"
    );
    let mut samples: Vec<Sample> = Vec::new();
    for w in 1..=opts.windows {
        let (m, _) = measure(&rt, &sim.url, &gate(opts.streams, 64, opts.window))?;
        let rate = m
            .value("output_tok_s".parse().expect("metric"))
            .unwrap_or(0.0);
        let sample = Sample {
            completed: m.completed,
            errors: m.errors,
            rss_mib: status_field("VmRSS:")
                .map(|k| f64::from(u32::try_from(k).unwrap_or(u32::MAX)) / 1024.0),
            fds: open_fds().map(|f| f64::from(u32::try_from(f).unwrap_or(u32::MAX))),
            threads: status_field("Threads:")
                .map(|n| f64::from(u32::try_from(n).unwrap_or(u32::MAX))),
        };
        let _ = writeln!(
            out,
            "{w:>6} {rate:>10.0} {:>10} {:>7} {:>10} {:>6} {:>8}",
            sample.completed,
            sample.errors,
            sample
                .rss_mib
                .map_or_else(|| "n/a".into(), |r| format!("{r:.1}")),
            sample
                .fds
                .map_or_else(|| "n/a".into(), |f| format!("{f:.0}")),
            sample
                .threads
                .map_or_else(|| "n/a".into(), |f| format!("{f:.0}")),
        );
        samples.push(sample);
    }
    let errors: u64 = samples.iter().map(|s| s.errors).sum();
    let requests: u64 = samples.iter().map(|s| s.completed).sum();
    // Grown from the third window (the first two warm the allocator up) to the last.
    let (third, last) = (
        samples.get(2).or(samples.get(1)).or(samples.first()),
        samples.last(),
    );
    let grew = |f: &dyn Fn(&Sample) -> Option<f64>, slack: f64, spare: f64| match (
        third.and_then(f),
        last.and_then(f),
    ) {
        (Some(a), Some(b)) => b > a * (1.0 + slack) + spare,
        _ => false,
    };
    let leaks = [
        ("memory", grew(&|s| s.rss_mib, 0.25, 1.0)),
        ("file descriptors", grew(&|s| s.fds, 0.0, 8.0)),
        ("threads", grew(&|s| s.threads, 0.0, 0.0)),
    ];
    let grown: Vec<&str> = leaks.iter().filter(|(_, g)| *g).map(|(n, _)| *n).collect();
    let held = errors == 0 && grown.is_empty();
    let _ = writeln!(
        out,
        "\n{}: {requests} requests, {errors} errors{}",
        if held { "held" } else { "FAILED" },
        if grown.is_empty() {
            ", memory, files and threads flat from the third window to the last".to_owned()
        } else {
            format!(", grew: {}", grown.join(", "))
        }
    );
    Ok((out, held))
}
