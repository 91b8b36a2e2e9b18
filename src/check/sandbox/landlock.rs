//! Landlock, for the process about to run the program (inherited by all it
//! starts): the file system read-only but for the work directory and
//! `/dev/null`; TCP bind and connect denied (ABI 4+); signals to, and
//! abstract sockets of, processes outside the sandbox denied (ABI 6+);
//! connecting (or sending) to Unix sockets on the file system denied but
//! for those made in the sandbox (ABI 9+).
//! Landlock also keeps the program from ptracing or reading the memory or
//! `/proc/<pid>/environ` of processes outside it (servegate included).

use std::path::Path;

use super::Layers;

use ::landlock::{
    ABI, Access, AccessFs, AccessNet, LandlockStatus, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};

/// The newest ABI whose rights are asked for; older kernels get what they
/// support (the crate's best-effort mode), and the layer says which.
const TARGET: ABI = ABI::V9;

/// Restricts this process and notes in `layers` what holds (`landlock(fs,
/// tcp,scope,unix) abi 9`) and what this kernel's ABI lacks; `Err` with why
/// Landlock is not in force at all. With `own_pid` (no pid namespace hides
/// the host's processes), `/proc` is readable only for that process and a
/// few system-wide files: Landlock's ptrace rules keep the memory and
/// `environ` of other processes out of reach, but not what any uid may read
/// there (command lines: a server started with `--api-key …`).
pub(super) fn restrict(
    work: &Path,
    own_pid: Option<u32>,
    layers: &mut Layers,
) -> Result<(), String> {
    let fail = |e: ::landlock::RulesetError| format!("failed to set up Landlock: {e}");
    let readable: Vec<std::path::PathBuf> = match own_pid {
        None => vec!["/".into()],
        Some(pid) => std::fs::read_dir("/")
            .map_err(|e| format!("failed to list /: {e}"))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p != Path::new("/proc"))
            .chain(
                [
                    format!("/proc/{pid}"),
                    "/proc/cpuinfo".into(),
                    "/proc/meminfo".into(),
                ]
                .map(std::path::PathBuf::from),
            )
            .filter(|p| p.exists())
            .collect(),
    };
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET))
        .map_err(fail)?
        .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
        .map_err(fail)?
        .scope(Scope::from_all(TARGET))
        .map_err(fail)?
        .create()
        .map_err(fail)?
        .add_rules(path_beneath_rules(["/"], AccessFs::ReadDir))
        .map_err(fail)?
        .add_rules(path_beneath_rules(readable, AccessFs::from_read(TARGET)))
        .map_err(fail)?
        .add_rules(path_beneath_rules(
            ["/dev/null"],
            AccessFs::ReadFile | AccessFs::WriteFile,
        ))
        .map_err(fail)?
        .add_rules(path_beneath_rules([work], AccessFs::from_all(TARGET)))
        .map_err(fail)?
        .restrict_self()
        .map_err(fail)?;
    let abi = match status.landlock {
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => kernel_abi.unwrap_or(effective_abi as i32),
        LandlockStatus::NotEnabled => return Err("not enabled in this kernel".into()),
        LandlockStatus::NotImplemented => return Err("not built into this kernel".into()),
    };
    if abi <= 0 {
        return Err("not supported by this kernel".into());
    }
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(format!("not enforced (kernel ABI {abi})"));
    }
    let mut parts = vec!["fs"];
    if abi >= 4 {
        parts.push("tcp");
    }
    if abi >= 6 {
        parts.push("scope");
    }
    // `AccessFs::ResolveUnix` is a write right: `/` readable does not
    // grant it.
    if abi >= 9 {
        parts.push("unix");
    }
    if own_pid.is_some() {
        parts.push("proc");
    }
    layers
        .active
        .push(format!("landlock({}) abi {abi}", parts.join(",")));
    // What an older ABI leaves out, each named so that `strict` can say.
    let mut unruled = Vec::new();
    if abi < 3 {
        unruled.push("truncate: ABI 3, Linux 6.2");
    }
    if abi < 5 {
        unruled.push("device ioctls: ABI 5, Linux 6.10");
    }
    if !unruled.is_empty() {
        layers.not_available(
            "landlock fs",
            format!("partial at ABI {abi} (no rules for {})", unruled.join("; ")),
        );
    }
    if abi < 4 {
        layers.not_available("landlock tcp", "needs ABI 4 (Linux 6.7)");
    }
    if abi < 6 {
        layers.not_available(
            "landlock scope",
            "signals and abstract sockets need ABI 6 (Linux 6.12)",
        );
    }
    Ok(())
}
