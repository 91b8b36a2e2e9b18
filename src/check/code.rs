//! Executable code probes: the answer's code block of a language, with the
//! probe's tests appended, run in the sandbox; a failure shows the code,
//! the test that failed and the tail of stderr.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::assertion::Mismatch;
use super::sandbox::{self, Layers, Outcome, Stop};
use crate::suite::{CodeSpec, ProgramLimits};

/// One program a code check ran, as the run record keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeRun {
    /// The layers that held it.
    pub layers: Layers,
    /// How long it ran, seconds.
    pub elapsed_s: f64,
    /// What the sandbox stopped, if anything (`killed at the 1s wall-clock
    /// limit`, `2 processes … were killed`).
    #[serde(default)]
    pub contained: Vec<String>,
}

/// The names a fenced block's info string may give a language.
fn aliases(language: &str) -> Vec<String> {
    let l = language.to_ascii_lowercase();
    let mut names = vec![l.clone()];
    match l.as_str() {
        "python" => names.extend(["py", "python3"].map(str::to_owned)),
        "javascript" => names.extend(["js", "node", "nodejs"].map(str::to_owned)),
        "bash" | "sh" | "shell" => names.extend(["bash", "sh", "shell"].map(str::to_owned)),
        _ => {}
    }
    names
}

/// The code to run and where it came from: the first fenced block of the
/// language, else the first block without a language, else the whole
/// answer. A block cut off by the token limit runs to the end of the text.
pub fn extract(text: &str, language: &str) -> (String, String) {
    let names = aliases(language);
    let mut blocks: Vec<(String, String)> = Vec::new();
    let mut open: Option<(String, Vec<&str>)> = None;
    for line in text.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => {
                let info = info.split_whitespace().next().unwrap_or("");
                open = Some((info.to_ascii_lowercase(), Vec::new()));
            }
            (Some(_), Some(_)) => {
                if let Some((info, lines)) = open.take() {
                    blocks.push((info, lines.join("\n")));
                }
            }
            (Some((_, lines)), None) => lines.push(line),
            (None, None) => {}
        }
    }
    if let Some((info, lines)) = open {
        blocks.push((info, lines.join("\n")));
    }
    if let Some((info, code)) = blocks.iter().find(|(info, _)| names.contains(info)) {
        return (code.clone(), format!("the ```{info} block"));
    }
    if let Some((_, code)) = blocks.iter().find(|(info, _)| info.is_empty()) {
        return (code.clone(), "the ``` block (no language given)".to_owned());
    }
    (
        text.trim().to_owned(),
        "the whole answer (no fenced block)".to_owned(),
    )
}

/// The program run: the seal's head, the code, a blank line, one test per
/// line, then the seal's tail.
fn program(code: &str, tests: &[String], seal: Option<&Seal>) -> (String, usize) {
    let (future, code) = split_future(code);
    let mut p = future;
    p.push_str(seal.map_or("", |s| s.head));
    p.push_str(code.trim_end());
    p.push_str("\n\n");
    let first_test_line = p.lines().count() + 1;
    for t in tests {
        p.push_str(t);
        p.push('\n');
    }
    if let Some(s) = seal {
        p.push_str(&s.tail);
    }
    (p, first_test_line)
}

/// A Python program's `from __future__ import …` lines (at the top level),
/// and the rest: such imports must open a file, so they go above the
/// seal's head.
pub fn split_future(code: &str) -> (String, String) {
    let (mut future, mut rest) = (String::new(), String::new());
    for line in code.lines() {
        let to = if line.starts_with("from __future__ import") {
            &mut future
        } else {
            &mut rest
        };
        to.push_str(line);
        to.push('\n');
    }
    (future, rest)
}

/// What keeps a program's code from deciding its own verdict. Its head
/// keeps a main guard from running (Python: `__name__` is not
/// `"__main__"`, so the routine `if __name__ == "__main__":
/// sys.exit(main())` leaves the tests to run); its tail, after the last
/// test, prints a number the program's source does not hold (two random
/// numbers' XOR, drawn for each program), and a run passes only when
/// that line came. A program that exits 0 before its tests finished
/// (`os._exit(0)`, `sys.exit(0)`, an `atexit` hook or a `sys.excepthook`
/// that exits 0, `process.exit(0)`) never prints it. Shell has no seal
/// (a failed test does not stop a script: its verdict is its last
/// command's status), nor has an interpreter of a `run:` of another
/// language: those are judged by exit status alone. What the seal does not
/// stop: a program written to read its own source and compute the line.
#[derive(Debug, Clone)]
pub struct Seal {
    head: &'static str,
    tail: String,
    printed: String,
}

