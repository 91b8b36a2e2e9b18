use super::{Location, hardware, record_hardware};
use std::path::Path;

#[test]
fn hardware_counts_gpus_by_name() {
    let lines = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(hardware(&[]), "no GPU");
    assert_eq!(
        hardware(&lines(&[
            "0, NVIDIA H200, 143771 MiB, 550.54",
            "1, NVIDIA H200, 143771 MiB, 550.54"
        ])),
        "2 x NVIDIA H200"
    );
    assert_eq!(
        hardware(&lines(&[
            "0, NVIDIA L4, 1 MiB, 1",
            "1, NVIDIA A10G, 1 MiB, 1"
        ])),
        "1 x NVIDIA L4 + 1 x NVIDIA A10G"
    );
}

#[test]
fn a_records_hardware_is_read_one_way_for_every_reader() {
    let mut record = crate::record::RunRecord::default();
    assert_eq!(record_hardware(&record), "no GPU");
    record.gpus = Some(vec![
        "0, NVIDIA H100 80GB HBM3, 81559 MiB, 550.54".to_owned(),
        format!("1, {}, 1 MiB, 1", "\u{1b}[2J".repeat(100)),
    ]);
    let read = record_hardware(&record);
    assert!(
        read.starts_with("1 x NVIDIA H100 80GB HBM3 + 1 x "),
        "{read}"
    );
    assert!(
        !read.contains('\u{1b}') && read.chars().count() <= 300,
        "{read}"
    );
    // An imported result's words win over its (absent) inventory.
    record.hardware = Some("unknown".to_owned());
    assert_eq!(record_hardware(&record), "unknown");
}

#[test]
fn a_record_older_than_the_trial_item_joins_its_gates_by_name() {
    let run: crate::record::RunRecord = serde_json::from_value(serde_json::json!({
        "schema": "servegate.run/2", "run_id": "1-1", "node": "n",
        "started_unix": 1, "finished_unix": 2, "complete": true, "servegate": "0.1.0",
        "trials": [{"name": "s::performance::decode", "suite": "s", "stage": "performance",
            "outcome": "passed", "duration_s": 1.0, "file": "s.yaml", "line": 3}],
        "suites": [{"suite": "s", "fingerprint": "f", "target": "t",
            "gates": [{"gate": "decode", "load": "l", "repeats": 1, "figures": {"errors": 0.0}}]}]
    }))
    .unwrap();
    let (suite, gate) = (&run.suites[0], &run.suites[0].gates[0]);
    assert_eq!(run.trials[0].id.item, "");
    assert_eq!(
        run.gate_trial(suite, gate).map(|t| t.name.as_str()),
        Some("s::performance::decode")
    );
}

#[test]
fn only_the_figures_the_client_moved_are_not_counted() {
    // A passing gate whose ITL the client moved past its tolerance (its
    // verdict certain): that figure is kept, not counted; its decode
    // rate counts.
    let run: crate::record::RunRecord = serde_json::from_value(serde_json::json!({
        "schema": "servegate.run/2", "run_id": "1-1", "node": "n",
        "finished_unix": 1, "complete": true,
        "trials": [{ "name": "s::performance::g", "suite": "s", "stage": "performance",
            "item": "g", "outcome": "passed", "duration_s": 1.0, "file": "s.yaml", "line": 1 }],
        "suites": [{ "suite": "s", "fingerprint": "f", "target": "t",
            "gates": [{ "gate": "g", "load": "x", "repeats": 1,
                "figures": { "itl.p99": 0.012, "decode_tok_s.mean": 80.0 },
                "client": { "chosen": "auto", "threads": [],
                    "figures": [{ "figure": "itl.p99", "value": 0.012, "bound": 0.003,
                        "tolerance": 0.000_24, "time": true, "low": 0.009, "high": 0.012 }],
                    "limited": "itl.p99 12.00ms could be off by up to 3.00ms (240us allowed)" } }] }]
    }))
    .unwrap();
    let (_, points) = super::rows(&run, "run");
    let counted = |key: &str| {
        points
            .iter()
            .find(|p| p.key.to_string() == key)
            .map(|p| p.gate_passed && !p.client_limited)
            .unwrap()
    };
    assert!(!counted("itl.p99"));
    assert!(counted("decode_tok_s.mean"));
}

#[test]
fn the_history_is_named_or_beside_the_runs() {
    let out = Path::new("/o");
    assert_eq!(
        Location::resolve(Some("off"), out),
        Location::Off,
        "`off` turns it off"
    );
    assert_eq!(
        Location::resolve(Some("sqlite:///h/x.sqlite"), out),
        Location::Sqlite("/h/x.sqlite".into())
    );
    assert_eq!(
        Location::resolve(Some("/h/y.db"), out),
        Location::Sqlite("/h/y.db".into())
    );
}
