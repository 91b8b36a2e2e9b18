//! Linux namespaces, entered without root: the supervisor unshares user,
//! pid, net, mount, ipc and uts namespaces (mapping itself to root inside,
//! to its own uid outside), and the next stage, pid 1 of the new pid
//! namespace, makes the mount view: everything read-only but the work
//! directory, a `/proc` of the new pid namespace only.

use std::path::Path;

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};

/// Enters new namespaces (this process must have one thread); `Err` with
/// why the host refused.
pub(super) fn enter() -> Result<(), String> {
    let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    unshare(
        CloneFlags::CLONE_NEWUSER
            | CloneFlags::CLONE_NEWPID
            | CloneFlags::CLONE_NEWNET
            | CloneFlags::CLONE_NEWNS
            | CloneFlags::CLONE_NEWIPC
            | CloneFlags::CLONE_NEWUTS,
    )
    .map_err(|e| format!("unshare refused: {e}"))?;
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| format!("failed to write /proc/self/{file}: {e}"))
    };
    write("setgroups", "deny".to_owned())?;
    write("uid_map", format!("0 {uid} 1\n"))?;
    write("gid_map", format!("0 {gid} 1\n"))
}

/// Makes the mount view of pid 1 of the new namespaces; the layer's name,
/// with the parts that hold, and what did not hold (`namespaces mount: …`).
pub(super) fn isolate(work: &Path) -> Result<(String, Vec<String>), String> {
    let none: Option<&str> = None;
    // Nothing done here propagates back to the host's mounts.
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| format!("failed to make the mounts private: {e}"))?;
    mount(Some(work), work, none, MsFlags::MS_BIND, none)
        .map_err(|e| format!("failed to bind the work directory: {e}"))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("failed to read the mount table: {e}"))?;
    let mut writable = Vec::new();
    for (point, options) in mounts(&mountinfo) {
        if Path::new(&point) == work {
            continue;
        }
        let flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | kept(&options);
        if let Err(e) = mount(none, point.as_str(), none, flags, none) {
            if point == "/" {
                return Err(format!("failed to make / read-only: {e}"));
            }
            writable.push(format!("{point} ({e})"));
        }
    }
    let mut problems = Vec::new();
    let mut parts = vec!["user", "pid", "net"];
    if writable.is_empty() {
        parts.push("mount");
    } else {
        problems.push(format!(
            "namespaces mount: {} mount(s) stayed writable: {}",
            writable.len(),
            writable.join(", ")
        ));
    }
    // A /proc of the new pid namespace: no other process of the host in it.
    let proc_flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    match mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        proc_flags | MsFlags::MS_RDONLY,
        none,
    ) {
        Ok(()) => parts.push("proc"),
        Err(e) => {
            // Some containers refuse a new proc; an empty /proc then hides
            // the host's.
            mount(
                Some("tmpfs"),
                "/proc",
                Some("tmpfs"),
                proc_flags,
                Some("size=4k"),
            )
            .map_err(|e2| format!("failed to mount /proc ({e}) or hide it ({e2})"))?;
            problems.push(format!(
                "namespaces proc: a new /proc was refused ({e}); /proc is empty"
            ));
        }
    }
    parts.extend(["ipc", "uts"]);
    let _ = nix::unistd::sethostname("sandbox");
    Ok((format!("namespaces({})", parts.join(",")), problems))
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
