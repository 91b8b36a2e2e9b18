//! The run record and its writers: the record of a real run validates
//! against `schemas/run-record.schema.json`; Markdown, JUnit and the GitHub
//! annotations of a saved record are golden files; JUnit parses back.

#[allow(dead_code)] // each test binary uses a subset of the shared helpers
mod common;
#[path = "common/golden.rs"]
mod golden;
use common::run::command;
use golden::golden;
use std::path::Path;

use serde_json::Value;
use servegate::record::RunRecord;
use servegate::report;

/// The binary run with `args`, no step summary written.
fn servegate(args: &[&str]) -> std::process::Output {
    command(&[], &[])
        .args(args)
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .unwrap()
}

fn fixture() -> RunRecord {
    servegate::record::read(Path::new("tests/fixtures/report/record.json"))
        .expect("the fixture is a record")
}

/// What is wrong with `value` by the record's schema, each error with the
/// path to it.
fn schema_errors(value: &Value) -> Vec<String> {
    let validator = jsonschema::draft202012::new(&schema()).expect("the schema compiles");
    validator
        .iter_errors(value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn schema() -> Value {
    serde_json::from_str(&std::fs::read_to_string("schemas/run-record.schema.json").unwrap())
        .unwrap()
}

/// Each threshold's verdict is in the record as data, beside its line as
/// printed: what was compared, how, against what bound, what each repeat
/// measured, where it is written; the implicit error bound says it is.
#[test]
fn the_record_keeps_each_threshold_verdict_as_data() {
    let (_, out, record) = recorded_run("verdicts", "tests/suites/repeats.yaml");
    let rows = record["suites"][0]["gates"][0]["thresholds"]
        .as_array()
        .unwrap_or_else(|| panic!("{record}\n{}", String::from_utf8_lossy(&out.stderr)));
    let verdicts: Vec<&Value> = rows.iter().filter_map(|r| r.get("threshold")).collect();
    let keys: Vec<(&str, &str, u64, bool)> = verdicts
        .iter()
        .map(|v| {
            (
                v["key"].as_str().unwrap(),
                v["op"].as_str().unwrap(),
                v["line"].as_u64().unwrap(),
                v["implicit"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            ("decode_tok_s.mean", ">=", 12, false),
            ("ttft.p99", "<=", 13, false),
            ("errors", "==", 7, true)
        ]
    );
    let decode = verdicts[0];
    assert_eq!(
        (decode["bound"].as_f64(), decode["unit"].as_str()),
        (Some(10.0), Some("tok/s"))
    );
    let each: Vec<f64> = decode["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(each.len(), 3, "{decode}");
    let mean = each.iter().sum::<f64>() / 3.0;
    assert!(
        (decode["measured"].as_f64().unwrap() - mean).abs() < 1e-6 * mean,
        "{decode}"
    );
    // Measured above its bound: passed, whatever the verdict mode.
    assert!(
        mean >= 10.0 && rows[0]["passed"] == Value::Bool(true),
        "{decode}"
    );
    // A count's repeats are each repeat's count; measured is their total.
    let errors = verdicts[2];
    assert_eq!(
        errors["repeats"],
        serde_json::json!([0.0, 0.0, 0.0]),
        "{errors}"
    );
    assert_eq!(errors["measured"], serde_json::json!(0.0), "{errors}");
    // The most the client can have moved a timed figure, by its
    // self-check: small beside the figure; a count has none.
    let ttft = verdicts[1];
    let moved = ttft["client_error"]
        .as_f64()
        .unwrap_or_else(|| panic!("{ttft}"));
    assert!(
        (0.0..ttft["measured"].as_f64().unwrap()).contains(&moved),
        "{ttft}"
    );
    assert_eq!(errors.get("client_error"), None, "{errors}");
}

/// The record's schema names every operator a suite can write and every
/// unit a figure has: a record of a `!=` bound or of a figure in tokens
/// is valid (the schema's lists once lagged the operators and units).
#[test]
fn the_schema_names_every_operator_and_unit() {
    use servegate::suite::{metric::Metric, threshold::Op};
    fn verdict(v: &Value) -> Option<&Value> {
        match v {
            Value::Object(m) => m
                .get("properties")
                .filter(|p| p.get("op").is_some() && p.get("unit").is_some())
                .or_else(|| m.values().find_map(verdict)),
            Value::Array(a) => a.iter().find_map(verdict),
            _ => None,
        }
    }
    let schema = schema();
    let verdict = verdict(&schema).expect("the threshold verdict's properties");
    let listed = |field: &str| -> std::collections::BTreeSet<String> {
        verdict[field]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{field} has no enum: {verdict}"))
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    let ops = Op::ALL.iter().map(|op| op.symbol().to_owned()).collect();
    assert_eq!(listed("op"), ops);
    let units = Metric::ALL.iter().map(|m| m.unit().to_owned()).collect();
    assert_eq!(listed("unit"), units);
}

/// Runs `suite` with its own output directory (`servegate-<name>-<pid>`
/// under the temp directory); its run directory, output and record, the
/// record checked against the schema.
fn recorded_run(name: &str, suite: &str) -> (std::path::PathBuf, std::process::Output, Value) {
    let dir = std::env::temp_dir().join(format!("servegate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = command(&["run", suite], &[("CARGO_TARGET_DIR", &dir)])
        .output()
        .unwrap();
    let latest = dir.join("servegate/latest/report.json");
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(&latest).unwrap_or_else(|e| {
            panic!(
                "{}: {e}\n{}",
                latest.display(),
                String::from_utf8_lossy(&out.stderr)
            )
        }))
        .unwrap();
    assert_eq!(schema_errors(&record), Vec::<String>::new());
    (dir, out, record)
}

#[test]
fn the_record_of_a_real_run_matches_its_schema() {
    let (dir, out, record) = recorded_run("record", "tests/suites/wrong_arithmetic.yaml");
    assert_eq!(out.status.code(), Some(1));
    let latest = dir.join("servegate/latest/report.json");
    assert_eq!(record["complete"], true);
    let trials = record["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 3);
    assert_eq!(trials[0]["name"], "wrong::correctness::arithmetic");
    assert_eq!(trials[0]["outcome"], "failed");
    assert_eq!(trials[0]["line"], 10);
    // Where its failure points: the assertion, three lines below.
    assert_eq!(trials[0]["points_at"], 13);
    assert!(
        trials[0]["message"]
            .as_str()
            .unwrap()
            .contains("expected content matches regex")
    );
    assert_eq!(trials[1]["outcome"], "passed");
    // The run's own copy and the JUnit file beside it.
    let run = dir
        .join("servegate/runs")
        .join(record["run_id"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(run.join("report.json")).unwrap(),
        std::fs::read_to_string(&latest).unwrap()
    );
    assert!(run.join("junit.xml").exists());
    // The fixture the golden files come from follows the schema too.
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string("tests/fixtures/report/record.json").unwrap(),
    )
    .unwrap();
    assert_eq!(schema_errors(&fixture), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The trial of `name` in a record.
fn trial<'a>(record: &'a Value, name: &str) -> &'a Value {
    record["trials"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("no trial {name} in {record}"))
}

/// Why a trial failed is in the record as data beside its message: each
/// assertion that failed with its line, each threshold's verdict, a
/// request's error class, a suite file's problems at their places; the
/// schema holds every kind of cause, and refuses one it does not know.
#[test]
fn a_failed_trial_says_why_as_data() {
    let (dir, _, record) = recorded_run("cause-probe", "tests/suites/wrong_arithmetic.yaml");
    let cause = &trial(&record, "wrong::correctness::arithmetic")["cause"];
    assert_eq!(cause["type"], "assertions", "{cause}");
    assert_eq!(cause["failed"][0]["line"], 13);
    assert_eq!(
        cause["failed"][0]["expected"],
        "content matches regex `\\b4\\b`"
    );
    // A gated trial has none: its message names what it waited for.
    let gated = trial(&record, "wrong::performance::decode");
    assert_eq!(
        (gated["outcome"].as_str(), gated.get("cause")),
        (Some("gated"), None)
    );
    let _ = std::fs::remove_dir_all(&dir);

    let (dir, _, record) = recorded_run("cause-gate", "tests/suites/too_slow.yaml");
    let cause = &trial(&record, "too_slow::performance::decode")["cause"];
    assert_eq!(cause["type"], "thresholds", "{cause}");
    let failed = cause["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "only ttft.p50 fails: {cause}");
    assert_eq!(
        (
            &failed[0]["key"],
            &failed[0]["op"],
            &failed[0]["unit"],
            &failed[0]["line"]
        ),
        (
            &Value::from("ttft.p50"),
            &Value::from("<="),
            &Value::from("s"),
            &Value::from(9)
        )
    );
    assert!(failed[0]["measured"].as_f64().unwrap() > failed[0]["bound"].as_f64().unwrap());
    assert_eq!(cause["client_at_stake"], false);
    let _ = std::fs::remove_dir_all(&dir);

    // A probe whose every stream is cut: its request's class.
    let suite = std::env::temp_dir().join(format!("servegate-cause-{}.yaml", std::process::id()));
    std::fs::write(
        &suite,
        format!(
            "suite: cut\nsim: {{ profile: {}/fixtures/sim/aborting.yaml }}\ncorrectness:\n  - name: hello\n    prompt: hi\n    expect: [{{ contains: x }}]\n",
            env!("CARGO_MANIFEST_DIR")
        ),
    )
    .unwrap();
    let (dir, _, record) = recorded_run("cause-request", suite.to_str().unwrap());
    let cause = &trial(&record, "cut::correctness::hello")["cause"];
    assert_eq!(cause["type"], "request", "{cause}");
    assert_eq!(cause["class"], "transport", "{cause}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&suite);

    let (dir, _, record) = recorded_run("cause-suite", "tests/suites/bad/typos.yaml");
    let cause = &trial(&record, "typos::load")["cause"];
    assert_eq!(cause["type"], "diagnostics", "{cause}");
    let problems = cause["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 13, "{cause}");
    assert_eq!(
        (&problems[0]["line"], &problems[0]["column"]),
        (&Value::from(3), &Value::from(13)),
        "{cause}"
    );
    // The schema is not a sieve: a cause it does not know is refused.
    let mut forged = record.clone();
    forged["trials"][0]["cause"] =
        serde_json::json!({"type": "assertions", "failed": [{"line": 1}]});
    assert_ne!(schema_errors(&forged), Vec::<String>::new());
    forged["trials"][0]["cause"] = serde_json::json!({"type": "bogus"});
    assert_ne!(schema_errors(&forged), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every kind of cause, each of its states, is one the record's schema
/// takes.
#[test]
fn every_kind_of_cause_matches_the_schema() {
    use servegate::record::{
        CheckFailed, ConfigState, Diagnosed, FailureCause, SnapshotState, ThresholdVerdict,
    };
    let config = |found: Option<&str>, state| FailureCause::Config {
        document: "server_info".into(),
        field: "tp_size".into(),
        expected: "expected 8".into(),
        found: found.map(str::to_owned),
        state,
    };
    let snapshot = |state| FailureCause::Snapshot {
        path: "snapshots/s/m/p.snap".into(),
        state,
    };
    let verdict = ThresholdVerdict {
        key: "ttft.p99".parse().unwrap(),
        op: servegate::suite::threshold::Op::Le,
        bound: Some(0.22),
        reference: Some(0.2),
        measured: Some(0.25),
        repeats: vec![0.24, 0.26],
        line: 9,
        implicit: false,
        not_applied: None,
        client_error: Some(0.0001),
        written: "baseline * 1.1".into(),
        reference_from: Some("baseline".into()),
    };
    let causes = [
        FailureCause::Request {
            class: "http".into(),
            status: Some(503),
        },
        FailureCause::Request {
            class: "in-stream error".into(),
            status: None,
        },
        config(Some("4"), ConfigState::Mismatch),
        config(None, ConfigState::Missing),
        config(None, ConfigState::Unreported),
        snapshot(SnapshotState::New),
        snapshot(SnapshotState::Changed),
        snapshot(SnapshotState::Unreadable),
        FailureCause::Assertions {
            failed: vec![CheckFailed {
                expected: "content contains \"4\"".into(),
                found: None,
                line: 12,
            }],
        },
        FailureCause::Diagnostics {
            problems: vec![Diagnosed {
                line: 3,
                column: 13,
                message: "unknown field `x` in gate".into(),
                expected: Some("one of `name`, `load`".into()),
                help: None,
            }],
        },
        FailureCause::Thresholds {
            failed: vec![verdict],
            client_at_stake: true,
        },
    ];
    let mut record: Value = serde_json::from_str(
        &std::fs::read_to_string("tests/fixtures/report/record.json").unwrap(),
    )
    .unwrap();
    for cause in causes {
        record["trials"][0]["cause"] = serde_json::to_value(&cause).unwrap();
        assert_eq!(
            schema_errors(&record),
            Vec::<String>::new(),
            "{}",
            record["trials"][0]["cause"]
        );
    }
}

#[test]
fn markdown_summary() {
    let md = report::markdown::render(&fixture(), None);
    // Every threshold of a gate with its verdict, passing ones too; a
    // gated trial marked as gated, in the table and among the failures.
    for needle in [
        "## ❌ servegate: 5 passed, 2 failed (1 of them gated)",
        "| `wrong::performance::decode` | ⛔ gated |",
        "| threshold | verdict |\n|---|---|\n| `` decode_tok_s.mean >= 1.0 tok/s (measured 124.4 tok/s",
        "| `` tpot.mean <= variant(slow) * 0.5 (not applied: this is variant `slow`) `` | ✅ pass |",
        "| `` errors == 0 (measured 0) `` | ✅ pass |",
        "<summary><code>wrong::performance::decode</code> gated (tests/suites/wrong_arithmetic.yaml:19)</summary>",
        "- `decode` errors: no best variant: `slow` and `fast` tie at 0",
    ] {
        assert!(md.contains(needle), "`{needle}` not in:\n{md}");
    }
    golden!(md);
}

#[test]
fn junit_is_golden_and_parses_back() {
    let xml = report::junit::render(&fixture()).unwrap();
    golden!(xml);
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(root.attribute("tests"), Some("7"));
    assert_eq!(root.attribute("failures"), Some("2"));
    let suites: Vec<_> = root
        .children()
        .filter(|n| n.has_tag_name("testsuite"))
        .map(|n| n.attribute("name").unwrap())
        .collect();
    assert_eq!(suites, ["wrong", "ab[slow]", "ab[fast]"]);
    let failure = doc
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert_eq!(
        failure.parent().unwrap().attribute("name"),
        Some("correctness::arithmetic")
    );
    assert!(failure.text().unwrap().contains("content:   \"5\""));
    // Where the item is written, as the attributes test reporters read.
    let case = failure.parent().unwrap();
    assert_eq!(
        case.attribute("file"),
        Some("tests/suites/wrong_arithmetic.yaml")
    );
    assert!(case.attribute("line").unwrap().parse::<u32>().unwrap() > 0);
}

#[test]
fn github_annotations_point_at_the_failing_line() {
    let lines = report::annotations::render(&fixture());
    golden!(lines.join("\n"));
    assert_eq!(lines.len(), 2);
    for l in &lines {
        assert!(!l.contains('\n'));
        assert!(
            l.starts_with("::error file=tests/suites/wrong_arithmetic.yaml,line="),
            "{l}"
        );
    }
    // The assertion's line, not the probe's.
    assert!(lines[0].starts_with("::error file=tests/suites/wrong_arithmetic.yaml,line=13,title=wrong%3A%3Acorrectness%3A%3Aarithmetic::error: assertion failed"));
}

#[test]
fn servegate_report_renders_a_saved_record() {
    let run = |format: &str| {
        let out = command(&[], &[])
            .args([
                "report",
                "tests/fixtures/report/record.json",
                "--format",
                format,
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        run("md"),
        report::markdown::render(
            &fixture(),
            Some(std::path::Path::new("tests/fixtures/report/record.json"))
        )
    );
    assert_eq!(run("junit"), report::junit::render(&fixture()).unwrap());
    let back: RunRecord = serde_json::from_str(&run("json")).unwrap();
    assert_eq!(back.trials, fixture().trials);
    let out = command(&[], &[])
        .args(["report", "tests/fixtures/report/nope.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("failed to read tests/fixtures/report/nope.json")
    );
}

#[test]
fn html_report_is_golden_and_self_contained() {
    let html = report::html::render(&fixture());
    // Nothing to fetch: no scripts, no external styles, fonts or images.
    for forbidden in ["<script", "http://", "https://", "<link", "@import", "url("] {
        let outside_text = html.replace("http://127.0.0.1:30000", "");
        assert!(
            !outside_text.contains(forbidden),
            "`{forbidden}` in the report"
        );
    }
    assert!(html.contains("<svg class=\"chart\""));
    for needle in [
        "<span class=\"fail\">5 passed, 2 failed (1 of them gated)</span>",
        "<tr class=\"gated\"><td><code>wrong::performance::decode</code></td><td>gated</td>",
        "<details><summary>why it was gated</summary>",
        "<table class=\"thresholds\"><tr><th>threshold</th><th>verdict</th></tr><tr class=\"pass\"><td>decode_tok_s.mean &gt;= 1.0 tok/s (measured 124.4 tok/s",
        "<tr class=\"pass\"><td>errors == 0 (measured 0)</td><td>pass</td></tr>",
        " — no best: `slow` and `fast` tie at 0",
    ] {
        assert!(html.contains(needle), "`{needle}` not in the report");
    }
    golden!(html);
}

/// A fleet: one suite run on two node types (the simulator with two
/// profiles, fast and slow), each run's output directory as a CI job
/// uploads it, merged by `servegate report merge` into one Markdown
/// summary, JUnit file and HTML page with a row per node and suite and the
/// gate side by side; the slow node fails the gate, so the merge exits 1.
#[test]
fn report_merge_puts_two_nodes_side_by_side() {
    let dir = std::env::temp_dir().join(format!("servegate-merge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (node, code) in [("fast", 0), ("slow", 1)] {
        let out = dir.join(node);
        let o = servegate(&[
            "run",
            &format!("tests/suites/fleet/{node}-node.yaml"),
            "--out-dir",
            out.to_str().unwrap(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    let merged = dir.join("merged");
    // One labelled by its directory (an output directory, as the action
    // uploads it), one by name (a record file).
    let o = servegate(&[
        "report",
        "merge",
        dir.join("fast").to_str().unwrap(),
        &format!("l4={}", dir.join("slow/latest/report.json").display()),
        "--out-dir",
        merged.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("2 records merged"), "{stderr}");
    let md = std::fs::read_to_string(merged.join("summary.md")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        md,
        "stdout is the summary"
    );
    for needle in [
        "## ❌ servegate on 2 nodes: 3 passed, 1 failed",
        "| node | hardware | suite | target | passed | failed | gated |",
        "| fast | no GPU | `fleet` | SIMULATOR",
        "| 2 | 0 | 0 |\n| l4 | no GPU | `fleet` | SIMULATOR",
        "| 1 | 1 | 0 |\n",
        "### `fleet::performance::decode` across nodes\n\n| | fast | l4 |",
        "| outcome | ✅ passed | ❌ failed |",
        "<details><summary><code>l4/fleet::performance::decode</code>",
    ] {
        assert!(md.contains(needle), "`{needle}` not in:\n{md}");
    }
    // The decode speed of both nodes, the slow one's change against the fast.
    let row =
        regex::Regex::new(r"\| decode_tok_s\.mean \| ([\d.]+) \| ([\d.]+) \((-\d+\.\d)%\) \|")
            .unwrap();
    let c = row.captures(&md).unwrap_or_else(|| panic!("{md}"));
    let (fast, slow): (f64, f64) = (c[1].parse().unwrap(), c[2].parse().unwrap());
    assert!(fast >= 250.0 && slow < 250.0, "{md}");
    let delta: f64 = c[3].parse().unwrap();
    assert!((delta - (slow - fast) / fast * 100.0).abs() < 0.1, "{md}");

    let xml = std::fs::read_to_string(merged.join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suites: Vec<(&str, &str)> = doc
        .root_element()
        .children()
        .filter(|n| n.has_tag_name("testsuite"))
        .map(|n| {
            (
                n.attribute("name").unwrap(),
                n.attribute("failures").unwrap(),
            )
        })
        .collect();
    assert_eq!(suites, [("fast/fleet", "0"), ("l4/fleet", "1")]);
    let failed = doc
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .and_then(|f| f.parent())
        .unwrap();
    assert_eq!(failed.attribute("name"), Some("performance::decode"));
    assert_eq!(
        failed.attribute("file"),
        Some("tests/suites/fleet/slow-node.yaml")
    );

    let html = std::fs::read_to_string(merged.join("report.html")).unwrap();
    for needle in [
        "servegate on 2 nodes: <span class=\"fail\">3 passed, 1 failed</span>",
        "<td>l4</td><td>no GPU</td><td><code>fleet</code></td>",
        "<code>fleet::performance::decode</code></h3><table><tr><th></th><th>fast</th><th>l4</th></tr>",
        "<td class=\"pass\">passed</td><td class=\"fail\">failed</td>",
        "<code>l4/fleet::performance::decode</code>",
    ] {
        assert!(html.contains(needle), "`{needle}` not in:\n{html}");
    }

    // A record that cannot be read is an error of its own, not a merge.
    let o = servegate(&["report", "merge", dir.join("nowhere").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nowhere"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `servegate report --format csv` of a run: a header, then a row per
/// gate and figure with the gate's trial outcome (read by the trial's id),
/// a row's text cells inert in a spreadsheet: the gate that failed its
/// `errors != 0` is `failed`, its load quoted (it holds commas).
#[test]
fn report_csv_has_a_row_per_figure_with_its_trial_outcome() {
    let dir = std::env::temp_dir().join(format!("servegate-csv-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = servegate(&[
        "run",
        "tests/suites/point-bounds.yaml",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let record = dir.join("latest/report.json");
    let o = servegate(&["report", record.to_str().unwrap(), "--format", "csv"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8(o.stdout).unwrap();
    let mut lines = text.split_terminator("\r\n");
    assert_eq!(lines.next(), Some(report::csv::HEADER));
    let rows: Vec<&str> = lines.collect();
    let row = |figure: &str| {
        rows.iter()
            .find(|r| r.contains(&format!(",point,refuses_some,{figure},")))
            .unwrap_or_else(|| panic!("no {figure} row in:\n{text}"))
    };
    let errors = row("errors");
    assert!(
        errors.contains(",errors,0,,1,failed,\"closed loop, concurrency 1, 2 requests"),
        "{errors}"
    );
    let decode = row("decode_tok_s.mean");
    let value: f64 = decode.split(',').nth(5).unwrap().parse().unwrap();
    assert!(
        value > 0.0 && decode.contains(",tok/s,1,failed,"),
        "{decode}"
    );
    // Every row has the header's columns, quoted commas aside.
    let columns = report::csv::HEADER.split(',').count();
    for r in &rows {
        let unquoted: String = r.split('"').step_by(2).collect();
        assert_eq!(unquoted.split(',').count(), columns, "{r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
