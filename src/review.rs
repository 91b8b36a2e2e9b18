//! `servegate review`: the snapshot review flow for people who do not live
//! in Cargo. Each pending answer (`<probe>.snap.new`) is shown with the
//! suite file and line of its probe, the prompt, the model and the server
//! version and a diff against the stored answer, then accepted (it becomes
//! the `.snap`), rejected (deleted) or skipped. The files are insta's, so
//! `cargo insta review` settles the same ones inside a Cargo workspace.

use std::fmt::Write as _;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use crate::check::snapshot::{accepted_text, read_body};
use crate::files::write_atomically;
use crate::text::printable;

/// What to do with every pending answer without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Make it the stored snapshot.
    Accept,
    /// Delete it.
    Reject,
    /// Leave it pending.
    Skip,
}

/// Where pending answers are looked for, and where accepted ones go.
#[derive(Debug, Clone)]
pub struct Options {
    /// `.snap.new` files, directories searched for them, or suite files
    /// (their project's snapshots). Empty: the working directory's project.
    pub paths: Vec<PathBuf>,
    /// A copy of pending answers made elsewhere (a CI run's directory, or
    /// its `snapshots/`): reviewed against, and accepted into, `snapshots`.
    pub from: Option<PathBuf>,
    /// The snapshots directory answers from `from` belong to.
    pub snapshots: PathBuf,
    /// Decide every answer this way instead of asking.
    pub all: Option<Decision>,
    /// Colour the diff.
    pub color: bool,
}

/// How a review ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Answers accepted.
    pub accepted: usize,
    /// Answers rejected.
    pub rejected: usize,
    /// Answers left pending.
    pub skipped: usize,
}

/// One pending answer and the snapshot it would replace.
#[derive(Debug, Clone)]
struct Pending {
    new: PathBuf,
    snap: PathBuf,
}

/// Directories deeper than this are not searched (snapshots sit three
/// levels down: suite, model, file).
const MAX_DEPTH: usize = 8;

fn find(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        // Links are not followed: a review never leaves the tree it was given.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() && depth < MAX_DEPTH {
            find(&path, depth + 1, out);
        } else if meta.is_file() && path.to_string_lossy().ends_with(".snap.new") {
            out.push(path);
        }
    }
}

/// `x.snap.new` → `x.snap`.
fn stored_of(new: &Path) -> PathBuf {
    PathBuf::from(
        new.to_string_lossy()
            .strip_suffix(".new")
            .unwrap_or(&new.to_string_lossy()),
    )
}

fn pending(options: &Options) -> Vec<Pending> {
    let mut out = Vec::new();
    if let Some(from) = &options.from {
        let base = if from.join("snapshots").is_dir() {
            from.join("snapshots")
        } else {
            from.clone()
        };
        let mut found = Vec::new();
        find(&base, 0, &mut found);
        for new in found {
            let rel = new.strip_prefix(&base).unwrap_or(&new);
            out.push(Pending {
                snap: stored_of(&options.snapshots.join(rel)),
                new,
            });
        }
        return out;
    }
    let mut found = Vec::new();
    let defaults = [options.snapshots.clone()];
    let paths = if options.paths.is_empty() {
        &defaults[..]
    } else {
        &options.paths[..]
    };
    for p in paths {
        if p.is_dir() {
            find(p, 0, &mut found);
        } else if p.to_string_lossy().ends_with(".snap.new") {
            found.push(p.clone());
        } else {
            let project = crate::suite::project_root(p);
            find(&crate::check::snapshot::root(&project), 0, &mut found);
        }
    }
    found.dedup();
    out.extend(found.into_iter().map(|new| Pending {
        snap: stored_of(&new),
        new,
    }));
    out
}

/// The header of a snapshot file as JSON (insta's YAML metadata).
fn header(text: &str) -> serde_json::Value {
    text.strip_prefix("---\n")
        .and_then(|rest| rest.find("\n---\n").map(|end| &rest[..=end]))
        .and_then(|yaml| serde_saphyr::from_str::<serde_json::Value>(yaml).ok())
        .unwrap_or_default()
}

/// The prompt of a recorded request: the last user message, or the prompt.
fn prompt_of(request: &serde_json::Value) -> String {
    if let Some(messages) = request.get("messages").and_then(|m| m.as_array())
        && let Some(last) = messages
            .iter()
            .rev()
            .find(|m| m.get("role").and_then(|r| r.as_str()) == Some("user"))
    {
        return last
            .get("content")
            .and_then(|c| c.as_str())
            .unwrap_or("")
            .to_owned();
    }
    ["prompt", "text"]
        .iter()
        .find_map(|k| request.get(k).and_then(|p| p.as_str()))
        .unwrap_or("")
        .to_owned()
}

