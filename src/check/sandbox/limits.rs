//! Resource limits a process sets on itself before it runs the program,
//! which inherits them: CPU time, address space, file size, open files,
//! process count (where it means the program's own processes) and core
//! dumps.

use nix::sys::resource::{Resource, setrlimit};

/// What to limit.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rlimits {
    /// CPU seconds.
    pub cpu_secs: u64,
    /// Address space of each process, in MiB.
    pub memory_mib: u64,
    /// Processes of the program's user (within its user namespace, where
    /// it has one); `None` where the limit would not bound the program's
    /// own processes.
    pub processes: Option<u64>,
}

/// Sets every limit; the layer's name with what holds (`rlimits(cpu,as,…)`).
pub(super) fn apply(limits: Rlimits) -> Result<String, String> {
    let mib = 1024 * 1024;
    let set = [
        ("cpu", Resource::RLIMIT_CPU, limits.cpu_secs),
        (
            "as",
            Resource::RLIMIT_AS,
            limits.memory_mib.saturating_mul(mib),
        ),
        ("fsize", Resource::RLIMIT_FSIZE, super::FILE_MIB * mib),
        ("nofile", Resource::RLIMIT_NOFILE, super::OPEN_FILES),
        ("core", Resource::RLIMIT_CORE, 0),
    ]
    .into_iter()
    .chain(
        limits
            .processes
            .map(|n| ("nproc", Resource::RLIMIT_NPROC, n)),
    );
    let mut names = Vec::new();
    for (name, resource, value) in set {
        setrlimit(resource, value, value)
            .map_err(|e| format!("failed to set the {name} limit: {e}"))?;
        names.push(name);
    }
    Ok(format!("rlimits({})", names.join(",")))
}

/// What `RLIMIT_NPROC` counts for the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Counted {
    /// Its uid's tasks in its own user namespace — from Linux 5.14; before,
    /// every task of that uid on the host.
    UserNamespace,
    /// Every task of its uid on the host, `running` of them already.
    Host {
        /// Tasks of the uid running before the program starts.
        running: u64,
    },
    /// Nothing: it runs as the host's root, which the kernel exempts.
    Exempt,
    /// A pids cgroup the program cannot leave (it runs as uid 65534, the
    /// cgroup is root's) bounds its processes; the host-wide count of its
    /// uid would add only other processes of that uid, whose number
    /// changes under it.
    Cgroup,
}

/// The `RLIMIT_NPROC` that lets the program have `allowed` processes, where
/// the limit means that; else why not (the pids cgroup is then the bound,
/// where there is one). `kernel` is `major.minor`.
pub(super) fn process_limit(
    counted: Counted,
    kernel: Option<(u32, u32)>,
    allowed: u64,
) -> Result<u64, &'static str> {
    match counted {
        Counted::Host { running } => Ok(running + allowed),
        Counted::UserNamespace if kernel.is_some_and(|v| v >= (5, 14)) => Ok(allowed),
        // The user's other processes would use up the program's allowance:
        // probes would fail for nothing.
        Counted::UserNamespace => {
            Err("before Linux 5.14 a user namespace counts every process of its user on the host")
        }
        Counted::Exempt => {
            Err("the program runs as the host's root, whose processes are not counted")
        }
        Counted::Cgroup => Err(
            "the pids cgroup bounds its processes; the program cannot leave it, and this limit would count other processes of its uid",
        ),
    }
}

/// `major.minor` of a kernel release (`5.10.0-21-amd64`,
/// `4.18.0-348.el8.x86_64`).
pub(super) fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut numbers = release.split(|c: char| !c.is_ascii_digit());
    Some((numbers.next()?.parse().ok()?, numbers.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_limit_is_set_only_where_it_counts_the_program() {
        let kernel = |release| kernel_version(release);
        assert_eq!(kernel("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(kernel("4.18.0-348.el8.x86_64"), Some((4, 18)));
        assert_eq!(kernel("5.10.0-21-amd64"), Some((5, 10)));
        assert_eq!(kernel("5.4.0-150-generic"), Some((5, 4)));
        assert_eq!(kernel("6"), None);
        let ns = Counted::UserNamespace;
        // Debian 11, RHEL 8, Ubuntu 20.04: left to the pids cgroup.
        for old in [
            "5.10.0-21-amd64",
            "4.18.0-348.el8.x86_64",
            "5.4.0-150-generic",
            "5.13.0",
        ] {
            assert!(process_limit(ns, kernel(old), 70).is_err(), "{old}");
        }
        assert!(process_limit(ns, None, 70).is_err());
        for new in ["5.14.0-70.el9.x86_64", "6.1.0-18-amd64", "6.18.44-fc-v669"] {
            assert_eq!(process_limit(ns, kernel(new), 70), Ok(70), "{new}");
        }
        // On the host the count is the uid's, whatever the kernel.
        let host = Counted::Host { running: 12 };
        assert_eq!(process_limit(host, kernel("4.18.0"), 70), Ok(82));
        assert_eq!(process_limit(host, None, 70), Ok(82));
        assert!(process_limit(Counted::Exempt, kernel("6.1.0"), 70).is_err());
        assert!(process_limit(Counted::Cgroup, kernel("6.1.0"), 70).is_err());
    }
}
