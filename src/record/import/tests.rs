use super::*;

/// Python's words for what JSON cannot say, outside strings only.
#[test]
fn pythons_infinity_and_nan_are_read() {
    assert_eq!(
        python_json(r#"{"r": Infinity, "s": "NaN Infinity", "n": NaN, "m": -Infinity}"#),
        r#"{"r": "Infinity", "s": "NaN Infinity", "n": null, "m": "-Infinity"}"#
    );
}

#[test]
fn a_file_that_is_no_result_is_refused_with_its_line() {
    let naming = Naming::default();
    assert_eq!(bench_serving("", &naming).unwrap_err(), ImportError::Empty);
    assert!(matches!(
        bench_serving("{\"a\": 1}\n", &naming).unwrap_err(),
        ImportError::NotAResult { line: 1 }
    ));
    assert!(matches!(
        bench_serving("{\"random_input_len\": 1}\n{oops\n", &naming).unwrap_err(),
        ImportError::NotJson { line: 2, .. }
    ));
    let two = "{\"random_input_len\": 1}\n{\"random_input_len\": 2}\n";
    let one_gate = Naming {
        gate: Some("g".into()),
        ..Naming::default()
    };
    assert_eq!(
        bench_serving(two, &one_gate).unwrap_err(),
        ImportError::OneGateForMany(2)
    );
    // Two runs of one load are two gates.
    let record = bench_serving(two, &naming).unwrap();
    let names: Vec<&str> = record.suites[0]
        .gates
        .iter()
        .map(|g| g.gate.as_str())
        .collect();
    assert_eq!(names, ["rate_inf", "rate_inf_line2"]);
}

/// A result's rate and dataset name the imported gate and its load: a
/// rate that is no rate, and a dataset name that is no plain name (a
/// file's text, escapes, a flood), name nothing.
#[test]
fn a_results_words_are_bounded_before_they_name_a_gate() {
    let gate_of = |result: &str| {
        let record = bench_serving(&format!("{result}\n"), &Naming::default()).unwrap();
        let g = &record.suites[0].gates[0];
        (g.gate.clone(), g.load.clone())
    };
    let (gate, load) = gate_of(
        r#"{"random_input_len": 1, "max_concurrency": 8, "request_rate": 2.5, "dataset_name": "sharegpt"}"#,
    );
    assert_eq!(gate, "c8_rate_2_5");
    assert!(
        load.ends_with("request rate 2.5, dataset sharegpt"),
        "{load}"
    );
    let flood = "x".repeat(5000);
    let (gate, load) = gate_of(&format!(
        r#"{{"random_input_len": 1, "request_rate": "\u001b[31m::error::{flood}", "dataset_name": "a\nb {flood}"}}"#
    ));
    assert_eq!(gate, "rate_inf");
    assert!(
        load.len() < 200 && !load.contains('\u{1b}') && !load.contains('\n'),
        "{load}"
    );
}

/// vLLM's `date` is read as UTC; anything else is no date.
#[test]
fn a_date_is_vllms_or_none() {
    assert_eq!(parse_date("20261201-101500"), Some(1_796_120_100));
    for bad in [
        "2026-12-01",
        "20261301-101500",
        "20261201-1015",
        "2026120a-101500",
        "20261201-101500x",
    ] {
        assert_eq!(parse_date(bad), None, "{bad}");
    }
}
