//! The load generator. Closed loop: `concurrency` workers, each sending its
//! next request when the previous one ends. Open loop: requests start on a
//! schedule (constant or seeded Poisson) whether or not earlier ones ended,
//! and latency counts from each request's intended start, so a stalled
//! server shows in the figures instead of silently slowing the client
//! (no coordinated omission). Warm-up requests go first, outside every figure.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore, mpsc};
use tokio::time::Instant;

use super::metrics::{GateMetrics, Recorder, Slo};
use super::progress::Progress;
use super::prometheus::{Scrape, ServerView};
use super::workload;
use crate::client::{CallError, CallRequest, Client, Completion, ErrorKind};
use crate::random::SplitMix;
use crate::suite::{Arrival, Gate, Input, Pace};

fn request(gate: &Gate, index: u32) -> CallRequest {
    let prompt = workload::prompt(&gate.load, index);
    CallRequest {
        input: Input::Prompt {
            system: None,
            prompt,
        },
        sampling: gate.sampling.clone(),
        ignore_eos: gate.load.ignore_eos,
    }
}

/// A request that generated nothing is a failure: no figure can come of it.
fn checked(result: Result<Completion, CallError>) -> Result<Completion, CallError> {
    match result {
        Ok(c) if c.completion_tokens == 0 => Err(CallError::new(
            ErrorKind::Protocol,
            "the stream ended without generating a token",
        )),
        other => other,
    }
}

/// A measured (or warm-up) window: when it stops, the index of its first
/// request, how many requests have finished so far (for progress), the
/// breaker that ends it early, and who watches it.
#[derive(Debug)]
struct Window {
    bound: Bound,
    first: u32,
    finished: Arc<AtomicU64>,
    breaker: Arc<Breaker>,
    watch: Arc<Watch>,
}

/// What a gate's load shows of itself to a check running beside it (a
/// recheck of the suite's probes): whether the measured window is under
/// way, and the whole text of its first few answers. A gate keeps no text
/// otherwise.
#[derive(Debug, Default)]
pub struct Watch {
    /// Answers of the measured window to keep whole.
    keep: usize,
    /// Set when the measured window starts, cleared when it ends.
    measuring: AtomicBool,
    /// Set when the gate's load is over, whatever became of it.
    ended: AtomicBool,
    /// Wakes those waiting for the measured window to start (or to end
    /// without having started).
    changed: Notify,
    samples: Mutex<Vec<Sample>>,
}

/// One answer of a gate's load, kept whole.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The request's index in the gate's workload.
    pub index: u32,
    /// The answer.
    pub content: String,
    /// Why it ended.
    pub finish_reason: Option<String>,
}

impl Watch {
    /// A watch keeping the first `keep` answers of the measured window.
    pub fn keeping(keep: usize) -> Self {
        Self {
            keep,
            ..Self::default()
        }
    }

    /// Whether the measured window is under way.
    pub fn measuring(&self) -> bool {
        self.measuring.load(Ordering::SeqCst)
    }

    /// Waits until the measured window starts; `false` when the load ended
    /// first (it failed before measuring).
    pub async fn started(&self) -> bool {
        loop {
            let changed = self.changed.notified();
            if self.measuring() {
                return true;
            }
            if self.ended.load(Ordering::SeqCst) {
                return false;
            }
            changed.await;
        }
    }

    /// Marks the gate's load as over (its caller does, whatever its result).
    pub fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        self.set_measuring(false);
    }

    /// The answers kept.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn set_measuring(&self, on: bool) {
        self.measuring.store(on, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// Whether request `index` (of the measured window) is kept whole.
    fn wants(&self, index: u32) -> bool {
        (index as usize) < self.keep
    }

    fn keep(&self, index: u32, c: &Completion) {
        if let Ok(mut s) = self.samples.lock() {
            s.push(Sample {
                index,
                content: c.content.clone(),
                finish_reason: c.finish_reason.clone(),
            });
        }
    }
}

/// Sends request `first + i` of a window: whole when its watch keeps it.
async fn send(
    client: &Client,
    gate: &Gate,
    window_first: u32,
    i: u32,
    watch: &Watch,
) -> Result<Completion, CallError> {
    let req = request(gate, window_first + i);
    // The measured window starts after the warm-up's requests.
    let measured = window_first == gate.load.warmup && watch.wants(i);
    let result = if measured {
        client.complete(&req).await
    } else {
        client.measure(&req).await
    };
    let result = checked(result);
    if measured && let Ok(c) = &result {
        watch.keep(window_first + i, c);
    }
    result
}

/// Ends a gate once `after` requests in a row failed the same way with a
/// failure that costs a deadline (a timeout, a stall, no connection): a
/// stalled server would otherwise make every request wait out its deadline,
/// 128 requests × a 60 s idle deadline is two hours of a GPU runner.
#[derive(Debug, Default)]
pub struct Breaker {
    after: u32,
    state: Mutex<Streak>,
}

