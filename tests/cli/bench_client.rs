//! `servegate bench-client` against the stamped simulator: its rows, the
//! client's timing error, and the self-check judged against known truth
//! in both directions.

use crate::common::run::servegate;
use crate::common::verdicts::assert_has;

/// A bench-client row's figures: the self-check's verdict, each p99
/// (TTFT, ITL) as measured, as the simulator's stamps say it was, and as
/// far as the self-check says the client can have moved it; and the p99 of
/// the TTFT error that lies outside the simulator (the client's write, the
/// wire, the client's stamps: the second table), the client's own share.
struct BenchRow {
    verdict: String,
    ttft: (f64, f64, f64),
    itl: (f64, f64, f64),
    /// The p99 of the per-gap ITL error.
    itl_err: f64,
    ttft_outside: f64,
}

/// A table's rows: their words (the first is a count of threads).
fn words(table: &str, min: usize) -> impl Iterator<Item = Vec<&str>> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(move |w| w.len() >= min && w[0].parse::<usize>().is_ok())
}

fn bench_rows(out: &str) -> Vec<BenchRow> {
    let secs = |w: &str| {
        servegate::units::parse_duration(w.trim_matches(|c| c == '(' || c == ')'))
            .unwrap_or_else(|e| panic!("{w}: {e}\n{out}"))
            .as_secs_f64()
    };
    let (main, parts) = out
        .split_once("where the TTFT error goes")
        .unwrap_or_else(|| panic!("no TTFT breakdown in:\n{out}"));
    // threads ITL streams |err| p50 / p99, queue p50 / p99, outside p50 / p99, …
    let outside: Vec<f64> = words(parts, 15).map(|w| secs(w[11])).collect();
    let rows: Vec<BenchRow> = words(main, 18)
        .zip(&outside)
        .map(|(w, &ttft_outside)| BenchRow {
            verdict: w[17].to_owned(),
            ttft: (secs(w[8]), secs(w[9]), secs(w[11])),
            itl: (secs(w[12]), secs(w[13]), secs(w[15])),
            itl_err: secs(w[14]),
            ttft_outside,
        })
        .collect();
    assert_eq!(
        rows.len(),
        outside.len(),
        "a row without its TTFT breakdown:\n{out}"
    );
    rows
}

