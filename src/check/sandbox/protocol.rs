//! What servegate and its helper stages say to each other: one JSON object
//! a line over a Unix socket that is each stage's standard input (so a
//! stage also learns from its end that its parent is gone). The program
//! never holds one of these sockets.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsFd as _;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Layers;
use super::namespaces::Entered;
use super::sockets::Outside;

/// What to run, and how: sent down from servegate to the supervisor, and
/// from the supervisor to the stage that runs the program.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Job {
    /// The work directory (the program's only writable place).
    pub work: PathBuf,
    /// The interpreter's argv with the program's file appended.
    pub argv: Vec<String>,
    /// Paths the program may read beyond the system's (`sandbox.read`).
    pub read: Vec<PathBuf>,
    /// The program's whole environment.
    pub env: Vec<(String, String)>,
    /// Time limit, milliseconds (see `CLOCK_CAP`).
    pub timeout_ms: u64,
    /// Address-space limit of each process, MiB.
    pub memory_mib: u64,
    /// Refuse to run unless every required layer is in force.
    pub strict: bool,
    /// Layers to treat as refused by the host.
    pub refuse: Vec<String>,
    /// Layers set up so far (the cgroup by servegate, the namespaces by
    /// the supervisor).
    pub layers: Layers,
    /// Sockets of other processes to hide from the program.
    pub sockets: Outside,
    /// servegate's real uid on the host.
    pub host_uid: u32,
    /// How the supervisor entered new namespaces, if it did (the next
    /// stage is then pid 1 of the new pid namespace).
    pub namespaces: Option<Entered>,
}

/// What a stage reports to its parent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) enum Report {
    /// The layers in force, sent before the program starts.
    Layers(Layers),
    /// How the program ended.
    Exit(Exit),
    /// The program did not run: why.
    Error(String),
    /// The program was not run: layers `sandbox: strict` requires are
    /// unavailable, each with why.
    Refused(Vec<String>),
    /// Processes of the program's still running when it ended, killed.
    LeftBehind(u32),
}

/// How the program ended.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct Exit {
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

impl Exit {
    /// From a wait status.
    pub fn of(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt as _;
        Self {
            code: status.code(),
            signal: status.signal(),
        }
    }

    /// Back to a wait status.
    pub fn status(self) -> std::process::ExitStatus {
        use std::os::unix::process::ExitStatusExt as _;
        match (self.code, self.signal) {
            (_, Some(sig)) => std::process::ExitStatus::from_raw(sig & 0x7f),
            (Some(code), None) => std::process::ExitStatus::from_raw((code & 0xff) << 8),
            (None, None) => std::process::ExitStatus::from_raw(0x7f00 | 9),
        }
    }
}

/// The supervisor's last word to servegate.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Finished {
    /// The layers in force.
    pub layers: Layers,
    /// How the program ended, unless the supervisor ended it.
    pub exit: Option<Exit>,
    /// It ran past its time limit and was killed.
    pub timed_out: bool,
    /// How long, ms, the program had waited for a CPU behind other work
    /// when its time limit came (the limit moved that much later, up to
    /// `CLOCK_CAP` times it); `None` where it ended before its limit or
    /// the kernel does not say.
    pub waited_ms: Option<u64>,
    /// How long, ms, it had been blocked — neither on a CPU nor waiting
    /// for one: asleep, or stalled on a read, its memory or a throttled
    /// cgroup — when its time limit came (the limit moved that much later
    /// too, by at most the limit); `None` as `waited_ms`.
    #[serde(default)]
    pub blocked_ms: Option<u64>,
    /// The program did not run, or its stage failed: why.
    pub error: Option<String>,
    /// It was not run: the layers `sandbox: strict` requires that are
    /// unavailable, each with why.
    #[serde(default)]
    pub refused: Option<Vec<String>>,
    /// What was contained along the way.
    pub contained: Vec<String>,
}

/// A stage's link to its parent (its standard input, a socket) and the
/// job read from it: `None` without a link, the job `Ok(None)` when the
/// parent closed the link without sending one.
pub(super) fn job_from_parent() -> Option<(UnixStream, Result<Option<Job>, String>)> {
    let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    let up = UnixStream::from(fd);
    let job = up
        .try_clone()
        .map_err(|e| format!("failed to clone a socket: {e}"))
        .and_then(|r| receive(&mut BufReader::new(r)));
    Some((up, job))
}

/// Sends one message as a line.
pub(super) fn send(to: &mut impl Write, message: &impl Serialize) -> Result<(), String> {
    let mut line =
        serde_json::to_vec(message).map_err(|e| format!("failed to encode a message: {e}"))?;
    line.push(b'\n');
    to.write_all(&line)
        .and_then(|()| to.flush())
        .map_err(|e| format!("failed to send a message: {e}"))
}

/// The most bytes of one message: nothing legitimate comes near it.
const LINE_CAP: u64 = 1024 * 1024;

/// Reads one message; `Ok(None)` at the end of the stream.
pub(super) fn receive<T: for<'de> Deserialize<'de>>(
    from: &mut BufReader<impl Read>,
) -> Result<Option<T>, String> {
    let mut line = Vec::new();
    from.by_ref()
        .take(LINE_CAP)
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("failed to read a message: {e}"))?;
    if line.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(&line)
        .map(Some)
        .map_err(|e| format!("failed to decode a message: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_survive_the_trip() {
        use std::os::unix::process::ExitStatusExt as _;
        let exited = Exit {
            code: Some(3),
            signal: None,
        }
        .status();
        assert_eq!(exited.code(), Some(3));
        let killed = Exit {
            code: None,
            signal: Some(9),
        }
        .status();
        assert_eq!((killed.code(), killed.signal()), (None, Some(9)));
        let mut wire = Vec::new();
        send(&mut wire, &Report::LeftBehind(2)).unwrap();
        send(&mut wire, &Report::Error("no".into())).unwrap();
        let mut from = BufReader::new(&wire[..]);
        assert!(matches!(
            receive(&mut from),
            Ok(Some(Report::LeftBehind(2)))
        ));
        assert!(matches!(receive(&mut from), Ok(Some(Report::Error(e))) if e == "no"));
        assert!(matches!(receive::<Report>(&mut from), Ok(None)));
    }
}
