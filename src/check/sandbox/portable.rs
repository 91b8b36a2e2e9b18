//! Where servegate has no Linux layers (macOS and others): rlimits set by
//! `sh`'s `ulimit` (no unsafe code), the time limit on the clock alone (no
//! run-queue figures to discount a busy machine), the program's
//! own process group killed whole at the end, capped output pipes, and the
//! same work directory and environment. The layers line says what is
//! missing.

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::output::{self, Finished};
use super::workdir::WorkDir;
use super::{Layers, Outcome, Stop};
use crate::suite::{ProgramLimits, SandboxPolicy};

pub(super) fn run(
    program: &str,
    limits: &ProgramLimits,
    _refused: &[String],
    channel: Option<std::os::fd::OwnedFd>,
) -> Result<Outcome, String> {
    let mut layers = Layers::default();
    for l in [
        "namespaces",
        "landlock",
        "seccomp",
        "cgroup",
        "signals",
        "unix sockets",
    ] {
        layers.not_available(l, "Linux only");
    }
    if limits.policy == SandboxPolicy::Strict {
        return Ok(refused(layers));
    }
    let work = WorkDir::new()?;
    let file = work.path().join(&limits.file_name);
    std::fs::write(&file, program)
        .map_err(|e| format!("failed to write {}: {e}", file.display()))?;
    let cpu_secs = limits.timeout.as_secs() + 1;
    let mem_kib = limits.memory_mib.saturating_mul(1024);
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!(
            "ulimit -t {cpu_secs} -v {mem_kib} -c 0 -f {} -n {} && exec \"$@\"",
            super::FILE_MIB * 2048,
            super::OPEN_FILES
        ))
        .arg("sandbox")
        .args(&limits.interpreter)
        .arg(&limits.file_name)
        .current_dir(work.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", work.path())
        .env("TMPDIR", work.path())
        .env("LANG", "C.UTF-8")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(channel.map_or_else(Stdio::piped, Stdio::from))
        .stderr(Stdio::piped());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("failed to start `sh` for the sandbox: {e}"))?;
    layers
        .active
        .push("rlimits(cpu,as,core,fsize,nofile)".into());
    let (tx, rx) = mpsc::channel::<Finished>();
    if let Some(err) = child.stderr.take() {
        output::read_or_none("stdout", child.stdout.take(), tx.clone(), |f| f)?;
        output::read("stderr", err, tx, |f| f)?;
    }
    let deadline = started + limits.timeout;
    let mut stopped = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                stopped = Some(Stop::Timeout {
                    waited: None,
                    blocked: None,
                });
                break None;
            }
        }
    };
    kill_group(&mut child);
    let _ = child.wait();
    let (mut stdout, mut stderr) = (String::new(), String::new());
    while let Ok(f) = rx.recv_timeout(Duration::from_millis(500)) {
        if f.capped {
            stopped = Some(Stop::OutputCap(f.stream));
        }
        if f.stream == "stdout" {
            stdout = f.text;
        } else {
            stderr = f.text;
        }
    }
    Ok(Outcome {
        status: if stopped.is_some() { None } else { status },
        stopped,
        contained: Vec::new(),
        stdout,
        stderr,
        elapsed: started.elapsed(),
        waited: None,
        layers,
    })
}

fn refused(layers: Layers) -> Outcome {
    Outcome {
        status: None,
        stopped: Some(Stop::Refused(layers.missing_required())),
        contained: Vec::new(),
        stdout: String::new(),
        stderr: String::new(),
        elapsed: Duration::ZERO,
        waited: None,
        layers,
    }
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
