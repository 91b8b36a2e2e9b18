//! Resource limits a process sets on itself before it runs the program,
//! which inherits them: CPU time, address space, file size, open files,
//! process count and core dumps.

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
