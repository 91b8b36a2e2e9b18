//! Finding and loading suite files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::decode::Decoder;
use super::diagnostics::{Diagnostic, render_all};
use super::model::{SourceFile, Suite};
use super::node::parse;

/// Largest suite file accepted; suites are a few kilobytes.
const MAX_SUITE_BYTES: u64 = 4 * 1024 * 1024;

/// A suite file that could not be loaded.
#[derive(Debug, Clone)]
pub struct LoadFailure {
    /// The file.
    pub path: PathBuf,
    /// The name its `::load` trial gets (the file stem).
    pub name: String,
    /// Every problem, rendered with locations.
    pub message: String,
    /// The line of the first problem, where it has one (a file that could
    /// not be read has none).
    pub line: Option<u32>,
    /// Every problem with its place in the file, as the decoder found
    /// them (none for a file that could not be read or was too large).
    pub problems: Vec<Diagnostic>,
}

/// Loads one suite file with the process environment.
pub fn load_file(path: &Path) -> Result<Suite, LoadFailure> {
    load_file_with_env(path, &|name| std::env::var(name).ok())
}

/// Loads one suite file, looking variables up with `env`.
pub fn load_file_with_env(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Suite, LoadFailure> {
    let name = path
        .file_stem()
        .map_or_else(|| "suite".to_owned(), |s| s.to_string_lossy().into_owned());
    let fail = |message: String| LoadFailure {
        path: path.to_path_buf(),
        name: name.clone(),
        message,
        line: None,
        problems: Vec::new(),
    };
    let shown = path.display().to_string();
    let size = std::fs::metadata(path)
        .map_err(|e| fail(format!("error: failed to read suite file {shown}: {e}")))?
        .len();
    if size > MAX_SUITE_BYTES {
        return Err(fail(format!(
            "error: suite file {shown} is {size} bytes; the limit is {MAX_SUITE_BYTES} bytes"
        )));
    }
    let bytes = std::fs::read(path)
        .map_err(|e| fail(format!("error: failed to read suite file {shown}: {e}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| fail(format!("error: suite file {shown} is not UTF-8: {e}")))?;
    located(path, &text, env).map_err(|(message, problems)| LoadFailure {
        line: problems.first().map(|d| d.loc.line).filter(|&l| l > 0),
        problems,
        ..fail(message)
    })
}

/// Loads suite text that claims to come from `path`.
pub fn load_text(
    path: &Path,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Suite, String> {
    located(path, text, env).map_err(|(message, _)| message)
}

/// [`load_text`], its failure rendered and as its problems.
fn located(
    path: &Path,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Suite, (String, Vec<Diagnostic>)> {
    let shown = path.display().to_string();
    if text.len() as u64 > MAX_SUITE_BYTES {
        return Err((
            format!(
                "error: suite file {shown} is {} bytes; the limit is {MAX_SUITE_BYTES} bytes (suites are a few kilobytes)",
                text.len()
            ),
            Vec::new(),
        ));
    }
    let rendered = |diags: Vec<Diagnostic>| (render_all(&shown, text, &diags), diags);
    let root = parse(text).map_err(|e| {
        rendered(vec![Diagnostic::new(
            e.loc,
            format!("invalid YAML: {}", e.message),
        )])
    })?;
    let file = SourceFile {
        path: path.to_path_buf(),
        text: Arc::from(text),
        root: project_root(path),
    };
    Decoder::new(env, path).suite(&root, file).map_err(rendered)
}

/// `path` made absolute against the working directory (not resolved
/// through links).
pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_or_else(|_| path.to_path_buf(), |cwd| cwd.join(path))
    }
}

/// The project a suite file belongs to: the nearest directory above it
/// that holds `snapshots/` or `.git`, else the file's own directory. Its
/// snapshots, baselines and run output live there, wherever servegate is
/// run from.
pub fn project_root(suite_file: &Path) -> PathBuf {
    let abs = absolute(suite_file);
    let dir = abs.parent().unwrap_or(Path::new("/"));
    dir.ancestors()
        .find(|d| d.join("snapshots").is_dir() || d.join(".git").exists())
        .unwrap_or(dir)
        .to_path_buf()
}

/// The suite files named by `paths`: files as given, directories searched for
/// `*.yaml` / `*.yml` (sorted, not recursive).
pub fn discover(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            found.sort();
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}
