//! The loops one client thread runs over a window: closed (workers, each
//! sending its next request when the previous one ends, or a conversation's
//! next turn) and open (starts on the schedule, latency from each intended
//! start).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::breaker::Breaker;
use super::request::{Turn, send};
use super::schedule::schedule;
use super::watch::Watch;
use crate::client::{CallError, Client, Completion, ErrorKind};
use crate::load::metrics::{LATE_START, Recorder, Slo};
use crate::load::workload::turn_prompt;
use crate::suite::{Arrival, Conversation, Gate, LoadPrompt, Message};

/// A measured (or warm-up) window: when it stops, the index of its first
/// request, how its count maps to request indices, how many requests have
/// finished so far (for progress), the breaker that ends it early, and who
/// watches it.
#[derive(Debug, Clone)]
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
/// taking request indices from `next` (shared by every thread): each sends
/// one request after another, or a conversation load's sessions.
pub(super) async fn closed(
    client: &Client,
    gate: &Arc<Gate>,
    workers: u32,
    next: &Arc<AtomicU32>,
    window: &Window,
) -> Recorder {
    let rec = Arc::new(Mutex::new(Recorder::new(gate.slo)));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let worker = Worker {
            client: client.clone(),
            gate: Arc::clone(gate),
            next: Arc::clone(next),
            rec: Arc::clone(&rec),
            window: window.clone(),
        };
        tasks.spawn(async move {
            match worker.gate.load.conversation {
                None => worker.requests().await,
                Some(c) => worker.sessions(c).await,
            }
        });
    }
    settle(tasks, rec, gate.slo, Vec::new(), "load worker").await
}

/// One closed-loop worker: what it sends with, where its record goes, and
/// the window it sends in.
struct Worker {
    client: Client,
    gate: Arc<Gate>,
    next: Arc<AtomicU32>,
    rec: Arc<Mutex<Recorder>>,
    window: Window,
}

impl Worker {
    /// Whether count `i` of the window may start now.
    fn may_send(&self, i: u32) -> bool {
        self.window.bound.allows(i, Instant::now()) && self.window.breaker.tripped().is_none()
    }

    /// The request index of count `i` within the window.
    fn index(&self, i: u32) -> u32 {
        i * self.window.stride.1 + self.window.stride.0
    }

    /// Sends count `i` and records what came of it.
    async fn send(&self, i: u32, turn: Option<&Turn<'_>>) -> Result<Completion, CallError> {
        let w = &self.window;
        let result = send(
            &self.client,
            &self.gate,
            (w.first, w.salt),
            self.index(i),
            &w.watch,
            turn,
        )
        .await;
        w.breaker.note(&result);
        if let Ok(mut rec) = self.rec.lock() {
            match &result {
                Ok(c) => rec.record(c, Duration::ZERO, Duration::ZERO),
                Err(e) => rec.fail(e),
            }
        }
        w.finished.fetch_add(1, Ordering::Relaxed);
        result
    }

