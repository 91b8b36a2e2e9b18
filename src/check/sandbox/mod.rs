//! Running model-written code, which is untrusted input: a broken model, a
//! quantisation bug or a prompt-injected answer may write anything.
//!
//! On Linux servegate re-executes itself as a helper (`servegate __sandbox`)
//! that contains the program in layers, each used where the kernel and the
//! host allow it (see docs/src/security.md):
//! namespaces (pid, net, mount, ipc, uts; user unless root), Landlock, a seccomp filter,
//! rlimits and a cgroup leaf, and the host's Unix sockets kept out of reach
//! by one of them (see `sockets`); always a time limit (the clock less the
//! time the program waited for a CPU behind other work, up to
//! `CLOCK_CAP` times the limit on the clock), output through pipes read
//! with a byte cap, a random work directory removed on every exit
//! path (signals included, through `crate::process::reaper`) and an
//! environment built from scratch. Elsewhere: rlimits, the timeout and a
//! warning.

use std::fmt::Write as _;
use std::os::fd::OwnedFd;
use std::process::ExitStatus;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::suite::ProgramLimits;

mod output;
mod workdir;

#[cfg(target_os = "linux")]
mod cgroup;
#[cfg(target_os = "linux")]
pub mod helper;
#[cfg(target_os = "linux")]
mod init;
#[cfg(target_os = "linux")]
mod landlock;
#[cfg(target_os = "linux")]
mod launch;
#[cfg(target_os = "linux")]
mod limits;
#[cfg(target_os = "linux")]
mod namespaces;
#[cfg(not(target_os = "linux"))]
mod portable;
#[cfg(target_os = "linux")]
mod protocol;
#[cfg(target_os = "linux")]
mod seccomp;
#[cfg(target_os = "linux")]
mod sockets;

/// The environment variable naming layers to treat as refused by the host
/// (`namespaces,landlock,seccomp,cgroup,descriptors`): how the fallback layers are
/// proven on a host that has them all.
pub const REFUSE_ENV: &str = "SERVEGATE_SANDBOX_REFUSE";

/// The most bytes read of each of stdout and stderr; past it the program is
/// killed.
pub(crate) const OUTPUT_CAP: u64 = 8 * 1024 * 1024;

/// The most processes (and threads) the program may have at once.
pub(crate) const PROCESSES: u64 = 64;

/// Tasks of the helper stages themselves (the supervisor's threads and
/// pid 1), which the cgroup's process limit counts with the program's.
#[cfg(target_os = "linux")]
const HELPER_TASKS: u64 = 6;

/// On a busy machine a program's time limit is the time it could run:
/// the clock, less the time it was runnable but waited for a CPU behind
/// other work (the kernel's run-queue delay, where the kernel says). On the
/// clock it runs at most this many times its limit: past that the machine,
/// not the program, is too slow to judge, and the message says so. Ten
/// times: a program given a fifth of a CPU (four busy processes beside it
/// on each core, as CI's loaded run has them) still gets twice its limit
/// to run, and a hostile program that contends with itself holds the
/// sandbox at most ten times its limit.
pub(crate) const CLOCK_CAP: u32 = 10;

/// The largest file the program may write, in MiB.
pub(crate) const FILE_MIB: u64 = 64;

/// The most open files of each of its processes.
pub(crate) const OPEN_FILES: u64 = 256;

