//! Degenerate text: what a broken attention kernel, a bad quantisation or a
//! decode loop produces while the server stays up and fast — a run of one
//! character (`!!!!!!!!`), a line or phrase repeated until `max_tokens`,
//! replacement characters from bytes that were not UTF-8, control
//! characters. `not_degenerate` in a probe's `expect` fails on it and names
//! the offending span.
//!
//! Repetition is measured the way a compressor sees it: the share of the
//! answer's bytes that copy an earlier stretch of at least `MIN_REPEAT`
//! bytes of the same answer (a greedy LZ77 parse, overlapping copies
//! allowed, so `abababab…` is one copy of period 2). Prose and working
//! code repeat little at that length; a loop repeats nearly all of itself.

use std::collections::HashMap;

use crate::suite::Degeneracy;

/// The shortest copy that counts as repetition, in bytes: shorter ones are
/// the words and idioms any text reuses.
pub(crate) const MIN_REPEAT: usize = 16;

/// Below this many characters the repeat share is not judged: a short
/// answer cannot repeat itself into a loop, and one repeated phrase would be
/// most of it.
pub(crate) const JUDGED_FROM: usize = 64;

/// Why a text is degenerate, in a failure's words.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// What was found, with the limit passed.
    pub what: String,
    /// Where: a character span and an excerpt.
    pub span: String,
}

/// The first way `text` passes one of `limits`, if any.
pub fn find(text: &str, limits: &Degeneracy) -> Option<Finding> {
    bad_chars(text, limits.max_bad_chars)
        .or_else(|| char_run(text, limits.max_char_run))
        .or_else(|| repetition(text, limits.max_repeat_share))
}

/// Characters no language model should write: U+FFFD (bytes that were not
/// UTF-8) and control characters but tab, line feed and carriage return.
fn is_bad(c: char) -> bool {
    c == '\u{FFFD}' || (c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
}

fn bad_chars(text: &str, max: usize) -> Option<Finding> {
    let mut bad = text.char_indices().filter(|(_, c)| is_bad(*c));
    let (first, c) = bad.clone().next()?;
    let count = bad.by_ref().count();
    (count > max).then(|| Finding {
        what: format!(
            "{count} replacement or control character{} (at most {max} allowed)",
            plural(count)
        ),
        span: format!(
            "the first, {c:?}, at character {}: {}",
            chars_before(text, first),
            excerpt(text, first.saturating_sub(24), first + 24)
        ),
    })
}

/// The longest run of one character that is not whitespace (indentation
/// and blank lines are runs too, and legitimate ones).
fn char_run(text: &str, max: usize) -> Option<Finding> {
    let mut best: Option<(usize, usize, char)> = None; // (start byte, chars, char)
    let mut run: Option<(usize, usize, char)> = None;
    for (at, c) in text.char_indices() {
        run = match run {
            Some((start, n, r)) if r == c => Some((start, n + 1, r)),
            _ if c.is_whitespace() => None,
            _ => Some((at, 1, c)),
        };
        if let Some(r) = run
            && best.is_none_or(|b| r.1 > b.1)
        {
            best = Some(r);
        }
    }
    let (start, n, c) = best?;
    (n > max).then(|| {
        let from = chars_before(text, start);
        Finding {
            what: format!("a run of {n} × {c:?} (at most {max} allowed)"),
            span: format!(
                "characters {from}–{}: {}",
                from + n,
                excerpt(text, start, start + 40)
            ),
        }
    })
}

/// One copy found by the parse: `len` bytes at `at` equal to those
/// `distance` bytes before.
#[derive(Debug, Clone, Copy)]
struct Copy {
    at: usize,
    len: usize,
    distance: usize,
}

/// The share of `text`'s bytes that copy an earlier stretch of it, and the
/// copies, in order.
fn repeats(text: &str) -> (f64, Vec<Copy>) {
    let bytes = text.as_bytes();
    let key = |i: usize| -> Option<u128> {
        Some(u128::from_le_bytes(
            bytes.get(i..i + MIN_REPEAT)?.try_into().ok()?,
        ))
    };
    // The last position of each MIN_REPEAT-byte window: the nearest earlier
    // copy, so a loop is found with its shortest period.
    let mut last: HashMap<u128, usize> = HashMap::new();
    let (mut i, mut copied_bytes) = (0, 0);
    let mut copies: Vec<Copy> = Vec::new();
    while let Some(k) = key(i) {
        match last.insert(k, i) {
            Some(j) => {
                let mut len = MIN_REPEAT;
                while i + len < bytes.len() && bytes[j + len] == bytes[i + len] {
                    len += 1;
                }
                for p in i + 1..i + len {
                    if let Some(k) = key(p) {
                        last.insert(k, p);
                    }
                }
                copied_bytes += len;
                copies.push(Copy {
                    at: i,
                    len,
                    distance: i - j,
                });
                i += len;
            }
            None => i += 1,
        }
    }
    #[expect(clippy::cast_precision_loss, reason = "answers are capped at 8 MiB")]
    let share = if bytes.is_empty() {
        0.0
    } else {
        copied_bytes as f64 / bytes.len() as f64
    };
    (share, copies)
}

/// Bytes between two copies that still leave them one loop: the counter or
/// number that changes from one turn of a loop to the next
/// (`if n == 80:` … `if n == 81:`).
const LOOP_GAP: usize = 8;

/// One turn of the loop in `bytes[start..end]`: the shortest of the copies'
/// `distances` (smallest first) at which at least 80% of its bytes equal
/// the byte that far back; a loop with a counter matches at every distance
/// that is a multiple of its turn, and all but the counter at the turn.
fn period(bytes: &[u8], start: usize, end: usize, distances: &[usize]) -> usize {
    let matching = |d: usize| {
        let same = (start..end)
            .filter(|&p| p >= d && bytes[p] == bytes[p - d])
            .count();
        same * 5 >= (end - start) * 4
    };
    distances
        .iter()
        .take(16)
        .copied()
        .find(|&d| matching(d))
        .or_else(|| distances.first().copied())
        .unwrap_or(1)
}

/// The stretch most of a text's repetition is in: a run of copies at most
/// [`LOOP_GAP`] bytes apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Region {
    /// Where its first copy starts.
    start: usize,
    /// Where its last copy ends.
    end: usize,
    /// Its copies' most common distance: one turn of the loop.
    period: usize,
}

