//! `servegate bench-client`: the client's own cost and accuracy, measured
//! against the stamped simulator (`servegate sim --stamp-tokens`) running
//! in a separate process — on a core of its own where the machine has one
//! beside the client's threads — so that only the client's work is counted.
//!
//! One row per pacing, client threads and streams: tokens per second held,
//! the whole process's CPU per token, the client threads' busy share and
//! time waiting for a CPU, the share of token chunks a late read merged,
//! and the timing error against the simulator's own stamps — each
//! request's TTFT against the server's (first token sent − request read)
//! and each gap between tokens against the gap between their send stamps —
//! beside the most the self-check says the client can have moved each p99.
//! `--contention` adds other work (a busy host, or a real-time thread that
//! starves the client's core): the self-check judged as a classifier.
//!
//! This file holds the options and the run of every row; [`table`] measures
//! a row and writes its lines, [`truth`] its timing error against the
//! stamps, [`process`] the simulator's process and the pinning of both,
//! [`contention`] the other work; [`soak`] is `servegate soak`.

mod contention;
mod history;
mod process;
mod soak;
mod table;
mod truth;

use std::fmt::Write as _;
use std::time::Duration;

use crate::client::Client;
use crate::suite::Slo;
use crate::suite::node::Loc;
use crate::suite::{Api, Gate, Load, LoadPrompt, Pace, Sampling, Timeouts};
pub use contention::Contention;
use contention::contend;
pub use history::{Keeping, SUITE as HISTORY_SUITE, checkout_commit, commit_name};
use process::{pin_self, spawn_sim, taskset};
pub use soak::{SoakOptions, soak};
use table::{RowAt, header, measure_row, scaling};

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Streams (closed-loop concurrency) of each row.
    pub streams: Vec<u32>,
    /// Client threads of each row.
    pub threads: Vec<usize>,
    /// The simulator's gap between tokens of each row (0: unpaced, every
    /// token as fast as it can send).
    pub itl: Vec<Duration>,
    /// Tokens per stream.
    pub tokens: u32,
    /// Measured window per row.
    pub duration: Duration,
    /// Other work beside the client during every row.
    pub contention: Contention,
    /// The simulator's time to first token (`None`: 10 ms paced, none
    /// unpaced).
    pub ttft: Option<Duration>,
    /// Tokens after the first the simulator writes at once.
    pub pack: u32,
    /// How the rows are written.
    pub format: BenchFormat,
    /// Where the rows' figures are kept, per commit (`--history`).
    pub history: Option<Keeping>,
    /// Warm-up requests of each row (`None`: one per stream, which opens
    /// every stream's connection in the warm-up).
    pub warmup: Option<u32>,
}

/// How `servegate bench-client` writes its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchFormat {
    /// Aligned tables for people.
    Table,
    /// One JSON document (`servegate_version`, the options, `rows`): for
    /// scripts that compare runs (`scripts/bench-client-ab.sh`).
    Json,
}

fn gate(concurrency: u32, tokens: u32, duration: Duration) -> Gate {
    Gate {
        name: format!("concurrency_{concurrency}"),
        loc: Loc::default(),
        load: Load {
            duration: Some(duration),
            warmup: concurrency,
            ignore_eos: true,
            ..Load::new(
                Pace::Closed { concurrency },
                LoadPrompt::Text("Tell me a story.".into()),
                tokens,
            )
        },
        sampling: Sampling {
            temperature: Some(0.0),
            max_tokens: Some(tokens),
            ..Sampling::default()
        },
        thresholds: Vec::new(),
        slo: Slo::default(),
        repeats: 1,
        verdict: crate::suite::VerdictMode::Mean,
        recheck: None,
        needs: None,
        sweep: None,
    }
}

fn client(url: &str) -> Result<Client, String> {
    Client::new(url, Api::OpenAiChat, "bench", None, Timeouts::default()).map_err(|e| e.to_string())
}