/// What `sandbox: strict` requires: each layer, with the parts of it (named
/// in its parentheses) that must hold. Namespaces without the read-only
/// mount view or a `/proc` of their own leave the host's files or
/// processes in reach; a cgroup with one limit bounds memory or forks, not
/// both; Landlock below ABI 6 lacks signal scoping (below 5, device
/// ioctls; below 4, TCP); `signals` is in force where something keeps the
/// program's signals from servegate and the server (a pid namespace,
/// Landlock scoping, or a uid of its own); `unix sockets` where something
/// keeps the host's Unix sockets (session bus, agents, `docker.sock`) out
/// of its reach (the mount view, Landlock from ABI 9, or seccomp);
/// `descriptors` where every descriptor servegate inherited was closed and
/// `/proc/self/fd` shows none left.
pub(crate) const REQUIRED: [(&str, &[&str]); 8] = [
    ("descriptors", &[]),
    ("namespaces", &["pid", "net", "mount", "proc"]),
    ("cgroup", &["memory", "pids"]),
    ("rlimits", &["cpu", "as", "fsize", "nofile", "core"]),
    ("landlock", &["fs", "tcp", "scope"]),
    ("seccomp", &[]),
    ("signals", &[]),
    ("unix sockets", &[]),
];

/// Which layers held a program.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layers {
    /// The layers in force, each with the parts of it that hold, e.g.
    /// `namespaces(user,pid,net,mount,proc,ipc,uts)`.
    pub active: Vec<String>,
    /// What is not in force, each with why: a whole layer (`cgroup: …`) or
    /// a part of one (`cgroup pids: …`, `namespaces mount: …`).
    pub unavailable: Vec<String>,
}

impl Layers {
    /// Whether a layer (`namespaces`, `landlock`, …) is in force.
    pub fn has(&self, layer: &str) -> bool {
        self.entry(layer).is_some()
    }

    /// The active entry of a layer, from just after its name.
    fn entry(&self, layer: &str) -> Option<&str> {
        self.active.iter().find_map(|a| {
            a.strip_prefix(layer)
                .filter(|rest| rest.is_empty() || rest.starts_with(['(', ' ']))
        })
    }

    /// Whether a part of a layer holds: the layer names it (by its first
    /// word: `memory v1` is `memory`) and nothing is reported missing of it
    /// (`landlock fs: partial …`).
    pub fn holds(&self, layer: &str, part: &str) -> bool {
        let named = self
            .entry(layer)
            .and_then(|rest| rest.strip_prefix('('))
            .and_then(|rest| rest.split_once(')'))
            .is_some_and(|(inside, _)| {
                inside
                    .split(',')
                    .any(|p| p.split_whitespace().next() == Some(part))
            });
        named && self.why_not(&format!("{layer} {part}")).is_none()
    }

    /// What is reported missing under `name` (`cgroup`, `cgroup pids`).
    fn why_not(&self, name: &str) -> Option<&String> {
        self.unavailable
            .iter()
            .find(|u| u.split_once(": ").is_some_and(|(n, _)| n == name))
    }

    /// What `sandbox: strict` requires and is not in force, each with why.
    pub(crate) fn missing_required(&self) -> Vec<String> {
        let why = |name: &str| {
            self.why_not(name)
                .cloned()
                .unwrap_or_else(|| format!("{name}: not in force"))
        };
        let mut missing = Vec::new();
        for (layer, parts) in REQUIRED {
            if !self.has(layer) {
                missing.push(why(layer));
                continue;
            }
            for part in parts {
                if !self.holds(layer, part) {
                    missing.push(why(&format!("{layer} {part}")));
                }
            }
        }
        missing
    }

    /// The layers by name alone, for the run's one line on stderr:
    /// `namespaces + landlock + rlimits; seccomp unavailable` (the parts and
    /// why are in [`summary`](Self::summary), the record and `--verbose`).
    pub fn short(&self) -> String {
        let mut line = if self.active.is_empty() {
            "no layer".to_owned()
        } else {
            let names: Vec<&str> = self
                .active
                .iter()
                .map(|l| l.split_once('(').map_or(l.as_str(), |(name, _)| name))
                .collect();
            names.join(" + ")
        };
        let missing: Vec<&str> = self
            .unavailable
            .iter()
            .map(|u| u.split_once(": ").map_or(u.as_str(), |(name, _)| name))
            .collect();
        if !missing.is_empty() {
            let _ = write!(line, "; {} unavailable", missing.join(", "));
        }
        line
    }

