//! Everything a launched server started, found and ended — also what tried
//! to escape its process group (`setsid`, a double fork) — and the
//! server's life tied to servegate's.
//!
//! - servegate is a child subreaper: a daemon that double-forks away from
//!   the server re-parents to servegate instead of init, so it is still
//!   found as servegate's child.
//! - Every process the server starts inherits `SERVEGATE_LAUNCH=<id>`, so
//!   teardown finds the ones that moved anywhere else too.
//! - The server is started through servegate itself
//!   (`servegate __servegate-exec --parent <pid> -- <argv>`), which sets a
//!   parent-death signal and then becomes the server (exec): when
//!   servegate dies, even by `kill -9`, the server gets SIGKILL. (The
//!   signal fires when the *thread* that started it ends, so servers are
//!   started from one thread that lives as long as the process: see
//!   [`spawn`].)

use std::process::{Child, Command};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Mutex, Once};

/// The environment variable that marks a launched server's processes.
pub(crate) const MARKER: &str = "SERVEGATE_LAUNCH";

/// The first argument of servegate's hidden re-exec mode.
pub(crate) const EXEC_MODE: &str = "__servegate-exec";

/// A marker value unique to one launch: random, so that no other run (one
/// with this pid, long ago) shares it.
pub(crate) fn new_marker() -> String {
    format!(
        "{}-{:016x}",
        std::process::id(),
        crate::random::unpredictable()
    )
}

/// Whether this process reaps its orphaned descendants (then a child of its
/// own that it did not start is one of them).
static SUBREAPER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes this process the reaper of its orphaned descendants (Linux), once.
/// Only for a process whose children are all servegate's own — a harness
/// run — since every child not a live server is then taken for an escaper.
pub(crate) fn become_subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[cfg(target_os = "linux")]
        match nix::sys::prctl::set_child_subreaper(true) {
            Ok(()) => SUBREAPER.store(true, Ordering::SeqCst),
            Err(e) => eprintln!(
                "warning: could not become a child subreaper ({e}): a server's daemons that leave its process group are found by their marker only"
            ),
        }
    });
}

/// The command that runs `argv` through servegate's re-exec mode when it
/// can (so the server dies with servegate), else `argv` itself. By
/// `/proc/self/exe` where `/proc` is mounted, the file this process runs
/// whatever became of its path: a servegate replaced while it ran
/// (`cargo install`, `cargo build` beside a long suite) has a path that
/// names nothing now, and a launch through it failed with "No such file
/// or directory" naming the server's command.
pub fn command(argv: &[String]) -> Command {
    #[cfg(target_os = "linux")]
    if let Some(me) = Some(std::path::PathBuf::from("/proc/self/exe"))
        .filter(|p| p.exists())
        .or_else(|| std::env::current_exe().ok())
    {
        let mut cmd = Command::new(me);
        cmd.arg(EXEC_MODE)
            .arg("--parent")
            .arg(std::process::id().to_string())
            .arg("--")
            .args(argv);
        return cmd;
    }
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

/// Runs the re-exec mode when this process was started in it (called first
/// thing by `servegate`'s main and by the harness's `test_main`): `Some`
/// exit code when it was and failed; it does not return when it succeeded.
pub fn exec_mode_if_asked() -> Option<std::process::ExitCode> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some(EXEC_MODE) {
        return None;
    }
    eprintln!("servegate: {}", exec_mode(&args[2..]));
    Some(std::process::ExitCode::from(127))
}

/// The hidden re-exec mode: `--parent <pid> -- <argv>`. Sets SIGKILL as
/// the parent-death signal, checks the parent is still the one that asked
/// (it may have died before the signal was set), and becomes `argv`.
/// Returns only on failure, with the message.
fn exec_mode(args: &[String]) -> String {
    let (Some(parent), Some(command)) = (
        args.iter()
            .position(|a| a == "--parent")
            .and_then(|i| args.get(i + 1))
            .and_then(|p| p.parse::<i32>().ok()),
        args.iter()
            .position(|a| a == "--")
            .map(|i| &args[i + 1..])
            .filter(|a| !a.is_empty()),
    ) else {
        return format!("usage: servegate {EXEC_MODE} --parent <pid> -- <command>");
    };
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        if let Err(e) = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL) {
            return format!("could not set the parent-death signal: {e}");
        }
        if nix::unistd::getppid().as_raw() != parent {
            return "servegate ended before the server started".to_owned();
        }
        // A descriptor left open despite it is the server's; no policy
        // here refuses to start one.
        let _ = super::close_inherited();
        let err = Command::new(&command[0]).args(&command[1..]).exec();
        format!("could not start `{}`: {err}", command[0])
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (parent, command);
        "the re-exec mode is Linux only".to_owned()
    }
}

