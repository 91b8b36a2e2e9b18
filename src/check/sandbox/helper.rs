//! The re-exec helper: servegate starts itself again as `servegate __sandbox
//! supervise` (a hidden subcommand), so that a fresh single-threaded process
//! can enter namespaces and restrict itself through safe wrappers only.
//!
//! The supervisor reads the job from servegate, enters the namespaces, and
//! starts the stage that runs the program (`init` or `exec`, see `init`).
//! It is a child subreaper: whatever the program leaves behind is
//! reparented to it, and killed when the program ends. It ends everything
//! at the time limit, on SIGTERM, SIGINT or SIGHUP (servegate's signal
//! watcher sends SIGTERM), and when servegate is gone (its socket closes),
//! and tells servegate how the program ended.

use std::io::BufReader;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::Pid;

use super::protocol::{self, Exit, Finished, Job, Report};

/// The hidden subcommand servegate re-executes itself with.
pub(crate) const SUBCOMMAND: &str = "__sandbox";

/// How long the supervisor waits for the stage's last reports once it has
/// ended.
pub(super) const LAST_REPORTS: Duration = Duration::from_secs(1);

/// How long the supervisor keeps killing what the program left before it
/// gives up and says so (a fork bomb under a process limit is gone in
/// milliseconds; the cgroup's kill, where there is one, comes after).
pub(super) const CLEANUP: Duration = Duration::from_secs(2);

/// Runs a helper stage: `supervise` (or `supervise-keeping-descriptors`),
/// `init` or `exec`.
pub fn main(role: &str) -> ExitCode {
    match role {
        "supervise" => supervise(true),
        // Descriptors refused (SERVEGATE_SANDBOX_REFUSE): a host where
        // closing them failed.
        "supervise-keeping-descriptors" => supervise(false),
        // Named apart for whoever reads a process list; the job says which.
        "init" | "exec" => super::init::main(),
        _ => ExitCode::from(2),
    }
}

/// For binaries other than `servegate` that run suites (the
/// `sglang_suite` test harness): runs the helper and gives its exit code
/// when this process was started as one.
pub(crate) fn main_if_asked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != SUBCOMMAND {
        return None;
    }
    let role = args.next()?;
    Some(main(&role.to_string_lossy()))
}

fn supervise(close: bool) -> ExitCode {
    // servegate's own descriptors are close-on-exec: any left are what its
    // parent left open, and the program must reach none of them. The job
    // comes on stdin.
    let inherited = close.then(crate::process::close_inherited);
    let Some((mut up, job)) = protocol::job_from_parent() else {
        return ExitCode::from(125);
    };
    let job = match job {
        Ok(Some(mut job)) => {
            descriptors(&mut job.layers, inherited.as_ref());
            job
        }
        Ok(None) => return ExitCode::from(125),
        Err(e) => {
            let finished = Finished {
                error: Some(e),
                ..Finished::default()
            };
            let _ = protocol::send(&mut up, &finished);
            return ExitCode::from(125);
        }
    };
    let outcome = supervise_job(job.clone(), &up).unwrap_or_else(|e| Finished {
        layers: job.layers.clone(),
        error: Some(e),
        ..Finished::default()
    });
    let servegate_gone = protocol::send(&mut up, &outcome).is_err();
    if servegate_gone {
        // Nobody is left to remove the work directory.
        super::workdir::remove(&job.work);
    }
    ExitCode::SUCCESS
}

/// The `descriptors` layer: in force where every descriptor servegate
/// inherited was closed and a listing of what is open says so.
fn descriptors(layers: &mut super::Layers, inherited: Option<&crate::process::Inherited>) {
    match inherited {
        None => layers.not_available("descriptors", "refused (SERVEGATE_SANDBOX_REFUSE)"),
        Some(i) => match &i.left {
            Some(left) if left.is_empty() => layers
                .active
                .push(format!("descriptors(closed {} inherited)", i.closed)),
            Some(left) => layers.not_available(
                "descriptors",
                format!("{left:?} still open after closing what servegate inherited"),
            ),
            None => layers.not_available(
                "descriptors",
                format!(
                    "{} inherited closed, but no /proc/self/fd lists what is left open",
                    i.closed
                ),
            ),
        },
    }
}

