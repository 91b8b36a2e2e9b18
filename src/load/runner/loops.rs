//! The loops one client thread runs over a window: closed (workers, each
//! sending its next request when the previous one ends) and open (starts
//! on the schedule, latency from each intended start).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::breaker::Breaker;
use super::request::send;
use super::watch::Watch;
use crate::client::{CallError, Client, ErrorKind};
use crate::load::metrics::{LATE_START, Recorder, Slo};
use crate::random::SplitMix;
use crate::suite::{Arrival, Gate};

/// A measured (or warm-up) window: when it stops, the index of its first
/// request, how its count maps to request indices, how many requests have
/// finished so far (for progress), the breaker that ends it early, and who
/// watches it.
#[derive(Debug)]
pub(super) struct Window {
    pub(super) bound: Bound,
    pub(super) first: u32,
    /// Count `i` is request `first + i * stride.1 + stride.0`: a thread's
    /// own warm-up takes every n-th index from its own.
    pub(super) stride: (u32, u32),
    /// Its prompts' salt ([`crate::load::workload::prompt`]).
    pub(super) salt: u64,
    pub(super) finished: Arc<AtomicU64>,
    pub(super) breaker: Arc<Breaker>,
    pub(super) watch: Arc<Watch>,
}

/// When a window stops: after `count` requests and/or at `deadline`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bound {
    pub(super) count: Option<u32>,
    pub(super) deadline: Option<Instant>,
}

impl Bound {
    fn allows(&self, i: u32, at: Instant) -> bool {
        self.count.is_none_or(|c| i < c) && self.deadline.is_none_or(|d| at < d)
    }
}

/// Runs `workers` closed-loop workers of `window` on this thread's runtime,
/// taking request indices from `next` (shared by every thread).
pub(super) async fn closed(
    client: &Client,
    gate: &Arc<Gate>,
    workers: u32,
    next: &Arc<AtomicU32>,
    window: &Window,
) -> Recorder {
    let (bound, first, stride, salt) = (window.bound, window.first, window.stride, window.salt);
    let rec = Arc::new(Mutex::new(Recorder::new(gate.slo)));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let (client, gate, next) = (client.clone(), Arc::clone(gate), Arc::clone(next));
        let rec = Arc::clone(&rec);
        let finished = Arc::clone(&window.finished);
        let breaker = Arc::clone(&window.breaker);
        let watch = Arc::clone(&window.watch);
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if !bound.allows(i, Instant::now()) || breaker.tripped().is_some() {
                    break;
                }
                let result = send(
                    &client,
                    &gate,
                    (first, salt),
                    i * stride.1 + stride.0,
                    &watch,
                )
                .await;
                breaker.note(&result);
                if let Ok(mut rec) = rec.lock() {
                    match result {
                        Ok(c) => rec.record(&c, Duration::ZERO, Duration::ZERO),
                        Err(e) => rec.fail(&e),
                    }
                }
                finished.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    settle(tasks, rec, gate.slo, Vec::new(), "load worker").await
}

/// Waits for a thread's load tasks to end, and hands back its record with
/// a failure for each task that panicked (`failed`: those already reaped).
async fn settle(
    mut tasks: tokio::task::JoinSet<()>,
    rec: Arc<Mutex<Recorder>>,
    slo: Slo,
    mut failed: Vec<String>,
    what: &str,
) -> Recorder {
    while let Some(joined) = tasks.join_next().await {
        if let Err(e) = joined {
            failed.push(e.to_string());
        }
    }
    // Every task has ended, so the record is ours alone.
    let mut all = Arc::try_unwrap(rec)
        .ok()
        .and_then(|m| m.into_inner().ok())
        .unwrap_or_else(|| Recorder::new(slo));
    for e in failed {
        all.fail(&CallError::new(
            ErrorKind::Transport,
            format!("{what} failed: {e}"),
        ));
    }
    all
}

/// The open-loop schedule: offsets of intended starts from the window start.
pub fn schedule(rate: f64, arrival: Arrival, seed: u64) -> impl Iterator<Item = Duration> {
    let mut rng = SplitMix::new(seed);
    let mut at = 0.0_f64;
    std::iter::from_fn(move || {
        let now = at;
        at += match arrival {
            Arrival::Constant => 1.0 / rate,
            Arrival::Poisson => -rng.unit().ln() / rate,
        };
        Some(Duration::from_secs_f64(now))
    })
}

/// One thread's part of an open loop: request `i` of the one global
/// schedule is this thread's when `i % threads == thread`.
pub(super) struct OpenShard {
    pub(super) thread: usize,
    pub(super) threads: usize,
    pub(super) start: Instant,
    pub(super) limit: Option<Arc<Semaphore>>,
    /// When the last request to free its place under `limit` ended (its
    /// last bytes' arrival): a start that waited for it waited for the
    /// server until then, and for the client after.
    pub(super) freed_end: Arc<Mutex<Option<Instant>>>,
}

