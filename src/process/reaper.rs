//! No launched server and no sandboxed program outlives servegate: every
//! live process group is registered here, and the first registration
//! installs a watcher that, on SIGINT, SIGTERM or SIGHUP, stops every
//! registered group, then removes what the sandboxes leave (their work
//! directories), before exiting (results already measured are on disk:
//! they are written after each trial). A reader that closed servegate's
//! output (`servegate run … | head`) stops the run the same way.

use std::process::Child;
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Set when a signal (or a closed output) interrupted the run; everything
/// is then stopped and the process exits, however the trial in flight
/// ended.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The thread that stops everything, once one does.
static STOPPER: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

/// Whether a signal, or a reader that closed servegate's output,
/// interrupted the run.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Parks the calling thread for good while another stops everything: a
/// trial whose program it killed must not report that as the program's
/// own end, nor may the run finish (and exit) first; the stopping thread
/// exits the process with the code of its cause.
pub(crate) fn park_if_stopping() {
    while interrupted() {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// What the run writes when a signal or a closed output interrupts it (its
/// record and reports).
type Hook = Box<dyn Fn() + Send + Sync>;

static ON_INTERRUPT: Mutex<Option<Hook>> = Mutex::new(None);

/// Installs the signal watcher now, with what it runs once it has stopped
/// every server and sandbox: the run's last record and reports (bounded to
/// five seconds).
pub fn on_interrupt(hook: Hook) {
    if let Ok(mut h) = ON_INTERRUPT.lock() {
        *h = Some(hook);
    }
    watch_signals();
}

/// Removes what [`on_interrupt`] installed: the run it wrote for is over
/// (a later signal stops what still runs, and writes nothing of it).
pub fn no_interrupt_hook() {
    if let Ok(mut h) = ON_INTERRUPT.lock() {
        *h = None;
    }
}

/// What to remove once a sandbox's group is stopped.
type Cleanup = Box<dyn FnOnce() + Send>;

/// Sandboxes: their supervisor's group (also in `LIVE`) and their cleanup.
static SANDBOXES: Mutex<Vec<(u32, Cleanup)>> = Mutex::new(Vec::new());

/// Which signal a stop sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM: shut down.
    Term,
    /// SIGKILL.
    Kill,
}

/// Records a live process group (led by `pid`).
pub fn register(pid: u32) {
    watch_signals();
    if let Ok(mut live) = LIVE.lock() {
        live.push(pid);
    }
}

/// The live launched servers.
pub fn live() -> Vec<u32> {
    LIVE.lock().map(|l| l.clone()).unwrap_or_default()
}

/// Forgets a group; `false` if it was not registered (already stopped).
pub(crate) fn unregister(pid: u32) -> bool {
    LIVE.lock().is_ok_and(|mut live| {
        let before = live.len();
        live.retain(|&p| p != pid);
        live.len() < before
    })
}

/// Records a sandbox: the process group its supervisor leads (sent SIGTERM
/// on a signal, like a server, and SIGKILL if still there 5 s later), and
/// what to remove after.
pub(crate) fn register_sandbox(pid: u32, cleanup: Cleanup) {
    register(pid);
    if let Ok(mut s) = SANDBOXES.lock() {
        s.push((pid, cleanup));
    }
}

/// Forgets a sandbox whose run is over (its owner cleans up).
pub(crate) fn unregister_sandbox(pid: u32) {
    unregister(pid);
    if let Ok(mut s) = SANDBOXES.lock() {
        s.retain(|(p, _)| *p != pid);
    }
}

/// Sends `stop` to the process group led by `pid` (to the child alone where
/// there are no process groups). `false` when nothing was there.
#[cfg(unix)]
pub(crate) fn signal_group(pid: u32, stop: Stop, _child: &mut Child) -> bool {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    let sig = match stop {
        Stop::Term => Signal::SIGTERM,
        Stop::Kill => Signal::SIGKILL,
    };
    killpg(Pid::from_raw(pid), sig).is_ok()
}

/// Sends `stop` to the child (no process groups here: both kill it).
#[cfg(not(unix))]
pub(crate) fn signal_group(_pid: u32, _stop: Stop, child: &mut Child) -> bool {
    child.kill().is_ok()
}

/// Whether anything is left in the group led by `pid`.
#[cfg(unix)]
fn group_alive(pid: u32) -> bool {
    use nix::sys::signal::killpg;
    use nix::unistd::Pid;
    i32::try_from(pid).is_ok_and(|p| killpg(Pid::from_raw(p), None).is_ok())
}

/// The reader of servegate's standard output or error closed it (`servegate
/// run … | head`): nobody reads the rest, so the run stops as on Ctrl-C —
/// its servers and sandboxes stopped, the record of the trials that
/// finished written — and the process exits 141, the code a shell gives a
/// process a closed pipe ended. Called from the panic hook of the write
/// that failed.
pub fn stop_for_closed_output() -> ! {
    stop_all_and_exit("its output was closed", crate::exit::Exit::ClosedPipe)
}

/// On a signal: SIGTERM to every group, up to 5 s for them to go, SIGKILL;
/// then the run's record and `exit`. A second caller (a signal while a
/// closed output stops the run) waits for the first. Nothing here panics
/// on a closed standard error.
fn stop_all_and_exit(why: &str, exit: crate::exit::Exit) -> ! {
    use std::io::Write as _;
    // Whatever the cause, an output whose reader is gone is pointed at
    // /dev/null first: a write to it (a warning of a sandbox's clean-up,
    // another thread's line) would panic again inside the panic hook.
    silence_closed_outputs();
    if INTERRUPTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        // The stopping thread itself met a closed output mid-stop (its
        // reader went away just then): it cannot go on from a panic, and
        // no one else would exit.
        if STOPPER.get() == Some(&std::thread::current().id()) {
            std::process::exit(exit.code().into());
        }
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    let _ = STOPPER.set(std::thread::current().id());
    let live: Vec<u32> = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
    let sandboxes: Vec<(u32, Cleanup)> = SANDBOXES
        .lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default();
    // (A closed output with nothing to stop, `servegate list | head`, ends
    // quietly.)
    if !live.is_empty() || !matches!(exit, crate::exit::Exit::ClosedPipe) {
        let _ = writeln!(
            std::io::stderr(),
            "servegate: {why}: stopping {} launched server(s) and {} sandboxed program(s)",
            live.len() - sandboxes.len().min(live.len()),
            sandboxes.len()
        );
    }
    #[cfg(unix)]
    {
        use nix::sys::signal::{Signal, killpg};
        use nix::unistd::Pid;
        let each = |sig: Signal| {
            for &pid in &live {
                if let Ok(p) = i32::try_from(pid) {
                    let _ = killpg(Pid::from_raw(p), sig);
                }
            }
        };
        each(Signal::SIGTERM);
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until && live.iter().any(|&p| group_alive(p)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        each(Signal::SIGKILL);
    }
    for (_, cleanup) in sandboxes {
        cleanup();
    }
    // The record of what finished, and its reports: written on a thread of
    // their own, waited for at most five seconds.
    let hook = ON_INTERRUPT.lock().ok().and_then(|mut h| h.take());
    if let Some(hook) = hook {
        let (done, wait) = std::sync::mpsc::channel();
        let _ = std::thread::Builder::new()
            .name("servegate-last-record".into())
            .spawn(move || {
                hook();
                let _ = done.send(());
            });
        let _ = wait.recv_timeout(Duration::from_secs(5));
    }
    std::process::exit(exit.code().into())
}

/// Points standard output and error at /dev/null where their reader is
/// gone (a pipe whose read end is closed: `poll` says `POLLERR`); one still
/// read (a terminal, a file, a live pipe) is kept.
#[cfg(unix)]
fn silence_closed_outputs() {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd as _;
    let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else {
        return;
    };
    let gone = |fd: std::os::fd::BorrowedFd<'_>| {
        let mut fds = [PollFd::new(fd, PollFlags::POLLOUT)];
        poll(&mut fds, PollTimeout::ZERO).is_ok()
            && fds[0]
                .revents()
                .is_some_and(|r| r.contains(PollFlags::POLLERR))
    };
    if gone(std::io::stdout().as_fd()) {
        let _ = nix::unistd::dup2_stdout(&null);
    }
    if gone(std::io::stderr().as_fd()) {
        let _ = nix::unistd::dup2_stderr(&null);
    }
}

#[cfg(not(unix))]
fn silence_closed_outputs() {}

/// Installs the signal watcher once, on a thread of its own (the harness's
/// runtime is busy with trials and may be single-threaded).
fn watch_signals() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("servegate-signals".into())
            .spawn(|| {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                let name = rt.block_on(wait_for_signal());
                if let Some(name) = name {
                    stop_all_and_exit(name, crate::exit::Exit::Interrupted);
                }
            });
        if let Err(e) = spawned {
            eprintln!("warning: could not watch for Ctrl-C ({e}): an interrupted run may leave its server running");
        }
    });
}

#[cfg(unix)]
async fn wait_for_signal() -> Option<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt()).ok()?;
    let mut term = signal(SignalKind::terminate()).ok()?;
    let mut hup = signal(SignalKind::hangup()).ok()?;
    tokio::select! {
        _ = int.recv() => Some("interrupted (SIGINT)"),
        _ = term.recv() => Some("terminated (SIGTERM)"),
        _ = hup.recv() => Some("hung up (SIGHUP)"),
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() -> Option<&'static str> {
    tokio::signal::ctrl_c().await.ok()?;
    Some("interrupted (Ctrl-C)")
}
