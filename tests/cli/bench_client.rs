//! `servegate bench-client` against the stamped simulator: its rows, the
//! client's timing error, and the self-check judged against known truth
//! in both directions.

use crate::common::run::servegate;
use crate::common::verdicts::assert_has;

/// The classifiers' run as `--format json`: its standard output and
/// error, `None` (said) where the host cannot make the contention.
fn contended_json(contention: &str, itl: &str) -> Option<(String, String)> {
    let o = crate::common::run::streams(
        &[&contended(contention, itl)[..], &["--format", "json"]].concat(),
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    if !o.status.success() && stderr.contains("needs") {
        eprintln!("not proven here: bench-client --contention {contention}: {stderr}");
        return None;
    }
    assert!(o.status.success(), "{stderr}");
    Some((stdout, stderr))
}

/// A table's rows: their words (the first is a count of threads).
fn words(table: &str, min: usize) -> impl Iterator<Item = Vec<&str>> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(move |w| w.len() >= min && w[0].parse::<usize>().is_ok())
}

/// A bench-client row's figures (`--format json`): the self-check's
/// verdict, each p99 (TTFT, ITL) as measured, as the simulator's stamps say
/// it was, and as far as the self-check says the client can have moved it;
/// the p99 of the TTFT error that lies outside the simulator (the client's
/// write, the wire, the client's stamps), and the TTFT p99 without it (the
/// server's own figure, its socket's wait included: what a client without
/// error would read).
struct BenchRow {
    verdict: String,
    ttft: (f64, f64, f64),
    itl: (f64, f64, f64),
    /// The p99 of the per-gap ITL error.
    itl_err: f64,
    ttft_outside: f64,
    ttft_server: f64,
}