impl Seal {
    /// A new seal for a program in `language`; `None` for a language that
    /// has none.
    pub fn new(language: &str) -> Option<Self> {
        let bits = crate::random::unpredictable();
        // Two 31-bit numbers: exact in every language's integer XOR.
        let (a, b) = ((bits >> 33) | 1, (bits & 0x7FFF_FFFF) | 2);
        let said = "servegate: every test ran";
        let printed = format!("{said} {}", a ^ b);
        let (head, tail) = match language {
            // Registered under its new name too: dataclasses and pickle
            // look the module up by `__name__`.
            "python" => (
                "__name__ = \"servegate_probe\"; __import__(\"sys\").modules[__name__] = __import__(\"sys\").modules[\"__main__\"]  # a main guard does not run; the tests do\n",
                // On a line of its own even after output without a newline.
                format!("print(\"\\n{said}\", {a} ^ {b}, flush=True)\n"),
            ),
            "javascript" => ("", format!("console.log(\"\\n{said}\", {a} ^ {b});\n")),
            _ => return None,
        };
        Some(Self {
            head,
            tail,
            printed,
        })
    }

    /// The program's first line.
    pub fn head(&self) -> &str {
        self.head
    }

    /// The program's last line.
    pub fn tail(&self) -> &str {
        &self.tail
    }

    /// Whether the run printed the seal's line: every test before it ran.
    pub fn held(&self, stdout: &str) -> bool {
        stdout.lines().any(|l| l.trim_end() == self.printed)
    }

    /// Why a run that exited 0 without the seal's line failed.
    pub const BROKEN: &'static str = "the program exited 0 before its tests finished: the line after the last test never printed (its code ended the run: `os._exit`, `sys.exit`, an `atexit` hook or exception hook that exits 0)";
}

/// The line of the program's file a Python traceback ends in: the last
/// `File "…/<file>", line N`.
pub fn traceback_line(stderr: &str, file: &str) -> Option<usize> {
    let marker = format!("{file}\", line ");
    stderr.lines().rev().find_map(|l| {
        let (_, rest) = l.split_once(&marker)?;
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    })
}

/// The test a Python traceback points at.
fn failed_test<'t>(
    stderr: &str,
    file: &str,
    first_test_line: usize,
    tests: &'t [String],
) -> Option<&'t str> {
    traceback_line(stderr, file)?
        .checked_sub(first_test_line)
        .and_then(|i| tests.get(i))
        .map(String::as_str)
}

/// Why the sandbox ended the program, in words.
pub fn stop_line(stop: &Stop, limits: &ProgramLimits) -> String {
    match stop {
        Stop::Timeout => format!(
            "killed at the {} wall-clock limit (an endless loop?)",
            humantime::format_duration(limits.timeout)
        ),
        Stop::OutputCap(stream) => format!(
            "killed: its {stream} passed the {} MiB output cap",
            sandbox::OUTPUT_CAP / (1024 * 1024)
        ),
        Stop::Refused(why) => format!("not run: {why}"),
    }
}