    /// One line: `namespaces(user,pid,net,mount,proc,ipc,uts) + rlimits(…);
    /// seccomp unavailable (…)`.
    pub fn summary(&self) -> String {
        let mut line = if self.active.is_empty() {
            "no layer".to_owned()
        } else {
            self.active.join(" + ")
        };
        for u in &self.unavailable {
            let (name, why) = u.split_once(": ").unwrap_or((u, ""));
            let _ = write!(line, "; {name} unavailable ({why})");
        }
        line
    }

    fn not_available(&mut self, layer: &str, why: impl std::fmt::Display) {
        self.unavailable.push(format!("{layer}: {why}"));
    }
}

/// Why the sandbox ended a program before it ended by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// It ran past its time limit. `waited`: how long, when the limit
    /// came, it had waited for a CPU behind other work (its limit moved
    /// that much later on the clock, up to `CLOCK_CAP` times the limit);
    /// `None` where the kernel does not say.
    Timeout {
        /// See the variant.
        waited: Option<Duration>,
        /// How long it had been blocked (neither on a CPU nor waiting for
        /// one) when the limit came, which moved the limit later by at most
        /// the limit; `None` where the kernel does not say.
        blocked: Option<Duration>,
    },
    /// It wrote more than `OUTPUT_CAP` bytes to this stream.
    OutputCap(&'static str),
    /// It was not run: layers `sandbox: strict` requires are unavailable,
    /// each with why (`Layers::missing_required`).
    Refused(Vec<String>),
}

impl Stop {
    /// Why the sandbox ended the program, in words.
    pub fn describe(&self, limits: &ProgramLimits) -> String {
        match self {
            Self::Timeout { waited, blocked } => timed_out(limits.timeout, *waited, *blocked),
            Self::OutputCap(stream) => format!(
                "killed: its {stream} passed the {} MiB output cap",
                OUTPUT_CAP / (1024 * 1024)
            ),
            Self::Refused(missing) => format!(
                "not run: `sandbox: strict` needs every layer; unavailable here: {}",
                missing.join("; ")
            ),
        }
    }
}

/// A time limit's end in words: an endless loop's, a blocked program's,
/// or a busy machine's. Each begins `killed at the <limit> time limit`.
fn timed_out(limit: Duration, waited: Option<Duration>, blocked: Option<Duration>) -> String {
    let format = |d: Duration| humantime::format_duration(d).to_string();
    let some = |d: Option<Duration>| d.filter(|d| *d >= Duration::from_millis(100));
    let (waited, blocked) = (some(waited), some(blocked));
    // Blocked for (nearly) all the time it was given: not a loop on a CPU.
    let hint = if blocked.is_some_and(|b| b + Duration::from_millis(100) >= limit) {
        "(asleep, or waiting on a lock or a read that never came?)"
    } else {
        "(an endless loop?)"
    };
    let moved = waited.unwrap_or_default() + blocked.unwrap_or_default();
    if moved.is_zero() {
        return format!("killed at the {} time limit {hint}", format(limit));
    }
    let cap = limit.saturating_mul(CLOCK_CAP);
    if limit.saturating_add(moved) >= cap {
        return format!(
            "killed at the {} time limit's cap on the clock, {:.1}s ({CLOCK_CAP}× the limit), having waited {:.1}s of them for a CPU behind other work: the machine was too busy to judge the program",
            format(limit),
            cap.as_secs_f64(),
            waited.unwrap_or_default().as_secs_f64()
        );
    }
    let mut less = Vec::new();
    if let Some(w) = waited {
        less.push(format!(
            "the {:.1}s it waited for a CPU behind other work",
            w.as_secs_f64()
        ));
    }
    if let Some(b) = blocked {
        less.push(format!(
            "the {:.1}s it was blocked, off any CPU (asleep, or stalled on a read, its memory or a throttled machine)",
            b.as_secs_f64()
        ));
    }
    format!(
        "killed at the {} time limit {hint}, {:.1}s on the clock less {}",
        format(limit),
        limit.saturating_add(moved).as_secs_f64(),
        less.join(" and ")
    )
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The exit status; `None` when the sandbox ended it (`stopped`).
    pub status: Option<ExitStatus>,
    /// Why the sandbox ended it.
    pub stopped: Option<Stop>,
    /// What the sandbox stopped along the way: processes left behind and
    /// killed, forks refused at the process limit, processes killed at the
    /// memory limit.
    pub contained: Vec<String>,
    /// Its standard output (at most the last 64 KiB kept).
    pub stdout: String,
    /// Its standard error (at most the last 64 KiB kept).
    pub stderr: String,
    /// How long it ran.
    pub elapsed: Duration,
    /// How long it had waited for a CPU behind other work when its time
    /// limit came (which moved the limit that much later on the clock);
    /// `None` where it ended before its limit, or nothing says.
    pub waited: Option<Duration>,
    /// The layers that held it.
    pub layers: Layers,
}

