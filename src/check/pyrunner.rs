//! A Python code check's verdict, decided where the program cannot reach
//! it. The model's program runs in the sandbox as a module: servegate's
//! head (one line) and tail (`pyrunner/serve.py`) make it answer requests
//! on the descriptor that was its stdout (its own prints go to stderr). The
//! suite's tests run in a second process, the test runner
//! (`pyrunner/tests.py`), started by servegate outside the sandbox with an
//! environment from scratch; the program's functions are references there
//! (`Remote`), called over the channel, and every value crosses as a plain
//! value (`pyrunner/codec.py`): an object that claims to equal everything
//! stays in the program, where no test compares it. The tests, the expected
//! values and the verdict never enter the program's process, so it cannot
//! read, skip or forge them, and exiting early only ends the conversation
//! with a test unfinished.

use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::sandbox::{self, Outcome};
use crate::suite::ProgramLimits;

const CODEC: &str = include_str!("pyrunner/codec.py");
const SERVE: &str = include_str!("pyrunner/serve.py");
const TESTS: &str = include_str!("pyrunner/tests.py");

/// How long the test runner has to finish once the program has ended (its
/// channel is closed then: it only reports, then exits; a loaded machine
/// may keep it waiting for a CPU).
const GRACE: Duration = Duration::from_secs(5);

/// The most bytes read of the runner's verdict and of its stderr.
const RUNNER_CAP: u64 = 1024 * 1024;

/// The program's first line: its stdout kept as the channel, and stdout
/// pointed at stderr; `__name__` is not `"__main__"`, so a main guard does
/// not run (registered under its new name too: dataclasses and pickle look
/// the module up by `__name__`).
pub const HEAD: &str = "__servegate_channel = __import__(\"os\").dup(1); __import__(\"os\").dup2(2, 1); __import__(\"sys\").stdout.reconfigure(line_buffering=True); __name__ = \"servegate_probe\"; __import__(\"sys\").modules[__name__] = __import__(\"sys\").modules[\"__main__\"]  # servegate: the tests run in another process\n";

/// The program's last line: servegate's side of the conversation, on the
/// module's globals.
pub fn tail() -> &'static str {
    static TAIL: OnceLock<String> = OnceLock::new();
    TAIL.get_or_init(|| {
        format!(
            "\n\n__import__(\"builtins\").exec({}, {{\"__builtins__\": __import__(\"builtins\"), \"__name__\": \"servegate_serve\", \"MODULE\": globals(), \"CHANNEL\": __servegate_channel}})\n",
            literal(&format!("{CODEC}\n{SERVE}"))
        )
    })
}

/// `text` as a Python string literal, in ASCII.
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            ' '..='~' => out.push(c),
            c if u32::from(c) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08x}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

/// A program made of the model's code.
#[derive(Debug, Clone)]
pub struct Program {
    /// The whole program: the head, the code, the tail.
    pub text: String,
    /// The line of the program the code's first line is (`from __future__`
    /// imports excepted: they must open the file, so they go above the
    /// head).
    pub first: usize,
    /// The code, without those imports.
    pub code: String,
}

impl Program {
    /// The program for `code`.
    pub fn new(code: &str) -> Self {
        let (future, code) = split_future(code);
        let code = code.trim_end().to_owned();
        Self {
            text: format!("{future}{HEAD}{code}{}", tail()),
            first: future.lines().count() + 2,
            code,
        }
    }
}

/// A Python program's `from __future__ import …` lines (at the top level),
/// and the rest: such imports must open a file, so they go above
/// servegate's first line.
pub(crate) fn split_future(code: &str) -> (String, String) {
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

/// What the runner is given.
#[derive(Debug, Serialize)]
pub struct Job<'a> {
    /// Trusted code run in the tests' namespace first (a `HumanEval`
    /// problem's prompt: its imports and helpers are the runner's own).
    pub prelude: &'a str,
    /// The program's names the tests may use; `None`: every one the
    /// prelude does not define.
    pub bind: Option<&'a [String]>,
    /// The tests, each compiled and run in turn until one fails.
    pub tests: &'a [String],
}

