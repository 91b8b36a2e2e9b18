//! The program's work directory: an unguessable name in the system temp
//! directory, created 0700 (never an existing one), removed on every exit
//! path: when dropped, and by the signal watcher when servegate is stopped.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A work directory, removed when dropped.
#[derive(Debug)]
pub(super) struct WorkDir(PathBuf);

impl WorkDir {
    /// Creates `servegate-code-<random>` in the system temp directory.
    pub fn new() -> Result<Self, String> {
        let mut builder = tempfile::Builder::new();
        builder.prefix("servegate-code-").rand_bytes(16);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            builder.permissions(std::fs::Permissions::from_mode(0o700));
        }
        let dir = builder
            .tempdir()
            .map_err(|e| format!("failed to create a sandbox directory: {e}"))?;
        Ok(Self(dir.keep()))
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        remove(&self.0);
    }
}

/// How long removing a work directory may take; past it the rest is left,
/// with a warning (a program may have made millions of entries).
const REMOVAL_TIME: Duration = Duration::from_secs(30);

/// Removes `dir` and everything in it without following links (a link the
/// program planted is removed, not its target), however deep it is;
/// directories it made unreadable are opened up first. Warns of what it
/// had to leave.
pub(super) fn remove(dir: &Path) {
    if let Err(e) = remove_tree(dir, Instant::now() + REMOVAL_TIME) {
        eprintln!("warning: left the sandbox directory {}: {e}", dir.display());
    }
}

/// Removes a tree iteratively, never deeper than one level: each pass
/// unlinks the files of the top directory and empties each directory in it
/// by renaming its entries up into the top one, then removes it. Each entry
/// moves once, and a tree 60,000 levels deep costs no stack and two open
/// descriptors.
#[cfg(unix)]
fn remove_tree(dir: &Path, deadline: Instant) -> Result<(), String> {
    use nix::errno::Errno;
    use nix::unistd::UnlinkatFlags;
    let top = match open_dir(nix::fcntl::AT_FDCWD, dir) {
        Err(Errno::ENOENT) => return Ok(()),
        opened => opened.map_err(|e| format!("failed to open it: {e}"))?,
    };
    let mut fresh = 0_u64;
    loop {
        let (files, dirs) = entries(&top)?;
        for name in &files {
            unlinkat(&top, name, UnlinkatFlags::NoRemoveDir)?;
        }
        if dirs.is_empty() {
            break;
        }
        for name in &dirs {
            if Instant::now() > deadline {
                return Err(format!("gave up after {}s", REMOVAL_TIME.as_secs()));
            }
            if nix::unistd::unlinkat(&top, name.as_c_str(), UnlinkatFlags::RemoveDir).is_ok() {
                continue;
            }
            let sub = open_dir(&top, name.as_c_str())
                .map_err(|e| format!("failed to open {name:?}: {e}"))?;
            let (inner_files, inner_dirs) = entries(&sub)?;
            for inner in inner_files.iter().chain(&inner_dirs) {
                let to = loop {
                    fresh += 1;
                    let to = std::ffi::CString::new(format!(".servegate-rm-{fresh}"))
                        .map_err(|e| e.to_string())?;
                    let taken = nix::sys::stat::fstatat(
                        &top,
                        to.as_c_str(),
                        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                    );
                    // Free, or not to be known: the rename says then.
                    if taken.is_err() {
                        break to;
                    }
                };
                let moved = || nix::fcntl::renameat(&sub, inner.as_c_str(), &top, to.as_c_str());
                let mut result = moved();
                // Moving a directory rewrites its `..`: it must be writable.
                if result == Err(Errno::EACCES) {
                    open_up(&sub, inner.as_c_str());
                    result = moved();
                }
                result.map_err(|e| format!("failed to move {inner:?} up: {e}"))?;
            }
            drop(sub);
            unlinkat(&top, name, UnlinkatFlags::RemoveDir)?;
        }
    }
    drop(top);
    std::fs::remove_dir(dir).map_err(|e| format!("failed to remove it: {e}"))
}

#[cfg(unix)]
fn unlinkat(
    dir: &nix::dir::Dir,
    name: &std::ffi::CStr,
    flag: nix::unistd::UnlinkatFlags,
) -> Result<(), String> {
    nix::unistd::unlinkat(dir, name, flag).map_err(|e| format!("failed to remove {name:?}: {e}"))
}

