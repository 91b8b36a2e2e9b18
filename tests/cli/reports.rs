//! What a run leaves: the record and journal of an interrupted run, its
//! reports, pruning of old run directories, and GitHub Actions'
//! annotations and step summary.

use crate::common::run::{command, merged, servegate_with, streams};
use crate::common::verdicts::assert_has;
use std::process::Command;

#[test]
fn an_interrupted_run_leaves_the_figures_already_measured() {
    let dir = std::env::temp_dir().join(format!("servegate-interrupted-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = command(&[], &[])
        .args(["run", "tests/suites/interrupted.yaml"])
        .env("CARGO_TARGET_DIR", &dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let figures = dir.join("servegate/latest/report.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut text = String::new();
    while std::time::Instant::now() < deadline {
        text = std::fs::read_to_string(&figures).unwrap_or_default();
        if text.contains("\"gate\": \"quick\"") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let still_running = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        still_running,
        "the long gate should still have been running"
    );
    assert_has(&text, &["\"gate\": \"quick\"", "\"output_tok_s\""]);
    // The record says the run did not finish, and which trials did.
    let record: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(record["complete"], false);
    assert_eq!(
        record["trials"][0]["name"],
        "interrupted::performance::quick"
    );
    assert_eq!(record["trials"][0]["outcome"], "passed");
    assert_eq!(record["trials"].as_array().map(Vec::len), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The record is rewritten at checkpoints (after 1, 2, 4, 8, … trials and
/// after each gate), each trial appended to a journal beside it: a run
/// killed mid-gate leaves every finished trial, merged by `servegate report`.
#[test]
fn an_interrupted_run_keeps_every_finished_trial_in_its_journal() {
    let dir = std::env::temp_dir().join(format!("servegate-journal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = command(&[], &[])
        .args(["run", "tests/suites/interrupted-probes.yaml", "--out-dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let journal = || {
        let runs = std::fs::read_dir(dir.join("runs")).ok()?;
        let run = runs.flatten().next()?.path();
        let text = std::fs::read_to_string(run.join("trials.jsonl")).ok()?;
        Some((run, text.lines().count()))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while journal().is_none_or(|(_, n)| n < 6) {
        assert!(
            std::time::Instant::now() < deadline,
            "the probes never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let (run, lines) = journal().unwrap();
    assert_eq!(lines, 6);
    let on_disk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    assert_eq!(on_disk["complete"], false);
    assert_eq!(on_disk["trials"].as_array().map(Vec::len), Some(4));
    let merged = streams(&["report", run.to_str().unwrap(), "--format", "json"]);
    let merged: serde_json::Value = serde_json::from_slice(&merged.stdout).unwrap();
    let names = crate::trial_names(&merged);
    assert_eq!(
        names,
        ["a", "b", "c", "d", "e", "f"].map(|p| format!("journal::correctness::{p}"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ctrl-C (or a CI cancel's SIGINT) mid-gate: the run exits 130 and first
/// writes the record of every finished trial and its reports.
#[test]
fn an_interrupted_run_writes_its_last_record_and_reports() {
    let dir = std::env::temp_dir().join(format!("servegate-sigint-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let child = command(&[], &[])
        .args(["run", "tests/suites/interrupted-probes.yaml", "--out-dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let journal = dir.join("latest/report.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // The fourth trial's checkpoint, then a little more: the gate runs.
    while !std::fs::read_to_string(&journal).is_ok_and(|t| t.contains("journal::correctness::d")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the probes never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert_has(
        &String::from_utf8_lossy(&out.stderr),
        &["servegate: the record of the 6 finished trial(s) is in "],
    );
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&journal).unwrap()).unwrap();
    assert_eq!(record["complete"], false);
    assert_eq!(record["trials"].as_array().map(Vec::len), Some(6));
    assert!(dir.join("latest/junit.xml").exists() && dir.join("latest/report.html").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Old run directories are pruned after a run: the newest N are kept
/// (this run's included), never one whose process still runs, and nothing
/// that is not a servegate run directory is touched.
#[test]
fn old_run_directories_are_pruned_to_the_newest_n() {
    let dir = std::env::temp_dir().join(format!("servegate-prune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let runs = dir.join("runs");
    let alive_name = format!("999-{}", std::process::id());
    // Twelve runs of a process long gone (no pid is 999999999).
    for i in 0..12 {
        let d = runs.join(format!("{}-999999999", 1000 + i));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("report.json"), "{}").unwrap();
    }
    // The oldest of all, but its process (this test) still runs.
    let alive = runs.join(&alive_name);
    std::fs::create_dir_all(&alive).unwrap();
    std::fs::write(alive.join("trials.jsonl"), "").unwrap();
    // Not servegate's: another name, a run's name without a record, a file.
    for d in ["notes", "5-999999999"] {
        std::fs::create_dir_all(runs.join(d)).unwrap();
    }
    std::fs::write(runs.join("notes/report.json"), "{}").unwrap();
    std::fs::write(runs.join("6-999999999"), "").unwrap();
    let names = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    let run = |keep: &[&str], env: &[(&str, &std::path::Path)]| {
        let mut args = vec![
            "run",
            "suites/sglang.yaml",
            "--out-dir",
            dir.to_str().unwrap(),
        ];
        args.extend_from_slice(keep);
        args.extend(["--", "--exact", "sglang::correctness::arithmetic"]);
        let o = servegate_with(&args, env);
        assert_eq!(o.code, Some(0), "{}", o.out);
        o.out
    };
    let out = run(&["--keep", "3"], &[]);
    assert_has(&out, &["servegate: removed 10 old run directories of "]);
    let left = names();
    let current: Vec<&String> = left
        .iter()
        .filter(|n| n.ends_with("-999999999") || n.starts_with("999-") || *n == "notes")
        .collect();
    assert_eq!(
        current,
        [
            "1010-999999999",
            "1011-999999999",
            "5-999999999",
            "6-999999999",
            &alive_name,
            "notes"
        ],
        "{left:?}"
    );
    assert_eq!(left.len(), 7, "this run's directory is kept: {left:?}");
    // 0 keeps them all; the variable sets N where no flag does.
    let out = run(&["--keep", "0"], &[]);
    assert!(!out.contains("removed"), "{out}");
    assert_eq!(names().len(), 8);
    run(&[], &[("SERVEGATE_KEEP_RUNS", std::path::Path::new("1"))]);
    let left = names();
    assert_eq!(
        left.len(),
        5,
        "only this run, the live one and what is not a run: {left:?}"
    );
    assert!(!left.contains(&"1011-999999999".to_owned()), "{left:?}");
    assert!(left.contains(&alive_name), "{left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// On GitHub Actions a run annotates the failing lines of the suite file and
/// appends its Markdown summary to the step summary.
#[test]
fn github_actions_get_annotations_and_a_step_summary() {
    let summary = std::env::temp_dir().join(format!("servegate-summary-{}.md", std::process::id()));
    std::fs::write(&summary, "earlier steps\n").unwrap();
    let mut cmd = command(&["run", "tests/suites/wrong_arithmetic.yaml"], &[]);
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary);
    let (code, out) = merged(cmd);
    assert_eq!(code, Some(1), "{out}");
    assert_has(
        &out,
        &[
            "::error file=tests/suites/wrong_arithmetic.yaml,line=13,title=wrong%3A%3Acorrectness%3A%3Aarithmetic::error: assertion failed: expected content matches regex `\\b4\\b`%0A",
            "::error file=tests/suites/wrong_arithmetic.yaml,line=19,title=wrong%3A%3Aperformance%3A%3Adecode::gated: correctness probe arithmetic failed",
        ],
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert_has(
        &md,
        &[
            "earlier steps\n## ❌ servegate: 1 passed, 2 failed",
            "| `wrong::correctness::arithmetic` | ❌ failed |",
            "<details><summary><code>wrong::correctness::arithmetic</code>",
        ],
    );
    let _ = std::fs::remove_file(&summary);
}

/// A suite file that does not load is a failed trial of the record like
/// any other: on GitHub Actions an `::error` at the line of its first
/// problem (every problem in the message), a step summary that counts and
/// names it, and the record named where `--out-dir` put it.
#[test]
fn an_invalid_suite_is_annotated_at_its_line_and_named_in_the_summary() {
    let dir = std::env::temp_dir().join(format!("servegate-invalid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let summary = dir.join("summary.md");
    let out_dir = dir.join("records");
    let mut cmd = command(
        &[
            "run",
            "tests/suites/bad/typos.yaml",
            "tests/suites/fleet/fast-node.yaml",
            "--out-dir",
            out_dir.to_str().unwrap(),
        ],
        &[],
    );
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary);
    let (code, out) = merged(cmd);
    assert_eq!(code, Some(2), "{out}");
    assert_has(
        &out,
        &["::error file=tests/suites/bad/typos.yaml,line=3,title=typos%3A%3Aload::error: "],
    );
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("latest/report.json")).unwrap())
            .unwrap();
    let load = &record["trials"][0];
    assert_eq!(load["name"], "typos::load", "{record:#}");
    assert_eq!(
        (
            &load["stage"],
            &load["outcome"],
            &load["kind"],
            &load["line"]
        ),
        (
            &serde_json::json!("load"),
            &serde_json::json!("failed"),
            &serde_json::json!("suite"),
            &serde_json::json!(3)
        )
    );
    assert!(
        load["message"]
            .as_str()
            .unwrap()
            .contains("--> tests/suites/bad/typos.yaml:5:24"),
        "{load:#}"
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    let run = record["run_id"].as_str().unwrap();
    assert_has(
        &md,
        &[
            "## ❌ servegate: 2 passed, 1 failed",
            "| `typos::load` | ❌ failed |",
            "<details><summary><code>typos::load</code> (tests/suites/bad/typos.yaml:3)</summary>",
            &format!(
                "Run record: `{}` (servegate",
                out_dir.join("runs").join(run).join("report.json").display()
            ),
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A suite file that does not load fails the run even when a filter leaves
/// its trial out: it is in the record and the summary, and said on stderr
/// (the run's exit 2 is never unexplained beside a green summary).
#[test]
fn an_invalid_suite_filtered_out_still_fails_the_run_and_says_why() {
    let dir =
        std::env::temp_dir().join(format!("servegate-invalid-filtered-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let summary = dir.join("summary.md");
    let mut cmd = command(
        &[
            "run",
            "tests/suites/bad/typos.yaml",
            "tests/suites/fleet/fast-node.yaml",
            "--out-dir",
            dir.join("out").to_str().unwrap(),
            "--",
            "correctness",
        ],
        &[],
    );
    cmd.env("GITHUB_STEP_SUMMARY", &summary);
    let (code, out) = merged(cmd);
    assert_eq!(code, Some(2), "{out}");
    assert_has(
        &out,
        &[
            "--> tests/suites/bad/typos.yaml:3:13",
            "note: `typos::load` is filtered out, but a suite file that does not load fails the run (exit 2)",
        ],
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert_has(
        &md,
        &[
            "## ❌ servegate: 1 passed, 1 failed",
            "| `typos::load` | ❌ failed |",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A record is a file anyone can write: one whose node, suite, trial,
/// file, message and gate names carry an escape sequence and a forged
/// workflow command is reported (`report --format md|annotations|junit`,
/// `report merge`) with both made inert — no escape byte, no line a CI
/// log reads as a command but servegate's own annotations.
#[test]
fn a_crafted_record_forges_nothing_in_its_reports() {
    let dir = tempfile::tempdir().unwrap();
    let run = servegate_with(
        &[
            "run",
            "tests/suites/wrong_arithmetic.yaml",
            "--out-dir",
            dir.path().to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(run.code, Some(1), "{}", run.out);
    let forged = "evil\u{1b}[2J\n::error::forged";
    let mut record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("latest/report.json")).unwrap(),
    )
    .unwrap();
    let add = |v: &mut serde_json::Value| {
        *v = serde_json::Value::String(format!("{}{forged}", v.as_str().unwrap_or("")));
    };
    add(&mut record["node"]);
    for t in record["trials"].as_array_mut().unwrap() {
        for k in ["name", "file", "message"] {
            add(&mut t[k]);
        }
    }
    for s in record["suites"].as_array_mut().unwrap() {
        add(&mut s["suite"]);
        add(&mut s["target"]);
        for g in s["gates"].as_array_mut().unwrap() {
            add(&mut g["gate"]);
            add(&mut g["load"]);
        }
    }
    let crafted = dir.path().join("crafted.json");
    std::fs::write(&crafted, record.to_string()).unwrap();
    let c = crafted.to_str().unwrap();
    let merged_dir = dir.path().join("merged");
    let mut outputs = Vec::new();
    for format in ["md", "annotations", "junit"] {
        let o = servegate_with(&["report", c, "--format", format], &[]);
        outputs.push((format!("report --format {format}"), o.out));
    }
    let o = servegate_with(
        &[
            "report",
            "merge",
            &format!("a={c}"),
            &format!("b={c}"),
            "--out-dir",
            merged_dir.to_str().unwrap(),
        ],
        &[],
    );
    outputs.push(("report merge".to_owned(), o.out));
    for file in ["summary.md", "junit.xml", "report.html"] {
        outputs.push((
            file.to_owned(),
            std::fs::read_to_string(merged_dir.join(file)).unwrap(),
        ));
    }
    for (what, text) in &outputs {
        assert!(
            text.contains("evil"),
            "{what}: the crafted strings are not shown:\n{text}"
        );
        assert!(!text.contains('\u{1b}'), "{what}: an escape byte:\n{text}");
        assert!(
            !text
                .lines()
                .any(|l| l.trim_start().starts_with("::") && !l.starts_with("::error file=")),
            "{what}: a forged workflow command:\n{text}"
        );
    }
}
