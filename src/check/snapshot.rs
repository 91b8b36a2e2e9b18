//! Snapshots of model outputs: each probe's answer kept in
//! `<project>/snapshots/<suite>/<model>/<probe>.snap`, in insta's file format
//! (so `cargo insta review` works in a Cargo workspace, and `servegate
//! review` everywhere), with the suite file and the probe's line as the
//! snapshot's source and the request, model and server version as its info.
//!
//! servegate writes and compares the files itself, reading them with insta's
//! parser: insta's assertion runtime would name servegate's own code as the
//! source and obey the user's `INSTA_*` variables inside a gate
//! (`INSTA_FORCE_PASS` would pass a changed answer). What the variables may
//! do is decided here, once per run (`Policy`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::files::write_atomically;
use insta::internals::{SnapshotContents, TextSnapshotContents};

use super::message::Message;
use crate::client::Completion;
use crate::suite::SourceFile;
use crate::suite::node::Loc;
use crate::text::printable;

/// Where a probe's snapshot lives and what it records beside the answer.
#[derive(Debug, Clone)]
pub struct Place {
    /// The snapshots directory: `<project>/snapshots` or `SERVEGATE_SNAPSHOTS`.
    pub root: PathBuf,
    /// `<suite>/<model-slug>` under it.
    pub rel: PathBuf,
    /// The probe's name: the snapshot's name.
    pub name: String,
    /// The suite file, relative to its project: the snapshot's source.
    pub source: String,
    /// The probe's line in it.
    pub line: u32,
    /// The trial, for the snapshot's description.
    pub description: String,
    /// Metadata: request, model, API, server version.
    pub info: serde_json::Value,
}

impl Place {
    /// The stored snapshot.
    pub fn path(&self) -> PathBuf {
        self.root
            .join(&self.rel)
            .join(format!("{}.snap", self.name))
    }

    /// The pending answer beside the stored one (insta's place for it).
    fn pending_beside(&self) -> PathBuf {
        pending_of(&self.path())
    }
}

/// The snapshots directory of a project: `SERVEGATE_SNAPSHOTS`, else
/// `<project>/snapshots`.
pub fn root(project: &Path) -> PathBuf {
    std::env::var_os("SERVEGATE_SNAPSHOTS")
        .filter(|v| !v.is_empty())
        .map_or_else(
            || project.join("snapshots"),
            |d| crate::suite::absolute(Path::new(&d)),
        )
}

/// `x.snap` → `x.snap.new`.
pub(crate) fn pending_of(snap: &Path) -> PathBuf {
    let mut name = snap.as_os_str().to_owned();
    name.push(".new");
    PathBuf::from(name)
}

/// What a run does with an answer that has no snapshot or a changed one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// Write `<probe>.snap.new` beside the stored one, for review (local runs).
    Pending,
    /// Write it under this directory instead, mirroring `snapshots/` (CI:
    /// the run directory, uploaded as an artifact; nothing in the checkout).
    PendingIn(PathBuf),
    /// Record new and changed answers as the snapshot (`INSTA_UPDATE=always`).
    Record,
    /// Rewrite every snapshot, the ones that match too, refreshing their
    /// headers (`INSTA_UPDATE=force`).
    RecordAll,
    /// Record missing snapshots, leave changed ones pending (`INSTA_UPDATE=unseen`).
    RecordNew,
    /// Write nothing (`INSTA_UPDATE=no`).
    Nothing,
}

/// How this run treats snapshots, decided once from the environment.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    /// What is written when an answer is new or changed.
    pub update: Update,
    /// Notes to print once: variables read and what they do here.
    pub notes: Vec<String>,
}

