//! The load generator. Closed loop: `concurrency` workers, each sending its
//! next request when the previous one ends. Open loop: requests start on a
//! schedule (constant or seeded Poisson) whether or not earlier ones ended,
//! and latency counts from each request's intended start, so a stalled
//! server shows in the figures instead of silently slowing the client
//! (no coordinated omission). Warm-up requests go first, outside every figure.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore, oneshot};
use tokio::time::Instant;

use super::metrics::{GateMetrics, LATE_START, Recorder, Slo};
use super::progress::Progress;
use super::prometheus::{Scrape, ServerView};
use super::selfcheck::{ClientCheck, ThreadCheck};
use super::threads::{self, Threads};
use super::workload;
use crate::client::{CallError, CallRequest, Client, Completion, ErrorKind, TokenSource};
use crate::random::SplitMix;
use crate::suite::metric::MetricKey;
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

/// A gate's request that did not generate what it asked is a failure: no
/// figure can come of it. Nothing at all; fewer tokens than `ignore_eos`
/// asked for (`short`: per-token figures of a server that ignores it would
/// be another length's); more than `max_tokens` by the server's count.
/// Without a server count a chunk may carry several tokens, so only a
/// stream the server itself ended (`stop`) with fewer chunks is short.
fn checked(
    result: Result<Completion, CallError>,
    req: &CallRequest,
) -> Result<Completion, CallError> {
    let c = result?;
    if c.completion_tokens == 0 {
        return Err(CallError::new(
            ErrorKind::Protocol,
            "the stream ended without generating a token",
        ));
    }
    let got = c.completion_tokens;
    let counted = c.token_source != TokenSource::ChunkCount;
    let finish = c.finish_reason.as_deref().unwrap_or("none");
    let max = req.sampling.max_tokens.map(u64::from);
    let exact = req.ignore_eos && req.sampling.stop.as_ref().is_none_or(Vec::is_empty);
    if let Some(asked) = max.filter(|_| exact)
        && got < asked
        && (counted || finish == "stop")
    {
        return Err(CallError::new(
            ErrorKind::Short { asked, got },
            format!(
                "finish_reason `{finish}`, {} by {}",
                if counted { "counted" } else { "chunks counted" },
                c.token_source.name()
            ),
        ));
    }
    if let Some(max) = max
        && counted
        && got > max
    {
        return Err(CallError::new(
            ErrorKind::Protocol,
            format!(
                "{} = {got} for max_tokens {max}: more tokens than the request may generate",
                c.token_source.name()
            ),
        ));
    }
    Ok(c)
}

/// A measured (or warm-up) window: when it stops, the index of its first
/// request, how its count maps to request indices, how many requests have
/// finished so far (for progress), the breaker that ends it early, and who
/// watches it.
#[derive(Debug)]
struct Window {
    bound: Bound,
    first: u32,
    /// Count `i` is request `first + i * stride.1 + stride.0`: a thread's
    /// own warm-up takes every n-th index from its own.
    stride: (u32, u32),
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
    /// Requests of the check beside the load under way, and the tokens the
    /// finished ones received: the server counts them in its `/metrics`
    /// between the window's two reads, so they are waited for before the
    /// second and added to what the client received.
    side: AtomicU64,
    side_tokens: AtomicU64,
    side_done: Notify,
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
    /// Its timestamps.
    pub timing: crate::client::Timing,
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

    /// A request of the check beside the load may start: `false` (and it
    /// must not) once the measured window is over.
    pub fn side_started(&self) -> bool {
        self.side.fetch_add(1, Ordering::SeqCst);
        // Counted before looking: a window that ends after this look waits
        // for this request before its last read of the server's counters.
        if self.measuring() {
            true
        } else {
            self.side_finished(0);
            false
        }
    }

    /// A request of the check beside the load ended with `tokens` tokens
    /// received.
    pub fn side_finished(&self, tokens: u64) {
        self.side_tokens.fetch_add(tokens, Ordering::SeqCst);
        self.side.fetch_sub(1, Ordering::SeqCst);
        self.side_done.notify_waiters();
    }