impl Outcome {
    /// How the program ended, in words: why the sandbox stopped it, or its
    /// status and how long it ran, with a guess at why where the status
    /// says little.
    pub fn ended(&self, limits: &ProgramLimits) -> String {
        if let Some(stop) = &self.stopped {
            return format!("the program was {}", stop.describe(limits));
        }
        let Some(status) = self.status else {
            return "the program ended without a status".to_owned();
        };
        let exit = crate::process::ExitInfo::new(status);
        let why = match status.code() {
            Some(127) => format!(" (`{}` not found?)", limits.interpreter.join(" ")),
            Some(_) => String::new(),
            None => format!(
                " (past the {} CPU-time or {} MiB memory limit?)",
                humantime::format_duration(limits.timeout),
                limits.memory_mib
            ),
        };
        format!("the program {exit}{why} after {:.0?}", self.elapsed)
    }

    /// Whether it exited with status 0 and the sandbox had nothing to stop.
    pub fn passed(&self) -> bool {
        self.stopped.is_none()
            && self.contained.is_empty()
            && self.status.is_some_and(|s| s.success())
    }
}

/// Runs `program` under `limits`; `Err` when the sandbox could not be set
/// up (a "failed to …" fragment).
pub fn run(program: &str, limits: &ProgramLimits) -> Result<Outcome, String> {
    run_with(program, limits, None)
}

/// Runs `program` under `limits` with `channel` for its standard output
/// instead of a pipe servegate reads (`Outcome::stdout` is then empty): a
/// socket whose other end is the test runner's (see `check::pyrunner`).
pub(crate) fn run_talking(
    program: &str,
    limits: &ProgramLimits,
    channel: OwnedFd,
) -> Result<Outcome, String> {
    run_with(program, limits, Some(channel))
}

fn run_with(
    program: &str,
    limits: &ProgramLimits,
    channel: Option<OwnedFd>,
) -> Result<Outcome, String> {
    let refused = refused_layers();
    #[cfg(target_os = "linux")]
    let outcome = launch::run(program, limits, &refused, channel)?;
    #[cfg(not(target_os = "linux"))]
    let outcome = portable::run(program, limits, &refused, channel)?;
    announce(&outcome.layers);
    Ok(outcome)
}

