//! Linux namespaces. The supervisor unshares pid, net, ipc and uts
//! namespaces — as the host's root directly, otherwise with a user namespace
//! mapping root inside to its own uid outside — and the next stage, pid 1 of
//! the new pid namespace (root in it, with every capability there), makes
//! its own mount namespace and the program's view: everything read-only but
//! the work directory, a `/proc` of the new pid namespace only, and the
//! host's Unix sockets hidden (see `sockets`): runtime directories under an
//! empty read-only file system, every other socket found under `/dev/null`.
//!
//! The program must not be root in that namespace: root there keeps every
//! capability over those mounts, enough to make them writable again
//! (`mount_setattr`, a remount). So it runs as `NOBODY`: as the host's root
//! servegate starts it as that uid (which also keeps root's files, sockets
//! and devices out of its reach); otherwise pid 1 moves into a nested user
//! namespace mapping `NOBODY` to its own uid, where `execve` of a non-root
//! uid leaves the program no capability, and the nested namespace's copy of
//! the mounts is locked (its read-only flags cannot be cleared).

use std::path::Path;

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use serde::{Deserialize, Serialize};

use super::Layers;
use super::sockets::{self, Outside};

/// The uid and gid the program runs as in namespaces, and on the host where
/// servegate is root: `nobody`'s.
pub(super) const NOBODY: u32 = 65534;

/// How the supervisor entered new namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Entered {
    /// As the host's root: no user namespace; the program runs as `NOBODY`
    /// on the host.
    Root,
    /// With a user namespace mapped to servegate's uid.
    User,
}

/// Enters new namespaces (this process must have one thread); `Err` with
/// why the host refused.
pub(super) fn enter() -> Result<Entered, String> {
    let others = CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWNET
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    // Root without CAP_SYS_ADMIN (a container) may still have user
    // namespaces.
    let as_root = if uid.is_root() {
        match unshare(others) {
            Ok(()) => return Ok(Entered::Root),
            Err(e) => format!("{e} as root, "),
        }
    } else {
        String::new()
    };
    unshare(CloneFlags::CLONE_NEWUSER | others)
        .map_err(|e| format!("unshare refused: {as_root}{e}"))?;
    write_maps(&format!("0 {uid} 1\n"), &format!("0 {gid} 1\n"))?;
    Ok(Entered::User)
}

/// Writes this process's uid and gid maps, in the one-line form a process
/// may write for a user namespace it made.
fn write_maps(uid_map: &str, gid_map: &str) -> Result<(), String> {
    let write = |file: &str, text: &str| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| format!("failed to write /proc/self/{file}: {e}"))
    };
    write("setgroups", "deny")?;
    write("uid_map", uid_map)?;
    write("gid_map", gid_map)
}