#[derive(Debug, Default)]
struct Streak {
    /// The class and the words of the failure repeating, and how often.
    failure: Option<(&'static str, String)>,
    count: u32,
    /// Why the gate stopped, once it has.
    tripped: Option<String>,
}

impl Breaker {
    /// A breaker that trips after `after` consecutive like failures (0: never).
    pub fn new(after: u32) -> Self {
        Self {
            after,
            state: Mutex::default(),
        }
    }

    /// Counts a finished request.
    fn note(&self, result: &Result<Completion, CallError>) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        let costly = match result {
            Ok(_) => None,
            Err(e) => match &e.kind {
                ErrorKind::Timeout(which, limit) => Some((
                    e.class(),
                    format!(
                        "{} past the {} deadline ({})",
                        if *which == crate::client::Deadline::Idle {
                            "stalled"
                        } else {
                            "timed out"
                        },
                        which.name(),
                        crate::units::format_duration(*limit)
                    ),
                )),
                ErrorKind::Connect => Some((e.class(), "could not connect".to_owned())),
                _ => None,
            },
        };
        match costly {
            Some((class, words)) if s.failure.as_ref().is_some_and(|(c, _)| *c == class) => {
                s.count += 1;
                s.failure = Some((class, words));
            }
            Some(f) => {
                s.failure = Some(f);
                s.count = 1;
            }
            None => {
                s.failure = None;
                s.count = 0;
            }
        }
        if self.after > 0
            && s.count >= self.after
            && s.tripped.is_none()
            && let Some((_, words)) = &s.failure
        {
            s.tripped = Some(format!(
                "stopping early: {} consecutive requests {words}",
                s.count
            ));
        }
    }

    /// Why the gate stopped early, if it did.
    pub fn tripped(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.tripped.clone())
    }
}

/// When a window stops: after `count` requests and/or at `deadline`.
#[derive(Debug, Clone, Copy)]
struct Bound {
    count: Option<u32>,
    deadline: Option<Instant>,
}

impl Bound {
    fn allows(&self, i: u32, at: Instant) -> bool {
        self.count.is_none_or(|c| i < c) && self.deadline.is_none_or(|d| at < d)
    }
}

/// Recorders shared by workers: a few shards rather than one per worker,
/// because a recorder's histograms weigh hundreds of kilobytes and a gate may
/// run a thousand workers. A worker locks its shard once per finished request.
fn shards(workers: u32, slo: Slo) -> Arc<Vec<Mutex<Recorder>>> {
    let n = std::thread::available_parallelism().map_or(2, |n| 2 * n.get());
    let n = n.min(workers as usize).max(1);
    Arc::new((0..n).map(|_| Mutex::new(Recorder::new(slo))).collect())
}

