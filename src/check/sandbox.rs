//! Running model-written code: a fresh temporary directory, a cleared
//! environment (only PATH: no API keys reach it), no stdin, CPU-time and memory limits
//! (`ulimit` in `sh`, so no unsafe code here), a wall-clock timeout, and its
//! own process group, killed whole when time is up.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How to run a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The interpreter's argv; the program's file is appended.
    pub interpreter: Vec<String>,
    /// The file name the program is written to (`probe.py`).
    pub file_name: String,
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Address-space limit in MiB.
    pub memory_mib: u64,
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The exit status; `None` when it was killed at the timeout.
    pub status: Option<ExitStatus>,
    /// Its standard output (at most 64 KiB kept).
    pub stdout: String,
    /// Its standard error (at most 64 KiB kept).
    pub stderr: String,
    /// How long it ran.
    pub elapsed: Duration,
}

impl Outcome {
    /// Whether it exited with status 0.
    pub fn passed(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "servegate-code-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const KEEP: usize = 64 * 1024;

fn read_kept(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let start = bytes.len().saturating_sub(KEEP);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

/// Runs `program` under `limits`; `Err` when it could not be started.
pub fn run(program: &str, limits: &Limits) -> Result<Outcome, String> {
    let dir = TempDir::new().map_err(|e| format!("could not create a sandbox directory: {e}"))?;
    let file = dir.0.join(&limits.file_name);
    std::fs::write(&file, program)
        .map_err(|e| format!("could not write {}: {e}", file.display()))?;
    let out_path = dir.0.join(".stdout");
    let err_path = dir.0.join(".stderr");
    let open = |p: &Path| {
        std::fs::File::create(p).map_err(|e| format!("could not create {}: {e}", p.display()))
    };
    let (out, err) = (open(&out_path)?, open(&err_path)?);
    let cpu_secs = limits.timeout.as_secs().max(1);
    let mem_kib = limits.memory_mib.saturating_mul(1024);
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!(
            "ulimit -t {cpu_secs} && ulimit -v {mem_kib} && exec \"$@\""
        ))
        .arg("sandbox")
        .args(&limits.interpreter)
        .arg(&limits.file_name)
        .current_dir(&dir.0)
        // Nothing of servegate's environment but PATH (not a secret; the
        // interpreter may live in a pyenv or a venv).
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
        )
        .env("HOME", &dir.0)
        .env("LANG", "C.UTF-8")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        cmd.process_group(0);
    }
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not start `sh` for the sandbox: {e}"))?;
    let deadline = started + limits.timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => break None,
        }
    };
    // Whatever the program left behind in its group goes too.
    kill_group(&mut child);
    if status.is_none() {
        let _ = child.wait();
    }
    Ok(Outcome {
        status,
        stdout: read_kept(&out_path),
        stderr: read_kept(&err_path),
        elapsed: started.elapsed(),
    })
}

#[cfg(unix)]
fn kill_group(child: &mut std::process::Child) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

#[cfg(not(unix))]
fn kill_group(child: &mut std::process::Child) {
    let _ = child.kill();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python(timeout_ms: u64, memory_mib: u64) -> Limits {
        Limits {
            interpreter: vec!["python3".into()],
            file_name: "probe.py".into(),
            timeout: Duration::from_millis(timeout_ms),
            memory_mib,
        }
    }

    #[test]
    fn limits_hold_and_nothing_of_the_environment_leaks() {
        let ok = run("print('hi')", &python(10_000, 512)).unwrap();
        assert!(ok.passed(), "{ok:?}");
        assert_eq!(ok.stdout.trim(), "hi");
        let big = run("x = bytearray(1 << 32)", &python(10_000, 256)).unwrap();
        assert!(!big.passed());
        assert!(big.stderr.contains("MemoryError"), "{big:?}");
        let slow = run("import time\ntime.sleep(30)", &python(300, 512)).unwrap();
        assert!(slow.status.is_none(), "{slow:?}");
        assert!(slow.elapsed < Duration::from_secs(5));
        let env = run("import os\nprint(sorted(os.environ))", &python(10_000, 512)).unwrap();
        assert!(env.stdout.contains("'PATH'"), "{env:?}");
        assert!(!env.stdout.contains("CARGO"), "{env:?}");
    }
}
