//! A failure message as data: its lines, each marked as part of the gist
//! or as detail when it is written, and the places in the suite file it
//! points at. Renderers read the marks and the places; none of them
//! searches the text for a prefix or a `-->` to get them back.

use std::fmt;

use crate::suite::SourceFile;
use crate::suite::diagnostics::render_location;
use crate::suite::node::Loc;

/// A labelled line of a failure: part of its gist, the lines a gated
/// trial repeats (what went wrong, where, what was found, what came back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// `found:`, what the failing check found.
    Found,
    /// `note:`, a fact that explains the failure.
    Note,
    /// `help:`, what to change.
    Help,
    /// `received:`, the answer's counts and timing.
    Received,
    /// `  content:`, the answer's text (indented under `received:`).
    Content,
    /// `  reasoning:`, its reasoning (indented under `received:`).
    Reasoning,
    /// `  tool_calls:`, its tool calls (indented under `received:`).
    ToolCalls,
}

impl Label {
    /// The label as written, padded so values line up.
    fn prefix(self) -> &'static str {
        match self {
            Label::Found => "found:    ",
            Label::Note => "note:     ",
            Label::Help => "help:     ",
            Label::Received => "received: ",
            Label::Content => "  content:   ",
            Label::Reasoning => "  reasoning: ",
            Label::ToolCalls => "  tool_calls:",
        }
    }
}

/// One stretch of a message's text.
#[derive(Debug, Clone, PartialEq)]
struct Part {
    /// Part of the gist.
    gist: bool,
    text: String,
}

/// A failure message: written with [`Message::error`], [`Message::at`],
/// [`Message::line`] for the lines of its gist and `write!` for the rest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Message {
    parts: Vec<Part>,
    /// The places in the suite file it points at, in the order written.
    at: Vec<Loc>,
    /// What its first `error:` line says.
    headline: Option<String>,
}

/// At most this many lines of a failure in its gist.
const GIST_LINES: usize = 12;

impl Message {
    /// An empty message.
    pub fn new() -> Self {
        Self::default()
    }

    /// A message of one `error:` line.
    pub(crate) fn of_error(what: impl fmt::Display) -> Self {
        let mut m = Self::new();
        m.error(what);
        m
    }

    fn push(&mut self, gist: bool, text: String) {
        match self.parts.last_mut() {
            Some(last) if last.gist == gist => last.text.push_str(&text),
            _ => self.parts.push(Part { gist, text }),
        }
    }

    /// Writes `error: <what>`: its first line is in the gist, any lines
    /// after it (a log's tail) are detail.
    pub fn error(&mut self, what: impl fmt::Display) -> &mut Self {
        let what = what.to_string();
        if self.headline.is_none() {
            self.headline = Some(what.lines().next().unwrap_or("").to_owned());
        }
        self.labelled("error: ", &what)
    }

    /// Writes `-->` with the file, line and column (in the gist), then the
    /// source line and a caret under `loc` (detail); `loc` is a place the
    /// message points at.
    pub fn at(&mut self, file: &SourceFile, loc: Loc) -> &mut Self {
        let mut shown = String::new();
        render_location(&mut shown, &file.display(), &file.text, loc);
        let (arrow, source) = shown.split_at(shown.find('\n').map_or(shown.len(), |i| i + 1));
        self.push(true, arrow.to_owned());
        self.push(false, source.to_owned());
        self.at.push(loc);
        self
    }

    /// Writes a labelled line: its first line is in the gist, any lines
    /// after it (a program's listing, its stderr) are detail.
    pub fn line(&mut self, label: Label, text: impl fmt::Display) -> &mut Self {
        self.labelled(label.prefix(), &text.to_string())
    }

    /// `prefix` and the first line of `text` as gist, the rest as detail.
    fn labelled(&mut self, prefix: &str, text: &str) -> &mut Self {
        let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
        self.push(true, format!("{prefix}{first}\n"));
        if !rest.is_empty() {
            self.push(false, format!("{rest}\n"));
        }
        self
    }

    /// Appends `other`: its lines, marks and places.
    pub fn append(&mut self, other: Message) {
        for p in other.parts {
            self.push(p.gist, p.text);
        }
        self.at.extend(other.at);
        self.headline = self.headline.take().or(other.headline);
    }

    /// What its first `error:` line says (without the label); else its
    /// first line that is not blank.
    pub fn headline(&self) -> String {
        self.headline.clone().unwrap_or_else(|| {
            let text = self.to_string();
            text.lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .to_owned()
        })
    }