async fn closed(client: &Client, gate: &Gate, concurrency: u32, window: &Window) -> Recorder {
    let (bound, first) = (window.bound, window.first);
    let next = Arc::new(AtomicU32::new(0));
    let workers = bound
        .count
        .map_or(concurrency, |c| concurrency.min(c))
        .max(1);
    let recorders = shards(workers, gate.slo);
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..workers {
        let (client, gate, next) = (client.clone(), gate.clone(), Arc::clone(&next));
        let recorders = Arc::clone(&recorders);
        let finished = Arc::clone(&window.finished);
        let breaker = Arc::clone(&window.breaker);
        let watch = Arc::clone(&window.watch);
        tasks.spawn(async move {
            let shard = &recorders[w as usize % recorders.len()];
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if !bound.allows(i, Instant::now()) || breaker.tripped().is_some() {
                    break;
                }
                let result = send(&client, &gate, first, i, &watch).await;
                breaker.note(&result);
                if let Ok(mut rec) = shard.lock() {
                    match result {
                        Ok(c) => rec.record(&c, Duration::ZERO),
                        Err(e) => rec.fail(&e),
                    }
                }
                finished.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let mut all = Recorder::new(gate.slo);
    while let Some(joined) = tasks.join_next().await {
        if let Err(e) = joined {
            all.fail(&CallError::new(
                ErrorKind::Transport,
                format!("load worker failed: {e}"),
            ));
        }
    }
    // Every worker has ended, so the shards are ours alone.
    for shard in Arc::try_unwrap(recorders).unwrap_or_default() {
        if let Ok(rec) = shard.into_inner() {
            all.merge(rec);
        }
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

async fn open(
    client: &Client,
    gate: &Gate,
    rate: f64,
    arrival: Arrival,
    seed: u64,
    max_in_flight: Option<u32>,
    window: &Window,
) -> Recorder {
    let (bound, first) = (window.bound, window.first);
    let (tx, mut rx) = mpsc::unbounded_channel::<(Result<Completion, CallError>, Duration)>();
    let slo = gate.slo;
    let collector = tokio::spawn(async move {
        let mut rec = Recorder::new(slo);
        while let Some((result, late)) = rx.recv().await {
            match result {
                Ok(c) => rec.record(&c, late),
                Err(e) => rec.fail(&e),
            }
        }
        rec
    });
    let limit = max_in_flight.map(|n| Arc::new(Semaphore::new(n as usize)));
    let start = Instant::now();
    for (i, offset) in (0u32..).zip(schedule(rate, arrival, seed)) {
        let intended = start + offset;
        if !bound.allows(i, intended) || window.breaker.tripped().is_some() {
            break;
        }
        tokio::time::sleep_until(intended).await;
        let permit = match &limit {
            Some(s) => Arc::clone(s).acquire_owned().await.ok(),
            None => None,
        };
        let (client, gate, tx) = (client.clone(), gate.clone(), tx.clone());
        let finished = Arc::clone(&window.finished);
        let breaker = Arc::clone(&window.breaker);
        let watch = Arc::clone(&window.watch);
        tokio::spawn(async move {
            let late = Instant::now().saturating_duration_since(intended);
            let result = send(&client, &gate, first, i, &watch).await;
            breaker.note(&result);
            drop(permit);
            finished.fetch_add(1, Ordering::Relaxed);
            let _ = tx.send((result, late));
        });
    }
    drop(tx);
    collector.await.unwrap_or_else(|e| {
        let mut rec = Recorder::new(slo);
        rec.fail(&CallError::new(
            ErrorKind::Transport,
            format!("result collector failed: {e}"),
        ));
        rec
    })
}

/// Applies a gate's load and measures it; `Err` when the gate could not be
/// set up (a `flush_cache` the server refused).
pub async fn run_gate(client: &Client, gate: &Gate) -> Result<GateMetrics, String> {
    run_watched(client, gate, &Arc::new(Watch::default())).await
}

/// [`run_gate`], showing the measured window to `watch`.
pub async fn run_watched(
    client: &Client,
    gate: &Gate,
    watch: &Arc<Watch>,
) -> Result<GateMetrics, String> {
    let load = &gate.load;
    let warm_concurrency = match load.pace {
        Pace::Closed { concurrency } => concurrency,
        Pace::Open { max_in_flight, .. } => max_in_flight.unwrap_or(1),
    };
    let breaker = Arc::new(Breaker::new(load.abort_after));
    if load.warmup > 0 {
        let warm = Window {
            bound: Bound {
                count: Some(load.warmup),
                deadline: None,
            },
            first: 0,
            finished: Arc::default(),
            breaker: Arc::clone(&breaker),
            watch: Arc::clone(watch),
        };
        closed(client, gate, warm_concurrency, &warm).await;
        if let Some(why) = breaker.tripped() {
            return Err(format!("{why}, during the warm-up; nothing was measured"));
        }
    }
    if load.flush_cache {
        client
            .post_admin("/flush_cache")
            .await
            .map_err(|e| format!("flush_cache failed before measuring: {e}"))?;
    }
    let before = scrape(client).await;
    let start = Instant::now();
    let window = Window {
        bound: Bound {
            count: load.requests,
            deadline: load.duration.map(|d| start + d),
        },
        first: load.warmup,
        finished: Arc::default(),
        breaker: Arc::clone(&breaker),
        watch: Arc::clone(watch),
    };
    let progress = Progress::start(&gate.name, load.requests, load.duration, &window.finished);
    watch.set_measuring(true);
    let rec = match load.pace {
        Pace::Closed { concurrency } => closed(client, gate, concurrency, &window).await,
        Pace::Open {
            rate,
            arrival,
            seed,
            max_in_flight,
        } => open(client, gate, rate, arrival, seed, max_in_flight, &window).await,
    };
    let wall = start.elapsed();
    watch.set_measuring(false);
    progress.finish();
    let mut metrics = rec.finish(wall);
    metrics.stopped_early = breaker.tripped();
    let after = scrape(client).await;
    metrics.server = before.and_then(|b| after.map(|a| ServerView::between(&b, &a)));
    Ok(metrics)
}

/// The server's `/metrics`, or why there are none.
async fn scrape(client: &Client) -> Result<Scrape, String> {
    match client.get("/metrics").await {
        Ok((status, text)) if (200..300).contains(&status) => Ok(Scrape::parse(&text)),
        Ok((status, _)) => Err(format!(
            "the server has no /metrics (GET /metrics answered HTTP {status})"
        )),
        Err(e) => Err(format!("GET /metrics failed: {e}")),
    }
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
