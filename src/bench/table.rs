//! One row of the bench-client table: a gate measured on the stamped
//! simulator (throughput, CPU per token, timing error, the self-check's
//! verdict), its lines, the table's header and the scaling lines.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use super::contention::Contenders;
use super::truth::{Truth, p99, quantile};
use super::{BenchOptions, client, gate};
use crate::load::metrics::GateMetrics;
use crate::load::runner::{Watch, run_watched};
use crate::load::selfcheck::ClientCheck;
use crate::load::threads::Threads;
use crate::process::cpu_time as process_cpu;
use crate::suite::metric::{Metric, MetricKey, Stat};
use crate::units::{format_duration, format_secs};

/// Answers kept whole per row for the timing error.
const KEEP: usize = 2000;

/// Where a row was measured.
#[derive(Debug, Clone, Copy)]
pub(super) struct RowAt {
    pub(super) threads: usize,
    /// The simulator's gap between tokens.
    pub(super) itl: Duration,
    pub(super) streams: u32,
    /// Whether the simulator had a core of its own.
    pub(super) placed: bool,
}

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
    let mut g = gate(streams, opts.tokens, opts.duration);
    if let Some(warmup) = opts.warmup {
        g.load.warmup = warmup;
    }
    // Servegate's own: the process's, less the contention's.
    let own =
        || process_cpu().map(|c| c.saturating_sub(others.map_or(Duration::ZERO, Contenders::cpu)));
    let before = own();
    let metrics = rt
        .block_on(run_watched(&client, &g, threads, &watch))
        .map_err(|e| e.to_string())?;
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
        self.bound_secs(figure)
            .map_or_else(|| "-".into(), format_secs)
    }

    /// The worst client thread's value of `f` (NaN for none).
    fn worst(&self, f: fn(&crate::load::selfcheck::ThreadCheck) -> Option<f64>) -> f64 {
        self.metrics
            .client
            .threads
            .iter()
            .filter_map(f)
            .fold(f64::NAN, f64::max)
    }

    /// The time the client threads spent dating their wakes (the
    /// self-check's hooks) over the window, s (NaN where not measured).
    fn dating(&self) -> f64 {
        let threads = &self.metrics.client.threads;
        threads
            .iter()
            .map(|t| t.dating)
            .sum::<Option<f64>>()
            .unwrap_or(f64::NAN)
    }

    /// What the self-check cost per token of the window and as a share of
    /// one core over it (NaN where not measured).
    fn check_cost(&self) -> (f64, f64) {
        let (dating, m) = (self.dating(), &self.metrics);
        #[expect(clippy::cast_precision_loss, reason = "token counts")]
        let per_token = if m.output_tokens == 0 {
            f64::NAN
        } else {
            dating / m.output_tokens as f64
        };
        let wall = m.wall.as_secs_f64();
        (per_token, if wall > 0.0 { dating / wall } else { f64::NAN })
    }

    /// The share of token chunks a late read merged (NaN for none).
    fn merged(&self) -> f64 {
        let b = &self.metrics.bounds;
        #[expect(clippy::cast_precision_loss, reason = "token counts")]
        if b.marks == 0 {
            f64::NAN
        } else {
            b.merged as f64 / b.marks as f64
        }
    }

    /// The self-check's bound on a figure, in seconds.
    fn bound_secs(&self, figure: MetricKey) -> Option<f64> {
        self.check
            .figures
            .iter()
            .find(|f| f.figure == figure)
            .and_then(|f| f.bound)
    }

    /// The row as `--format json` writes it: times in seconds, shares as
    /// fractions, `null` where there is none.
    pub(super) fn json(&self, at: RowAt) -> serde_json::Value {
        let t = &self.truth;
        let (check_token, check_core) = self.check_cost();
        let num = |v: f64| (!v.is_nan()).then_some(v);
        let p = |v: &[f64]| num(quantile(v, 0.99));
        let figure = |measured: &[f64], truth: &[f64], err: &[f64], key: MetricKey| {
            serde_json::json!({
                "p99_s": p(measured),
                "true_p99_s": p(truth),
                "err_p99_s": p(err),
                "err_p50_s": num(quantile(err, 0.5)),
                "bound_s": self.bound_secs(key),
            })
        };
        serde_json::json!({
            "threads": at.threads,
            "itl_s": at.itl.as_secs_f64(),
            "streams": at.streams,
            "sim_own_cpu": at.placed,
            "tokens_per_s": self.rate(),
            "cpu_per_token_s": self.per_token.map(|d| d.as_secs_f64()),
            "busy": num(self.worst(|t| t.busy)),
            "waited": num(self.worst(|t| t.waited)),
            "merged": num(self.merged()),
            "ttft": figure(&t.ttft, &t.ttft_true, &t.ttft_err, MetricKey::stat(Metric::Ttft, Stat::P99)),
            "itl": figure(&t.itl, &t.itl_true, &t.itl_err, MetricKey::stat(Metric::Itl, Stat::P99)),
            "ttft_server_queue_p99_s": p(&t.queue),
            "ttft_outside_p99_s": p(&t.outside),
            // The server's own TTFT of each answer, its socket's wait
            // included (first token sent − request arrived).
            "ttft_server_p99_s": p(&t.ttft.iter().zip(&t.outside).map(|(m, o)| m - o).collect::<Vec<_>>()),
            "write_p99_s": p(&t.write),
            "errors": self.metrics.errors + t.unreadable,
            "limited": self.check.limited.is_some(),
            // The self-check as a gate's verdict reads it (its figures'
            // bounds), for judging thresholds against the stamped truth.
            "check": self.check,
            "check_time_per_token_s": num(check_token),
            "check_core_share": num(check_core),
            "preopened": self.metrics.preopened,
        })
    }

    /// Its line of the main table and of the TTFT breakdown.
    pub(super) fn lines(&self, at: RowAt) -> (String, String) {
        let RowAt {
            threads,
            itl,
            streams,
            placed,
        } = at;
        let m = &self.metrics;
        let per_token = self.per_token.map_or_else(
            || "n/a".into(),
            |cpu| format!("{:.2}µs", cpu.as_secs_f64() * 1e6),
        );
        let merged = or_na(self.merged(), |v| format!("{:.1}%", 100.0 * v));
        let t = &self.truth;
        let (check_token, check_core) = self.check_cost();
        let check_cost = or_na(check_token, |c| {
            format!("{:.2}µs/{:.1}%", c * 1e6, 100.0 * check_core)
        });
        let main = format!(
            "{threads:>7} {:>6} {streams:>7} {:>10.0} {per_token:>9} {:>6} {:>6} {merged:>7} {:>21} {:>10} {:>10} {:>21} {:>10} {:>10} {:>6}  {:<10} {check_cost:>15}{}",
            gap(itl),
            self.rate(),
            or_na(self.worst(|t| t.busy), |b| format!("{:.0}%", 100.0 * b)),
            or_na(self.worst(|t| t.waited), |w| format!("{:.0}%", 100.0 * w)),
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
    let ttft = opts.ttft.map_or_else(
        || "10ms paced, 0 unpaced".to_owned(),
        |t| format_secs(t.as_secs_f64()),
    );
    let pack = if opts.pack > 1 {
        format!(", tokens written {} at a time", opts.pack)
    } else {
        String::new()
    };
    let warmup = opts.warmup.map_or_else(
        || "a warm-up request per stream".to_owned(),
        |w| format!("{w} warm-up request(s), the rest of the connections opened before the window"),
    );
    let mut out = format!(
        "servegate bench-client: stamped simulator in its own process (TTFT {ttft}{pack}); {} tokens per stream, {} per row, {warmup}{}\n",
        opts.tokens,
        format_secs(opts.duration.as_secs_f64()),
        opts.contention.words()
    );
    let _ = writeln!(
        out,
        "truth: the simulator's stamps (TTFT: first token sent − request read; ITL: gap between send stamps); |err| per request and per gap, over the first {KEEP} answers; bound: the most the self-check says the client can have moved the p99 (LIMITED past 2%, at least 0.1ms); CPU/token: the whole process, warm-up included; its cost: the client threads' time dating their wakes, per token of the window and as a share of one core\n"
    );
    let _ = writeln!(
        out,
        "{:>7} {:>6} {:>7} {:>10} {:>9} {:>6} {:>6} {:>7} {:>21} {:>10} {:>10} {:>21} {:>10} {:>10} {:>6}  {:<10} {:>15}",
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
        "self-check",
        "its cost",
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
