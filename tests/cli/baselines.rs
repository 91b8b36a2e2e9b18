//! Baselines: no baseline yet, `servegate baseline save`, and relative
//! thresholds judged against the saved figures.

use crate::common::run::servegate_with;
use crate::common::verdicts::{assert_has, failure_of, verdict};

#[test]
fn baselines_round_trip_through_save_and_relative_thresholds() {
    let dir = std::env::temp_dir().join(format!("servegate-baselines-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (baselines, target) = (dir.join("baselines"), dir.join("target"));
    let env = [
        ("SERVEGATE_BASELINES", baselines.as_path()),
        ("CARGO_TARGET_DIR", target.as_path()),
    ];
    let run = || servegate_with(&["run", "tests/suites/relative.yaml"], &env);

    // No baseline yet: a relative threshold cannot pass.
    let out = run().out;
    let steady = failure_of(&out, "relative::performance::steady");
    assert_has(
        &steady,
        &[
            "but there is no baseline: no baseline file",
            "servegate baseline save",
        ],
    );

    // Save: the run's figures become the baseline of this configuration.
    let o = servegate_with(&["baseline", "save", "tests/suites/relative.yaml"], &env);
    let saved = o.out;
    assert_eq!(o.code, Some(0), "{saved}");
    let file = baselines.join("relative/steady.json");
    assert!(
        saved.contains(&format!(
            "servegate: baseline written to {}",
            file.display()
        )),
        "{saved}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    // Keyed by the configuration the server reports: SGLang's /server_info
    // fields that change what a figure means.
    let key = "openai-chat, model sim-steady, server servegate-sim 0.1.0, tp_size=1 attention_backend=simulated num_continuous_decode_steps=1";
    let entry = &json["entries"][key];
    assert!(
        entry["figures"]["decode_tok_s.mean"].as_f64().unwrap() > 0.0,
        "{json}"
    );

    // Against its own baseline, `steady` holds and `tenfold` shows both numbers.
    let o = run();
    let out = o.out;
    assert_eq!(
        verdict(&out, "relative::performance::steady"),
        "ok",
        "{out}"
    );
    assert_eq!(
        verdict(&out, "relative::performance::tenfold"),
        "FAILED",
        "{out}"
    );
    let tenfold = failure_of(&out, "relative::performance::tenfold");
    assert_has(
        &tenfold,
        &[
            "bound:    output_tok_s >= baseline * 10 = ",
            " from baseline ",
            "relative/tenfold.json, configuration openai-chat, model sim-steady",
        ],
    );

    // The same suite on a server of another configuration (tensor
    // parallelism 4): the tp_size 1 baseline is not applied to it.
    let o = servegate_with(&["run", "tests/suites/relative-tp4.yaml"], &env);
    assert_has(
        &failure_of(&o.out, "relative::performance::steady"),
        &[
            "has no entry for this configuration (openai-chat, model sim-steady, server servegate-sim 0.1.0, tp_size=4 attention_backend=simulated num_continuous_decode_steps=1); it has: ",
            key,
        ],
    );

    // A failed run records nothing: its probe failed, its gate is gated.
    let o = servegate_with(
        &["baseline", "save", "tests/suites/wrong_arithmetic.yaml"],
        &env,
    );
    assert_eq!(o.code, Some(1), "{}", o.out);
    assert_has(
        &o.out,
        &[
            "test result: FAILED",
            "error: the run failed: no baseline recorded",
        ],
    );
    assert!(!o.out.contains("baseline written"), "{}", o.out);
    assert!(!baselines.join("wrong").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
