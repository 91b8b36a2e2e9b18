//! Loading the suite files under the given paths: each one a suite or the
//! failure that becomes its `<suite>::load` trial; two files of one suite
//! name are refused.

use std::path::{Path, PathBuf};

use crate::suite::{LoadFailure, Suite, discover, load_file};

/// A suite file's outcome of loading.
pub(super) enum Loaded {
    Suite(Box<Suite>),
    Failed(LoadFailure),
}

/// Why no suite was loaded at all (one file that fails to load is its
/// own trial, not this).
#[derive(Debug, thiserror::Error)]
pub(super) enum LoadAllError {
    /// A directory could not be listed.
    #[error("failed to read suite directory: {0}")]
    Directory(#[from] std::io::Error),
    /// The paths hold no suite file.
    #[error("no suite files found in {}", .0.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    NoSuites(Vec<PathBuf>),
}

pub(super) fn load_all(paths: &[PathBuf]) -> Result<Vec<Loaded>, LoadAllError> {
    let files = discover(paths)?;
    if files.is_empty() {
        return Err(LoadAllError::NoSuites(paths.to_vec()));
    }
    let mut loaded: Vec<Loaded> = Vec::new();
    for f in &files {
        let shown = display_path(f);
        let l = match load_file(&shown) {
            // Trial names, snapshots and baselines are keyed by the suite's
            // name: two files of one name would share them.
            Ok(s) => match loaded.iter().find_map(|l| match l {
                Loaded::Suite(other) if other.name == s.name => Some(other.file.display()),
                _ => None,
            }) {
                Some(first) => Loaded::Failed(LoadFailure {
                    path: shown.clone(),
                    name: s.name.clone(),
                    message: format!(
                        "error: suite `{}` is defined twice: in {first} and in {}\n  = suite names key trial names, snapshots and baselines: give each file its own `suite:` name",
                        s.name,
                        shown.display()
                    ),
                    line: None,
                    problems: Vec::new(),
                }),
                None => Loaded::Suite(Box::new(s)),
            },
            Err(e) => Loaded::Failed(e),
        };
        loaded.push(l);
    }
    Ok(loaded)
}

/// Paths under the working directory are shown relative to it.
fn display_path(path: &Path) -> PathBuf {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf())
}

/// The project of the first suite file under `paths` that loads: where a
/// run of them writes by default.
pub fn first_project(paths: &[PathBuf]) -> Option<PathBuf> {
    discover(paths)
        .ok()?
        .first()
        .map(|f| crate::suite::project_root(f))
}