fn supervise_job(mut job: Job, up: &UnixStream) -> Result<Finished, String> {
    nix::sys::prctl::set_child_subreaper(true)
        .map_err(|e| format!("failed to become a child subreaper: {e}"))?;
    // Namespaces first: unshare needs this process single-threaded, and
    // after it (a new pid namespace) no thread can be started: everything
    // below waits in one poll loop.
    if job.refuse.iter().any(|r| r == "namespaces") {
        job.layers
            .not_available("namespaces", "refused (SERVEGATE_SANDBOX_REFUSE)");
    } else {
        match super::namespaces::enter() {
            Ok(entered) => job.namespaces = Some(entered),
            Err(e) => job.layers.not_available("namespaces", e),
        }
    }
    // Signals arrive on a descriptor; the stages start with them unblocked
    // (std resets the mask of a child).
    let mut mask = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
    ] {
        mask.add(s);
    }
    mask.thread_block()
        .map_err(|e| format!("failed to block signals: {e}"))?;
    let signals = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC)
        .map_err(|e| format!("failed to open a signalfd: {e}"))?;
    let (mut mine, theirs) =
        UnixStream::pair().map_err(|e| format!("failed to make a socket pair: {e}"))?;
    let role = if job.namespaces.is_some() {
        "init"
    } else {
        "exec"
    };
    let mut stage = Command::new("/proc/self/exe")
        .args([SUBCOMMAND, role])
        .env_clear()
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .spawn()
        .map_err(|e| format!("failed to start the sandbox's {role} stage: {e}"))?;
    let (started, limit) = (Instant::now(), Duration::from_millis(job.timeout_ms));
    // A limit past any clock (a suite's absurd `timeout`) is none.
    let at = |d: Duration| {
        started
            .checked_add(d)
            .unwrap_or(started + Duration::from_secs(1 << 40))
    };
    let mut deadline = at(limit);
    protocol::send(&mut mine, &job)?;
    let mut from_stage = BufReader::new(mine);
    let mut finished = Finished {
        layers: job.layers.clone(),
        ..Finished::default()
    };
    let (mut ended, mut closed, mut stop) = (None, false, false);
    // Once the stage has ended its last reports are on their way: waited
    // for until a fixed time, however often something else wakes the loop.
    let mut reports_until = None;
    while ended.is_none() || !closed {
        let until = reports_until.unwrap_or(deadline);
        let wait = until.saturating_duration_since(Instant::now());
        let ready = wait_for(from_stage.get_ref(), closed, up, &signals, wait)?;
        if ready.is_empty() {
            if ended.is_none() {
                // The limit counts the time the program could run: the
                // time it waited for a CPU moves it later on the clock,
                // and so, up to the limit again, the time it was blocked
                // (asleep, or stalled on a read, its memory or a throttled
                // cgroup: a loaded run once held a Python start-up 2 s so).
                let (ran, waited) = program_schedstat().unzip();
                let blocked = blocked(started.elapsed(), waited, ran, limit);
                let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
                finished.waited_ms = waited.map(ms);
                finished.blocked_ms = blocked.map(ms);
                let moved = waited.unwrap_or_default() + blocked.unwrap_or_default();
                let later = at(allowed(limit, moved));
                if later > Instant::now() + Duration::from_millis(10) {
                    deadline = later;
                    continue;
                }
                finished.timed_out = true;
            }
            break;
        }
        if ready.contains(&Ready::Stage) {
            // Whole lines are written at once; read every one buffered.
            loop {
                if let Ok(Some(report)) = protocol::receive::<Report>(&mut from_stage) {
                    note(&mut finished, report);
                } else {
                    closed = true;
                    break;
                }
                if !from_stage.buffer().contains(&b'\n') {
                    break;
                }
            }
        }
        if ready.contains(&Ready::Servegate) {
            stop = true;
            break;
        }
        if ready.contains(&Ready::Signal) {
            match signals.read_signal() {
                Ok(Some(info)) if info.ssi_signo == Signal::SIGCHLD as u32 => {
                    if let Ok(Some(status)) = stage.try_wait() {
                        ended = Some(status);
                        reports_until = Some(Instant::now() + LAST_REPORTS);
                    }
                }
                Ok(Some(_)) => {
                    stop = true;
                    break;
                }
                _ => {}
            }
        }
    }
    if ended.is_none() {
        let _ = stage.kill();
        let _ = stage.wait();
    } else if job.namespaces.is_none() && finished.error.is_none() && !stop && !finished.timed_out {
        // Without namespaces the stage became the program: its status is
        // the program's.
        finished.exit = ended.map(Exit::of);
    }
    if stop || finished.timed_out {
        finished.exit = None;
    }
    let cleanup = kill_descendants(&stage);
    if cleanup.killed > 0 {
        finished.contained.push(left_behind(cleanup.killed));
    }
    if cleanup.left > 0 {
        finished.contained.push(format!(
            "the sandbox gave up after {}s with {} of the program's processes still running (the cgroup's kill, where there is one, ends them)",
            CLEANUP.as_secs(),
            cleanup.left
        ));
    }
    Ok(finished)
}

