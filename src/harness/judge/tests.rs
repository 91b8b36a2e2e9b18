//! The gate verdict's unit tests: repeats judged by each verdict mode,
//! thresholds and their data.

use super::*;
use crate::client::{Completion, Timing};
use crate::load::baseline::Lookup;
use crate::suite::OnClientLimited;
use crate::suite::load_text;
use crate::suite::metric::Unit;
use std::path::Path;
use std::time::Duration;

/// Figures of a repeat in which `tokens` tokens streamed in one second.
fn repeat(tokens: u64) -> GateMetrics {
    let c = Completion {
        completion_tokens: tokens,
        timing: Timing {
            first_token: Some(Duration::from_millis(10)),
            end: Duration::from_secs(1),
            ..Timing::default()
        },
        ..Completion::default()
    };
    GateMetrics::compute(&[c], &[], Duration::from_secs(1))
}

fn no_baseline() -> Lookup {
    Lookup::find(
        Path::new("/nonexistent"),
        "n",
        &["g"],
        "test",
        &crate::load::fingerprint::Config::new(),
    )
}

fn refs(baseline: &Lookup) -> References<'_> {
    References {
        baseline,
        variant: None,
        variants: &[],
        recording_baselines: false,
        client_limited: OnClientLimited::Fail,
        history: None,
    }
}

fn noisy_gate(verdict: &str) -> (Suite, Gate) {
    let text = format!(
        "suite: n\nperformance:\n  - name: g\n    repeats: 5\n    verdict: {verdict}\n    load: {{requests: 1, prompt: x, output_tokens: 8}}\n    thresholds:\n      output_tok_s: \">= 500\"\n"
    );
    let suite = load_text(Path::new("n.yaml"), &text, &|_| None).unwrap();
    let gate = suite.gates[0].clone();
    (suite, gate)
}

#[test]
fn a_noisy_gate_passes_leniently_and_fails_strictly() {
    // Mean 499 tok/s, spread ±16: noise around the bound of 500.
    let repeats: Vec<GateMetrics> = [480, 520, 495, 510, 490].into_iter().map(repeat).collect();
    let (suite, gate) = noisy_gate("lenient");
    let j = judge(&suite, &gate, &mut repeats.clone(), &refs(&no_baseline()));
    assert!(j.result.is_ok(), "{:?}", j.result);
    assert!(
        j.checks[0]
            .check
            .contains("499.0 tok/s ± 16.0 tok/s (95% CI 479.2 tok/s … 518.8 tok/s, 5 repeats)"),
        "{:?}",
        j.checks
    );
    // The same verdict as data.
    let v = j.checks[0].threshold.as_ref().expect("a threshold's row");
    assert_eq!(
        (v.key.to_string(), v.op, v.bound, v.unit()),
        (
            "output_tok_s".to_owned(),
            Op::Ge,
            Some(500.0),
            Unit::TokPerS
        )
    );
    assert!((v.measured.unwrap() - 499.0).abs() < 1e-9, "{v:?}");
    assert_eq!(v.repeats, [480.0, 520.0, 495.0, 510.0, 490.0]);
    assert!(!v.implicit && v.not_applied.is_none());
    let errors = j.checks[1].threshold.as_ref().expect("the implicit row");
    assert_eq!(
        (errors.key.to_string(), errors.implicit),
        ("errors".into(), true)
    );
    assert_eq!(
        j.checks.len(),
        2,
        "no self-check row without client threads"
    );
    let (suite, gate) = noisy_gate("mean");
    assert!(
        judge(&suite, &gate, &mut repeats.clone(), &refs(&no_baseline()))
            .result
            .is_err()
    );
    let (suite, gate) = noisy_gate("strict");
    let message = judge(&suite, &gate, &mut repeats.clone(), &refs(&no_baseline()))
        .result
        .unwrap_err()
        .to_string();
    assert!(
        message
            .starts_with("error: threshold failed: output_tok_s >= 500.0 tok/s (verdict: strict)"),
        "{message}"
    );
    assert!(
        message
            .contains("repeats:  480.0 tok/s, 520.0 tok/s, 495.0 tok/s, 510.0 tok/s, 490.0 tok/s"),
        "{message}"
    );
    assert!(message.contains("figures (repeat 5 of 5):"), "{message}");
    // Far below the bound, even the lenient verdict fails.
    let slow: Vec<GateMetrics> = [300, 310, 305].into_iter().map(repeat).collect();
    let (suite, gate) = noisy_gate("lenient");
    assert!(
        judge(&suite, &gate, &mut slow.clone(), &refs(&no_baseline()))
            .result
            .is_err()
    );
}

