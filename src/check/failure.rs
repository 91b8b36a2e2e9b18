//! Failure messages that need no second run: where in which YAML file, what
//! was sent, what came back, what was expected.

use std::fmt::Write as _;

use super::assertion::{Mismatch, text_of};
use super::message::{Label, Message};
use crate::client::error::excerpt;
use crate::client::{CallError, CallRequest, Client, Completion, ErrorKind};
use crate::suite::image::Image;
use crate::suite::node::Loc;
use crate::suite::{Assertion, Field, SourceFile};
use crate::units::format_duration;

/// A request as it went out.
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    /// The URL.
    pub url: String,
    /// The JSON body, each image's `data:` URL in it replaced by the
    /// image's name and size (`<image cat.png (image/png, 64×48, 1.2 KiB)>`):
    /// a failure, a snapshot and the record say which image went out, not
    /// its megabytes of base64.
    pub body: serde_json::Value,
    /// The images it carried, each as `name (type, size, bytes)`.
    pub images: Vec<String>,
}

impl Sent {
    /// What `client` sends for `req`, its images named.
    pub(crate) fn of(client: &Client, req: &CallRequest) -> Sent {
        let mut body = client.body(req);
        let images: Vec<&Image> = req.input.images().collect();
        if !images.is_empty() {
            name_images(&mut body, &images);
        }
        Sent {
            url: client.url(),
            body,
            images: images.iter().map(ToString::to_string).collect(),
        }
    }

    /// Appends `sent:` and the body to a failure message.
    pub(crate) fn write_to(&self, out: &mut Message) {
        let body = serde_json::to_string(&self.body).unwrap_or_default();
        let shown = match crate::secrets::cut(&body, 600) {
            (shown, None) => shown,
            (cut, Some(_)) => format!("{cut}… ({} bytes)", body.len()),
        };
        let _ = writeln!(out, "sent:     POST {}", self.url);
        let _ = writeln!(out, "          {shown}");
    }
}

/// Whether a failed call with images is the server refusing them: an
/// error status whose words are about images (a 401 or a prompt over the
/// context length is another refusal; llama.cpp answers a text-only
/// model's image with 500).
fn refused_images(error: &CallError) -> bool {
    let detail = error.detail.to_lowercase();
    matches!(error.kind, ErrorKind::Http(_))
        && ["image", "multimodal", "mmproj", "vision"]
            .iter()
            .any(|w| detail.contains(w))
}

/// Replaces every string of `value` that is one of `images`' `data:` URLs
/// with the image's name in angle brackets.
fn name_images(value: &mut serde_json::Value, images: &[&Image]) {
    match value {
        serde_json::Value::String(s) if s.starts_with("data:") => {
            if let Some(image) = images.iter().find(|i| *i.url == **s) {
                *s = format!("<image {image}>");
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                name_images(item, images);
            }
        }
        serde_json::Value::Object(map) => {
            for item in map.values_mut() {
                name_images(item, images);
            }
        }
        _ => {}
    }
}

/// A check of the whole answer that failed (a snapshot, determinism):
/// what is wrong, what it found, and where it is written.
#[derive(Debug, Clone)]
pub struct Problem {
    /// What is wrong: the `error:` line.
    pub error: String,
    /// The lines after it (what differs).
    pub detail: String,
    /// Where the probe (or its key) is written.
    pub loc: Loc,
}

