//! `servegate init`: a first suite written from a calibration on a target,
//! which then passes on that target.

use crate::common::run::run_expecting;
use crate::common::verdicts::assert_has;
use crate::external_sim;

/// Two threads spinning on the machine's cores until dropped: a user's
/// busy laptop, a GPU host's other jobs.
struct Burners(
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    Vec<std::thread::JoinHandle<()>>,
);

impl Burners {
    fn start() -> Burners {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..2)
            .map(|_| {
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 0_u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        Burners(stop, threads)
    }
}

impl Drop for Burners {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.1.drain(..) {
            let _ = t.join();
        }
    }
}

/// `servegate init` writes a first suite from what it measured on the
/// target (the median and spread of five runs of each gate, each bound
/// saying what it came from), and that suite passes `servegate run` on the
/// same target three times over, with two CPU burners on the machine the
/// whole time.
#[test]
fn init_writes_a_suite_that_passes_its_own_reruns_on_a_busy_machine() {
    let dir = std::env::temp_dir().join(format!("servegate-init-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = dir.join("suites/first.yaml");
    let path = file.to_str().unwrap();
    let (sim, url) = external_sim("fixtures/sim/sglang.yaml");
    let burners = Burners::start();
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
            "# measured median ",
            " (5 runs, ",
            "spread ±",
            "): the median less ",
            "      itl.p99: \"<= ",
            "the highest plus the larger of ",
        ],
    );
    assert!(!suite.contains("Failed on this server"), "{suite}");
    assert!(dir.join("suites/servegate.schema.json").is_file());
    for _ in 0..3 {
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
    }
    drop(burners);
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

/// A calibration that fails (a server that aborts every stream) writes no
/// suite, and its failure points at a file that holds what ran: the
/// calibration suite, kept in the project's output directory (not the
/// suite being written, which does not exist).
#[test]
fn a_failed_calibration_points_at_the_suite_it_ran() {
    let dir = std::env::temp_dir().join(format!("servegate-init-failed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    let file = dir.join("suites/first.yaml");
    let (sim, url) = external_sim("fixtures/sim/aborting.yaml");
    // The project's own output directory (a temporary one), not the one
    // tests are given.
    let mut init = crate::common::run::command(
        &["init", "--target", &url, "--out", file.to_str().unwrap()],
        &[],
    );
    init.env_remove("CARGO_TARGET_DIR");
    let (code, out) = crate::common::run::merged(init);
    assert_eq!(code, Some(1), "{out}");
    drop(sim);
    let ran = dir.join(".servegate/init/first-calibration.yaml");
    assert_has(
        &out,
        &[
            "error: the calibration failed, so no threshold can come from it:",
            &format!(" --> {}:8:5", ran.display()),
            &format!(
                "= the calibration suite servegate init ran is {}; {} was not written",
                ran.display(),
                file.display()
            ),
        ],
    );
    assert!(!file.exists());
    // The output directory init made is one git ignores.
    assert!(dir.join(".servegate/.gitignore").is_file());
    let text = std::fs::read_to_string(&ran).unwrap();
    assert_eq!(
        text.lines().nth(7),
        Some("  - name: single_stream"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server whose answer varies from request to request (right twice,
/// then wrong: `fixtures/sim/varying.yaml`): `init` asks each starter
/// probe twice before its calibration and twice after, and
/// writes live only a probe every answer passed, so
/// the suite's own reruns do not fail now and then; the varying probe is
/// written commented out, saying how often it failed.
#[test]
fn a_probe_whose_answer_varies_is_written_commented_out() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("suites/varying.yaml");
    let path = file.to_str().unwrap();
    let (sim, url) = external_sim("fixtures/sim/varying.yaml");
    let out = run_expecting(&["init", "--target", &url, "--out", path, "--verbose"], 0);
    // Its sandbox line in full: the flag its short form names is init's too.
    assert_has(&out, &["servegate: sandbox: "]);
    assert!(!out.contains("(--verbose: each part, and why)"), "{out}");
    assert_has(
        &out,
        &[
            "probe arithmetic: 1 of 4 tries (before and after the calibration's load) failed, the answer varies: assertion failed",
            "probe is_prime: ok",
        ],
    );
    let suite = std::fs::read_to_string(&file).unwrap();
    assert_has(
        &suite,
        &[
            "  # Failed on this server when written (1 of 4 tries (before and after the calibration's load) failed, the answer varies: assertion failed: expected content matches regex `\\b4\\b`):\n",
            "  # - name: arithmetic\n",
            "  - name: is_prime\n",
        ],
    );
    assert!(!suite.contains("_try"), "{suite}");
    // Its probes' reruns (its gates' bounds are the busy-machine test's).
    for _ in 0..2 {
        let out = run_expecting(&["run", path, "--", "correctness"], 0);
        assert_has(&out, &["test varying::correctness::is_prime "]);
    }
    drop(sim);
}
