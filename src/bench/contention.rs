//! Other work beside the client during a row, what the self-check must
//! tell apart: a busy host (a worker on every core) or a starved client (a
//! real-time thread on its core), their threads and the CPU they used.

#[cfg(target_os = "linux")]
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

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
    pub(super) fn words(self) -> &'static str {
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

/// Threads of other work, stopped and joined when dropped.
pub(super) struct Contenders {
    stop: Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Each one's CPU time so far, ns, as it last said (every few tens of
    /// microseconds to 25 ms): not the client's, so left out of its cost.
    cpu: Arc<Vec<std::sync::atomic::AtomicU64>>,
}

impl Contenders {
    /// Their CPU time so far.
    pub(super) fn cpu(&self) -> Duration {
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
pub(super) fn contend(kind: Contention, cpus: &[usize]) -> Result<Option<Contenders>, String> {
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
pub(super) fn contend(kind: Contention, _cpus: &[usize]) -> Result<Option<Contenders>, String> {
    match kind {
        Contention::None => Ok(None),
        _ => Err("--contention needs Linux".into()),
    }
}
