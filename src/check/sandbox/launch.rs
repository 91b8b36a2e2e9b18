//! servegate's side of a sandboxed run: the work directory and the cgroup
//! leaf, the supervisor started from servegate's own executable
//! (`/proc/self/exe __sandbox supervise`) with an empty environment and its
//! own process group, registered with the signal watcher; output read
//! through capped pipes; a backstop past the time limit; and cleanup on
//! every path.

use std::io::BufReader;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::cgroup::Cgroup;
use super::helper::{CLEANUP, LAST_REPORTS};
use super::output::{self, Finished as Output};
use super::protocol::{self, Finished, Job};
use super::workdir::WorkDir;
use super::{HELPER_TASKS, Layers, Outcome, PROCESSES, Stop};
use crate::process::reaper;
use crate::suite::{ProgramLimits, SandboxPolicy};

/// How long past its own time limit the supervisor has to report before it
/// is killed: at most `LAST_REPORTS` and then `CLEANUP` are its own, and
/// the backstop is clearly longer, so that it only ever stops a supervisor
/// that hangs, never one cleaning up.
const BACKSTOP: Duration = Duration::from_secs(8);
const _: () = assert!(BACKSTOP.as_secs() >= 2 * (LAST_REPORTS.as_secs() + CLEANUP.as_secs()));

enum Event {
    Output(Output),
    Supervisor(Option<Finished>),
}

/// Runs `program` under `limits` with every layer the host allows.
pub(super) fn run(
    program: &str,
    limits: &ProgramLimits,
    refused: &[String],
    channel: Option<OwnedFd>,
) -> Result<Outcome, String> {
    let work = WorkDir::new()?;
    let file = work.path().join(&limits.file_name);
    std::fs::write(&file, program)
        .map_err(|e| format!("failed to write {}: {e}", file.display()))?;
    let mut layers = Layers::default();
    let name = work
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let cgroup = if refused.iter().any(|r| r == "cgroup") {
        layers.not_available("cgroup", "refused (SERVEGATE_SANDBOX_REFUSE)");
        Cgroup::default()
    } else {
        Cgroup::create(
            &name,
            limits.memory_mib,
            PROCESSES + HELPER_TASKS,
            &mut layers,
        )
    };
    let mut argv = limits.interpreter.clone();
    argv.push(limits.file_name.clone());
    let job = Job {
        work: work.path().to_path_buf(),
        argv,
        read: limits.read.clone(),
        env: environment(work.path()),
        timeout_ms: u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX),
        memory_mib: limits.memory_mib,
        strict: limits.policy == SandboxPolicy::Strict,
        refuse: refused.to_vec(),
        layers,
        sockets: super::sockets::outside(),
        host_uid: nix::unistd::getuid().as_raw(),
        namespaces: None,
    };
    let result = supervise(&job, &cgroup, limits.timeout, channel);
    cgroup.remove();
    result
}

/// The program's environment, from scratch: PATH (the interpreter may live
/// in a pyenv or a venv; not a secret), and a home, temp dir and locale of
/// its own. No API key or token of servegate's reaches it.
fn environment(work: &std::path::Path) -> Vec<(String, String)> {
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let work = work.display().to_string();
    vec![
        ("PATH".into(), path),
        ("HOME".into(), work.clone()),
        ("TMPDIR".into(), work),
        ("LANG".into(), "C.UTF-8".into()),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
    ]
}

/// Starts the supervisor; the program's stdout, which it and its stage pass
/// down, is `channel` where there is one, else a pipe read here.
fn supervise(
    job: &Job,
    cgroup: &Cgroup,
    timeout: Duration,
    channel: Option<OwnedFd>,
) -> Result<Outcome, String> {
    let (mut ours, theirs) =
        UnixStream::pair().map_err(|e| format!("failed to make a socket pair: {e}"))?;
    let started = Instant::now();
    let role = if job.refuse.iter().any(|r| r == "descriptors") {
        "supervise-keeping-descriptors"
    } else {
        "supervise"
    };
    let mut child = Command::new("/proc/self/exe")
        .args([super::helper::SUBCOMMAND, role])
        .env_clear()
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(channel.map_or_else(Stdio::piped, Stdio::from))
        .stderr(Stdio::piped())
        // Its own group: a Ctrl-C at the terminal reaches servegate, which
        // stops it in order.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("failed to start the sandbox helper: {e}"))?;
    let pid = child.id();
    let (work, leaves) = (job.work.clone(), cgroup.clone());
    reaper::register_sandbox(
        pid,
        Box::new(move || {
            leaves.remove();
            super::workdir::remove(&work);
        }),
    );
    let result = converse(job, cgroup, timeout, &mut child, &mut ours, started);
    if result.is_err() {
        stop(&child, Signal::SIGKILL);
    }
    let _ = child.wait();
    reaper::park_if_stopping();
    reaper::unregister_sandbox(pid);
    result
}

