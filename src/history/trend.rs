//! A run's gated figures against the history, for its reports: each one's
//! earlier values (the run report draws them beside this run's) and
//! whether this run moved off their level, either way (the step summary
//! lists those). The judgement is `no_regression`'s (`GateHistory`),
//! asked in both directions: a figure moved when the series with this run
//! shows a change of level this run is on, or this run is beyond the
//! level's 99% prediction bound.

use super::gate::{GateHistory, LEAST_CHANGE, Reference};
use super::{History, Location, ModelIdentity, Point, SeriesKey};
use crate::load::fingerprint::Config;
use crate::record::{GateRecord, RunRecord, Trend, TrendPoint};
use crate::suite::metric::MetricKey;
use crate::suite::threshold::Op;
use crate::text::for_log;

/// The most earlier values a trend keeps.
pub(crate) const TREND_POINTS: usize = 30;

/// Adds to each gate of `record` the trends of its gated figures (those a
/// threshold names), read from the history at `location` before this run
/// is recorded in it. Nothing where the history is off or holds nothing
/// yet, or no gate has a threshold; a history that cannot be read is a
/// warning (the run's verdicts stand without it). A figure the client set
/// is drawn, never said to move.
pub(crate) fn attach(location: &Location, record: &mut RunRecord) {
    let fresh = matches!(location, Location::Sqlite(path) if !path.exists());
    let gated_any = record
        .suites
        .iter()
        .any(|s| s.gates.iter().any(|g| !gated(g).is_empty()));
    if *location == Location::Off || fresh || !gated_any {
        return;
    }
    let mut history = match History::open(location) {
        Ok(h) => h,
        Err(e) => {
            eprintln!(
                "warning: the reports show no trends: {}",
                for_log(&e.to_string())
            );
            return;
        }
    };
    let (run, _) = super::rows(record, "run");
    for suite in &mut record.suites {
        let of_suite =
            SeriesKey::of_gate(&suite.suite, "", &ModelIdentity::of(suite), &run.hardware);
        for gate in &mut suite.gates {
            let series = SeriesKey {
                gate: super::stored(&gate.gate),
                ..of_suite.clone()
            };
            for key in gated(gate) {
                // A figure the client set is kept, never compared.
                let limited = gate.client.as_ref().is_some_and(|c| c.limits(key));
                let s = series.figure(key);
                let points = match history.points(&s, usize::MAX) {
                    Ok(mut p) => {
                        p.retain(|p| p.run_uid != run.run_uid);
                        p
                    }
                    Err(e) => {
                        eprintln!(
                            "warning: the reports show no trends: {}",
                            for_log(&e.to_string())
                        );
                        return;
                    }
                };
                if points.is_empty() {
                    continue;
                }
                let value = gate.figures.get(key).copied().filter(|_| !limited);
                let moved = value
                    .and_then(|v| moved(&s, &suite.fingerprint, key, &points, v))
                    .map(|m| {
                        let across = points.last().map_or_else(String::new, |last| {
                            across(&mut history, last, &suite.fingerprint, &suite.config)
                        });
                        m + &across
                    });
                let skip = points.len().saturating_sub(TREND_POINTS);
                gate.trends.push(Trend {
                    key,
                    earlier: points[skip..].iter().map(trend_point).collect(),
                    moved,
                });
            }
        }
    }
}

/// Where the run before in a series was of another configuration: that
/// the move is across the change, and the change by name where the
/// history holds the other configuration whole. A figure is never said to
/// move against another configuration's without saying so.
fn across(history: &mut History, last: &Point, fingerprint: &str, config: &Config) -> String {
    if last.fingerprint == fingerprint {
        return String::new();
    }
    let named = history
        .config(&last.fingerprint)
        .ok()
        .flatten()
        .filter(|_| !config.is_empty())
        .map_or_else(
            || format!("now {fingerprint}"),
            |theirs| {
                format!(
                    "by {}",
                    crate::load::fingerprint::differences_line(&theirs, config, 8)
                )
            },
        );
    format!(
        "; across a change of configuration since run {} ({named})",
        last.run_uid
    )
}

/// The figures a gate's thresholds name, each once, in their order.
fn gated(gate: &GateRecord) -> Vec<MetricKey> {
    let mut keys: Vec<MetricKey> = Vec::new();
    for t in gate.thresholds.iter().filter_map(|t| t.threshold.as_ref()) {
        if !keys.contains(&t.key) {
            keys.push(t.key);
        }
    }
    keys
}

fn trend_point(p: &Point) -> TrendPoint {
    TrendPoint {
        run: p.run_uid.clone(),
        finished_unix: p.finished_unix,
        value: p.value,
        commit: p.suite_commit.clone(),
        counted: p.counted(),
    }
}