/// Runs every row and returns the table.
pub fn run(opts: &BenchOptions) -> Result<String, String> {
    let cpus = crate::load::threads::allowed_cpus();
    let can_pin = taskset() && cpus.len() >= 2;
    let list = |c: &[usize]| {
        c.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let started_unix = i64::try_from(crate::record::now_unix()).unwrap_or(i64::MAX);
    // A history that cannot be opened says so before anything is measured.
    let mut history = match &opts.history {
        Some(keeping) => Some((
            keeping,
            crate::history::History::open(&keeping.location).map_err(|e| e.to_string())?,
        )),
        None => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut out = header(opts);
    if opts.contention != Contention::None && !can_pin {
        return Err("--contention needs `taskset` and two CPUs".into());
    }
    let contenders = contend(opts.contention, &cpus)?;
    let mut held: Vec<(Duration, u32, usize, f64)> = Vec::new();
    let mut parts = String::new();
    let mut rows = Vec::new();
    for &itl in &opts.itl {
        for &threads in &opts.threads {
            // The simulator on the last core, the client's threads on the
            // others, when they leave it one; else everything shares.
            let own = can_pin && cpus.len() > threads;
            let placed = own && pin_self(&list(&cpus[..cpus.len() - 1]));
            if !own && can_pin {
                let _ = pin_self(&list(&cpus));
            }
            let ttft = opts.ttft.unwrap_or(if itl.is_zero() {
                Duration::ZERO
            } else {
                Duration::from_millis(10)
            });
            let sim = spawn_sim(
                ttft,
                itl,
                Some(opts.pack),
                cpus.last().copied().filter(|_| own),
            )?;
            for &streams in &opts.streams {
                let row = measure_row(&rt, &sim.url, streams, threads, opts, contenders.as_ref())?;
                held.push((itl, streams, threads, row.rate()));
                let at = RowAt {
                    threads,
                    itl,
                    streams,
                    placed,
                };
                let mut json = row.json(at);
                json["ttft_sim_s"] = ttft.as_secs_f64().into();
                rows.push(json);
                if opts.format == BenchFormat::Json {
                    continue;
                }
                let (main, part) = row.lines(at);
                let _ = writeln!(out, "{main}");
                let _ = writeln!(parts, "{part}");
            }
        }
    }
    if can_pin {
        let _ = pin_self(&list(&cpus));
    }
    // A history that cannot be written loses no row: the table is printed
    // first, then the error.
    let (kept, unkept) = match &mut history {
        Some((keeping, opened)) => {
            match history::keep(opened, keeping, opts, (&rows, cpus.len(), started_unix)) {
                Ok(kept) => (Some(kept), None),
                Err(e) => (None, Some(format!("the rows are not in the history: {e}"))),
            }
        }
        None => (None, None),
    };
    if opts.format == BenchFormat::Json {
        if let Some(kept) = kept {
            eprint!("{kept}");
        }
        let doc = serde_json::json!({
            "servegate_version": env!("CARGO_PKG_VERSION"),
            "tokens": opts.tokens,
            "duration_s": opts.duration.as_secs_f64(),
            "pack": opts.pack,
            "warmup": opts.warmup,
            "contention": format!("{:?}", opts.contention).to_lowercase(),
            "cpus": cpus.len(),
            "rows": rows,
        });
        let doc = format!("{doc:#}\n");
        return match unkept {
            Some(e) => {
                print!("{doc}");
                Err(e)
            }
            None => Ok(doc),
        };
    }
    let _ = writeln!(
        out,
        "\nwhere the TTFT error goes (p50 / p99): the request waiting in the simulator's socket (arrival → read), and outside the simulator (the client's write, the wire both ways, the client's stamps)"
    );
    let _ = writeln!(
        out,
        "{:>7} {:>6} {:>7} {:>21} {:>21} {:>21} {:>21}",
        "threads", "ITL", "streams", "|TTFT err|", "server queue", "client + wire", "of it: write"
    );
    out.push_str(&parts);
    scaling(&mut out, &held);
    if let Some(kept) = kept {
        out.push_str(&kept);
    }
    match unkept {
        Some(e) => {
            print!("{out}");
            Err(e)
        }
        None => Ok(out),
    }
}
