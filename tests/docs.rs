//! The output the docs show is output servegate prints. A fenced block after
//! `<!-- sample: servegate ARGS… -->` is compared with what that command
//! prints now (stdout and stderr together, as a terminal shows them); one
//! after `<!-- file: PATH -->` with that file. What a run cannot repeat
//! (ports, run ids, timings, decimals of measured figures, the host's
//! sandbox layers, column widths) is normalised on both sides; a line `…`
//! in a sample stands for any number of lines. A block that looks like
//! servegate's output must carry a marker, or say `<!-- measured … -->`
//! when it records a measurement a test does not repeat (a benchmark).

#[allow(dead_code)] // each test binary uses a subset of the shared helpers
mod common;
#[path = "common/markdown.rs"]
mod markdown;
use common::run::merged;

use regex::Regex;
use std::path::Path;
use std::sync::LazyLock;

#[test]
fn the_readme_shows_real_output() {
    check(&[Path::new("README.md").to_path_buf()], 2);
}

/// A code probe's time limit ends alike on an idle machine and a busy one,
/// as the book shows it: the wait for a CPU that moved it, and a machine
/// too busy to judge the program, are the busy machine's additions.
#[test]
fn a_busy_machines_time_limit_reads_as_the_books() {
    let idle = normal("Mini/3 (line 4): killed at the 2s time limit (an endless loop?) at `f()`");
    for busy in [
        "Mini/3 (line 4): killed at the 2s time limit (an endless loop?), 3.6s on the clock less the 1.6s it waited for a CPU behind other work at `f()`",
        "Mini/3 (line 4): killed at the 2s time limit (an endless loop?), 3.6s on the clock less the 1.1s it waited for a CPU behind other work and the 0.5s it was blocked, off any CPU (asleep, or stalled on a read, its memory or a throttled machine) at `f()`",
        "Mini/3 (line 4): killed at the 2s time limit (an endless loop?), 2.5s on the clock less the 0.5s it was blocked, off any CPU (asleep, or stalled on a read, its memory or a throttled machine) at `f()`",
        "Mini/3 (line 4): killed at the 2s time limit's cap on the clock, 20.0s (10× the limit), having waited 18.9s of them for a CPU behind other work: the machine was too busy to judge the program at `f()`",
    ] {
        assert_eq!(normal(busy), idle);
    }
}

#[test]
fn the_book_shows_real_output() {
    let pages: Vec<_> = markdown::pages()
        .into_iter()
        .filter(|p| p.starts_with("docs/src"))
        .collect();
    check(&pages, 4);
}

/// Checks every marked block of `pages`, and that at least `least` blocks
/// were checked (so that markers cannot silently vanish).
fn check(pages: &[std::path::PathBuf], least: usize) {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for page in pages {
        let text = std::fs::read_to_string(page).unwrap();
        for block in markdown::parse(&text).0 {
            let at = format!("{}:{}", page.display(), block.line);
            let marker = block.marker.as_deref().unwrap_or("");
            let result = if let Some(command) = marker.strip_prefix("sample:") {
                checked += 1;
                compare(&block.lines, &run(command.trim()))
            } else if let Some(file) = marker.strip_prefix("file:") {
                checked += 1;
                let want = std::fs::read_to_string(file.trim()).unwrap_or_default();
                same_file(&block.lines, &want, file.trim())
            } else if looks_like_output(&block) && !marker.starts_with("measured") {
                Err("servegate's output without a `<!-- sample: … -->` marker".into())
            } else {
                Ok(())
            };
            if let Err(e) = result {
                wrong.push(format!("{at}: {e}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    assert!(checked >= least, "only {checked} samples checked");
}

/// A plain block whose first line is one servegate (or libtest) prints.
fn looks_like_output(block: &markdown::Block) -> bool {
    let first = block.lines.iter().find(|l| !l.trim().is_empty());
    (block.info.is_empty() || block.info == "text")
        && first.is_some_and(|l| {
            [
                "servegate",
                "---- ",
                "error: ",
                "running ",
                "gated: ",
                "test ",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
}

/// Runs a sample's command (`[VAR=value…] servegate ARGS…`, words split on
/// spaces) from the repository's root, stdout and stderr through one pipe,
/// as a terminal interleaves them (two handles on one file would each keep
/// an offset and overwrite the other's lines). Nothing is written beside
/// snapshots.
fn run(command: &str) -> String {
    let mut words = command.split_whitespace().peekable();
    let mut vars = Vec::new();
    while let Some((name, value)) = words.peek().and_then(|w| w.split_once('=')) {
        vars.push((name, value));
        words.next();
    }
    assert_eq!(words.next(), Some("servegate"), "a sample runs servegate");
    let mut cmd = common::run::command(&[], &[]);
    // `servegate` on PATH, as a user's install puts it (a suite that
    // launches servegate's own simulator finds it there too), and no
    // variable a user would not have set.
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_servegate"));
    let path = std::env::join_paths(
        bin.parent()
            .into_iter()
            .map(std::path::Path::to_path_buf)
            .chain(std::env::split_paths(
                &std::env::var_os("PATH").unwrap_or_default(),
            )),
    )
    .expect("a PATH");
    cmd.args(words)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PATH", path)
        .env_remove("SERVEGATE_BIN")
        .env("INSTA_UPDATE", "no")
        .env_remove("CI")
        .env_remove("GITHUB_ACTIONS")
        .env_remove("SERVEGATE_TARGET")
        .env_remove("SERVEGATE_SNAPSHOTS")
        .env_remove("SERVEGATE_SUITES")
        .env_remove("SGLANG_URL")
        .env_remove("MY_SERVER_URL")
        .envs(vars);
    let (code, out) = merged(cmd);
    assert!(code.is_some(), "{command}: killed by a signal");
    out
}

/// A block that shows a file shows all of it.
fn same_file(block: &[String], file: &str, path: &str) -> Result<(), String> {
    let shown = block.join("\n");
    if shown.trim_end() == file.trim_end() {
        Ok(())
    } else {
        Err(format!(
            "differs from {path}:\n{shown}\n--- {path}:\n{file}"
        ))
    }
}

static PORT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"127\.0\.0\.1:\d+").unwrap());
static RUN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\S*servegate/runs/\d+-\d+").unwrap());
static WORKDIR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"servegate-code-[A-Za-z0-9]+").unwrap());
static SANDBOX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(\s*servegate: sandbox: ).*").unwrap());
/// A measured figure: a number with a decimal point or a unit of time
/// (counts, limits and line numbers stay as they are).
static FIGURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b\d+\.\d+(?:ms|us|µs|ns|s|%)?|\b\d+(?:ms|us|µs|ns|s)\b|\b\d+%").unwrap()
});
static SPACES: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s+").unwrap());
/// A window's prompt tokens: its synthetic prompts are its own words, so
/// their count differs run to run.
static PROMPT_TOKENS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bprompt tokens \d+").unwrap());
/// What a busy machine adds to a time limit's end: how long the program
/// waited for a CPU, and was blocked off any CPU (none on an idle one).
static WAITED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r", <n> on the clock less (?:the <n> it waited for a CPU behind other work(?: and )?)?(?:the <n> it was blocked, off any CPU \(asleep, or stalled on a read, its memory or a throttled machine\))?").unwrap()
});
/// A time limit's end on a machine too busy to judge the program, past the
/// limit's cap on the clock, where an idle one names an endless loop.
static TOO_BUSY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"'s cap on the clock, <n> \(\d+× the limit\), having waited <n> of them for a CPU behind other work: the machine was too busy to judge the program").unwrap()
});
static TEST_LINE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^test \S+ \.\.\. \S+$").unwrap());

