//! The GitHub workflows, checked for structure: every job has a runner and
//! steps, every step uses an action at a pinned ref or runs a command, the
//! files they run exist, expressions are closed, no `actions/*` action is of
//! a major that runs on Node 20, and each workflow keeps the promises the
//! docs make of it. actionlint checks the rest (types, inputs, labels, the
//! `run:` scripts through shellcheck): `scripts/actionlint.sh`, from a PyPI
//! wheel, run by `.ci/run` and by ci.yml; this file checks that they run it.
//! The docs themselves are checked for structure here too (the book whole,
//! every link resolving), without mdbook.

#[path = "common/markdown.rs"]
mod markdown;

use serde_json::Value;
use std::path::{Path, PathBuf};

/// Every file under `roots`, at any depth.
fn files_under(roots: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs: Vec<PathBuf> = roots.iter().map(PathBuf::from).collect();
    while let Some(path) = dirs.pop() {
        if path.is_dir() {
            dirs.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            files.push(path);
        }
    }
    files
}

fn workflow(name: &str) -> Value {
    let path = format!(".github/workflows/{name}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text.matches("${{").count(),
        text.matches("}}").count(),
        "{path}: an expression is not closed"
    );
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Structure shared by every workflow; returns every step of every job.
fn steps(w: &Value, name: &str) -> Vec<Value> {
    assert!(w.get("on").is_some(), "{name}: no `on`");
    let jobs = w["jobs"]
        .as_object()
        .unwrap_or_else(|| panic!("{name}: no jobs"));
    assert!(!jobs.is_empty());
    let mut all = Vec::new();
    for (job, spec) in jobs {
        assert!(spec.get("runs-on").is_some(), "{name}/{job}: no runs-on");
        assert!(
            spec.get("timeout-minutes").is_some(),
            "{name}/{job}: no timeout"
        );
        for step in spec["steps"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}/{job}: no steps"))
        {
            match (
                step.get("uses").and_then(Value::as_str),
                step.get("run").and_then(Value::as_str),
            ) {
                // This repository's own action, at the commit checked out.
                (Some(uses), None) if uses.starts_with("./") => assert!(
                    std::path::Path::new(uses).join("action.yml").exists(),
                    "{name}/{job}: `{uses}` has no action.yml"
                ),
                // A tag or a toolchain channel (`dtolnay/rust-toolchain@stable`), never a moving branch.
                (Some(uses), None) => assert!(
                    uses.split_once('@')
                        .is_some_and(|(_, r)| !r.is_empty() && r != "main" && r != "master"),
                    "{name}/{job}: `{uses}` is not pinned"
                ),
                (None, Some(run)) => {
                    for word in run.split_whitespace() {
                        if word.starts_with(".ci/") || word.starts_with("scripts/") {
                            assert!(
                                std::path::Path::new(word).exists(),
                                "{name}/{job}: runs `{word}`, which is not in the repository"
                            );
                        }
                    }
                }
                _ => panic!("{name}/{job}: a step needs exactly one of `uses` and `run`: {step}"),
            }
            all.push(step.clone());
        }
    }
    all
}

fn uploads_always(steps: &[Value], what: &str) -> bool {
    steps.iter().any(|s| {
        s["uses"]
            .as_str()
            .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
            && s["if"].as_str() == Some("always()")
            && s["with"]["path"].as_str().is_some_and(|p| p.contains(what))
    })
}

#[test]
fn ci_runs_the_tests_and_keeps_the_report() {
    let w = workflow("ci.yml");
    let steps = steps(&w, "ci.yml");
    assert!(steps.iter().any(|s| s["run"] == ".ci/run"));
    assert!(
        steps
            .iter()
            .any(|s| s["run"].as_str().is_some_and(|r| r.contains("clippy")))
    );
    assert!(uploads_always(&steps, "target/servegate/runs/"));
    assert!(
        steps.iter().any(|s| s["run"]
            .as_str()
            .is_some_and(|r| r.contains("cargo nextest run"))),
        "the whole project runs under nextest too"
    );
}

/// `.ci/run`'s closing lines count each test binary's own result (not a
/// `test result:` line quoted inside a failure message), name the failing
/// trials and the binaries that printed no result, and say which binaries
/// took longest.
#[test]
fn the_ci_summary_counts_only_libtests_own_lines() {
    let ci = std::fs::read_to_string(".ci/run").unwrap();
    assert!(ci.contains("cargo test --no-fail-fast"), "{ci}");
    assert!(ci.contains("scripts/test-summary.py"), "{ci}");
    let out = std::process::Command::new("python3")
        .args([
            "scripts/test-summary.py",
            "tests/fixtures/ci/cargo-test.log",
        ])
        .output()
        .expect("python3 runs");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ci: longest: tests/b.rs 70 s, tests/a.rs 12 s (of 83 s in tests)\n\
         ci: 2 passed, 1 failed, 1 ignored\n\
         ci: FAILED tests/a.rs: y\n\
         ci: tests/c.rs printed no result (it crashed or did not build)\n"
    );
}

fn runs_containing<'a>(steps: &'a [Value], what: &str) -> Option<&'a Value> {
    steps
        .iter()
        .find(|s| s["run"].as_str().is_some_and(|r| r.contains(what)))
}

