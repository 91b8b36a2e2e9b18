//! Thread-per-core: a gate's streams are split over client threads, each
//! running a current-thread runtime of its own that owns its shard of the
//! streams and their sockets. Nothing is stolen between threads, so a
//! stream's timing stays on one core; each thread records its own
//! histograms, merged when the window closes. One thread saturates near
//! 60k paced tokens/s (bench-client); a node of eight GPUs, or a router in
//! front of several, streams more.
//!
//! Every thread also measures itself (CPU busy share, time waiting for a
//! CPU), for the gate's self-check ([`super::selfcheck`]).

use std::time::Duration;

use crate::suite::{ClientThreads, Load, Pace};

/// Streams one client thread takes on when the count is chosen from the
/// load.
const STREAMS_PER_THREAD: f64 = 200.0;
/// Expected tokens per second one client thread takes on: at the 15–17 µs
/// of CPU a paced token costs (bench-client), a third of a core, leaving
/// room for the bursts of a load that starts together.
const TOKENS_PER_THREAD: f64 = 20_000.0;
/// What a closed-loop stream is assumed to decode when the count is chosen
/// (its server's speed is what the gate measures): 100 tok/s, 10 ms a token.
const STREAM_TOK_S: f64 = 100.0;
/// Most client threads `auto` chooses.
const AUTO_MAX: usize = 8;
/// `SERVEGATE_PIN_CLIENT=1` pins client threads to cores, `0` never does;
/// unset, threads are pinned on machines large enough for the server to
/// keep cores of its own.
pub(crate) const PIN_ENV: &str = "SERVEGATE_PIN_CLIENT";

/// How many client threads drive a gate, and what chose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threads {
    /// At least one.
    pub count: usize,
    /// `auto`, `suite` or `--client-threads`.
    pub chosen: &'static str,
    /// Pin each thread to a core of its own: `None` where the machine has
    /// room (see [`pins`]).
    pub pin: Option<bool>,
}

impl Threads {
    /// One thread, as asked by a caller that measures the client itself.
    pub const ONE: Threads = Threads {
        count: 1,
        chosen: "one",
        pin: None,
    };

    /// The threads of `load`: `forced` (`--client-threads`) first, then
    /// the suite's count, else chosen from the load and the machine's cores.
    pub fn of(load: &Load, forced: Option<u32>) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let (count, chosen) = match (forced, load.client_threads) {
            (Some(n), _) => (n.max(1) as usize, "--client-threads"),
            (None, ClientThreads::Fixed(n)) => (n.max(1) as usize, "suite"),
            (None, ClientThreads::Auto) => (auto(load, cores), "auto"),
        };
        Self {
            count,
            chosen,
            pin: pin_from_env(),
        }
    }
}

/// The count `auto` chooses for `load` on a machine of `cores`: enough
/// threads for its streams and its expected tokens per second, at most half
/// the cores (the server, or other work of the machine, needs the rest) and
/// at most [`AUTO_MAX`].
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "small positive counts"
)]
pub fn auto(load: &Load, cores: usize) -> usize {
    let (streams, tok_s) = match load.pace {
        Pace::Closed { concurrency } => {
            let c = f64::from(concurrency);
            (c, c * STREAM_TOK_S)
        }
        Pace::Open {
            rate,
            max_in_flight,
            ..
        } => (
            max_in_flight.map_or(0.0, f64::from),
            rate * f64::from(load.output_tokens),
        ),
    };
    let wanted = (streams / STREAMS_PER_THREAD)
        .max(tok_s / TOKENS_PER_THREAD)
        .ceil()
        .max(1.0) as usize;
    wanted.min((cores / 2).clamp(1, AUTO_MAX))
}

/// The CPUs `n` client threads are pinned to (`None`: not pinned): the
/// highest of `allowed` (where this process may run), one each, where
/// `pin` says so — by default only where at least 8 CPUs are allowed and four times as
/// many as threads, so that the server keeps cores of its own and two
/// runs on a small machine do not crowd one core.
pub fn pins(n: usize, pin: Option<bool>, allowed: &[usize]) -> Vec<Option<usize>> {
    let yes = pin.unwrap_or(allowed.len() >= 8 && allowed.len() >= 4 * n);
    if !yes || allowed.len() < n {
        return vec![None; n];
    }
    allowed.iter().rev().take(n).map(|&c| Some(c)).collect()
}

