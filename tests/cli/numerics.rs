//! Numerics probes: the server scores a fixed text and the mean token
//! log-probability is held to a known-good configuration's, whatever words
//! the server writes.

use crate::common::run::{run_expecting, servegate_with};
use crate::common::verdicts::{assert_has, failure_of, verdict};

/// Against the simulator with sound numerics the probe passes (in a chat
/// suite: the scoring goes through SGLang's `/generate`); with broken
/// numerics (`broken_numerics`: right answers, fast, text scored nine nats
/// lower) it fails, naming the measured and the known-good mean and what
/// was sent, and the suite's gate is not measured; the right answer to
/// "2+2" passes either way. Without a known-good mean it fails, saying
/// what to write.
#[test]
fn a_numerics_probe_catches_broken_numerics_that_right_answers_hide() {
    run_expecting(&["run", "tests/suites/numerics.yaml"], 0);
    let dir = tempfile::tempdir().unwrap();
    let o = servegate_with(
        &[
            "run",
            "tests/suites/numerics.yaml",
            "--out-dir",
            dir.path().to_str().unwrap(),
        ],
        &[(
            "NUMERICS_PROFILE",
            std::path::Path::new("fixtures/sim/broken-numerics.yaml"),
        )],
    );
    assert_eq!(o.code, Some(1), "{}", o.out);
    assert_eq!(verdict(&o.out, "numerics::correctness::arithmetic"), "ok");
    assert_has(
        &failure_of(&o.out, "numerics::correctness::scores"),
        &[
            "error: numerics changed: mean token log-probability -10.9853, a known-good configuration's -1.9853 ± 0.05",
            "--> tests/suites/numerics.yaml:13:5",
            "measured: mean token log-probability -10.9853 over 17 tokens",
            "expected: -1.9853 ± 0.05 (`numerics.mean_logprob`, `within`), -9.0000 off",
            "sent:     POST http://127.0.0.1:",
            "/generate\n          {\"logprob_start_len\":0,\"return_logprob\":true,",
        ],
    );
    assert_has(
        &failure_of(&o.out, "numerics::performance::decode"),
        &["gated: correctness probe scores failed"],
    );
    let out = run_expecting(&["run", "tests/suites/numerics-uncalibrated.yaml"], 1);
    assert_has(
        &failure_of(&out, "numerics_uncalibrated::correctness::calibrate"),
        &[
            "error: numerics probe has no reference: `numerics.mean_logprob` is not set",
            "if this server is one, set `mean_logprob: -1.9853`",
        ],
    );
}
