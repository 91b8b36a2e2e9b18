//! Failure messages that need no second run: where in which YAML file, what
//! was sent, what came back, what was expected.

use std::fmt::Write as _;

use super::assertion::{Mismatch, text_of};
use crate::client::error::excerpt;
use crate::client::{CallError, Completion};
use crate::suite::diagnostics::render_location;
use crate::suite::node::Loc;
use crate::suite::{Assertion, Field, SourceFile};
use crate::units::format_duration;

/// A request as it went out.
#[derive(Debug, Clone)]
pub struct Sent {
    /// The URL.
    pub url: String,
    /// The JSON body.
    pub body: serde_json::Value,
}

impl Sent {
    /// Appends `sent:` and the body to a failure message.
    pub fn write_to(&self, out: &mut String) {
        let body = serde_json::to_string(&self.body).unwrap_or_default();
        let shown = match crate::secrets::cut(&body, 600) {
            (shown, None) => shown,
            (cut, Some(_)) => format!("{cut}… ({} bytes)", body.len()),
        };
        let _ = writeln!(out, "sent:     POST {}", self.url);
        let _ = writeln!(out, "          {shown}");
    }
}

/// A check of the whole answer that failed (a snapshot, determinism):
/// its message, the first line the error, and where it is written.
#[derive(Debug, Clone)]
pub struct Problem {
    /// `error: …` and any lines after it.
    pub message: String,
    /// Where the probe (or its key) is written.
    pub loc: Loc,
}

/// The message of a probe whose assertions or whole-answer checks failed.
pub fn assertions_failed(
    file: &SourceFile,
    sent: &Sent,
    completion: &Completion,
    failed: &[(&Assertion, Mismatch)],
    problems: &[Problem],
) -> String {
    let mut out = String::new();
    for (i, p) in problems.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let (first, rest) = p.message.split_once('\n').unwrap_or((&p.message, ""));
        let _ = writeln!(out, "{first}");
        render_location(&mut out, &file.display(), &file.text, p.loc);
        out.push_str(rest);
        if !rest.is_empty() && !rest.ends_with('\n') {
            out.push('\n');
        }
    }
    for (i, (assertion, mismatch)) in failed.iter().enumerate() {
        if i > 0 || !problems.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "error: assertion failed: expected {}",
            mismatch.expected
        );
        render_location(&mut out, &file.display(), &file.text, assertion.loc);
        if let Some(found) = &mismatch.found {
            let _ = writeln!(out, "found:    {found}");
        }
    }
    let answer_in_reasoning =
        completion.content.trim().is_empty() && !completion.reasoning.trim().is_empty();
    if answer_in_reasoning && completion.finish_reason.as_deref() == Some("length") {
        let _ = writeln!(
            out,
            "note:     the model spent all {} tokens reasoning and wrote no answer (finish_reason length); raise max_tokens or disable thinking (`chat_template_kwargs: {{enable_thinking: false}}`)",
            completion.completion_tokens
        );
    } else if answer_in_reasoning && failed.iter().any(|(a, _)| a.field == Field::Content) {
        let _ = writeln!(
            out,
            "help:     content is empty and the answer is in reasoning ({} chars); to check it there, add `in: reasoning` (or `in: all`) to the assertion",
            completion.reasoning.chars().count()
        );
    }
    out.push('\n');
    sent.write_to(&mut out);
    write_received(&mut out, completion, failed.iter().map(|(a, _)| *a));
    out
}

fn write_received<'a>(
    out: &mut String,
    c: &Completion,
    assertions: impl Iterator<Item = &'a Assertion>,
) {
    let ttft = c
        .timing
        .first_token
        .map_or_else(|| "none".into(), format_duration);
    let _ = writeln!(
        out,
        "received: {} completion token{} ({}), finish_reason {}, first token after {ttft}, done after {}",
        c.completion_tokens,
        if c.completion_tokens == 1 { "" } else { "s" },
        c.token_source.name(),
        crate::text::printable(c.finish_reason.as_deref().unwrap_or("absent")),
        format_duration(c.timing.end),
    );
    let mut fields: Vec<_> = assertions.map(|a| a.field).collect();
    fields.dedup();
    let _ = writeln!(out, "  content:   {}", excerpt(&c.content, 1200));
    if !c.reasoning.is_empty() || fields.iter().any(|f| f.name() != "content") {
        let _ = writeln!(
            out,
            "  reasoning: {}",
            excerpt(&text_of(Field::Reasoning, c), 1200)
        );
    }
}

/// The message of a probe whose request failed.
pub fn request_failed(file: &SourceFile, loc: Loc, sent: &Sent, error: &CallError) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "error: request failed: {error}");
    render_location(&mut out, &file.display(), &file.text, loc);
    out.push('\n');
    sent.write_to(&mut out);
    out
}
