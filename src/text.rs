//! Text a server or a model wrote, made safe to show: on a terminal or in a
//! CI log it must not move the cursor, colour, hide or rewrite lines; in a
//! record it is kept scrubbed, as an excerpt with its length and hash.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` would act on a terminal or a log rather than print: C0 and
/// C1 controls (escape, carriage return, …), DEL, line and paragraph
/// separators and the bidirectional overrides that reorder what is shown.
fn acts(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// One line of untrusted text as it is shown: every character that would
/// act (newlines included) written as an escape (`\n`, `\r`, `\u{1b}`).
pub fn printable(line: &str) -> Cow<'_, str> {
    if !line.chars().any(acts) {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 8);
    for c in line.chars() {
        if acts(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The last `n` lines of `text`, each behind `    | `, as a failure
/// message quotes a program's output.
pub(crate) fn quoted_tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A JSON text (as serde writes it, which escapes the C0 controls in
/// strings) with every other character that would act on a terminal or a
/// log written as a `\u` escape: such a character can only stand inside a
/// string (JSON's own syntax is ASCII, its only controls the line breaks
/// and tabs between values, which are kept), where the escape means the
/// same character, so the text stays JSON and reads back equal.
pub fn json_inert(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if acts(c) && !matches!(c, '\n' | '\r' | '\t') {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A block of output (a failure message, a summary) as it may reach a
/// terminal or a CI log: every known secret scrubbed, every line's acting
/// characters escaped, and nothing a CI system or a test-output parser would
/// read as its own: a GitHub workflow command (`::warning …`, found after
/// leading whitespace too) has a zero-width space put between its colons,
/// every Azure command (`##[…`, found anywhere in a line) one after its
/// `##`, and a libtest line (`test …`, `test result: …`) is indented — so
/// that no server string can forge one.
pub fn for_log(text: &str) -> String {
    const BREAK: char = '\u{200b}';
    let scrubbed = crate::secrets::scrub(text);
    let mut out = String::with_capacity(scrubbed.len());
    for (i, line) in scrubbed.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let line = printable(line);
        let mut line = line.replace("##[", &format!("##{BREAK}["));
        let body = line.trim_start();
        if let Some(rest) = body.strip_prefix("::") {
            let indent = line.len() - body.len();
            line = format!("{}:{BREAK}:{rest}", &line[..indent]);
        }
        if ["test ", "running "].iter().any(|p| line.starts_with(p)) {
            out.push_str("  ");
        }
        out.push_str(&line);
    }
    out
}

/// Untrusted text for Markdown outside code (GitHub's step summary): every
/// character Markdown or the HTML it allows could read as markup is
/// escaped, so a model id `<img src=…>` or `[link](…)` stays text.
pub(crate) fn for_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in printable(text).chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            // What starts markup inside a line (this text never starts
            // one: a list, a heading or a quote would need that).
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Untrusted text as a Markdown code span: fenced by one backtick more
/// than the longest run of them it holds (with a space inside each fence
/// where one would touch a backtick of the text), its pipes escaped (a
/// table cell ends at one even inside a span).
pub(crate) fn md_code(text: &str) -> String {
    let text = printable(text);
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    // A space inside each fence only where a backtick would touch it.
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{}{pad}{fence}", text.replace('|', "\\|"))
}

/// Text for XML 1.0, which cannot hold every character: C0 controls other
/// than tab, newline and carriage return, and the non-characters U+FFFE and
/// U+FFFF, become U+FFFD (a JUnit file with one is not well-formed, and a
/// CI reader drops the whole report).
pub(crate) fn for_xml(text: &str) -> Cow<'_, str> {
    let bad = |c: char| matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}');
    if !text.chars().any(bad) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| if bad(c) { '\u{fffd}' } else { c })
            .collect(),
    )
}

/// The most characters of an answer a record keeps (4,096, the excerpt of
/// a snapshot's answer).
pub(crate) const KEPT_CHARS: usize = 4096;

/// A text as a record keeps it: scrubbed, then cut to `KEPT_CHARS`, with
/// the whole one's length and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// The excerpt (the whole text when it is short enough).
    pub text: String,
    /// Characters of the whole scrubbed text.
    pub chars: usize,
    /// SHA-256 of the whole scrubbed text, lower-case hex.
    pub sha256: String,
}

impl Kept {
    /// Keeps `text`.
    #[must_use]
    pub fn of(text: &str) -> Kept {
        let clean = crate::secrets::scrub(text);
        let (excerpt, whole) = crate::secrets::cut_scrubbed(&clean, KEPT_CHARS);
        Kept {
            chars: whole.unwrap_or_else(|| excerpt.chars().count()),
            text: excerpt,
            sha256: sha256_hex(clean.as_bytes()),
        }
    }
}

/// SHA-256 of `bytes`, lower-case hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().fold(String::new(), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    })
}

#[cfg(test)]
mod tests {
    use super::{for_log, for_markdown, for_xml, md_code, printable};

    #[test]
    fn forged_lines_are_broken_and_controls_escaped() {
        let forged = "error: x\n::warning title=pwned::gotcha\n   ::stop-commands::x\nid ##[error]y\ntest result: ok. 99 passed; 0 failed\n\x1b[2Jcleared";
        assert_eq!(
            for_log(forged),
            "error: x\n:\u{200b}:warning title=pwned::gotcha\n   :\u{200b}:stop-commands::x\nid ##\u{200b}[error]y\n  test result: ok. 99 passed; 0 failed\n\\u{1b}[2Jcleared"
        );
        // What GitHub's runner does: trim, then look for `::` and `##[`.
        for line in for_log(forged).lines() {
            assert!(!line.trim_start().starts_with("::") && !line.contains("##["));
        }
    }

    #[test]
    fn json_made_inert_stays_json_and_reads_back_equal() {
        let value = serde_json::json!({ "node": "a\u{1b}[2J\u{9b}b\u{202e}c\u{7f}\n::error::x" });
        let text = serde_json::to_string_pretty(&value).unwrap();
        let inert = super::json_inert(&text);
        assert!(
            !inert.chars().any(|c| super::acts(c) && c != '\n'),
            "{inert}"
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&inert).unwrap(),
            value
        );
    }

    #[test]
    fn controls_are_escaped_and_plain_text_is_kept() {
        assert_eq!(printable("plain ü\ttab"), "plain ü\ttab");
        assert_eq!(printable("a\nb\r\u{1b}[2K"), "a\\nb\\r\\u{1b}[2K");
        assert_eq!(printable("x\u{202e}y"), "x\\u{202e}y");
    }

    #[test]
    fn markup_and_xml_breakers_stay_text() {
        assert_eq!(
            for_markdown("<img src=x> [a](b)"),
            "&lt;img src=x&gt; \\[a\\](b)"
        );
        assert_eq!(md_code("a`b``c|d"), "```a`b``c\\|d```");
        assert_eq!(md_code("`x"), "`` `x ``");
        assert_eq!(md_code("plain::name"), "`plain::name`");
        assert_eq!(for_xml("ok\tfine\n"), "ok\tfine\n");
        assert_eq!(
            for_xml("a\u{fffe}b\u{ffff}\u{1}"),
            "a\u{fffd}b\u{fffd}\u{fffd}"
        );
    }
}