    /// Waits until no request of the check beside the load is under way
    /// (each is bounded by its own deadlines).
    async fn side_quiet(&self) {
        loop {
            let done = self.side_done.notified();
            if self.side.load(Ordering::SeqCst) == 0 {
                return;
            }
            done.await;
        }
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
                timing: c.timing.clone(),
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
    let index = window_first + i;
    let req = request(gate, index);
    // The measured window starts after the warm-up's requests.
    let measured = window_first == gate.load.warmup && watch.wants(i);
    let audited = gate
        .load
        .tokenizer
        .as_ref()
        .filter(|_| index.is_multiple_of(AUDIT_EVERY));
    let result = if measured || audited.is_some() {
        client.sample(&req).await
    } else {
        client.measure(&req).await
    };
    let mut result = checked(result, &req);
    if let (Some(tokenizer), Ok(c)) = (audited, &result)
        && let Err(e) = audit(tokenizer, c, &req).await
    {
        result = Err(e);
    }
    if measured && let Ok(c) = &result {
        watch.keep(index, c);
    }
    result
}

/// One request in this many of a gate whose load names a tokenizer (the
/// first of them request 0) keeps its text, which the tokenizer then
/// splits: the server's count is checked against it.
const AUDIT_EVERY: u32 = 16;

/// Tokens an answer may hold that print nothing, for the tokenizer's
/// check: a chat format's own markers (gpt-oss's harmony has about ten).
const AUDIT_UNPRINTED: u64 = 16;

/// `Err` when the server counts more completion tokens than the suite's
/// tokenizer finds in the text that came, beyond what a sampled token
/// sequence can differ from the tokenizer's own split of its text (a
/// quarter), the stop sequences' tokens (one per byte) and the
/// end-of-sequence and think markers that print nothing. The split runs
/// off the client thread's loop.
async fn audit(
    tokenizer: &crate::suite::Tokenizer,
    c: &Completion,
    req: &CallRequest,
) -> Result<(), CallError> {
    // A model held past its end repeats tokens the tokenizer would merge
    // ("\n" × 200 splits into a few): no split bounds what it sampled.
    if c.token_source == TokenSource::ChunkCount || req.ignore_eos {
        return Ok(());
    }
    let t = tokenizer.clone();
    let (content, reasoning) = (c.content.clone(), c.reasoning.clone());
    let split =
        tokio::task::spawn_blocking(move || Some(t.count(&content)? + t.count(&reasoning)?))
            .await
            .ok()
            .flatten();
    let Some(split) = split else {
        return Ok(());
    };
    let stop = req.sampling.stop_bytes();
    let split = split as u64;
    let bound = split + split / 4 + stop + AUDIT_UNPRINTED;
    if c.completion_tokens > bound {
        return Err(CallError::new(
            ErrorKind::Protocol,
            format!(
                "the server counts {} completion tokens, but the suite's tokenizer ({}) splits the text that came into {split}: at most {bound} can have been sent (a quarter more for a sampled split, {} unprinted) — a count the text does not bear out",
                c.completion_tokens,
                tokenizer.path().display(),
                stop + AUDIT_UNPRINTED,
            ),
        ));
    }
    Ok(())
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

    /// Stops the gate: every worker ends before its next request.
    fn stop(&self, why: String) {
        if let Ok(mut s) = self.state.lock() {
            s.tripped.get_or_insert(why);
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

/// Runs `workers` closed-loop workers of `window` on this thread's runtime,
/// taking request indices from `next` (shared by every thread).
async fn closed(
    client: &Client,
    gate: &Arc<Gate>,
    workers: u32,
    next: &Arc<AtomicU32>,
    window: &Window,
) -> Recorder {
    let (bound, first, stride) = (window.bound, window.first, window.stride);
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
                let result = send(&client, &gate, first, i * stride.1 + stride.0, &watch).await;
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
struct OpenShard {
    thread: usize,
    threads: usize,
    start: Instant,
    limit: Option<Arc<Semaphore>>,
    /// When the last request to free its place under `limit` ended (its
    /// last bytes' arrival): a start that waited for it waited for the
    /// server until then, and for the client after.
    freed_end: Arc<Mutex<Option<Instant>>>,
}

/// Starts this thread's requests of the open-loop schedule; its record,
/// and how many it started and how many of those it woke for late.
async fn open(
    client: &Client,
    gate: &Arc<Gate>,
    (rate, arrival, seed): (f64, Arrival, u64),
    shard: OpenShard,
    window: &Window,
) -> (Recorder, u64, u64) {
    let (bound, first) = (window.bound, window.first);
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
            let result = send(&client, &gate, first, i, &watch).await;
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

/// Thread `thread` of `threads`'s share of `total` workers.
fn share(total: u32, thread: usize, threads: usize) -> u32 {
    let n = u32::try_from(threads).unwrap_or(u32::MAX).max(1);
    let k = u32::try_from(thread).unwrap_or(u32::MAX);
    total / n + u32::from(k < total % n)
}

/// What the gate's threads share: the load, the request counters, the
/// breaker and the watch, and the hand-over between the warm-up (on every
/// thread) and the measured window (started by the gate once every thread
/// is warm).
struct Shared {
    gate: Arc<Gate>,
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

/// Client thread `k`: its own runtime, its warm-up share, then its shard
/// of the measured window. Its connections close before it hands its
/// figures back: a gate leaves no socket behind.
fn client_thread(
    k: usize,
    client: Client,
    shared: &Arc<Shared>,
    go: tokio::sync::watch::Receiver<Go>,
    (cpu, all): (Option<usize>, &[usize]),
    mut warming: Warming,
) -> ShardOut {
    let cpu = threads::place(cpu, all);
    // Its sleeps and wakes date what it reads (`stamp::woke`).
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_park(crate::stamp::parking)
        .on_thread_unpark(crate::stamp::unparked)
        .build()
    {
        Ok(rt) => {
            let out = rt.block_on(shard(k, &client, shared, go, cpu, &mut warming));
            drop(client);
            drop(rt);
            out
        }
        Err(e) => {
            warming.done();
            let mut rec = Recorder::new(shared.gate.slo);
            rec.fail(&CallError::new(
                ErrorKind::Transport,
                format!("client thread {k} could not start its runtime: {e}"),
            ));
            ShardOut {
                rec,
                check: ThreadCheck::default(),
            }
        }
    }
}

async fn shard(
    k: usize,
    client: &Client,
    shared: &Arc<Shared>,
    mut go: tokio::sync::watch::Receiver<Go>,
    cpu: Option<usize>,
    warming: &mut Warming,
) -> ShardOut {
    let (gate, n) = (&shared.gate, shared.threads);
    let load = &gate.load;
    if load.warmup > 0 {
        // Each thread warms its own workers' connections with its share of
        // the warm-up, whenever it starts: a thread that started late
        // would otherwise find the warm-up taken by the others.
        let warm = Window {
            bound: Bound {
                count: Some(share(load.warmup, k, n)),
                deadline: None,
            },
            first: 0,
            stride: (
                u32::try_from(k).unwrap_or(u32::MAX),
                u32::try_from(n).unwrap_or(u32::MAX),
            ),
            finished: Arc::default(),
            breaker: Arc::clone(&shared.breaker),
            watch: Arc::clone(&shared.watch),
        };
        let workers = share(shared.warm_concurrency.min(load.warmup), k, n);
        closed(client, gate, workers, &Arc::default(), &warm).await;
    }
    warming.done();
    let Ok(Go::Measure(start)) = go.wait_for(|g| *g != Go::Wait).await.map(|g| *g) else {
        return ShardOut {
            rec: Recorder::new(gate.slo),
            check: ThreadCheck::default(),
        };
    };
    let window = Window {
        bound: Bound {
            count: load.requests,
            deadline: load.duration.map(|d| start + d),
        },
        first: load.warmup,
        stride: (0, 1),
        finished: Arc::clone(&shared.finished),
        breaker: Arc::clone(&shared.breaker),
        watch: Arc::clone(&shared.watch),
    };
    let cpu_before = threads::thread_cpu();
    let delay_before = crate::stamp::run_delay();
    let (rec, streams, starts, late_starts) = match load.pace {
        Pace::Closed { concurrency } => {
            let total = load
                .requests
                .map_or(concurrency, |c| concurrency.min(c))
                .max(1);
            let workers = share(total, k, n);
            let rec = closed(client, gate, workers, &shared.next, &window).await;
            (rec, workers, 0, 0)
        }
        Pace::Open {
            rate,
            arrival,
            seed,
            max_in_flight,
        } => {
            let part = OpenShard {
                thread: k,
                threads: n,
                start,
                limit: shared.limit.clone(),
                freed_end: Arc::clone(&shared.freed_end),
            };
            let (rec, starts, late) =
                open(client, gate, (rate, arrival, seed), part, &window).await;
            (
                rec,
                max_in_flight.map_or(0, |m| share(m, k, n)),
                starts,
                late,
            )
        }
    };
    let wall = start.elapsed().as_secs_f64();
    let busy = threads::thread_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before).as_secs_f64())
        .filter(|_| wall > 0.0)
        .map(|cpu| (cpu / wall).min(1.0));
    #[expect(clippy::cast_precision_loss, reason = "nanoseconds of a window")]
    let waited = crate::stamp::run_delay()
        .zip(delay_before)
        .filter(|_| wall > 0.0)
        .map(|(after, before)| (after.saturating_sub(before) as f64 / 1e9 / wall).min(1.0));
    ShardOut {
        rec,
        check: ThreadCheck {
            streams,
            cpu,
            busy,
            waited,
            starts,
            late_starts,
        },
    }
}

/// Applies a gate's load on `threads` client threads and measures it;
/// `Err` when the gate could not be set up (a `flush_cache` the server
/// refused).
pub async fn run_gate(
    client: &Client,
    gate: &Gate,
    threads: Threads,
) -> Result<GateMetrics, String> {
    run_watched(client, gate, threads, &Arc::new(Watch::default())).await
}

/// [`run_gate`], showing the measured window to `watch`.
pub async fn run_watched(
    client: &Client,
    gate: &Gate,
    threads: Threads,
    watch: &Arc<Watch>,
) -> Result<GateMetrics, String> {
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
        let started = client
            .for_thread()
            .map_err(|e| e.to_string())
            .and_then(|thread_client| {
                let (tx, rx) = oneshot::channel();
                let (shared, going, all) = (Arc::clone(&shared), going.clone(), all.clone());
                // Made here, so that a job dropped unrun still says so.
                let warming = shared.warming();
                threads::run_on(
                    k,
                    Box::new(move || {
                        let out =
                            client_thread(k, thread_client, &shared, going, (cpu, &all), warming);
                        let _ = tx.send(out);
                    }),
                )
                .map(|()| rx)
            });
        match started {
            Ok(rx) => outs.push(rx),
            Err(e) => {
                // The threads already started stop their warm-up and end
                // before the gate does: none works past it.
                breaker.stop(format!("client thread {k} could not start: {e}"));
                let _ = go.send(Go::Abort);
                collect(outs).await;
                return Err(format!("failed to start client thread {k}: {e}"));
            }
        }
    }
    shared.all_warm().await;
    let set_up = if let Some(why) = breaker.tripped() {
        Err(format!("{why}, during the warm-up; nothing was measured"))
    } else if load.flush_cache {
        client
            .post_admin("/flush_cache")
            .await
            .map_err(|e| format!("flush_cache failed before measuring: {e}"))
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
    for (k, out) in collect(outs).await.into_iter().enumerate() {
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
    let wall = start.elapsed();
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
    let after = scrape(client).await;
    metrics.server = before.and_then(|b| after.map(|a| ServerView::between(&b, &a)));
    Ok(metrics)
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
