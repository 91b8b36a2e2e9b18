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
    /// Processes of the user (within the sandbox's user namespace, where
    /// there is one).
    pub processes: u64,
}

/// Sets every limit; the layer's name with what holds (`rlimits(cpu,as,…)`).
/// The process count is not enforced for root (the kernel exempts real uid
/// 0), so it is named only where it holds.
pub(super) fn apply(limits: Rlimits, root: bool) -> Result<String, String> {
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
        ("nproc", Resource::RLIMIT_NPROC, limits.processes),
    ];
    let mut names = Vec::new();
    for (name, resource, value) in set {
        setrlimit(resource, value, value)
            .map_err(|e| format!("failed to set the {name} limit: {e}"))?;
        if !(name == "nproc" && root) {
            names.push(name);
        }
    }
    Ok(format!("rlimits({})", names.join(",")))
}
