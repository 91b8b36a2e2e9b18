//! Suite-file errors rendered the way rustc and hurl render them: the file
//! and position, the source line, a caret under the offending token, then what
//! was expected.

use std::fmt::Write as _;

use super::node::Loc;

/// One problem in a suite file.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// Where the problem is.
    pub loc: Loc,
    /// What is wrong, as a lowercase fragment ("unknown field `x` in probe").
    pub message: String,
    /// What would have been accepted.
    pub expected: Option<String>,
    /// A suggestion ("did you mean `temperature`?").
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with only a message.
    pub fn new(loc: Loc, message: impl Into<String>) -> Self {
        Self {
            loc,
            message: message.into(),
            expected: None,
            help: None,
        }
    }

    /// Adds what was expected.
    #[must_use]
    pub fn expected(mut self, expected: impl Into<String>) -> Self {
        self.expected = Some(expected.into());
        self
    }

    /// Adds a suggestion.
    #[must_use]
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Renders the diagnostic against the file's text.
    pub fn render(&self, path: &str, source: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "error: {}", self.message);
        let gutter = " ".repeat(render_location(&mut out, path, source, self.loc) + 1);
        if let Some(expected) = &self.expected {
            let _ = writeln!(out, "{gutter}= expected: {expected}");
        }
        if let Some(help) = &self.help {
            let _ = writeln!(out, "{gutter}= help: {help}");
        }
        out
    }
}

/// The most of a source line a diagnostic shows.
const MAX_SHOWN: usize = 160;

/// Writes ` --> path:line:col`, the source line and a caret line, as rustc
/// does; returns the width of the line-number gutter.
pub(crate) fn render_location(out: &mut String, path: &str, source: &str, loc: Loc) -> usize {
    let number = loc.line.to_string();
    let gutter = " ".repeat(number.len());
    let _ = writeln!(out, "{gutter}--> {path}:{}:{}", loc.line, loc.column);
    let Some(line_text) = source
        .lines()
        .nth(loc.line.saturating_sub(1) as usize)
        .map(|l| l.trim_end_matches('\r'))
    else {
        return number.len();
    };
    let _ = writeln!(out, "{gutter} |");
    let mut col = loc.column.saturating_sub(1) as usize;
    // A long line (a hostile suite's 780 KB scalar) is shown as a window
    // around the column.
    let chars: Vec<char> = line_text.chars().collect();
    let (from, to) = if chars.len() > MAX_SHOWN {
        let from = col
            .saturating_sub(MAX_SHOWN / 4)
            .min(chars.len() - MAX_SHOWN);
        (from, from + MAX_SHOWN)
    } else {
        (0, chars.len())
    };
    let lead = if from > 0 { "…" } else { "" };
    let tail = if to < chars.len() { "…" } else { "" };
    let shown: String = chars[from..to].iter().collect();
    let _ = writeln!(out, "{number} | {lead}{shown}{tail}");
    col = col.saturating_sub(from) + lead.chars().count();
    let available = (to - from + lead.chars().count())
        .saturating_sub(col)
        .max(1);
    let width = (loc.len as usize).clamp(1, available);
    // Keep tabs as tabs so the caret lines up under the token.
    let pad: String = lead
        .chars()
        .chain(shown.chars())
        .take(col)
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    let _ = writeln!(out, "{gutter} | {pad}{}", "^".repeat(width));
    number.len()
}

/// Renders every diagnostic of a file, then a count.
pub(crate) fn render_all(path: &str, source: &str, diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diagnostics {
        out.push_str(&d.render(path, source));
        out.push('\n');
    }
    let n = diagnostics.len();
    let _ = write!(
        out,
        "{path}: {n} error{} in suite file",
        if n == 1 { "" } else { "s" }
    );
    out
}

/// The closest candidate to `word`, if it is close enough to be a likely typo.
pub(crate) fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Up to `n` candidates closest to `word` read as a filter (it may match
/// any part of a candidate), closest first; only likely typos.
pub fn closest<'a>(word: &str, candidates: &[&'a str], n: usize) -> Vec<&'a str> {
    let bound = (word.chars().count() / 3).max(1);
    let mut ranked: Vec<(usize, &str)> = candidates
        .iter()
        .map(|c| (substring_distance(word, c), *c))
        .filter(|(d, _)| *d <= bound)
        .collect();
    ranked.sort_by_key(|(d, _)| *d);
    ranked.dedup_by_key(|(_, c)| *c);
    ranked.into_iter().take(n).map(|(_, c)| c).collect()
}

/// The fewest edits that turn `pattern` into some part of `text`.
fn substring_distance(pattern: &str, text: &str) -> usize {
    distances(pattern, text, true)
        .into_iter()
        .min()
        .unwrap_or(0)
}

fn edit_distance(a: &str, b: &str) -> usize {
    distances(a, b, false).pop().unwrap_or(0)
}

/// The last row of the edit-distance table of `a` against `b`: at `j`, the
/// fewest edits that turn `a` into `b`'s first `j` characters, or into any
/// part of `b` that ends there when `anywhere` (starting anywhere is free).
fn distances(a: &str, b: &str, anywhere: bool) -> Vec<usize> {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = if anywhere {
        vec![0; b.len() + 1]
    } else {
        (0..=b.len()).collect()
    };
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let fields = ["temperature", "max_tokens", "top_p"];
        assert_eq!(did_you_mean("temprature", &fields), Some("temperature"));
        assert_eq!(did_you_mean("max_token", &fields), Some("max_tokens"));
        assert_eq!(did_you_mean("colour", &fields), None);
    }

    #[test]
    fn closest_reads_a_word_as_a_filter() {
        let names = [
            "sglang::correctness::arithmetic",
            "sglang::correctness::is_prime",
            "sglang::performance::concurrency_8",
        ];
        assert_eq!(
            closest("corectness", &names, 3),
            [
                "sglang::correctness::arithmetic",
                "sglang::correctness::is_prime"
            ]
        );
        assert_eq!(
            closest("sglang::performance::concurency_8", &names, 3),
            ["sglang::performance::concurrency_8"]
        );
        assert!(closest("nothing-alike", &names, 3).is_empty());
    }

    #[test]
    fn caret_underlines_the_token() {
        let src = "a: 1\n  temprature: 0\n";
        let d = Diagnostic::new(
            Loc {
                line: 2,
                column: 3,
                len: 10,
            },
            "unknown field `temprature`",
        )
        .help("did you mean `temperature`?");
        let text = d.render("x.yaml", src);
        assert_eq!(
            text,
            "error: unknown field `temprature`\n --> x.yaml:2:3\n  |\n2 |   temprature: 0\n  |   ^^^^^^^^^^\n  = help: did you mean `temperature`?\n"
        );
    }

    #[test]
    fn a_long_line_is_shown_as_a_window_with_the_caret_in_it() {
        let src = format!("k: {}BAD{}\n", "x".repeat(5000), "y".repeat(5000));
        let d = Diagnostic::new(
            Loc {
                line: 1,
                column: 5004,
                len: 3,
            },
            "bad",
        );
        let text = d.render("x.yaml", &src);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[3].len() < 200 * 3, "{}", lines[3].len());
        assert!(lines[3].starts_with("1 | …x") && lines[3].ends_with("y…"));
        let caret = lines[4].chars().position(|c| c == '^').unwrap();
        let under: String = lines[3].chars().skip(caret).take(3).collect();
        assert_eq!(under, "BAD", "{text}");
    }
}