/// How long on the clock a program with `limit` may run having waited
/// `waited` for a CPU: its limit and that wait, at most `CLOCK_CAP` times
/// its limit.
fn allowed(limit: Duration, waited: Duration) -> Duration {
    limit
        .saturating_add(waited)
        .min(limit.saturating_mul(super::CLOCK_CAP))
}

/// The program's scheduler figures, in one pass over its processes (this
/// supervisor's descendants: the stage and what it started): the longest
/// any of them ran on a CPU (its threads summed), and the longest any of
/// their threads waited for one — behind other work, or behind the
/// program's own other processes and threads: a program that contends
/// with itself gets its limit moved too, never past `CLOCK_CAP` times it
/// (and each of its processes stops at its CPU-time limit). A process
/// that has ended takes its figures with it. `None` where the kernel does
/// not say.
fn program_schedstat() -> Option<(Duration, Duration)> {
    let me = i32::try_from(std::process::id()).ok()?;
    crate::process::procfs::descendants(me)
        .into_iter()
        .filter_map(crate::process::procfs::schedstat)
        .reduce(|(r1, w1), (r2, w2)| (r1.max(r2), w1.max(w2)))
}

/// How long of `elapsed` the program was blocked — neither on a CPU
/// (`ran`) nor waiting for one (`waited`) — counted up to `limit`: a
/// program asleep all along gets its limit twice on the clock, an endless
/// loop none of it. `None` where the kernel does not say how long it ran.
fn blocked(
    elapsed: Duration,
    waited: Option<Duration>,
    ran: Option<Duration>,
    limit: Duration,
) -> Option<Duration> {
    let ran = ran?;
    Some(
        elapsed
            .saturating_sub(waited.unwrap_or_default())
            .saturating_sub(ran)
            .min(limit),
    )
}

/// What became ready.
#[derive(Debug, PartialEq, Eq)]
enum Ready {
    /// The stage's socket: a report, or its end.
    Stage,
    /// servegate's socket: anything from it, or its end, means stop.
    Servegate,
    /// The signalfd.
    Signal,
}

/// Waits up to `wait` for the stage's socket (unless `closed`),
/// servegate's socket or a signal; nothing ready means the time is up.
fn wait_for(
    stage: &UnixStream,
    closed: bool,
    up: &UnixStream,
    signals: &SignalFd,
    wait: Duration,
) -> Result<Vec<Ready>, String> {
    let flags = PollFlags::POLLIN;
    let mut kinds = vec![Ready::Servegate, Ready::Signal];
    let mut fds = vec![
        PollFd::new(up.as_fd(), flags),
        PollFd::new(signals.as_fd(), flags),
    ];
    if !closed {
        kinds.push(Ready::Stage);
        fds.push(PollFd::new(stage.as_fd(), flags));
    }
    let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
    match poll(&mut fds, timeout) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
        Err(e) => return Err(format!("failed to poll: {e}")),
    }
    Ok(kinds
        .into_iter()
        .zip(&fds)
        .filter(|(_, p)| p.revents().is_some_and(|r| !r.is_empty()))
        .map(|(what, _)| what)
        .collect())
}

fn note(finished: &mut Finished, report: Report) {
    match report {
        Report::Layers(layers) => finished.layers = layers,
        Report::Exit(exit) => finished.exit = Some(exit),
        Report::Error(e) => finished.error = Some(e),
        Report::Refused(missing) => finished.refused = Some(missing),
        Report::LeftBehind(n) => finished.contained.push(left_behind(n)),
    }
}

fn left_behind(n: u32) -> String {
    format!(
        "{n} process{} of the program still running when it ended {} killed",
        if n == 1 { "" } else { "es" },
        if n == 1 { "was" } else { "were" }
    )
}

