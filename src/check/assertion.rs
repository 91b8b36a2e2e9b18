//! Evaluating assertions on a completion.

use std::sync::LazyLock;

use regex::Regex;

use crate::client::Completion;
use crate::suite::{Assertion, Check, Field};

/// Why an assertion failed: what was expected of which text.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// "content matches regex `\b4\b`".
    pub expected: String,
    /// What was found instead, when more can be said than the text itself.
    pub found: Option<String>,
}

/// The text an assertion reads.
pub(crate) fn text_of(field: Field, c: &Completion) -> String {
    match field {
        Field::Content => c.content.clone(),
        Field::Reasoning => c.reasoning.clone(),
        Field::All => format!("{}{}", c.reasoning, c.content),
        Field::ToolCalls => tool_calls_json(c),
    }
}

/// The tool calls as a JSON list of `{"name", "arguments"}`, arguments
/// parsed where they are JSON (`/0/arguments/city` then reaches a value)
/// and left as the text the server sent where they are not.
fn tool_calls_json(c: &Completion) -> String {
    let calls: Vec<serde_json::Value> = c
        .tool_calls
        .iter()
        .map(|t| {
            let arguments = serde_json::from_str(&t.arguments)
                .unwrap_or_else(|_| serde_json::Value::String(t.arguments.clone()));
            serde_json::json!({"name": t.name, "arguments": arguments})
        })
        .collect();
    serde_json::Value::Array(calls).to_string()
}

/// Checks one assertion; a code check adds the program it ran to `runs`.
pub fn evaluate(
    a: &Assertion,
    c: &Completion,
    runs: &mut Vec<super::code::CodeRun>,
) -> Result<(), Mismatch> {
    let text = text_of(a.field, c);
    let field = a.field.name();
    let fail = |expected: String, found: Option<String>| Err(Mismatch { expected, found });
    match &a.check {
        Check::Code(spec) => super::code::check(spec, field, &text, runs),
        Check::NotDegenerate(limits) => match super::degenerate::find(&text, limits) {
            None => Ok(()),
            Some(f) => fail(
                format!("{field} is not degenerate"),
                Some(format!("{}; {}", f.what, f.span)),
            ),
        },
        Check::Equals(want) => {
            if text.trim() == want.trim() {
                Ok(())
            } else {
                fail(format!("{field} (trimmed) equals {want:?}"), None)
            }
        }
        Check::Contains(want) => {
            if text.contains(want.as_str()) {
                Ok(())
            } else {
                fail(format!("{field} contains {want:?}"), None)
            }
        }
        Check::NotContains(bad) => match text.find(bad.as_str()) {
            None => Ok(()),
            Some(at) => fail(
                format!("{field} does not contain {bad:?}"),
                Some(format!("found at character {}", text[..at].chars().count())),
            ),
        },
        Check::Regex(re) => {
            if re.is_match(&text) {
                Ok(())
            } else {
                fail(format!("{field} matches regex `{}`", re.as_str()), None)
            }
        }
        Check::NotRegex(re) => match re.find(&text) {
            None => Ok(()),
            Some(m) => fail(
                format!("{field} does not match regex `{}`", re.as_str()),
                Some(format!("matched {:?}", m.as_str())),
            ),
        },
        Check::StartsWith(want) => {
            if text.trim_start().starts_with(want.as_str()) {
                Ok(())
            } else {
                fail(format!("{field} starts with {want:?}"), None)
            }
        }
        Check::Number { value, tolerance } => {
            let expected = if *tolerance > 0.0 {
                format!("the last number in {field} is {value} ± {tolerance}")
            } else {
                format!("the last number in {field} is {value}")
            };
            match last_number(&text) {
                None => fail(expected, Some("no number in the text".into())),
                Some(n) if (n - value).abs() <= tolerance + 1e-9 * value.abs().max(1.0) => Ok(()),
                Some(n) => fail(expected, Some(format!("the last number is {n}"))),
            }
        }
        Check::OneOf(choices) => {
            if choices.iter().any(|c| c.trim() == text.trim()) {
                Ok(())
            } else {
                fail(format!("{field} (trimmed) is one of {choices:?}"), None)
            }
        }
        Check::Json { pointer } => {
            let parsed: serde_json::Value =
                match serde_json::from_str(super::structured::strip_fence(&text)) {
                    Ok(v) => v,
                    Err(e) => {
                        return fail(
                            format!("{field} is valid JSON"),
                            Some(format!("parse error: {e}")),
                        );
                    }
                };
            let Some((ptr, want)) = pointer else {
                return Ok(());
            };
            let expected = format!("{field} is JSON with {ptr} == {want}");
            match parsed.pointer(ptr) {
                Some(got) if json_equal(got, want) => Ok(()),
                Some(got) => fail(expected, Some(format!("{ptr} is {got}"))),
                None => fail(expected, Some(format!("{ptr} does not exist"))),
            }
        }
        Check::FinishReason(want) => match c.finish_reason.as_deref() {
            Some(got) if got == want => Ok(()),
            got => fail(
                format!("finish_reason is {want:?}"),
                Some(format!(
                    "finish_reason is {}",
                    got.map_or("absent".into(), |g| format!("{g:?}"))
                )),
            ),
        },
        Check::MinChars(n) => {
            let len = text.chars().count();
            if len >= *n {
                Ok(())
            } else {
                fail(
                    format!("{field} has at least {n} characters"),
                    Some(format!("{len} characters")),
                )
            }
        }
        Check::ToolCall { name, arguments } => {
            super::structured::tool_call(c, name, arguments.as_ref()).or_else(|found| {
                let how = if arguments.is_some() {
                    "arguments that meet its schema"
                } else {
                    "JSON arguments"
                };
                fail(format!("a call of `{name}` with {how}"), Some(found))
            })
        }
        Check::JsonSchema(schema) => {
            let expected = format!("{field} is JSON that meets the schema");
            match schema {
                Some(s) => super::structured::json_schema(&text, s)
                    .or_else(|found| fail(expected, Some(found))),
                None => fail(expected, Some("the suite gave no schema".to_owned())),
            }
        }
        Check::MaxChars(n) => {
            let len = text.chars().count();
            if len <= *n {
                Ok(())
            } else {
                fail(
                    format!("{field} has at most {n} characters"),
                    Some(format!("{len} characters")),
                )
            }
        }
    }
}

