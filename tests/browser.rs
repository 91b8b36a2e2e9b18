//! The HTML report in a real browser: headless Chromium (Debian's
//! `chromium`, which `.ci/run` installs when missing) renders the report of
//! a real run without console errors, its plots are in the DOM, and a
//! screenshot is taken. Where Chromium is not installed the trial is
//! reported ignored, after a line that says why.

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
    let report = dir.join("servegate/latest/report.html");
    let url = format!(
        "file://{}",
        report.canonicalize().map_err(|e| e.to_string())?.display()
    );
    let profile = dir.join("chromium-profile");
    let shot = dir.join("report.png");
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
    let trial = Trial::test("html_report_renders_in_headless_chromium", move || {
        let browser = browser.clone().ok_or("no chromium")?;
        renders(&browser)
    })
    .with_ignored_flag(chromium().is_none());
    libtest_mimic::run(&args, vec![trial]).exit();
}