/// A test that failed, as the runner saw it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Failed {
    /// Its index.
    pub test: usize,
    /// The line of the test its traceback ends in.
    pub line: Option<String>,
    /// The exception, as Python words it (`AssertionError`).
    pub error: String,
    /// The program ended (or broke the channel) during a request.
    pub ended: bool,
    /// The program's traceback, when the error was the program's.
    pub trace: Option<String>,
    /// The last calls of the test and what they returned.
    #[serde(default)]
    pub calls: Vec<String>,
}

/// What the runner said.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// How many names of the program it bound, once the program was ready.
    pub ready: Option<usize>,
    /// Why the program never got ready.
    pub unready: Option<String>,
    /// How many tests passed.
    pub passed: usize,
    /// The test that failed.
    pub failed: Option<Failed>,
    /// Every test ran and passed.
    pub done: bool,
    /// The runner's own failure (its interpreter, the prelude), with the
    /// end of its stderr.
    pub broken: Option<String>,
    /// What the tests printed (the runner's stderr, where their stdout
    /// goes too).
    pub printed: String,
    /// How the runner ended; `None` when it was killed at the end of its
    /// grace. Its verdict counts only when it exited 0: a program of its
    /// uid that wrote a verdict into its stdout and then killed it cannot
    /// pass.
    pub runner_exit: Option<std::process::ExitStatus>,
}

impl Report {
    fn from_lines(lines: &str) -> Self {
        let mut report = Self::default();
        for line in lines.lines() {
            let Ok(serde_json::Value::Object(said)) = serde_json::from_str(line) else {
                continue;
            };
            let text = |k: &str| said.get(k).and_then(|v| v.as_str()).map(str::to_owned);
            if let Some(n) = said.get("ready").and_then(serde_json::Value::as_u64) {
                report.ready = usize::try_from(n).ok();
            } else if let Some(why) = text("unready") {
                report.unready = Some(why);
            } else if said.contains_key("passed") {
                report.passed += 1;
            } else if said.contains_key("test") {
                report.failed = serde_json::from_value(serde_json::Value::Object(said)).ok();
            } else if said.contains_key("done") {
                report.done = true;
            } else if let Some(why) = text("broken") {
                report.broken = Some(why);
            }
        }
        report
    }
}

/// A program's run and its tests' verdict.
#[derive(Debug)]
pub struct Run {
    /// The program's run in the sandbox.
    pub outcome: Outcome,
    /// The runner's report.
    pub report: Report,
}

impl Run {
    /// Every test passed, and the program ended cleanly with nothing for
    /// the sandbox to stop.
    pub fn passed(&self) -> bool {
        self.report.done
            && self.report.failed.is_none()
            && self.runner_ok()
            && self.outcome.passed()
    }

    /// The runner exited 0.
    fn runner_ok(&self) -> bool {
        self.report.runner_exit.is_some_and(|s| s.success())
    }

    /// Why it failed, a line for each thing to say: the test and its line,
    /// the program's last calls in it, the error, how the program ended
    /// where that is news. Empty when it passed.
    pub fn why(&self, tests: &[String], limits: &ProgramLimits) -> Vec<String> {
        if self.passed() {
            return Vec::new();
        }
        let ended = self.outcome.ended(limits);
        let r = &self.report;
        let mut lines = Vec::new();
        if let Some(f) = &r.failed {
            let test = f
                .line
                .as_deref()
                .or_else(|| tests.get(f.test).map(String::as_str));
            lines.push(format!("failed test: {}", test.unwrap_or("?")));
            lines.extend(f.calls.iter().map(|c| format!("  {c}")));
            if f.ended {
                lines.push(format!("{}: {ended}", f.error));
            } else {
                lines.push(f.error.clone());
            }
        } else if let Some(why) = &r.broken {
            lines.push(why.clone());
        } else if let Some(why) = &r.unready {
            lines.push(format!("{why}: {ended}"));
        } else if r.done && !self.runner_ok() {
            let how = r.runner_exit.map_or_else(
                || format!("was killed {GRACE:?} after the program ended"),
                |s| crate::process::ExitInfo::new(s).to_string(),
            );
            lines.push(format!(
                "every test passed, but the test runner then {how}: its verdict does not count"
            ));
        } else if r.done {
            lines.push(format!("every test passed, but {ended}"));
        } else if r.ready.is_some() {
            lines.push(format!(
                "the test runner stopped after {} of {} tests without a verdict: {ended}",
                r.passed,
                tests.len()
            ));
        } else {
            lines.push(format!("the test runner said nothing: {ended}"));
        }
        lines
    }
}

