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
//! supervisor is single-threaded when it starts them). Neither lets the
//! program run as root (see `namespaces`).

use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

use nix::sys::signal::Signal;
use nix::unistd::{Gid, Uid};

use super::Layers;
use super::limits::{self, Counted, Rlimits};
use super::namespaces::{self, Entered, NOBODY};
use super::protocol::{self, Exit, Job, Report};
use crate::process::procfs;

/// Runs the stage: `init` where the supervisor entered namespaces, else
/// `exec`.
pub(super) fn main() -> ExitCode {
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    let Some((mut up, Ok(Some(job)))) = protocol::job_from_parent() else {
        return ExitCode::from(125);
    };
    let mut layers = job.layers.clone();
    if let Err(e) = prepare(&job, &mut layers) {
        let _ = protocol::send(&mut up, &Report::Error(e));
        return ExitCode::from(125);
    }
    if job.strict {
        let missing = layers.missing_required();
        if !missing.is_empty() {
            let _ = protocol::send(&mut up, &Report::Refused(missing));
            return ExitCode::from(126);
        }
    }
    let _ = protocol::send(&mut up, &Report::Layers(layers));
    let as_nobody = runs_as_nobody(&job);
    let mut cmd = Command::new(&job.argv[0]);
    cmd.args(&job.argv[1..])
        .current_dir(&job.work)
        .env_clear()
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null());
    let Some(entered) = job.namespaces else {
        use std::os::unix::process::CommandExt as _;
        let e = cmd.exec();
        let failed = started_failed(&job.argv[0], &e, as_nobody);
        let _ = protocol::send(&mut up, &Report::Error(failed));
        return ExitCode::from(127);
    };
    if entered == Entered::Root {
        use std::os::unix::process::CommandExt as _;
        // Set in the child before exec: it starts with no capability and
        // no supplementary group (std drops them with the uid).
        cmd.uid(NOBODY).gid(NOBODY);
    }
    let status = match cmd.spawn().and_then(|mut child| child.wait()) {
        Ok(status) => status,
        Err(e) => {
            let failed = started_failed(&job.argv[0], &e, as_nobody);
            let _ = protocol::send(&mut up, &Report::Error(failed));
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

/// Everything before the program starts, each layer noted in `layers`;
/// `Err` where it must not start.
fn prepare(job: &Job, layers: &mut Layers) -> Result<(), String> {
    // Counted before a new /proc hides the host's processes.
    let processes = process_limit(job);
    let hidden = match job.namespaces {
        Some(entered) => {
            let hidden = namespaces::isolate(&job.work, entered, &job.sockets, layers)?;
            // Not ptraced, nor its /proc files read, by the program, which
            // has its uid in a user namespace (it has no capability to
            // override this).
            nix::sys::prctl::set_dumpable(false)
                .map_err(|e| format!("failed to make the sandbox's init undumpable: {e}"))?;
            hidden
        }
        None if job.host_uid == 0 => {
            become_nobody(&job.work)?;
            false
        }
        None => false,
    };
    // A session of its own, without the controlling terminal servegate may
    // have: the program cannot open the user's terminal (`/dev/tty`) and
    // push input into it (`TIOCSTI`).
    nix::unistd::setsid().map_err(|e| format!("failed to start a session: {e}"))?;
    restrict(job, processes, hidden, layers)
}

/// The process limit of the program, or why none is set (`limits::
/// process_limit`). A backstop a little above what a pids cgroup lets the
/// program have, so that the cgroup, which reports what it refused, binds
/// first. Counted before a new /proc hides the host's processes.
fn process_limit(job: &Job) -> Result<u64, &'static str> {
    let counted = match job.namespaces {
        Some(Entered::User) if job.host_uid == 0 => Counted::Exempt,
        Some(Entered::User) => Counted::UserNamespace,
        _ if runs_as_nobody(job) && job.layers.holds("cgroup", "pids") => Counted::Cgroup,
        _ if runs_as_nobody(job) => Counted::Host {
            running: tasks_of(NOBODY),
        },
        _ => Counted::Host {
            running: tasks_of(job.host_uid),
        },
    };
    let kernel = nix::sys::utsname::uname()
        .ok()
        .and_then(|u| limits::kernel_version(&u.release().to_string_lossy()));
    limits::process_limit(counted, kernel, super::PROCESSES + super::HELPER_TASKS)
}

/// Whether the program runs as `NOBODY` on the host: servegate is root,
/// and did not need a user namespace (which maps the program to root's
/// uid).
fn runs_as_nobody(job: &Job) -> bool {
    job.host_uid == 0 && job.namespaces != Some(Entered::User)
}

/// Where servegate is root and there are no namespaces: gives the work
/// directory to `NOBODY` and becomes that uid, with no supplementary group,
/// before this stage becomes the program. As root it could undo every
/// other layer, signal servegate and the server, and read or write what
/// only root may.
fn become_nobody(work: &Path) -> Result<(), String> {
    let parent = nix::unistd::getppid();
    let (uid, gid) = (Uid::from_raw(NOBODY), Gid::from_raw(NOBODY));
    let fail = |what: &str, e: nix::Error| format!("failed to {what}: {e}");
    nix::unistd::chown(work, Some(uid), Some(gid))
        .map_err(|e| fail("give the work directory to uid 65534", e))?;
    nix::unistd::setgroups(&[]).map_err(|e| fail("drop supplementary groups", e))?;
    nix::unistd::setresgid(gid, gid, gid).map_err(|e| fail("set gid 65534", e))?;
    nix::unistd::setresuid(uid, uid, uid).map_err(|e| fail("set uid 65534", e))?;
    // A new uid clears the parent-death signal; the supervisor may have
    // ended meanwhile.
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| fail("set the parent-death signal", e))?;
    if nix::unistd::getppid() != parent {
        return Err("the sandbox's supervisor ended".into());
    }
    Ok(())
}