    /// One request after another until the window ends.
    async fn requests(self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if !self.may_send(i) {
                return;
            }
            // Recorded by `send`; nothing else follows from it.
            let _ = self.send(i, None).await;
        }
    }

    /// Sessions of `c.turns` requests until the window ends: each turn
    /// sent after the answer before it and the think time, with every
    /// message before it. A session takes its turns' counts at once, so
    /// that they are consecutive requests; one whose turn failed ends there
    /// (its next turn would carry no answer), and the next starts fresh.
    async fn sessions(self, c: Conversation) {
        loop {
            let Some(base) = self
                .next
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    n.checked_add(c.turns)
                })
                .ok()
            else {
                return;
            };
            let slot = self.session_slot(base / c.turns);
            let mut history: Vec<Message> = Vec::new();
            for turn in 0..c.turns {
                let i = base + turn;
                if !self.may_send(i) {
                    return;
                }
                if turn > 0 && !c.think.is_zero() {
                    // A user's pause, but none past the window's end.
                    let wake = Instant::now() + c.think;
                    let deadline = self.window.bound.deadline;
                    tokio::time::sleep_until(deadline.map_or(wake, |d| d.min(wake))).await;
                    if !self.may_send(i) {
                        return;
                    }
                }
                let index = self.window.first + self.index(i);
                let user = turn_prompt(&self.gate.load, (slot, turn), index, self.window.salt);
                let t = Turn {
                    history: &history,
                    user,
                    more: turn + 1 < c.turns,
                };
                let Ok(answer) = self.send(i, Some(&t)).await else {
                    break;
                };
                let user = Message::text("user", &t.user);
                history.push(user);
                history.push(Message::text("assistant", &answer.content));
            }
        }
    }

    /// Which of a dataset's records session `n` of this window sends,
    /// counted from the window's own first record: the measured window's
    /// sessions go forwards from it, the warm-up's (each thread taking
    /// every n-th) backwards from the one before it, so that no measured
    /// session repeats a record the warm-up left in the cache.
    fn session_slot(&self, n: u32) -> i64 {
        if self.window.first == self.gate.load.warmup {
            i64::from(n)
        } else {
            -1 - i64::from(n) * i64::from(self.window.stride.1) - i64::from(self.window.stride.0)
        }
    }
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
    let times = match &gate.load.prompt {
        LoadPrompt::Dataset { times, .. } => times.clone(),
        _ => None,
    };
    for (i, offset) in (0u32..).zip(schedule((rate, arrival, seed), times, first)) {
        // Past what an instant holds no deadline reaches either.
        let Some(intended) = shard.start.checked_add(offset) else {
            break;
        };
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
            let result = send(&client, &gate, (first, salt), i, &watch, None).await;
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
/// A conversation load's sessions, against a server that records what it
/// was sent and answers each request with its number.
#[cfg(test)]
mod conversation_tests {
    use std::sync::{Arc, Mutex};

    use axum::extract::State;
    use serde_json::Value;

    use crate::client::Client;
    use crate::load::runner::run_gate;
    use crate::load::threads::Threads;
    use crate::suite::{
        Api, Conversation, Gate, Load, LoadPrompt, Pace, RecordPrompt, Sampling, Slo, Timeouts,
        VerdictMode,
    };

    type Seen = Arc<Mutex<Vec<Value>>>;

    async fn answer(State(seen): State<Seen>, body: axum::Json<Value>) -> String {
        let n = {
            let mut seen = seen.lock().unwrap();
            seen.push(body.0);
            seen.len()
        };
        // The answers of a server whose first turn says nothing, to a
        // prompt that asks for silence.
        let silent = seen.lock().unwrap()[n - 1]["messages"][0]["content"] == "say nothing";
        let text = if silent && n == 1 {
            String::new()
        } else {
            format!("answer {n}")
        };
        let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]});
        let usage = serde_json::json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}});
        format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n")
    }

    /// Each session's turns go one after another on one worker, each with
    /// every message before it and the answers the server gave; a
    /// dataset's sessions send each record's own turns, in order.
    /// Runs 6 requests of three-turn sessions of `records` against the
    /// server above: what each request sent, and the gate's figures.
    async fn sessions_of(
        records: Vec<Vec<String>>,
    ) -> (Vec<Value>, crate::load::metrics::GateMetrics) {
        let seen = Seen::default();
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(answer))
            .with_state(Arc::clone(&seen));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let client = Client::new(&base, Api::OpenAiChat, "m", None, Timeouts::default()).unwrap();
        let gate = Gate {
            name: "sessions".into(),
            loc: crate::suite::node::Loc::default(),
            load: Load {
                requests: Some(6),
                conversation: Some(Conversation {
                    turns: 3,
                    think: std::time::Duration::from_millis(5),
                }),
                ..Load::new(
                    Pace::Closed { concurrency: 1 },
                    LoadPrompt::Dataset {
                        path: "d.jsonl".into(),
                        prompts: Arc::new(records.into_iter().map(RecordPrompt::Turns).collect()),
                        outputs: None,
                        times: None,
                    },
                    4,
                )
            },
            sampling: Sampling {
                max_tokens: Some(4),
                ..Sampling::default()
            },
            thresholds: Vec::new(),
            slo: Slo::default(),
            repeats: 1,
            verdict: VerdictMode::Mean,
            recheck: None,
            needs: None,
            sweep: None,
        };
        let metrics = run_gate(&client, &gate, Threads::ONE).await.unwrap();
        server.abort();
        let sent: Vec<Value> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|b| b["messages"].clone())
            .collect();
        (sent, metrics)
    }

    fn turns(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[tokio::test]
    async fn each_turn_carries_its_session_so_far() {
        let records = vec![turns(&["a1", "a2", "a3"]), turns(&["b1", "b2", "b3"])];
        let (sent, metrics) = sessions_of(records).await;
        let m = |pairs: &[(&str, &str)]| {
            Value::Array(
                pairs
                    .iter()
                    .map(|(role, content)| serde_json::json!({"role": role, "content": content}))
                    .collect(),
            )
        };
        // The window's salt picks which record goes first.
        let (a, b) = if sent[0][0]["content"] == "a1" {
            ("a", "b")
        } else {
            ("b", "a")
        };
        let session = |r: &str, answered: usize| {
            let (u1, u2, u3) = (format!("{r}1"), format!("{r}2"), format!("{r}3"));
            let (x1, x2) = (
                format!("answer {answered}"),
                format!("answer {}", answered + 1),
            );
            vec![
                m(&[("user", &u1)]),
                m(&[("user", &u1), ("assistant", &x1), ("user", &u2)]),
                m(&[
                    ("user", &u1),
                    ("assistant", &x1),
                    ("user", &u2),
                    ("assistant", &x2),
                    ("user", &u3),
                ]),
            ]
        };
        assert_eq!(sent, [session(a, 1), session(b, 4)].concat());
        assert_eq!(metrics.errors, 0);
    }

    /// An answer with no text fails its turn: the session ends there, its
    /// next turns unsent, and the next session starts fresh.
    #[tokio::test]
    async fn an_empty_answer_ends_its_session() {
        let records = vec![turns(&["say nothing", "x2", "x3"])];
        let (sent, metrics) = sessions_of(records).await;
        assert_eq!(metrics.errors, 1);
        assert_eq!(sent.len(), 4, "{sent:?}");
        assert_eq!(
            sent[1],
            serde_json::json!([{"role": "user", "content": "say nothing"}])
        );
    }
}