impl Policy {
    /// The policy for a run whose directory is `run_dir`: `INSTA_UPDATE`
    /// (`auto`/`new`/`always`/`force`/`unseen`/`no`) as insta reads it, CI
    /// (`CI` or `TF_BUILD` set) writing pending answers into the run
    /// directory. `INSTA_FORCE_PASS` is ignored: a gate never passes a
    /// changed answer.
    pub(crate) fn from_env(get: &dyn Fn(&str) -> Option<String>, run_dir: &Path) -> Self {
        let set = |name: &str| get(name).filter(|v| !v.is_empty());
        let ci = set("CI").is_some_and(|v| v != "false" && v != "0") || set("TF_BUILD").is_some();
        let mut notes = Vec::new();
        if set("INSTA_FORCE_PASS").is_some_and(|v| v != "0") {
            notes.push(
                "INSTA_FORCE_PASS is ignored: a changed answer never passes its snapshot trial"
                    .to_owned(),
            );
        }
        let in_run_dir = || Update::PendingIn(run_dir.join("snapshots"));
        let update = match set("INSTA_UPDATE").as_deref() {
            None | Some("auto") if ci => in_run_dir(),
            None | Some("auto" | "new") => Update::Pending,
            Some(how @ ("always" | "force")) => {
                notes.push(format!(
                    "INSTA_UPDATE={how} records answers as their snapshots; each one recorded is named below"
                ));
                if how == "force" {
                    Update::RecordAll
                } else {
                    Update::Record
                }
            }
            Some("unseen") => Update::RecordNew,
            Some("no") => Update::Nothing,
            Some(other) => {
                notes.push(format!(
                    "INSTA_UPDATE={other:?} is not one of auto, new, always, force, unseen, no; read as auto"
                ));
                if ci { in_run_dir() } else { Update::Pending }
            }
        };
        Self { update, notes }
    }
}

/// The most characters of a model id a snapshot directory keeps whole.
const SLUG_CHARS: usize = 100;

/// A model id as a directory name: `moonshotai/Kimi-K2.5` →
/// `moonshotai--Kimi-K2.5`; never `.` or `..`, never a path. The id is
/// the server's word: scrubbed of secrets first (a server that echoes the
/// key into it must not name a directory with it), and at most
/// [`SLUG_CHARS`] characters, a longer one cut and ended with the start of
/// its SHA-256 (two ids alike up to the cut stay two directories).
pub fn slug(model: &str) -> String {
    let clean = crate::secrets::scrub(model);
    let (cut, whole) = crate::secrets::cut_scrubbed(&clean, SLUG_CHARS);
    let model = match whole {
        None => cut,
        Some(_) => format!("{cut}-{}", &crate::text::sha256_hex(clean.as_bytes())[..16]),
    };
    let s: String = model
        .replace('/', "--")
        .chars()
        .map(|c| {
            if crate::files::is_name_char(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "model".to_owned()
    } else if s.chars().all(|c| c == '.') {
        s.replace('.', "_")
    } else {
        s
    }
}

/// What is snapshotted of a completion: the answer, the reasoning and the
/// tool calls when there are any (each call's name and arguments as the
/// server sent them, a JSON object a line), and the finish reason. Ids and timings are never
/// written.
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
    if !c.tool_calls.is_empty() {
        out.push_str("--- tool_calls ---\n");
        // One JSON object a call: a name or arguments holding a newline or
        // `--- content ---` cannot make two answers read alike.
        for call in &c.tool_calls {
            let _ = writeln!(out, "{}", serde_json::to_string(call).unwrap_or_default());
        }
    }
    let _ = write!(out, "--- content ---\n{}", c.content.trim_end());
    out
}

/// A snapshot file's header, in the order insta writes its fields.
#[derive(serde::Serialize)]
struct Header<'a> {
    source: &'a str,
    /// Only in pending files, as insta does.
    #[serde(skip_serializing_if = "Option::is_none")]
    assertion_line: Option<u32>,
    description: &'a str,
    info: &'a serde_json::Value,
    input_file: &'a str,
}