fn bench_rows(stdout: &str) -> Vec<BenchRow> {
    let doc: serde_json::Value =
        serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    doc["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("no rows in:\n{stdout}"))
        .iter()
        .map(|row| {
            let secs = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{row:#}"));
            let figure = |f: &serde_json::Value| {
                (
                    secs(&f["p99_s"]),
                    secs(&f["true_p99_s"]),
                    f["bound_s"].as_f64().unwrap_or(0.0),
                )
            };
            BenchRow {
                verdict: if row["limited"] == true {
                    "LIMITED"
                } else {
                    "ok"
                }
                .to_owned(),
                ttft: figure(&row["ttft"]),
                itl: figure(&row["itl"]),
                itl_err: secs(&row["itl"]["err_p99_s"]),
                ttft_outside: secs(&row["ttft_outside_p99_s"]),
                ttft_server: secs(&row["ttft_server_p99_s"]),
            }
        })
        .collect()
}

/// The classifiers' run: bench-client rows of one and four streams of 48
/// tokens paced at `itl`, two seconds each, beside `contention`.
fn contended<'a>(contention: &'a str, itl: &'a str) -> [&'a str; 11] {
    [
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
    ]
}

/// The self-check judged as a classifier against known truth (the stamped
/// simulator's own stamps), in both directions, row by row:
/// - no false green: a row whose figure the client moved past the
///   tolerance is LIMITED (ITL: the p99's distance from the stamps' p99;
///   TTFT: the p99's distance from the p99 without each answer's error
///   outside the simulator — the request waiting in the simulator's socket
///   is the server's time);
/// - no false red: a row whose every sample the client measured within
///   the tolerance (the p99 of the per-gap ITL error, and of the TTFT
///   error outside the simulator) is `ok`.
///
/// Between the two — more than 1% of samples off, the p99 itself not
/// moved — the self-check's bound (from what each read saw, not from the
/// truth) may rightly say either: seen under CI's load, gaps off by 20 ms
/// at p99, the ITL p99 0.75 ms off, the bound 1.12 ms, LIMITED; and one
/// answer of a row whose write was descheduled for 8.61 ms, its TTFT not
/// the row's p99, `ok` (which this test once called a false green, judging
/// the p99 of the errors where the p99 of the figure is what a gate reads).
///
/// A client whose core a real-time thread takes 20 ms of every 25 reads
/// tokens late and together: its rows are LIMITED, wrong by far more than
/// the tolerance, with a bound that covers the error (one at least: on a
/// loaded machine the simulator may be starved with it, and a row the
/// client did not move is rightly `ok`). A client on a host
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
        let Some((stdout, stderr)) = contended_json(contention, itl) else {
            continue;
        };
        let rows = bench_rows(&stdout);
        assert_eq!(rows.len(), 2, "{stdout}");
        let mut any_moved = false;
        for r in &rows {
            eprintln!(
                "{contention}: ITL p99 {:.3}ms (true {:.3}ms, bound {:.3}ms), TTFT p99 {:.3}ms (true {:.3}ms, without the error outside the simulator {:.3}ms, bound {:.3}ms, outside the simulator {:.3}ms): {}",
                r.itl.0 * 1e3,
                r.itl.1 * 1e3,
                r.itl.2 * 1e3,
                r.ttft.0 * 1e3,
                r.ttft.1 * 1e3,
                r.ttft_server * 1e3,
                r.ttft.2 * 1e3,
                r.ttft_outside * 1e3,
                r.verdict
            );
            let itl_moved = (r.itl.0 - r.itl.1).abs();
            let ttft_moved = r.ttft.0 - r.ttft_server;
            let (itl_tol, ttft_tol) = (tolerance(r.itl.1), tolerance(r.ttft.1));
            let moved = itl_moved > itl_tol || ttft_moved > ttft_tol;
            let accurate = r.itl_err <= itl_tol && r.ttft_outside <= ttft_tol;
            assert!(
                !(moved && r.verdict == "ok"),
                "{contention}: a false green:\n{stdout}\n{stderr}"
            );
            assert!(
                !(accurate && r.verdict == "LIMITED"),
                "{contention}: a false red:\n{stdout}\n{stderr}"
            );
            if r.verdict == "LIMITED" {
                // The ITL bound is of the size of what the client moved.
                // It is not always above it: starved under CI's extra
                // load it said 32.98 ms for 35.86 ms (the TTFT bound
                // 8.8 ms for 10.3 ms outside the simulator, and 0.6 for
                // 14.7 at 4 streams) — the verdicts were right, the
                // bound's size is issue 29's.
                assert!(r.itl.2 + itl_tol >= 0.5 * itl_moved, "{stdout}");
            }
            any_moved |= moved;
        }
        if contention == "starved" {
            // Starved, the client moved a row past the tolerance, so the
            // no-false-green check above was exercised. Not every row,
            // nor by how much: under two CI runs and their stress at once
            // the simulator was starved too (true ITL p99 63.77 ms for
            // 10 ms pacing) and the client's share of the ITL p99 was
            // 4.18 ms, 3.3 times its tolerance; under CI's stress alone
            // (2026-12-07) the one-stream row's simulator was starved
            // (true ITL p99 99.86 ms) and the client moved neither p99
            // (0.22 ms, 0.25 ms): `ok`, rightly, beside a four-stream row
            // it moved, LIMITED.
            assert!(any_moved, "{stdout}");
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
        // … and what the self-check cost: per token, of a core.
        let cost = errors.and_then(|i| w.get(i + 1)).copied().unwrap_or("");
        assert!(
            cost.contains("µs/") && cost.ends_with('%'),
            "no self-check cost after the verdict: {w:?}\n{out}"
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

/// `bench-client` of one row, two streams at 5 ms a token: `tokens` is
/// the tokens and the window (`["8", "--duration", "300ms"]`), `more` the
/// options under test; it must succeed.
fn two_streams(tokens: &[&str], more: &[&str]) -> crate::common::run::Run {
    let mut args = vec!["bench-client", "--streams", "2", "--itl", "5ms", "--tokens"];
    args.extend_from_slice(tokens);
    args.extend_from_slice(more);
    let o = servegate(&args);
    assert_eq!(o.code, Some(0), "{}", o.out);
    o
}

/// `--format json` holds the rows' figures for scripts; `--pack 4` makes
/// the simulator write the tokens after the first four at a time, every
/// 4 × ITL, each stamped with its write: every answer is still read back
/// token by token against its stamps (no unreadable answer), the true ITL
/// p99 is a write's gap, and the tokens of one write arrive together;
/// with one warm-up request the second stream's connection is opened
/// before the window, and both streams still answer.
#[test]
fn bench_client_writes_json_and_reads_a_packing_simulator() {
    let o = two_streams(
        &["17", "--duration", "500ms"],
        &[
            "--pack", "4", "--ttft", "20ms", "--format", "json", "--warmup", "1",
        ],
    );
    let doc: serde_json::Value =
        serde_json::from_str(&o.out).unwrap_or_else(|e| panic!("{e}: {}", o.out));
    assert_eq!(
        (
            doc["pack"].as_u64(),
            doc["tokens"].as_u64(),
            doc["warmup"].as_u64()
        ),
        (Some(4), Some(17), Some(1))
    );
    let rows = doc["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{doc:#}");
    let row = &rows[0];
    assert_eq!(
        (row["streams"].as_u64(), row["errors"].as_u64()),
        (Some(2), Some(0)),
        "{row:#}"
    );
    assert_eq!(row["ttft_sim_s"].as_f64(), Some(0.02), "{row:#}");
    // One warm-up request opened one connection; the other stream's was
    // opened before the window.
    assert_eq!(row["preopened"].as_u64(), Some(1), "{row:#}");
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{v} in {row:#}"));
    assert!(f(&row["tokens_per_s"]) > 0.0 && f(&row["cpu_per_token_s"]) > 0.0);
    // The client thread slept between tokens 5 ms apart: dating its wakes
    // took time, a share of one core.
    let (check, share) = (
        f(&row["check_time_per_token_s"]),
        f(&row["check_core_share"]),
    );
    assert!(check > 0.0 && share > 0.0 && share < 1.0, "{row:#}");
    // Three of every four tokens after the first share their write.
    assert!(f(&row["merged"]) >= 0.5, "{row:#}");
    // The true gaps: 0 inside a write, 20 ms between writes (the p99).
    let itl_true = f(&row["itl"]["true_p99_s"]);
    assert!((0.018..1.0).contains(&itl_true), "{row:#}");
    // The server's TTFT is the simulator's 20 ms and more, never less.
    assert!(f(&row["ttft"]["true_p99_s"]) >= 0.0195, "{row:#}");
}

/// The project's regression bench (`scripts/bench-client-ab.sh`) end to
/// end, on its two-stream `smoke` cell with this build as both sides:
/// it runs each side, reads their tables back and prints the medians with
/// a new/ref ratio and every run's verdict, keeping every run in the run
/// history under its side's commit; an unknown cell is an error, and
/// so is a reference without `--pack` for the unpaced cell.
#[test]
fn the_regression_bench_compares_two_builds() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ab.txt");
    let history = dir.path().join("history.sqlite");
    let bin = env!("CARGO_BIN_EXE_servegate");
    let run_with = |cells: &str, reference: &str| {
        std::process::Command::new("bash")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/scripts/bench-client-ab.sh"
            ))
            .envs([
                ("SERVEGATE_REF_BIN", reference),
                ("SERVEGATE_NEW_BIN", bin),
                ("CELLS", cells),
                ("REPEATS", "2"),
                ("DURATION", "300ms"),
                ("REF_COMMIT", "ref0000"),
            ])
            .env("OUT", &out)
            .env("HISTORY", &history)
            .output()
            .unwrap()
    };
    let run = |cells: &str| run_with(cells, bin);
    let o = run("smoke");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
    assert!(text.contains("2 runs each, alternating; medians"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with("smoke "))
        .unwrap_or_else(|| panic!("no smoke row in:\n{text}"));
    let w: Vec<&str> = row.split_whitespace().collect();
    assert_eq!((w[1], w[2], w[3]), ("1", "5.00ms", "2"), "{row}");
    assert!(w[4].ends_with("µs") && w[5].ends_with("µs"), "{row}");
    assert!(w[6].ends_with('×'), "a new/ref ratio: {row}");
    for verdicts in &w[w.len() - 2..] {
        let v: Vec<&str> = verdicts.split(',').collect();
        assert!(
            v.len() == 2 && v.iter().all(|v| *v == "ok" || *v == "LIMITED"),
            "two runs' verdicts: {row}"
        );
    }
    // Two runs of each side in the history, each under its commit.
    let shown = servegate(&[
        "history",
        "--history",
        history.to_str().unwrap(),
        "show",
        "bench-client::streams=2 threads=1 itl=5.00ms",
        "cpu_per_token",
    ]);
    assert_eq!(shown.code, Some(0), "{}", shown.out);
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&head.stdout);
    for commit in ["ref0000", &head.trim()[..12]] {
        assert_eq!(
            shown.out.matches(&format!("commit {commit}")).count(),
            2,
            "{}",
            shown.out
        );
    }
    let o = run("nonsense");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no cell nonsense"));
    // A reference from before `--pack` cannot run the unpaced cell (its
    // simulator writes 16 tokens at a time): said, not measured unlike.
    let old = dir.path().join("old-servegate");
    std::fs::write(
        &old,
        "#!/bin/sh\necho 'Usage: servegate bench-client [--streams <N>]'\n",
    )
    .unwrap();
    std::fs::set_permissions(&old, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = run_with("unpaced", old.to_str().unwrap());
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("has no --pack"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `bench-client --history` keeps every row's figures in the run history
/// under the commit measured, and sets each beside the newest run of
/// another commit on this machine (the same commit is no reference): the
/// project's own per-commit record of its client. `history list` shows
/// the bench's series; without a commit to name outside a checkout it
/// refuses to record.
#[test]
fn bench_client_keeps_its_figures_per_commit_in_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.sqlite");
    let history = history.to_str().unwrap();
    let bench = |commit: &str| {
        two_streams(
            &["8", "--duration", "300ms"],
            &["--history", history, "--commit", commit],
        )
        .out
    };
    let figures = [
        "cpu_per_token",
        "tokens_per_s",
        "ttft_error.p99",
        "ttft_client_error.p99",
        "itl_error.p99",
    ];
    for commit in ["aaaa1111", "aaaa1111"] {
        let out = bench(commit);
        assert_has(
            &out,
            &[
                "history: 5 figure(s) of ",
                "(commit aaaa1111) recorded in ",
                "no earlier run of another commit",
            ],
        );
    }
    let out = bench("bbbb2222");
    assert_has(
        &out,
        &["against the newest run of another commit on this machine (commit aaaa1111, "],
    );
    for figure in figures {
        let line = out
            .lines()
            .find(|l| l.starts_with("streams=2 threads=1 itl=5.00ms") && l.contains(figure))
            .unwrap_or_else(|| panic!("no {figure} line in:\n{out}"));
        assert!(line.contains('×'), "a ratio: {line}");
    }
    let listed = servegate(&["history", "--history", history, "list"]);
    assert_eq!(listed.code, Some(0), "{}", listed.out);
    for figure in figures {
        assert_has(
            &listed.out,
            &[&format!(
                "bench-client::streams=2 threads=1 itl=5.00ms {figure} "
            )],
        );
    }
    assert_has(&listed.out, &["3 point(s)"]);
    // A commit that is no hash is refused (one that reads as an option
    // too); a history that cannot be opened is refused before anything is
    // measured.
    for commit in ["--commit=a b", "--commit=-x", "--commit="] {
        let o = servegate(&["bench-client", "--history", history, commit]);
        assert_eq!(o.code, Some(2), "{commit}: {}", o.out);
        assert_has(&o.out, &["a letter or digit, then letters, digits"]);
    }
    let o = servegate(&[
        "bench-client",
        "--streams",
        "1",
        "--history",
        "/dev/null/history.sqlite",
        "--commit",
        "aaaa1111",
    ]);
    assert_eq!(o.code, Some(1), "{}", o.out);
    assert!(
        o.out.contains("/dev/null") && !o.out.contains("tokens/s"),
        "{}",
        o.out
    );
    // Outside a checkout, with no --commit: nothing recorded, exit 2.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_servegate"))
        .args(["bench-client", "--streams", "1", "--history", history])
        .current_dir(dir.path())
        .env("GIT_CEILING_DIRECTORIES", dir.path().parent().unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("name it with --commit"));
}

/// The verdict rule as a classifier against known truth: each bench-client
/// row's self-check (as a gate reads it) judges thresholds swept around the
/// stamped simulator's own figures with [`at_stake`], the rule every gate's
/// verdict follows, and the verdict it gives is held to the truth:
/// - no false green: a threshold the true figure fails is never passed;
/// - no false red blamed on the server: a threshold the true figure meets
///   is never plainly failed (where the client moved the figure past it,
///   the verdict is CLIENT-LIMITED);
/// - no false red blamed on the client: a threshold far from both the
///   measured and the true figure (twice the larger, and 1 ms more) and
///   beyond what the client's evidence allows the true figure to be is
///   never CLIENT-LIMITED — the newcomer's `itl.p99 17.77ms could be off
///   by up to 1.84ms` against `<= 1s`. (Starved, four streams, a token
///   read 70 ms late left the gap before it anywhere in 10.34 … 100.86
///   ms: a bound of 62 ms was rightly at stake, though the truth was
///   10.55 ms — the client cannot know.)
///
/// ITL p99 is judged against the stamps' p99, TTFT p99 against the
/// server's own (first token sent − request arrived, its socket's wait
/// included). Within the tolerance (2% of the figure, at least 0.1 ms, and
/// the wire's 0.1 ms) a threshold is too close to the truth to call either
/// way. A TTFT also holds the wire both ways, which on a loaded host the
/// kernel delays by milliseconds (under CI's stress-ng, 10.35 ms outside
/// the simulator at p99 where the client's own delays bounded 9.0 ms): no
/// side's stamp dates it, so a TTFT threshold between the server's figure
/// and the measured one is not judged for blame. A gap holds the wire's
/// delay of its token too: under CI's stress-ng with the client starved
/// (four streams, its thread waiting for a CPU 74% of the window) a p99
/// gap measured 50.21 ms of a true 14.65 ms, the self-check bounding the
/// client's share at 34.30 ms, and the 1.26 ms left over within the wire's
/// 12.37 ms outside the simulator (2026-12-07): an ITL threshold within
/// that wire delay of the truth is not judged for blame either. On an
/// idle host that delay is a fraction of a millisecond, and the rule
/// stands as written.
#[test]
fn a_verdict_is_client_limited_only_where_the_client_could_flip_it() {
    use servegate::load::selfcheck::{ClientCheck, at_stake};
    use servegate::suite::VerdictMode;
    use servegate::suite::threshold::Op;
    let tolerance = |truth: f64| (0.02 * truth).max(0.000_1) + 0.000_1;
    let mut judged = 0;
    for (contention, itl) in [("none", "10ms"), ("host", "20ms"), ("starved", "10ms")] {
        let Some((stdout, _)) = contended_json(contention, itl) else {
            continue;
        };
        let doc: serde_json::Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        for row in doc["rows"].as_array().expect("rows") {
            let check: ClientCheck = serde_json::from_value(row["check"].clone())
                .unwrap_or_else(|e| panic!("{e}: {row:#}"));
            let secs = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{row:#}"));
            // The wire's own delay, which no stamp dates: what the client's
            // TTFT holds beyond the server's at p99, past its own delays.
            let wire = row["ttft_outside_p99_s"].as_f64().unwrap_or(0.0);
            for (key, truth) in [
                ("itl.p99", secs(&row["itl"]["true_p99_s"])),
                ("ttft.p99", secs(&row["ttft_server_p99_s"])),
            ] {
                // The figure as the self-check (and a gate) reads it, and
                // the most its true value can be as the client's evidence
                // says.
                let figure = check
                    .figures
                    .iter()
                    .find(|f| f.figure.to_string() == key)
                    .unwrap_or_else(|| panic!("no {key} in the self-check: {row:#}"));
                let measured = figure.value;
                let high = figure
                    .high
                    .or(figure.bound.map(|b| measured + b))
                    .unwrap_or(measured);
                let tol = tolerance(truth);
                let far = (2.0 * measured.max(truth) + 0.001).max(high + tol);
                let thresholds = [
                    0.5 * truth,
                    truth - 3.0 * tol,
                    truth + 3.0 * tol,
                    0.5 * (measured + truth),
                    measured - 3.0 * tol,
                    measured + 3.0 * tol,
                    1.5 * truth,
                    far,
                    1.0,
                ];
                for bound in thresholds.into_iter().filter(|b| *b > 0.0) {
                    let stake = at_stake(
                        key.parse().unwrap(),
                        Op::Le,
                        bound,
                        VerdictMode::Mean,
                        &[(measured, &check)],
                    );
                    let verdict = match (&stake, measured <= bound) {
                        (Some(_), _) => "CLIENT-LIMITED",
                        (None, true) => "pass",
                        (None, false) => "fail",
                    };
                    let case = format!(
                        "{contention}, {} streams: {key} measured {:.3}ms, true {:.3}ms, <= {:.3}ms: {verdict} ({stake:?})",
                        row["streams"],
                        measured * 1e3,
                        truth * 1e3,
                        bound * 1e3,
                    );
                    eprintln!("{case}");
                    if truth > bound + tol {
                        assert_ne!(verdict, "pass", "a false green: {case}\n{row:#}");
                    }
                    if truth < bound - tol.max(wire) && key == "itl.p99" {
                        assert_ne!(verdict, "fail", "the server blamed: {case}\n{row:#}");
                    }
                    if bound >= far {
                        assert_ne!(
                            verdict, "CLIENT-LIMITED",
                            "the client blamed: {case}\n{row:#}"
                        );
                    }
                    judged += 1;
                }
            }
        }
    }
    assert!(judged > 0, "no row was judged");
}
