//! The run as events: what a library user's listener is told rebuilds the
//! run's record.

use std::sync::{Arc, Mutex};

use servegate::harness::{Listener, Listeners, RunEvent, RunOptions};
use servegate::record::{RunRecord, ThresholdRecord, TrialRecord};
use servegate::suite::figures::Figures;

/// A gate's suite, variant, name, figures and verdicts.
type Gate = (
    String,
    Option<String>,
    String,
    Figures,
    Vec<ThresholdRecord>,
);

/// What a listener kept of a run's events.
#[derive(Default)]
struct Kept {
    /// Each suite run's label and whether it reached its server.
    targets: Vec<(String, bool)>,
    trials: Vec<TrialRecord>,
    gates: Vec<Gate>,
    written: Vec<RunRecord>,
    /// The trials of the record the run finished with.
    finished: usize,
}

#[derive(Default)]
struct Keeper(Mutex<Kept>);

impl Listener for Keeper {
    fn on(&self, event: &RunEvent<'_>) {
        let mut kept = self.0.lock().unwrap();
        match event {
            RunEvent::TargetReached { label, target } => {
                kept.targets.push(((*label).to_owned(), target.is_ok()));
            }
            RunEvent::TrialFinished(t) => kept.trials.push((*t).clone()),
            RunEvent::GateMeasured {
                suite,
                variant,
                figures,
                ..
            } => kept.gates.push((
                (*suite).to_owned(),
                variant.map(str::to_owned),
                figures.gate.clone(),
                figures.figures.clone(),
                figures.checks.clone(),
            )),
            RunEvent::RecordWritten { record, .. } => kept.written.push((*record).clone()),
            RunEvent::RunFinished(record) => kept.finished += record.trials.len(),
        }
    }
}

/// A run's events, kept by a listener of its own, rebuild its record:
/// every trial as recorded and in its order (a failed probe, the gate it
/// gated, a passing one), every gate's figures and verdicts, each suite's
/// target; the record handed to the listener at the end is the one
/// written. The record is built from those events, so this holds the
/// record and every other listener to one source.
#[test]
fn a_runs_events_rebuild_its_record() {
    let out = std::env::temp_dir().join(format!("servegate-events-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let keeper = Arc::new(Keeper::default());
    let options = RunOptions {
        out_dir: Some(out.clone()),
        history: Some("off".into()),
        listeners: Listeners::default().and([Arc::clone(&keeper) as Arc<dyn Listener>]),
        ..RunOptions::default()
    };
    let suites = [
        "tests/suites/wrong_arithmetic.yaml".into(),
        "tests/suites/repeats.yaml".into(),
    ];
    // libtest's lines (two failures among them) go to a file of the test's.
    std::fs::create_dir_all(&out).unwrap();
    let args = libtest_mimic::Arguments {
        logfile: Some(out.join("libtest.log").display().to_string()),
        ..libtest_mimic::Arguments::default()
    };
    let outcome = servegate::harness::run(&suites, &options, args);
    assert_eq!(
        (outcome.conclusion.num_passed, outcome.conclusion.num_failed),
        (2, 2),
        "a probe failed and its gate gated; a probe and a gate passed"
    );
    let record = servegate::record::read(&out.join("latest")).unwrap();
    let kept = keeper.0.lock().unwrap();
    assert_eq!(kept.trials, record.trials);
    let outcomes: Vec<(&str, &str)> = kept
        .trials
        .iter()
        .map(|t| (t.name.as_str(), t.outcome.name()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("wrong::correctness::arithmetic", "failed"),
            ("wrong::correctness::is_prime", "passed"),
            ("wrong::performance::decode", "gated"),
            ("repeats::performance::decode", "passed"),
        ]
    );
    let gates: Vec<Gate> = record
        .suites
        .iter()
        .flat_map(|s| {
            s.gates.iter().map(|g| {
                (
                    s.suite.clone(),
                    s.variant.clone(),
                    g.gate.clone(),
                    g.figures.clone(),
                    g.thresholds.clone(),
                )
            })
        })
        .collect();
    assert_eq!(kept.gates.len(), 1, "only the gate that ran measured");
    assert_eq!(kept.gates, gates);
    let targets: Vec<(String, bool)> = record
        .suites
        .iter()
        .map(|s| (s.suite.clone(), true))
        .collect();
    assert_eq!(kept.targets, targets);
    let [written] = &kept.written[..] else {
        panic!("one record written, at the end: {}", kept.written.len());
    };
    assert!(written.complete);
    assert_eq!(kept.finished, record.trials.len());
    assert_eq!(
        serde_json::to_value(written).unwrap(),
        serde_json::to_value(&record).unwrap()
    );
    drop(kept);
    let _ = std::fs::remove_dir_all(&out);
}
