//! Snapshots of answers as a review stage of their own: pending answers,
//! a first run without snapshots, and `servegate review` on stdin.

use crate::common::run::{command, merged};
use crate::common::verdicts::{assert_has, failure_of, verdict};
use crate::ran_before;

/// A project of its own in a temporary directory: `snapshots/` at its root,
/// the snapshot suites under `suites/` with their simulator profiles.
fn snapshot_project(tag: &str) -> std::path::PathBuf {
    let root =
        std::env::temp_dir().join(format!("servegate-snapshots-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("snapshots")).unwrap();
    std::fs::create_dir_all(root.join("suites")).unwrap();
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in ["a", "b", "gate"] {
        let text = std::fs::read_to_string(here.join(format!("tests/suites/snapshot/{name}.yaml")))
            .unwrap()
            .replace(
                "fixtures/sim/",
                &format!("{}/fixtures/sim/", here.display()),
            );
        std::fs::write(root.join(format!("suites/{name}.yaml")), text).unwrap();
    }
    root
}

/// `servegate` in `cwd` with these variables (and no CI or INSTA_* unless given).
fn servegate_in(
    cwd: &std::path::Path,
    args: &[&str],
    vars: &[(&str, &str)],
) -> (Option<i32>, String) {
    let mut cmd = command(&[], &[]);
    cmd.args(args).current_dir(cwd);
    for v in [
        "CI",
        "TF_BUILD",
        "INSTA_UPDATE",
        "INSTA_FORCE_PASS",
        "SERVEGATE_TARGET",
        "SERVEGATE_SNAPSHOTS",
        "SERVEGATE_OUT",
        "CARGO_TARGET_DIR",
    ] {
        cmd.env_remove(v);
    }
    cmd.envs(vars.iter().copied());
    merged(cmd)
}

/// `servegate review` in `project`, answering `answers` on stdin.
fn review(project: &std::path::Path, args: &[&str], answers: &str) -> String {
    let mut child = command(&[], &[])
        .arg("review")
        .args(args)
        .current_dir(project)
        .env_remove("SERVEGATE_SNAPSHOTS")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), answers.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Snapshots are a stage of their own: a missing or changed answer fails
/// `<suite>::snapshot::<probe>` and leaves the probe, and the gates, alone
/// (unless `snapshot: gate`); the pending answer goes beside the snapshot
/// locally and into the run directory in CI; `INSTA_FORCE_PASS` passes
/// nothing; paths are the suite's project's, wherever servegate runs from.
#[test]
fn snapshots_are_a_review_stage_of_their_own() {
    let root = snapshot_project("stage");
    let suites = root.join("suites");
    let snap = root.join("snapshots/snap/sim-snap/capital.snap");
    let pending = root.join("snapshots/snap/sim-snap/capital.snap.new");
    // No snapshot, nothing written: the snapshot trial fails, the probe passes.
    let (code, out) = servegate_in(&suites, &["run", "a.yaml"], &[("INSTA_UPDATE", "no")]);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(verdict(&out, "snap::correctness::capital"), "ok", "{out}");
    assert_eq!(verdict(&out, "snap::snapshot::capital"), "FAILED", "{out}");
    assert!(ran_before(
        &out,
        "snap::correctness::capital",
        "snap::snapshot::capital"
    ));
    assert!(ran_before(
        &out,
        "snap::snapshot::capital",
        "snap::correctness::twice"
    ));
    assert_has(
        &failure_of(&out, "snap::snapshot::capital"),
        &[
            "error: no snapshot yet: ",
            "--> a.yaml:10:5",
            "  | The capital of France is Paris.\n  | It lies on the Seine.",
            "= INSTA_UPDATE=no: nothing was written",
            "= a review item: the correctness probe and the performance gates do not depend on it",
        ],
    );
    assert!(!snap.exists() && !pending.exists());
    // The record says why as data: no snapshot yet, and which file.
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join(".servegate/latest/report.json")).unwrap(),
    )
    .unwrap();
    let cause = record["trials"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "snap::snapshot::capital"))
        .map(|t| t["cause"].clone())
        .unwrap_or_default();
    assert_eq!(cause["type"], "snapshot", "{cause}");
    assert_eq!(cause["state"], "new", "{cause}");
    assert!(
        cause["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("snapshots/snap/sim-snap/capital.snap")),
        "{cause}"
    );
    // Run from elsewhere: the same project, a pending answer beside the
    // snapshot, pointing at the suite and the probe's line.
    let a = suites.join("a.yaml");
    let (_, out) = servegate_in(
        std::path::Path::new("/"),
        &["run", a.to_str().unwrap()],
        &[],
    );
    assert_has(
        &failure_of(&out, "snap::snapshot::capital"),
        &["capital.snap.new for review: `servegate review` accepts or rejects it"],
    );
    assert_has(
        &std::fs::read_to_string(&pending).unwrap(),
        &[
            "source: suites/a.yaml",
            "assertion_line: 10",
            "description: snap::snapshot::capital",
            "model: sim-snap",
        ],
    );
    // Not a Cargo project: the run's output is in its `.servegate/`, which
    // git is told to ignore, and no `target/` is made.
    assert!(
        root.join(".servegate/latest/report.json").exists(),
        "the run's output is in its project"
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".servegate/.gitignore")).unwrap(),
        "# servegate's runs and history: not for committing\n*\n"
    );
    assert!(!root.join("target").exists());
    // In CI nothing is written into the checkout, and INSTA_FORCE_PASS passes nothing.
    let _ = std::fs::remove_file(&pending);
    let out_dir = root.join("ci-out");
    let (_, out) = servegate_in(
        &suites,
        &["run", "a.yaml", "--out-dir", out_dir.to_str().unwrap()],
        &[("CI", "true"), ("INSTA_FORCE_PASS", "1")],
    );
    assert_has(
        &out,
        &["note: INSTA_FORCE_PASS is ignored: a changed answer never passes its snapshot trial"],
    );
    assert_eq!(verdict(&out, "snap::snapshot::capital"), "FAILED", "{out}");
    assert!(!pending.exists());
    assert!(std::fs::read_dir(out_dir.join("runs")).unwrap().any(|run| {
        run.unwrap()
            .path()
            .join("snapshots/snap/sim-snap/capital.snap.new")
            .exists()
    }));
    // Recorded, then changed: a diff, and the gate still passes.
    let (_, out) = servegate_in(&suites, &["run", "a.yaml"], &[("INSTA_UPDATE", "always")]);
    assert_has(&out, &["servegate: snapshot recorded: ", "capital.snap"]);
    let (code, out) = servegate_in(&suites, &["run", "b.yaml"], &[("INSTA_UPDATE", "no")]);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(verdict(&out, "snap::correctness::capital"), "ok", "{out}");
    assert_eq!(verdict(&out, "snap::performance::quick"), "ok", "{out}");
    assert_has(
        &failure_of(&out, "snap::snapshot::capital"),
        &[
            "error: snapshot changed: ",
            "--> b.yaml:11:5",
            "-The capital of France is Paris.\n+The capital of France is Lyon.",
        ],
    );
    // `snapshot: gate`: the changed answer gates the performance gate.
    let (_, out) = servegate_in(&suites, &["run", "gate.yaml"], &[("INSTA_UPDATE", "no")]);
    assert_eq!(verdict(&out, "snap::correctness::capital"), "ok", "{out}");
    assert_has(
        &failure_of(&out, "snap::performance::quick"),
        &[
            "gated: snapshot capital changed (`snapshot: gate`)",
            "see snap::snapshot::capital",
        ],
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// The shipped suite's first run against a server it has no snapshots of
/// (here: an empty snapshots directory, in CI): every probe and gate gives
/// its verdict, and only the snapshot trials fail, pending review, with the
/// whole answer in the message and nothing written into the checkout.
#[test]
fn a_first_run_gives_probe_and_gate_verdicts_with_snapshots_pending() {
    let dir = std::env::temp_dir().join(format!("servegate-first-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let snapshots = dir.join("snapshots");
    let out_dir = dir.join("out");
    let (code, out) = servegate_in(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")),
        &[
            "run",
            "suites/sglang.yaml",
            "--out-dir",
            out_dir.to_str().unwrap(),
        ],
        &[
            ("CI", "true"),
            ("SERVEGATE_SNAPSHOTS", snapshots.to_str().unwrap()),
        ],
    );
    assert_eq!(code, Some(1), "{out}");
    for probe in ["arithmetic", "is_prime", "server_contract"] {
        assert_eq!(
            verdict(&out, &format!("sglang::correctness::{probe}")),
            "ok",
            "{out}"
        );
        assert_eq!(
            verdict(&out, &format!("sglang::snapshot::{probe}")),
            "FAILED",
            "{out}"
        );
    }
    for gate in ["single_stream_decode", "concurrency_8"] {
        assert_eq!(
            verdict(&out, &format!("sglang::performance::{gate}")),
            "ok",
            "{out}"
        );
    }
    assert_has(
        &failure_of(&out, "sglang::snapshot::arithmetic"),
        &[
            "error: no snapshot yet: ",
            "received:\n  | finish_reason: stop\n  | --- content ---\n  | 4",
        ],
    );
    assert!(
        !snapshots.exists(),
        "nothing is written into the checkout in CI"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `servegate review` shows each pending answer with its probe's line,
/// prompt, model and diff, and takes a, r, s or q on stdin; answers made in
/// CI are accepted into the project with `--from`.
#[test]
fn servegate_review_accepts_and_rejects_through_stdin() {
    let root = snapshot_project("review");
    let suites = root.join("suites");
    let snap = root.join("snapshots/snap/sim-snap/capital.snap");
    let pending = root.join("snapshots/snap/sim-snap/capital.snap.new");
    servegate_in(&suites, &["run", "a.yaml"], &[]);
    let shown = review(&root, &[], "a\n");
    assert_has(
        &shown,
        &[
            "── pending 1 of 1: ",
            "probe:   suites/a.yaml:10  (snap::snapshot::capital)",
            "prompt:  What is the capital of France?",
            "model:   sim-snap   server version: servegate-sim",
            "new snapshot (none stored yet):",
            "+The capital of France is Paris.",
            "accept (a), reject (r), skip (s), quit (q)? ",
            "servegate: 1 accepted, 0 rejected, 0 skipped",
        ],
    );
    assert!(snap.exists() && !pending.exists());
    assert!(
        !std::fs::read_to_string(&snap)
            .unwrap()
            .contains("assertion_line")
    );
    let (_, out) = servegate_in(&suites, &["run", "a.yaml"], &[("INSTA_UPDATE", "no")]);
    assert_eq!(verdict(&out, "snap::snapshot::capital"), "ok", "{out}");
    // A changed answer, rejected: the stored answer stays.
    servegate_in(&suites, &["run", "b.yaml"], &[]);
    let shown = review(&root, &["suites/b.yaml"], "x\nr\n");
    assert_has(
        &shown,
        &[
            "`x`: answer a, r, s or q",
            "-The capital of France is Paris.",
            "+The capital of France is Lyon.",
            "0 accepted, 1 rejected",
        ],
    );
    assert!(!pending.exists());
    assert!(std::fs::read_to_string(&snap).unwrap().contains("Paris"));
    // Made in CI, downloaded, accepted into the project.
    let out_dir = root.join("ci-out");
    servegate_in(
        &suites,
        &["run", "b.yaml", "--out-dir", out_dir.to_str().unwrap()],
        &[("CI", "true")],
    );
    let run = crate::only_run(&out_dir);
    let shown = review(&root, &["--from", run.to_str().unwrap()], "s\n");
    assert_has(&shown, &["0 accepted, 0 rejected, 1 skipped"]);
    let shown = review(
        &root,
        &["--from", run.to_str().unwrap(), "--accept-all"],
        "",
    );
    assert_has(&shown, &["+The capital of France is Lyon.", "1 accepted"]);
    assert!(std::fs::read_to_string(&snap).unwrap().contains("Lyon"));
    assert_eq!(review(&root, &[], ""), "servegate: no pending snapshots\n");
    let _ = std::fs::remove_dir_all(&root);
}
