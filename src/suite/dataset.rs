//! The dataset files a suite names, read when the suite is loaded (so a bad
//! line is an error at the suite's line): prompt lines for load shapes, and
//! question/answer lines for accuracy probes. JSONL, one record a line,
//! blank lines skipped, every error naming its line.

use super::model::QaItem;

/// Reads prompts from JSONL text: `{"prompt": "…"}` lines, or ShareGPT-style
/// `{"conversations": [{"from": "human", "value": "…"}, …]}` lines (the first
/// human turn). Blank lines are skipped; errors name the line.
pub fn prompts(text: &str) -> Result<Vec<String>, String> {
    let mut prompts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("line {}: not JSON: {e}", i + 1))?;
        let prompt = value
            .get("prompt")
            .and_then(|p| p.as_str())
            .or_else(|| {
                value
                    .get("conversations")?
                    .as_array()?
                    .iter()
                    .find(|turn| {
                        matches!(
                            turn.get("from").and_then(|f| f.as_str()),
                            Some("human" | "user")
                        )
                    })?
                    .get("value")?
                    .as_str()
            })
            .ok_or_else(|| {
                format!(
                    "line {}: expected a `prompt` string or `conversations` with a human turn",
                    i + 1
                )
            })?;
        prompts.push(prompt.to_owned());
    }
    if prompts.is_empty() {
        return Err("the dataset has no prompts".into());
    }
    Ok(prompts)
}

/// Parses JSONL items with `question_field` and `answer_field` (strings or
/// numbers); blank lines are skipped.
pub fn qa_items(
    text: &str,
    question_field: &str,
    answer_field: &str,
) -> Result<Vec<QaItem>, String> {
    let mut items = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("line {}: not JSON: {e}", i + 1))?;
        let field = |name: &str| match value.get(name) {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let (Some(question), Some(answer)) = (field(question_field), field(answer_field)) else {
            return Err(format!(
                "line {}: expected string fields `{question_field}` and `{answer_field}`",
                i + 1
            ));
        };
        items.push(QaItem {
            question,
            answer,
            line: i + 1,
        });
    }
    if items.is_empty() {
        return Err("no items".into());
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_in_both_shapes() {
        let text = "{\"prompt\": \"a\"}\n\n{\"conversations\": [{\"from\": \"system\", \"value\": \"s\"}, {\"from\": \"human\", \"value\": \"b\"}, {\"from\": \"gpt\", \"value\": \"c\"}]}\n";
        assert_eq!(prompts(text).unwrap(), ["a", "b"]);
        assert!(prompts("{\"x\": 1}\n").unwrap_err().starts_with("line 1:"));
        assert!(prompts("nope").unwrap_err().contains("not JSON"));
        assert!(prompts("\n").is_err());
    }

    #[test]
    fn items_from_jsonl() {
        let items = qa_items(
            "{\"question\": \"1+1?\", \"answer\": 2}\n\n{\"question\": \"x\", \"answer\": \"y\"}\n",
            "question",
            "answer",
        )
        .unwrap();
        assert_eq!(items[0].answer, "2");
        assert_eq!(items[1].line, 3);
        assert!(
            qa_items("{\"q\": 1}", "question", "answer")
                .unwrap_err()
                .contains("line 1")
        );
    }
}