/// Runs `program` in the sandbox under `limits`, and the job's tests in
/// the runner, which uses the same interpreter.
pub fn run(program: &Program, job: &Job<'_>, limits: &ProgramLimits) -> Result<Run, String> {
    let mut line =
        serde_json::to_vec(job).map_err(|e| format!("failed to encode the tests: {e}"))?;
    line.push(b'\n');
    let (ours, mut theirs) =
        UnixStream::pair().map_err(|e| format!("failed to make a socket pair: {e}"))?;
    let mut runner = start(limits, ours)?;
    // Stopped with the run's servers and sandboxes on Ctrl-C.
    crate::process::reaper::register(runner.id());
    let out = capture(runner.stdout.take());
    let err = capture(runner.stderr.take());
    let _ = theirs.set_write_timeout(Some(limits.timeout));
    let sent = theirs.write_all(&line);
    let outcome = match sent {
        Ok(()) => sandbox::run_talking(&program.text, limits, OwnedFd::from(theirs)),
        Err(e) => Err(format!("failed to give the test runner its tests: {e}")),
    };
    let runner_exit = finish(&mut runner);
    let verdict = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let mut report = Report::from_lines(&verdict);
    let said_nothing = report.ready.is_none() && report.unready.is_none();
    if report.broken.is_some() || (said_nothing && !stderr.trim().is_empty()) {
        let why = report
            .broken
            .take()
            .unwrap_or_else(|| "the test runner failed".to_owned());
        report.broken = Some(format!("{why}:\n{}", crate::text::quoted_tail(&stderr, 10)));
    }
    report.printed = stderr;
    report.runner_exit = runner_exit;
    Ok(Run {
        outcome: outcome?,
        report,
    })
}

/// The runner's program: the codec, then the tests' side.
fn runner_source() -> &'static str {
    static SOURCE: OnceLock<String> = OnceLock::new();
    SOURCE.get_or_init(|| format!("{CODEC}\n{TESTS}"))
}

/// The runner, its stdin the channel, in a process group of its own, with
/// an environment from scratch; it limits its own CPU time (the program's
/// time limit and 2 s) and address space (the program's, 1 GiB at least).
fn start(limits: &ProgramLimits, channel: UnixStream) -> Result<Child, String> {
    let (program, args) = limits
        .interpreter
        .split_first()
        .ok_or("no interpreter to run the tests with")?;
    runner_command(&resolved(program, args))
        .args(args)
        .arg("-c")
        .arg(runner_source())
        .arg((limits.timeout.as_secs() + 2).to_string())
        .arg(limits.memory_mib.max(1024).to_string())
        .stdin(Stdio::from(OwnedFd::from(channel)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("failed to start the test runner `{program}`: {e}"))
}

/// `program` with the runner's environment: from scratch, in `/`.
fn runner_command(program: &std::ffi::OsStr) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir("/")
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
        )
        .env("LANG", "C.UTF-8")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONNOUSERSITE", "1")
        .env("PYTHONSAFEPATH", "1");
    cmd
}