/// Starts this thread's requests of the open-loop schedule; its record,
/// and how many it started and how many of those it woke for late.
pub(super) async fn open(
    client: &Client,
    gate: &Arc<Gate>,
    (rate, arrival, seed): (f64, Arrival, u64),
    shard: OpenShard,
    window: &Window,
) -> (Recorder, u64, u64) {
    let (bound, first, salt) = (window.bound, window.first, window.salt);
    let rec = Arc::new(Mutex::new(Recorder::new(gate.slo)));
    let mut tasks = tokio::task::JoinSet::new();
    let (mut starts, mut late_wakes) = (0u64, 0u64);
    let mut failed = Vec::new();
    // When the last wait for `max_in_flight` ended: a start due before it
    // could not be earlier, and its delay is the server's.
    let mut freed = shard.start;
    for (i, offset) in (0u32..).zip(schedule(rate, arrival, seed)) {
        let intended = shard.start + offset;
        if !bound.allows(i, intended) || window.breaker.tripped().is_some() {
            break;
        }
        if i as usize % shard.threads != shard.thread {
            continue;
        }
        tokio::time::sleep_until(intended).await;
        // How late this thread woke for the start: the client's own delay
        // (a wait for `max_in_flight` below is the server's).
        starts += 1;
        if Instant::now().saturating_duration_since(intended.max(freed)) > LATE_START {
            late_wakes += 1;
        }
        // The part of the start's delay that is the server's: the wait
        // for a request in flight to end.
        let mut server_wait = Duration::ZERO;
        let permit = match &shard.limit {
            Some(s) => {
                if let Ok(permit) = Arc::clone(s).try_acquire_owned() {
                    Some(permit)
                } else {
                    let permit = Arc::clone(s).acquire_owned().await.ok();
                    freed = Instant::now();
                    // Until the freeing request's last bytes came: what
                    // the client took to read them is its own.
                    let ended = shard
                        .freed_end
                        .lock()
                        .ok()
                        .and_then(|e| *e)
                        .map_or(freed, |e| e.min(freed));
                    server_wait = ended.saturating_duration_since(intended);
                    permit
                }
            }
            None => None,
        };
        let (client, gate, rec) = (client.clone(), Arc::clone(gate), Arc::clone(&rec));
        let finished = Arc::clone(&window.finished);
        let breaker = Arc::clone(&window.breaker);
        let watch = Arc::clone(&window.watch);
        let freed_end = Arc::clone(&shard.freed_end);
        tasks.spawn(async move {
            let sent = Instant::now();
            let late = sent.saturating_duration_since(intended);
            let result = send(&client, &gate, (first, salt), i, &watch).await;
            breaker.note(&result);
            if permit.is_some()
                && let Ok(mut e) = freed_end.lock()
            {
                *e = Some(
                    result
                        .as_ref()
                        .map_or_else(|_| Instant::now(), |c| sent + c.timing.end),
                );
            }
            drop(permit);
            finished.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut rec) = rec.lock() {
                match result {
                    Ok(c) => rec.record(&c, late, late.saturating_sub(server_wait)),
                    Err(e) => rec.fail(&e),
                }
            }
        });
        while let Some(done) = tasks.try_join_next() {
            if let Err(e) = done {
                failed.push(e.to_string());
            }
        }
    }
    let all = settle(tasks, rec, gate.slo, failed, "load request").await;
    (all, starts, late_wakes)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_schedule_is_evenly_spaced() {
        let s: Vec<Duration> = schedule(4.0, Arrival::Constant, 0).take(3).collect();
        assert_eq!(
            s,
            [
                Duration::ZERO,
                Duration::from_millis(250),
                Duration::from_millis(500)
            ]
        );
    }

    #[test]
    fn poisson_schedule_is_seeded_with_the_right_mean_rate() {
        let a: Vec<Duration> = schedule(100.0, Arrival::Poisson, 7).take(20_000).collect();
        let b: Vec<Duration> = schedule(100.0, Arrival::Poisson, 7).take(20_000).collect();
        assert_eq!(a, b);
        let mean_gap = a.last().unwrap().as_secs_f64() / 19_999.0;
        assert!((mean_gap - 0.01).abs() < 0.0005, "mean gap {mean_gap}");
        assert!(
            a.windows(2)
                .any(|w| w[1].saturating_sub(w[0]) > Duration::from_millis(30)),
            "exponential gaps vary"
        );
    }
}