/// Whether `value` moved off the level of the earlier `points` of a
/// series, in words: down by `no_regression`'s judgement with higher
/// better, or up by it with lower better.
pub fn moved(
    series: &SeriesKey,
    fingerprint: &str,
    key: MetricKey,
    points: &[Point],
    value: f64,
) -> Option<String> {
    let history = GateHistory {
        at: String::new(),
        series: series.clone(),
        fingerprint: fingerprint.to_owned(),
        points: Ok([(key, points.to_vec())].into_iter().collect()),
        changed: None,
        differs: None,
    };
    let judged = |op: Op| history.regression(key, op, Some(value)).ok().flatten();
    let said = |r: &Reference, direction: &str| {
        let mut said = format!(
            "{direction} {} against the level of {} earlier passing run(s)",
            change(value, r.value),
            r.runs
        );
        if let Some(change) = &r.fails {
            said.push_str(": ");
            said.push_str(&change.replace("for the worse", direction));
        } else {
            said.push_str(", beyond its 99% prediction bound");
        }
        said
    };
    // Off the level the way it moved, by more than a change worth a red:
    // a run back on the old level after a change is not said to move
    // with it.
    let off = |r: &Reference, sign: f64| {
        sign * (value - r.value) > LEAST_CHANGE * r.value.abs()
            && (r.fails.is_some() || r.bound.is_some_and(|b| sign * (value - b) > 0.0))
    };
    let down = judged(Op::Ge)
        .filter(|r| off(r, -1.0))
        .map(|r| said(&r, "down"));
    down.or_else(|| {
        judged(Op::Le)
            .filter(|r| off(r, 1.0))
            .map(|r| said(&r, "up"))
    })
}

/// `value` against `level` in words: `-22.3%`, or `0 → 3` from a level of
/// zero (no relative change).
pub fn change(value: f64, level: f64) -> String {
    if level == 0.0 {
        format!("{level} → {value}")
    } else {
        format!("{:+.1}%", 100.0 * (value - level) / level.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::{Point, SeriesKey, moved};
    use crate::random::SplitMix;

    fn series(values: &[f64]) -> Vec<Point> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| Point {
                run_uid: format!("n/{i}"),
                node: "n".into(),
                finished_unix: i64::try_from(i).unwrap(),
                value: *v,
                unit: "tok/s".into(),
                suite_commit: Some(format!("c{i}")),
                fingerprint: "f".into(),
                served_model: "m".into(),
                server_version: None,
                servegate: "0.1.0".into(),
                gate_passed: true,
                client_limited: false,
            })
            .collect()
    }

    fn key() -> SeriesKey {
        SeriesKey {
            suite: "s".into(),
            gate: "g".into(),
            key: "decode_tok_s.mean".into(),
            model: "m".into(),
            hardware: "no GPU".into(),
        }
    }

    /// Judged like a classifier, both ways: over seeded series of 15 runs
    /// at 2% noise, a run 10% off the level is said to move (down or up,
    /// as it went) nearly always, and a run on the level rarely. Measured
    /// (seed 7): 392 of 400 found, none the wrong way; 11 of 200 on-level
    /// runs said to move (`no_regression`'s one-sided false alarms, asked
    /// both ways).
    #[test]
    fn a_run_off_the_level_moved_and_one_on_it_did_not() {
        let figure = "decode_tok_s.mean".parse().unwrap();
        let mut rng = SplitMix::new(7);
        let (mut found, mut wrong_way, mut false_alarms) = (0, 0, 0);
        let trials = 200;
        for _ in 0..trials {
            let earlier: Vec<f64> = (0..15)
                .map(|_| 100.0 * (1.0 + 0.02 * rng.gauss()))
                .collect();
            let points = series(&earlier);
            let same = 100.0 * (1.0 + 0.02 * rng.gauss());
            if moved(&key(), "f", figure, &points, same).is_some() {
                false_alarms += 1;
            }
            for (off, direction) in [(0.90, "down"), (1.10, "up")] {
                let v = off * 100.0 * (1.0 + 0.02 * rng.gauss());
                match moved(&key(), "f", figure, &points, v) {
                    Some(said) if said.starts_with(direction) => found += 1,
                    Some(_) => wrong_way += 1,
                    None => {}
                }
            }
        }
        eprintln!(
            "moved: {found} of {} off-level runs found, {wrong_way} the wrong way; {false_alarms} of {trials} on-level runs said to move",
            2 * trials
        );
        assert_eq!(wrong_way, 0);
        assert!(found >= 2 * trials * 95 / 100, "found {found}");
        assert!(false_alarms <= trials * 8 / 100, "false {false_alarms}");
    }

    /// A run back on the old level after a change down is not said to
    /// move with it (the change is in the series, the run is not on it);
    /// from a level of zero a move is said in values, not as a share.
    #[test]
    fn a_run_back_on_its_level_did_not_move() {
        let figure = "decode_tok_s.mean".parse().unwrap();
        let mut values: Vec<f64> = (0..10).map(|i| 100.0 + f64::from(i % 3) * 0.3).collect();
        values.extend([80.0, 80.4, 79.7]);
        let points = series(&values);
        assert_eq!(moved(&key(), "f", figure, &points, 100.2), None);
        let down = moved(&key(), "f", figure, &points, 80.1).unwrap();
        assert!(down.starts_with("down -"), "{down}");
        let errors = "errors".parse().unwrap();
        let up = moved(&key(), "f", errors, &series(&[0.0; 8]), 3.0).unwrap();
        assert!(up.starts_with("up 0 → 3 against the level of 8"), "{up}");
    }

    /// Too short a series says nothing, whatever the value.
    #[test]
    fn a_short_series_says_nothing() {
        let figure = "decode_tok_s.mean".parse().unwrap();
        let points = series(&[100.0, 101.0, 99.0, 100.0]);
        assert_eq!(moved(&key(), "f", figure, &points, 10.0), None);
    }
}
