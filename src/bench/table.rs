//! One row of the bench-client table: a gate measured on the stamped
//! simulator (throughput, CPU per token, timing error, the self-check's
//! verdict), its lines, the table's header and the scaling lines.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use super::contention::Contenders;
use super::process::process_cpu;
use super::truth::{Truth, p99, quantile};
use super::{BenchOptions, client, gate};
use crate::load::metrics::GateMetrics;
use crate::load::runner::{Watch, run_watched};
use crate::load::selfcheck::ClientCheck;
use crate::load::threads::Threads;
use crate::suite::metric::{Metric, MetricKey, Stat};
use crate::units::{format_duration, format_secs};

/// Answers kept whole per row for the timing error.
const KEEP: usize = 2000;

/// One row: a gate of `streams` streams on `threads` client threads.
pub(super) struct Row {
    metrics: GateMetrics,
    truth: Truth,
    /// The whole process's CPU (every thread servegate started) per token
    /// it received, warm-up included.
    per_token: Option<Duration>,
    /// The self-check of the row's TTFT p99 and ITL p99, as a gate
    /// gating them would judge it.
    check: ClientCheck,
}

pub(super) fn measure_row(
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
    pub(super) fn rate(&self) -> f64 {
        self.metrics
            .value(MetricKey::single(Metric::OutputTokS))
            .unwrap_or(0.0)
    }

    /// The self-check's bound on a figure of the row, as shown.
    fn bound(&self, figure: MetricKey) -> String {
        self.check
            .figures
            .iter()
            .find(|f| f.figure == figure)
            .and_then(|f| f.bound)
            .map_or_else(|| "-".into(), format_secs)
    }

    /// Its line of the main table and of the TTFT breakdown.
    pub(super) fn lines(
        &self,
        threads: usize,
        itl: Duration,
        streams: u32,
        placed: bool,
    ) -> (String, String) {
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
            self.bound(MetricKey::stat(Metric::Ttft, Stat::P99)),
            format!("{} ({})", p99(&t.itl), p99(&t.itl_true)),
            p99(&t.itl_err),
            self.bound(MetricKey::stat(Metric::Itl, Stat::P99)),
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
pub(super) fn header(opts: &BenchOptions) -> String {
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

/// Tokens/s per added thread, as a ratio to one thread's, for each pacing
/// and streams measured on several thread counts.
pub(super) fn scaling(out: &mut String, held: &[(Duration, u32, usize, f64)]) {
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
