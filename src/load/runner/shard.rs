//! One client thread of a gate: its own runtime, its share of the warm-up,
//! then its shard of the measured window and the self-check of it.

use std::sync::Arc;

use super::loops::{Bound, OpenShard, Window, closed, open};
use super::{Go, ShardOut, Shared, Warming};
use crate::client::{CallError, Client, ErrorKind};
use crate::load::metrics::Recorder;
use crate::load::selfcheck::ThreadCheck;
use crate::load::threads;
use crate::suite::{Load, Pace};

/// Thread `thread` of `threads`'s share of `total` workers.
fn share(total: u32, thread: usize, threads: usize) -> u32 {
    let n = u32::try_from(threads).unwrap_or(u32::MAX).max(1);
    let k = u32::try_from(thread).unwrap_or(u32::MAX);
    total / n + u32::from(k < total % n)
}

/// The streams thread `k` of `n` runs in a window: its closed-loop
/// workers, or its share of an open loop's `max_in_flight` (at most its
/// requests; an open loop without one: as many as the server keeps in
/// flight, not known before).
fn window_streams(load: &Load, k: usize, n: usize) -> u32 {
    match load.pace {
        Pace::Closed { concurrency } => {
            let total = load
                .requests
                .map_or(concurrency, |c| concurrency.min(c))
                .max(1);
            share(total, k, n)
        }
        Pace::Open { max_in_flight, .. } => max_in_flight
            .map(|m| load.requests.map_or(m, |r| m.min(r)))
            .map_or(0, |m| share(m, k, n)),
    }
}

/// Client thread `k`: its own runtime, its warm-up share, then its shard
/// of the measured window. Its connections close before it hands its
/// figures back: a gate leaves no socket behind.
pub(super) fn client_thread(
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
    // The warm-up's workers, and the threads that run them: each warming
    // thread takes its share of the warm-up (every m-th request) with at
    // least one worker of its own, whenever it starts (a thread that
    // started late would otherwise find the warm-up taken by the others).
    // With fewer workers than threads (an open loop warms one at a time)
    // the threads past them send none: a share without a worker would
    // never be sent, and the warm-up would be shorter than it says.
    let workers = shared.warm_concurrency.min(load.warmup).max(1);
    let m = n.min(workers as usize);
    if load.warmup > 0 && k < m {
        let warm = Window {
            bound: Bound {
                count: Some(share(load.warmup, k, m)),
                deadline: None,
            },
            first: 0,
            stride: (
                u32::try_from(k).unwrap_or(u32::MAX),
                u32::try_from(m).unwrap_or(u32::MAX),
            ),
            salt: shared.salt,
            finished: Arc::default(),
            breaker: Arc::clone(&shared.breaker),
            watch: Arc::clone(&shared.watch),
        };
        closed(client, gate, share(workers, k, m), &Arc::default(), &warm).await;
    }
    // The connections its window's streams will use, opened now: a
    // request of the window that had to connect first would carry the
    // connect in its TTFT, and a gate's figures would depend on how many
    // warm-up requests it had. Their connects stay a figure of their own.
    let opened = client.preconnect(window_streams(load, k, n) as usize).await;
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
        salt: shared.salt,
        finished: Arc::clone(&shared.finished),
        breaker: Arc::clone(&shared.breaker),
        watch: Arc::clone(&shared.watch),
    };
    let cpu_before = threads::thread_cpu();
    let delay_before = crate::stamp::run_delay();
    let hooks_before = crate::stamp::hook_time();
    let (mut rec, streams, starts, late_starts) = match load.pace {
        Pace::Closed { .. } => {
            let workers = window_streams(load, k, n);
            let rec = closed(client, gate, workers, &shared.next, &window).await;
            (rec, workers, 0, 0)
        }
        Pace::Open {
            rate,
            arrival,
            seed,
            ..
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
            (rec, window_streams(load, k, n), starts, late)
        }
    };
    let wall = start.elapsed().as_secs_f64();
    rec.opened(&opened);
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
    let dating = crate::stamp::hook_time()
        .saturating_sub(hooks_before)
        .as_secs_f64();
    ShardOut {
        rec,
        check: ThreadCheck {
            streams,
            cpu,
            busy,
            waited,
            dating: Some(dating),
            starts,
            late_starts,
        },
    }
}
