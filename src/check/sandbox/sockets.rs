//! Unix-domain sockets on the file system that belong to other processes:
//! the user's session bus (through which `systemd --user` starts anything,
//! outside every layer), ssh-agent, gpg-agent, X11, `docker.sock`. A
//! network namespace does not cover them (only abstract sockets are per
//! namespace), nor does a read-only mount (`connect` needs write permission
//! on the socket, not on its file system).
//!
//! What servegate finds here is hidden in the program's mount view (see
//! `namespaces`): the runtime directories whole, under an empty read-only
//! file system, and every other socket known, under `/dev/null`. Without a
//! mount view, Landlock (ABI 9) or seccomp (no socket of its own) take over
//! (see `init`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Sockets of other processes the program must not reach, as servegate
/// finds them before the sandbox starts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Outside {
    /// Directories hidden whole: every user's runtime directory
    /// (`/run/user`: session buses, agents, rootless container daemons,
    /// whatever network namespace bound them), servegate's
    /// `$XDG_RUNTIME_DIR`, and the X11 and ICE socket directories.
    pub dirs: Vec<PathBuf>,
    /// Sockets hidden one by one: every named socket bound in servegate's
    /// network namespace (the host's, as `/proc/net/unix` lists them, so
    /// wherever they are: `~/.ssh` control sockets, `~/.gnupg`,
    /// `/run/docker.sock`) and `$SSH_AUTH_SOCK` (an agent may be bound in
    /// another namespace and mounted in).
    pub sockets: Vec<PathBuf>,
}

/// The directories and sockets to hide on this host, now.
pub(super) fn outside() -> Outside {
    let env = |name: &str| std::env::var_os(name).map(PathBuf::from);
    let dirs = ["/run/user", "/tmp/.X11-unix", "/tmp/.ICE-unix"]
        .map(PathBuf::from)
        .into_iter()
        .chain(env("XDG_RUNTIME_DIR"))
        .filter(|d| d.is_absolute())
        // As the mount table names them (`/var/run` is often `/run`).
        .filter_map(|d| d.canonicalize().ok())
        .filter(|d| d.parent().is_some() && d.is_dir());
    let table = std::fs::read("/proc/net/unix").unwrap_or_default();
    let sockets = bound(&table)
        .into_iter()
        .chain(env("SSH_AUTH_SOCK").filter(|p| p.is_absolute()))
        .collect();
    Outside {
        dirs: outermost(dirs),
        sockets,
    }
}

/// Each directory once, and none inside another (`$XDG_RUNTIME_DIR` is
/// usually in `/run/user`): hiding the outer one hides it.
fn outermost(dirs: impl Iterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = dirs.collect();
    // A directory sorts after those above it.
    dirs.sort();
    let mut kept: Vec<PathBuf> = Vec::new();
    for d in dirs {
        if !kept.iter().any(|k| d.starts_with(k)) {
            kept.push(d);
        }
    }
    kept
}

/// The absolute paths of the named sockets in a `/proc/net/unix` table
/// (abstract ones are `@…`; a relative path is relative to the directory
/// of the process that bound it, unknown here).
fn bound(table: &[u8]) -> Vec<PathBuf> {
    table
        .split(|&b| b == b'\n')
        .skip(1)
        .filter_map(|line| {
            // Num: RefCount Protocol Flags Type St Inode Path; the inode is
            // padded with spaces, the path follows it after one.
            let mut rest = line;
            for _ in 0..7 {
                let start = rest.iter().position(|&b| b != b' ')?;
                rest = &rest[start..];
                let end = rest.iter().position(|&b| b == b' ')?;
                rest = &rest[end + 1..];
            }
            rest.starts_with(b"/")
                .then(|| PathBuf::from(OsStr::from_bytes(rest)))
        })
        .collect()
}

/// The sockets still to mask once the `hidden` directories are: those
/// given, and the mount points that are sockets (bound elsewhere and
/// mounted in, as `docker.sock` into a container); each a socket in this
/// view, outside the hidden directories and the work directory, once.
pub(super) fn to_mask(
    sockets: &[PathBuf],
    hidden: &[PathBuf],
    mount_points: &[String],
    work: &Path,
) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt as _;
    let mut found: Vec<PathBuf> = sockets
        .iter()
        .cloned()
        .chain(mount_points.iter().map(PathBuf::from))
        .filter(|p| {
            !p.starts_with(work)
                && !p.starts_with("/proc")
                && !hidden.iter().any(|d| p.starts_with(d))
        })
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket()))
        .collect();
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_bound_paths_of_proc_net_unix() {
        let table = b"Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 23456 /run/user/1000/bus\n\
            0000000000000000: 00000002 00000000 00000000 0002 01   789 /tmp/a b/dgram\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 23457 @/tmp/.X11-unix/X0\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 23458\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 23459 relative.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 23460 /home/u/\xff.sock\n";
        assert_eq!(
            bound(table),
            [
                PathBuf::from("/run/user/1000/bus"),
                PathBuf::from("/tmp/a b/dgram"),
                PathBuf::from(OsStr::from_bytes(b"/home/u/\xff.sock")),
            ]
        );
        assert!(bound(b"").is_empty());
    }

    #[test]
    fn hides_each_directory_once_and_none_inside_another() {
        let dirs = [
            "/tmp/.X11-unix",
            "/run/user/1000",
            "/run/user",
            "/run/users",
            "/run/user",
        ];
        assert_eq!(
            outermost(dirs.into_iter().map(PathBuf::from)),
            ["/run/user", "/run/users", "/tmp/.X11-unix"].map(PathBuf::from)
        );
    }

    /// Only sockets are masked, once, and none the hidden directories
    /// already cover or in the work directory.
    #[test]
    fn masks_each_socket_outside_the_hidden_directories_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        std::fs::create_dir(path("hidden")).unwrap();
        std::fs::create_dir(path("work")).unwrap();
        let _listeners: Vec<_> = ["a.sock", "hidden/b.sock", "work/c.sock"]
            .map(|n| std::os::unix::net::UnixListener::bind(path(n)).unwrap())
            .into();
        std::fs::write(path("file"), "").unwrap();
        let sockets = ["a.sock", "hidden/b.sock", "work/c.sock", "file", "gone"].map(path);
        let points = [path("a.sock").display().to_string(), "/".into()];
        assert_eq!(
            to_mask(&sockets, &[path("hidden")], &points, &path("work")),
            [path("a.sock")]
        );
    }
}