fn threshold(op: Op, bound: f64) -> Threshold {
    Threshold {
        key: "output_tok_s".parse().unwrap(),
        op,
        bound: Bound::Value(bound),
    }
}

fn check(t: &Threshold, e: &Estimate, mode: VerdictMode) -> bool {
    let Bound::Value(bound) = t.bound else {
        panic!("a fixed bound")
    };
    holds(t, bound, e, mode)
}

#[test]
fn verdict_modes_read_the_interval() {
    // 100 ± 4.3 (95% CI about 95.0 … 105.0)
    let e = Estimate::of(vec![98.0, 100.0, 102.0]);
    let at_least = |b| threshold(Op::Ge, b);
    assert!(check(&at_least(99.0), &e, VerdictMode::Mean));
    assert!(!check(&at_least(101.0), &e, VerdictMode::Mean));
    // Lenient: fails only when the whole interval is below the bound.
    assert!(check(&at_least(104.0), &e, VerdictMode::Lenient));
    assert!(!check(&at_least(106.0), &e, VerdictMode::Lenient));
    // Strict: passes only when the whole interval is above the bound.
    assert!(!check(&at_least(96.0), &e, VerdictMode::Strict));
    assert!(check(&at_least(94.0), &e, VerdictMode::Strict));
    // Upper bounds read the other end.
    assert!(check(&threshold(Op::Le, 96.0), &e, VerdictMode::Lenient));
    assert!(!check(&threshold(Op::Le, 104.0), &e, VerdictMode::Strict));
    // A point: `!=` fails by the mean where the mean is the bound, by
    // every repeat where one is (strict), and only where nothing but the
    // bound is in the interval (lenient).
    assert!(!check(&threshold(Op::Ne, 100.0), &e, VerdictMode::Mean));
    assert!(check(&threshold(Op::Ne, 101.0), &e, VerdictMode::Mean));
    assert!(!check(&threshold(Op::Ne, 98.0), &e, VerdictMode::Strict));
    assert!(check(&threshold(Op::Ne, 99.0), &e, VerdictMode::Strict));
    assert!(check(&threshold(Op::Ne, 100.0), &e, VerdictMode::Lenient));
    let exact = Estimate::of(vec![100.0, 100.0, 100.0]);
    assert!(!check(
        &threshold(Op::Ne, 100.0),
        &exact,
        VerdictMode::Lenient
    ));
    assert!(check(
        &threshold(Op::Eq, 100.0),
        &exact,
        VerdictMode::Lenient
    ));
    // Three repeats of 0.1 average a hair above it: `==` holds within the
    // bound's tolerance, `!=` fails, leniently as by the mean.
    let tenths = Estimate::of(vec![0.1, 0.1, 0.1]);
    for mode in [VerdictMode::Mean, VerdictMode::Lenient] {
        assert!(check(&threshold(Op::Eq, 0.1), &tenths, mode), "{mode:?}");
        assert!(!check(&threshold(Op::Ne, 0.1), &tenths, mode), "{mode:?}");
    }
}

/// A gate's cause names the thresholds that failed; a gate that failed
/// for no threshold (its load stopped early) has none: nothing in it
/// would say why, and the message does.
#[test]
fn a_failed_gate_names_its_failed_thresholds_as_its_cause() {
    let repeats: Vec<GateMetrics> = [480, 520, 495, 510, 490].into_iter().map(repeat).collect();
    let (suite, gate) = noisy_gate("mean");
    let j = judge(&suite, &gate, &mut repeats.clone(), &refs(&no_baseline()));
    assert!(j.result.is_err());
    let Some(FailureCause::Thresholds {
        failed,
        client_at_stake,
    }) = j.cause()
    else {
        panic!("no thresholds cause: {:?}", j.cause());
    };
    let keys: Vec<String> = failed.iter().map(|v| v.key.to_string()).collect();
    assert_eq!(
        (keys, client_at_stake),
        (vec!["output_tok_s".to_owned()], false)
    );
    let mut stopped: Vec<GateMetrics> = [600, 610].into_iter().map(repeat).collect();
    stopped[1].stopped_early = Some("stopped after 3 stalls in a row".into());
    let (suite, gate) = noisy_gate("mean");
    let j = judge(&suite, &gate, &mut stopped, &refs(&no_baseline()));
    assert!(j.result.is_err(), "a gate cut short never passes");
    assert_eq!(j.cause(), None);
}
