//! Golden diagnostics of broken suites: every problem of a file reported at
//! its line and column, with what was expected, and never a panic.

#[path = "common/golden.rs"]
mod golden;
use golden::golden;
use std::fmt::Write as _;
use std::path::Path;

use servegate::suite::load_text;

fn errors(name: &str, text: &str) -> String {
    let path = format!("suites/{name}.yaml");
    match load_text(Path::new(&path), text, &|_| None) {
        Ok(_) => panic!("{name} loaded, but it is broken"),
        Err(message) => message,
    }
}

#[test]
fn yaml_syntax_error() {
    golden!(errors(
        "syntax",
        "suite: x\ncorrectness:\n  - name: a\n    prompt: [unclosed\n    expect: []\n"
    ));
}

#[test]
fn duplicate_names() {
    golden!(errors(
        "dupes",
        r#"suite: dupes
correctness:
  - name: same
    prompt: "a"
    expect: [{contains: a}]
  - name: same
    prompt: "b"
    expect: [{contains: b}]
performance:
  - name: g
    load: {requests: 1, input_tokens: 8, output_tokens: 8}
    thresholds: {errors: "== 0"}
  - name: g
    load: {requests: 1, input_tokens: 8, output_tokens: 8}
    thresholds: {errors: "== 0"}
"#
    ));
}

#[test]
fn chat_only_fields_with_a_completions_api() {
    golden!(errors(
        "chat_only",
        r#"suite: c
target: {api: openai-completions}
correctness:
  - name: sys
    system: "be brief"
    prompt: "hi"
    expect: [{min_chars: 1}]
  - name: convo
    messages:
      - {role: user, content: "hi"}
      - {role: robot, content: "beep"}
    expect: [{min_chars: 1}]
"#
    ));
}

#[test]
fn wrong_types_and_missing_fields() {
    golden!(errors(
        "types",
        r#"suite: "has space"
defaults: {max_tokens: many, temperature: hot, stop: {a: b}}
correctness:
  - name: n
    prompt: "What is 2+2?"
    expect:
      - number: {value: four, tolerance: 0.1}
      - json: {pointer: answer}
      - contains: "4"
        regex: "4"
      - equals: "4"
        in: thoughts
performance:
  - name: nothing
  - name: both
    load: {requests: 2, prompt: "x", input_tokens: 4, output_tokens: 4, ignore_eos: yes please}
    thresholds: {}
"#
    ));
}

#[test]
fn empty_and_non_mapping_suites() {
    golden!("empty", errors("empty", "suite: nothing\n"));
    golden!("list", errors("list", "- just\n- a list\n"));
}

#[test]
fn alias_bomb_is_stopped_by_the_budget() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        writeln!(text, "a{i}: &a{i} [{refs}]").unwrap();
    }
    let message = errors("bomb", &text);
    assert!(message.contains("error: invalid YAML"), "{message}");
    assert!(message.contains("--> suites/bomb.yaml:"), "{message}");
}

#[test]
fn interpolation_and_urls() {
    let env = |name: &str| (name == "GPU_HOST").then(|| "http://gpu-7:30000/v1/".to_owned());
    let ok = load_text(
        Path::new("suites/u.yaml"),
        "target: {base_url: '${GPU_HOST}'}\ncorrectness:\n  - {name: a, prompt: p, expect: [{contains: x}]}\n",
        &env,
    )
    .unwrap();
    assert_eq!(
        ok.target.base_url,
        servegate::suite::BaseUrl::Url("http://gpu-7:30000".into())
    );
    assert_eq!(ok.name, "u", "the file stem names a suite without `suite:`");
    golden!(errors(
        "urls",
        "target: {base_url: 'ftp://x', api_key_env: 'sk-abc123 secret'}\ncorrectness:\n  - {name: a, prompt: p, expect: [{contains: x}]}\n"
    ));
}

#[test]
fn launch_config_and_variants() {
    golden!(errors(
        "launch",
        r#"suite: l
target:
  base_url: http://127.0.0.1:30000
  launch:
    command: python3 -m sglang.launch_server
    env: {NCCL-PROTO: LL}
    ready: {path: health, timout: 5m}
    fatal_log_patterns: ["CUDA (out of memory"]
    port: 0
expect_server:
  server_info:
    tp_size: [8]
    attention_backend: {contains: tri, equals: triton}
  gpu_info:
    count: 8
correctness:
  - name: a
    prompt: "a"
    expect: [{contains: a}]
"#
    ));
}