/// Opens a directory without following a link, opening up one the
/// program made unreadable.
#[cfg(unix)]
fn open_dir<Fd: std::os::fd::AsFd + Copy>(
    at: Fd,
    name: &(impl nix::NixPath + ?Sized),
) -> nix::Result<nix::dir::Dir> {
    use nix::fcntl::OFlag;
    let open = || {
        nix::dir::Dir::openat(
            at,
            name,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
    };
    match open() {
        Err(nix::errno::Errno::EACCES) => {
            open_up(at, name);
            open()
        }
        opened => opened,
    }
}

/// Gives the owner every right on a directory entry, without following a
/// link. Where libc cannot change a mode without following (old glibc),
/// it follows, for an entry it has just seen to be a directory: what the
/// program made is gone or stopped by then.
#[cfg(unix)]
fn open_up<Fd: std::os::fd::AsFd + Copy>(at: Fd, name: &(impl nix::NixPath + ?Sized)) {
    use nix::sys::stat::{FchmodatFlags, Mode, fchmodat};
    let mode = Mode::S_IRWXU;
    if fchmodat(at, name, mode, FchmodatFlags::NoFollowSymlink) == Err(nix::errno::Errno::ENOTSUP)
        && nix::sys::stat::fstatat(at, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|s| s.st_mode & nix::libc::S_IFMT == nix::libc::S_IFDIR)
    {
        let _ = fchmodat(at, name, mode, FchmodatFlags::FollowSymlink);
    }
}

/// The entries of a directory but `.` and `..`: the files (links
/// included) and the directories.
#[cfg(unix)]
fn entries(
    dir: &nix::dir::Dir,
) -> Result<(Vec<std::ffi::CString>, Vec<std::ffi::CString>), String> {
    use nix::dir::Type;
    let fd = nix::unistd::dup(dir).map_err(|e| format!("failed to list it: {e}"))?;
    let mut listing = nix::dir::Dir::from_fd(fd).map_err(|e| format!("failed to list it: {e}"))?;
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    for entry in listing.iter() {
        let entry = entry.map_err(|e| format!("failed to list it: {e}"))?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            Some(t) => t == Type::Directory,
            None => nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                .is_ok_and(|s| s.st_mode & nix::libc::S_IFMT == nix::libc::S_IFDIR),
        };
        if is_dir { &mut dirs } else { &mut files }.push(name.to_owned());
    }
    Ok((files, dirs))
}

#[cfg(not(unix))]
fn remove_tree(dir: &Path, _deadline: Instant) -> Result<(), String> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.to_string()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unguessable_private_and_removed_without_following_links() {
        let (a, b) = (WorkDir::new().unwrap(), WorkDir::new().unwrap());
        assert_ne!(a.path(), b.path());
        let name = a.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.len() >= "servegate-code-".len() + 16, "{name}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(a.path()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
            let outside = b.path().join("kept");
            std::fs::write(&outside, "x").unwrap();
            std::os::unix::fs::symlink(b.path(), a.path().join("link")).unwrap();
            let locked = a.path().join("locked");
            std::fs::create_dir(&locked).unwrap();
            std::fs::write(locked.join("f"), "x").unwrap();
            std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
            let path = a.path().to_path_buf();
            drop(a);
            assert!(!path.exists());
            assert!(outside.exists(), "the link's target was followed");
        }
    }

    /// A tree deeper than `PATH_MAX` (no path names its bottom)
    /// is removed, with a link and an unreadable directory at the bottom;
    /// past its deadline the removal gives up and says so. (The removal's
    /// speed is not asserted: on a loaded machine it varies tenfold.)
    #[cfg(unix)]
    #[test]
    fn removes_deep_trees_and_gives_up_at_its_deadline() {
        use nix::fcntl::{AT_FDCWD, OFlag, openat};
        use nix::sys::stat::{Mode, mkdirat};
        let dir = WorkDir::new().unwrap();
        let keep = WorkDir::new().unwrap();
        let open = |at: &std::os::fd::OwnedFd| {
            openat(at, "a", OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty()).unwrap()
        };
        let mut at = openat(AT_FDCWD, dir.path(), OFlag::O_RDONLY, Mode::empty()).unwrap();
        // 2 bytes a level: 10,000 bytes deep, past PATH_MAX (4,096).
        for _ in 0..5_000 {
            mkdirat(&at, "a", Mode::S_IRWXU).unwrap();
            at = open(&at);
        }
        nix::unistd::symlinkat(keep.path(), &at, "link").unwrap();
        mkdirat(&at, "locked", Mode::empty()).unwrap();
        let path = dir.path().to_path_buf();
        let err = remove_tree(&path, Instant::now()).unwrap_err();
        assert!(err.starts_with("gave up after"), "{err}");
        assert!(path.exists());
        remove_tree(&path, Instant::now() + Duration::from_secs(3600)).unwrap();
        assert!(!path.exists());
        drop(dir);
        assert!(keep.path().exists(), "the link's target was followed");
    }
}
