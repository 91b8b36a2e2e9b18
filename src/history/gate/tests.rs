use super::{GateHistory, Op, Point, Recent, t_quantile};
use crate::suite::metric::MetricKey;

fn point(i: usize, value: f64, fingerprint: &str, passed: bool) -> Point {
    Point {
        run_uid: format!("n/{i}-1"),
        node: "n".into(),
        finished_unix: i64::try_from(i).unwrap(),
        value,
        unit: "tok/s".into(),
        suite_commit: Some(format!("c{i}")),
        fingerprint: fingerprint.into(),
        served_model: "m".into(),
        server_version: None,
        servegate: "0.1.0".into(),
        gate_passed: passed,
        client_limited: false,
    }
}

fn history(points: Vec<Point>) -> GateHistory {
    let key: MetricKey = "decode_tok_s.mean".parse().unwrap();
    GateHistory {
        at: "h".into(),
        series: super::SeriesKey {
            suite: "s".into(),
            gate: "g".into(),
            key: String::new(),
            model: "m".into(),
            hardware: "no GPU".into(),
        },
        fingerprint: "f".into(),
        points: Ok([(key, points)].into_iter().collect()),
        changed: None,
        differs: None,
    }
}

/// A server that said no model id (its discovery failed), now or in
/// the run before, is no change of id; one that says another is.
#[test]
fn an_unreported_id_is_no_change_of_model() {
    let series = history(Vec::new()).series;
    let identity = |served, reported| super::ModelIdentity {
        pinned: Some("m"),
        served,
        reported,
    };
    let said = |served: &str| Point {
        served_model: served.into(),
        ..point(1, 1.0, "f", true)
    };
    let change = |before: &str, now| super::served_change(&said(before), &now, &series);
    assert!(change("m", identity("m", false)).is_none());
    assert!(change("", identity("other", true)).is_none());
    assert!(change("m", identity("m", true)).is_none());
    let changed = change("m", identity("other", true)).expect("a change");
    assert!(changed.contains("serves model \"other\""), "{changed}");
}

#[test]
fn t_quantiles_are_near_the_table() {
    // Student's t at 0.99: df 4 → 3.747, 9 → 2.821, 29 → 2.462.
    for (df, table) in [(4.0, 3.747), (9.0, 2.821), (29.0, 2.462)] {
        let t = t_quantile(df);
        assert!(
            (t - table).abs() / table < 0.03,
            "df {df}: {t} against {table}"
        );
    }
}

/// The median of the last N good runs of this configuration: a failed
/// run, a client-limited one and another configuration's are not in it.
#[test]
fn recent_runs_of_this_configuration_make_the_reference() {
    let key = "decode_tok_s.mean".parse().unwrap();
    let mut points: Vec<Point> = (0..5)
        .map(|i| point(i, 100.0 + f64::from(u8::try_from(i).unwrap()), "f", true))
        .collect();
    points.push(point(5, 10.0, "f", false));
    points.push(point(6, 1000.0, "other", true));
    let mut limited = point(7, 1.0, "f", true);
    limited.client_limited = true;
    points.push(limited);
    let h = history(points);
    let r = h.recent(key, Recent::Median(3)).unwrap().unwrap();
    assert_eq!((r.value, r.runs), (103.0, 3));
    assert_eq!(r.last_good.unwrap().run_uid, "n/4-1");
    let r = h.recent(key, Recent::Mean(10)).unwrap().unwrap();
    assert_eq!((r.value, r.runs), (102.0, 5));
    assert!(
        history(vec![point(0, 1.0, "f", true)])
            .recent(key, Recent::Median(10))
            .unwrap()
            .is_none()
    );
}

/// `no_regression` holds noise and fails a step: at ±1% noise the bound
/// sits a few percent under the level, a 10% drop is beyond it.
#[test]
fn the_regression_bound_is_the_level_less_its_noise() {
    let key = "decode_tok_s.mean".parse().unwrap();
    let mut rng = crate::random::SplitMix::new(7);
    let noisy: Vec<Point> = (0..12)
        .map(|i| point(i, 100.0 * (1.0 + 0.02 * (rng.unit() - 0.5)), "f", true))
        .collect();
    let r = history(noisy)
        .regression(key, Op::Ge, Some(99.5))
        .unwrap()
        .unwrap();
    let bound = r.bound.unwrap();
    assert!((97.0..99.0).contains(&bound), "{r:?}");
    assert!(90.0 < bound, "a 10% drop is beyond it: {r:?}");
    assert_eq!(r.last_good.unwrap().run_uid, "n/11-1");
    let r = history((0..4).map(|i| point(i, 1.0, "f", true)).collect())
        .regression(key, Op::Ge, Some(1.0))
        .unwrap();
    assert!(r.is_none(), "four runs are too few");
}