/// The CI workflow also builds without the default features, runs the
/// wheel as `pip install servegate` gives it, and builds the static musl
/// binary as the release does and runs it (static, the shipped suite, the
/// manual page and completions it ships).
#[test]
fn ci_builds_without_default_features_and_smokes_the_wheel() {
    let w = workflow("ci.yml");
    let steps = steps(&w, "ci.yml");
    assert!(runs_containing(&steps, "cargo test -p servegate --no-default-features").is_some());
    assert!(runs_containing(&steps, "scripts/wheel-smoke.sh").is_some());
    let static_steps = w["jobs"]["static"]["steps"].as_array().unwrap();
    assert!(
        static_steps
            .iter()
            .any(|s| s["with"]["target"] == "x86_64-unknown-linux-musl"
                && s["with"]["manylinux"] == "musllinux_1_2")
    );
    let run = runs_containing(static_steps, "statically linked").unwrap()["run"]
        .as_str()
        .unwrap();
    for what in [
        "run suites/sglang.yaml",
        "man | cmp",
        "completions bash | cmp",
    ] {
        assert!(run.contains(what), "{run}");
    }
    let release = std::fs::read_to_string(".github/workflows/release.yml").unwrap();
    let pinned = release
        .lines()
        .find_map(|l| l.trim().strip_prefix("MATURIN_VERSION: "))
        .unwrap();
    assert!(
        std::fs::read_to_string(".github/workflows/ci.yml")
            .unwrap()
            .contains(&format!("maturin-version: {pinned}")),
        "ci.yml's static build uses release.yml's maturin"
    );
    // Not in .ci/run, which stays a debug build.
    let ci = std::fs::read_to_string(".ci/run").unwrap();
    assert!(!ci.contains("wheel-smoke"), "{ci}");
}

/// A fleet: one job per node type and suite, through the repository's
/// own action (no Rust on the GPU runners), then one report over them all.
#[test]
fn the_gpu_workflow_runs_a_fleet_and_merges_its_records() {
    let w = workflow("gpu-suite.yml");
    let steps = steps(&w, "gpu-suite.yml");
    let inputs = &w["on"]["workflow_dispatch"]["inputs"];
    for input in ["suite", "filter", "model_path", "nodes"] {
        assert!(inputs.get(input).is_some(), "no `{input}` input");
    }
    assert_eq!(w["concurrency"]["cancel-in-progress"], false);
    assert!(w["concurrency"]["group"].is_string());
    let job = &w["jobs"]["suite"];
    assert_eq!(job["runs-on"], "${{ matrix.node.labels }}");
    let matrix = &job["strategy"]["matrix"];
    assert!(
        matrix["node"].as_str().unwrap().contains("self-hosted")
            && matrix["node"].as_str().unwrap().contains("gpu"),
        "{matrix}"
    );
    assert!(matrix["suite"].is_string(), "{matrix}");
    assert_eq!(job["strategy"]["fail-fast"], false);
    let run = job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["uses"] == "./")
        .expect("the suite job runs the action");
    assert_eq!(run["with"]["suites"], "${{ matrix.suite }}");
    assert!(
        run["with"]["artifact-name"]
            .as_str()
            .unwrap()
            .starts_with("fleet-${{ matrix.node.name }}-"),
        "{run}"
    );
    // No Rust toolchain where the GPUs are.
    assert!(
        !job.to_string().contains("rust-toolchain") && !job.to_string().contains("cargo "),
        "{job}"
    );
    the_history_outlives_the_job(job, run);
    let report = &w["jobs"]["report"];
    assert_eq!(report["if"], "always()");
    assert!(
        report["needs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "suite")
    );
    let merge = runs_containing(&steps, "servegate report merge").unwrap();
    assert!(
        merge["run"]
            .as_str()
            .unwrap()
            .contains("$GITHUB_STEP_SUMMARY")
    );
    assert!(uploads_always(&steps, "merged/"));
    // It never writes baselines: that is a reviewed commit.
    assert!(
        runs_containing(&steps, "baseline save").is_none()
            && runs_containing(&steps, "baseline accept").is_none()
    );
}

/// Every run goes into a history that outlives the job: the team's
/// PostgreSQL from a secret (its password from another), else a SQLite
/// file restored from the Actions cache before the run and saved after it
/// whatever the outcome, under one key per node type and suite.
fn the_history_outlives_the_job(job: &Value, run: &Value) {
    assert_eq!(
        job["env"]["HISTORY_URL"],
        "${{ secrets.SERVEGATE_HISTORY_URL }}"
    );
    let history = run["env"]["SERVEGATE_HISTORY"].as_str().unwrap();
    assert!(
        history.starts_with("${{ env.HISTORY_URL || ")
            && history.contains("servegate-history/history.sqlite"),
        "{history}"
    );
    assert_eq!(
        run["env"]["PGPASSWORD"],
        "${{ secrets.SERVEGATE_HISTORY_PASSWORD }}"
    );
    let steps = job["steps"].as_array().unwrap();
    let at = |prefix: &str| {
        steps
            .iter()
            .position(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(prefix)))
            .unwrap_or_else(|| panic!("no `{prefix}` step"))
    };
    let (restore, action, save) = (
        at("actions/cache/restore@"),
        steps.iter().position(|s| s["uses"] == "./").unwrap(),
        at("actions/cache/save@"),
    );
    assert!(restore < action && action < save, "restore, run, save");
    let (restore, save) = (&steps[restore], &steps[save]);
    assert_eq!(restore["with"]["key"], save["with"]["key"]);
    assert_eq!(restore["with"]["path"], save["with"]["path"]);
    assert!(history.contains("format('{0}/servegate-history/history.sqlite', runner.temp)"));
    assert_eq!(
        restore["with"]["path"],
        "${{ runner.temp }}/servegate-history"
    );
    let key = save["with"]["key"].as_str().unwrap();
    assert!(
        key.contains("${{ matrix.node.name }}") && key.contains("${{ matrix.suite }}"),
        "{key}"
    );
    assert!(
        key.starts_with(restore["with"]["restore-keys"].as_str().unwrap()),
        "the newest earlier save is restored: {key}"
    );
    assert_eq!(restore["if"], "env.HISTORY_URL == ''");
    assert_eq!(save["if"], "always() && env.HISTORY_URL == ''");
}

