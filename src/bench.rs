//! `servegate bench-client`: the client's own cost and accuracy, measured
//! against the stamped simulator (`servegate sim --stamp-tokens`) running
//! in a separate process — on a core of its own where the machine has one
//! beside the client's threads — so that only the client's work is counted.
//!
//! One row per pacing, client threads and streams: tokens per second held,
//! the whole process's CPU per token, the client threads' busy share and
//! time waiting for a CPU, the share of token chunks a late read merged,
//! and the timing error against the simulator's own stamps — each
//! request's TTFT against the server's (first token sent − request read)
//! and each gap between tokens against the gap between their send stamps —
//! beside the most the self-check says the client can have moved each p99.
//! `--contention` adds other work (a busy host, or a real-time thread that
//! starves the client's core): the self-check judged as a classifier.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::load::metrics::GateMetrics;
use crate::load::runner::{Sample as Answer, Watch, run_gate, run_watched};
use crate::load::selfcheck::ClientCheck;
use crate::load::threads::Threads;
use crate::suite::Slo;
use crate::suite::node::Loc;
use crate::suite::{Api, Gate, Load, LoadPrompt, Pace, Sampling, Timeouts};
use crate::units::{format_duration, format_secs};

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Streams (closed-loop concurrency) of each row.
    pub streams: Vec<u32>,
    /// Client threads of each row.
    pub threads: Vec<usize>,
    /// The simulator's gap between tokens of each row (0: unpaced, every
    /// token as fast as it can send).
    pub itl: Vec<Duration>,
    /// Tokens per stream.
    pub tokens: u32,
    /// Measured window per row.
    pub duration: Duration,
    /// Other work beside the client during every row.
    pub contention: Contention,
}

/// Other work beside the client: what the self-check must tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Contention {
    /// Nothing else.
    None,
    /// A busy host: a worker at normal priority on every core, spinning
    /// and sweeping 32 MiB (the CPU, its caches and memory bandwidth
    /// shared, as a GPU host's own processes share them). The client keeps
    /// its share and its stamps keep the figures true.
    Host,
    /// A starved client: a real-time (`SCHED_FIFO`) thread on the
    /// client's core, 20 ms on and 5 ms off, as a busy-polling scheduler
    /// thread takes it. The client's figures move; the self-check must
    /// say so.
    Starved,
}

impl Contention {
    fn words(self) -> &'static str {
        match self {
            Contention::None => "",
            Contention::Host => {
                "; contention: a worker at normal priority on every core (spinning, sweeping 32 MiB)"
            }
            Contention::Starved => {
                "; contention: a real-time thread on the client's core, 20 ms on, 5 ms off"
            }
        }
    }
}

/// A child process, killed when dropped.
struct Killed {
    child: Child,
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A simulator in a child process, killed when dropped.
struct SimProcess {
    _child: Killed,
    url: String,
}

/// `command` run under `taskset -c cpus` when `cpus` is given.
fn pinned(program: &std::ffi::OsStr, cpus: Option<&str>) -> Command {
    match cpus {
        Some(cpus) => {
            let mut c = Command::new("taskset");
            c.args(["-c", cpus]).arg(program);
            c
        }
        None => Command::new(program),
    }
}

fn spawn_sim(
    ttft: Duration,
    itl: Duration,
    stamp: bool,
    cpu: Option<usize>,
) -> Result<SimProcess, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let (ttft, itl) = (
        format!("{}us", ttft.as_micros()),
        format!("{}us", itl.as_micros()),
    );
    // Capacity beyond any level measured: the batching model must not
    // stretch the truth the client is compared with.
    let mut args = vec![
        "sim",
        "--port",
        "0",
        "--ttft",
        &ttft,
        "--itl",
        &itl,
        "--capacity",
        "1000000",
    ];
    if stamp {
        args.push("--stamp-tokens");
    }
    let cpu = cpu.map(|c| c.to_string());
    let mut child = pinned(exe.as_os_str(), cpu.as_deref())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("failed to start the simulator process: {e}"))?;
    let stdout = child.stdout.take().ok_or("no simulator stdout")?;
    let child = Killed { child };
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| format!("failed to read the simulator's address: {e}"))?;
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .ok_or_else(|| format!("the simulator printed no address: {line:?}"))?
        .to_owned();
    Ok(SimProcess { _child: child, url })
}

