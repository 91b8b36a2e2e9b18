//! The pieces the suite's JSON Schema is built from: the field tables of
//! its objects (the keys the decoder accepts, each with its schema and
//! words), arrays, scalars, names, durations,
//! environment variables and comparisons.

use serde_json::{Map, Value, json};

use crate::suite::names::Named;
use crate::suite::threshold::Op;

/// One key of a suite object: the decoder accepts exactly the keys of its
/// object's tables, the schema gives each its value's schema and its
/// words, the docs list them. Adding a key is adding its entry here and
/// the code that reads it.
pub(in crate::suite::decode) struct Field {
    /// The key.
    pub key: &'static str,
    /// The JSON Schema of its value.
    pub value: fn() -> Value,
    /// What it means: the schema's description of it; empty where its
    /// value's schema describes itself.
    pub doc: &'static str,
}

/// The keys of an object made of these tables, in their order.
pub(in crate::suite::decode) fn keys(tables: &[&[Field]]) -> Vec<&'static str> {
    tables
        .iter()
        .flat_map(|t| t.iter().map(|f| f.key))
        .collect()
}

/// The object of exactly these tables' keys, each valued and described by
/// its entry; panics on a key listed twice.
pub(super) fn object(tables: &[&[Field]]) -> Value {
    let mut properties = Map::new();
    for field in tables.iter().flat_map(|t| t.iter()) {
        let mut value = (field.value)();
        if !field.doc.is_empty() {
            value = described(value, field.doc);
        }
        let twice = properties.insert(field.key.to_owned(), value);
        assert!(twice.is_none(), "`{}` is listed twice", field.key);
    }
    closed(properties)
}

/// An object of exactly these properties: where an enumeration's or the
/// metrics' own table names the keys (`expect_server`'s documents, a
/// gate's metric keys).
pub(super) fn closed(properties: Map<String, Value>) -> Value {
    let mut object = json!({"type": "object"});
    object["properties"] = Value::Object(properties);
    object["additionalProperties"] = false.into();
    object
}

pub(super) fn described(mut schema: Value, description: &str) -> Value {
    schema["description"] = description.into();
    schema
}

pub(super) fn with_required(mut schema: Value, required: &[&str]) -> Value {
    schema["required"] = json!(required);
    schema
}

/// Exactly one of these alternatives (each a list of required keys).
pub(super) fn one_of_required(mut schema: Value, alternatives: &[&[&str]]) -> Value {
    schema["oneOf"] = alternatives
        .iter()
        .map(|keys| json!({ "required": keys }))
        .collect();
    schema
}

pub(super) fn array(items: Value) -> Value {
    let mut schema = json!({"type": "array"});
    schema["items"] = items;
    schema
}

pub(super) fn non_empty(items: Value) -> Value {
    let mut schema = array(items);
    schema["minItems"] = 1.into();
    schema
}

pub(super) fn string() -> Value {
    json!({"type": "string"})
}

/// A scalar read as text (YAML `4` is the text "4" where text is expected).
pub(super) fn text() -> Value {
    json!({"type": ["string", "number", "boolean"]})
}

pub(super) fn boolean() -> Value {
    json!({"type": "boolean"})
}

pub(super) fn number() -> Value {
    json!({"type": "number"})
}

pub(super) fn count(min: i64) -> Value {
    json!({"type": "integer", "minimum": min})
}

/// A name that becomes part of trial names and file paths.
pub(super) fn name() -> Value {
    json!({"type": ["string", "number", "boolean"], "pattern": "^[A-Za-z0-9_-][A-Za-z0-9_.-]*$"})
}

/// A value the loader interpolates (`${VAR}`, `${VAR:-default}`) matches
/// `pattern` once interpolated; the schema, which cannot look a variable
/// up, takes any value holding `${`.
pub(super) fn or_interpolated(pattern: &str) -> String {
    format!("^({pattern})$|\\$\\{{")
}

pub(super) fn duration() -> Value {
    json!({
        "type": "string",
        "pattern": or_interpolated(&crate::units::duration_pattern()),
        "description": "A duration such as `90s`, `500ms`, `10m` or `1h 30m` (units ns, us, ms, s, m, min, h)."
    })
}

pub(super) fn names<T: Named>() -> Value {
    json!({ "enum": T::names() })
}

pub(super) fn one_of(choices: &[&str]) -> Value {
    json!({ "enum": choices })
}

/// A mapping of environment variable names to values.
pub(super) fn env() -> Value {
    json!({
        "type": "object",
        "propertyNames": {"pattern": "^[A-Za-z0-9_]+$"},
        "additionalProperties": {"type": ["string", "number", "boolean"]},
        "description": "Environment variables, NAME: value (`${VAR}` interpolated)."
    })
}

/// The name of an environment variable.
pub(super) fn variable() -> Value {
    json!({"type": "string", "pattern": "^[A-Za-z0-9_]+$"})
}

/// A comparison such as `">= 12.5"` or `"<= baseline * 1.1"` (every
/// operator of [`Op::ALL`]), whose plain
/// value matches `value` (a bound named after `baseline`, `variant(…)`,
/// `history.` or `no_regression` is checked by the loader).
pub(super) fn comparison(value: &str, what: &str) -> Value {
    // Every operator the loader reads, the longer first (`>=` before `>`).
    let mut ops: Vec<&str> = Op::ALL.iter().map(|op| op.symbol()).collect();
    ops.sort_by_key(|symbol| std::cmp::Reverse(symbol.len()));
    json!({
        "type": "string",
        "pattern": format!(
            "^\\s*({})\\s*((baseline|variant\\(|history\\.|no_regression).*|{value}\\s*)$",
            ops.join("|")
        ),
        "description": what,
    })
}

pub(super) fn with_min_properties(mut schema: Value) -> Value {
    schema["minProperties"] = 1.into();
    schema
}

pub(super) fn exactly_one(schema: Value) -> Value {
    let mut schema = with_min_properties(schema);
    schema["maxProperties"] = 1.into();
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "`a` is listed twice")]
    fn a_key_listed_twice_fails_the_build() {
        const A: &[Field] = &[Field {
            key: "a",
            value: text,
            doc: "",
        }];
        object(&[A, A]);
    }
}
