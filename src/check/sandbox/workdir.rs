//! The program's work directory: an unguessable name in the system temp
//! directory, created 0700 (never an existing one), removed on every exit
//! path: when dropped, and by the signal watcher when servegate is stopped.

use std::path::{Path, PathBuf};

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

/// Removes `dir` and everything in it without following links (a link the
/// program planted is removed, not its target); directories it made
/// unreadable are opened up first.
pub(super) fn remove(dir: &Path) {
    if std::fs::remove_dir_all(dir).is_ok() || !dir.exists() {
        return;
    }
    open_up(dir);
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(unix)]
fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        open_up(&entry.path());
    }
}

#[cfg(not(unix))]
fn open_up(_dir: &Path) {}

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
}
