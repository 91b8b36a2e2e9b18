fn key(text: &str) -> MetricKey {
    text.parse().expect("a metric key")
}
use super::*;

fn thread(busy: f64) -> ThreadCheck {
    ThreadCheck {
        streams: 8,
        busy: Some(busy),
        waited: Some(0.001),
        ..ThreadCheck::default()
    }
}

fn check(threads: Vec<ThreadCheck>, figures: Vec<FigureBound>, rates: bool) -> ClientCheck {
    ClientCheck {
        chosen: "auto".into(),
        threads,
        ..ClientCheck::default()
    }
    .judged(figures, rates)
}

/// `c` staked on one threshold `key op bound`, one repeat measured
/// `value`.
fn staked(mut c: ClientCheck, key_text: &str, op: Op, bound: f64, value: f64) -> ClientCheck {
    c.at_stake = at_stake(
        key(key_text),
        op,
        bound,
        crate::suite::VerdictMode::Mean,
        &[(value, &c)],
    );
    c
}

#[test]
fn the_tolerance_is_two_percent_and_a_tenth_of_a_millisecond_for_times() {
    assert!((FigureBound::new(key("itl.p99"), 0.010, Some(0.0)).tolerance - 0.000_2).abs() < 1e-12);
    assert!((FigureBound::new(key("itl.p50"), 0.002, Some(0.0)).tolerance - 0.000_1).abs() < 1e-12);
    assert!(
        (FigureBound::new(key("decode_tok_s.mean"), 50.0, Some(0.0)).tolerance - 1.0).abs() < 1e-12
    );
}

#[test]
fn a_figure_moved_past_its_tolerance_is_client_limited_and_named() {
    let within = FigureBound::new(key("itl.p99"), 0.010, Some(0.000_15));
    let beyond = FigureBound::new(key("ttft.p99"), 0.100, Some(0.009_8));
    let ok = check(vec![thread(0.2)], vec![within.clone()], false);
    assert_eq!(ok.limited, None);
    assert!(ok.summary().contains("itl.p99 ±150us"), "{}", ok.summary());
    let c = check(vec![thread(0.2)], vec![within, beyond], false);
    assert_eq!(
        c.limited.as_deref(),
        Some("ttft.p99 100.00ms could be off by up to 9.80ms (2.00ms allowed)")
    );
    // Far inside its bound, the figure decides nothing the client did.
    let far = staked(c.clone(), "ttft.p99", Op::Le, 1.0, 0.100);
    assert_eq!((far.at_stake.as_ref(), far.failure()), (None, None));
    assert!(
        far.summary()
            .contains("but no threshold's verdict depends on them"),
        "{}",
        far.summary()
    );
    // Its true value (90.2–109.8 ms: a bound without its interval is
    // either way) on both sides of 95 ms: at stake,
    // both numbers named.
    let near = staked(c, "ttft.p99", Op::Le, 0.095, 0.100);
    assert_eq!(
        near.at_stake.as_deref(),
        Some(
            "ttft.p99 100.00ms could be off by up to 9.80ms: the true figure could lie anywhere in 90.20ms … 109.80ms, on both sides of `<= 95.00ms`"
        )
    );
    let failure = near.failure().unwrap();
    assert!(
        failure.contains("kept from a CPU when a request went out"),
        "{failure}"
    );
    assert!(
        near.summary().contains(": CLIENT-LIMITED ("),
        "{}",
        near.summary()
    );
}

/// Over repeats the verdict reads their mean, or its interval: a
/// repeat certain alone does not make the verdict certain.
#[test]
fn a_verdict_over_repeats_is_staked_as_the_verdict_reads_them() {
    use crate::suite::VerdictMode::{Lenient, Mean, Strict};
    let busy = check(vec![thread(0.95)], Vec::new(), true);
    let rate = |op, bound, mode, values: &[f64]| {
        let each: Vec<(f64, &ClientCheck)> = values.iter().map(|v| (*v, &busy)).collect();
        at_stake(key("output_tok_s"), op, bound, mode, &each).is_some()
    };
    // Repeat 1 misses `<= 500` for sure, repeat 2 meets it only as
    // measured: the mean (475) passes, the true one may not.
    assert!(rate(Op::Le, 500.0, Mean, &[550.0, 400.0]));
    // Each repeat misses `<= 500`; the lenient interval meets it as
    // measured, and higher true rates could narrow it past the bound.
    assert!(rate(Op::Le, 500.0, Lenient, &[510.0, 900.0, 510.0]));
    // A lower bound the held-down rates already meet, leniently or by
    // the mean, is met; strictly, higher true rates may widen the
    // interval below it.
    assert!(!rate(Op::Ge, 100.0, Lenient, &[550.0, 400.0]));
    assert!(!rate(Op::Ge, 100.0, Mean, &[550.0, 400.0]));
    assert!(rate(Op::Ge, 100.0, Strict, &[550.0, 400.0]));
    // A point is at stake where the true rates may reach it: held-down
    // rates of 550 and 400 may be 500 or 600 in truth, never 300.
    assert!(rate(Op::Ne, 500.0, Mean, &[550.0, 400.0]));
    assert!(!rate(Op::Ne, 300.0, Mean, &[550.0, 400.0]));
    // TPOT can only have been understated: 100 (true 100–110) and 80
    // (true 80–85) average 90, their truth 90–97.5, across 95.
    let tpot = |v: f64, high: f64| {
        check(
            vec![thread(0.2)],
            vec![FigureBound::within(key("tpot.mean"), v, v, high)],
            false,
        )
    };
    let (a, b) = (tpot(0.100, 0.110), tpot(0.080, 0.085));
    let each = [(0.100, &a), (0.080, &b)];
    let said = at_stake(key("tpot.mean"), Op::Le, 0.095, Mean, &each).unwrap();
    assert_eq!(
        said,
        "tpot.mean 100.00ms (repeat 1) could be off by up to 10.00ms; tpot.mean 80.00ms (repeat 2) could be off by up to 5.00ms: its mean verdict's figure over 2 repeats could lie anywhere in 90.00ms … 97.50ms, on both sides of `<= 95.00ms`"
    );
    assert_eq!(
        at_stake(key("tpot.mean"), Op::Le, 0.1, Mean, &each),
        None,
        "97.5 ms at most meets 100 ms"
    );
}