/// The message of a probe whose assertions or whole-answer checks failed.
pub(crate) fn assertions_failed(
    file: &SourceFile,
    sent: &Sent,
    completion: &Completion,
    failed: &[(&Assertion, Mismatch)],
    problems: &[Problem],
) -> Message {
    let mut out = Message::new();
    for (i, p) in problems.iter().enumerate() {
        if i > 0 {
            let _ = writeln!(out);
        }
        out.error(&p.error).at(file, p.loc);
        let _ = write!(out, "{}", p.detail);
        if !p.detail.is_empty() && !p.detail.ends_with('\n') {
            let _ = writeln!(out);
        }
    }
    for (i, (assertion, mismatch)) in failed.iter().enumerate() {
        if i > 0 || !problems.is_empty() {
            let _ = writeln!(out);
        }
        out.error(format_args!(
            "assertion failed: expected {}",
            mismatch.expected
        ))
        .at(file, assertion.loc);
        if let Some(found) = &mismatch.found {
            out.line(Label::Found, found);
        }
    }
    let answer_in_reasoning =
        completion.content.trim().is_empty() && !completion.reasoning.trim().is_empty();
    if answer_in_reasoning && completion.finish_reason.as_deref() == Some("length") {
        out.line(Label::Note, format_args!(
            "the model spent all {} tokens reasoning and wrote no answer (finish_reason length); raise max_tokens or disable thinking (`chat_template_kwargs: {{enable_thinking: false}}`)",
            completion.completion_tokens
        ));
    } else if completion.tool_calls.is_empty()
        && failed.iter().any(|(a, _)| reads_tool_calls(a))
        && looks_like_a_tool_call(&completion.content)
    {
        out.line(Label::Help, "the server streamed no `delta.tool_calls`, but the answer's text looks like a tool call: the server did not parse it (SGLang: is `--tool-call-parser` the model's?)");
    } else if answer_in_reasoning && failed.iter().any(|(a, _)| a.field == Field::Content) {
        out.line(Label::Help, format_args!(
            "content is empty and the answer is in reasoning ({} chars); to check it there, add `in: reasoning` (or `in: all`) to the assertion",
            completion.reasoning.chars().count()
        ));
    }
    let _ = writeln!(out);
    sent.write_to(&mut out);
    write_received(&mut out, completion, failed.iter().map(|(a, _)| *a));
    out
}

/// Whether an assertion reads the answer's tool calls.
fn reads_tool_calls(a: &Assertion) -> bool {
    a.field == Field::ToolCalls || matches!(a.check, crate::suite::Check::ToolCall { .. })
}

/// Whether text holds what a model writes for a tool call when no parser
/// turns it into one: a `<tool_call>` (or `<|tool_call|>`-style) marker, or
/// a JSON object with a `"name"` and `"arguments"`.
fn looks_like_a_tool_call(text: &str) -> bool {
    text.contains("tool_call") || (text.contains("\"name\"") && text.contains("\"arguments\""))
}

fn write_received<'a>(
    out: &mut Message,
    c: &Completion,
    assertions: impl Iterator<Item = &'a Assertion>,
) {
    let ttft = c
        .timing
        .first_token
        .map_or_else(|| "none".into(), format_duration);
    out.line(
        Label::Received,
        format_args!(
            "{} completion token{} ({}), finish_reason {}, first token after {ttft}, done after {}",
            c.completion_tokens,
            if c.completion_tokens == 1 { "" } else { "s" },
            c.token_source.name(),
            crate::text::printable(c.finish_reason.as_deref().unwrap_or("absent")),
            format_duration(c.timing.end),
        ),
    );
    let mut fields: Vec<_> = assertions
        .map(|a| {
            if reads_tool_calls(a) {
                Field::ToolCalls
            } else {
                a.field
            }
        })
        .collect();
    fields.dedup();
    out.line(Label::Content, excerpt(&c.content, 1200));
    if !c.reasoning.is_empty()
        || fields
            .iter()
            .any(|f| matches!(f, Field::Reasoning | Field::All))
    {
        out.line(
            Label::Reasoning,
            excerpt(&text_of(Field::Reasoning, c), 1200),
        );
    }
    if !c.tool_calls.is_empty() || fields.contains(&Field::ToolCalls) {
        out.line(
            Label::ToolCalls,
            format_args!(" {}", excerpt(&text_of(Field::ToolCalls, c), 1200)),
        );
    }
}

/// The message of a probe whose request failed.
pub(crate) fn request_failed(
    file: &SourceFile,
    loc: Loc,
    sent: &Sent,
    error: &CallError,
) -> Message {
    let mut out = Message::of_error(format_args!("request failed: {error}"));
    out.at(file, loc);
    if !sent.images.is_empty() && refused_images(error) {
        // The likeliest reason, said where the reader looks first: a
        // text-only model refuses images (SGLang 0.5.23: 400 "Model only
        // supports text input; …"; vLLM 0.32: 400 "… is not a multimodal
        // model"; llama.cpp b11434 without `--mmproj`: 500 "image input is
        // not supported - hint: …").
        let _ = writeln!(
            out,
            "note:     the server refused a request with {} image{}: {}; a model without vision (or a server started without its vision encoder) refuses every image",
            sent.images.len(),
            if sent.images.len() == 1 { "" } else { "s" },
            sent.images.join(", ")
        );
    }
    let _ = writeln!(out);
    sent.write_to(&mut out);
    out
}