/// The text of a snapshot file for `body`; `pending` files keep the line.
/// Secrets are scrubbed from the values before they are written as YAML
/// (after, an escaped secret would no longer read as itself).
fn file_text(place: &Place, body: &str, pending: bool) -> String {
    let mut info = place.info.clone();
    crate::secrets::scrub_json(&mut info);
    let header = Header {
        source: &place.source,
        assertion_line: pending.then_some(place.line),
        description: &place.description,
        info: &info,
        input_file: &place.source,
    };
    let yaml = serde_saphyr::to_string(&header).unwrap_or_default();
    let body = normalized(&crate::secrets::scrub(body));
    format!("---\n{}---\n{body}\n", yaml.trim_start_matches("---\n"))
}

/// The answer as insta compares it (trailing whitespace and CRLF normalised).
fn normalized(body: &str) -> String {
    TextSnapshotContents::new(body.to_owned(), insta::TextSnapshotKind::File).to_string()
}

/// The body of a snapshot file, read by insta's own parser; `Err` says why
/// it could not be read.
pub(crate) fn read_body(path: &Path) -> Result<String, String> {
    let snap = insta::Snapshot::from_file(path).map_err(|e| e.to_string())?;
    match snap.contents() {
        SnapshotContents::Text(t) => Ok(t.to_string()),
        SnapshotContents::Binary(_) => Err("a binary snapshot, not an answer".to_owned()),
    }
}

/// The file a pending snapshot becomes when accepted: its header without
/// the assertion line, its body as is.
pub(crate) fn accepted_text(pending: &str) -> String {
    let Some(rest) = pending.strip_prefix("---\n") else {
        return pending.to_owned();
    };
    let Some(end) = rest.find("\n---\n") else {
        return pending.to_owned();
    };
    let mut header = String::new();
    for line in rest[..=end]
        .lines()
        .filter(|l| !l.starts_with("assertion_line:"))
    {
        header.push_str(line);
        header.push('\n');
    }
    format!("---\n{header}---\n{}", &rest[end + 5..])
}

/// An answer that matched or was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compared {
    /// The same answer as the stored one.
    Matched,
    /// Recorded as the snapshot (`INSTA_UPDATE=always`/`unseen`).
    Recorded(PathBuf),
}

/// An answer with no snapshot yet, or a different one.
#[derive(Debug, Clone)]
pub struct Changed {
    /// The stored snapshot.
    pub path: PathBuf,
    /// The stored answer, if there is one; `Err` when it could not be read.
    pub stored: Option<Result<String, String>>,
    /// The answer received, as it would be stored.
    pub received: String,
    /// Where the answer was written for review, or why it was not.
    pub pending: Result<PathBuf, String>,
}

impl Changed {
    /// The failure message of the snapshot trial: which file, where the
    /// probe is written, the diff (or the whole answer when there is no
    /// snapshot yet), where the answer went for review.
    pub fn message(&self, file: &SourceFile, loc: Loc, gates: bool) -> Message {
        let shown = shown_path(&self.path);
        let mut out = Message::of_error(match &self.stored {
            None => format!("no snapshot yet: {shown}"),
            Some(Err(e)) => format!("snapshot unreadable: {shown}: {e}"),
            Some(Ok(_)) => format!("snapshot changed: {shown}"),
        });
        out.at(file, loc);
        if let Some(Ok(old)) = &self.stored {
            let (old, new) = (format!("{old}\n"), format!("{}\n", self.received));
            let diff = similar::TextDiff::from_lines(old.as_str(), new.as_str());
            let diff = diff
                .unified_diff()
                .context_radius(3)
                .header("stored", "received")
                .to_string();
            show_lines(&mut out, "", diff.lines(), self.received.len());
        } else {
            let _ = writeln!(out, "received:");
            show_lines(&mut out, "  | ", self.received.lines(), self.received.len());
        }
        match &self.pending {
            Ok(p) => {
                let _ = writeln!(
                    out,
                    "  = the answer is in {} for review: `servegate review` accepts or rejects it (`cargo insta review` also works in a Cargo workspace)",
                    shown_path(p)
                );
            }
            Err(why) => {
                let _ = writeln!(out, "  = {why}");
            }
        }
        let _ = writeln!(
            out,
            "  = {}",
            if gates {
                "`snapshot: gate`: the suite's performance gates are gated by this answer"
            } else {
                "a review item: the correctness probe and the performance gates do not depend on it (`snapshot: gate` would make them)"
            }
        );
        out
    }
}

