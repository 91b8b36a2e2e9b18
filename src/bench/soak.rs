//! `servegate soak`: many streams held against the simulator window after
//! window, the client sampled after each (errors, memory, files, threads)
//! and judged on whether they stayed flat.

use std::fmt::Write as _;
use std::time::Duration;

use super::process::{pin_self, spawn_sim, taskset};
use super::{client, gate};
use crate::load::runner::run_gate;
use crate::load::threads::Threads;
use crate::units::format_secs;

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
        None,
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
        let m = rt
            .block_on(run_gate(
                &client(&sim.url)?,
                &gate(opts.streams, 64, opts.window),
                Threads::ONE,
            ))
            .map_err(|e| e.to_string())?;
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
