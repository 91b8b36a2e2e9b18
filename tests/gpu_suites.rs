//! The shipped GPU suites (suites/gpu/kimi-k2.5.yaml, glm-5.yaml), run as
//! written — their launch, variants, configuration checks, probes and
//! gates — against the simulator standing in for SGLang: the launch's
//! `${SGLANG_PYTHON:-python3}` is fixtures/sim/sglang-python, which starts
//! `servegate sim` with the same SGLang arguments and a profile standing in
//! for the model. Green on the healthy profiles; red, for the reason each
//! broken profile stands for, on the others.
#![cfg(unix)]

#[allow(dead_code)] // each test binary uses a subset of the shared helpers
mod common;
use common::run::servegate_with;
use common::verdicts::{assert_has, client_kept_from_cpu, failure_of, verdict};
use std::path::{Path, PathBuf};

/// A run of a GPU suite against a profile: its own output and baselines
/// directories, the launch through the simulator.
struct Gpu {
    dir: PathBuf,
}

impl Gpu {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("servegate-gpu-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }

    /// `servegate <args>` with the simulator as SGLang, `profile` as the
    /// model; exit code and output.
    fn run(&self, profile: &str, args: &[&str]) -> (Option<i32>, String) {
        self.run_with(profile, args, &[])
    }

    /// [`Gpu::run`] with these variables too.
    fn run_with(
        &self,
        profile: &str,
        args: &[&str],
        more: &[(&str, &Path)],
    ) -> (Option<i32>, String) {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let python = root.join("fixtures/sim/sglang-python");
        let profile = root.join("fixtures/sim").join(profile);
        let out = self.dir.join("out");
        let baselines = self.dir.join("baselines");
        let mut env = vec![
            ("SGLANG_PYTHON", python.as_path()),
            ("SERVEGATE_SIM_PROFILE", profile.as_path()),
            ("SERVEGATE_BIN", Path::new(env!("CARGO_BIN_EXE_servegate"))),
            ("SERVEGATE_OUT", out.as_path()),
            ("SERVEGATE_BASELINES", baselines.as_path()),
        ];
        env.extend_from_slice(more);
        let o = servegate_with(args, &env);
        (o.code, o.out)
    }
}

/// Kimi-K2.5 as shipped: every variant launched with its own flags, its
/// configuration checked (decode steps, EAGLE-3, flashinfer, its vision
/// encoder), the reasoning, executed `is_prime`, tool-call and image probes, the single-stream
/// gate (EAGLE-3's with its acceptance), and concurrency 32 proven to
/// have reached the server and rechecked under load.
#[test]
fn kimi_runs_green_on_its_simulator_profile() {
    let gpu = Gpu::new("kimi");
    let (code, out) = gpu.run("kimi-k2.5.yaml", &["run", "suites/gpu/kimi-k2.5.yaml"]);
    // Green, or red only where the self-check rightly found its client
    // kept from a CPU (a loaded machine: 32 first tokens that come together
    // are read late, and the figures cannot be vouched for).
    if code != Some(0) {
        let failed: Vec<&str> = out
            .lines()
            .filter_map(|l| l.strip_prefix("test ")?.strip_suffix(" ... FAILED"))
            .map(str::trim_end)
            .collect();
        assert!(
            !failed.is_empty(),
            "exit {code:?} with no failed trial:\n{out}"
        );
        for name in failed {
            let why = failure_of(&out, name);
            assert!(
                name.ends_with("::performance::concurrency_32") && client_kept_from_cpu(&why),
                "{name} failed, and not for a client kept from its CPU:\n{out}"
            );
        }
    }
    for variant in [
        "baseline",
        "nccl-ll-ring",
        "decode-steps-4",
        "eagle3",
        "flashinfer",
    ] {
        for trial in [
            "config::server_info.tool_call_parser",
            "correctness::reasoning",
            "correctness::arithmetic_sample",
            "correctness::is_prime",
            "correctness::tool_call",
            "correctness::image_colour",
            "correctness::two_images",
            "correctness::follow_up",
            "config::model_info.has_image_understanding",
            "performance::single_stream_decode",
            "performance::real_text",
            "performance::concurrency_32::recheck",
        ] {
            let name = format!("kimi-k2.5[{variant}]::{trial}");
            assert_eq!(verdict(&out, &name), "ok", "{name}");
        }
    }
    assert_eq!(
        verdict(
            &out,
            "kimi-k2.5[eagle3]::config::server_info.speculative_algorithm"
        ),
        "ok"
    );
    assert_has(
        &out,
        &[
            // 64 tokens in 22 verify steps of 3.
            "pass server.spec_accept_length >= 2.50 tokens (measured 2.91 tokens",
            // 32, or 33 with the recheck's request beside the load.
            "pass server.num_running_reqs.max >= 32 (measured 3",
            "variants of kimi-k2.5::performance::single_stream_decode (delta against `baseline`):",
        ],
    );
}

/// Three bring-up failures, each red for its own reason and only there:
/// flashinfer hanging its first batch (as on SM120) fails that variant at
/// readiness (SGLang's warmup never gets its token, so it answers
/// `/health_generate` 503 as it does while starting, with the log's hang
/// line); a draft model that does
/// not fit fails EAGLE-3's acceptance by the server's counters; a tool-call
/// parser that is not the model's fails the tool-call probe, saying the
/// call came as text.
#[test]
fn kimi_fails_each_broken_bring_up_for_its_reason() {
    let gpu = Gpu::new("kimi-red");
    // The hang fails at the readiness deadline: 15 s, not the suite's 20
    // min (and not so short that a loaded machine's slow start of the
    // simulator reads as a hang: the message then says the port never
    // opened).
    let (code, out) = gpu.run_with(
        "kimi-k2.5-sm120.yaml",
        &["run", "suites/gpu/kimi-k2.5.yaml", "--", "[flashinfer]"],
        &[("KIMI_READY_TIMEOUT", Path::new("15s"))],
    );
    // The target could not be reached: exit 3.
    assert_eq!(code, Some(3), "{out}");
    assert_has(
        &failure_of(&out, "kimi-k2.5[flashinfer]::correctness::arithmetic"),
        &[
            "error: launch failed: the server is not ready after 15s: GET /health_generate last answered: 503\n",
            "| servegate sim: simulated hang: attention backend flashinfer never finishes its first batch",
        ],
    );

    let (code, out) = gpu.run(
        "kimi-k2.5-bad-draft.yaml",
        &["run", "suites/gpu/kimi-k2.5.yaml", "--", "[eagle3]"],
    );
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        verdict(&out, "kimi-k2.5[eagle3]::correctness::tool_call"),
        "ok",
        "{out}"
    );
    let gate = failure_of(&out, "kimi-k2.5[eagle3]::performance::single_stream_decode");
    assert_has(
        &gate,
        &[
            "error: threshold failed: server.spec_accept_length >= 2.50 tokens",
            "measured: server.spec_accept_length = 1.00 tokens",
        ],
    );
    assert!(!gate.contains("threshold failed: decode_tok_s"), "{gate}");