fn started_failed(program: &str, e: &std::io::Error, as_nobody: bool) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("failed to start `{program}`: not found"),
        std::io::ErrorKind::PermissionDenied if as_nobody => format!(
            "failed to start `{program}`: {e} (servegate runs as root, the program as uid {NOBODY}: is the interpreter, and the path to it, readable by all users?)"
        ),
        _ => format!("failed to start `{program}`: {e}"),
    }
}

/// rlimits, `no_new_privs`, Landlock and seccomp on this process, each
/// noted in `layers`, and what keeps the program's signals in and the
/// host's Unix sockets out of its reach (`hidden`: the mount view hides
/// them).
fn restrict(
    job: &Job,
    processes: Result<u64, &str>,
    hidden: bool,
    layers: &mut Layers,
) -> Result<(), String> {
    let refused = |layer: &str| job.refuse.iter().any(|r| r == layer);
    let rlimits = Rlimits {
        cpu_secs: job.timeout_ms.div_ceil(1000) + 1,
        memory_mib: job.memory_mib,
        processes: processes.ok(),
    };
    match limits::apply(rlimits) {
        Ok(name) => {
            layers.active.push(name);
            if let Err(why) = processes {
                layers.not_available("rlimits nproc", why);
            }
        }
        Err(e) => layers.not_available("rlimits", e),
    }
    // Whatever else is refused: no set-uid program or file capability
    // gives the program back what the layers take.
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("failed to set no_new_privs: {e}"))?;
    if refused("landlock") {
        layers.not_available("landlock", "refused (SERVEGATE_SANDBOX_REFUSE)");
    } else {
        // Without a pid namespace the host's processes are in /proc.
        let own_pid = job.namespaces.is_none().then(std::process::id);
        let path = job
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or("", |(_, v)| v.as_str());
        let reach = super::landlock::Reach {
            argv: &job.argv,
            path,
            read: &job.read,
        };
        if let Err(e) = super::landlock::restrict(&job.work, own_pid, &reach, layers) {
            layers.not_available("landlock", e);
        }
    }
    // Where neither the mount view nor Landlock keeps the host's Unix
    // sockets out, seccomp refuses the program sockets of its own: with
    // none it can connect to nothing (a socket pair comes connected).
    let by_landlock = layers.holds("landlock", "unix");
    let no_sockets = !hidden && !by_landlock;
    let by_seccomp = if refused("seccomp") {
        layers.not_available("seccomp", "refused (SERVEGATE_SANDBOX_REFUSE)");
        false
    } else {
        match super::seccomp::restrict(no_sockets) {
            Ok(name) => {
                layers.active.push(name);
                no_sockets
            }
            Err(e) => {
                layers.not_available("seccomp", e);
                false
            }
        }
    };
    // What keeps the program from stopping or killing servegate, the
    // server and their helpers: not seeing them, a Landlock domain that
    // scopes its signals, or another uid.
    let mut covers = Vec::new();
    if job.namespaces.is_some() {
        covers.push("pid namespace".to_owned());
    }
    if layers.holds("landlock", "scope") {
        covers.push("landlock scope".to_owned());
    }
    if runs_as_nobody(job) {
        covers.push(format!("uid {NOBODY}"));
    }
    if covers.is_empty() {
        layers.not_available(
            "signals",
            "the program runs as servegate's uid, with no pid namespace and no Landlock scoping (ABI 6, Linux 6.12): it can signal their processes one by one (seccomp denies kill(-1) and process groups)",
        );
    } else {
        layers.active.push(format!("signals({})", covers.join(",")));
    }
    // What keeps the host's Unix sockets on the file system out of its
    // reach (abstract ones are the network namespace's, or Landlock's
    // scope).
    let shut: Vec<&str> = [
        (hidden, "mount view"),
        (by_landlock, "landlock"),
        (by_seccomp, "seccomp"),
    ]
    .into_iter()
    .filter_map(|(holds, name)| holds.then_some(name))
    .collect();
    if shut.is_empty() {
        layers.not_available(
            "unix sockets",
            "the program can connect to the host's Unix sockets its uid may open: no mount view hides them, Landlock rules them only from ABI 9 (Linux 7.1), and seccomp (which would refuse it sockets of its own) is not in force",
        );
    } else {
        layers
            .active
            .push(format!("unix sockets({})", shut.join(",")));
    }
    Ok(())
}

/// Tasks (threads included, as `RLIMIT_NPROC` counts them) of a real uid
/// on the host.
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