#[test]
fn a_verdict_is_at_stake_only_where_the_interval_crosses_the_bound() {
    // A TTFT can only have been inflated: its true value lies in
    // 40–50 ms.
    let ttft = FigureBound::within(key("ttft.mean"), 0.050, 0.040, 0.050);
    let c = check(vec![thread(0.2)], vec![ttft], false);
    for (op, bound, stake) in [
        (Op::Le, 0.060, false), // passes whatever the client did
        (Op::Le, 0.030, false), // fails whatever the client did
        (Op::Le, 0.045, true),  // fails as measured, the truth may pass
        (Op::Ge, 0.045, true),
        (Op::Ge, 0.035, false),
    ] {
        let c = staked(c.clone(), "ttft.mean", op, bound, 0.050);
        assert_eq!(c.at_stake.is_some(), stake, "{op:?} {bound}: {c:?}");
    }
    // Within its tolerance the client's error decides nothing: noise
    // moves the figure more.
    let small = FigureBound::within(key("itl.p99"), 0.010, 0.009_9, 0.010);
    let c = check(vec![thread(0.2)], vec![small], false);
    assert_eq!(staked(c, "itl.p99", Op::Le, 0.009_95, 0.010).at_stake, None);
}

#[test]
fn the_advice_fits_a_busy_client_or_a_contended_host() {
    let beyond = || vec![FigureBound::new(key("itl.p99"), 0.010, Some(0.005))];
    let busy = staked(
        check(vec![thread(0.95)], beyond(), false),
        "itl.p99",
        Op::Le,
        0.008,
        0.010,
    );
    assert!(busy.failure().unwrap().ends_with("raise client_threads"));
    let mut starved = thread(0.1);
    starved.waited = Some(0.4);
    let host = staked(
        check(vec![starved], beyond(), false),
        "itl.p99",
        Op::Le,
        0.008,
        0.010,
    );
    assert!(
        host.failure()
            .unwrap()
            .contains("waited for a CPU up to 40% of the window"),
        "{:?}",
        host.failure()
    );
}

#[test]
fn a_busy_thread_limits_gated_rates_only() {
    let c = check(vec![thread(0.2), thread(0.94)], Vec::new(), true);
    assert_eq!(c.limited.as_deref(), Some("thread 1 busy 94%"));
    // The client can only have held the rate down: a lower bound met
    // is met, a lower bound missed may not be, and the reverse for an
    // upper bound.
    for (op, bound, stake) in [
        (Op::Ge, 100.0, false),
        (Op::Ge, 150.0, true),
        (Op::Le, 150.0, true),
        (Op::Le, 100.0, false),
    ] {
        let s = staked(c.clone(), "output_tok_s", op, bound, 120.0);
        assert_eq!(s.at_stake.is_some(), stake, "{op:?} {bound}: {s:?}");
    }
    assert_eq!(
        staked(c.clone(), "output_tok_s", Op::Ge, 150.0, 120.0)
            .at_stake
            .as_deref(),
        Some(
            "output_tok_s 120.0 was set by the client (thread 1 busy 94%), and the server's could be higher: the true figure could lie at 120.0 or more, on both sides of `>= 150.0`"
        )
    );
    // Without a gated rate, a busy thread that moved no figure is fine.
    let c = check(vec![thread(0.94)], Vec::new(), false);
    assert_eq!(c.limited, None);
    assert!(c.summary().contains("no gated figure"), "{}", c.summary());
}

#[test]
fn a_thread_busy_or_waiting_for_a_cpu_all_the_window_had_no_room() {
    let mut t = thread(0.88);
    t.waited = Some(0.115);
    let c = check(vec![t], Vec::new(), true);
    assert_eq!(
        c.limited.as_deref(),
        Some("thread 0 busy 88% and waiting for a CPU 12%: no idle time")
    );
    let c = staked(c, "requests_per_s", Op::Ge, 10.0, 8.0);
    assert!(c.failure().unwrap().ends_with("raise client_threads"));
}

#[test]
fn late_open_loop_starts_limit_gated_rates() {
    let mut t = thread(0.1);
    t.starts = 1000;
    t.late_starts = 10;
    assert_eq!(check(vec![t.clone()], Vec::new(), true).limited, None);
    t.late_starts = 11;
    assert_eq!(
        check(vec![t], Vec::new(), true).limited.as_deref(),
        Some("thread 0 11 of 1000 starts late by over 5ms")
    );
}

#[test]
fn a_thread_without_work_is_not_judged() {
    let mut idle = thread(0.97);
    idle.streams = 0;
    assert_eq!(
        check(vec![thread(0.2), idle], Vec::new(), true).limited,
        None
    );
}