fn loop_region(bytes: &[u8], copies: &[Copy]) -> Option<Region> {
    let mut best: Option<(usize, Region)> = None; // (bytes copied, region)
    let mut group: Vec<&Copy> = Vec::new();
    let mut flush = |group: &mut Vec<&Copy>| {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            return;
        };
        let covered: usize = group.iter().map(|c| c.len).sum();
        let (start, end) = (first.at, last.at + last.len);
        let mut distances: Vec<usize> = group.iter().map(|c| c.distance).collect();
        distances.sort_unstable();
        distances.dedup();
        let region = Region {
            start,
            end,
            period: period(bytes, start, end, &distances),
        };
        if best.is_none_or(|(b, _)| covered > b) {
            best = Some((covered, region));
        }
        group.clear();
    };
    for c in copies {
        if group
            .last()
            .is_some_and(|prev| c.at > prev.at + prev.len + LOOP_GAP)
        {
            flush(&mut group);
        }
        group.push(c);
    }
    flush(&mut group);
    best.map(|(_, r)| r)
}

fn repetition(text: &str, max_share: f64) -> Option<Finding> {
    if text.chars().count() < JUDGED_FROM {
        return None;
    }
    let (share, copies) = repeats(text);
    let region = loop_region(text.as_bytes(), &copies)?;
    (share > max_share).then(|| {
        // One turn of the loop, the one before its first copy (a copy
        // farther away than it is long: the copied stretch itself).
        let source = region.start.saturating_sub(region.period);
        let unit_len = region.period.min(region.end - region.start);
        let times = (region.end - region.start) / region.period + 1;
        let from = chars_before(text, source);
        let to = chars_before(text, region.end);
        Finding {
            what: format!(
                "{:.0}% of it repeats an earlier part of it (at most {:.0}% allowed)",
                share * 100.0,
                max_share * 100.0
            ),
            span: format!(
                "characters {from}–{to}: {} repeated {times} time{}",
                excerpt(text, source, source + unit_len),
                plural(times)
            ),
        }
    })
}

/// The number of characters before byte `at`.
fn chars_before(text: &str, at: usize) -> usize {
    text[..at].chars().count()
}