/// What is shown of one pending answer: where its probe is, what was
/// asked, of which model, and the diff.
fn describe(p: &Pending, index: usize, total: usize, color: bool) -> String {
    let mut out = String::new();
    let text = std::fs::read_to_string(&p.new).unwrap_or_default();
    let meta = header(&text);
    let field = |k: &str| meta.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let info = meta.get("info").cloned().unwrap_or_default();
    let info_str = |k: &str| {
        info.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("unknown")
            .to_owned()
    };
    let _ = writeln!(out, "── pending {index} of {total}: {}", p.snap.display());
    let line = meta
        .get("assertion_line")
        .and_then(serde_json::Value::as_u64)
        .map_or_else(String::new, |l| format!(":{l}"));
    let _ = writeln!(
        out,
        "   probe:   {}{line}  ({})",
        printable(field("source")),
        printable(field("description"))
    );
    let prompt = prompt_of(info.get("request").unwrap_or(&serde_json::Value::Null));
    let _ = writeln!(out, "   prompt:  {}", printable(&prompt));
    let _ = writeln!(
        out,
        "   model:   {}   server version: {}",
        printable(&info_str("model")),
        printable(&info_str("server_version"))
    );
    let new = read_body(&p.new).unwrap_or_else(|e| format!("(unreadable: {e})"));
    let old = if p.snap.exists() {
        read_body(&p.snap).ok()
    } else {
        None
    };
    let paint = |line: &str, code: &str| {
        if color {
            format!("\x1b[{code}m{}\x1b[0m", printable(line))
        } else {
            printable(line).into_owned()
        }
    };
    match &old {
        None => {
            let _ = writeln!(out, "   new snapshot (none stored yet):");
            for l in new.lines() {
                let _ = writeln!(out, "{}", paint(&format!("+{l}"), "32"));
            }
        }
        Some(old) => {
            let (old, new) = (format!("{old}\n"), format!("{new}\n"));
            let diff = similar::TextDiff::from_lines(old.as_str(), new.as_str());
            let diff = diff
                .unified_diff()
                .context_radius(3)
                .header("stored", "pending")
                .to_string();
            for l in diff.lines() {
                let code = match l.chars().next() {
                    Some('+') => "32",
                    Some('-') => "31",
                    Some('@') => "36",
                    _ => "0",
                };
                let _ = writeln!(out, "{}", paint(l, code));
            }
        }
    }
    out
}

fn apply(p: &Pending, decision: Decision) -> Result<(), String> {
    match decision {
        Decision::Accept => {
            let text = std::fs::read_to_string(&p.new)
                .map_err(|e| format!("failed to read {}: {e}", p.new.display()))?;
            write_atomically(&p.snap, &accepted_text(&text)).map_err(|e| e.to_string())?;
            std::fs::remove_file(&p.new)
                .map_err(|e| format!("failed to remove {}: {e}", p.new.display()))
        }
        Decision::Reject => std::fs::remove_file(&p.new)
            .map_err(|e| format!("failed to remove {}: {e}", p.new.display())),
        Decision::Skip => Ok(()),
    }
}

/// Reviews every pending answer: asks on `input` (a line each: `a`ccept,
/// `r`eject, `s`kip, `q`uit) unless `options.all` decides, and writes what
/// it shows to `output`.
pub fn review(
    options: &Options,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<Summary, String> {
    let found = pending(options);
    let io = |e: std::io::Error| format!("failed to write: {e}");
    if found.is_empty() {
        writeln!(output, "servegate: no pending snapshots").map_err(io)?;
        return Ok(Summary::default());
    }
    let mut summary = Summary::default();
    let mut quit = false;
    for (i, p) in found.iter().enumerate() {
        write!(output, "{}", describe(p, i + 1, found.len(), options.color)).map_err(io)?;
        let decision = match options.all {
            Some(d) => d,
            None if quit => Decision::Skip,
            None => loop {
                write!(output, "accept (a), reject (r), skip (s), quit (q)? ").map_err(io)?;
                output.flush().map_err(io)?;
                let mut line = String::new();
                if input.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                    writeln!(output).map_err(io)?;
                    quit = true;
                    break Decision::Skip;
                }
                match line.trim() {
                    "a" | "accept" => break Decision::Accept,
                    "r" | "reject" => break Decision::Reject,
                    "s" | "skip" | "" => break Decision::Skip,
                    "q" | "quit" => {
                        quit = true;
                        break Decision::Skip;
                    }
                    other => {
                        writeln!(output, "`{}`: answer a, r, s or q", printable(other))
                            .map_err(io)?;
                    }
                }
            },
        };
        apply(p, decision)?;
        let (count, word) = match decision {
            Decision::Accept => (&mut summary.accepted, "accepted"),
            Decision::Reject => (&mut summary.rejected, "rejected"),
            Decision::Skip => (&mut summary.skipped, "skipped"),
        };
        *count += 1;
        writeln!(output, "   {word}").map_err(io)?;
    }
    writeln!(
        output,
        "servegate: {} accepted, {} rejected, {} skipped",
        summary.accepted, summary.rejected, summary.skipped
    )
    .map_err(io)?;
    Ok(summary)
}
