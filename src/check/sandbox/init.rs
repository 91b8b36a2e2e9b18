//! The stage that runs the program, started by the supervisor:
//!
//! - `init`, pid 1 of the new pid namespace: makes the mount view,
//!   restricts itself, starts the program as its child, waits for it and
//!   ends, and with it every process left in the namespace (`setsid`
//!   daemons included: the kernel kills them);
//! - `exec`, where there are no namespaces: restricts itself and becomes
//!   the program, so that its parent is the supervisor, outside the
//!   Landlock domain and out of the program's reach.
//!
//! Both die with the supervisor (`PR_SET_PDEATHSIG`, kept across exec: the
//! supervisor is single-threaded when it starts them).

use std::process::{Command, ExitCode, Stdio};

use nix::sys::signal::Signal;

use super::Layers;
use super::limits::{self, Rlimits};
use super::protocol::{self, Exit, Job, Report};
use crate::procfs;

/// Runs the stage; `pid1` for `init`, else `exec`.
pub(super) fn main(pid1: bool) -> ExitCode {
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    let Some((mut up, Ok(Some(job)))) = protocol::job_from_parent() else {
        return ExitCode::from(125);
    };
    let mut layers = job.layers.clone();
    if pid1 {
        match super::namespaces::isolate(&job.work) {
            Ok((name, problems)) => {
                layers.active.insert(0, name);
                layers.unavailable.extend(problems);
            }
            Err(e) => {
                // The pid, net, ipc and uts namespaces hold all the same;
                // the host's files and its /proc stay in view.
                layers
                    .active
                    .insert(0, "namespaces(user,pid,net,ipc,uts)".into());
                layers.not_available("namespaces mount", &e);
                layers.not_available(
                    "namespaces proc",
                    format!("the host's /proc stays in view ({e})"),
                );
            }
        }
    }
    restrict(&job, &mut layers);
    if job.strict {
        let missing = layers.missing_required();
        if !missing.is_empty() {
            let _ = protocol::send(
                &mut up,
                &Report::Error(format!(
                    "`sandbox: strict` needs every layer; unavailable here: {}",
                    missing.join("; ")
                )),
            );
            return ExitCode::from(126);
        }
    }
    let _ = protocol::send(&mut up, &Report::Layers(layers));
    let mut cmd = Command::new(&job.argv[0]);
    cmd.args(&job.argv[1..])
        .current_dir(&job.work)
        .env_clear()
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null());
    if !pid1 {
        use std::os::unix::process::CommandExt as _;
        let e = cmd.exec();
        let _ = protocol::send(&mut up, &Report::Error(started_failed(&job.argv[0], &e)));
        return ExitCode::from(127);
    }
    let status = match cmd.spawn().and_then(|mut child| child.wait()) {
        Ok(status) => status,
        Err(e) => {
            let _ = protocol::send(&mut up, &Report::Error(started_failed(&job.argv[0], &e)));
            return ExitCode::from(127);
        }
    };
    let left = still_running();
    if left > 0 {
        let _ = protocol::send(&mut up, &Report::LeftBehind(left));
    }
    let _ = protocol::send(&mut up, &Report::Exit(Exit::of(status)));
    // Returning ends pid 1: the kernel kills whatever is left.
    ExitCode::SUCCESS
}

fn started_failed(program: &str, e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::NotFound {
        format!("failed to start `{program}`: not found")
    } else {
        format!("failed to start `{program}`: {e}")
    }
}

/// rlimits, Landlock and seccomp on this process, each noted in `layers`.
fn restrict(job: &Job, layers: &mut Layers) {
    let refused = |layer: &str| job.refuse.iter().any(|r| r == layer);
    // The kernel does not count processes for real uid 0 (the host's).
    let root = job.host_uid == 0;
    // Outside a user namespace the process count is the user's own: what
    // runs already, plus the program's allowance.
    let processes = if job.namespaces || root {
        super::PROCESSES
    } else {
        tasks_of(job.host_uid) + super::PROCESSES
    };
    let rlimits = Rlimits {
        cpu_secs: job.timeout_ms.div_ceil(1000) + 1,
        memory_mib: job.memory_mib,
        processes,
    };
    match limits::apply(rlimits, root) {
        Ok(name) => layers.active.push(name),
        Err(e) => layers.not_available("rlimits", e),
    }
    if refused("landlock") {
        layers.not_available("landlock", "refused (SERVEGATE_SANDBOX_REFUSE)");
    } else {
        // Without a pid namespace the host's processes are in /proc.
        let own_pid = (!job.namespaces).then(std::process::id);
        if let Err(e) = super::landlock::restrict(&job.work, own_pid, layers) {
            layers.not_available("landlock", e);
        }
    }
    if refused("seccomp") {
        layers.not_available("seccomp", "refused (SERVEGATE_SANDBOX_REFUSE)");
    } else {
        match super::seccomp::restrict() {
            Ok(name) => layers.active.push(name),
            Err(e) => layers.not_available("seccomp", e),
        }
    }
}

/// Tasks (threads included, as `RLIMIT_NPROC` counts them) of a real uid.
fn tasks_of(uid: u32) -> u64 {
    procfs::pids()
        .into_iter()
        .filter_map(procfs::Status::read)
        .filter(|s| s.number("Uid:") == Some(u64::from(uid)))
        .map(|s| s.number("Threads:").unwrap_or(1))
        .sum()
}

/// Processes other than this one (pid 1) still running in the namespace.
fn still_running() -> u32 {
    let left = procfs::processes()
        .into_iter()
        .filter(|p| p.pid != 1 && !p.is_zombie())
        .count();
    u32::try_from(left).unwrap_or(u32::MAX)
}