/// The lowest major of each `actions/*` action that runs on Node 24
/// (`runs.using` in its action.yml at that tag). GitHub deprecated the
/// Node 20 runtime on its runners (forced to Node 24 from June 2026,
/// removed that September): an earlier major warns on every run, then
/// breaks. upload-artifact v5 and download-artifact v5 and v6 still ran
/// on Node 20. An `actions/*` action not listed fails the check below
/// until its own lowest Node 24 major is added here.
const NODE24_MAJORS: &[(&str, u32)] = &[
    ("actions/checkout", 5),
    ("actions/upload-artifact", 6),
    ("actions/download-artifact", 7),
    ("actions/cache", 5),
    ("actions/setup-python", 6),
];

/// No step of a workflow or of the action uses an `actions/*` action of a
/// major that runs on Node 20 (a `vN` tag at least the table's).
#[test]
fn no_actions_step_runs_on_node_20() {
    let mut uses: Vec<(String, String)> = Vec::new();
    for name in ["ci.yml", "gpu-suite.yml", "release.yml"] {
        for step in steps(&workflow(name), name) {
            if let Some(u) = step["uses"].as_str() {
                uses.push((name.to_owned(), u.to_owned()));
            }
        }
    }
    for step in action()["runs"]["steps"].as_array().unwrap() {
        if let Some(u) = step["uses"].as_str() {
            uses.push(("action.yml".to_owned(), u.to_owned()));
        }
    }
    let mut wrong = Vec::new();
    for (file, u) in &uses {
        let Some((path, tag)) = u.split_once('@') else {
            continue;
        };
        if !path.starts_with("actions/") {
            continue;
        }
        // `actions/cache/restore` is `actions/cache`'s.
        let action = path.split('/').take(2).collect::<Vec<_>>().join("/");
        let Some(&(_, min)) = NODE24_MAJORS.iter().find(|(a, _)| *a == action) else {
            wrong.push(format!("{file}: `{u}`: {action} is not in NODE24_MAJORS"));
            continue;
        };
        let major = tag
            .strip_prefix('v')
            .and_then(|t| t.split('.').next())
            .and_then(|m| m.parse::<u32>().ok());
        match major {
            Some(m) if m >= min => {}
            Some(m) => wrong.push(format!(
                "{file}: `{u}`: v{m} runs on Node 20; v{min} or later runs on Node 24"
            )),
            None => wrong.push(format!("{file}: `{u}`: not a `vN` tag")),
        }
    }
    assert!(
        uses.iter().any(|(_, u)| u.starts_with("actions/checkout@")),
        "{uses:?}"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// actionlint runs in CI both ways: a step of ci.yml and a line of
/// `.ci/run` (before the tests, not commented out) run
/// `scripts/actionlint.sh`, which lints every workflow and fails on a
/// finding.
#[test]
fn ci_and_the_ci_script_run_actionlint() {
    let w = workflow("ci.yml");
    let steps = steps(&w, "ci.yml");
    assert!(
        runs_containing(&steps, "scripts/actionlint.sh").is_some(),
        "ci.yml does not run scripts/actionlint.sh"
    );
    let ci = std::fs::read_to_string(".ci/run").unwrap();
    let line = |needle: &str| {
        ci.lines()
            .position(|l| l.trim_start().starts_with(needle))
            .unwrap_or_else(|| panic!(".ci/run has no line `{needle}`:\n{ci}"))
    };
    assert!(
        line("bash scripts/actionlint.sh") < line("cargo test --no-fail-fast"),
        "{ci}"
    );
    // ci.yml runs it as a command: it must be executable.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata("scripts/actionlint.sh")
            .unwrap()
            .permissions()
            .mode();
        assert_ne!(mode & 0o111, 0, "scripts/actionlint.sh is not executable");
    }
    let script = std::fs::read_to_string("scripts/actionlint.sh").unwrap();
    assert!(script.starts_with("#!/usr/bin/env bash\n"), "{script}");
    assert!(script.contains("set -euo pipefail"), "{script}");
    assert!(script.contains(".github/workflows/*.yml"), "{script}");
    assert!(script.contains("--require-hashes"), "pinned by hash");
}

/// The release: every platform's wheel and binary built before anything is
/// published, each binary with its checksum, crates.io only from a tag and
/// a dry run otherwise.
#[test]
fn the_release_builds_every_platform_then_publishes() {
    let w = workflow("release.yml");
    let steps = steps(&w, "release.yml");
    assert_eq!(w["on"]["push"]["tags"][0], "v*");
    assert!(w["on"]["pull_request"].is_object());
    let jobs = w["jobs"].as_object().unwrap();
    let targets: Vec<String> = ["linux", "musl", "macos"]
        .iter()
        .flat_map(|j| {
            jobs[*j]["strategy"]["matrix"]["target"]
                .as_array()
                .unwrap()
                .clone()
        })
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    for t in [
        "x86_64-unknown-linux-gnu",
        "aarch64-unknown-linux-gnu",
        "x86_64-unknown-linux-musl",
        "aarch64-unknown-linux-musl",
        "x86_64-apple-darwin",
        "aarch64-apple-darwin",
    ] {
        assert!(targets.iter().any(|x| x == t), "no {t} in {targets:?}");
    }
    for j in ["linux", "musl", "macos"] {
        let text = jobs[j].to_string();
        assert!(text.contains("PyO3/maturin-action@"), "{j}");
    }
    for j in ["musl", "macos"] {
        assert!(
            jobs[j].to_string().contains(".sha256"),
            "{j} attaches no checksum"
        );
    }
    let builds = ["check", "sdist", "linux", "musl", "macos"];
    for publish in ["github-release", "pypi", "crates-io"] {
        let job = &jobs[publish];
        assert_eq!(
            job["if"], "startsWith(github.ref, 'refs/tags/v')",
            "{publish} publishes from a tag only"
        );
        let needs: Vec<&str> = job["needs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        assert_eq!(needs, builds, "{publish} waits for every build");
    }
    let release = runs_containing(&steps, "gh release create").unwrap();
    assert!(release["run"].as_str().unwrap().contains("SHA256SUMS"));
    assert!(runs_containing(&steps, "cargo publish --dry-run").is_some());
    assert!(runs_containing(&steps, "cargo publish --locked").is_some());
}

fn action() -> Value {
    let text = std::fs::read_to_string("action.yml").unwrap();
    assert_eq!(text.matches("${{").count(), text.matches("}}").count());
    serde_saphyr::from_str(&text).unwrap()
}

/// The action in one step: its inputs, no Rust toolchain, the script that
/// does the work, the run records uploaded whatever the outcome.
#[test]
fn the_action_installs_runs_and_uploads_always() {
    let a = action();
    for input in ["suites", "target", "filter", "version"] {
        assert!(a["inputs"].get(input).is_some(), "no `{input}` input");
    }
    assert_eq!(a["runs"]["using"], "composite");
    let steps = a["runs"]["steps"].as_array().unwrap();
    let text = a.to_string();
    assert!(!text.contains("rust-toolchain") && !text.contains("cargo "));
    let run = &steps[0];
    assert_eq!(
        run["run"],
        "bash \"$GITHUB_ACTION_PATH/scripts/action-run.sh\""
    );
    assert!(std::path::Path::new("scripts/action-run.sh").exists());
    for input in ["suites", "target", "filter", "version"] {
        assert_eq!(
            run["env"][format!("INPUT_{}", input.to_uppercase())],
            format!("${{{{ inputs.{input} }}}}")
        );
    }
    let upload = &steps[1];
    assert!(
        upload["uses"]
            .as_str()
            .unwrap()
            .starts_with("actions/upload-artifact@")
    );
    assert_eq!(upload["if"], "always()");
    assert_eq!(upload["with"]["path"], "${{ steps.run.outputs.run-dir }}");
}

/// Runs the action's script as the action does, with servegate already
/// built (`version`: an executable) and GitHub's files faked; its status,
/// the step summary and the `run-dir` output.
fn action_run(suites: &str, tag: &str) -> (Option<i32>, String, std::path::PathBuf) {
    action_run_with(suites, tag, &[])
}

/// [`action_run`] with these inputs (`INPUT_*`) set too.
fn action_run_with(
    suites: &str,
    tag: &str,
    inputs: &[(&str, &str)],
) -> (Option<i32>, String, std::path::PathBuf) {
    let temp = std::env::temp_dir().join(format!("servegate-action-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&temp);
    std::fs::create_dir_all(&temp).unwrap();
    let (summary, output) = (temp.join("summary.md"), temp.join("output"));
    std::fs::write(&summary, "earlier steps\n").unwrap();
    let o = std::process::Command::new("bash")
        .arg("scripts/action-run.sh")
        .env("INPUT_SUITES", suites)
        .env("INPUT_VERSION", env!("CARGO_BIN_EXE_servegate"))
        .env("INPUT_TARGET", "")
        .env("INPUT_FILTER", "")
        .env("RUNNER_TEMP", &temp)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("GITHUB_OUTPUT", &output)
        .env_remove("SERVEGATE_TARGET")
        .env_remove("SERVEGATE_OUT")
        .envs(inputs.iter().copied())
        .output()
        .unwrap();
    let md = std::fs::read_to_string(&summary).unwrap();
    let out = std::fs::read_to_string(&output).unwrap();
    let dir = out
        .lines()
        .find_map(|l| l.strip_prefix("run-dir="))
        .unwrap_or_else(|| panic!("no run-dir in {out}"))
        .into();
    assert!(
        md.starts_with("earlier steps\n"),
        "{md}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), md, dir)
}

/// The action's script passes servegate's status through (green 0, red 1,
/// an invalid suite 2), the summary holds the report (or says why there is
/// none), and the run directory it names holds the record.
#[test]
fn the_action_script_passes_the_exit_code_and_writes_the_summary() {
    let (code, md, dir) = action_run("tests/suites/fleet/fast-node.yaml", "green");
    assert_eq!(code, Some(0), "{md}");
    assert!(md.contains("## ✅ servegate: 2 passed, 0 failed"), "{md}");
    assert!(!md.contains("exited with"), "{md}");
    assert!(dir.join("latest/report.json").exists(), "{}", dir.display());
    let page = std::fs::read_to_string(dir.join("history.html")).unwrap();
    assert!(page.contains("<h1>servegate history</h1>"), "{page}");

    let (code, md, dir) = action_run("tests/suites/fleet/slow-node.yaml", "red");
    assert_eq!(code, Some(1), "{md}");
    assert!(md.contains("## ❌ servegate: 1 passed, 1 failed"), "{md}");
    assert!(dir.join("latest/report.json").exists());

    assert!(
        md.contains("**servegate exited with 1: a trial failed**"),
        "{md}"
    );

    let (code, md, _) = action_run("tests/suites/no-such-suite.yaml", "invalid");
    assert_eq!(code, Some(2), "{md}");
    assert!(
        md.contains("**servegate exited with 2: a suite file is invalid (its annotation says where), or an argument is**"),
        "{md}"
    );
}

/// The action's inputs reach servegate (exact, skip, client threads and
/// limits; a bad one is refused before anything runs), a filter matching
/// nothing (4) is named as such, the summary names the record where it was
/// written, and a servegate that could not be installed exits with the
/// action's own code (9, one servegate never returns), said in the summary
/// and as an error annotation.
#[test]
fn the_action_passes_its_inputs_and_names_each_exit() {
    let (code, md, dir) = action_run_with(
        "tests/suites/fleet/fast-node.yaml",
        "inputs",
        &[
            ("INPUT_FILTER", "fleet::correctness::arithmetic"),
            ("INPUT_EXACT", "true"),
            ("INPUT_CLIENT_THREADS", "1"),
            ("INPUT_CLIENT_LIMITED", "warn"),
        ],
    );
    assert_eq!(code, Some(0), "{md}");
    assert!(md.contains("## ✅ servegate: 1 passed, 0 failed"), "{md}");
    let record = std::fs::read_to_string(dir.join("latest/report.json")).unwrap();
    let run: serde_json::Value = serde_json::from_str(&record).unwrap();
    let written = dir
        .join("runs")
        .join(run["run_id"].as_str().unwrap())
        .join("report.json");
    assert!(
        md.contains(&format!("Run record: `{}`", written.display())),
        "{md}"
    );

    let (code, md, _) = action_run_with(
        "tests/suites/fleet/fast-node.yaml",
        "skip",
        &[
            ("INPUT_SKIP", "fleet::performance::decode\nnothing::else"),
            ("INPUT_EXACT", "true"),
        ],
    );
    assert_eq!(code, Some(0), "{md}");
    assert!(md.contains("## ✅ servegate: 1 passed, 0 failed"), "{md}");

    let (code, md, _) = action_run_with(
        "tests/suites/fleet/fast-node.yaml",
        "nomatch",
        &[("INPUT_FILTER", "no_such_trial")],
    );
    assert_eq!(code, Some(4), "{md}");
    assert!(
        md.contains("**servegate exited with 4: the filter matched no trial**"),
        "{md}"
    );

    // Wrong inputs exit 2 before anything is installed (`version` names
    // no wheel at all here), each said.
    for (input, value, said) in [
        (
            "INPUT_CLIENT_LIMITED",
            "maybe",
            "client-limited must be fail or warn, not 'maybe'",
        ),
        (
            "INPUT_EXACT",
            "yes",
            "exact must be true or false, not 'yes'",
        ),
        (
            "INPUT_CLIENT_THREADS",
            "abc",
            "client-threads must be a number from 1 to 256, not 'abc'",
        ),
        (
            "INPUT_CLIENT_THREADS",
            "257",
            "client-threads must be a number from 1 to 256, not '257'",
        ),
        (
            "INPUT_CLIENT_THREADS",
            "0",
            "client-threads must be a number from 1 to 256, not '0'",
        ),
    ] {
        let (code, md, _) = action_run_with(
            "tests/suites/fleet/fast-node.yaml",
            "bad-input",
            &[(input, value), ("INPUT_VERSION", "./no/such/wheels")],
        );
        assert_eq!(code, Some(2), "{md}");
        assert!(
            md.contains(&format!(
                "**servegate action: an input is invalid** (exit 2): {said}; no suite ran."
            )),
            "{md}"
        );
    }

    let (code, md, _) = action_run_with(
        "tests/suites/fleet/fast-node.yaml",
        "uninstallable",
        &[("INPUT_VERSION", "./no/such/wheels")],
    );
    assert_eq!(code, Some(9), "{md}");
    assert!(
        md.contains("**servegate could not be installed** (exit 9): no wheel directory ./no/such/wheels; no suite ran."),
        "{md}"
    );
    assert!(
        !servegate::exit::Exit::ALL.iter().any(|e| e.code() == 9),
        "the action's install code is one servegate never returns"
    );
}

/// The run's upper floors (harness, record, report) say their errors as
/// types, not strings: no `Result<_, String>` there, returned or kept,
/// but the one listed with its reason.
#[test]
fn the_upper_floors_return_no_string_errors() {
    let string_error =
        regex::Regex::new(r"(?:fn\s+([a-z_0-9]+)[^{;]*?->[^{;]*?)?Result<[^;{]*?,\s*String>")
            .unwrap();
    // The best of several variants, or why none stands out: a comparison's
    // finding, written into the record and the summary as words, not an
    // error anything acts on.
    let reasoned = ["src/harness/compare.rs: pick_best"];
    let mut found = Vec::new();
    for path in files_under(&["src/harness", "src/record", "src/report"]) {
        if path.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        for c in string_error.captures_iter(code) {
            let at = format!(
                "{}: {}",
                path.display(),
                c.get(1).map_or(&c[0], |f| f.as_str())
            );
            if !reasoned.contains(&at.as_str()) {
                found.push(at);
            }
        }
    }
    assert!(found.is_empty(), "string errors: {found:?}");
}

/// No source file is over 600 lines, its unit tests included: past that a
/// file holds more than one thing, and is split along its seams (a
/// module's unit tests into its `tests.rs`, a part with a name of its own
/// into a file of that name).
#[test]
fn no_source_file_is_over_600_lines() {
    let mut long = Vec::new();
    for path in files_under(&["src"]) {
        if path.extension().is_some_and(|e| e == "rs") {
            let lines = std::fs::read_to_string(&path).unwrap().lines().count();
            if lines > 600 {
                long.push(format!("{}: {lines} lines", path.display()));
            }
        }
    }
    long.sort();
    assert!(long.is_empty(), "over 600 lines:\n{}", long.join("\n"));
}

/// The book's Layout page lists the modules lowest first; no module imports
/// one listed after it (so there is no cycle between modules either), and
/// every module is listed.
#[test]
fn modules_import_only_those_the_layout_page_lists_before_them() {
    let page = std::fs::read_to_string("docs/src/layout.md").unwrap();
    let layout = page
        .strip_prefix("# Layout\n")
        .and_then(|s| s.split("```\n").nth(1))
        .expect("docs/src/layout.md is the Layout page, with its block");
    let order: Vec<String> = layout
        .lines()
        .filter_map(|l| l.strip_prefix("src/"))
        .map(|l| {
            let name = l.split_whitespace().next().unwrap();
            name.trim_end_matches('/')
                .trim_end_matches(".rs")
                .to_owned()
        })
        .collect();
    let rank = |m: &str| order.iter().position(|o| o == m);
    let import = regex::Regex::new(r"(?:\$crate|crate)::(?:\{\s*)?([a-z_]+)").unwrap();
    let grouped = regex::Regex::new(r"crate::\{([^}]*)\}").unwrap();
    let mut wrong = Vec::new();
    for path in files_under(&["src"]) {
        let rel = path
            .strip_prefix("src")
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let module = rel.split('/').next().unwrap().trim_end_matches(".rs");
        // A module's own unit tests (its `tests.rs`) may reach anywhere.
        if ["lib", "main"].contains(&module) || path.ends_with("tests.rs") {
            continue;
        }
        let Some(own) = rank(module) else {
            wrong.push(format!("src/{module} is not in docs/src/layout.md"));
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        // A module's own unit tests may reach anywhere.
        let code: String = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut used: Vec<String> = import
            .captures_iter(&code)
            .map(|c| c[1].to_owned())
            .collect();
        for g in grouped.captures_iter(&code) {
            used.extend(
                g[1].split(',')
                    .map(|p| p.trim().split("::").next().unwrap().trim().to_owned()),
            );
        }
        for m in used {
            if let Some(theirs) = rank(&m)
                && theirs > own
            {
                wrong.push(format!("{rel} imports `{m}`, listed after `{module}`"));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The book is whole: SUMMARY.md names every page under docs/src/ and only
/// pages that exist; every relative link and `#anchor` of README.md and of
/// the pages resolves; every `{{#include}}` names a file that exists, and
/// one of a golden file (an insta snapshot) starts right after its header.
#[test]
fn the_book_is_whole_and_every_link_resolves() {
    let book = std::fs::read_to_string("docs/book.toml").unwrap();
    assert!(book.contains("src = \"src\""), "{book}");
    let mut wrong = Vec::new();
    let summary = std::fs::read_to_string("docs/src/SUMMARY.md").unwrap();
    let listed: Vec<PathBuf> = markdown::parse(&summary)
        .1
        .iter()
        .flat_map(|p| markdown::links(&p.text).into_iter().map(str::to_owned))
        .map(|l| Path::new("docs/src").join(l))
        .collect();
    for page in markdown::pages() {
        if page.starts_with("docs/src")
            && page != Path::new("docs/src/SUMMARY.md")
            && !listed.contains(&page)
        {
            wrong.push(format!("{}: not in docs/src/SUMMARY.md", page.display()));
        }
        let text = std::fs::read_to_string(&page).unwrap();
        let (blocks, prose) = markdown::parse(&text);
        for p in &prose {
            for target in markdown::links(&p.text) {
                if let Err(e) = resolve(&page, target) {
                    wrong.push(format!("{}:{}: {target}: {e}", page.display(), p.line));
                }
            }
        }
        for b in &blocks {
            for (i, line) in b.lines.iter().enumerate() {
                if let Some(include) = line.trim().strip_prefix("{{#include ") {
                    let include = include.trim_end_matches("}}").trim();
                    if let Err(e) = included(&page, include) {
                        let at = b.line + 1 + i;
                        wrong.push(format!("{}:{at}: {include}: {e}", page.display()));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Whether a link of `page` leads somewhere: a web address, or a file
/// relative to the page, and its `#anchor` a heading there.
fn resolve(page: &Path, target: &str) -> Result<(), String> {
    if target.starts_with("https://") || target.starts_with("http://") {
        return Ok(());
    }
    if target.contains("://") || target.starts_with("mailto:") {
        return Err("a scheme the checks do not follow".into());
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().unwrap().join(path)
    };
    if !file.exists() {
        return Err(format!("{} does not exist", file.display()));
    }
    let book = Path::new("docs/src").canonicalize().unwrap();
    if page.starts_with("docs/src") && !file.canonicalize().unwrap().starts_with(book) {
        return Err("the built book holds only docs/src/: name a file outside it as code".into());
    }
    if !anchor.is_empty() && !markdown::anchors(&file).contains(anchor) {
        return Err(format!("{} has no heading #{anchor}", file.display()));
    }
    Ok(())
}

/// Whether an mdBook include (`path[:start[:end]]`) names lines that exist.
fn included(page: &Path, include: &str) -> Result<(), String> {
    let mut parts = include.split(':');
    let file = page.parent().unwrap().join(parts.next().unwrap());
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let lines: Vec<&str> = text.lines().collect();
    let number = |p: Option<&str>| -> Result<Option<usize>, String> {
        match p {
            None | Some("") => Ok(None),
            Some(n) => n
                .parse()
                .map(Some)
                .map_err(|_| format!("`{n}` is not a line number (anchors are not used here)")),
        }
    };
    let start = number(parts.next())?.unwrap_or(1);
    let end = number(parts.next())?.unwrap_or(lines.len());
    if start < 1 || start > end || end > lines.len() {
        return Err(format!("lines {start}..{end} of {} lines", lines.len()));
    }
    // An insta snapshot starts with a header between two `---` lines: the
    // include starts right after it, so that it shows the output and all of it.
    if file.extension().is_some_and(|e| e == "snap") {
        let header_end = lines
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, l)| **l == "---")
            .map(|(i, _)| i + 2)
            .ok_or("a snapshot without its header")?;
        if start != header_end {
            return Err(format!(
                "the snapshot's output starts at line {header_end}, the include at {start}"
            ));
        }
    }
    Ok(())
}

/// CI builds the book with a pinned mdbook and checks its links.
#[test]
fn ci_builds_the_book_and_checks_its_links() {
    let w = workflow("ci.yml");
    steps(&w, "ci.yml");
    let docs = w["jobs"]["docs"]["steps"]
        .as_array()
        .expect("ci.yml has a docs job");
    let runs = |needle: &str| {
        docs.iter()
            .any(|s| s["run"].as_str().is_some_and(|r| r.contains(needle)))
    };
    assert!(
        docs.iter().any(|s| s["with"]["tool"]
            .as_str()
            .is_some_and(|t| t.contains("mdbook@"))),
        "mdbook is installed at a pinned version"
    );
    assert!(runs("mdbook build docs"), "the book is built");
    assert!(runs("lychee"), "the built book's links are checked");
}

/// No code takes a trial's name apart for its meaning: its stage, item,
/// part and sweep level are typed (`record::TrialId`, `suite::SweepLevel`)
/// and the name is rendered from them. A `::` searched for in a string is
/// the sign of a name being parsed; the one place allowed below breaks a
/// GitHub workflow command in server text, which is no trial name.
#[test]
fn no_code_parses_a_trial_name() {
    let found = searched_for(
        &searched("::"),
        &[(
            "src/text.rs",
            "if let Some(rest) = body.strip_prefix(\"::\") {",
        )],
    );
    assert!(found.is_empty(), "names parsed:\n{}", found.join("\n"));
}

/// A failure's gist and the place it points at are marked as it is
/// written (`check::message::Message`) and kept in the record
/// (`points_at`); no renderer looks for an `error:` or a `-->` in the text
/// to get them back. The one place allowed reads serde-saphyr's own
/// message, which is not servegate's.
#[test]
fn no_code_parses_a_failure_message() {
    let labels = "-->|error:|found:|note:|help:|received:|content:|reasoning:|tool_calls:|gated:";
    let mut found = searched_for(
        &searched(labels),
        &[(
            "src/suite/node.rs",
            "let mut text = first.strip_prefix(\"error: \").unwrap_or(first);",
        )],
    );
    // A label alone in a literal (a list of prefixes to look for) is a
    // search too; message.rs writes them, snapshot.rs one heading.
    let alone = regex::Regex::new(&format!(r#""\s*({labels})\s*""#)).unwrap();
    found.extend(
        searched_for(
            &alone,
            &[
                (
                    "src/check/snapshot.rs",
                    "let _ = writeln!(out, \"received:\");",
                ),
                (
                    "src/suite/node.rs",
                    "let mut text = first.strip_prefix(\"error: \").unwrap_or(first);",
                ),
            ],
        )
        .into_iter()
        .filter(|l| !l.starts_with("src/check/message.rs:")),
    );
    assert!(found.is_empty(), "messages parsed:\n{}", found.join("\n"));
}

/// A call that searches a string for a literal holding one of `needles`
/// (a regex alternation).
fn searched(needles: &str) -> regex::Regex {
    regex::Regex::new(&format!(
        r#"\.(strip_prefix|strip_suffix|split_once|rsplit_once|contains|starts_with|ends_with|find|rfind|split|rsplit|matches|replace|replacen|trim_start_matches|trim_end_matches|trim_matches)\("[^"]*({needles})"#
    ))
    .unwrap()
}

/// The lines of src (outside unit tests and comments) that `parsing`
/// matches, other than the `allowed` (file, line).
fn searched_for(parsing: &regex::Regex, allowed: &[(&str, &str)]) -> Vec<String> {
    let mut found = Vec::new();
    for path in files_under(&["src"]) {
        // A module of unit tests (`tests.rs`) is test code, as a
        // `mod tests` at a file's end is.
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let file = path.to_string_lossy().into_owned();
        for (i, line) in code.lines().enumerate() {
            let ok = allowed.iter().any(|(f, l)| *f == file && line.trim() == *l);
            if parsing.is_match(line) && !ok && !line.trim_start().starts_with("//") {
                found.push(format!("{file}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

/// No two files of one module import each other, even through others: a
/// module's files are layered as its modules are (`super::x` paths).
/// `harness/` had two circles (config ↔ session over the documents,
/// gates ↔ judge over the load's description), now gone. The circles
/// left elsewhere are listed: a ratchet — a new one fails, and so does
/// one mended but still listed.
#[test]
fn no_import_circles_between_the_files_of_a_module() {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};
    // Each file's node: its directory and its module name.
    fn node(path: &Path) -> (PathBuf, String) {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let dir = path.parent().unwrap();
        if stem == "mod" {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            (dir.parent().unwrap().to_path_buf(), name)
        } else {
            (dir.to_path_buf(), stem)
        }
    }
    let uses = regex::Regex::new(r"\bsuper::([a-z_][a-z0-9_]*)").unwrap();
    let mut files = vec![PathBuf::from("src")];
    let mut edges: BTreeMap<(PathBuf, String), BTreeSet<String>> = BTreeMap::new();
    let mut texts = Vec::new();
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            edges.entry(node(&path)).or_default();
            texts.push((node(&path), std::fs::read_to_string(&path).unwrap()));
        }
    }
    for ((dir, name), text) in texts {
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for m in uses.captures_iter(line) {
                let to = m[1].to_owned();
                if to != name && edges.contains_key(&(dir.clone(), to.clone())) {
                    edges
                        .get_mut(&(dir.clone(), name.clone()))
                        .unwrap()
                        .insert(to);
                }
            }
        }
    }
    // A circle: a path from a file back to itself, named by its members.
    let mut circles = BTreeSet::new();
    for (dir, name) in edges.keys() {
        let mut stack = vec![(name.clone(), vec![name.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for next in &edges[&(dir.clone(), at.clone())] {
                if next == name {
                    let mut members = path.clone();
                    members.sort();
                    circles.insert(format!("{}: {}", dir.display(), members.join(", ")));
                } else if seen.insert(next.clone()) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    let known: BTreeSet<String> = [
        "src/check: assertion, code",
        "src/client: dialect, stream",
        "src/client/stream: events, reader",
        "src/client/stream: events, plausibility, reader",
        "src/suite: load, model",
        "src/suite: decode, load, model",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    let new: Vec<&String> = circles.difference(&known).collect();
    let mended: Vec<&String> = known.difference(&circles).collect();
    assert!(
        new.is_empty() && mended.is_empty(),
        "new import circles: {new:?}\nmended (take them off the list): {mended:?}"
    );
}

/// The layout page names every source file (by its file name, beside its
/// directory's line), so a reader finds each one there.
#[test]
fn the_layout_page_names_every_source_file() {
    let page = std::fs::read_to_string("docs/src/layout.md").unwrap();
    let block = page
        .split("```")
        .nth(1)
        .expect("docs/src/layout.md is the Layout page, with its block");
    let mut missing = Vec::new();
    for path in files_under(&["src"]) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        // mod.rs, lib.rs, main.rs and a module's tests.rs are named by
        // their directory's line.
        if ["mod.rs", "lib.rs", "main.rs", "tests.rs"].contains(&name.as_str()) {
            continue;
        }
        let named = regex::Regex::new(&format!(r"(^|[\s(/,:]){}\b", regex::escape(&name)))
            .unwrap()
            .is_match(block);
        if !named {
            missing.push(path.display().to_string());
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "not named in docs/src/layout.md:\n{}",
        missing.join("\n")
    );
}
