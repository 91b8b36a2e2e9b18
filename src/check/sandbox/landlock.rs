//! Landlock, for the process about to run the program (inherited by all it
//! starts): the file system read-only but for the work directory and
//! `/dev/null`; TCP bind and connect denied (ABI 4+); signals to, and
//! abstract sockets of, processes outside the sandbox denied (ABI 6+);
//! connecting (or sending) to Unix sockets on the file system denied but
//! for those made in the sandbox (ABI 9+).
//! Landlock also keeps the program from ptracing or reading the memory or
//! `/proc/<pid>/environ` of processes outside it (servegate included).

use std::path::{Path, PathBuf};

use super::Layers;

use ::landlock::{
    ABI, Access, AccessFs, AccessNet, LandlockStatus, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};

/// What the program may read (and list) besides its work directory: the
/// system's programs and libraries, a few files of `/etc` the loader and
/// the interpreters read, the interpreter's own tree, and what the suite
/// names. No other directory may be listed: not `/`, `/home` or `/tmp`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reach<'a> {
    /// The program's argv (its interpreter first).
    pub argv: &'a [String],
    /// The `PATH` the interpreter is found on.
    pub path: &'a str,
    /// The suite's `sandbox.read`.
    pub read: &'a [PathBuf],
}

/// Top-level directories of the system's own files.
const SYSTEM: &[&str] = &[
    "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/dev", "/sys", "/nix", "/gnu",
];

/// What of `/etc` a loader, a libc and an interpreter read; entries whose
/// names begin `python` too (Debian's `sitecustomize`).
const ETC: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.preload",
    "localtime",
    "timezone",
    "alternatives",
    "nsswitch.conf",
    "passwd",
    "group",
    "host.conf",
    "gai.conf",
    "mime.types",
    "ssl",
    "ca-certificates",
    "os-release",
    "debian_version",
    "locale.alias",
    "locale.conf",
    // Fedora's and RHEL's OpenSSL configuration (Node reads it at start).
    "pki",
    "crypto-policies",
];

/// Every path the program may read (some may not exist here): not the
/// home directories, the project checkout, `/tmp`, `/var`, `/srv`, `/mnt`,
/// `/opt` or `/run`, unless the interpreter lives there or the suite names
/// them. The interpreter's tree is the directory above the one it is in
/// once its links are resolved (a pyenv shim's root, a conda install), and
/// for a venv (a `pyvenv.cfg` above the one it was found in) the venv's
/// root and the base Python its `home` names; never `/` itself.
fn readable(reach: &Reach<'_>) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = SYSTEM.iter().map(PathBuf::from).collect();
    let etc: Vec<PathBuf> = std::fs::read_dir("/etc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            ETC.contains(&name.as_ref()) || name.starts_with("python")
        })
        .map(|e| e.path())
        .collect();
    paths.extend(etc);
    // `env python3` runs what PATH finds for python3.
    let named = match reach.argv {
        [env, program, ..] if Path::new(env).file_name().is_some_and(|n| n == "env") => {
            vec![env, program]
        }
        [interpreter, ..] => vec![interpreter],
        [] => vec![],
    };
    let tree = |p: &Path| {
        p.parent()
            .and_then(Path::parent)
            .filter(|t| t.parent().is_some())
            .map(Path::to_path_buf)
    };
    for program in named {
        let Some(found) = find(program, reach.path) else {
            continue;
        };
        if let Some(t) = std::fs::canonicalize(&found).ok().as_deref().and_then(tree) {
            paths.push(t);
        }
        // A venv: its own root (not the tree of any symlink to a Python:
        // `~/bin/python3` must not open `~`), and the Python its
        // `pyvenv.cfg` names (`home = …`, a copied venv links to nothing).
        if let Some(venv) = tree(&found)
            && let Ok(cfg) = std::fs::read_to_string(venv.join("pyvenv.cfg"))
        {
            let home = cfg.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == "home").then(|| PathBuf::from(v.trim()))
            });
            paths.extend(
                home.as_deref()
                    .and_then(|h| h.parent())
                    .map(Path::to_path_buf),
            );
            paths.push(venv);
        }
    }
    paths.extend(reach.read.iter().cloned());
    paths
}

/// Where `program` is: itself when it names a path, else the first
/// executable of that name on `path`.
fn find(program: &str, path: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

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
    reach: &Reach<'_>,
    layers: &mut Layers,
) -> Result<(), String> {
    let fail = |e: ::landlock::RulesetError| format!("failed to set up Landlock: {e}");
    let proc: Vec<PathBuf> = match own_pid {
        None => vec!["/proc".into()],
        Some(pid) => [
            format!("/proc/{pid}"),
            "/proc/cpuinfo".into(),
            "/proc/meminfo".into(),
        ]
        .map(PathBuf::from)
        .to_vec(),
    };
    let readable: Vec<PathBuf> = readable(reach)
        .into_iter()
        .chain(proc)
        .filter(|p| p.exists())
        .collect();
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET))
        .map_err(fail)?
        .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
        .map_err(fail)?
        .scope(Scope::from_all(TARGET))
        .map_err(fail)?
        .create()
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