/// `SERVEGATE_PIN_CLIENT`, when it says yes or no.
pub(crate) fn pin_from_env() -> Option<bool> {
    match std::env::var(PIN_ENV).ok()?.trim() {
        "1" | "true" | "yes" => Some(true),
        "0" | "false" | "no" => Some(false),
        _ => None,
    }
}

/// The CPUs this process may run on (empty where unknown).
#[cfg(target_os = "linux")]
pub(crate) fn allowed_cpus() -> Vec<usize> {
    use nix::sched::{CpuSet, sched_getaffinity};
    use nix::unistd::Pid;
    let Ok(set) = sched_getaffinity(Pid::from_raw(0)) else {
        return Vec::new();
    };
    (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect()
}

/// The CPUs this process may run on (unknown here).
#[cfg(not(target_os = "linux"))]
pub(crate) fn allowed_cpus() -> Vec<usize> {
    Vec::new()
}

/// Lets the calling thread run on `cpus` only; whether it could.
#[cfg(target_os = "linux")]
fn run_only_on(cpus: &[usize]) -> bool {
    use nix::sched::{CpuSet, sched_setaffinity};
    use nix::unistd::Pid;
    let mut set = CpuSet::new();
    !cpus.is_empty()
        && cpus.iter().all(|&c| set.set(c).is_ok())
        && sched_setaffinity(Pid::from_raw(0), &set).is_ok()
}

/// Lets the calling thread run on `cpus` only (not here).
#[cfg(not(target_os = "linux"))]
fn run_only_on(_cpus: &[usize]) -> bool {
    false
}

/// Places the calling client thread for a gate: pinned to `cpu`, or free
/// to run on every CPU of `all` (it may have been pinned for an earlier
/// gate). The CPU it is pinned to, if it is.
pub fn place(cpu: Option<usize>, all: &[usize]) -> Option<usize> {
    match cpu {
        Some(c) if run_only_on(&[c]) => Some(c),
        _ => {
            run_only_on(all);
            None
        }
    }
}

/// Work for a client thread.
pub type Job = Box<dyn FnOnce() + Send>;

/// The client threads of the process, kept from gate to gate: a thread
/// started per gate would leave the allocator an arena per thread that
/// came and went (resident memory stepping up over a long run), where a
/// kept thread reuses its own.
static WORKERS: std::sync::Mutex<Vec<std::sync::mpsc::Sender<Job>>> =
    std::sync::Mutex::new(Vec::new());

/// Runs `job` on client thread `k`, started the first time it is asked
/// for (or again, when a job panicked and took it down). `Err` when no
/// thread can be started; the job is then dropped unrun, as it is when it
/// reaches a thread on its way down. Gates run one at a time: a job for a
/// thread still busy with another waits for it.
pub(crate) fn run_on(k: usize, job: Job) -> Result<(), String> {
    let start = |k: usize| -> Result<std::sync::mpsc::Sender<Job>, String> {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name(format!("servegate-client-{k}"))
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
            })
            .map(|_| tx)
            .map_err(|e| e.to_string())
    };
    let mut workers = WORKERS
        .lock()
        .map_err(|_| "the client threads' table is poisoned".to_owned())?;
    while workers.len() <= k {
        let next = start(workers.len())?;
        workers.push(next);
    }
    match workers[k].send(job) {
        Ok(()) => Ok(()),
        Err(std::sync::mpsc::SendError(job)) => {
            workers[k] = start(k)?;
            workers[k]
                .send(job)
                .map_err(|_| format!("client thread {k} ended at once"))
        }
    }
}

/// The CPU time the calling thread has used.
#[cfg(target_os = "linux")]
pub(crate) fn thread_cpu() -> Option<Duration> {
    use nix::time::{ClockId, clock_gettime};
    let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).ok()?;
    Some(Duration::new(
        u64::try_from(t.tv_sec()).ok()?,
        u32::try_from(t.tv_nsec()).ok()?,
    ))
}

