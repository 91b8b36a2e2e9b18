//! The run history end to end: every run recorded, listed and shown back
//! with its run and commit, imports that never count a run twice, a
//! history turned off, and an import killed mid-write that leaves no half
//! run.

use crate::common::run::{command, servegate_with};
use crate::postgres::Postgres;
use std::path::Path;

/// `servegate history … --format json` in output directory `out`, parsed.
fn history_json(out: &Path, args: &[&str]) -> serde_json::Value {
    history_json_with(out, args, &[])
}

/// [`history_json`] with these variables.
fn history_json_with(out: &Path, args: &[&str], env: &[(&str, &Path)]) -> serde_json::Value {
    let mut all = vec!["history", "--out-dir", out.to_str().unwrap()];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    let o = command(&all, env).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn every_run_is_recorded_and_reads_back_with_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let env = [("SERVEGATE_OUT", out.as_path())];
    let mut ids = Vec::new();
    for _ in 0..2 {
        let o = servegate_with(&["run", "tests/suites/history.yaml"], &env);
        assert_eq!(o.code, Some(0), "{}", o.out);
        let record = crate::record_of(&o.out);
        let uid = format!(
            "{}/{}",
            record["node"].as_str().unwrap(),
            record["run_id"].as_str().unwrap()
        );
        assert!(
            o.out.contains(&format!(
                "servegate: history: {} figure(s) of run {uid} recorded in {}",
                record["suites"][0]["gates"][0]["figures"]
                    .as_object()
                    .unwrap()
                    .len(),
                out.join("history.sqlite").display()
            )),
            "{}",
            o.out
        );
        ids.push(uid);
    }
    let listed = history_json(&out, &["list", "--figure", "decode_tok_s.mean"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["points"], 2, "{listed}");
    assert_eq!(listed[0]["model"], "sim-steady", "{listed}");
    let shown = history_json(&out, &["show", "history::steady", "decode_tok_s.mean"]);
    let runs: Vec<&str> = shown["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["run_uid"].as_str().unwrap())
        .collect();
    assert_eq!(runs, ids, "oldest first: {shown}");
    assert!(
        shown["points"][0]["value"].as_f64().unwrap() > 0.0,
        "{shown}"
    );
    assert_eq!(shown["points"][0]["gate_passed"], true, "{shown}");

    // The runs' own records are in already; a bench_serving result file
    // is a run of its own, once.
    let import = |what: &str| {
        servegate_with(
            &[
                "history",
                "--out-dir",
                out.to_str().unwrap(),
                "import",
                what,
            ],
            &[],
        )
    };
    let o = import(out.to_str().unwrap());
    assert_eq!(o.code, Some(0), "{}", o.out);
    assert!(o.out.contains("0 run(s) added to "), "{}", o.out);
    assert!(o.out.contains(", 2 there already"), "{}", o.out);
    for added in ["1 run(s) added", "0 run(s) added"] {
        let o = import("fixtures/bench-serving/sglang-0.5.23.jsonl");
        assert_eq!(o.code, Some(0), "{}", o.out);
        assert!(o.out.contains(added), "{}", o.out);
    }
    let o = import("Cargo.toml");
    assert_eq!(o.code, Some(2), "{}", o.out);
    assert!(
        o.out
            .contains("Cargo.toml: neither a servegate run record nor a benchmark tool's results"),
        "{}",
        o.out
    );
}

#[test]
fn a_history_turned_off_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = servegate_with(
        &["run", "tests/suites/history.yaml", "--history", "off"],
        &[("SERVEGATE_OUT", out.as_path())],
    );
    assert_eq!(o.code, Some(0), "{}", o.out);
    assert!(!o.out.contains("servegate: history:"), "{}", o.out);
    assert!(!out.join("history.sqlite").exists());
    let o = servegate_with(
        &["history", "--history", "off", "list"],
        &[("SERVEGATE_OUT", out.as_path())],
    );
    assert_eq!(o.code, Some(2), "{}", o.out);
    assert!(o.out.contains("the history is off"), "{}", o.out);
}

/// An import of a run of 30,000 figures into `history`, killed at ten
/// moments while it writes: every run the history then holds has all its
/// figures (the store's transaction), and the kills did land before the
/// commit.
fn killed_imports_leave_no_half_run(history: &str, env: &[(&str, &Path)]) {
    let dir = tempfile::tempdir().unwrap();
    let figures: serde_json::Map<String, serde_json::Value> = [
        "decode_tok_s.mean",
        "ttft.p99",
        "itl.p99",
        "tpot.mean",
        "output_tok_s",
        "errors",
    ]
    .iter()
    .map(|k| ((*k).to_owned(), serde_json::json!(1.5)))
    .collect();
    let gates: Vec<serde_json::Value> = (0..5000)
        .map(|g| serde_json::json!({ "gate": format!("g{g}"), "load": "x", "repeats": 1, "figures": figures }))
        .collect();
    let mut killed_before_commit = 0;
    for attempt in 0..10u64 {
        let record = dir.path().join(format!("report-{attempt}.json"));
        let run = serde_json::json!({
            "schema": "servegate.run/2", "run_id": format!("{attempt}-1"), "node": "n",
            "started_unix": attempt, "finished_unix": attempt, "complete": true,
            "suites": [{ "suite": "big", "fingerprint": "f", "target": "t", "gates": gates }]
        });
        std::fs::write(&record, run.to_string()).unwrap();
        let mut child = command(
            &[
                "history",
                "--history",
                history,
                "import",
                record.to_str().unwrap(),
            ],
            env,
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20 + 40 * attempt));
        let _ = child.kill();
        let status = child.wait().unwrap();
        let listed = history_json_with(
            dir.path(),
            &["--history", history, "list", "--all", "--suite", "big"],
            env,
        );
        // Every series has the same points: no run is in part.
        let sizes: std::collections::BTreeSet<u64> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["points"].as_u64().unwrap())
            .collect();
        assert!(sizes.len() <= 1, "a run in part: series of sizes {sizes:?}");
        let landed = sizes.first().is_some_and(|n| *n == attempt + 1);
        if !landed && !status.success() {
            killed_before_commit += 1;
        }
    }
    assert!(
        killed_before_commit > 0,
        "no kill landed before an import committed: the test proved nothing"
    );
}