/// Numbers compare by value: `4` equals `4.0`.
fn json_equal(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() <= f64::EPSILON * x.abs().max(1.0),
        _ => a == b,
    }
}

static NUMBER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?").expect("valid regex")
});

/// The last number written in `text` (`1,234.5` → 1234.5; a trailing `.` is
/// punctuation).
pub(crate) fn last_number(text: &str) -> Option<f64> {
    NUMBER
        .find_iter(text)
        .last()
        .and_then(|m| m.as_str().replace(',', "").parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::node::Loc;

    fn completion(content: &str) -> Completion {
        Completion {
            content: content.into(),
            reasoning: "let me think: 2 and 2".into(),
            finish_reason: Some("stop".into()),
            ..Completion::default()
        }
    }

    fn check(check: Check, field: Field, content: &str) -> Result<(), Mismatch> {
        evaluate(
            &Assertion {
                check,
                field,
                loc: Loc::default(),
            },
            &completion(content),
            &mut Vec::new(),
        )
    }

    #[test]
    fn last_number_takes_the_final_one() {
        assert_eq!(last_number("2 + 2 = 4."), Some(4.0));
        assert_eq!(last_number("total: 1,234.50 dollars"), Some(1234.5));
        assert_eq!(last_number("-3 degrees"), Some(-3.0));
        assert_eq!(last_number("none"), None);
    }

    #[test]
    fn text_checks() {
        let c = Field::Content;
        assert!(check(Check::Equals("4".into()), c, " 4\n").is_ok());
        assert!(check(Check::Equals("4".into()), c, "4.").is_err());
        assert!(
            check(
                Check::Contains("def is_prime".into()),
                c,
                "x def is_prime(n)"
            )
            .is_ok()
        );
        assert!(check(Check::NotContains("error".into()), c, "an error").is_err());
        assert!(check(Check::Regex(Regex::new(r"\b4\b").unwrap()), c, "2 + 2 = 4").is_ok());
        assert!(check(Check::Regex(Regex::new(r"\b4\b").unwrap()), c, "44").is_err());
        assert!(
            check(
                Check::NotRegex(Regex::new(r"(?i)sorry").unwrap()),
                c,
                "Sorry"
            )
            .is_err()
        );
        assert!(check(Check::StartsWith("def".into()), c, "\n def f").is_ok());
        assert!(check(Check::OneOf(vec!["yes".into(), "no".into()]), c, "no").is_ok());
        assert!(check(Check::MinChars(3), c, "ab").is_err());
        assert!(check(Check::MaxChars(3), c, "abc").is_ok());
        assert!(check(Check::FinishReason("length".into()), c, "x").is_err());
    }

    #[test]
    fn numbers_with_tolerance() {
        let c = Field::Content;
        let n = |value, tolerance| Check::Number { value, tolerance };
        assert!(check(n(4.0, 0.0), c, "The answer is 4").is_ok());
        assert!(check(n(2.72, 0.01), c, "e is about 2.7183").is_ok());
        let err = check(n(4.0, 0.0), c, "It is 5").unwrap_err();
        assert_eq!(err.found.as_deref(), Some("the last number is 5"));
    }

    #[test]
    fn json_checks() {
        let c = Field::Content;
        let ptr = |p: &str, v| Check::Json {
            pointer: Some((p.into(), v)),
        };
        assert!(check(Check::Json { pointer: None }, c, "{\"a\": 1}").is_ok());
        assert!(check(Check::Json { pointer: None }, c, "not json").is_err());
        assert!(
            check(
                ptr("/a", serde_json::json!(1)),
                c,
                "```json\n{\"a\": 1.0}\n```"
            )
            .is_ok()
        );
        assert!(check(ptr("/b", serde_json::json!(1)), c, "{\"a\": 1}").is_err());
    }

    #[test]
    fn fields_select_the_text() {
        assert!(check(Check::Contains("think".into()), Field::Reasoning, "4").is_ok());
        assert!(check(Check::Contains("think".into()), Field::Content, "4").is_err());
        assert!(
            check(
                Check::Regex(Regex::new("think.*4").unwrap()),
                Field::All,
                "4"
            )
            .is_ok()
        );
    }
}
