//! `servegate init`: a first suite written from a calibration on a target,
//! which then passes on that target.

use crate::common::run::run_expecting;
use crate::common::verdicts::assert_has;
use crate::external_sim;

/// `servegate init` writes a first suite from what it measured on the
/// target, and that suite passes `servegate run` on the same target.
#[test]
fn init_writes_a_suite_that_passes_on_its_own_server() {
    let dir = std::env::temp_dir().join(format!("servegate-init-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = dir.join("suites/first.yaml");
    let path = file.to_str().unwrap();
    let (sim, url) = external_sim("fixtures/sim/sglang.yaml");
    // The calibration and the run measure a debug simulator at 500 tok/s
    // a stream on the runner's shared cores: figures judged even where the
    // self-check distrusts their 2 ms gaps (see
    // `an_external_server_is_measured_and_named_as_such`).
    let out = run_expecting(
        &[
            "init",
            "--target",
            &url,
            "--out",
            path,
            "--client-limited",
            "warn",
        ],
        0,
    );
    assert_has(
        &out,
        &[
            &format!("servegate init: asking {url} what it serves"),
            "servegate init: probe arithmetic: ok",
            "servegate init: probe is_prime: ok",
            "contract checks held: max_tokens, ignore_eos, usage, stop, cache_determinism",
            "servegate init: measuring 8 concurrent streams",
            &format!("servegate init: wrote {path}"),
        ],
    );
    let suite = std::fs::read_to_string(&file).unwrap();
    assert_has(
        &suite,
        &[
            "# yaml-language-server: $schema=servegate.schema.json\n",
            "# A first suite for sim-sglang, server ",
            &format!("  base_url: \"{url}\"\n"),
            "  - name: arithmetic\n",
            "  - name: is_prime\n",
            "    contract: [max_tokens, ignore_eos, usage, stop, cache_determinism]\n",
            "      decode_tok_s.mean: \">= ",
            "tok/s in 3 runs (sim-sglang, server ",
            ": 80% of the lowest",
            "      itl.p99: \"<= ",
        ],
    );
    assert!(!suite.contains("Failed on this server"), "{suite}");
    assert!(dir.join("suites/servegate.schema.json").is_file());
    let out = run_expecting(&["run", path, "--client-limited", "warn"], 0);
    assert_has(
        &out,
        &[
            "test first::correctness::arithmetic ",
            "test first::correctness::is_prime ",
            "test first::performance::concurrency_8 ",
            "5 passed; 0 failed",
        ],
    );
    drop(sim);

    // A file that exists is left alone without --force.
    let out = run_expecting(&["init", "--out", path], 2);
    assert_has(
        &out,
        &[&format!("error: {path} exists; `--force` overwrites it")],
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), suite);

    // The embedded simulator's default profile answers with filler: the
    // probes it fails are written commented out, with why, and the suite
    // still passes there.
    let out = run_expecting(&["init", "--target", "sim", "--out", path, "--force"], 0);
    assert_has(&out, &["probe arithmetic: assertion failed"]);
    let suite = std::fs::read_to_string(&file).unwrap();
    assert_has(
        &suite,
        &[
            "  # Failed on this server when written (assertion failed: expected content matches regex `\\b4\\b`):\n",
            "  # - name: arithmetic\n",
            "  #   prompt: \"What is 2+2?\"\n",
            "  base_url: \"sim\"\n",
        ],
    );
    let out = run_expecting(&["run", path], 0);
    assert_has(&out, &["3 passed; 0 failed"]);
    let _ = std::fs::remove_dir_all(&dir);
}
