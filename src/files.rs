//! Files servegate writes and reads back — run records, the trial journal,
//! baselines, snapshots: every write lands whole or not at all (a temporary
//! file beside it, renamed into place), and every error names the file and
//! what was being done to it.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A file that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file system refused.
    #[error("failed to {action} {}: {source}", path.display())]
    Io {
        /// `read`, `write`, `create`, `append to`.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not what it should be.
    #[error("{} is not {what}: {source}", path.display())]
    NotJson {
        /// The file.
        path: PathBuf,
        /// What it should be (`a servegate run record`).
        what: &'static str,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The file is larger than its reader takes.
    #[error("{} is over {max} bytes, more than {what} may be: not read", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// What it should be.
        what: &'static str,
        /// The most bytes read.
        max: u64,
    },
    /// A value could not be written as JSON.
    #[error("{what} cannot be written as JSON to {}: {source}", path.display())]
    Encode {
        /// The file.
        path: PathBuf,
        /// What was being written.
        what: &'static str,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> FileError {
    move |source| FileError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

fn create_parent(path: &Path) -> Result<(), FileError> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => {
            std::fs::create_dir_all(dir).map_err(io("create", dir))
        }
        _ => Ok(()),
    }
}

/// Whether `c` may be part of a name that becomes part of a path
/// (suite, probe and gate names, snapshot slugs): letters, digits, `_`,
/// `-`, `.` — no separator, nothing a shell or a file system reads
/// otherwise.
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Writes `text` to `path` (creating its directory) through a temporary file
/// beside it and a rename: a reader, or a run killed mid-write, never sees
/// half a file.
pub(crate) fn write_atomically(path: &Path, text: &str) -> Result<(), FileError> {
    create_parent(path)?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io("write", path)(e)
        })
}

/// Writes `value` as pretty JSON (and a newline), atomically.
pub(crate) fn write_json<T: Serialize>(
    path: &Path,
    what: &'static str,
    value: &T,
) -> Result<(), FileError> {
    let text = serde_json::to_string_pretty(value).map_err(|source| FileError::Encode {
        path: path.to_path_buf(),
        what,
        source,
    })?;
    write_atomically(path, &(text + "\n"))
}

/// Appends `line` to `path` (creating it and its directory).
pub fn append(path: &Path, line: &str) -> Result<(), FileError> {
    create_parent(path)?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(io("append to", path))
}

/// Reads `path` as text of `what`, at most `max` bytes of it: a larger
/// file (or one without an end, `/dev/zero`) is refused after `max + 1`
/// bytes, never read whole into memory.
pub(crate) fn read_capped(path: &Path, what: &'static str, max: u64) -> Result<String, FileError> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(max + 1).read_to_string(&mut text))
        .map_err(io("read", path))?;
    if text.len() as u64 > max {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            what,
            max,
        });
    }
    Ok(text)
}

/// Reads `path` as JSON of `what`.
pub(crate) fn read_json<T: DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<T, FileError> {
    let text = std::fs::read_to_string(path).map_err(io("read", path))?;
    serde_json::from_str(&text).map_err(|source| FileError::NotJson {
        path: path.to_path_buf(),
        what,
        source,
    })
}

/// Reads `path` as JSON of `what`; `Ok(None)` when there is no such file.
pub(crate) fn read_json_if_any<T: DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<Option<T>, FileError> {
    match read_json(path, what) {
        Err(FileError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        r => r.map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_land_whole_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/figures.json");
        write_json(&path, "figures", &serde_json::json!({"x": 1})).unwrap();
        assert_eq!(
            read_json::<serde_json::Value>(&path, "figures").unwrap(),
            serde_json::json!({"x": 1})
        );
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["figures.json"]);
        assert!(matches!(
            read_capped(Path::new("/dev/zero"), "a record", 1024),
            Err(FileError::TooLarge { max: 1024, .. })
        ));
        assert_eq!(
            read_capped(&path, "figures", 64).unwrap(),
            "{\n  \"x\": 1\n}\n"
        );
        let none = dir.path().join("none.json");
        assert!(
            read_json_if_any::<serde_json::Value>(&none, "figures")
                .unwrap()
                .is_none()
        );
        let e = read_json::<serde_json::Value>(&none, "figures").unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("failed to read {}: No such file", none.display())),
            "{e}"
        );
        std::fs::write(&path, "not json").unwrap();
        let e = read_json::<serde_json::Value>(&path, "a figures file").unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("{} is not a figures file: ", path.display())),
            "{e}"
        );
        // A directory where the file should be: the write fails, names it,
        // and leaves no temporary file.
        let blocked = dir.path().join("blocked");
        std::fs::create_dir(&blocked).unwrap();
        let e = write_atomically(&blocked, "x").unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("failed to write {}", blocked.display())),
            "{e}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