/// A 4% step in 1% noise: no single run is beyond the bound, but once
/// three runs are on the new level the change is found and named.
#[test]
fn a_small_step_fails_once_runs_are_on_it() {
    let key = "decode_tok_s.mean".parse().unwrap();
    let mut rng = crate::random::SplitMix::new(11);
    let mut noise = move || 1.0 + 0.01 * (rng.unit() + rng.unit() + rng.unit() - 1.5);
    let mut points: Vec<Point> = (0..15)
        .map(|i| point(i, 100.0 * noise(), "f", true))
        .collect();
    points.extend((15..17).map(|i| point(i, 96.0 * noise(), "f", true)));
    let h = history(points);
    let r = h
        .regression(key, Op::Ge, Some(96.0 * noise()))
        .unwrap()
        .unwrap();
    let fails = r.fails.expect("the change is found");
    assert!(fails.contains("from run n/15-1 on"), "{fails}");
    assert_eq!(
        r.last_good.unwrap().run_uid,
        "n/14-1",
        "the last run before the change"
    );
    // The same series without the step: nothing.
    let steady: Vec<Point> = (0..17)
        .map(|i| point(i, 100.0 * noise(), "f", true))
        .collect();
    let r = history(steady)
        .regression(key, Op::Ge, Some(100.0 * noise()))
        .unwrap()
        .unwrap();
    assert!(r.fails.is_none(), "{r:?}");
}

/// `no_regression` judged as a classifier against known truth, both
/// ways: 200 seeded histories of 15 passing runs per cell (Gaussian
/// noise of 1, 3 and 5%), then one new run on the same level (a red
/// is a false alarm) or a step down of 5 or 10% (a green is a miss).
#[test]
fn no_regression_as_a_classifier() {
    let key = "decode_tok_s.mean".parse().unwrap();
    let mut rng = crate::random::SplitMix::new(2026);
    let mut gauss = move || rng.gauss();
    let mut table = Vec::new();
    for noise in [0.01, 0.03, 0.05] {
        for step in [0.0, 0.05, 0.10] {
            let mut reds = 0;
            for _ in 0..200 {
                let points: Vec<Point> = (0..15)
                    .map(|i| point(i, 100.0 * (1.0 + noise * gauss()), "f", true))
                    .collect();
                let newest = 100.0 * (1.0 - step) * (1.0 + noise * gauss());
                let r = history(points)
                    .regression(key, Op::Ge, Some(newest))
                    .unwrap()
                    .unwrap();
                if newest < r.bound.unwrap() || r.fails.is_some() {
                    reds += 1;
                }
            }
            table.push((noise, step, reds));
        }
    }
    eprintln!("noise  step  red of 200");
    for (noise, step, reds) in &table {
        eprintln!("{:>4.0}% {:>4.0}%  {reds}", noise * 100.0, step * 100.0);
    }
    let red = |n: f64, s: f64| {
        table
            .iter()
            .find(|(a, b, _)| (a - n).abs() < 1e-9 && (b - s).abs() < 1e-9)
            .map_or(0, |t| t.2)
    };
    // False alarms: at most 3% of runs at every noise level.
    for noise in [0.01, 0.03, 0.05] {
        assert!(red(noise, 0.0) <= 6, "false alarms at {noise}: {table:?}");
    }
    // One run shows a step of 5 sd and more nearly always.
    assert!(red(0.01, 0.05) >= 190, "{table:?}");
    assert!(red(0.01, 0.10) >= 198, "{table:?}");
    assert!(red(0.03, 0.10) >= 120, "{table:?}");
}

/// A step the first run cannot show is found within a few runs: 100
/// seeded histories per cell of 15 runs, then nightly runs on a level
/// 5% lower, each judged and (when green) recorded as passing, until
/// one is red. The same without a step counts red nights in 10.
#[test]
fn no_regression_finds_a_small_step_within_nights() {
    let key = "decode_tok_s.mean".parse().unwrap();
    let mut rng = crate::random::SplitMix::new(27);
    let mut gauss = move || rng.gauss();
    let mut rows = Vec::new();
    for (noise, step) in [(0.01, 0.03), (0.03, 0.05), (0.03, 0.0), (0.05, 0.10)] {
        let mut found_within = [0u32; 10];
        for _ in 0..100 {
            let mut points: Vec<Point> = (0..15)
                .map(|i| point(i, 100.0 * (1.0 + noise * gauss()), "f", true))
                .collect();
            for (night, found) in found_within.iter_mut().enumerate() {
                let newest = 100.0 * (1.0 - step) * (1.0 + noise * gauss());
                let r = history(points.clone())
                    .regression(key, Op::Ge, Some(newest))
                    .unwrap()
                    .unwrap();
                if newest < r.bound.unwrap() || r.fails.is_some() {
                    *found += 1;
                    break;
                }
                points.push(point(15 + night, newest, "f", true));
            }
        }
        let cumulative: Vec<u32> = found_within
            .iter()
            .scan(0, |acc, n| {
                *acc += n;
                Some(*acc)
            })
            .collect();
        rows.push((noise, step, cumulative));
    }
    eprintln!("noise  step  red by night 1..10 (of 100)");
    for (noise, step, c) in &rows {
        eprintln!("{:>4.0}% {:>4.0}%  {c:?}", noise * 100.0, step * 100.0);
    }
    let by = |row: usize, night: usize| rows[row].2[night - 1];
    assert!(by(0, 4) >= 90, "3% step in 1% noise, by night 4: {rows:?}");
    assert!(by(1, 6) >= 70, "5% step in 3% noise, by night 6: {rows:?}");
    assert!(
        by(2, 10) <= 30,
        "no step, 3% noise: red nights in 10: {rows:?}"
    );
    assert!(by(3, 6) >= 70, "10% step in 5% noise, by night 6: {rows:?}");
}
