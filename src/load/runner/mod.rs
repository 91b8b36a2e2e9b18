//! The load generator. Closed loop: `concurrency` workers, each sending its
//! next request when the previous one ends. Open loop: requests start on a
//! schedule (constant, seeded Poisson or gamma, or a trace's recorded
//! times) whether or not earlier ones ended,
//! and latency counts from each request's intended start, so a stalled
//! server shows in the figures instead of silently slowing the client
//! (no coordinated omission). Warm-up requests go first, outside every figure.
//!
//! Here a gate's run over its client threads and what they share; a
//! thread's work is in `shard.rs`, its loops in `loops.rs`, an open loop's
//! schedule in `schedule.rs`, one request in `request.rs`.

mod breaker;
mod loops;
mod request;
mod schedule;
mod shard;
mod watch;

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore, oneshot};
use tokio::time::Instant;

use super::metrics::{GateMetrics, Recorder};
use super::progress::Progress;
use super::prometheus::{Gauge, SAMPLE_EVERY, Samples, Scrape, ServerView};
use super::selfcheck::{ClientCheck, ThreadCheck};
use super::threads::{self, Threads};
use crate::client::{CallError, Client, ErrorKind};
use crate::suite::metric::MetricKey;
use crate::suite::{Gate, Pace};
pub use breaker::Breaker;
pub use schedule::schedule;
use shard::client_thread;
pub use watch::{Sample, Watch};

/// What the gate's threads share: the load, the request counters, the
/// breaker and the watch, and the hand-over between the warm-up (on every
/// thread) and the measured window (started by the gate once every thread
/// is warm).
struct Shared {
    gate: Arc<Gate>,
    /// This window's prompts' salt: its own, drawn as it starts.
    salt: u64,
    threads: usize,
    warm_concurrency: u32,
    next: Arc<AtomicU32>,
    breaker: Arc<Breaker>,
    watch: Arc<Watch>,
    finished: Arc<AtomicU64>,
    limit: Option<Arc<Semaphore>>,
    freed_end: Arc<Mutex<Option<Instant>>>,
    warm: AtomicUsize,
    warmed: Notify,
}

/// The gate's word to its threads once they are warm.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Go {
    /// Not yet.
    Wait,
    /// Measure, from this start.
    Measure(Instant),
    /// Stop: the warm-up failed or the gate could not be set up.
    Abort,
}

/// See [`Shared::warming`].
struct Warming(Option<Arc<Shared>>);

impl Warming {
    fn done(&mut self) {
        if let Some(shared) = self.0.take() {
            shared.arrive();
        }
    }
}

impl Drop for Warming {
    fn drop(&mut self) {
        self.done();
    }
}

/// What a client thread hands back: its record and its self-check.
struct ShardOut {
    rec: Recorder,
    check: ThreadCheck,
}

impl Shared {
    fn arrive(&self) {
        self.warm.fetch_add(1, Ordering::SeqCst);
        self.warmed.notify_waiters();
    }

    /// A client thread's word that it is warm, given when it says so or
    /// when it ends (a runtime that did not start, a panic): the gate never
    /// waits for a thread that is gone.
    fn warming(self: &Arc<Self>) -> Warming {
        Warming(Some(Arc::clone(self)))
    }

    async fn all_warm(&self) {
        loop {
            let warmed = self.warmed.notified();
            if self.warm.load(Ordering::SeqCst) >= self.threads {
                return;
            }
            warmed.await;
        }
    }
}

/// Applies a gate's load on `threads` client threads and measures it;
/// `Err` when the gate could not be set up (a `flush_cache` the server
/// refused).
pub async fn run_gate(
    client: &Client,
    gate: &Gate,
    threads: Threads,
) -> Result<GateMetrics, LoadError> {
    run_watched(client, gate, threads, &Arc::new(Watch::default())).await
}

/// Why a gate's load measured nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// A client thread could not be started (the threads already started
    /// stopped before the gate ended).
    #[error("failed to start client thread {thread}: {why}")]
    ThreadStart {
        /// Which.
        thread: usize,
        /// The system's words.
        why: String,
    },
    /// The breaker tripped during the warm-up (`abort_after`): the server
    /// failed the requests that were to warm it.
    #[error("{0}, during the warm-up; nothing was measured")]
    WarmUp(String),
    /// `flush_cache: true`, and the server's `/flush_cache` failed.
    #[error("flush_cache failed before measuring: {0}")]
    FlushCache(crate::client::CallError),
}

