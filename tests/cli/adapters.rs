//! LoRA adapters by name: each probe and gate that names one is served by
//! it, named as the server takes it (SGLang's `lora_path`, vLLM's
//! `model`), after a config check found it in `/v1/models`; an adapter the
//! server has not loaded fails that check, and nothing is measured by the
//! base model in its place.

use crate::common::run::{run_expecting, servegate_with, trial_of};
use crate::common::verdicts::{assert_has, failure_of, verdict};

/// The same question asked of the base model and of two adapters gets each
/// one's answer, against a simulator speaking as SGLang and as vLLM; each
/// request names its adapter the way that server reads it, and a gate's
/// load goes through its adapter (its answers are the adapter's: 9 tokens
/// each, where the base model answers in 1).
#[test]
fn each_adapter_answers_its_requests_named_as_the_server_takes_them() {
    for (profile, named) in [
        (
            "fixtures/sim/lora.yaml",
            serde_json::json!({"model": "sim-base", "lora_path": "sql"}),
        ),
        (
            "fixtures/sim/lora-vllm.yaml",
            serde_json::json!({"model": "sql"}),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let o = servegate_with(
            &[
                "run",
                "tests/suites/lora.yaml",
                "--out-dir",
                dir.path().to_str().unwrap(),
            ],
            &[("SERVEGATE_TEST_LORA_PROFILE", std::path::Path::new(profile))],
        );
        assert_eq!(o.code, Some(0), "{profile}: {}", o.out);
        for trial in [
            "lora::config::models.adapter.sql",
            "lora::config::models.adapter.poem",
            "lora::correctness::sql",
            "lora::performance::through_sql",
        ] {
            assert_eq!(verdict(&o.out, trial), "ok", "{profile}: {}", o.out);
        }
        assert_has(
            &o.out,
            &[
                "lora::performance::through_sql [closed loop, concurrency 2, 6 requests, 16 output tokens, fixed prompt of 12 chars, through LoRA adapter `sql`]",
                "(54 output tokens in ",
            ],
        );
        let text = std::fs::read_to_string(dir.path().join("latest/report.json")).unwrap();
        let record: serde_json::Value = serde_json::from_str(&text).unwrap();
        let sent = &trial_of(&record, "lora::correctness::sql")["exchange"]["request"];
        for (field, value) in named.as_object().unwrap() {
            assert_eq!(&sent[field], value, "{profile}: {sent}");
        }
        if profile.ends_with("vllm.yaml") {
            assert!(sent.get("lora_path").is_none(), "{sent}");
        }
        let base = &trial_of(&record, "lora::correctness::base")["exchange"]["request"];
        assert_eq!(base["model"], "sim-base");
        assert!(base.get("lora_path").is_none(), "{base}");
    }
}

/// An adapter the server has not loaded fails its config check, naming
/// what the server serves, and the probes and gates are not run by the
/// base model in its place; an adapter that is no name, or `lora_path` in
/// `extra_body`, is refused at its line.
#[test]
fn an_adapter_the_server_has_not_loaded_is_never_measured() {
    let dir = tempfile::tempdir().unwrap();
    let profile = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sim/lora.yaml");
    let suite = dir.path().join("missing.yaml");
    std::fs::write(
        &suite,
        format!(
            "suite: missing\ntarget: {{ base_url: sim, api: openai-chat }}\nsim: {{ profile: {} }}\ncorrectness:\n  - name: sql\n    adapter: sqll\n    prompt: \"What is 2+2?\"\n    max_tokens: 16\n    expect: [{{ contains: SELECT }}]\n  - name: base_named\n    adapter: sim-base\n    prompt: \"What is 2+2?\"\n    max_tokens: 16\n    expect: [{{ contains: \"4\" }}]\nperformance:\n  - name: load\n    adapter: sqll\n    load: {{ requests: 2, prompt: hi, output_tokens: 4 }}\n    thresholds: {{ errors: \"== 0\" }}\n",
            profile.display()
        ),
    )
    .unwrap();
    let out = run_expecting(&["run", suite.to_str().unwrap()], 1);
    assert_has(
        &failure_of(&out, "missing::config::models.adapter.sqll"),
        &[
            "expected an entry with `id` \"sqll\" and a `parent`: the LoRA adapter a probe or gate names, loaded by the server (vLLM `--enable-lora --lora-modules sqll=PATH`, SGLang `--enable-lora --lora-paths sqll=PATH`)",
            "missing.yaml:5:5",
            "models.adapter.sqll is a list of the ids \"sim-base\", \"sql\", \"poem\", expected",
        ],
    );
    // The base model's own card is no adapter: it has no `parent`.
    assert_has(
        &failure_of(&out, "missing::config::models.adapter.sim-base"),
        &["expected an entry with `id` \"sim-base\" and a `parent`"],
    );
    for gated in ["missing::correctness::sql", "missing::performance::load"] {
        assert_has(&failure_of(&out, gated), &["models.adapter.sqll"]);
    }
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "suite: bad\ntarget: { base_url: sim, api: openai-chat }\ncorrectness:\n  - name: a\n    adapter: \"two words\"\n    prompt: hi\n    expect: [{ contains: x }]\n  - name: b\n    extra_body: { lora_path: sql }\n    prompt: hi\n    expect: [{ contains: x }]\nexpect_server:\n  models: { adapter.sql: x }\n",
    )
    .unwrap();
    let out = run_expecting(&["run", bad.to_str().unwrap()], 2);
    assert_has(
        &out,
        &[
            ":5:14\n",
            "adapter \"two words\" is not an adapter's name",
            ":9:19\n",
            "`extra_body.lora_path` is a field servegate sets itself",
            "`adapter` sets it, on SGLang",
            ":13:13\n",
            "`models.adapter.sql` is the name of a check servegate makes itself",
        ],
    );
}