/// The interpreter `program` starts (its `sys.executable`), asked once per
/// interpreter: a pyenv shim is a shell script that runs a dozen more
/// before Python starts (250 ms a program on a two-core machine). Only an
/// interpreter given flags alone is asked (`[python3, -I]`, not `[env,
/// python3]` or `[uv, run, python]`, whose arguments are not Python's);
/// else, or when it does not answer within 10 s, `program` itself.
fn resolved(program: &str, args: &[String]) -> std::ffi::OsString {
    use std::collections::HashMap;
    use std::sync::Mutex;
    type Known = HashMap<Vec<String>, std::ffi::OsString>;
    static KNOWN: Mutex<Option<Known>> = Mutex::new(None);
    if !args.iter().all(|a| a.starts_with('-')) {
        return program.into();
    }
    let key: Vec<String> = std::iter::once(program.to_owned())
        .chain(args.iter().cloned())
        .collect();
    if let Some(known) = KNOWN
        .lock()
        .ok()
        .and_then(|k| k.as_ref()?.get(&key).cloned())
    {
        return known;
    }
    let found: std::ffi::OsString = ask_executable(program, args)
        .filter(|p| std::path::Path::new(p).is_absolute())
        .map_or_else(|| program.into(), Into::into);
    if let Ok(mut known) = KNOWN.lock() {
        known
            .get_or_insert_with(HashMap::new)
            .insert(key, found.clone());
    }
    found
}

/// What `program` says its `sys.executable` is, within 10 s.
fn ask_executable(program: &str, args: &[String]) -> Option<String> {
    let mut child = runner_command(program.as_ref())
        .args(args)
        .args(["-c", "import sys; sys.stdout.write(sys.executable)"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .ok()?;
    let out = capture(child.stdout.take());
    let status = wait_or_kill(&mut child, Duration::from_secs(10));
    let said = out.join().ok()?;
    status
        .filter(std::process::ExitStatus::success)
        .map(|_| said)
}

/// Reads a pipe to its end on a thread, keeping the first `RUNNER_CAP`
/// bytes (the rest read and dropped: a test that prints on must not meet a
/// closed pipe).
fn capture(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.by_ref().take(RUNNER_CAP).read_to_end(&mut bytes);
            let _ = std::io::copy(&mut pipe, &mut std::io::sink());
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Waits `GRACE` for the runner to end, then kills its group; how it
/// ended, `None` when it had to be killed.
fn finish(runner: &mut Child) -> Option<std::process::ExitStatus> {
    let exited = wait_or_kill(runner, GRACE);
    crate::process::reaper::unregister(runner.id());
    exited
}

/// Waits up to `within` for `child` to end; kills its process group (only
/// if it has not ended: its pid may be another's once reaped) when it
/// does not. How it ended, `None` when it was killed.
fn wait_or_kill(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + within;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
            _ => break,
        }
    }
    let pid = child.id();
    crate::process::reaper::signal_group(pid, crate::process::reaper::Stop::Kill, child);
    let _ = child.wait();
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_one_ascii_line() {
        let tail = tail();
        assert!(tail.is_ascii());
        assert_eq!(tail.trim().lines().count(), 1, "{tail}");
        assert_eq!(literal("a\"\\\n…"), "\"a\\\"\\\\\\n\\u2026\"");
        let p = Program::new("from __future__ import annotations\ndef f():\n    pass\n");
        assert_eq!(p.first, 3);
        assert!(
            p.text
                .starts_with("from __future__ import annotations\n__servegate_channel")
        );
        assert_eq!(p.text.lines().nth(p.first - 1), Some("def f():"));
    }

    #[test]
    fn the_report_is_read_line_by_line() {
        let r = Report::from_lines(
            "{\"ready\": 2}\nnoise\n{\"passed\": 0}\n{\"test\": 1, \"line\": \"assert f(2)\", \"error\": \"AssertionError\", \"ended\": false, \"trace\": null, \"calls\": [\"f(2) returned 3\"]}\n",
        );
        assert_eq!((r.ready, r.passed, r.done), (Some(2), 1, false));
        let f = r.failed.unwrap();
        assert_eq!((f.test, f.line.as_deref()), (1, Some("assert f(2)")));
        assert_eq!(f.calls, ["f(2) returned 3"]);
    }
}
