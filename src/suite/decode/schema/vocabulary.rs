//! The pieces the suite's JSON Schema is built from: objects of exactly
//! the keys the decoder accepts, arrays, scalars, names, durations,
//! environment variables and comparisons.

use serde_json::{Map, Value, json};

use crate::suite::names::Named;

/// An object of exactly the keys `keys` (the decoder's list for it), each
/// described by `props`; panics when the two differ, so that the schema
/// cannot drift from the decoder.
pub(super) fn object(what: &str, keys: &[&str], props: Vec<(&str, Value)>) -> Value {
    let mut given: Vec<&str> = props.iter().map(|(k, _)| *k).collect();
    let mut wanted = keys.to_vec();
    given.sort_unstable();
    wanted.sort_unstable();
    assert_eq!(
        given, wanted,
        "the schema of {what} and the keys the decoder accepts there differ"
    );
    let properties: Map<String, Value> =
        props.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    json!({"type": "object", "properties": properties, "additionalProperties": false})
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

/// A comparison such as `">= 12.5"` or `"<= baseline * 1.1"`, whose plain
/// value matches `value` (a bound named after `baseline`, `variant(…)`,
/// `history.` or `no_regression` is checked by the loader).
pub(super) fn comparison(value: &str, what: &str) -> Value {
    json!({
        "type": "string",
        "pattern": format!(
            "^\\s*(>=|<=|==|!=|>|<)\\s*((baseline|variant\\(|history\\.|no_regression).*|{value}\\s*)$"
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
    use crate::suite::decode::server::TARGET;

    #[test]
    #[should_panic(expected = "the schema of target and the keys the decoder accepts there differ")]
    fn a_key_the_decoder_does_not_know_fails_the_build() {
        object("target", TARGET, vec![("base_url", text())]);
    }
}