/// Most of an answer (or of its diff) a snapshot's failure message shows:
/// the message reaches the terminal, an annotation, the step summary and
/// JUnit, and the whole answer is in its file for review.
const SHOWN_LINES: usize = 60;
const SHOWN_BYTES: usize = 4096;

/// Writes `lines` after `prefix`, each made printable, until
/// [`SHOWN_LINES`] or [`SHOWN_BYTES`]; then how much was left out of the
/// `total` bytes of the answer.
fn show_lines<'a>(
    out: &mut Message,
    prefix: &str,
    mut lines: impl Iterator<Item = &'a str>,
    total: usize,
) {
    let mut bytes = 0;
    for (shown, line) in lines.by_ref().enumerate() {
        let (line, cut) = crate::secrets::cut(line, SHOWN_BYTES - bytes);
        bytes += line.len();
        let more = cut.map_or_else(String::new, |n| format!("… ({n} chars in all)"));
        let _ = writeln!(out, "{prefix}{}{more}", printable(&line));
        if shown + 1 == SHOWN_LINES || bytes >= SHOWN_BYTES {
            break;
        }
    }
    let left = lines.count();
    if left > 0 || bytes >= SHOWN_BYTES {
        let rest = match left {
            0 => "the rest".to_owned(),
            1 => "1 more line".to_owned(),
            n => format!("{n} more lines"),
        };
        let _ = writeln!(
            out,
            "{prefix}… {rest} not shown ({total} bytes of answer in all; the whole is in its file)"
        );
    }
}

/// A path relative to the working directory when it is under it.
pub(crate) fn shown_path(p: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| p.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| p.to_path_buf())
        .display()
        .to_string()
}