#[test]
fn a_router_and_its_workers() {
    golden!(errors(
        "workers",
        r#"suite: w
target:
  launch:
    workers:
      - name: a
        command: [sim, --port, "{port}", --peer, "{worker.b}"]
      - name: a
        command: [sim, --port, "{port}"]
      - name: b
        command: []
      - name: c
        command: [sim]
      - command: [sim]
      - name: ../d
        command: [sim]
        colour: blue
    command: [router, --worker-urls, "{worker.a}", "{worker.z}", --port, "{port}"]
correctness:
  - name: a
    prompt: "a"
    expect: [{contains: a}]
"#
    ));
}

#[test]
fn variants_without_a_launch() {
    golden!(errors(
        "variants",
        r#"suite: v
variants:
  - name: ll
    env: {NCCL_PROTO: LL}
  - name: ll
    args: --num-continuous-decode-steps 4
correctness:
  - name: a
    prompt: "a"
    expect: [{contains: a}]
performance:
  - name: g
    load: {concurrency: [1, 2], requests: 2, input_tokens: 8, output_tokens: 8}
    thresholds:
      decode_tok_s.mean: ">= variant(l) * 1.05"
"#
    ));
}

#[test]
fn dataset_and_code_probes() {
    golden!(errors(
        "datasets",
        r#"suite: d
correctness:
  - name: math
    prompt: "not with a dataset"
    dataset:
      file: fixtures/datasets/arithmetic.jsonl
      shots: 40
      extract: first_number
      template: "Q:"
    thresholds:
      accuracy: ">= 62%"
  - name: nothing
    dataset: {file: fixtures/datasets/nope.jsonl}
  - name: code
    prompt: "write f"
    expect:
      - code: {language: ruby, tests: []}
"#
    ));
}

#[test]
fn bad_threshold_expressions() {
    golden!(errors(
        "thresholds",
        r#"suite: t
correctness:
  - name: a
    prompt: "a"
    expect: [{contains: a}]
performance:
  - name: g
    load: {requests: 2, input_tokens: 8, output_tokens: 8}
    thresholds:
      ttft.p99: "<= fast"
      itl.p99: "<= 250"
      decode_tok_s.mean: ">= baseline / 2"
      errors: "=! 0"
      nonsense.p50: "<= 1s"
      tpot.p101: "<= 1s"
      output_tok_s: ">= variant(x) * 2"
"#
    ));
}

#[test]
fn a_ten_megabyte_suite_is_refused_before_parsing() {
    let mut text = String::from("suite: big\ncorrectness:\n");
    while text.len() < 10 * 1024 * 1024 {
        text.push_str("  # padding padding padding padding padding padding padding padding\n");
    }
    let started = std::time::Instant::now();
    let message = errors("big", &text);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    golden!(message);
}

#[test]
fn unknown_sandbox_policy() {
    golden!(errors(
        "sandbox",
        r#"suite: s
sandbox: strickt
correctness:
  - name: code
    prompt: "write f"
    expect:
      - code: {tests: ["assert f()"]}
"#
    ));
}

#[test]
fn degenerate_text_limits() {
    golden!(errors(
        "degenerate",
        r#"suite: s
correctness:
  - name: share
    prompt: "p"
    expect:
      - not_degenerate: {max_repeat_share: 1.5}
  - name: run
    prompt: "p"
    expect:
      - not_degenerate: {max_char_run: 0, max_bad_char: 1}
  - name: word
    prompt: "p"
    expect:
      - not_degenerate: yes please
"#
    ));
}

#[test]
fn client_threads_and_the_self_check() {
    golden!(errors(
        "client",
        r#"suite: s
performance:
  - name: zero
    load: {concurrency: 1, requests: 1, input_tokens: 1, output_tokens: 1, client_threads: 0}
    thresholds: {errors: "== 0"}
  - name: many
    load: {concurrency: 1, requests: 1, input_tokens: 1, output_tokens: 1, client_threads: 1000}
    thresholds: {errors: "== 0"}
  - name: word
    load: {concurrency: 1, requests: 1, input_tokens: 1, output_tokens: 1, client_threads: all}
    thresholds: {errors: "== 0"}
  - name: policy
    load: {concurrency: 1, requests: 1, input_tokens: 1, output_tokens: 1, client_limited: ignore}
    thresholds: {errors: "== 0"}
"#
    ));
}

#[test]
fn humaneval_datasets() {
    golden!(errors(
        "humaneval",
        r#"suite: s
correctness:
  - name: typo
    dataset: {file: fixtures/datasets/humaneval-mini.jsonl, format: humanevl}
    thresholds: {pass_at_1: ">= 0.5"}
  - name: mixed
    dataset: {file: fixtures/datasets/humaneval-mini.jsonl, format: humaneval, shots: 2}
    thresholds: {accuracy: ">= 0.5"}
  - name: not_code
    dataset: {file: fixtures/datasets/arithmetic.jsonl, format: humaneval, timeout: 1s}
    thresholds: {pass_at_1: ">= 1.5"}
"#
    ));
}

