//! A YAML document as a tree in which every node knows where it came from.
//!
//! serde-saphyr parses and enforces input budgets; we deserialize into this
//! location-carrying tree (instead of straight into typed structs) so that the
//! decoder can report *every* problem of a file, each at its own line and
//! column, rather than stopping at the first one as serde derive would.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// A 1-based position in a suite file, with the length of the token there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Loc {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
    /// Length of the located token in characters (at least 1 when known).
    pub len: u32,
}

impl Loc {
    /// The location serde-saphyr recorded for a spanned value.
    pub(crate) fn of(location: &serde_saphyr::Location) -> Self {
        let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        Self {
            line: clamp(location.line()),
            column: clamp(location.column()),
            len: clamp(location.span().len()).max(1),
        }
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// A YAML value with the location of every child.
#[derive(Debug, Clone)]
pub enum Node {
    /// `~`, `null` or an empty value.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer scalar.
    Int(i64),
    /// A floating-point scalar.
    Float(f64),
    /// A string scalar.
    Str(String),
    /// A sequence.
    Seq(Vec<Yaml>),
    /// A mapping, in source order.
    Map(Vec<(Key, Yaml)>),
}

/// A node together with its location.
#[derive(Debug, Clone)]
pub struct Yaml {
    /// The value.
    pub node: Node,
    /// Where it starts.
    pub loc: Loc,
    /// A boolean or number as written (`yes`, `on`, `1.0`): where a suite
    /// expects a string, the scalar stays what the file says, never its
    /// YAML 1.1 reading (`one_of: [yes, no]` is "yes" and "no").
    pub written: Option<String>,
}

/// A mapping key with its location.
#[derive(Debug, Clone)]
pub struct Key {
    /// The key text.
    pub name: String,
    /// Where the key is written.
    pub loc: Loc,
}

impl Yaml {
    /// The value as JSON (without locations): what a JSON Schema of suites
    /// validates, and what free-form fields are sent or compared as.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.node {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Int(i) => Value::from(*i),
            Node::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Node::Str(s) => Value::String(s.clone()),
            Node::Seq(items) => Value::Array(items.iter().map(Yaml::to_json).collect()),
            Node::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.name.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

impl Node {
    /// What kind of YAML value this is, for "expected X, found Y" messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Int(_) => "an integer",
            Node::Float(_) => "a number",
            Node::Str(_) => "a string",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }
}

/// The raw tree as serde-saphyr hands it over, with its own span type.
enum RawNode {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<RawNode>>),
    Map(Vec<(Spanned<String>, Spanned<RawNode>)>),
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = RawNode;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E>(self) -> Result<RawNode, E> {
        Ok(RawNode::Null)
    }
    fn visit_none<E>(self) -> Result<RawNode, E> {
        Ok(RawNode::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<RawNode, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_bool<E>(self, v: bool) -> Result<RawNode, E> {
        Ok(RawNode::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<RawNode, E> {
        Ok(RawNode::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<RawNode, E> {
        // Integers beyond i64 are kept as floats; no suite field needs them exactly.
        #[expect(clippy::cast_precision_loss, reason = "only for values beyond i64")]
        Ok(i64::try_from(v).map_or(RawNode::Float(v as f64), RawNode::Int))
    }
    fn visit_f64<E>(self, v: f64) -> Result<RawNode, E> {
        Ok(RawNode::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<RawNode, E> {
        Ok(RawNode::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<RawNode, E> {
        Ok(RawNode::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawNode, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(RawNode::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawNode, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key()? {
            let value = map.next_value()?;
            entries.push((key, value));
        }
        Ok(RawNode::Map(entries))
    }
}

impl<'de> Deserialize<'de> for RawNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

/// The text of a scalar at `location` in `src`, as written.
fn written(src: &str, location: &serde_saphyr::Location) -> Option<String> {
    let span = location.span();
    let at = |v: u64| usize::try_from(v).ok();
    let text = if let (Some(o), Some(n)) = (span.byte_offset(), span.byte_len()) {
        src.get(at(o)?..at(o)?.checked_add(at(n)?)?)?
    } else {
        let start = src.char_indices().nth(at(span.offset())?)?.0;
        let rest = &src[start..];
        let end = rest
            .char_indices()
            .nth(at(span.len())?)
            .map_or(rest.len(), |(i, _)| i);
        &rest[..end]
    };
    Some(text.trim().to_owned()).filter(|t| !t.is_empty())
}

fn convert(raw: Spanned<RawNode>, src: &str) -> Yaml {
    let loc = Loc::of(&raw.referenced);
    let written = match raw.value {
        RawNode::Bool(_) | RawNode::Int(_) | RawNode::Float(_) => written(src, &raw.referenced),
        _ => None,
    };
    let node = match raw.value {
        RawNode::Null => Node::Null,
        RawNode::Bool(b) => Node::Bool(b),
        RawNode::Int(i) => Node::Int(i),
        RawNode::Float(f) => Node::Float(f),
        RawNode::Str(s) => Node::Str(s),
        RawNode::Seq(items) => Node::Seq(items.into_iter().map(|i| convert(i, src)).collect()),
        RawNode::Map(entries) => Node::Map(
            entries
                .into_iter()
                .map(|(k, v)| {
                    let key = Key {
                        loc: Loc::of(&k.referenced),
                        name: k.value,
                    };
                    (key, convert(v, src))
                })
                .collect(),
        ),
    };
    Yaml { node, loc, written }
}

/// Input limits for suite files: a suite is a few kilobytes; these stop alias
/// bombs and runaway files long before they cost memory.
fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_reader_input_bytes: Some(4 * 1024 * 1024),
            max_events: 200_000,
            max_aliases: 1_000,
            max_anchors: 1_000,
            max_depth: 64,
            max_nodes: 100_000,
            max_total_scalar_bytes: 4 * 1024 * 1024,
        },
    }
}

/// A YAML syntax or budget error, located.
#[derive(Debug, Clone)]
pub struct ParseError {
    /// Where the parser stopped.
    pub loc: Loc,
    /// What it says is wrong.
    pub message: String,
}

/// Parses YAML text into a located tree.
pub fn parse(text: &str) -> Result<Yaml, ParseError> {
    match serde_saphyr::from_str_with_options::<Spanned<RawNode>>(text, options()) {
        Ok(raw) => Ok(convert(raw, text)),
        Err(err) => {
            let loc = err.location().map_or(
                Loc {
                    line: 1,
                    column: 1,
                    len: 1,
                },
                |l| Loc::of(&l),
            );
            let message = err.without_snippet().to_string();
            Err(ParseError {
                loc,
                message: strip_location_prefix(&message),
            })
        }
    }
}

/// serde-saphyr prefixes its messages with "error: line L column C: "; we
/// print the location ourselves, in the rustc style, so drop the prefix.
fn strip_location_prefix(message: &str) -> String {
    let first = message.lines().next().unwrap_or(message).trim();
    let mut text = first.strip_prefix("error: ").unwrap_or(first);
    if let Some(rest) = text.strip_prefix("line ")
        && let Some(idx) = rest.find(": ")
        && rest[..idx].contains("column")
    {
        text = &rest[idx + 2..];
    }
    if let Some(idx) = text.rfind(" at line ")
        && text[idx..].contains(", column ")
    {
        text = &text[..idx];
    }
    text.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_and_key_is_located() {
        let y = parse("a: 1\nb:\n  - x\n  - {c: 2.5}\n").unwrap();
        let Node::Map(entries) = &y.node else {
            panic!("not a map")
        };
        assert_eq!(entries[0].0.name, "a");
        assert_eq!((entries[0].0.loc.line, entries[0].0.loc.column), (1, 1));
        let Node::Seq(items) = &entries[1].1.node else {
            panic!("not a seq")
        };
        assert_eq!((items[0].loc.line, items[0].loc.column), (3, 5));
        assert_eq!(items[1].loc.line, 4);
    }

    #[test]
    fn syntax_errors_are_located() {
        let err = parse("a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        assert!(err.loc.line >= 2, "{err:?}");
        assert!(!err.message.starts_with("error"), "{}", err.message);
    }

    #[test]
    fn booleans_and_numbers_keep_the_text_they_were_written_as() {
        let y = parse("a: [yes, no, on, 1.0, 0x1F, True, \"yes\", x]\nb: 1.50 # note\n").unwrap();
        let Node::Map(entries) = &y.node else {
            panic!("not a map")
        };
        let Node::Seq(items) = &entries[0].1.node else {
            panic!("not a seq")
        };
        let written: Vec<Option<&str>> = items.iter().map(|i| i.written.as_deref()).collect();
        assert_eq!(
            written,
            [
                Some("yes"),
                Some("no"),
                Some("on"),
                Some("1.0"),
                Some("0x1F"),
                Some("True"),
                None,
                None
            ]
        );
        assert_eq!(entries[1].1.written.as_deref(), Some("1.50"));
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let err = parse("a: 1\na: 2\n").unwrap_err();
        assert_eq!(err.loc.line, 2);
        assert!(err.message.contains("duplicate"), "{}", err.message);
    }
}
