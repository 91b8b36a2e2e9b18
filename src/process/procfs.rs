//! What `/proc` says about processes. The teardown of a launched server and
//! the code-probe sandbox both look for processes there; one reader keeps
//! the parsing of `stat` (whose command name may hold spaces and
//! parentheses) in one place.

/// A process as `/proc/<pid>/stat` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    /// Its id (in the pid namespace of this `/proc`).
    pub pid: i32,
    /// Its parent's id.
    pub ppid: i32,
    /// Its state: `R`, `S`, `Z` (a zombie: ended, not yet reaped), ….
    pub state: char,
    /// The CPU time it used, user and system (`utime` + `stime`), in the
    /// kernel's clock ticks.
    pub cpu_ticks: u64,
}

impl Process {
    /// Whether it ended and only waits to be reaped.
    pub(crate) fn is_zombie(&self) -> bool {
        self.state == 'Z'
    }
}

/// The ids of the processes in `/proc`.
pub fn pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Every process in `/proc` (one that ends while it is read is left out).
pub fn processes() -> Vec<Process> {
    pids().into_iter().filter_map(process).collect()
}

/// Process `pid`, if it is there.
pub fn process(pid: i32) -> Option<Process> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// `pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
/// majflt cmajflt utime stime …`.
fn parse_stat(stat: &str) -> Option<Process> {
    let (head, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|t| t.parse::<u64>().ok());
    Some(Process {
        pid: head.split_whitespace().next()?.parse().ok()?,
        ppid: fields.get(1)?.parse().ok()?,
        state: fields.first()?.chars().next()?,
        cpu_ticks: ticks(11).unwrap_or(0) + ticks(12).unwrap_or(0),
    })
}

/// The processes descending from `root` (not `root` itself), as `/proc`
/// lists them now.
pub fn descendants(root: i32) -> Vec<i32> {
    let all = processes();
    let mut found = Vec::new();
    let mut parents = vec![root];
    while let Some(parent) = parents.pop() {
        for p in all.iter().filter(|p| p.ppid == parent && p.pid != root) {
            if !found.contains(&p.pid) {
                found.push(p.pid);
                parents.push(p.pid);
            }
        }
    }
    found
}

/// A process's scheduler figures, from each living thread's `schedstat`
/// (`/proc/<pid>/task/*/schedstat`: time on a CPU, time runnable waiting
/// for one): the time its threads ran, summed, and the longest any of them
/// waited. `None` where the kernel keeps no such figures or the process is
/// gone.
pub fn schedstat(pid: i32) -> Option<(std::time::Duration, std::time::Duration)> {
    let (mut ran, mut waited, mut any) = (0u64, 0u64, false);
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        let mut fields = stat.split_ascii_whitespace().map(str::parse::<u64>);
        if let (Some(Ok(r)), Some(Ok(w))) = (fields.next(), fields.next()) {
            ran = ran.saturating_add(r);
            waited = waited.max(w);
            any = true;
        }
    }
    any.then(|| {
        (
            std::time::Duration::from_nanos(ran),
            std::time::Duration::from_nanos(waited),
        )
    })
}

/// `/proc/<pid>/status`, read once for several fields.
#[derive(Debug, Clone)]
pub(crate) struct Status(String);

impl Status {
    /// Reads it; `None` when the process is gone.
    pub fn read(pid: i32) -> Option<Self> {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .map(Self)
    }

    /// The first number of a field (`Uid:` gives the real uid, `Threads:`
    /// the thread count).
    pub fn number(&self, field: &str) -> Option<u64> {
        self.0
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    }
}

/// Whether process `pid`'s environment holds exactly `entry`
/// (`NAME=value`).
pub(crate) fn environ_has(pid: i32, entry: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|&b| b == 0).any(|e| e == entry.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stat_status_and_environ() {
        let odd = parse_stat("42 (a) b (c) S 7 42 42 0 -1").unwrap();
        assert_eq!(
            odd,
            Process {
                pid: 42,
                ppid: 7,
                state: 'S',
                cpu_ticks: 0,
            }
        );
        let busy = parse_stat("9 (x) R 1 9 9 0 -1 4194304 10 0 0 0 250 17 0 0").unwrap();
        assert_eq!(busy.cpu_ticks, 267);
        assert!(parse_stat("42 (a").is_none());
        let me = i32::try_from(std::process::id()).unwrap();
        let found = processes().into_iter().find(|p| p.pid == me).unwrap();
        assert!(!found.is_zombie());
        assert_eq!(
            i64::from(found.ppid),
            i64::from(nix::unistd::getppid().as_raw())
        );
        let status = Status::read(me).unwrap();
        assert_eq!(
            status.number("Uid:"),
            Some(u64::from(nix::unistd::getuid().as_raw()))
        );
        assert!(status.number("Threads:").is_some_and(|n| n >= 1));
        assert!(status.number("Nonsense:").is_none());
        // This test's thread is running now: the kernel has its time on a
        // CPU (more than none) and on the run queue wherever it keeps
        // schedstat.
        if std::path::Path::new("/proc/thread-self/schedstat").exists() {
            assert!(schedstat(me).is_some_and(|(ran, _)| !ran.is_zero()));
        }
        assert!(schedstat(-1).is_none());
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        assert!(descendants(me).contains(&pid));
        assert!(!descendants(pid).contains(&me));
        child.kill().unwrap();
        child.wait().unwrap();
        let path = std::env::var("PATH").unwrap_or_default();
        assert!(environ_has(me, &format!("PATH={path}")) || path.is_empty());
        assert!(!environ_has(me, "PATH=/surely/not/this"));
    }
}