/// [`run_gate`], showing the measured window to `watch`.
pub(crate) async fn run_watched(
    client: &Client,
    gate: &Gate,
    threads: Threads,
    watch: &Arc<Watch>,
) -> Result<GateMetrics, LoadError> {
    let load = &gate.load;
    let n = threads.count.max(1);
    let (warm_concurrency, limit) = match load.pace {
        Pace::Closed { concurrency } => (concurrency, None),
        Pace::Open { max_in_flight, .. } => (
            max_in_flight.unwrap_or(1),
            max_in_flight.map(|m| Arc::new(Semaphore::new(m as usize))),
        ),
    };
    let breaker = Arc::new(Breaker::new(load.abort_after));
    let shared = Arc::new(Shared {
        gate: Arc::new(gate.clone()),
        salt: crate::random::unpredictable(),
        threads: n,
        warm_concurrency,
        next: Arc::default(),
        breaker: Arc::clone(&breaker),
        watch: Arc::clone(watch),
        finished: Arc::default(),
        limit,
        freed_end: Arc::default(),
        warm: AtomicUsize::new(0),
        warmed: Notify::new(),
    });
    let (go, going) = tokio::sync::watch::channel(Go::Wait);
    // Where an unpinned client thread may run: where this one may.
    let all = threads::allowed_cpus();
    let cpus = threads::pins(n, threads.pin, &all);
    let mut outs = Vec::new();
    for (k, cpu) in cpus.into_iter().enumerate() {
        let thread_client = client.for_thread();
        let (tx, rx) = oneshot::channel();
        let (shared, going, all) = (Arc::clone(&shared), going.clone(), all.clone());
        // Made here, so that a job dropped unrun still says so.
        let warming = shared.warming();
        let started = threads::run_on(
            k,
            Box::new(move || {
                let out = client_thread(k, thread_client, &shared, going, (cpu, &all), warming);
                let _ = tx.send(out);
            }),
        )
        .map(|()| rx);
        match started {
            Ok(rx) => outs.push(rx),
            Err(e) => {
                // The threads already started stop their warm-up and end
                // before the gate does: none works past it.
                breaker.stop(format!("client thread {k} could not start: {e}"));
                let _ = go.send(Go::Abort);
                collect(outs).await;
                return Err(LoadError::ThreadStart { thread: k, why: e });
            }
        }
    }
    shared.all_warm().await;
    let set_up = if let Some(why) = breaker.tripped() {
        Err(LoadError::WarmUp(why))
    } else if load.flush_cache {
        client
            .post_admin("/flush_cache")
            .await
            .map_err(LoadError::FlushCache)
    } else {
        Ok(())
    };
    if let Err(e) = set_up {
        let _ = go.send(Go::Abort);
        collect(outs).await;
        return Err(e);
    }
    let before = scrape(client).await;
    let unsolicited = client.unsolicited();
    let start = Instant::now();
    let progress = Progress::start(&gate.name, load.requests, load.duration, &shared.finished);
    watch.set_measuring(true);
    let _ = go.send(Go::Measure(start));
    let mut rec = Recorder::new(gate.slo);
    let mut check = ClientCheck {
        chosen: threads.chosen.to_owned(),
        ..ClientCheck::default()
    };
    let sample = gate
        .thresholds
        .iter()
        .any(|t| Gauge::of(t.threshold.key.metric).is_some());
    let (outs, ended, samples) = sampling(client, sample, collect(outs)).await;
    for (k, out) in outs.into_iter().enumerate() {
        if let Some(out) = out {
            rec.merge(out.rec);
            check.threads.push(out.check);
        } else {
            rec.fail(&CallError::new(
                ErrorKind::Transport,
                format!("client thread {k} ended without its figures (it panicked)"),
            ));
            check.threads.push(ThreadCheck::default());
        }
    }
    let wall = ended.duration_since(start);
    watch.set_measuring(false);
    progress.finish();
    let mut metrics = rec.finish(wall);
    metrics.stopped_early = breaker.tripped();
    let keys: Vec<MetricKey> = gate.thresholds.iter().map(|t| t.threshold.key).collect();
    let (figures, rates) = metrics.client_bounds(&keys);
    check.merged = metrics.bounds.merged;
    check.marks = metrics.bounds.marks;
    metrics.client = check.judged(figures, rates);
    metrics.unsolicited = client.unsolicited().saturating_sub(unsolicited);
    // Tokens the check beside the load asked for are the server's too.
    watch.side_quiet().await;
    metrics.side_tokens = watch.side_tokens.swap(0, Ordering::SeqCst);
    let after = scrape_after(client, before.as_ref().ok(), metrics.abandoned).await;
    metrics.server = before.and_then(|b| {
        after.map(|a| ServerView {
            samples,
            window_s: Some(wall.as_secs_f64()),
            ..ServerView::between(&b, &a)
        })
    });
    // A shared prefix, a conversation's history and a trace's blocks are
    // reuse asked for.
    let asked = load.asks_for_reuse();
    metrics.cache_unasked = metrics
        .server
        .as_ref()
        .ok()
        .and_then(|s| s.value(crate::suite::metric::Metric::ServerCacheHitRate, None))
        .filter(|rate| !asked && *rate >= crate::load::metrics::CACHE_UNASKED);
    Ok(metrics)
}

