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
    // fields a reader looks for first, and the digest of the whole of it,
    // which the entry keeps.
    let entries = json["entries"].as_object().unwrap();
    assert_eq!(entries.len(), 1, "{json}");
    let (key, entry) = entries.iter().next().unwrap();
    let head = "openai-chat, model sim-steady, server servegate-sim 0.1.0, tp_size=1 attention_backend=simulated num_continuous_decode_steps=1, config ";
    assert!(
        key.strip_prefix(head)
            .is_some_and(|d| d.len() == 12 && d.bytes().all(|b| b.is_ascii_hexdigit())),
        "{key}"
    );
    let key = key.as_str();
    assert_eq!(entry["config"]["tp_size"], "1", "{json}");
    assert_eq!(entry["config"]["model_path"], "sim-steady", "{json}");
    assert!(entry["config"].get("port").is_none(), "{json}");
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
    // parallelism 4): the tp_size 1 baseline is not applied to it, and
    // the difference is named.
    let o = servegate_with(&["run", "tests/suites/relative-tp4.yaml"], &env);
    assert_has(
        &failure_of(&o.out, "relative::performance::steady"),
        &[
            "has no entry for this configuration (openai-chat, model sim-steady, server servegate-sim 0.1.0, tp_size=4 attention_backend=simulated num_continuous_decode_steps=1, config ",
            &format!(
                "); it has: {key}; this configuration differs from `{key}`'s by tp_size: 1 → 4\n"
            ),
        ],
    );

    // A baseline saved before servegate digested the whole configuration
    // (keyed by the fields alone) is not applied to a run whose whole
    // configuration it cannot compare: the run says to save it again.
    let mut old = json.clone();
    let entry = old["entries"][key].take();
    old["entries"] = serde_json::json!({ head.trim_end_matches(", config "): entry });
    old["entries"][head.trim_end_matches(", config ")]
        .as_object_mut()
        .unwrap()
        .remove("config");
    std::fs::write(&file, old.to_string()).unwrap();
    let o = run();
    assert_has(
        &failure_of(&o.out, "relative::performance::steady"),
        &[
            "was saved before servegate keyed baselines by the server's whole configuration, which it cannot compare: save this configuration's baseline again",
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

/// `servegate import bench-serving` reads SGLang's result lines (Python's
/// `Infinity` for an unbounded rate included) and vLLM's result object:
/// each run a gate, milliseconds in seconds, their ITL as the metric of
/// its meaning — per token (`itl`) where SGLang's bench shares a chunk's
/// gap among its tokens (its native backend, or a chat backend beside a
/// speculative accept length), else the gap between chunks (`itl_chunk`);
/// SGLang's carries its server's configuration, which makes the
/// fingerprint a servegate run against that server has.
#[test]
fn bench_serving_results_become_a_run_record() {
    let dir = std::env::temp_dir().join(format!("servegate-import-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.join("out");
    let import = |file: &str| {
        crate::common::run::import_result(file, &out, &[]);
        let text = std::fs::read_to_string(out.join("latest/report.json")).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    let sglang = import("fixtures/bench-serving/sglang-0.5.23.jsonl");
    let suite = &sglang["suites"][0];
    let fingerprint = suite["fingerprint"].as_str().unwrap();
    assert!(
        fingerprint.starts_with("openai-chat, model moonshotai/Kimi-K2.5, server 0.5.23, tp_size=8 dp_size=1 pp_size=1 ep_size=1 attention_backend=fa3 kv_cache_dtype=auto num_continuous_decode_steps=4 speculative_algorithm=EAGLE3 speculative_num_steps=3 speculative_eagle_topk=1 speculative_num_draft_tokens=4, config "),
        "{fingerprint}"
    );
    // The whole configuration the server reported, as a run against it
    // reads it: its live state left out.
    assert_eq!(suite["config"]["quantization"], "null", "{suite}");
    assert_eq!(suite["config"]["model_path"], "Kimi-K2.5", "{suite}");
    assert!(suite["config"].get("internal_states").is_none(), "{suite}");
    let gates = suite["gates"].as_array().unwrap();
    assert_eq!(gates.len(), 2, "{suite}");
    let c8 = &gates[1];
    assert_eq!(c8["gate"], "c8_rate_inf");
    let f = &c8["figures"];
    let close = |key: &str, want: f64| {
        let got = f[key].as_f64().unwrap_or_else(|| panic!("no {key} in {f}"));
        assert!(
            (got - want).abs() < 1e-9 * want.max(1.0),
            "{key}: {got} for {want}"
        );
    };
    // sglang-oai-chat beside an accept length of 2.64: per token.
    close("itl.p99", 155.2 * 1.9 / 1e3);
    close("ttft.p50", 951.0 * 0.98 / 1e3);
    close("e2e.mean", 20.83);
    close("output_tok_s", 203.1);
    close("server.spec_accept_length", 2.64);
    close("cache_hit_rate", 0.0625);
    assert!(
        f.as_object()
            .unwrap()
            .keys()
            .all(|k| !k.starts_with("itl_chunk.")),
        "this bench_serving's ITL is per token: {f}"
    );
    // The same chat result without an accept length: per chunk; the native
    // backend: per token whatever the accept length.
    let text = std::fs::read_to_string("fixtures/bench-serving/sglang-0.5.23.jsonl").unwrap();
    let first = text
        .lines()
        .nth(1)
        .unwrap()
        .replace("Infinity", "\"Infinity\"");
    let result: serde_json::Value = serde_json::from_str(&first).unwrap();
    for (backend, accept, key) in [
        ("sglang-oai-chat", None, "itl_chunk.p99"),
        ("sglang", None, "itl.p99"),
        ("sglang-native", Some(2.64), "itl.p99"),
    ] {
        let mut r = result.clone();
        r["backend"] = backend.into();
        r["accept_length"] = accept.map_or(serde_json::Value::Null, Into::into);
        let file = dir.join(format!("{backend}.jsonl"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&file, format!("{r}\n")).unwrap();
        let g = &import(file.to_str().unwrap())["suites"][0]["gates"][0]["figures"];
        assert!(g.get(key).is_some(), "{backend}, {accept:?}: {key} in {g}");
    }
    // With its per-request details (`--output-details`) SGLang's result
    // names each request's error: 3 of 5 here; and with `--goodput` its
    // goodput, its SLO attainment (`benchmark/goodput.py`) and the SLOs,
    // which the imported load names.
    let mut detailed = result.clone();
    detailed["errors"] = serde_json::json!(["", "timeout", "", "HTTP 500", "reset"]);
    detailed["request_goodput"] = 1.5.into();
    detailed["slo_attainment"] = 0.4.into();
    detailed["goodput_slos_ms"] =
        serde_json::json!({"ttft": 500.0, "e2el": 20000.0, "bogus\u{1b}[31m": 1.0});
    detailed["slo_attainment_by_metric"] = serde_json::json!({"ttft": 0.6, "e2el": 0.4});
    let file = dir.join("detailed.jsonl");
    std::fs::write(&file, format!("{detailed}\n")).unwrap();
    let record = import(file.to_str().unwrap());
    let gate = &record["suites"][0]["gates"][0];
    let g = &gate["figures"];
    assert_eq!(g["errors"], 3.0, "{g}");
    assert_eq!(g["goodput_requests_per_s"], 1.5, "{g}");
    assert_eq!(g["slo_attainment"], 0.4, "{g}");
    let load = gate["load"].as_str().unwrap();
    assert!(
        load.ends_with(", SLOs ttft ≤ 500.00ms, e2e ≤ 20.000s"),
        "{load}"
    );
    // An attainment that cannot be a share is no figure.
    detailed["slo_attainment"] = 1.5.into();
    std::fs::write(&file, format!("{detailed}\n")).unwrap();
    let g = &import(file.to_str().unwrap())["suites"][0]["gates"][0]["figures"];
    assert!(g.get("slo_attainment").is_none(), "{g}");
    // Without them it counts no failures: no errors figure is made up.
    assert!(f.get("errors").is_none(), "{f}");

    let vllm = import("fixtures/bench-serving/vllm-serve.json");
    let g = &vllm["suites"][0]["gates"][0];
    assert_eq!(g["gate"], "c16_rate_inf");
    assert_eq!(g["figures"]["errors"], 2.0);
    assert_eq!(g["figures"]["e2e.p99"], 21.5);
    assert_eq!(g["figures"]["server.spec_accept_length"], 2.23);
    assert_eq!(g["figures"]["itl_chunk.p50"], 0.077);
    assert_eq!(
        vllm["suites"][0]["fingerprint"],
        "openai-chat, model zai-org/GLM-5, server of unknown version"
    );

    // A file that is no result is refused, exit 2, with its line.
    let bad = dir.join("bad.jsonl");
    std::fs::write(&bad, "{\"mean_e2e_latency_ms\": 1}\n{not json\n").unwrap();
    let o = servegate_with(&["import", "bench-serving", bad.to_str().unwrap()], &[]);
    assert_eq!(o.code, Some(2), "{}", o.out);
    assert_has(&o.out, &["line 2: not JSON"]);
}

/// The other tool's numbers are a baseline like any: imported under the
/// suite's and gate's names and the simulator's fingerprint, accepted, and
/// judged against — the simulator's TTFT holds `>= baseline * 0.5` (it
/// only grows on a loaded machine), its throughput fails against the
/// imported 50,000 tok/s, both numbers shown.
#[test]
fn an_imported_result_is_a_baseline_servegate_judges_against() {
    let dir = std::env::temp_dir().join(format!("servegate-imported-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (baselines, out) = (dir.join("baselines"), dir.join("out"));
    let env = [
        ("SERVEGATE_BASELINES", baselines.as_path()),
        ("SERVEGATE_OUT", out.as_path()),
    ];
    let line = std::fs::read_to_string("fixtures/bench-serving/sglang-0.5.23.jsonl").unwrap();
    // Python's bare `Infinity` as the string the importer reads it as.
    let first = line
        .lines()
        .next()
        .unwrap()
        .replace("Infinity", "\"Infinity\"");
    let mut result: serde_json::Value = serde_json::from_str(&first).unwrap();
    result["median_ttft_ms"] = 20.0.into();
    result["output_throughput"] = 50_000.0.into();
    let file = dir.join("result.jsonl");
    std::fs::write(&file, format!("{result}\n")).unwrap();
    // The simulator's configuration, as a run of the suite records it.
    let o = servegate_with(&["run", "tests/suites/imported.yaml"], &env);
    assert_eq!(o.code, Some(1), "no baseline yet: {}", o.out);
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("latest/report.json")).unwrap())
            .unwrap();
    let fingerprint = record["suites"][0]["fingerprint"]
        .as_str()
        .unwrap()
        .to_owned();
    let fingerprint = fingerprint.as_str();
    let o = servegate_with(
        &[
            "import",
            "bench-serving",
            file.to_str().unwrap(),
            "--suite",
            "imported",
            "--gate",
            "decode",
            "--fingerprint",
            fingerprint,
        ],
        &env,
    );
    assert_eq!(o.code, Some(0), "{}", o.out);
    let o = servegate_with(&["baseline", "accept"], &env);
    assert_eq!(o.code, Some(0), "{}", o.out);
    assert!(baselines.join("imported/decode.json").exists(), "{}", o.out);
    let o = servegate_with(&["run", "tests/suites/imported.yaml"], &env);
    assert_eq!(o.code, Some(1), "{}", o.out);
    let failure = failure_of(&o.out, "imported::performance::decode");
    assert_has(
        &failure,
        &["error: threshold failed: output_tok_s >= baseline * 0.9"],
    );
    assert_has(&o.out, &["pass ttft.p50 >= baseline * 0.5"]);
    assert!(failure.contains("50000"), "{failure}");
}

/// `vllm bench serve`'s results name the model, not the server's version:
/// imported, they are filed under a server of unknown version, which no
/// run's configuration is (real vLLM 0.32.0's `/version` names it,
/// tests/servers.rs). The run that finds no baseline for its own says how
/// to import them for it, and done as it says, the run finds them.
#[test]
fn a_result_of_unknown_server_version_says_how_to_import_it_for_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let (baselines, out) = (dir.path().join("baselines"), dir.path().join("out"));
    let env = [
        ("SERVEGATE_BASELINES", baselines.as_path()),
        ("SERVEGATE_OUT", out.as_path()),
    ];
    let import = |extra: &[&str]| {
        let mut args = vec![
            "import",
            "bench-serving",
            "fixtures/bench-serving/vllm-serve.json",
            "--suite",
            "imported",
            "--gate",
            "decode",
        ];
        args.extend(extra);
        let o = servegate_with(&args, &env);
        assert_eq!(o.code, Some(0), "{}", o.out);
        let o = servegate_with(&["baseline", "accept"], &env);
        assert_eq!(o.code, Some(0), "{}", o.out);
    };
    import(&[]);
    let o = servegate_with(&["run", "tests/suites/imported.yaml"], &env);
    assert_eq!(o.code, Some(1), "{}", o.out);
    let failure = failure_of(&o.out, "imported::performance::decode");
    assert_has(
        &failure,
        &[
            "it has: openai-chat, model zai-org/GLM-5, server of unknown version (a server of unknown version is what a result file that names none, such as `vllm bench serve`'s, is filed under: import it again with `--fingerprint \"openai-chat, model sim-steady, server servegate-sim 0.1.0, ",
        ],
    );
    let fingerprint = failure
        .split_once("--fingerprint \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .unwrap()
        .0;
    import(&["--fingerprint", fingerprint]);
    let o = servegate_with(&["run", "tests/suites/imported.yaml"], &env);
    assert!(!o.out.contains("has no entry"), "{}", o.out);
    assert_has(&o.out, &["ttft.p50 >= baseline * 0.5"]);
}

/// A rate the client set (a thread with no idle time held it down) gets
/// no baseline from `baseline accept`: later runs would be held to
/// servegate's own limit. The gate's other figures, and the other gates',
/// get theirs.
#[test]
fn a_rate_the_client_set_becomes_no_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let (out, baselines) = (dir.path().join("out"), dir.path().join("baselines"));
    std::fs::create_dir_all(out.join("latest")).unwrap();
    let gate = |name: &str, busy: f64| {
        serde_json::json!({ "gate": name, "load": "x", "repeats": 1,
            "figures": { "output_tok_s": 100.0, "errors": 0.0 },
            "client": { "chosen": "auto",
                "threads": [{ "streams": 8, "busy": busy, "waited": 0.0, "starts": 0, "late_starts": 0 }],
                "limited": if busy > 0.9 { "thread 0 busy 97%" } else { "" } } })
    };
    let run = serde_json::json!({
        "schema": "servegate.run/2", "run_id": "1-1", "node": "n",
        "finished_unix": 1, "complete": true,
        "suites": [{ "suite": "s", "fingerprint": "f", "target": "t",
            "baselines": baselines.to_str().unwrap(),
            "gates": [gate("roomy", 0.2), gate("held", 0.97)] }]
    });
    std::fs::write(out.join("latest/report.json"), run.to_string()).unwrap();
    let o = servegate_with(
        &["baseline", "accept", "--out-dir", out.to_str().unwrap()],
        &[],
    );
    assert_eq!(o.code, Some(0), "{}", o.out);
    assert_has(
        &o.out,
        &[
            "warning: no baseline of output_tok_s for `s::held`: the client set it (thread 0 busy 97%); rerun it where the client has room",
        ],
    );
    let saved =
        |gate: &str| std::fs::read_to_string(baselines.join(format!("s/{gate}.json"))).unwrap();
    assert!(
        saved("roomy").contains("output_tok_s"),
        "{}",
        saved("roomy")
    );
    assert!(!saved("held").contains("output_tok_s"), "{}", saved("held"));
    assert!(saved("held").contains("errors"), "{}", saved("held"));
}