#[test]
fn recheck_names_probes_of_the_suite() {
    golden!(errors(
        "recheck",
        r#"suite: s
correctness:
  - name: arithmetic
    prompt: "What is 2+2?"
    expect: [{number: 4}]
  - name: math
    dataset: {file: fixtures/datasets/arithmetic.jsonl}
    thresholds: {accuracy: ">= 0.5"}
performance:
  - name: typo
    load: {concurrency: 2, requests: 4, input_tokens: 8, output_tokens: 8}
    recheck: [arithmetc, math]
    thresholds: {errors: "== 0"}
  - name: kind
    load: {concurrency: 2, requests: 4, input_tokens: 8, output_tokens: 8}
    recheck: []
    thresholds: {errors: "== 0"}
  - name: word
    load: {concurrency: 2, requests: 4, input_tokens: 8, output_tokens: 8}
    recheck: everything
    thresholds: {errors: "== 0"}
"#
    ));
}

/// `needs` names probes of the suite, at least one: a gate that waits for
/// none would pass on a server that failed every probe.
#[test]
fn needs_names_probes_of_the_suite() {
    golden!(errors(
        "needs",
        r#"suite: s
correctness:
  - name: arithmetic
    prompt: "What is 2+2?"
    expect: [{number: 4}]
performance:
  - name: typo
    load: {concurrency: 2, requests: 4, input_tokens: 8, output_tokens: 8}
    needs: [arithmetc]
    thresholds: {errors: "== 0"}
  - name: none
    load: {concurrency: 2, requests: 4, input_tokens: 8, output_tokens: 8}
    needs: []
    thresholds: {errors: "== 0"}
  - name: word
    load: {concurrency: 2, requests: 4, input_tokens: 8, output_tokens: 8}
    needs: arithmetic
    thresholds: {errors: "== 0"}
"#
    ));
}

/// The request surface of agentic models, refused where it cannot hold: a
/// tool's parameters that are no JSON Schema, a `tool_call` of a tool the
/// request does not offer, `json_schema: true` without a schema to take,
/// an unknown reasoning effort, and tools on an API that cannot send them.
#[test]
fn tools_and_structured_output_are_checked_when_the_suite_loads() {
    golden!(errors(
        "tools",
        r#"suite: tools
defaults:
  tools:
    - name: get_weather
      parameters: { type: objekt }
    - name: "bad name"
correctness:
  - name: a
    prompt: "a"
    reasoning_effort: extreme
    response_format: { type: json_object }
    expect:
      - tool_call: get_time
      - json_schema: true
      - json_schema: { type: 12 }
"#
    ));
    golden!(errors(
        "tools-api",
        r#"suite: tools_api
target: { base_url: "http://127.0.0.1:1", api: sglang-generate }
correctness:
  - name: a
    prompt: "a"
    tools: [{ name: f }]
    response_format: { type: json_object }
    expect: [{ tool_call: f }, { tool_call: g }]
"#
    ));
}

/// A variant's own thresholds name a gate of the suite; a duration takes
/// `${VAR:-default}`, and an unset one without a default is an error at
/// its line.
#[test]
fn variant_thresholds_name_a_gate_and_durations_interpolate() {
    golden!(errors(
        "variant-thresholds",
        r#"suite: vt
target:
  launch:
    command: [sim]
    ready: { timeout: "${SERVEGATE_TEST_UNSET_VARIABLE}" }
variants:
  - name: a
    thresholds:
      decdoe: { errors: "== 0" }
      decode: { server.spec_accept_length: ">= 2.5", latency.p99: "< 1" }
performance:
  - name: decode
    load: { requests: 1, input_tokens: 8, output_tokens: 8 }
    thresholds: { errors: "== 0" }
"#
    ));
}

/// `extra_body` takes any request field but those servegate sets itself:
/// each is refused at its key, with the suite key that sets it.
#[test]
fn extra_body_refuses_the_fields_servegate_sets() {
    golden!(errors(
        "extra",
        r#"suite: extra
defaults:
  extra_body: { stream: false, reasoning_effort: low }
correctness:
  - name: a
    prompt: "a"
    extra_body: { max_completion_tokens: 9, model: other }
    expect: [{contains: a}]
  - name: b
    prompt: "b"
    extra_body: [not, a, mapping]
    expect: [{contains: b}]
performance:
  - name: g
    load: {requests: 1, input_tokens: 8, output_tokens: 8}
    extra_body: { ignore_eos: false, top_k: 1 }
    thresholds: {errors: "== 0"}
"#
    ));
}