#[test]
fn a_killed_import_leaves_no_half_run() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.sqlite");
    killed_imports_leave_no_half_run(history.to_str().unwrap(), &[]);
}

/// Three runners at once on one PostgreSQL history, its password from
/// `PGPASSWORD` only: every run lands, reads back per node, and the
/// password is never printed; without it, the error says what is
/// missing; a killed import leaves no half run there either.
#[test]
fn runners_share_one_postgresql_history() {
    let Some(pg) = Postgres::start("runners_share_one_postgresql_history") else {
        return;
    };
    let password = Path::new(&pg.password);
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<_> = (0..3)
        .map(|n| {
            let out = dir.path().join(format!("out{n}"));
            let node = dir.path().join(format!("gpu-runner-{n}"));
            let node = Path::new(node.file_name().unwrap()).to_path_buf();
            std::thread::spawn({
                let url = pg.url.clone();
                let password = password.to_path_buf();
                move || {
                    servegate_with(
                        &["run", "tests/suites/history.yaml", "--history", &url],
                        &[
                            ("SERVEGATE_OUT", out.as_path()),
                            ("SERVEGATE_NODE", node.as_path()),
                            ("PGPASSWORD", password.as_path()),
                        ],
                    )
                }
            })
        })
        .collect();
    for run in runs {
        let o = run.join().unwrap();
        assert_eq!(o.code, Some(0), "{}", o.out);
        assert!(o.out.contains("servegate: history: "), "{}", o.out);
        assert!(
            o.out.contains("postgres://servegate:***@127.0.0.1:"),
            "{}",
            o.out
        );
        assert!(
            !o.out.contains(&pg.password),
            "the password printed:\n{}",
            o.out
        );
    }
    let env = [("PGPASSWORD", password)];
    let shown = history_json_with(
        dir.path(),
        &[
            "--history",
            &pg.url,
            "show",
            "history::steady",
            "decode_tok_s.mean",
        ],
        &env,
    );
    let mut nodes: Vec<&str> = shown["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["node"].as_str().unwrap())
        .collect();
    nodes.sort_unstable();
    assert_eq!(
        nodes,
        ["gpu-runner-0", "gpu-runner-1", "gpu-runner-2"],
        "{shown}"
    );

    let o = servegate_with(&["history", "--history", &pg.url, "list"], &[]);
    assert_eq!(o.code, Some(2), "{}", o.out);
    assert!(o.out.contains("password missing"), "{}", o.out);

    killed_imports_leave_no_half_run(&pg.url, &env);
}