    /// Whether nothing is written.
    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(|p| p.text.is_empty())
    }

    /// The first place it points at: the failing assertion or threshold.
    pub fn points_at(&self) -> Option<Loc> {
        self.at.first().copied()
    }

    /// Its gist, for the trials a failure gates: the lines marked as gist
    /// (at most [`GIST_LINES`]), or its first line when none is.
    pub fn gist(&self) -> String {
        let lines: Vec<&str> = self
            .parts
            .iter()
            .filter(|p| p.gist)
            .flat_map(|p| p.text.lines())
            .take(GIST_LINES)
            .collect();
        if lines.is_empty() {
            self.to_string().lines().next().unwrap_or("").to_owned()
        } else {
            lines.join("\n")
        }
    }

    /// The same message with every stretch of text passed through `f`
    /// (made safe for a log, secrets scrubbed); marks and places kept.
    #[must_use]
    pub(crate) fn map_text(self, f: impl Fn(&str) -> String) -> Self {
        Self {
            parts: self
                .parts
                .into_iter()
                .map(|p| Part {
                    text: f(&p.text),
                    ..p
                })
                .collect(),
            at: self.at,
            headline: self.headline.map(|h| f(&h)),
        }
    }
}

/// Detail: text outside the gist.
impl fmt::Write for Message {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(false, s.to_owned());
        Ok(())
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.parts.iter().try_for_each(|p| f.write_str(&p.text))
    }
}

/// A message of plain text, with no gist lines and no place.
impl From<String> for Message {
    fn from(text: String) -> Self {
        let mut m = Self::new();
        m.push(false, text);
        m
    }
}

impl From<&str> for Message {
    fn from(text: &str) -> Self {
        text.to_owned().into()
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;
    use std::path::PathBuf;

    use super::*;

    fn file() -> SourceFile {
        SourceFile {
            path: PathBuf::from("s.yaml"),
            text: "a: 1\nb: 2\nc: 3\n".into(),
            root: PathBuf::from("."),
        }
    }

    fn loc(line: u32) -> Loc {
        Loc {
            line,
            column: 4,
            len: 1,
        }
    }

    #[test]
    fn the_gist_is_the_marked_lines_and_the_place_the_first_written() {
        let mut m = Message::new();
        m.error("wrong\n  (why)").at(&file(), loc(2));
        m.line(Label::Found, "5");
        let _ = writeln!(m, "\nsent:     POST u\n          {{}}");
        m.line(Label::Received, "1 token")
            .line(Label::Content, "\"5\"");
        m.at(&file(), loc(3));
        assert_eq!(
            m.to_string(),
            "error: wrong\n  (why)\n --> s.yaml:2:4\n  |\n2 | b: 2\n  |    ^\nfound:    5\n\nsent:     POST u\n          {}\nreceived: 1 token\n  content:   \"5\"\n --> s.yaml:3:4\n  |\n3 | c: 3\n  |    ^\n"
        );
        assert_eq!(
            m.gist(),
            "error: wrong\n --> s.yaml:2:4\nfound:    5\nreceived: 1 token\n  content:   \"5\"\n --> s.yaml:3:4"
        );
        assert_eq!(m.points_at(), Some(loc(2)));
        assert_eq!(m.headline(), "wrong");
        assert_eq!(Message::from("\n  plain\n").headline(), "plain");
    }

    /// A long `found:` (a code check's program and its stderr) gives the
    /// gist its first line only: the rest stays in the message.
    #[test]
    fn only_the_first_line_of_a_labelled_text_is_gist() {
        let mut m = Message::new();
        m.line(
            Label::Found,
            "test 2 failed\n  1 | def f():\n  2 |     return 1",
        );
        m.line(Label::Received, "1 token");
        assert_eq!(m.gist(), "found:    test 2 failed\nreceived: 1 token");
        assert!(
            m.to_string()
                .contains("  2 |     return 1\nreceived: 1 token\n")
        );
    }

    /// A detail line that reads like a gist line stays detail: nothing is
    /// judged by its prefix.
    #[test]
    fn text_written_as_detail_is_never_gist_whatever_it_says() {
        let mut m = Message::from("the model wrote:\n");
        let _ = writeln!(m, "error: I am the gist now\n --> s.yaml:1:1");
        assert_eq!(m.gist(), "the model wrote:");
        assert_eq!(m.points_at(), None);
    }

    #[test]
    fn mapped_text_keeps_its_marks_and_places() {
        let mut m = Message::of_error("token sk-1");
        m.at(&file(), loc(1));
        let _ = writeln!(m, "sk-1 again");
        let m = m.map_text(|t| t.replace("sk-1", "[redacted]"));
        assert_eq!(m.gist(), "error: token [redacted]\n --> s.yaml:1:4");
        assert!(m.to_string().ends_with("[redacted] again\n"));
        assert_eq!(m.points_at(), Some(loc(1)));
    }

    #[test]
    fn a_long_gist_is_cut_and_an_unmarked_message_gives_its_first_line() {
        let mut m = Message::new();
        for i in 0..20 {
            m.error(i);
        }
        assert_eq!(m.gist().lines().count(), GIST_LINES);
        assert_eq!(Message::from("one\ntwo").gist(), "one");
        assert!(Message::new().is_empty());
    }
}