    let (code, out) = gpu.run(
        "kimi-k2.5-wrong-parser.yaml",
        &[
            "run",
            "suites/gpu/kimi-k2.5.yaml",
            "--",
            "[baseline]::correctness",
        ],
    );
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        verdict(&out, "kimi-k2.5[baseline]::correctness::is_prime"),
        "ok"
    );
    assert_has(
        &failure_of(&out, "kimi-k2.5[baseline]::correctness::tool_call"),
        &[
            "found:    no tool call (finish_reason stop)",
            "the server did not parse it (SGLang: is `--tool-call-parser` the model's?)",
        ],
    );
}

/// GLM-5-NVFP4 as shipped: its baseline saved, then a run judged against
/// it — NVFP4 asserted, the reasoning streamed apart with null content,
/// `is_prime` executed, garbage checked on every probe, single-stream decode
/// above the bring-up's 12.5 tok/s and within 10% of its baseline. Then the
/// other way: a decode a third slower fails the baseline bound (not the
/// absolute one); a NaN in decode ends the run on the log's line; a decode
/// loop in the thinking fails the garbage check while "4" is still right,
/// and the accuracy sample, which it cannot answer.
#[test]
fn glm_runs_green_against_its_baseline_and_red_for_each_failure() {
    let gpu = Gpu::new("glm");
    let (code, out) = gpu.run("glm-5.yaml", &["baseline", "save", "suites/gpu/glm-5.yaml"]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = gpu.run("glm-5.yaml", &["run", "suites/gpu/glm-5.yaml"]);
    assert_eq!(code, Some(0), "{out}");
    for trial in [
        "glm-5::config::server_info.quantization",
        "glm-5::config::server_info.enable_cache_report",
        "glm-5::correctness::reasoning",
        "glm-5::correctness::arithmetic_sample",
    ] {
        assert_eq!(verdict(&out, trial), "ok", "{trial}\n{out}");
    }
    assert_has(
        &out,
        &[
            "pass decode_tok_s.mean >= 12.5 tok/s",
            "pass decode_tok_s.p50 >= baseline * 0.9",
        ],
    );

    let (code, out) = gpu.run("glm-5-slow.yaml", &["run", "suites/gpu/glm-5.yaml"]);
    assert_eq!(code, Some(1), "{out}");
    let gate = failure_of(&out, "glm-5::performance::single_stream_decode");
    assert_has(
        &gate,
        &["error: threshold failed: decode_tok_s.p50 >= baseline * 0.9"],
    );
    assert!(
        !gate.contains("threshold failed: decode_tok_s.mean >= 12.5"),
        "{gate}"
    );

    let (code, out) = gpu.run("glm-5-nan.yaml", &["run", "suites/gpu/glm-5.yaml"]);
    assert_eq!(code, Some(1), "{out}");
    assert_has(
        &out,
        &[
            // The fatal line, named whether the log or the death was seen first.
            "fatal log pattern `\\bnan\\b` at ",
            "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0",
        ],
    );
    assert_eq!(
        verdict(&out, "glm-5::performance::single_stream_decode"),
        "FAILED"
    );

    let (code, out) = gpu.run(
        "glm-5-garbage.yaml",
        &["run", "suites/gpu/glm-5.yaml", "--", "correctness"],
    );
    assert_eq!(code, Some(1), "{out}");
    let arithmetic = failure_of(&out, "glm-5::correctness::arithmetic");
    assert_has(
        &arithmetic,
        &[
            "error: assertion failed: expected all is not degenerate",
            "repeated",
        ],
    );
    assert!(!arithmetic.contains("matches regex"), "{arithmetic}");
    // Its answers to the accuracy sample are no numbers at all.
    assert_has(
        &failure_of(&out, "glm-5::correctness::arithmetic_sample"),
        &[
            "error: threshold failed: accuracy >= 0.75",
            "measured: accuracy 0.000 (0/8 right",
        ],
    );
}