/// Runs `work` (the window) and, when `sample`, reads the server's gauges
/// every [`SAMPLE_EVERY`] beside it; what it gave, when it ended, and the
/// samples. A read under way when the window ends is dropped: the window's
/// end is taken when the work ends, not when a read does.
async fn sampling<F: Future>(
    client: &Client,
    sample: bool,
    work: F,
) -> (F::Output, Instant, Samples) {
    let mut samples = Samples::default();
    tokio::pin!(work);
    if !sample {
        let out = work.await;
        return (out, Instant::now(), samples);
    }
    loop {
        let read = async {
            tokio::time::sleep(SAMPLE_EVERY).await;
            scrape(client).await
        };
        tokio::select! {
            out = &mut work => return (out, Instant::now(), samples),
            got = read => samples.add(got.as_ref().map_err(String::as_str)),
        }
    }
}

/// What each client thread handed back (`None`: it ended without, a
/// panic), once every thread is done with the gate.
async fn collect(outs: Vec<oneshot::Receiver<ShardOut>>) -> Vec<Option<ShardOut>> {
    let mut got = Vec::new();
    for out in outs {
        got.push(out.await.ok());
    }
    got
}

/// How long the read of the server's counters after a window waits for
/// it to count the requests the client abandoned at a deadline.
const ABANDONED_SETTLE: Duration = Duration::from_secs(5);

/// The server's `/metrics` after a window in which the client abandoned
/// `abandoned` requests at a deadline (it closed their connections): such
/// a request is the server's until it notices — real SGLang 0.5.23 counts
/// the abort at its next token's write, 0.3 s after the close here — so
/// the read waits, at most [`ABANDONED_SETTLE`], until the server's abort
/// counter holds them all; a server without one is read at once.
async fn scrape_after(
    client: &Client,
    before: Option<&Scrape>,
    abandoned: u64,
) -> Result<Scrape, String> {
    let until = Instant::now() + ABANDONED_SETTLE;
    loop {
        let after = scrape(client).await;
        let counted = match (before, &after) {
            (Some(b), Ok(a)) => ServerView::between(b, a).aborted,
            _ => None,
        };
        #[allow(clippy::cast_precision_loss)] // request counts
        let settled = counted.is_none_or(|n| n >= abandoned as f64);
        if abandoned == 0 || settled || Instant::now() >= until {
            return after;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The server's `/metrics`, or why there are none: a launched router's
/// workers' pages read together (at once, so that no worker's counters
/// run on while another's are read), each sample labelled with its
/// worker, as one server's.
async fn scrape(client: &Client) -> Result<Scrape, String> {
    let workers = client.metrics_from();
    if workers.is_empty() {
        return page(client, None)
            .await
            .map(|text| Scrape::parse(&text).read_at(std::time::Instant::now()));
    }
    let pages = futures_util::future::join_all(
        workers
            .iter()
            .map(|(name, w)| async move { (name, page(w, Some(name)).await) }),
    )
    .await;
    let at = std::time::Instant::now();
    let mut all = String::new();
    for (name, text) in pages {
        all.push_str(&super::prometheus::labelled(&text?, name));
    }
    Ok(Scrape::parse(&all).read_at(at))
}

/// The `/metrics` page of the server, or of its `worker`, or why there
/// is none.
async fn page(client: &Client, worker: Option<&str>) -> Result<String, String> {
    let who = worker.map_or_else(|| "the server".to_owned(), |w| format!("worker `{w}`"));
    match client.get("/metrics").await {
        Ok((status, text)) if (200..300).contains(&status) => Ok(text),
        Ok((status, _)) => Err(format!(
            "{who} has no /metrics (GET /metrics answered HTTP {status})"
        )),
        Err(e) => Err(match worker {
            Some(_) => format!("GET /metrics of {who} failed: {e}"),
            None => format!("GET /metrics failed: {e}"),
        }),
    }
}