/// One line as any run prints it.
fn normal(line: &str) -> String {
    let line = PORT.replace_all(line, "127.0.0.1:<port>");
    let line = RUN.replace_all(&line, "<out>/runs/<run>");
    let line = WORKDIR.replace_all(&line, "servegate-code-<dir>");
    let line = SANDBOX.replace(&line, "${1}<layers>");
    let line = FIGURE.replace_all(&line, "<n>");
    let line = PROMPT_TOKENS.replace_all(&line, "prompt tokens <n>");
    let line = WAITED.replace_all(&line, "");
    let line = TOO_BUSY.replace_all(&line, " (an endless loop?)");
    SPACES.replace_all(line.trim_end(), " ").into_owned()
}

/// Lines normalised, each run of libtest's `test … ok` lines sorted:
/// libtest-mimic prints a trial's line from its worker thread once the
/// trial returns, and the next trial (a snapshot comparison takes
/// microseconds) may print first.
fn normalised<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = lines.map(normal).collect();
    let mut i = 0;
    while i < out.len() {
        let start = i;
        while i < out.len() && TEST_LINE.is_match(&out[i]) {
            i += 1;
        }
        out[start..i].sort();
        i = i.max(start + 1);
    }
    out
}

/// Whether the sample's lines appear in the output: each stretch between
/// `…` lines as consecutive lines, the stretches in order.
fn compare(sample: &[String], output: &str) -> Result<(), String> {
    let got = normalised(output.lines());
    let mut from = 0;
    let mut stretch = Vec::new();
    let mut stretches = Vec::new();
    for line in sample {
        if line.trim() == "…" {
            stretches.push(std::mem::take(&mut stretch));
        } else {
            stretch.push(line.as_str());
        }
    }
    stretches.push(stretch);
    for stretch in stretches.iter().filter(|s| !s.is_empty()) {
        let want = normalised(stretch.iter().copied());
        let found =
            (from..=got.len().saturating_sub(want.len())).find(|&i| got[i..].starts_with(&want));
        if let Some(i) = found {
            from = i + want.len();
            continue;
        }
        // The longest head of the stretch found, to name the first line
        // that differs.
        let (best, at) = (from..got.len())
            .map(|i| {
                let n = want
                    .iter()
                    .zip(&got[i..])
                    .take_while(|(w, g)| w == g)
                    .count();
                (n, i)
            })
            .max()
            .unwrap_or((0, from));
        return Err(format!(
            "the sample's line\n  {}\nis not what servegate prints{}\n\
             (normalised as compared; the whole output:)\n{output}",
            want[best],
            got.get(at + best)
                .map(|g| format!(" there:\n  {g}"))
                .unwrap_or_default()
        ));
    }
    Ok(())
}
