//! Checks of structured output: a tool call of a named function whose
//! arguments meet a JSON Schema (`tool_call`), and text that is JSON
//! meeting one (`json_schema`). Both read what the server streamed — the
//! calls from `delta.tool_calls`, the text from `content` — and say, when
//! they fail, every way the value missed its schema (the first few).

use std::fmt::Write as _;

use serde_json::Value;

use crate::client::Completion;

/// Violations shown, at most.
const SHOWN: usize = 5;

/// Whether `value` meets `schema`; else its violations, each with where in
/// the value (`/city: 12 is not of type "string"`).
fn violations(schema: &Value, value: &Value) -> Result<(), String> {
    // The suite's schemas were compiled when it loaded.
    let validator = jsonschema::validator_for(schema).map_err(|e| format!("its schema: {e}"))?;
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    let more = errors.len().saturating_sub(SHOWN);
    let mut said = errors
        .into_iter()
        .take(SHOWN)
        .collect::<Vec<_>>()
        .join("; ");
    if more > 0 {
        let _ = write!(said, "; and {more} more");
    }
    Err(said)
}

/// The answer calls `name`, its arguments JSON that meets `schema`; else
/// what came instead.
pub fn tool_call(c: &Completion, name: &str, schema: Option<&Value>) -> Result<(), String> {
    let fail = Err;
    let calls: Vec<_> = c.tool_calls.iter().filter(|t| t.name == name).collect();
    if calls.is_empty() {
        let names: Vec<String> = c
            .tool_calls
            .iter()
            .map(|t| format!("`{}`", t.name))
            .collect();
        return fail(if names.is_empty() {
            format!(
                "no tool call (finish_reason {})",
                c.finish_reason.as_deref().unwrap_or("absent")
            )
        } else {
            format!("calls of {} only", names.join(", "))
        });
    }
    // Every call of it is checked: one good call does not vouch for a
    // bad one beside it.
    let mut why = Vec::new();
    for (i, call) in c.tool_calls.iter().enumerate() {
        if call.name != name {
            continue;
        }
        let which = if call.id.is_empty() {
            format!("tool_calls[{i}]")
        } else {
            format!("tool_calls[{i}] (id `{}`)", call.id)
        };
        let arguments: Value = match serde_json::from_str(&call.arguments) {
            Ok(v) => v,
            Err(e) => {
                why.push(format!("{which}: its arguments are not JSON ({e})"));
                continue;
            }
        };
        if let Err(v) = schema.map_or(Ok(()), |s| violations(s, &arguments)) {
            why.push(format!(
                "{which}: its arguments {arguments} miss the schema: {v}"
            ));
        }
    }
    if why.is_empty() {
        return Ok(());
    }
    let of = calls.len();
    fail(format!(
        "{} of {of} call{} of `{name}` failed: {}",
        why.len(),
        if of == 1 { "" } else { "s" },
        why.join("; ")
    ))
}

/// `text` (inside a JSON code fence, if fenced) is JSON that meets
/// `schema`; else how it missed.
pub fn json_schema(text: &str, schema: &Value) -> Result<(), String> {
    match serde_json::from_str::<Value>(strip_fence(text)) {
        Err(e) => Err(format!("parse error: {e}")),
        Ok(value) => violations(schema, &value),
    }
}

/// A JSON answer is often fenced (```json … ```); read inside the fence.
pub(crate) fn strip_fence(text: &str) -> &str {
    let t = text.trim();
    if let Some(rest) = t.strip_prefix("```") {
        let body = rest.split_once('\n').map_or("", |(_, b)| b);
        return body.trim_end().strip_suffix("```").unwrap_or(body).trim();
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::api::ToolCall;
    use serde_json::json;

    fn weather() -> Value {
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    }

    fn calling(arguments: &str) -> Completion {
        Completion {
            tool_calls: vec![ToolCall {
                name: "get_weather".into(),
                arguments: arguments.into(),
                ..ToolCall::default()
            }],
            ..Completion::default()
        }
    }

    #[test]
    fn a_call_is_judged_by_its_name_and_its_arguments_schema() {
        let s = weather();
        assert!(tool_call(&calling(r#"{"city": "Paris"}"#), "get_weather", Some(&s)).is_ok());
        let missing = tool_call(&calling(r#"{"unit": "c"}"#), "get_weather", Some(&s)).unwrap_err();
        assert!(
            missing.contains("\"city\" is a required property"),
            "{missing}"
        );
        let typed = tool_call(&calling(r#"{"city": 12}"#), "get_weather", Some(&s)).unwrap_err();
        assert!(typed.contains("/city: 12 is not of type"), "{typed}");
        let broken = tool_call(&calling("{city"), "get_weather", None).unwrap_err();
        assert!(broken.contains("not JSON"), "{broken}");
        let other = tool_call(&calling("{}"), "get_time", None).unwrap_err();
        assert_eq!(other, "calls of `get_weather` only");
        let none = tool_call(&Completion::default(), "get_time", None).unwrap_err();
        assert_eq!(none, "no tool call (finish_reason absent)");
    }

    /// One good call does not vouch for a bad one beside it: each call of
    /// the function is checked, and the one that failed is named.
    #[test]
    fn every_call_of_the_function_is_checked() {
        let s = weather();
        let mut two = calling(r#"{"city": "Paris"}"#);
        two.tool_calls.push(ToolCall {
            id: "call_b".into(),
            name: "get_weather".into(),
            arguments: r#"{"city": 12}"#.into(),
        });
        let why = tool_call(&two, "get_weather", Some(&s)).unwrap_err();
        assert!(
            why.starts_with("1 of 2 calls of `get_weather` failed: tool_calls[1] (id `call_b`): its arguments {\"city\":12} miss the schema: /city: 12 is not of type"),
            "{why}"
        );
        two.tool_calls[1].arguments = r#"{"city": "Rome"}"#.into();
        assert!(tool_call(&two, "get_weather", Some(&s)).is_ok());
    }

    #[test]
    fn text_is_judged_against_its_schema() {
        let s = json!({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"], "additionalProperties": false});
        assert!(json_schema(r#"{"answer": 4}"#, &s).is_ok());
        assert!(json_schema("```json\n{\"answer\": 4}\n```", &s).is_ok());
        let found = json_schema(r#"{"answer": "four", "x": 1}"#, &s).unwrap_err();
        assert!(
            found.contains("/answer: \"four\" is not of type \"integer\""),
            "{found}"
        );
        assert!(
            found.contains("Additional properties are not allowed"),
            "{found}"
        );
        assert!(
            json_schema("four", &s)
                .unwrap_err()
                .starts_with("parse error")
        );
    }
}