/// The CPU time the calling thread has used (unknown here).
#[cfg(not(target_os = "linux"))]
pub(crate) fn thread_cpu() -> Option<Duration> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(pace: Pace, output_tokens: u32) -> Load {
        Load::new(pace, crate::suite::LoadPrompt::Tokens(16), output_tokens)
    }

    #[test]
    fn auto_follows_the_streams_and_the_tokens_within_half_the_cores() {
        let closed = |c| load(Pace::Closed { concurrency: c }, 128);
        assert_eq!(auto(&closed(1), 64), 1);
        assert_eq!(auto(&closed(200), 64), 1);
        assert_eq!(auto(&closed(201), 64), 2);
        assert_eq!(auto(&closed(1000), 64), 5);
        assert_eq!(auto(&closed(10_000), 64), AUTO_MAX);
        assert_eq!(auto(&closed(1000), 4), 2);
        assert_eq!(auto(&closed(1000), 2), 1);
        assert_eq!(auto(&closed(1000), 1), 1);
        let open = |rate, cap| {
            load(
                Pace::Open {
                    rate,
                    arrival: crate::suite::Arrival::Constant,
                    seed: 0,
                    max_in_flight: cap,
                },
                500,
            )
        };
        // 100 req/s of 500 tokens: 50k tokens/s.
        assert_eq!(auto(&open(100.0, None), 64), 3);
        assert_eq!(auto(&open(1.0, Some(600)), 64), 3);
    }

    #[test]
    fn a_forced_count_wins_over_the_suite_and_auto() {
        let mut l = load(Pace::Closed { concurrency: 4 }, 16);
        assert_eq!(Threads::of(&l, None).chosen, "auto");
        l.client_threads = ClientThreads::Fixed(3);
        assert_eq!(
            (Threads::of(&l, None).count, Threads::of(&l, None).chosen),
            (3, "suite")
        );
        assert_eq!(Threads::of(&l, Some(2)).count, 2);
        assert_eq!(Threads::of(&l, Some(2)).chosen, "--client-threads");
    }

    #[test]
    fn pinning_only_where_asked_or_where_there_is_room() {
        assert_eq!(pins(2, Some(false), &allowed_cpus()), vec![None, None]);
        let allowed = allowed_cpus();
        if allowed.is_empty() {
            return;
        }
        let pinned = pins(1, Some(true), &allowed);
        assert_eq!(pinned, vec![allowed.last().copied()]);
        assert_eq!(
            pins(allowed.len() + 1, Some(true), &allowed),
            vec![None; allowed.len() + 1]
        );
    }

    #[test]
    fn client_threads_are_kept_and_replaced_when_a_job_takes_one_down() {
        // Which thread runs a job on client thread 3; `None` when the job
        // was dropped unrun (sent to a thread on its way down).
        let name = || {
            let (tx, rx) = std::sync::mpsc::channel();
            run_on(
                3,
                Box::new(move || {
                    let t = std::thread::current();
                    let _ = tx.send((t.id(), t.name().map(str::to_owned)));
                }),
            )
            .unwrap();
            rx.recv().ok()
        };
        let (first, label) = name().unwrap();
        assert_eq!(label.as_deref(), Some("servegate-client-3"));
        assert_eq!(
            name().unwrap().0,
            first,
            "the same thread serves the next gate"
        );
        run_on(3, Box::new(|| panic!("a job that panics"))).unwrap();
        // The panic took the thread down; a later job gets a new one.
        let replaced = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            name().is_some_and(|(id, _)| id != first)
        });
        assert!(replaced);
    }

    /// Another thread's work is not this one's, and this one's spin is:
    /// judged by the clocks themselves, not by wall time, so that a busy
    /// machine (which gives a spin a fraction of its wall time) cannot fail it.
    #[test]
    fn the_thread_clock_counts_this_threads_work_only() {
        let Some(before) = thread_cpu() else { return };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let other = std::thread::spawn(move || {
            let mut x = 0u64;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            thread_cpu()
        });
        std::thread::sleep(Duration::from_millis(50));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let others = other.join().unwrap().unwrap();
        let slept = thread_cpu().unwrap().saturating_sub(before);
        assert!(
            slept < Duration::from_millis(10) && slept < others,
            "sleeping cost {slept:?} while the other thread spun {others:?}"
        );
        // Spin until this thread's clock says 30 ms, within a minute of wall.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        let spun = loop {
            x = x.wrapping_add(std::hint::black_box(1));
            let spun = thread_cpu().unwrap().saturating_sub(before);
            if spun >= Duration::from_millis(30) || start.elapsed() > Duration::from_secs(60) {
                break spun;
            }
        };
        assert!(
            spun >= Duration::from_millis(30),
            "spinning for {:?} cost {spun:?} ({x})",
            start.elapsed()
        );
    }
}