fn converse(
    job: &Job,
    cgroup: &Cgroup,
    timeout: Duration,
    child: &mut Child,
    ours: &mut UnixStream,
    started: Instant,
) -> Result<Outcome, String> {
    // Before the supervisor reads its job, so before it starts anything.
    cgroup.add(child.id())?;
    let (tx, rx) = mpsc::channel();
    let err = child
        .stderr
        .take()
        .ok_or("failed to take the helper's stderr")?;
    output::read_or_none("stdout", child.stdout.take(), tx.clone(), Event::Output)?;
    output::read("stderr", err, tx.clone(), Event::Output)?;
    let from = ours
        .try_clone()
        .map_err(|e| format!("failed to clone a socket: {e}"))?;
    std::thread::Builder::new()
        .name("sandbox-supervisor".into())
        .spawn(move || {
            let report = protocol::receive::<Finished>(&mut BufReader::new(from))
                .ok()
                .flatten();
            let _ = tx.send(Event::Supervisor(report));
        })
        .map_err(|e| format!("failed to start a thread: {e}"))?;
    protocol::send(ours, job)?;
    let backstop = started
        .checked_add(
            timeout
                .saturating_mul(super::CLOCK_CAP)
                .saturating_add(BACKSTOP),
        )
        .unwrap_or(started + Duration::from_secs(1 << 40));
    let (mut stdout, mut stderr) = (None::<Output>, None::<Output>);
    let mut finished: Option<Option<Finished>> = None;
    let mut stopped = None;
    let mut grace = None;
    loop {
        let until = grace.unwrap_or(backstop);
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(Event::Output(o)) => {
                if o.capped && stopped.is_none() {
                    stopped = Some(Stop::OutputCap(o.stream));
                    stop(child, Signal::SIGTERM);
                }
                if o.stream == "stdout" {
                    stdout = Some(o);
                } else {
                    stderr = Some(o);
                }
            }
            Ok(Event::Supervisor(f)) => {
                finished = Some(f);
                // Its processes are gone: the pipes close soon, unless
                // something escaped and holds them.
                grace = Some(Instant::now() + Duration::from_millis(500));
            }
            Err(RecvTimeoutError::Timeout) if finished.is_none() => {
                stop(child, Signal::SIGKILL);
                stopped = stopped.or(Some(Stop::Timeout {
                    waited: None,
                    blocked: None,
                }));
                break;
            }
            Err(_) => break,
        }
        if finished.is_some() && stdout.is_some() && stderr.is_some() {
            break;
        }
    }
    let elapsed = started.elapsed();
    let finished = finished.flatten().unwrap_or_else(|| Finished {
        layers: job.layers.clone(),
        error: Some("the sandbox helper ended without a report".into()),
        ..Finished::default()
    });
    let mut contained = finished.contained;
    contained.extend(cgroup.contained());
    if finished.timed_out {
        stopped = stopped.or(Some(Stop::Timeout {
            waited: finished.waited_ms.map(Duration::from_millis),
            blocked: finished.blocked_ms.map(Duration::from_millis),
        }));
    }
    if stopped.is_none() {
        if let Some(missing) = finished.refused {
            stopped = Some(Stop::Refused(missing));
        } else if let Some(e) = finished.error {
            return Err(e);
        }
    }
    Ok(Outcome {
        status: if stopped.is_some() {
            None
        } else {
            finished.exit.map(protocol::Exit::status)
        },
        stopped,
        contained,
        stdout: stdout.map(|o| o.text).unwrap_or_default(),
        stderr: stderr.map(|o| o.text).unwrap_or_default(),
        elapsed,
        waited: finished.waited_ms.map(Duration::from_millis),
        layers: finished.layers,
    })
}

/// Signals the supervisor's process group.
fn stop(child: &Child, signal: Signal) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = killpg(Pid::from_raw(pid), signal);
    }
}