/// Compares the answer with the stored snapshot and, when it is new or
/// different, writes what `update` says.
pub fn compare(place: &Place, answer: &str, update: &Update) -> Result<Compared, Changed> {
    let path = place.path();
    // As it would be stored: a secret the server echoed is never written.
    let received = normalized(&crate::secrets::scrub(answer));
    let stored = path.exists().then(|| read_body(&path));
    if let Some(Ok(old)) = &stored
        && *old == received
        && *update != Update::RecordAll
    {
        return Ok(Compared::Matched);
    }
    let record = match update {
        Update::Record | Update::RecordAll => true,
        Update::RecordNew => stored.is_none(),
        _ => false,
    };
    if record {
        let written =
            write_atomically(&path, &file_text(place, &received, false)).map_err(|e| e.to_string());
        let _ = std::fs::remove_file(place.pending_beside());
        return match written {
            Ok(()) => Ok(Compared::Recorded(path)),
            Err(e) => Err(Changed {
                path,
                stored,
                received,
                pending: Err(e),
            }),
        };
    }
    let pending = match update {
        Update::Pending | Update::RecordNew => Ok(place.pending_beside()),
        Update::PendingIn(dir) => Ok(dir
            .join(&place.rel)
            .join(format!("{}.snap.new", place.name))),
        Update::Nothing => Err("INSTA_UPDATE=no: nothing was written".to_owned()),
        Update::Record | Update::RecordAll => unreachable!("recorded above"),
    }
    .and_then(|p| {
        write_atomically(&p, &file_text(place, &received, true))
            .map(|()| p)
            .map_err(|e| e.to_string())
    });
    Err(Changed {
        path,
        stored,
        received,
        pending,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(root: &Path) -> Place {
        Place {
            root: root.to_path_buf(),
            rel: PathBuf::from("suite/model"),
            name: "probe".to_owned(),
            source: "suites/x.yaml".to_owned(),
            line: 12,
            description: "suite::snapshot::probe".to_owned(),
            info: serde_json::json!({"model": "m", "request": {"prompt": "Hi: \"there\"\n---"}}),
        }
    }

    #[test]
    fn a_tool_call_is_part_of_the_answer_without_its_id() {
        use crate::client::api::ToolCall;
        let c = Completion {
            finish_reason: Some("tool_calls".into()),
            tool_calls: vec![ToolCall {
                id: "call_1c823bbd".into(),
                name: "get_weather".into(),
                arguments: r#"{"city": "Paris"}"#.into(),
            }],
            ..Completion::default()
        };
        assert_eq!(
            render(&c),
            "finish_reason: tool_calls\n--- tool_calls ---\n{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}\n--- content ---\n"
        );
    }

    #[test]
    fn slugs_are_directory_names() {
        assert_eq!(slug("moonshotai/Kimi-K2.5"), "moonshotai--Kimi-K2.5");
        assert_eq!(slug("a b:c"), "a_b_c");
        assert_eq!(slug(""), "model");
        assert_eq!(slug(".."), "__");
        assert_eq!(slug("."), "_");
        assert_eq!(slug("../../etc"), "..--..--etc");
        let long = slug(&"m".repeat(3 << 20));
        assert_eq!(long.len(), 100 + 1 + 16, "{long}");
        assert_ne!(long, slug(&format!("{}x", "m".repeat(3 << 20))));
    }

    /// The files servegate writes are read back by insta's parser with the
    /// suite file as their source and the probe's line in pending ones.
    #[test]
    fn files_are_in_insta_format_and_point_at_the_suite() {
        let dir = std::env::temp_dir().join(format!("servegate-snapfmt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let p = place(&dir);
        let body = "finish_reason: stop\n--- content ---\nline one\n---\nline three  \r\n";
        let Err(changed) = compare(&p, body, &Update::Pending) else {
            panic!("no snapshot yet must not match");
        };
        let pending = changed.pending.unwrap();
        assert_eq!(pending, dir.join("suite/model/probe.snap.new"));
        let snap = insta::Snapshot::from_file(&pending).unwrap();
        assert_eq!(snap.metadata().source(), Some("suites/x.yaml"));
        assert_eq!(snap.metadata().assertion_line(), Some(12));
        assert_eq!(snap.metadata().input_file(), Some("suites/x.yaml"));
        assert_eq!(
            read_body(&pending).unwrap(),
            "finish_reason: stop\n--- content ---\nline one\n---\nline three"
        );
        // Accepted: the line goes, insta still reads it, and it matches.
        let text = std::fs::read_to_string(&pending).unwrap();
        write_atomically(&p.path(), &accepted_text(&text)).unwrap();
        let accepted = insta::Snapshot::from_file(&p.path()).unwrap();
        assert_eq!(accepted.metadata().assertion_line(), None);
        assert_eq!(
            compare(&p, body, &Update::Nothing).unwrap(),
            Compared::Matched
        );
        let Err(changed) = compare(&p, "other", &Update::Nothing) else {
            panic!("a different answer must not match");
        };
        assert!(changed.pending.is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_environment_decides_only_what_is_written() {
        let run = Path::new("/runs/1");
        let policy = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            Policy::from_env(
                &move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()),
                run,
            )
        };
        assert_eq!(policy(&[]).update, Update::Pending);
        assert_eq!(
            policy(&[("CI", "true")]).update,
            Update::PendingIn(run.join("snapshots"))
        );
        assert_eq!(policy(&[("CI", "false")]).update, Update::Pending);
        assert_eq!(policy(&[("INSTA_UPDATE", "always")]).update, Update::Record);
        assert_eq!(policy(&[("INSTA_UPDATE", "no")]).update, Update::Nothing);
        let forced = policy(&[("INSTA_FORCE_PASS", "1")]);
        assert_eq!(forced.update, Update::Pending);
        assert!(forced.notes[0].contains("INSTA_FORCE_PASS is ignored"));
    }
}