/// The self-check judged as a classifier against known truth (the stamped
/// simulator's own stamps), in both directions, row by row:
/// - no false green: a row whose figure the client moved past the
///   tolerance is LIMITED (ITL: the p99's distance from the stamps' p99;
///   TTFT: the p99 of the error outside the simulator, the client's share
///   — the request waiting in the simulator's socket is the server's time);
/// - no false red: a row whose every sample the client measured within
///   the tolerance (the p99 of the per-gap ITL error, and of the TTFT
///   error outside the simulator) is `ok`.
///
/// Between the two — more than 1% of gaps off, the p99 itself not moved —
/// the self-check's bound (from what each read saw, not from the truth)
/// may rightly say either: seen under CI's load, gaps off by 20 ms at p99,
/// the ITL p99 0.75 ms off, the bound 1.12 ms, LIMITED.
///
/// A client whose core a real-time thread takes 20 ms of every 25 reads
/// tokens late and together: every row is LIMITED, wrong by far more than
/// the tolerance, with a bound that covers the error. A client on a host
/// whose every core is busy at normal priority keeps its share and its
/// stamps, and its rows are `ok` — unless the machine running the tests is
/// loaded past that (CI's under-load run): then a row the client truly
/// delayed (its write of a request descheduled for 18 ms) is LIMITED, and
/// that is right.
#[test]
fn the_self_check_is_right_both_ways_against_the_stamped_simulator() {
    // 2% of the figure, at least 0.1 ms; and the wire between the
    // simulator's stamps and the client's, which no client removes.
    let tolerance = |truth: f64| (0.02 * truth).max(0.000_1) + 0.000_1;
    for (contention, itl) in [("host", "20ms"), ("starved", "10ms")] {
        let o = servegate(&[
            "bench-client",
            "--streams",
            "1,4",
            "--itl",
            itl,
            "--tokens",
            "48",
            "--duration",
            "2s",
            "--contention",
            contention,
        ]);
        if o.code != Some(0) && o.out.contains("needs") {
            eprintln!(
                "not proven here: bench-client --contention {contention}: {}",
                o.out.trim()
            );
            continue;
        }
        assert_eq!(o.code, Some(0), "{}", o.out);
        let rows = bench_rows(&o.out);
        assert_eq!(rows.len(), 2, "{}", o.out);
        for r in &rows {
            eprintln!(
                "{contention}: ITL p99 {:.3}ms (true {:.3}ms, bound {:.3}ms), TTFT p99 {:.3}ms (true {:.3}ms, bound {:.3}ms, outside the simulator {:.3}ms): {}",
                r.itl.0 * 1e3,
                r.itl.1 * 1e3,
                r.itl.2 * 1e3,
                r.ttft.0 * 1e3,
                r.ttft.1 * 1e3,
                r.ttft.2 * 1e3,
                r.ttft_outside * 1e3,
                r.verdict
            );
            let itl_moved = (r.itl.0 - r.itl.1).abs();
            let (itl_tol, ttft_tol) = (tolerance(r.itl.1), tolerance(r.ttft.1));
            assert!(["ok", "LIMITED"].contains(&r.verdict.as_str()), "{}", o.out);
            let moved = itl_moved > itl_tol || r.ttft_outside > ttft_tol;
            let accurate = r.itl_err <= itl_tol && r.ttft_outside <= ttft_tol;
            assert!(
                !(moved && r.verdict == "ok"),
                "{contention}: a false green:\n{}",
                o.out
            );
            assert!(
                !(accurate && r.verdict == "LIMITED"),
                "{contention}: a false red:\n{}",
                o.out
            );
            if r.verdict == "LIMITED" {
                // The ITL bound is of the size of what the client moved.
                // It is not always above it: starved under CI's extra
                // load it said 32.98 ms for 35.86 ms (the TTFT bound
                // 8.8 ms for 10.3 ms outside the simulator, and 0.6 for
                // 14.7 at 4 streams) — the verdicts were right, the
                // bound's size is issue 29's.
                assert!(r.itl.2 + itl_tol >= 0.5 * itl_moved, "{}", o.out);
            }
            if contention == "starved" {
                // Starved, every row is a true positive: the client moved
                // it past the tolerance, so the no-false-green check above
                // was exercised. Not by how much: under two CI runs and
                // their stress at once the simulator was starved too (true
                // ITL p99 63.77 ms for 10 ms pacing) and the client's share
                // of the ITL p99 was 4.18 ms, 3.3 times its tolerance.
                assert!(moved, "{}", o.out);
            }
        }
    }
}

/// bench-client: a row per pacing, client threads and streams, each with
/// its self-check and its timing error against the stamped simulator
/// (every answer's stamps read back: no unreadable answer), the TTFT
/// error's parts, and the scaling of threads.
#[test]
fn bench_client_prints_its_rows_timing_error_and_scaling() {
    let o = servegate(&[
        "bench-client",
        "--streams",
        "2",
        "--threads",
        "1,2",
        "--itl",
        "0ms,5ms",
        "--tokens",
        "16",
        "--duration",
        "300ms",
    ]);
    let out = o.out;
    assert_eq!(o.code, Some(0), "{out}");
    let (main, parts) = out
        .split_once("where the TTFT error goes")
        .unwrap_or_else(|| panic!("no TTFT breakdown in:\n{out}"));
    let rows: Vec<Vec<&str>> = words(main, 11).collect();
    let keys: Vec<(&str, &str)> = rows.iter().map(|w| (w[0], w[1])).collect();
    assert_eq!(
        keys,
        [("1", "0"), ("2", "0"), ("1", "5.00ms"), ("2", "5.00ms")],
        "{out}"
    );
    for w in &rows {
        // … errors, then the self-check (and where the simulator ran).
        let errors = w.iter().position(|c| *c == "ok" || *c == "LIMITED");
        assert!(
            errors.is_some_and(|i| w[i - 1] == "0"),
            "a row with errors or unreadable stamps, or no self-check: {w:?}\n{out}"
        );
        assert!(w[4].ends_with("µs"), "CPU per token: {w:?}");
    }
    assert_eq!(words(parts, 15).count(), 4, "{out}");
    assert_has(
        &out,
        &[
            "scaling: 2 streams, ITL 0: 2 threads hold ",
            "scaling: 2 streams, ITL 5.00ms: 2 threads hold ",
        ],
    );
}