/// The layers `REFUSE_ENV` asks to treat as refused.
fn refused_layers() -> Vec<String> {
    std::env::var(REFUSE_ENV)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether the layers are announced part by part (`--verbose`).
static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Announce the sandbox's layers part by part, with why a part is missing
/// (`servegate run --verbose`), rather than by name.
pub fn set_verbose(verbose: bool) {
    VERBOSE.store(verbose, Ordering::Relaxed);
}

/// Prints the layers at the first program run, and again whenever a
/// program's layers differ from those printed last (a host may refuse a
/// layer for one program and not the next), with a warning where nothing
/// keeps the program from writing files or reaching the network.
fn announce(layers: &Layers) {
    static LAST: Mutex<Option<String>> = Mutex::new(None);
    let Ok(mut last) = LAST.lock() else {
        return;
    };
    for line in announcement(&mut last, layers) {
        eprintln!("{line}");
    }
}

/// The lines `announce` prints for `layers`, given the line printed last:
/// none when it would print the same line again (the short line names
/// layers only, so a change within a layer is not news there).
fn announcement(last: &mut Option<String>, layers: &Layers) -> Vec<String> {
    let line = if VERBOSE.load(Ordering::Relaxed) {
        format!("servegate: sandbox: {}", layers.summary())
    } else {
        format!(
            "servegate: sandbox: {} (--verbose: each part, and why)",
            layers.short()
        )
    };
    if last.as_deref() == Some(line.as_str()) {
        return Vec::new();
    }
    *last = Some(line.clone());
    let mut lines = vec![line];
    if !layers.has("namespaces") && !layers.has("landlock") {
        lines.push(
            "warning: the sandbox cannot keep model-written code from writing the user's files or reaching the network on this host".into(),
        );
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_name_what_holds_and_what_strict_misses() {
        let layers = Layers {
            active: vec![
                "descriptors(closed 2 inherited)".into(),
                "namespaces(user,pid,net,mount,proc,ipc,uts)".into(),
                "rlimits(cpu,as,fsize,nofile,core)".into(),
                "landlock(fs,tcp,scope) abi 7".into(),
                "signals(pid namespace,landlock scope)".into(),
                "unix sockets(mount view)".into(),
            ],
            unavailable: vec!["seccomp: refused by the host".into()],
        };
        assert!(layers.has("namespaces") && layers.has("landlock"));
        assert!(!layers.has("name") && !layers.has("seccomp"));
        assert!(layers.holds("namespaces", "mount") && !layers.holds("namespaces", "moun"));
        assert!(layers.holds("signals", "pid") && layers.holds("signals", "landlock"));
        assert!(layers.has("unix sockets") && layers.holds("unix sockets", "mount"));
        assert_eq!(
            layers.missing_required(),
            ["cgroup: not in force", "seccomp: refused by the host"]
        );
        let mut last = None;
        let first = announcement(&mut last, &layers);
        assert_eq!(first.len(), 1);
        assert!(announcement(&mut last, &layers).is_empty());
        // A change within a layer changes no name: the same short line is
        // not printed twice.
        let mut within = layers.clone();
        within.active[0] = "descriptors(closed 3 inherited)".into();
        assert!(announcement(&mut last, &within).is_empty());
        let mut fewer = layers.clone();
        fewer
            .active
            .retain(|l| !l.starts_with("namespaces") && !l.starts_with("descriptors"));
        fewer.active.retain(|l| !l.starts_with("landlock"));
        let again = announcement(&mut last, &fewer);
        assert!(
            again[0].starts_with(
                "servegate: sandbox: rlimits + signals + unix sockets; seccomp unavailable ("
            ),
            "{again:?}"
        );
        assert_eq!(
            layers.short(),
            "descriptors + namespaces + rlimits + landlock + signals + unix sockets; seccomp unavailable"
        );
        assert!(again[1].starts_with("warning: "), "{again:?}");
        assert_eq!(
            layers.summary(),
            "descriptors(closed 2 inherited) + namespaces(user,pid,net,mount,proc,ipc,uts) + rlimits(cpu,as,fsize,nofile,core) + landlock(fs,tcp,scope) abi 7 + signals(pid namespace,landlock scope) + unix sockets(mount view); seccomp unavailable (refused by the host)"
        );
    }

    /// A layer in force with a part missing or partial does not satisfy
    /// `strict`: each missing part is named, with why.
    #[test]
    fn strict_needs_every_part_of_a_layer() {
        let layers = Layers {
            active: vec![
                "namespaces(user,pid,net,ipc,uts)".into(),
                "cgroup(memory v1)".into(),
                "rlimits(cpu,as,fsize,nofile,core)".into(),
                "landlock(fs,tcp) abi 4".into(),
                "seccomp".into(),
            ],
            unavailable: vec![
                "descriptors: [7] still open after closing what servegate inherited".into(),
                "namespaces mount: failed to make / read-only: EPERM".into(),
                "cgroup pids: v1 pids at /sys/fs/cgroup/pids: EACCES".into(),
                "landlock fs: partial at ABI 4 (no rules for device ioctls: ABI 5, Linux 6.10)"
                    .into(),
                "landlock scope: needs ABI 6 (Linux 6.12)".into(),
                "signals: no pid namespace, no Landlock scoping, servegate's uid".into(),
                "unix sockets: no mount view, Landlock ABI 4, seccomp refused".into(),
            ],
        };
        assert!(layers.holds("cgroup", "memory") && !layers.holds("cgroup", "pids"));
        assert!(!layers.holds("landlock", "fs") && layers.holds("landlock", "tcp"));
        assert_eq!(
            layers.missing_required(),
            [
                "descriptors: [7] still open after closing what servegate inherited",
                "namespaces mount: failed to make / read-only: EPERM",
                "namespaces proc: not in force",
                "cgroup pids: v1 pids at /sys/fs/cgroup/pids: EACCES",
                "landlock fs: partial at ABI 4 (no rules for device ioctls: ABI 5, Linux 6.10)",
                "landlock scope: needs ABI 6 (Linux 6.12)",
                "signals: no pid namespace, no Landlock scoping, servegate's uid",
                "unix sockets: no mount view, Landlock ABI 4, seccomp refused",
            ]
        );
    }

    /// A time limit's end names the wait for a CPU and the time blocked
    /// that moved it, a program blocked all along as such, and a machine
    /// too busy to judge the program where the clock's cap ended it, each
    /// beginning as an endless loop's does.
    #[test]
    fn a_time_limit_names_the_wait_for_a_cpu() {
        let limit = Duration::from_secs(10);
        let (ms, s) = (Duration::from_millis, Duration::from_secs);
        let loop_ = "killed at the 10s time limit (an endless loop?)";
        assert_eq!(timed_out(limit, None, None), loop_);
        assert_eq!(timed_out(limit, Some(ms(40)), Some(ms(60))), loop_);
        assert_eq!(
            timed_out(limit, Some(ms(4_200)), None),
            "killed at the 10s time limit (an endless loop?), 14.2s on the clock less the 4.2s it waited for a CPU behind other work"
        );
        assert_eq!(
            timed_out(limit, Some(ms(4_200)), Some(ms(1_300))),
            "killed at the 10s time limit (an endless loop?), 15.5s on the clock less the 4.2s it waited for a CPU behind other work and the 1.3s it was blocked, off any CPU (asleep, or stalled on a read, its memory or a throttled machine)"
        );
        assert_eq!(
            timed_out(limit, None, Some(s(10))),
            "killed at the 10s time limit (asleep, or waiting on a lock or a read that never came?), 20.0s on the clock less the 10.0s it was blocked, off any CPU (asleep, or stalled on a read, its memory or a throttled machine)"
        );
        assert_eq!(
            timed_out(limit, Some(s(91)), None),
            "killed at the 10s time limit's cap on the clock, 100.0s (10× the limit), having waited 91.0s of them for a CPU behind other work: the machine was too busy to judge the program"
        );
        assert!(timed_out(limit, Some(s(89)), None).contains("99.0s on the clock"));
        // Every end begins alike: a check of a time limit's end holds on an
        // idle machine and on one too busy to judge the program.
        for waited in [0, 4, 89, 91, 1_000] {
            for blocked in [0, 3, 10] {
                let words = timed_out(limit, Some(s(waited)), Some(s(blocked)));
                assert!(words.starts_with("killed at the 10s time limit"), "{words}");
            }
        }
    }
}
