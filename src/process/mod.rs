//! Processes servegate starts and must not lose, whoever they are — a
//! launched server or a code probe's sandbox: how one ended, what `/proc`
//! says about them, the re-executed start that ties them to servegate's
//! life, and the reaper that stops them all on Ctrl-C or SIGTERM. Below the
//! server and the checks; it knows neither.

#[cfg(target_os = "linux")]
pub mod procfs;
pub(crate) mod reaper;
pub mod tree;

pub use reaper::{interrupted, on_interrupt};

use std::fmt;
use std::process::ExitStatus;

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
