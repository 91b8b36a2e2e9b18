//! Assertions on an answer: YAML scalars that stay strings, the server
//! contract's checks, `not_degenerate`, and tool calls.

use crate::common::run::{run_expecting, servegate};
use crate::common::verdicts::{assert_has, failure_of, verdict};

/// `one_of: [yes, no]` (the docs' own example), `[on, off]` and
/// `[1.0, 2.0]` unquoted: the choices are the strings as written, not
/// YAML 1.1's `true`/`false` or the number 1, so each probe passes on the
/// answer it names.
#[test]
fn unquoted_yes_on_and_numbers_stay_strings() {
    let out = run_expecting(&["run", "tests/suites/plain-scalars.yaml"], 0);
    for name in ["yes_no", "on_off", "version"] {
        assert_eq!(
            verdict(&out, &format!("plain_scalars::correctness::{name}")),
            "ok",
            "{out}"
        );
    }
}

/// Each server-contract check catches a simulator that breaks it; the
/// shipped suite's contract probe passes on the healthy simulator.
#[test]
fn contract_checks_catch_a_server_that_breaks_them() {
    let out = run_expecting(&["run", "tests/suites/contract-broken.yaml"], 1);
    for (probe, needle) in [
        (
            "max_tokens",
            "error: contract broken: max_tokens: asked for at most 16 tokens, the server generated 19 (1 by server usage, 19 in the stream)",
        ),
        (
            "ignore_eos",
            "error: contract broken: ignore_eos: with ignore_eos and max_tokens 64 the server generated 40 token(s), finish_reason stop",
        ),
        (
            "usage",
            "error: contract broken: usage: usage says 1 completion tokens, but 19 chunks of the stream carried tokens",
        ),
        (
            "stop",
            "error: contract broken: stop: the stop sequence \" 12\" is in the answer at character 23",
        ),
        (
            "cache_determinism",
            "error: contract broken: cache_determinism: at temperature 0 the same request, asked again (a prefix-cache hit), answered differently",
        ),
    ] {
        let failure = failure_of(&out, &format!("contract::correctness::{probe}"));
        assert_has(
            &failure,
            &[needle, "--> tests/suites/contract-broken.yaml:"],
        );
    }
    let o = servegate(&[
        "run",
        "suites/sglang.yaml",
        "--",
        "--exact",
        "sglang::correctness::server_contract",
    ]);
    let out = o.out;
    assert_eq!(
        verdict(&out, "sglang::correctness::server_contract"),
        "ok",
        "{out}"
    );
}

/// `not_degenerate` names what is degenerate and where: a run of one
/// character, a loop with its repeated unit, replacement characters; a
/// sound answer, and a tolerated count, pass.
#[test]
fn degenerate_answers_fail_with_the_offending_span() {
    let out = run_expecting(&["run", "tests/suites/degenerate.yaml"], 1);
    for (name, want) in [
        ("bang", "FAILED"),
        ("loop", "FAILED"),
        ("mojibake", "FAILED"),
        ("tolerated", "ok"),
        ("water", "ok"),
    ] {
        let trial = format!("degenerate::correctness::{name}");
        assert_eq!(verdict(&out, &trial), want, "{trial}: {out}");
    }
    assert_has(
        &failure_of(&out, "degenerate::correctness::bang"),
        &[
            "expected content is not degenerate",
            "--> tests/suites/degenerate.yaml:14:9",
            "found:    a run of 109 × '!' (at most 80 allowed); characters 1–110: \"!!!!",
        ],
    );
    assert_has(
        &failure_of(&out, "degenerate::correctness::loop"),
        &[
            "--> tests/suites/degenerate.yaml:18:9",
            "% of it repeats an earlier part of it (at most 60% allowed); characters ",
            "        return False\" repeated 12 times",
        ],
    );
    assert_has(
        &failure_of(&out, "degenerate::correctness::mojibake"),
        &[
            "found:    2 replacement or control characters (at most 0 allowed); the first, '\u{FFFD}', at character 14: ",
        ],
    );
}

/// Tool calls are read from the streamed `delta.tool_calls` (SGLang
/// 0.5.23's shape: the name, then the arguments in pieces): `tool_call`
/// checks the name and the arguments against the offered tool's schema,
/// `in: tool_calls` reads them as JSON, and `json_schema: true` checks a
/// JSON answer against its `response_format`. The pieces are the answer's
/// tokens, so a gate on a tool-calling answer has a decode rate. Behind a
/// wrong tool parser the call arrives as text: the probes fail and say so.
#[test]
fn tool_calls_are_read_from_the_stream_and_a_wrong_parser_is_named() {
    let out = run_expecting(&["run", "tests/suites/tool-calls.yaml"], 0);
    assert_has(
        &out,
        &[
            "test tool_calls::correctness::calls_get_weather ... ok",
            "test tool_calls::correctness::structured        ... ok",
            "pass decode_tok_s.mean >= 1.0 tok/s",
        ],
    );
    let out = run_expecting(&["run", "tests/suites/tool-calls-unparsed.yaml"], 1);
    let help = "help:     the server streamed no `delta.tool_calls`, but the answer's text looks like a tool call";
    assert_has(
        &failure_of(&out, "tool_calls_unparsed::correctness::calls_get_weather"),
        &[
            "error: assertion failed: expected a call of `get_weather` with arguments that meet its schema",
            "found:    no tool call (finish_reason stop)",
            help,
            "  tool_calls: \"[]\"",
        ],
    );
    assert_has(
        &failure_of(&out, "tool_calls_unparsed::correctness::calls_as_json"),
        &[
            "error: assertion failed: expected tool_calls is JSON with /0/name == \"get_weather\"",
            help,
        ],
    );
}

/// The other way: arguments that leave out what the tool's schema
/// requires, a JSON answer of the wrong type for its `response_format`,
/// and a call never made each fail with how they missed; the request shown
/// carries the tools, the format and the reasoning effort it sent.
#[test]
fn tool_calls_and_json_that_miss_their_schemas_fail_saying_how() {
    let out = run_expecting(&["run", "tests/suites/tool-calls-bad.yaml"], 1);
    assert_has(
        &failure_of(&out, "tool_calls_bad::correctness::missing_city"),
        &[
            "error: assertion failed: expected a call of `get_weather` with arguments that meet its schema\n  --> tests/suites/tool-calls-bad.yaml:21:9",
            "found:    1 of 1 call of `get_weather` failed: tool_calls[0] (id `call_sim-1`): its arguments {\"unit\":\"kelvin\"} miss the schema: \"city\" is a required property",
            "\"tools\":[{\"function\":{\"name\":\"get_weather\",\"parameters\":{",
        ],
    );
    assert_has(
        &failure_of(&out, "tool_calls_bad::correctness::wrong_type"),
        &[
            "error: assertion failed: expected content is JSON that meets the schema",
            "found:    /answer: 4 is not of type \"string\"",
            "\"reasoning_effort\":\"low\",\"response_format\":{\"json_schema\":{\"name\":\"answer\"",
        ],
    );
    assert_has(
        &failure_of(&out, "tool_calls_bad::correctness::never_called"),
        &["found:    calls of `get_weather` only"],
    );
}