fn numbered(code: &str) -> String {
    let mut out = String::new();
    for (i, line) in code.lines().enumerate() {
        let _ = writeln!(out, "    {:>3} | {line}", i + 1);
    }
    out
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs the answer's code against the spec's tests; the run is added to
/// `runs`.
pub fn check(
    spec: &CodeSpec,
    field: &str,
    text: &str,
    runs: &mut Vec<CodeRun>,
) -> Result<(), Mismatch> {
    let interpreter = spec.limits.interpreter.join(" ");
    let expected = format!(
        "the {} code in {field} passes its {} test{} ({interpreter})",
        spec.language,
        spec.tests.len(),
        if spec.tests.len() == 1 { "" } else { "s" }
    );
    let (code, source) = extract(text, &spec.language);
    let seal = Seal::new(&spec.language);
    let (program, first_test_line) = program(&code, &spec.tests, seal.as_ref());
    let fail = |found: String| {
        Err(Mismatch {
            expected: expected.clone(),
            found: Some(found),
        })
    };
    let outcome: Outcome = match sandbox::run(&program, &spec.limits) {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    let stopped = outcome.stopped.as_ref().map(|s| stop_line(s, &spec.limits));
    runs.push(CodeRun {
        layers: outcome.layers.clone(),
        elapsed_s: outcome.elapsed.as_secs_f64(),
        contained: stopped.iter().chain(&outcome.contained).cloned().collect(),
    });
    let sealed = seal.as_ref().is_none_or(|s| s.held(&outcome.stdout));
    if outcome.passed() && sealed {
        return Ok(());
    }
    let mut found = String::new();
    let failed = failed_test(
        &outcome.stderr,
        &spec.limits.file_name,
        first_test_line,
        &spec.tests,
    );
    match (outcome.status, stopped) {
        (_, Some(line)) => {
            let _ = writeln!(found, "{line}");
        }
        (None, None) => {
            let _ = writeln!(found, "the program ended without a status");
        }
        (Some(status), None) => {
            if let Some(t) = failed {
                let _ = writeln!(found, "failed test: {t}");
            }
            // Exited 0, so only a seal can have failed it.
            if outcome.passed() {
                let _ = writeln!(found, "{}", Seal::BROKEN);
            }
            let exit = crate::process::ExitInfo::new(status);
            let why = match status.code() {
                Some(127) => format!(" (`{interpreter}` not found?)"),
                Some(_) => String::new(),
                None => format!(
                    " (past the {} CPU-time or {} MiB memory limit?)",
                    humantime::format_duration(spec.limits.timeout),
                    spec.limits.memory_mib
                ),
            };
            let _ = writeln!(
                found,
                "the program {exit}{why} after {:.0?}",
                outcome.elapsed
            );
        }
    }
    for c in &outcome.contained {
        let _ = writeln!(found, "sandbox: {c}");
    }
    if matches!(outcome.stopped, Some(Stop::Refused(_))) {
        return fail(found.trim_end().to_owned());
    }
    let _ = writeln!(
        found,
        "code run (from {source}), tests from line {first_test_line}:"
    );
    found.push_str(&numbered(&program));
    if !outcome.stderr.trim().is_empty() {
        let _ = writeln!(
            found,
            "stderr (last 20 lines):\n{}",
            tail(&outcome.stderr, 20)
        );
    }
    if !outcome.stdout.trim().is_empty() {
        let _ = writeln!(
            found,
            "stdout (last 10 lines):\n{}",
            tail(&outcome.stdout, 10)
        );
    }
    fail(found.trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_block_of_the_language() {
        let text = "Here:\n```text\nnot this\n```\n```python\ndef f():\n    return 1\n```\nDone.";
        let (code, from) = extract(text, "python");
        assert_eq!(code, "def f():\n    return 1");
        assert_eq!(from, "the ```python block");
        let (code, _) = extract("```\nx = 1\n```", "python");
        assert_eq!(code, "x = 1");
        let (code, from) = extract("x = 1\n", "python");
        assert_eq!(
            (code.as_str(), from.as_str()),
            ("x = 1", "the whole answer (no fenced block)")
        );
        // Cut off by max_tokens: the open block runs to the end.
        let (code, _) = extract("```py\ndef f(", "python");
        assert_eq!(code, "def f(");
    }

    #[test]
    fn finds_the_failing_test_in_a_traceback() {
        let tests = vec!["assert f(1)".to_owned(), "assert not f(2)".to_owned()];
        let (p, first) = program("def f(x):\n    return True", &tests, None);
        assert_eq!(first, 4);
        assert!(p.ends_with("assert f(1)\nassert not f(2)\n"));
        let seal = Seal::new("python").unwrap();
        let (p, first) = program("def f(x):\n    return True", &tests, Some(&seal));
        assert_eq!(first, 5);
        assert!(p.starts_with("__name__ = \"servegate_probe\""), "{p}");
        let (p, _) = program(
            "from __future__ import annotations\ndef f(x):\n    return True",
            &tests,
            Some(&seal),
        );
        assert!(
            p.starts_with("from __future__ import annotations\n__name__ = "),
            "{p}"
        );
        assert!(!seal.held(&p), "the source holds the line it prints:\n{p}");
        assert!(Seal::new("bash").is_none());
        // The seal's head is line 1: the second test is on line 6.
        let stderr = "Traceback (most recent call last):\n  File \"probe.py\", line 6, in <module>\n    assert not f(2)\nAssertionError\n";
        assert_eq!(
            failed_test(stderr, "probe.py", first, &tests),
            Some("assert not f(2)")
        );
        assert_eq!(failed_test("boom", "probe.py", first, &tests), None);
    }
}