/// Threads of other work, stopped and joined when dropped.
struct Contenders {
    stop: Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Each one's CPU time so far, ns, as it last said (every few tens of
    /// microseconds to 25 ms): not the client's, so left out of its cost.
    cpu: Arc<Vec<std::sync::atomic::AtomicU64>>,
}

impl Contenders {
    /// Their CPU time so far.
    fn cpu(&self) -> Duration {
        Duration::from_nanos(
            self.cpu
                .iter()
                .map(|c| c.load(std::sync::atomic::Ordering::Relaxed))
                .sum(),
        )
    }
}

impl Drop for Contenders {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Keeps the calling thread on `cpu` (again: `pin_self` moves every
/// thread of the process).
#[cfg(target_os = "linux")]
fn stay_on(cpu: usize) {
    use nix::sched::{CpuSet, sched_setaffinity};
    let mut set = CpuSet::new();
    if set.set(cpu).is_ok() {
        let _ = sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
    }
}

/// Makes the calling thread real-time (`SCHED_FIFO`, priority 10) with
/// util-linux's `chrt` (as `taskset` pins); `Err` with why not.
#[cfg(target_os = "linux")]
fn realtime() -> Result<(), String> {
    let tid = nix::unistd::gettid().to_string();
    let out = Command::new("chrt")
        .args(["-f", "-p", "10", &tid])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("chrt: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// Starts the contention of `kind` on `cpus` (the client's first, for a
/// starved client); `None` for none.
#[cfg(target_os = "linux")]
fn contend(kind: Contention, cpus: &[usize]) -> Result<Option<Contenders>, String> {
    use std::sync::atomic::Ordering;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut threads = Vec::new();
    let on: Vec<usize> = match kind {
        Contention::None => return Ok(None),
        Contention::Host => cpus.to_vec(),
        Contention::Starved => cpus.first().copied().into_iter().collect(),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let used: Arc<Vec<std::sync::atomic::AtomicU64>> = Arc::new(
        on.iter()
            .map(|_| std::sync::atomic::AtomicU64::new(0))
            .collect(),
    );
    for (k, cpu) in on.into_iter().enumerate() {
        let (stop, tx, used) = (Arc::clone(&stop), tx.clone(), Arc::clone(&used));
        let say = move || {
            let ns = crate::load::threads::thread_cpu().map_or(0, |d| d.as_nanos());
            used[k].store(u64::try_from(ns).unwrap_or(u64::MAX), Ordering::Relaxed);
        };
        threads.push(std::thread::spawn(move || {
            stay_on(cpu);
            if kind == Contention::Starved {
                let _ = tx.send(realtime());
                while !stop.load(Ordering::Relaxed) {
                    say();
                    stay_on(cpu);
                    let on = std::time::Instant::now();
                    while on.elapsed() < Duration::from_millis(20) {
                        std::hint::spin_loop();
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            } else {
                let _ = tx.send(Ok(()));
                let mut sweep = vec![0u8; 32 << 20];
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    say();
                    stay_on(cpu);
                    for _ in 0..4096 {
                        sweep[i] = sweep[i].wrapping_add(1);
                        i = (i + 4099) % sweep.len();
                    }
                    std::hint::black_box(&sweep);
                }
            }
        }));
    }
    drop(tx);
    let contenders = Contenders {
        stop,
        threads,
        cpu: used,
    };
    // Each thread says once whether it started as asked.
    for started in rx.iter().take(contenders.threads.len()) {
        started.map_err(|e| {
            format!("--contention starved needs a real-time thread (SCHED_FIFO), which this machine refused: {e}")
        })?;
    }
    Ok(Some(contenders))
}

/// Other work beside the client (none here: the threads it needs are
/// Linux's).
#[cfg(not(target_os = "linux"))]
fn contend(kind: Contention, _cpus: &[usize]) -> Result<Option<Contenders>, String> {
    match kind {
        Contention::None => Ok(None),
        _ => Err("--contention needs Linux".into()),
    }
}

/// Whether `taskset` can pin processes here.
fn taskset() -> bool {
    Command::new("taskset")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Pins every thread of this process to `cpus` (threads started later
/// inherit it).
fn pin_self(cpus: &str) -> bool {
    Command::new("taskset")
        .args(["-a", "-cp", cpus, &std::process::id().to_string()])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
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
        sweep: None,
    }
}

fn client(url: &str) -> Result<Client, String> {
    Client::new(url, Api::OpenAiChat, "bench", None, Timeouts::default()).map_err(|e| e.to_string())
}

/// Answers kept whole per row for the timing error.
const KEEP: usize = 2000;

/// The timing error of a row, from the answers kept whole.
#[derive(Default)]
struct Truth {
    ttft: Vec<f64>,
    /// The server's TTFT: first token sent − request read.
    ttft_true: Vec<f64>,
    ttft_err: Vec<f64>,
    /// Where the error goes: the request waiting in the server's socket
    /// (its last bytes' arrival → read), and the rest, outside the
    /// server: the client's write, the wire both ways, the client's
    /// stamping (measured TTFT − (first token sent − request arrived)).
    queue: Vec<f64>,
    outside: Vec<f64>,
    /// The client's write of the request (sent → written).
    write: Vec<f64>,
    itl: Vec<f64>,
    itl_true: Vec<f64>,
    itl_err: Vec<f64>,
    /// Answers whose stamps did not match their tokens.
    unreadable: u64,
}

/// Microseconds since the epoch, as the simulator wrote them.
fn micros(word: &str) -> Option<f64> {
    word.parse::<f64>().ok().map(|us| us / 1e6)
}

impl Truth {
    fn add(&mut self, a: &Answer) {
        let words: Vec<&str> = a.content.split_whitespace().collect();
        let first: Vec<Option<f64>> = words
            .first()
            .map(|w| w.split(':').map(micros).collect())
            .unwrap_or_default();
        let marks = &a.timing.marks;
        let (&[Some(arrived), Some(read), Some(sent)], Some(measured)) =
            (first.as_slice(), a.timing.first_token)
        else {
            self.unreadable += 1;
            return;
        };
        let mut stamps = vec![sent];
        stamps.extend(words[1..].iter().filter_map(|w| micros(w)));
        if stamps.len() != marks.len() {
            self.unreadable += 1;
            return;
        }
        let (measured, truth) = (measured.as_secs_f64(), sent - read);
        self.ttft.push(measured);
        self.ttft_true.push(truth);
        self.ttft_err.push((measured - truth).abs());
        self.queue.push(read - arrived);
        self.outside.push(measured - (sent - arrived));
        if let Some(w) = a.timing.written {
            self.write.push(w.as_secs_f64());
        }
        for (m, s) in marks.windows(2).zip(stamps.windows(2)) {
            let measured = m[1].at.saturating_sub(m[0].at).as_secs_f64();
            let truth = s[1] - s[0];
            self.itl.push(measured);
            self.itl_true.push(truth);
            self.itl_err.push((measured - truth).abs());
        }
    }
}

/// The `q` quantile of `values` (nearest rank), or NaN for none.
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short list"
    )]
    let i = ((q * v.len() as f64).ceil() as usize).saturating_sub(1);
    v.get(i).copied().unwrap_or(f64::NAN)
}

fn p99(values: &[f64]) -> String {
    let v = quantile(values, 0.99);
    if v.is_nan() {
        "-".into()
    } else {
        format_secs(v)
    }
}

/// One row: a gate of `streams` streams on `threads` client threads.
struct Row {
    metrics: GateMetrics,
    truth: Truth,
    /// The whole process's CPU (every thread servegate started) per token
    /// it received, warm-up included.
    per_token: Option<Duration>,
    /// The self-check of the row's TTFT p99 and ITL p99, as a gate
    /// gating them would judge it.
    check: ClientCheck,
}

/// This process's CPU time so far (user and system, every thread).
fn process_cpu() -> Option<Duration> {
    #[cfg(unix)]
    {
        use nix::sys::resource::{UsageWho, getrusage};
        let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
        let secs = |t: nix::sys::time::TimeVal| {
            Duration::new(
                u64::try_from(t.tv_sec()).unwrap_or(0),
                u32::try_from(t.tv_usec()).unwrap_or(0) * 1000,
            )
        };
        Some(secs(u.user_time()) + secs(u.system_time()))
    }
    #[cfg(not(unix))]
    None
}

fn measure_row(
    rt: &tokio::runtime::Runtime,
    url: &str,
    streams: u32,
    threads: usize,
    opts: &BenchOptions,
    others: Option<&Contenders>,
) -> Result<Row, String> {
    let client = client(url)?;
    let watch = Arc::new(Watch::keeping(KEEP));
    let threads = Threads {
        count: threads,
        chosen: "bench",
        // The process is pinned as a whole (see `run`).
        pin: Some(false),
    };
    let g = gate(streams, opts.tokens, opts.duration);
    // Servegate's own: the process's, less the contention's.
    let own =
        || process_cpu().map(|c| c.saturating_sub(others.map_or(Duration::ZERO, Contenders::cpu)));
    let before = own();
    let metrics = rt.block_on(run_watched(&client, &g, threads, &watch))?;
    let used = own().zip(before).map(|(a, b)| a.saturating_sub(b));
    let tokens = metrics.output_tokens + u64::from(g.load.warmup) * u64::from(opts.tokens);
    let per_token = used.map(|cpu| cpu / u32::try_from(tokens.max(1)).unwrap_or(u32::MAX));
    let mut truth = Truth::default();
    for a in watch.samples() {
        truth.add(&a);
    }
    let keys = ["ttft.p99", "itl.p99"].map(|k| k.parse().expect("metric key"));
    let (figures, _) = metrics.client_bounds(&keys);
    let check = metrics.client.clone().judged(figures, false);
    Ok(Row {
        metrics,
        truth,
        per_token,
        check,
    })
}

/// A duration as a table shows it (`0` for none).
fn gap(d: Duration) -> String {
    if d.is_zero() {
        "0".to_owned()
    } else {
        format_duration(d)
    }
}

/// A figure, or `n/a` (NaN).
fn or_na(v: f64, shown: impl Fn(f64) -> String) -> String {
    if v.is_nan() {
        "n/a".to_owned()
    } else {
        shown(v)
    }
}

impl Row {
    /// Output tokens per second held.
    fn rate(&self) -> f64 {
        self.metrics
            .value("output_tok_s".parse().expect("metric"))
            .unwrap_or(0.0)
    }

    /// The self-check's bound on a figure of the row, as shown.
    fn bound(&self, figure: &str) -> String {
        self.check
            .figures
            .iter()
            .find(|f| f.figure == figure)
            .and_then(|f| f.bound)
            .map_or_else(|| "-".into(), format_secs)
    }

    /// Its line of the main table and of the TTFT breakdown.
    fn lines(&self, threads: usize, itl: Duration, streams: u32, placed: bool) -> (String, String) {
        let m = &self.metrics;
        let per_token = self.per_token.map_or_else(
            || "n/a".into(),
            |cpu| format!("{:.2}µs", cpu.as_secs_f64() * 1e6),
        );
        let worst = |f: fn(&crate::load::selfcheck::ThreadCheck) -> Option<f64>| {
            m.client
                .threads
                .iter()
                .filter_map(f)
                .fold(f64::NAN, f64::max)
        };
        #[expect(clippy::cast_precision_loss, reason = "token counts")]
        let merged = if m.bounds.marks == 0 {
            "n/a".to_owned()
        } else {
            format!(
                "{:.1}%",
                100.0 * m.bounds.merged as f64 / m.bounds.marks as f64
            )
        };
        let t = &self.truth;
        let main = format!(
            "{threads:>7} {:>6} {streams:>7} {:>10.0} {per_token:>9} {:>6} {:>6} {merged:>7} {:>21} {:>10} {:>10} {:>21} {:>10} {:>10} {:>6}  {}{}",
            gap(itl),
            self.rate(),
            or_na(worst(|t| t.busy), |b| format!("{:.0}%", 100.0 * b)),
            or_na(worst(|t| t.waited), |w| format!("{:.0}%", 100.0 * w)),
            format!("{} ({})", p99(&t.ttft), p99(&t.ttft_true)),
            p99(&t.ttft_err),
            self.bound("ttft.p99"),
            format!("{} ({})", p99(&t.itl), p99(&t.itl_true)),
            p99(&t.itl_err),
            self.bound("itl.p99"),
            m.errors + t.unreadable,
            if self.check.limited.is_some() {
                "LIMITED"
            } else {
                "ok"
            },
            if placed {
                ""
            } else {
                " (sim shares the client's cores)"
            },
        );
        let both = |v: &[f64]| {
            let p50 = quantile(v, 0.5);
            format!("{} / {}", or_na(p50, format_secs), p99(v))
        };
        let parts = format!(
            "{threads:>7} {:>6} {streams:>7} {:>21} {:>21} {:>21} {:>21}",
            gap(itl),
            both(&t.ttft_err),
            both(&t.queue),
            both(&t.outside),
            both(&t.write),
        );
        (main, parts)
    }
}

/// The header of the main table.
fn header(opts: &BenchOptions) -> String {
    let mut out = format!(
        "servegate bench-client: stamped simulator in its own process; {} tokens per stream, {} per row{}\n",
        opts.tokens,
        format_secs(opts.duration.as_secs_f64()),
        opts.contention.words()
    );
    let _ = writeln!(
        out,
        "truth: the simulator's stamps (TTFT: first token sent − request read; ITL: gap between send stamps); |err| per request and per gap, over the first {KEEP} answers; bound: the most the self-check says the client can have moved the p99 (LIMITED past 2%, at least 0.1ms); CPU/token: the whole process, warm-up included\n"
    );
    let _ = writeln!(
        out,
        "{:>7} {:>6} {:>7} {:>10} {:>9} {:>6} {:>6} {:>7} {:>21} {:>10} {:>10} {:>21} {:>10} {:>10} {:>6}  self-check",
        "threads",
        "ITL",
        "streams",
        "tokens/s",
        "CPU/token",
        "busy",
        "waited",
        "merged",
        "TTFT p99 (true)",
        "|err| p99",
        "bound",
        "ITL p99 (true)",
        "|err| p99",
        "bound",
        "errors",
    );
    out
}

/// Runs every row and returns the table.
pub fn run(opts: &BenchOptions) -> Result<String, String> {
    let cpus = crate::load::threads::allowed_cpus();
    let can_pin = taskset() && cpus.len() >= 2;
    let list = |c: &[usize]| {
        c.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut out = header(opts);
    if opts.contention != Contention::None && !can_pin {
        return Err("--contention needs `taskset` and two CPUs".into());
    }
    let contenders = contend(opts.contention, &cpus)?;
    let mut held: Vec<(Duration, u32, usize, f64)> = Vec::new();
    let mut parts = String::new();
    for &itl in &opts.itl {
        for &threads in &opts.threads {
            // The simulator on the last core, the client's threads on the
            // others, when they leave it one; else everything shares.
            let own = can_pin && cpus.len() > threads;
            let placed = own && pin_self(&list(&cpus[..cpus.len() - 1]));
            if !own && can_pin {
                let _ = pin_self(&list(&cpus));
            }
            let ttft = if itl.is_zero() {
                Duration::ZERO
            } else {
                Duration::from_millis(10)
            };
            let sim = spawn_sim(ttft, itl, true, cpus.last().copied().filter(|_| own))?;
            for &streams in &opts.streams {
                let row = measure_row(&rt, &sim.url, streams, threads, opts, contenders.as_ref())?;
                held.push((itl, streams, threads, row.rate()));
                let (main, part) = row.lines(threads, itl, streams, placed);
                let _ = writeln!(out, "{main}");
                let _ = writeln!(parts, "{part}");
            }
        }
    }
    if can_pin {
        let _ = pin_self(&list(&cpus));
    }
    let _ = writeln!(
        out,
        "\nwhere the TTFT error goes (p50 / p99): the request waiting in the simulator's socket (arrival → read), and outside the simulator (the client's write, the wire both ways, the client's stamps)"
    );
    let _ = writeln!(
        out,
        "{:>7} {:>6} {:>7} {:>21} {:>21} {:>21} {:>21}",
        "threads", "ITL", "streams", "|TTFT err|", "server queue", "client + wire", "of it: write"
    );
    out.push_str(&parts);
    scaling(&mut out, &held);
    Ok(out)
}

/// Tokens/s per added thread, as a ratio to one thread's, for each pacing
/// and streams measured on several thread counts.
fn scaling(out: &mut String, held: &[(Duration, u32, usize, f64)]) {
    for &(itl, streams, threads, rate) in held {
        let Some(&(.., one)) = held
            .iter()
            .find(|(i, s, n, _)| *i == itl && *s == streams && *n == 1)
        else {
            continue;
        };
        if threads > 1 && one > 0.0 {
            let _ = writeln!(
                out,
                "scaling: {streams} streams, ITL {}: {threads} threads hold {:.2}× the tokens/s of one",
                if itl.is_zero() {
                    "0".to_owned()
                } else {
                    format_duration(itl)
                },
                rate / one
            );
        }
    }
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
/// threads nor memory growing from the second window to the last (the
/// first warms the allocator up).
pub fn soak(opts: &SoakOptions) -> Result<(String, bool), String> {
    let cpus = crate::load::threads::allowed_cpus();
    let can_pin = taskset() && cpus.len() >= 2;
    let pinned = can_pin && pin_self(&cpus[0].to_string());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let twenty = Duration::from_millis(20);
    let sim = spawn_sim(
        twenty,
        twenty,
        false,
        cpus.last().copied().filter(|_| can_pin),
    )?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "servegate soak: {} streams of 64 tokens (simulator TTFT 20ms, ITL 20ms), {} windows of {}, client on one thread{}\n",
        opts.streams,
        opts.windows,
        format_secs(opts.window.as_secs_f64()),
        if pinned {
            format!(" pinned to CPU {}", cpus[0])
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "{:>6} {:>10} {:>10} {:>7} {:>10} {:>6} {:>8}",
        "window", "tokens/s", "requests", "errors", "RSS MiB", "fds", "threads"
    );
    let mut samples: Vec<Sample> = Vec::new();
    for w in 1..=opts.windows {
        let m = rt.block_on(run_gate(
            &client(&sim.url)?,
            &gate(opts.streams, 64, opts.window),
            Threads::ONE,
        ))?;
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
    // Grown from the second window (the first warms the allocator up) to the last.
    let (second, last) = (samples.get(1).or(samples.first()), samples.last());
    let grew = |f: &dyn Fn(&Sample) -> Option<f64>, slack: f64, spare: f64| match (
        second.and_then(f),
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
            ", memory, files and threads flat from the second window to the last".to_owned()
        } else {
            format!(", grew: {}", grown.join(", "))
        }
    );
    Ok((out, held))
}