type Spawn = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Starts `cmd` from a thread that lives as long as servegate: a
/// parent-death signal fires when the thread that started the child ends,
/// and trials run on worker threads that end before the run does.
pub fn spawn(cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: Mutex<Option<mpsc::Sender<Spawn>>> = Mutex::new(None);
    let tx = {
        let mut slot = SPAWNER
            .lock()
            .map_err(|_| std::io::Error::other("the spawner is poisoned"))?;
        if slot.is_none() {
            let (tx, rx) = mpsc::channel::<Spawn>();
            std::thread::Builder::new()
                .name("servegate-spawner".into())
                .spawn(move || {
                    for (mut cmd, reply) in rx {
                        let _ = reply.send(cmd.spawn());
                    }
                })?;
            *slot = Some(tx);
        }
        slot.clone().expect("set above")
    };
    let (reply, answer) = mpsc::channel();
    if tx.send((cmd, reply)).is_err() {
        return Err(std::io::Error::other("the spawner thread is gone"));
    }
    answer
        .recv()
        .unwrap_or_else(|_| Err(std::io::Error::other("the spawner thread is gone")))
}

/// The processes in `/proc`: each one's id and its parent's.
#[cfg(target_os = "linux")]
fn processes() -> Vec<(i32, i32)> {
    super::procfs::processes()
        .into_iter()
        .map(|p| (p.pid, p.ppid))
        .collect()
}

/// Whether process `pid` carries `MARKER=value` in its environment.
#[cfg(target_os = "linux")]
fn carries(pid: i32, value: &str) -> bool {
    super::procfs::environ_has(pid, &format!("{MARKER}={value}"))
}

/// The processes left of a launch: its marked ones, the descendants of
/// `root`, and — in a subreaper — this process's own children that are none
/// of `known` (orphans re-parented to it).
#[cfg(target_os = "linux")]
pub(crate) fn leftovers(root: u32, marker: &str, known: &[u32]) -> Vec<i32> {
    let all = processes();
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let orphans = SUBREAPER.load(Ordering::SeqCst);
    let root = i32::try_from(root).unwrap_or(0);
    let mut found: Vec<i32> = all
        .iter()
        .filter(|&&(pid, ppid)| {
            pid != me
                && (carries(pid, marker)
                    || (orphans
                        && ppid == me
                        && known.iter().all(|&k| i64::from(k) != i64::from(pid))))
        })
        .map(|&(pid, _)| pid)
        .collect();
    // Descendants of the root and of everything found so far.
    let mut frontier: Vec<i32> = found.iter().copied().chain([root]).collect();
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid) in &all {
            if ppid == parent && pid != me && !found.contains(&pid) {
                found.push(pid);
                frontier.push(pid);
            }
        }
    }
    found.retain(|&p| p != root);
    found
}

/// Kills `pids` and reaps the ones that are servegate's children.
#[cfg(target_os = "linux")]
pub fn kill(pids: &[i32]) {
    use nix::sys::signal::{Signal, kill};
    use nix::sys::wait::{WaitPidFlag, waitpid};
    use nix::unistd::Pid;
    for &p in pids {
        let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
    }
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let mine: Vec<i32> = processes()
        .into_iter()
        .filter(|&(pid, ppid)| ppid == me && pids.contains(&pid))
        .map(|(pid, _)| pid)
        .collect();
    for p in mine {
        // Killed by SIGKILL just above: it ends at once.
        for _ in 0..100 {
            match waitpid(Pid::from_raw(p), Some(WaitPidFlag::WNOHANG)) {
                Ok(nix::sys::wait::WaitStatus::StillAlive) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                _ => break,
            }
        }
    }
}

/// No `/proc` to search elsewhere: the process group is all there is.
#[cfg(not(target_os = "linux"))]
pub(crate) fn leftovers(_root: u32, _marker: &str, _known: &[u32]) -> Vec<i32> {
    Vec::new()
}

/// Nothing to kill where nothing was found.
#[cfg(not(target_os = "linux"))]
pub fn kill(_pids: &[i32]) {}