/// `text[from..to]` widened to character boundaries, secrets hidden, at
/// most 80 characters, quoted and escaped (a server's text never starts a
/// line).
fn excerpt(text: &str, from: usize, to: usize) -> String {
    let mut from = from.min(text.len());
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    let mut to = to.clamp(from, text.len());
    while !text.is_char_boundary(to) {
        to += 1;
    }
    // Scrubbed as a text of its own: a secret its edges split is hidden.
    match crate::secrets::cut(&text[from..to], 80) {
        (cut, Some(_)) => format!("{cut:?}…"),
        (part, None) => format!("{part:?}"),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Degeneracy {
        Degeneracy::default()
    }

    #[test]
    fn runs_of_one_character_are_found_and_whitespace_is_not_a_run() {
        let garbage = format!("4{}", "!".repeat(100));
        let f = find(&garbage, &limits()).unwrap();
        assert_eq!(f.what, "a run of 100 × '!' (at most 80 allowed)");
        assert!(f.span.starts_with("characters 1–101: \"!!!!"), "{}", f.span);
        let indented = format!("def f():\n{}return 1\n", " ".repeat(200));
        assert_eq!(char_run(&indented, 80), None);
        let rule = format!("# {}\n", "=".repeat(78));
        assert_eq!(char_run(&rule, 80), None);
    }

    #[test]
    fn replacement_and_control_characters_are_found() {
        let f = find("The answer is \u{FFFD}\u{FFFD} four\u{1b}[2J", &limits()).unwrap();
        assert_eq!(
            f.what,
            "3 replacement or control characters (at most 0 allowed)"
        );
        assert!(
            f.span
                .starts_with("the first, '\u{FFFD}', at character 14: ")
        );
        let relaxed = Degeneracy {
            max_bad_chars: 3,
            ..limits()
        };
        assert_eq!(find("a\u{FFFD}b\u{7}c\u{0}", &relaxed), None);
        assert_eq!(find("tabs\tand\r\nnewlines\n", &limits()), None);
    }

    #[test]
    fn a_loop_is_one_overlapping_copy_with_its_period() {
        let line = "    return False\n";
        let answer = format!("def is_prime(n):\n    if n < 2:\n{}", line.repeat(30));
        let (share, copies) = repeats(&answer);
        assert_eq!(copies.len(), 1, "one overlapping copy: {copies:?}");
        assert_eq!(copies[0].distance, line.len());
        assert!(share > 0.9, "{share}");
        let f = find(&answer, &limits()).unwrap();
        assert!(f.what.starts_with('9'), "{}", f.what);
        // The unit is the line, in the phase the copy starts at.
        assert!(
            f.span.ends_with(r#"\n    return False" repeated 30 times"#),
            "{}",
            f.span
        );
    }

    /// A loop whose turns differ in a counter is one loop: its copies are
    /// a few bytes apart, and its period is the most common distance.
    #[test]
    fn a_counting_loop_is_one_loop() {
        use std::fmt::Write as _;
        let mut answer = String::from("def is_prime(n):\n");
        for k in 10..70 {
            let _ = write!(answer, "    if n == {k}:\n        return True\n");
        }
        let f = find(&answer, &limits()).unwrap();
        assert!(f.what.contains("% of it repeats"), "{}", f.what);
        let turn = "    if n == 10:\n        return True\n".len();
        let region = loop_region(answer.as_bytes(), &repeats(&answer).1).unwrap();
        assert_eq!(region.period, turn);
        assert!(region.end - region.start > 50 * turn, "{region:?}");
        assert!(f.span.contains("return True"), "{}", f.span);
        assert!(f.span.ends_with("repeated 59 times"), "{}", f.span);
    }

    #[test]
    fn a_repeated_word_is_a_loop_too() {
        let answer = "the ".repeat(40);
        let f = find(&answer, &limits()).unwrap();
        assert!(f.span.ends_with("\"the \" repeated 40 times"), "{}", f.span);
    }

    #[test]
    fn prose_and_code_are_not_degenerate() {
        let prose = "The chemical symbol for water is H2O. Each molecule holds two \
            hydrogen atoms bound to one oxygen atom, and the bond angle is about 104.5 \
            degrees, which makes water a polar molecule that dissolves salts well.";
        let code = "```python\ndef is_prime(n: int) -> bool:\n    if n < 2:\n        \
            return False\n    if n % 2 == 0:\n        return n == 2\n    i = 3\n    \
            while i * i <= n:\n        if n % i == 0:\n            return False\n        \
            i += 2\n    return True\n```\n";
        for text in [
            prose,
            code,
            "4",
            "",
            "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
        ] {
            assert_eq!(find(text, &limits()), None, "{text}");
        }
        let (share, _) = repeats(code);
        assert!(share < 0.2, "{share}");
    }

    #[test]
    fn short_answers_are_not_judged_for_repetition() {
        let short = "ok ok ok ok ok ok ok ok ok ok ok ok";
        assert!(short.len() < JUDGED_FROM);
        assert_eq!(find(short, &limits()), None);
        assert!(repeats(short).0 > 0.5);
    }

    #[test]
    fn spans_are_character_offsets_and_excerpts_are_cut() {
        let answer = format!("日本語 {}", "é".repeat(200));
        let f = find(&answer, &limits()).unwrap();
        assert!(f.span.starts_with("characters 4–204: \"éé"), "{}", f.span);
        assert_eq!(excerpt(&answer, 0, 5), "\"日本\"");
        assert_eq!(excerpt("aé", 2, 2), "\"é\"");
        assert!(excerpt(&"x".repeat(100), 0, 100).ends_with("\"…"));
    }
}