/// What a cleanup did: processes killed, and those it gave up on.
#[derive(Debug, PartialEq, Eq)]
struct Cleanup {
    killed: u32,
    left: u32,
}

/// Kills every process reparented to this subreaper (a killed process's
/// children come here in turn), reaping them, for up to `CLEANUP`.
fn kill_descendants(stage: &Child) -> Cleanup {
    let me = std::process::id();
    kill_until_gone(
        || {
            children_of(me)
                .into_iter()
                .filter(|&c| c != stage.id())
                .collect()
        },
        |c| {
            if let Ok(pid) = i32::try_from(c) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        },
        || {
            // Reap them, so they leave the process table.
            while let Ok(status) =
                nix::sys::wait::waitpid(None, Some(nix::sys::wait::WaitPidFlag::WNOHANG))
            {
                if status == nix::sys::wait::WaitStatus::StillAlive {
                    std::thread::sleep(Duration::from_millis(1));
                    break;
                }
            }
        },
        CLEANUP,
    )
}

/// Kills what `children` lists and reaps, until it lists nothing or
/// `limit` has passed.
fn kill_until_gone(
    mut children: impl FnMut() -> Vec<u32>,
    mut kill: impl FnMut(u32),
    mut reap: impl FnMut(),
    limit: Duration,
) -> Cleanup {
    let mut killed = std::collections::BTreeSet::new();
    let started = Instant::now();
    let mut left = Vec::new();
    while started.elapsed() < limit {
        left = children();
        if left.is_empty() {
            break;
        }
        for &c in &left {
            kill(c);
            killed.insert(c);
        }
        reap();
    }
    Cleanup {
        killed: u32::try_from(killed.len()).unwrap_or(u32::MAX),
        left: u32::try_from(left.len()).unwrap_or(u32::MAX),
    }
}

/// The live (not zombie) children of `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    crate::process::procfs::processes()
        .into_iter()
        .filter(|p| !p.is_zombie() && i64::from(p.ppid) == i64::from(pid))
        .filter_map(|p| u32::try_from(p.pid).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cleanup ends when nothing is left, and gives up at its limit
    /// with what is still there; the backstop outlasts it all.
    #[test]
    fn the_cleanup_gives_up_within_its_limit() {
        let mut rounds = 0;
        let gone = kill_until_gone(
            || {
                rounds += 1;
                if rounds < 3 { vec![7, 8] } else { Vec::new() }
            },
            |_| {},
            || {},
            Duration::from_secs(5),
        );
        assert_eq!(gone, Cleanup { killed: 2, left: 0 });
        let started = Instant::now();
        let stuck = kill_until_gone(|| vec![7], |_| {}, || {}, Duration::from_millis(50));
        assert_eq!(stuck, Cleanup { killed: 1, left: 1 });
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    /// Blocked is what is neither run nor waited, up to the limit.
    #[test]
    fn blocked_is_the_clock_neither_run_nor_waited_up_to_the_limit() {
        let (ms, s) = (Duration::from_millis, Duration::from_secs);
        let limit = s(2);
        // An endless loop: it ran all the time it did not wait.
        assert_eq!(
            blocked(s(2), Some(ms(300)), Some(ms(1_700)), limit),
            Some(Duration::ZERO)
        );
        // A start-up stalled on its reads: 1.8 s blocked.
        assert_eq!(
            blocked(s(2), Some(ms(50)), Some(ms(150)), limit),
            Some(ms(1_800))
        );
        // Asleep for ever: blocked counts up to the limit, no further.
        assert_eq!(blocked(s(9), None, Some(ms(40)), limit), Some(limit));
        assert_eq!(blocked(s(2), Some(ms(50)), None, limit), None);
    }

    /// The limit moves later by the time waited for a CPU, never past the
    /// clock's cap.
    #[test]
    fn the_limit_moves_by_the_wait_up_to_the_cap() {
        let limit = Duration::from_secs(2);
        assert_eq!(allowed(limit, Duration::ZERO), limit);
        assert_eq!(
            allowed(limit, Duration::from_secs(1)),
            Duration::from_secs(3)
        );
        assert_eq!(
            allowed(limit, Duration::from_secs(15)),
            Duration::from_secs(17)
        );
        assert_eq!(
            allowed(limit, Duration::from_secs(60)),
            Duration::from_secs(20)
        );
    }
}
