//! Snapshots of model outputs with insta: each probe's answer is kept in
//! `snapshots/<suite>/<model>/<probe>.snap` (explicit names: insta's
//! automatic ones collide in a custom harness), with the prompt, sampling,
//! model and server version as metadata. A mismatch fails with a diff;
//! insta writes `.snap.new` locally and nothing in CI, and `cargo insta
//! review` / `cargo insta accept` settle it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::client::Completion;

/// Where a probe's snapshot lives and what it records beside the answer.
#[derive(Debug, Clone)]
pub struct Place {
    /// `snapshots/<suite>/<model-slug>`, absolute.
    pub dir: PathBuf,
    /// The probe's name: the snapshot's name.
    pub name: String,
    /// The suite file, recorded as the snapshot's source.
    pub suite_file: PathBuf,
    /// Metadata: prompt, sampling, model, server version.
    pub info: serde_json::Value,
}

/// Where snapshots live: `SERVEGATE_SNAPSHOTS`, else `snapshots/` under
/// the working directory (absolute: insta resolves relative paths against
/// the crate that calls it).
pub fn dir() -> PathBuf {
    let base = std::env::var_os("SERVEGATE_SNAPSHOTS")
        .map_or_else(|| PathBuf::from("snapshots"), PathBuf::from);
    if base.is_absolute() {
        base
    } else {
        std::env::current_dir().map_or(base.clone(), |cwd| cwd.join(&base))
    }
}

/// A model id as a directory name: `moonshotai/Kimi-K2.5` → `moonshotai--Kimi-K2.5`.
pub fn slug(model: &str) -> String {
    let s: String = model
        .replace('/', "--")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "model".to_owned() } else { s }
}

/// What is snapshotted of a completion: the answer, the reasoning when there
/// is any, and the finish reason. Ids and timings are never written.
pub fn render(c: &Completion) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "finish_reason: {}",
        c.finish_reason.as_deref().unwrap_or("absent")
    );
    if !c.reasoning.is_empty() {
        let _ = writeln!(out, "--- reasoning ---\n{}", c.reasoning.trim_end());
    }
    let _ = write!(out, "--- content ---\n{}", c.content.trim_end());
    out
}

/// The contents of an existing `.snap` file (after its metadata header).
fn stored(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let rest = text.strip_prefix("---\n")?;
    let end = rest.find("\n---\n")?;
    Some(rest[end + 5..].trim_end_matches('\n').to_owned())
}

/// Runs `f` with standard output and error sent to /dev/null and no panic
/// report: insta prints its summary and notes there and reports a mismatch
/// by panicking, which libtest captures in `#[test]`s but nothing captures
/// in this harness, where they would break the trial lines. The failure
/// message carries its own diff instead.
#[cfg(unix)]
fn quietly<R>(f: impl FnOnce() -> R) -> R {
    use std::io::Write as _;
    let saved = (
        nix::unistd::dup(std::io::stdout()),
        nix::unistd::dup(std::io::stderr()),
    );
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null");
    let ((Ok(out), Ok(err)), Ok(null)) = (saved, null) else {
        return f();
    };
    let _ = std::io::stdout().flush();
    let _ = nix::unistd::dup2_stdout(&null);
    let _ = nix::unistd::dup2_stderr(&null);
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = f();
    std::panic::set_hook(hook);
    let _ = std::io::stdout().flush();
    let _ = nix::unistd::dup2_stdout(&out);
    let _ = nix::unistd::dup2_stderr(&err);
    result
}

#[cfg(not(unix))]
fn quietly<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Compares `text` with the stored snapshot through insta; `Err` is the
/// failure message (a diff and what to do).
pub fn check(place: &Place, text: &str) -> Result<(), String> {
    let snap = place.dir.join(format!("{}.snap", place.name));
    let pending = place.dir.join(format!("{}.snap.new", place.name));
    let before = stored(&snap);
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(&place.dir);
    settings.set_prepend_module_to_snapshot(false);
    settings.set_input_file(&place.suite_file);
    settings.set_omit_expression(true);
    settings.set_info(&place.info);
    let name = place.name.as_str();
    let outcome = quietly(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            settings.bind(|| insta::assert_snapshot!(name, text));
        }))
    });
    if outcome.is_ok() {
        return Ok(());
    }
    let mut out = String::new();
    match &before {
        None => {
            let _ = writeln!(out, "error: no snapshot yet: {}", snap.display());
        }
        Some(old) => {
            let _ = writeln!(out, "error: snapshot mismatch: {}", snap.display());
            let (old, new) = (format!("{old}\n"), format!("{text}\n"));
            let diff = similar::TextDiff::from_lines(old.as_str(), new.as_str());
            let _ = write!(
                out,
                "{}",
                diff.unified_diff()
                    .context_radius(3)
                    .header("stored", "received")
            );
        }
    }
    if pending.exists() {
        let _ = writeln!(
            out,
            "  = the answer was written to {}; review it with `cargo insta review` (or `cargo insta accept`)",
            pending.display()
        );
    } else {
        let _ = writeln!(
            out,
            "  = nothing was written (CI, or INSTA_UPDATE=no); run locally, then `cargo insta review`"
        );
    }
    Err(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_directory_names() {
        assert_eq!(slug("moonshotai/Kimi-K2.5"), "moonshotai--Kimi-K2.5");
        assert_eq!(slug("a b:c"), "a_b_c");
        assert_eq!(slug(""), "model");
    }
}
