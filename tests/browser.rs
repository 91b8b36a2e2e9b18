//! The HTML pages in a real browser: headless Chromium (Debian's
//! `chromium`, which `.ci/run` installs when missing) renders the report of
//! a real run, and the history's page over three runs, without console
//! errors, their plots are in the DOM, and a screenshot is taken. Where
//! Chromium is not installed the trials are reported ignored, after a
//! line that says why.

#[allow(dead_code)] // each test binary uses a subset of the shared helpers
mod common;
use common::run::command;
use std::path::{Path, PathBuf};
use std::process::Command;

use libtest_mimic::{Arguments, Failed, Trial};

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|n| dir.join(n)))
        .find(|p| p.is_file())
}

fn headless(browser: &Path, profile: &Path, args: &[&str]) -> Result<(String, String), Failed> {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .map_err(|e| format!("cannot start {}: {e}", browser.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(format!("chromium failed ({}):\n{stderr}", out.status).into());
    }
    Ok((stdout, stderr))
}

fn renders(browser: &Path) -> Result<(), Failed> {
    let dir = std::env::temp_dir().join(format!("servegate-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = command(&[], &[])
        .args(["run", "suites/sglang.yaml"])
        .env("CARGO_TARGET_DIR", &dir)
        .output()
        .map_err(|e| e.to_string())?;
    if !run.status.success() {
        return Err(format!("the run failed:\n{}", String::from_utf8_lossy(&run.stdout)).into());
    }
    let dom = shown(browser, &dir, &dir.join("servegate/latest/report.html"))?;
    for needle in [
        "servegate: <span class=\"pass\">8 passed, 0 failed</span>",
        "sglang::correctness::arithmetic",
        "<svg class=\"chart\"",
        "latency percentiles",
        "latency over time",
        "What is 2+2?",
    ] {
        if !dom.contains(needle) {
            return Err(format!("`{needle}` not in the rendered page").into());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The page at `page` in Chromium: rendered without console errors, a
/// screenshot of it taken; its DOM.
fn shown(browser: &Path, dir: &Path, page: &Path) -> Result<String, Failed> {
    let url = format!(
        "file://{}",
        page.canonicalize().map_err(|e| e.to_string())?.display()
    );
    let profile = dir.join("chromium-profile");
    let shot = dir.join("page.png");
    let (_, log) = headless(
        browser,
        &profile,
        &[
            "--window-size=1280,2400",
            &format!("--screenshot={}", shot.display()),
            &url,
        ],
    )?;
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    if !errors.is_empty() {
        return Err(format!("console errors:\n{}", errors.join("\n")).into());
    }
    let png = std::fs::read(&shot).map_err(|e| format!("no screenshot: {e}"))?;
    if !png.starts_with(b"\x89PNG") || png.len() < 10_000 {
        return Err(format!(
            "the screenshot is not a rendered page ({} bytes)",
            png.len()
        )
        .into());
    }
    let (dom, _) = headless(browser, &profile, &["--dump-dom", &url])?;
    Ok(dom)
}

/// Three runs of a gate recorded in a history: the third run's report
/// draws its gated figure's trend, and `servegate history report` draws
/// every key figure's series, a dot a run with its tooltip.
fn history_renders(browser: &Path) -> Result<(), Failed> {
    let dir =
        std::env::temp_dir().join(format!("servegate-browser-history-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let write =
        |name: &str, text: &str| std::fs::write(dir.join(name), text).map_err(|e| e.to_string());
    write("sim.yaml", "model: sim-trend\nttft: 5ms\nitl: 5ms\n")?;
    write(
        "trend.yaml",
        "suite: trend\nsim: { profile: sim.yaml }\nperformance:\n  - name: decode\n    load: { concurrency: 1, requests: 2, input_tokens: 8, output_tokens: 8, ignore_eos: true }\n    thresholds:\n      decode_tok_s.mean: \">= 1\"\n",
    )?;
    let out = dir.join("out");
    for night in 1..=3 {
        let run = command(&[], &[])
            .args(["run", dir.join("trend.yaml").to_str().ok_or("path")?])
            .env("SERVEGATE_OUT", &out)
            .output()
            .map_err(|e| e.to_string())?;
        if !run.status.success() {
            return Err(format!(
                "run {night} failed:\n{}",
                String::from_utf8_lossy(&run.stdout)
            )
            .into());
        }
    }
    let dom = shown(browser, &dir, &out.join("latest/report.html"))?;
    if !dom.contains("<svg class=\"trend\"") {
        return Err("no trend drawn in the run report".into());
    }
    // This run's dot: `this-run`, or `this-run moved` when a loaded
    // machine's third run fell more than 1% off the first two; a run whose
    // client the self-check found limited (a loaded machine, against the
    // embedded simulator) is drawn hollow, not compared, and says so.
    let limited = dom.contains("client-limited: not compared");
    let this_run = dom.contains("<circle class=\"this-run")
        || (limited && dom.contains("<circle class=\"run not-counted"));
    if !this_run {
        return Err("this run's dot is not in the run report".into());
    }
    // The earlier runs' median, over those whose client was not limited:
    // both on an idle machine; on a loaded one the self-check can rightly
    // find the embedded simulator's client limited in a run, which is then
    // drawn but not counted (and said so).
    let median = ["median of the 2 earlier", "median of the 1 earlier"]
        .iter()
        .any(|m| dom.contains(&format!("{m} passing run(s) drawn")));
    if !median && !dom.contains("client-limited") {
        return Err(
            "no median of the earlier runs in the run report, and no run said client-limited"
                .into(),
        );
    }
    let page = dir.join("history.html");
    let report = command(&[], &[])
        .args([
            "history",
            "--out-dir",
            out.to_str().ok_or("path")?,
            "report",
            "-o",
            page.to_str().ok_or("path")?,
        ])
        .output()
        .map_err(|e| e.to_string())?;
    if !report.status.success() {
        return Err(format!(
            "history report failed:\n{}",
            String::from_utf8_lossy(&report.stderr)
        )
        .into());
    }
    let dom = shown(browser, &dir, &page)?;
    for needle in [
        "<h1>servegate history</h1>",
        "trend::decode</code> decode_tok_s.mean",
        "3 run(s)",
    ] {
        if !dom.contains(needle) {
            return Err(format!("`{needle}` not in the history page").into());
        }
    }
    // Counted or not (a run whose client was limited is drawn hollow).
    let dots = dom.matches("<circle class=\"run").count();
    if dots < 3 * 4 {
        return Err(format!("{dots} dots for 3 runs of at least 4 key figures").into());
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let browser = chromium();
    // On stderr, and not while listing: stdout is libtest's (nextest parses
    // the list).
    if browser.is_none() && !args.list {
        eprintln!(
            "note: the browser check is ignored: no `chromium` on PATH (Debian's package `chromium`; .ci/run installs it)"
        );
    }
    let ignored = browser.is_none();
    let with = |f: fn(&Path) -> Result<(), Failed>| {
        let browser = browser.clone();
        move || f(&browser.ok_or("no chromium")?)
    };
    let trials = vec![
        Trial::test("html_report_renders_in_headless_chromium", with(renders))
            .with_ignored_flag(ignored),
        Trial::test(
            "history_report_renders_in_headless_chromium",
            with(history_renders),
        )
        .with_ignored_flag(ignored),
    ];
    libtest_mimic::run(&args, trials).exit();
}