/// Makes the program's mount view and takes from it what would undo it,
/// for pid 1 of the new namespaces: notes in `layers` the namespaces in
/// force, with the parts that hold, and what did not hold (`namespaces
/// mount: …`); whether the view hides the sockets of `outside` (and every
/// socket mounted in) from the program. `Err` where the program must not
/// run: `/proc` would stay writable.
pub(super) fn isolate(
    work: &Path,
    entered: Entered,
    outside: &Outside,
    layers: &mut Layers,
) -> Result<bool, String> {
    let mut parts = Vec::new();
    if entered == Entered::User {
        parts.push("user");
    }
    parts.extend(["pid", "net"]);
    let view = mount_view(work, entered, outside);
    // The program's own /proc, writable until the user namespace maps are
    // written through it.
    let proc = view
        .as_ref()
        .map_err(|e| format!("the host's /proc stays in view ({e})"))
        .and_then(|_| {
            mount(
                Some("proc"),
                "/proc",
                Some("proc"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                None::<&str>,
            )
            .map_err(|e| format!("a new /proc was refused ({e}); /proc is empty"))
        });
    // While this process still has the capabilities of the namespaces.
    let _ = nix::unistd::sethostname("sandbox");
    let dropped = drop_privileges(entered, view.is_ok());
    if view.is_ok() {
        seal_proc(proc.is_ok())?;
    }
    match (&view, &dropped) {
        (Ok(v), Ok(())) if v.writable.is_empty() => parts.push("mount"),
        (Ok(v), Ok(())) => layers.not_available(
            "namespaces mount",
            format!(
                "{} mount(s) stayed writable: {}",
                v.writable.len(),
                v.writable.join(", ")
            ),
        ),
        (Err(e), _) => layers.not_available("namespaces mount", e),
        (Ok(_), Err(e)) => layers.not_available(
            "namespaces mount",
            format!("the program would keep the capabilities of its namespace, enough to undo the read-only view ({e})"),
        ),
    }
    match proc {
        Ok(()) => parts.push("proc"),
        Err(e) => layers.not_available("namespaces proc", e),
    }
    parts.extend(["ipc", "uts"]);
    layers
        .active
        .insert(0, format!("namespaces({})", parts.join(",")));
    // Without its capabilities over the mounts the program cannot take the
    // masks off.
    let hidden = match (&view, &dropped) {
        (Ok(v), Ok(())) if v.in_view.is_empty() => true,
        (Ok(v), Ok(())) => {
            layers.not_available(
                "unix sockets mount view",
                format!(
                    "{} stayed in view: {}",
                    v.in_view.len(),
                    v.in_view.join(", ")
                ),
            );
            false
        }
        _ => false,
    };
    Ok(hidden)
}

/// The program's work directory in namespaces: a file system of its own in
/// memory, capped in size and in entries, so that what it writes never
/// reaches the host's disk (nor its /tmp), counts against the memory
/// cgroup, and is gone with the namespace — servegate never walks it.
const WORK_TMPFS: &str = "size=256m,nr_inodes=65536,mode=0700";

/// The program's mount view as made: what could not be made as it should.
struct View {
    /// Mounts that stayed writable, each with why.
    writable: Vec<String>,
    /// Directories of sockets and sockets that stayed in view, each with
    /// why.
    in_view: Vec<String>,
}

/// An empty file system hiding a directory of other processes' sockets,
/// room enough for the path down to a work directory inside it; read-only
/// once the view is made.
const HIDING_TMPFS: &str = "size=16k,nr_inodes=64,mode=0755";

/// A mount namespace of this process's own, everything in it read-only but
/// the work directory, and the sockets of `outside` hidden.
fn mount_view(work: &Path, entered: Entered, outside: &Outside) -> Result<View, String> {
    let none: Option<&str> = None;
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| format!("a mount namespace was refused: {e}"))?;
    // Nothing done here propagates back to the host's mounts.
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| format!("failed to make the mounts private: {e}"))?;
    // What servegate wrote there (the program's file) moves onto it.
    let files = read_files(work)?;
    let (mut hidden, mut in_view) = (Vec::new(), Vec::new());
    for dir in &outside.dirs {
        let hiding = mount(
            Some("tmpfs"),
            dir,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some(HIDING_TMPFS),
        )
        .map_err(|e| e.to_string())
        // TMPDIR may be in $XDG_RUNTIME_DIR: the work directory's path is
        // made again on top.
        .and_then(|()| {
            if work.starts_with(dir) {
                path_down(dir, work).map_err(|e| e.to_string())?;
            }
            Ok(())
        });
        match hiding {
            Ok(()) => hidden.push(dir.clone()),
            Err(e) => in_view.push(format!("{} ({e})", dir.display())),
        }
    }
    mount(
        Some("tmpfs"),
        work,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(WORK_TMPFS),
    )
    .map_err(|e| format!("failed to mount the work directory: {e}"))?;
    for (name, bytes) in files {
        std::fs::write(work.join(&name), bytes)
            .map_err(|e| format!("failed to copy {}: {e}", name.display()))?;
    }
    if entered == Entered::Root {
        let nobody = (
            Some(nix::unistd::Uid::from_raw(NOBODY)),
            Some(nix::unistd::Gid::from_raw(NOBODY)),
        );
        nix::unistd::chown(work, nobody.0, nobody.1)
            .map_err(|e| format!("failed to give the work directory to uid {NOBODY}: {e}"))?;
    }
    let mut writable = Vec::new();
    let table = mounts(&mount_table()?);
    for (point, options) in &table {
        let at = Path::new(point);
        // /proc is replaced, or hidden, next; mounts below a hidden
        // directory are out of reach.
        if at == work
            || at.starts_with("/proc")
            || hidden.iter().any(|d| at.starts_with(d) && at != d)
        {
            continue;
        }
        if let Err(e) = remount_read_only(point, options) {
            if point == "/" {
                return Err(format!("failed to make / read-only: {e}"));
            }
            writable.push(format!("{point} ({e})"));
        }
    }
    // Connecting to a socket needs a socket there: `/dev/null` is none.
    let points: Vec<String> = table.into_iter().map(|(point, _)| point).collect();
    for socket in sockets::to_mask(&outside.sockets, &hidden, &points, work) {
        let masked = mount(Some("/dev/null"), &socket, none, MsFlags::MS_BIND, none);
        if let Err(e) = masked {
            in_view.push(format!("{} ({e})", socket.display()));
        }
    }
    Ok(View { writable, in_view })
}

