//! Processes servegate starts and must not lose, whoever they are — a
//! launched server or a code probe's sandbox: how one ended, what `/proc`
//! says about them, the re-executed start that ties them to servegate's
//! life, and the reaper that stops them all on Ctrl-C or SIGTERM. Below the
//! server and the checks; it knows neither.

#[cfg(target_os = "linux")]
pub mod procfs;
pub(crate) mod reaper;
pub mod tree;

pub use reaper::{interrupted, no_interrupt_hook, on_interrupt, stop_for_closed_output};

use std::fmt;
use std::process::ExitStatus;

/// Closes every descriptor above stderr this process was started with,
/// called first in a re-executed servegate (a code probe's sandbox helper,
/// a launched server's start) where it holds none of its own yet: what
/// servegate's parent left open (a CI runner's, a shell's `7<file`,
/// `time -o`) is nothing a program or server servegate starts may reach.
/// Without `/proc` every number below the hard open-file limit is tried.
#[cfg(unix)]
pub(crate) fn close_inherited() -> Inherited {
    let listed = open_descriptors();
    let numbers = listed.clone().unwrap_or_else(|| {
        let (_, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .unwrap_or((0, 1 << 16));
        (3..i32::try_from(hard.min(1 << 20)).unwrap_or(1 << 16)).collect()
    });
    // Not open: EBADF.
    let closed = numbers
        .into_iter()
        .filter(|&fd| nix::unistd::close(fd).is_ok())
        .count();
    Inherited {
        closed,
        left: listed.and_then(|_| open_descriptors()),
    }
}

/// What [`close_inherited`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inherited {
    /// Descriptors it closed.
    pub closed: usize,
    /// Those open above stderr after it, listed again; `None` without a
    /// `/proc/self/fd` to list them (it could not be verified).
    pub left: Option<Vec<i32>>,
}

/// The descriptors above stderr this process holds, from
/// `/proc/self/fd` (less the one of that listing); `None` without it.
#[cfg(unix)]
fn open_descriptors() -> Option<Vec<i32>> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    let listing = std::path::PathBuf::from(format!("/proc/{}/fd", std::process::id()));
    Some(
        dir.filter_map(|e| {
            let e = e.ok()?;
            let fd: i32 = e.file_name().to_str()?.parse().ok()?;
            // The listing's own descriptor points at the directory listed.
            let own = std::fs::read_link(e.path()).is_ok_and(|to| to == listing);
            (fd > 2 && !own).then_some(fd)
        })
        .collect(),
    )
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo(ExitStatus);

impl ExitInfo {
    /// How a process ended, in words.
    pub fn new(status: ExitStatus) -> Self {
        Self(status)
    }
}

impl fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(code) = self.0.code() {
            return write!(f, "exited with code {code}");
        }
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt as _;
            if let Some(sig) = self.0.signal() {
                let name = nix::sys::signal::Signal::try_from(sig).map_or("?", |s| s.as_str());
                return write!(f, "was killed by signal {sig} ({name})");
            }
        }
        write!(f, "ended ({})", self.0)
    }
}

/// The output of a command, trimmed; `None` when it fails or is absent.
pub(crate) fn command_output(
    program: &str,
    args: &[&str],
    dir: Option<&std::path::Path>,
) -> Option<String> {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).stderr(std::process::Stdio::null());
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// This process's CPU time so far (user and system, every thread).
pub(crate) fn cpu_time() -> Option<std::time::Duration> {
    #[cfg(unix)]
    {
        use nix::sys::resource::{UsageWho, getrusage};
        let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
        let secs = |t: nix::sys::time::TimeVal| {
            std::time::Duration::new(
                u64::try_from(t.tv_sec()).unwrap_or(0),
                u32::try_from(t.tv_usec()).unwrap_or(0) * 1000,
            )
        };
        Some(secs(u.user_time()) + secs(u.system_time()))
    }
    #[cfg(not(unix))]
    None
}
