//! Text a server or a model wrote, made safe to show: on a terminal or in a
//! CI log it must not move the cursor, colour, hide or rewrite lines.

use std::borrow::Cow;

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

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn controls_are_escaped_and_plain_text_is_kept() {
        assert_eq!(printable("plain ü\ttab"), "plain ü\ttab");
        assert_eq!(printable("a\nb\r\u{1b}[2K"), "a\\nb\\r\\u{1b}[2K");
        assert_eq!(printable("x\u{202e}y"), "x\\u{202e}y");
    }
}