/// Makes the directories from `top` down to `dir`, open to all (the
/// program may run as another uid than this process).
fn path_down(top: &Path, dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir)?;
    for made in dir.ancestors().take_while(|a| *a != top) {
        std::fs::set_permissions(made, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// The regular files of a directory, with their contents.
fn read_files(dir: &Path) -> Result<Vec<(std::path::PathBuf, Vec<u8>)>, String> {
    let fail = |e: std::io::Error| format!("failed to read the work directory: {e}");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(fail)? {
        let entry = entry.map_err(fail)?;
        if entry.file_type().map_err(fail)?.is_file() {
            files.push((
                entry.file_name().into(),
                std::fs::read(entry.path()).map_err(fail)?,
            ));
        }
    }
    Ok(files)
}

fn mount_table() -> Result<String, String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("failed to read the mount table: {e}"))
}

fn remount_read_only(point: &str, options: &str) -> nix::Result<()> {
    let flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | kept(options);
    mount(None::<&str>, point, None::<&str>, flags, None::<&str>)
}

/// Leaves the program no capability over its namespaces: in a user
/// namespace, this process moves into a nested one (with a mount namespace
/// of its own where `with_mounts`) mapping `NOBODY` to its uid, and the
/// program it starts inherits it. As the host's root there is nothing to
/// do here: the program is started as `NOBODY`.
fn drop_privileges(entered: Entered, with_mounts: bool) -> Result<(), String> {
    if entered == Entered::Root {
        return Ok(());
    }
    let mut flags = CloneFlags::CLONE_NEWUSER;
    if with_mounts {
        flags |= CloneFlags::CLONE_NEWNS;
    }
    unshare(flags).map_err(|e| format!("a nested user namespace was refused: {e}"))?;
    write_maps(&format!("{NOBODY} 0 1\n"), &format!("{NOBODY} 0 1\n"))
}

/// Makes `/proc` read-only (`own`: the new one) or, where a new one was
/// refused, hides the host's under an empty read-only one.
fn seal_proc(own: bool) -> Result<(), String> {
    let hidden = if own {
        let table = mount_table()?;
        let options = mounts(&table)
            .into_iter()
            .rfind(|(point, _)| point == "/proc")
            .map(|(_, o)| o)
            .unwrap_or_default();
        remount_read_only("/proc", &options)
    } else {
        mount(
            Some("tmpfs"),
            "/proc",
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY,
            Some("size=4k"),
        )
    };
    hidden.map_err(|e| format!("failed to make /proc read-only: {e}"))
}

/// The mount points and per-mount options of a mount table, in order.
fn mounts(mountinfo: &str) -> Vec<(String, String)> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let mut fields = l.split(' ');
            let point = fields.nth(4)?;
            let options = fields.next()?;
            Some((unescape(point), options.to_owned()))
        })
        .collect()
}

/// Mount points escape space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len());
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The flags a remount must keep: a mount inherited into a user namespace
/// is locked, and changing these on it is refused.
fn kept(options: &str) -> MsFlags {
    let mut flags = MsFlags::empty();
    let mut atime = MsFlags::MS_STRICTATIME;
    for o in options.split(',') {
        match o {
            "nosuid" => flags |= MsFlags::MS_NOSUID,
            "nodev" => flags |= MsFlags::MS_NODEV,
            "noexec" => flags |= MsFlags::MS_NOEXEC,
            "nodiratime" => flags |= MsFlags::MS_NODIRATIME,
            "noatime" => atime = MsFlags::MS_NOATIME,
            "relatime" => atime = MsFlags::MS_RELATIME,
            _ => {}
        }
    }
    flags | atime
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_mount_table() {
        let table = "22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                     23 22 0:22 / /mnt/a\\040b rw,nosuid,nodev,noexec - tmpfs tmpfs rw\n";
        let m = mounts(table);
        assert_eq!(m[0], ("/".to_owned(), "rw,relatime".to_owned()));
        assert_eq!(m[1].0, "/mnt/a b");
        assert_eq!(
            kept(&m[1].1),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_STRICTATIME
        );
        assert_eq!(kept(&m[0].1), MsFlags::MS_RELATIME);
    }
}
