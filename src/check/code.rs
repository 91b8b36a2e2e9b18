//! Executable code probes: the answer's code block of a language, with the
//! probe's tests appended, run in the sandbox; a failure shows the code,
//! the test that failed and the tail of stderr.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::assertion::Mismatch;
use super::pyrunner;
use super::sandbox::{self, Layers, Outcome, Stop};
use crate::suite::{CodeSpec, ProgramLimits};

/// One program a code check ran, as the run record keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeRun {
    /// The layers that held it.
    pub layers: Layers,
    /// How long it ran, seconds.
    pub elapsed_s: f64,
    /// How long, seconds, it had waited for a CPU behind other work when
    /// its time limit came: the limit moved that much later on the clock.
    /// Absent where it ended within its limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_s: Option<f64>,
    /// What the sandbox stopped, if anything (`killed at the 1s time
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

/// The program run where the tests are appended: the code, a blank line,
/// one test per line, then the seal's line.
fn program(code: &str, tests: &[String], seal: Option<&Seal>) -> (String, usize) {
    let mut p = code.trim_end().to_owned();
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

/// What keeps a program's code from deciding its own verdict where its
/// tests are appended to it (JavaScript; Python's run apart, see
/// `pyrunner`): after the last test the program prints a number its
/// source does not hold (two random numbers' XOR, drawn for each program),
/// and a run passes only when that line came. A program that exits 0
/// before its tests finished (`process.exit(0)`) never prints it. Shell
/// has no seal (a failed test does not stop a script: its verdict is its
/// last command's status), nor has an interpreter of a `run:` of another
/// language: those are judged by exit status alone. What the seal does not
/// stop: a program that reads its own source and computes the line, or
/// reaches its tests in the process they share.
#[derive(Debug, Clone)]
pub(crate) struct Seal {
    tail: String,
    printed: String,
}

impl Seal {
    /// A new seal for a program in `language`; `None` for a language that
    /// has none.
    pub fn new(language: &str) -> Option<Self> {
        if language != "javascript" {
            return None;
        }
        let bits = crate::random::unpredictable();
        // Two 31-bit numbers: exact in every language's integer XOR.
        let (a, b) = ((bits >> 33) | 1, (bits & 0x7FFF_FFFF) | 2);
        let said = "servegate: every test ran";
        Some(Self {
            tail: format!("console.log(\"\\n{said}\", {a} ^ {b});\n"),
            printed: format!("{said} {}", a ^ b),
        })
    }

    /// Whether the run printed the seal's line: every test before it ran.
    pub fn held(&self, stdout: &str) -> bool {
        stdout.lines().any(|l| l.trim_end() == self.printed)
    }

    /// Why a run that exited 0 without the seal's line failed.
    pub(crate) const BROKEN: &'static str = "the program exited 0 before its tests finished: the line after the last test never printed (its code ended the run: `process.exit(0)`)";
}

/// The line of the program's file an error's trace ends in: the last
/// `<file>", line N` (Python) or `<file>:N` (Node).
fn traceback_line(stderr: &str, file: &str) -> Option<usize> {
    let markers = [format!("{file}\", line "), format!("{file}:")];
    stderr.lines().rev().find_map(|l| {
        markers.iter().find_map(|m| {
            let (_, rest) = l.rsplit_once(m.as_str())?;
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
    })
}

/// The test an error's trace points at.
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

/// `code`'s lines numbered from `first`.
fn numbered(code: &str, first: usize) -> String {
    let mut out = String::new();
    for (i, line) in code.lines().enumerate() {
        let _ = writeln!(out, "    {:>3} | {line}", i + first);
    }
    out
}

/// Runs the answer's code against the spec's tests; the run is added to
/// `runs`. Python's tests run apart from the program (`pyrunner`); other
/// languages' are appended to the program, behind the seal where the
/// language has one.
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
    let found = if spec.language == "python" {
        apart(spec, &code, &source, runs)
    } else {
        appended(spec, &code, &source, runs)
    };
    found.map_or(Ok(()), |found| {
        Err(Mismatch {
            expected,
            found: Some(found),
        })
    })
}

/// The run as the record keeps it.
pub(super) fn code_run(outcome: &Outcome, limits: &ProgramLimits) -> CodeRun {
    let stopped = outcome.stopped.as_ref().map(|s| s.describe(limits));
    CodeRun {
        layers: outcome.layers.clone(),
        elapsed_s: outcome.elapsed.as_secs_f64(),
        waited_s: outcome.waited.map(|w| w.as_secs_f64()),
        contained: stopped.iter().chain(&outcome.contained).cloned().collect(),
    }
}

/// What the sandbox contained, the code with its lines numbered as the
/// program's, and the ends of its output.
fn evidence(found: &mut String, outcome: &Outcome, listing: &str) {
    for c in &outcome.contained {
        let _ = writeln!(found, "sandbox: {c}");
    }
    if matches!(outcome.stopped, Some(Stop::Refused(_))) {
        return;
    }
    found.push_str(listing);
    if !outcome.stderr.trim().is_empty() {
        let _ = writeln!(
            found,
            "stderr (last 20 lines):\n{}",
            crate::text::quoted_tail(&outcome.stderr, 20)
        );
    }
    if !outcome.stdout.trim().is_empty() {
        let _ = writeln!(
            found,
            "stdout (last 10 lines):\n{}",
            crate::text::quoted_tail(&outcome.stdout, 10)
        );
    }
}

/// Python: the code runs as a module in the sandbox, its tests in the test
/// runner; `Some(why)` when it failed.
fn apart(spec: &CodeSpec, code: &str, source: &str, runs: &mut Vec<CodeRun>) -> Option<String> {
    let program = pyrunner::Program::new(code);
    let job = pyrunner::Job {
        prelude: "",
        bind: None,
        tests: &spec.tests,
    };
    let run = match pyrunner::run(&program, &job, &spec.limits) {
        Ok(run) => run,
        Err(e) => return Some(e),
    };
    runs.push(code_run(&run.outcome, &spec.limits));
    if run.passed() {
        return None;
    }
    let mut found = run.why(&spec.tests, &spec.limits).join("\n");
    found.push('\n');
    if run.report.broken.is_none() && !run.report.printed.trim().is_empty() {
        let _ = writeln!(
            found,
            "the tests printed (last 10 lines):\n{}",
            crate::text::quoted_tail(&run.report.printed, 10)
        );
    }
    if let Some(trace) = run.report.failed.as_ref().and_then(|f| f.trace.as_ref()) {
        let _ = writeln!(
            found,
            "the program's traceback:\n{}",
            crate::text::quoted_tail(trace, 12)
        );
    }
    let listing = format!(
        "code run (from {source}; its tests ran apart, in servegate's test runner):\n{}",
        numbered(&program.code, program.first)
    );
    evidence(&mut found, &run.outcome, &listing);
    Some(found.trim_end().to_owned())
}

/// Other languages: the tests appended to the code, the seal after them
/// where the language has one; `Some(why)` when it failed.
fn appended(spec: &CodeSpec, code: &str, source: &str, runs: &mut Vec<CodeRun>) -> Option<String> {
    let seal = Seal::new(&spec.language);
    let (program, first_test_line) = program(code, &spec.tests, seal.as_ref());
    let outcome: Outcome = match sandbox::run(&program, &spec.limits) {
        Ok(o) => o,
        Err(e) => return Some(e),
    };
    runs.push(code_run(&outcome, &spec.limits));
    let sealed = seal.as_ref().is_none_or(|s| s.held(&outcome.stdout));
    if outcome.passed() && sealed {
        return None;
    }
    let mut found = String::new();
    if outcome.stopped.is_none() && outcome.status.is_some() {
        if let Some(t) = failed_test(
            &outcome.stderr,
            &spec.limits.file_name,
            first_test_line,
            &spec.tests,
        ) {
            let _ = writeln!(found, "failed test: {t}");
        }
        // Exited 0, so only a seal can have failed it.
        if outcome.passed() {
            let _ = writeln!(found, "{}", Seal::BROKEN);
        }
    }
    let _ = writeln!(found, "{}", outcome.ended(&spec.limits));
    let listing = format!(
        "code run (from {source}), tests from line {first_test_line}:\n{}",
        numbered(&program, 1)
    );
    evidence(&mut found, &outcome, &listing);
    Some(found.trim_end().to_owned())
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
    fn finds_the_failing_test_in_a_trace() {
        let tests = vec!["assert(f(1))".to_owned(), "assert(!f(2))".to_owned()];
        let (p, first) = program("function f(x) {\n  return true\n}", &tests, None);
        assert_eq!(first, 5);
        assert!(p.ends_with("assert(f(1))\nassert(!f(2))\n"));
        let seal = Seal::new("javascript").unwrap();
        let (p, _) = program("function f(x) {\n  return true\n}", &tests, Some(&seal));
        assert!(!seal.held(&p), "the source holds the line it prints:\n{p}");
        assert!(Seal::new("bash").is_none() && Seal::new("python").is_none());
        let node = "/tmp/w/probe.js:6\nassert(!f(2))\n^\n\nAssertionError [ERR_ASSERTION]\n    at Object.<anonymous> (/tmp/w/probe.js:6:1)\n";
        assert_eq!(
            failed_test(node, "probe.js", first, &tests),
            Some("assert(!f(2))")
        );
        let python = "Traceback (most recent call last):\n  File \"probe.py\", line 5, in <module>\n    assert f(1)\nAssertionError\n";
        assert_eq!(
            failed_test(python, "probe.py", first, &tests),
            Some("assert(f(1))")
        );
        assert_eq!(failed_test("boom", "probe.js", first, &tests), None);
    }
}
