//! Correctness under load (`recheck:` on a gate): the suite's probes asked
//! again, each with its own request, while the gate's load runs, and judged
//! as the idle probe was — its assertions, and for a greedy probe (sampled
//! at temperature 0) the very same text; and the load's own sampled answers
//! checked for degenerate text. A server that is right alone and wrong in a
//! large batch fails here, where every benchmark would have passed it.

use std::fmt::Write as _;

use super::assertion::evaluate;
use super::degenerate;
use super::message::Message;
use crate::client::{CallError, Completion};
use crate::suite::{Degeneracy, Probe, SourceFile};
use crate::text::{KEPT_CHARS, Kept};

/// One probe asked again during the load.
#[derive(Debug)]
pub struct Asked {
    /// The probe's index in the suite.
    pub probe: usize,
    /// Its answer, or why there was none.
    pub answer: Result<Completion, CallError>,
    /// Whether the load's measured window was still running when the
    /// answer ended.
    pub under_load: bool,
}

/// One answer of the load, kept whole.
#[derive(Debug)]
pub struct LoadAnswer {
    /// Its request's index in the gate's workload.
    pub index: u32,
    /// The text.
    pub content: String,
    /// Why it ended.
    pub finish_reason: Option<String>,
}

/// What the recheck judges, beside what it asked.
pub struct Context<'a> {
    /// The suite's file, for locations.
    pub file: &'a SourceFile,
    /// The suite's probes.
    pub probes: &'a [Probe],
    /// Each probe's idle answer, where it ran.
    pub idle: &'a [Option<Kept>],
    /// The load, in words (`concurrency 8, 40 requests`).
    pub load: &'a str,
    /// Where `recheck` is written.
    pub loc: crate::suite::node::Loc,
}

/// The verdict; `Err` with every problem found.
pub fn judge(cx: &Context<'_>, asked: &[Asked], samples: &[LoadAnswer]) -> Result<(), Message> {
    let mut problems = Message::new();
    let under: Vec<&Asked> = asked.iter().filter(|a| a.under_load).collect();
    if under.is_empty() {
        let _ = writeln!(
            problems,
            "  could not measure: no recheck answer came while the load ran ({} asked); \
             lengthen the load (`requests` or `duration`)",
            asked.len()
        );
    }
    // Per probe: how many of its answers under load went wrong, and what
    // the first of them shows.
    for (i, probe) in cx.probes.iter().enumerate() {
        let answers: Vec<&&Asked> = under.iter().filter(|a| a.probe == i).collect();
        let wrong: Vec<Message> = answers
            .iter()
            .filter_map(|a| problems_of(cx, probe, a))
            .collect();
        let count = wrong.len();
        if let Some(first) = wrong.into_iter().next() {
            let _ = writeln!(
                problems,
                "  probe {}: {count} of its {} answer(s) under load went wrong; the first:",
                probe.name,
                answers.len()
            );
            problems.append(first);
        }
    }
    let mut degenerate: Vec<(u32, degenerate::Finding)> = samples
        .iter()
        .filter_map(|s| Some((s.index, degenerate_load_answer(s)?)))
        .collect();
    degenerate.sort_by_key(|(index, _)| *index);
    if !degenerate.is_empty() {
        let _ = writeln!(
            problems,
            "  {} of the {} load answers kept whole are degenerate:",
            degenerate.len(),
            samples.len()
        );
        for (index, f) in degenerate.iter().take(3) {
            let _ = writeln!(problems, "    request {index}: {}; {}", f.what, f.span);
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    let mut out = Message::of_error("correctness under load failed");
    out.at(cx.file, cx.loc);
    let _ = writeln!(
        out,
        "load:     {}; {} probe answer(s) during it, {} load answer(s) kept whole",
        cx.load,
        under.len(),
        samples.len()
    );
    out.append(problems);
    Err(out)
}

/// What went wrong with one answer under load, if anything.
fn problems_of(cx: &Context<'_>, probe: &Probe, a: &Asked) -> Option<Message> {
    let mut out = Message::new();
    match &a.answer {
        Err(e) => {
            let _ = writeln!(out, "    the request failed: {e}");
        }
        Ok(c) => {
            let mut runs = Vec::new();
            for assertion in &probe.expect {
                if let Err(m) = evaluate(assertion, c, &mut runs) {
                    let _ = writeln!(
                        out,
                        "    assertion failed: expected {}{}",
                        m.expected,
                        m.found
                            .map(|f| format!("; found: {}", first_line(&f)))
                            .unwrap_or_default()
                    );
                    out.at(cx.file, assertion.loc);
                }
            }
            let greedy = probe.sampling.temperature == Some(0.0);
            if let (true, Some(idle)) = (greedy, &cx.idle[a.probe]) {
                let _ = write!(out, "{}", changed(idle, &c.content));
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// A load answer's degeneracy. One that ran to its token limit (every
/// answer of an `ignore_eos` load does) is judged for replacement and
/// control characters and runs of one character only: a model held past
/// its end of sequence repeats itself legitimately.
fn degenerate_load_answer(s: &LoadAnswer) -> Option<degenerate::Finding> {
    let limits = if s.finish_reason.as_deref() == Some("stop") {
        Degeneracy::default()
    } else {
        Degeneracy {
            max_repeat_share: 1.0,
            ..Degeneracy::default()
        }
    };
    degenerate::find(&s.content, &limits)
}

/// How a greedy answer differs from the idle one the record kept (an
/// excerpt, its length and hash); empty when it does not.
fn changed(idle: &Kept, answer: &str) -> String {
    let now = Kept::of(answer);
    if now.sha256 == idle.sha256 {
        return String::new();
    }
    let mut out = String::from("    the greedy answer changed (- alone, + under load):\n");
    let lines = diff(&idle.text, &now.text);
    if lines.is_empty() {
        let _ = writeln!(
            out,
            "    (after their first {KEPT_CHARS} characters: {} alone, {} under load)",
            idle.chars, now.chars
        );
    }
    out + &lines
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// The changed lines, `-`/`+`, at most 12 of them, escaped.
fn diff(old: &str, new: &str) -> String {
    let mut out = String::new();
    let d = similar::TextDiff::from_lines(old, new);
    let mut shown = 0;
    for change in d.iter_all_changes() {
        let sign = match change.tag() {
            similar::ChangeTag::Delete => '-',
            similar::ChangeTag::Insert => '+',
            similar::ChangeTag::Equal => continue,
        };
        if shown == 12 {
            let _ = writeln!(out, "    …");
            break;
        }
        let line = change.value().trim_end_matches('\n');
        let _ = writeln!(out, "    {sign} {line:?}");
        shown += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_greedy_answer_is_compared_whole_though_only_its_start_is_kept() {
        let start = "a\n".repeat(KEPT_CHARS);
        let idle = Kept::of(&format!("{start}tail"));
        assert_eq!(idle.text.chars().count(), KEPT_CHARS);
        assert_eq!(changed(&idle, &format!("{start}tail")), "");
        assert_eq!(
            changed(&idle, &format!("{start}other tail")),
            format!(
                "    the greedy answer changed (- alone, + under load):\n    (after their first {KEPT_CHARS} characters: {} alone, {} under load)\n",
                2 * KEPT_CHARS + 4,
                2 * KEPT_CHARS + 10
            )
        );
        let short = Kept::of("4");
        assert_eq!(
            changed(&short, "!"),
            "    the greedy answer changed (- alone, + under load):\n    - \"4\"\n    + \"!\"\n"
        );
    }
}
