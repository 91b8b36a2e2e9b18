//! The dataset files a suite names, read when the suite is loaded (so a bad
//! line is an error at the suite's line): prompt lines for load shapes, and
//! question/answer lines for accuracy probes. JSONL, one record a line,
//! blank lines skipped, every error naming its line.

use std::io::{BufRead as _, Read as _};
use std::path::Path;

use super::model::{CodeProblem, QaItem};

/// The most a dataset file may hold once decompressed: `HumanEval` is 0.2 MB,
/// GSM8K's test set 0.7 MB; a gzip bomb stops here.
pub(crate) const MAX_BYTES: u64 = 256 * 1024 * 1024;

/// A dataset file's text, gunzipped when it is gzip (by its magic bytes,
/// whatever its name), at most `MAX_BYTES`.
pub fn read(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut file = std::io::BufReader::new(file);
    let gz = file
        .fill_buf()
        .map_err(|e| e.to_string())?
        .starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn std::io::Read> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let mut bytes = Vec::new();
    reader
        .take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}{e}", if gz { "not valid gzip: " } else { "" }))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!(
            "more than {} MiB{}",
            MAX_BYTES / (1024 * 1024),
            if gz { " once decompressed" } else { "" }
        ));
    }
    String::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))
}

/// Parses `HumanEval`'s JSONL: `task_id`, `prompt`, `entry_point` and `test`
/// strings on each line; blank lines are skipped.
pub(crate) fn code_problems(text: &str) -> Result<Vec<CodeProblem>, String> {
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("line {}: not JSON: {e}", i + 1))?;
        let field = |name: &str| {
            value
                .get(name)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
                .ok_or_else(|| format!("line {}: no string `{name}`", i + 1))
        };
        let entry_point = field("entry_point")?;
        if entry_point.is_empty() || !entry_point.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Err(format!(
                "line {}: `entry_point` {entry_point:?} is not a Python name",
                i + 1
            ));
        }
        problems.push(CodeProblem {
            task_id: field("task_id")?,
            prompt: field("prompt")?,
            entry_point,
            test: field("test")?,
            line: i + 1,
        });
    }
    if problems.is_empty() {
        return Err("no problems".into());
    }
    Ok(problems)
}

/// One record of a load's dataset: its user turns (at least one) and, when
/// it has one, the answer it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its user turns, in order.
    pub turns: Vec<String>,
    /// The answer the record keeps.
    pub answer: Option<Answer>,
    /// Where it is: `line 3`, `item 3`.
    pub at: String,
}

/// A record's answer, for the length a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Its text (`ShareGPT`'s first `gpt` turn after the first human one, or
    /// `completion`), counted by the load's tokenizer.
    Text(String),
    /// Its length given (`output_tokens`), as a trace of requests keeps it.
    Tokens(u32),
    /// A length given that is none (why).
    Unusable(String),
}

/// Reads prompts: JSONL (`{"prompt": "…"}` lines, ShareGPT-style
/// `{"conversations": [{"from": "human", "value": "…"}, …]}` lines, or
/// MT-Bench's `{"turns": ["…", …]}`), or a JSON array of such records (the
/// `.json` files of `ShareGPT` ship). Each record gives its user turns in
/// order (a single-turn load sends the first, a conversation load every
/// one) and its answer where it has one. Blank lines are skipped; errors
/// name the line or the item.
pub fn prompts(text: &str) -> Result<Vec<Record>, String> {
    let values: Vec<(String, serde_json::Value)> = if text.trim_start().starts_with('[') {
        let items: Vec<serde_json::Value> =
            serde_json::from_str(text).map_err(|e| format!("not a JSON array of records: {e}"))?;
        (1..)
            .zip(items)
            .map(|(i, v)| (format!("item {i}"), v))
            .collect()
    } else {
        let mut values = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let value: serde_json::Value =
                serde_json::from_str(line).map_err(|e| format!("line {}: not JSON: {e}", i + 1))?;
            values.push((format!("line {}", i + 1), value));
        }
        values
    };
    let records = values
        .into_iter()
        .map(|(at, value)| {
            let turns = turns_of(&value).ok_or_else(|| format!("{at}: {NO_PROMPT}"))?;
            let answer = answer_of(&value);
            Ok(Record { turns, answer, at })
        })
        .collect::<Result<Vec<_>, String>>()?;
    if records.is_empty() {
        return Err("the dataset has no prompts".into());
    }
    Ok(records)
}

const NO_PROMPT: &str =
    "expected a `prompt` string, `conversations` with a human turn, or MT-Bench's `turns`";

/// A record's answer: `output_tokens` (a count), `completion` (text), or
/// `ShareGPT`'s first `gpt` (or `assistant`) turn after its first human one.
/// A count that is none is kept as what is wrong with it: only a load that
/// asks for the answers' lengths reads it.
fn answer_of(value: &serde_json::Value) -> Option<Answer> {
    if let Some(n) = value.get("output_tokens") {
        return Some(
            n.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0)
                .map_or_else(
                    || {
                        Answer::Unusable(format!(
                            "`output_tokens` is {n}, not a count of tokens above 0"
                        ))
                    },
                    Answer::Tokens,
                ),
        );
    }
    if let Some(c) = value.get("completion").and_then(|c| c.as_str()) {
        return Some(Answer::Text(c.to_owned()));
    }
    let turns = value.get("conversations")?.as_array()?;
    let from = |t: &serde_json::Value| t.get("from").and_then(|f| f.as_str()).map(str::to_owned);
    turns
        .iter()
        .skip_while(|t| !matches!(from(t).as_deref(), Some("human" | "user")))
        .find(|t| matches!(from(t).as_deref(), Some("gpt" | "assistant")))
        .and_then(|t| t.get("value")?.as_str())
        .map(|a| Answer::Text(a.to_owned()))
}

/// The user turns of one record, at least one: its `prompt`, its human
/// turns (`conversations` of a `ShareGPT` file), or MT-Bench's `turns`.
/// Turns that are not strings end the list (a record whose first is not
/// one has none).
fn turns_of(value: &serde_json::Value) -> Option<Vec<String>> {
    let strings = |list: &mut dyn Iterator<Item = &serde_json::Value>| -> Vec<String> {
        list.map_while(|v| v.as_str().map(str::to_owned)).collect()
    };
    let turns = if let Some(p) = value.get("prompt").and_then(|p| p.as_str()) {
        vec![p.to_owned()]
    } else if let Some(t) = value.get("turns").and_then(|t| t.as_array()) {
        strings(&mut t.iter())
    } else {
        let conversation = value.get("conversations")?.as_array()?;
        strings(
            &mut conversation
                .iter()
                .filter(|turn| {
                    matches!(
                        turn.get("from").and_then(|f| f.as_str()),
                        Some("human" | "user")
                    )
                })
                .map(|turn| turn.get("value").unwrap_or(&serde_json::Value::Null)),
        )
    };
    (!turns.is_empty()).then_some(turns)
}

/// Parses JSONL items with `question_field` and `answer_field` (strings or
/// numbers); blank lines are skipped.
pub(crate) fn qa_items(
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
        let text = "{\"prompt\": \"a\"}\n\n{\"conversations\": [{\"from\": \"system\", \"value\": \"s\"}, {\"from\": \"human\", \"value\": \"b\"}, {\"from\": \"gpt\", \"value\": \"c\"}, {\"from\": \"human\", \"value\": \"b2\"}]}\n{\"question_id\": 81, \"turns\": [\"d\", \"e\"]}\n";
        let records = prompts(text).unwrap();
        let turns: Vec<Vec<String>> = records.iter().map(|r| r.turns.clone()).collect();
        assert_eq!(turns, [vec!["a"], vec!["b", "b2"], vec!["d", "e"]]);
        assert_eq!(records[1].answer, Some(Answer::Text("c".into())));
        assert_eq!(
            (records[0].answer.as_ref(), records[1].at.as_str()),
            (None, "line 3")
        );
        let lengths = "{\"prompt\": \"a\", \"output_tokens\": 12}\n{\"prompt\": \"b\", \"completion\": \"c d\"}\n";
        let answers: Vec<Option<Answer>> = prompts(lengths)
            .unwrap()
            .into_iter()
            .map(|r| r.answer)
            .collect();
        assert_eq!(
            answers,
            [Some(Answer::Tokens(12)), Some(Answer::Text("c d".into()))]
        );
        // Read only by a load that asks for the answers' lengths.
        assert_eq!(
            prompts("{\"prompt\": \"a\", \"output_tokens\": 0}").unwrap()[0].answer,
            Some(Answer::Unusable(
                "`output_tokens` is 0, not a count of tokens above 0".into()
            ))
        );
        assert!(
            prompts("{\"turns\": []}\n")
                .unwrap_err()
                .starts_with("line 1:")
        );
        assert!(prompts("{\"x\": 1}\n").unwrap_err().starts_with("line 1:"));
        assert!(prompts("nope").unwrap_err().contains("not JSON"));
        assert!(prompts("\n").is_err());
    }

    #[test]
    fn sharegpt_json_arrays() {
        let text = "[{\"id\": \"x\", \"conversations\": [{\"from\": \"human\", \"value\": \"hi\"}]},\n {\"prompt\": \"p\"}]";
        let turns: Vec<Vec<String>> = prompts(text)
            .unwrap()
            .into_iter()
            .map(|r| r.turns)
            .collect();
        assert_eq!(turns, [["hi"], ["p"]]);
        assert_eq!(
            prompts("[{\"prompt\": 1}]").unwrap_err(),
            format!("item 1: {NO_PROMPT}")
        );
        assert!(
            prompts("[{")
                .unwrap_err()
                .starts_with("not a JSON array of records")
        );
        assert_eq!(prompts("[]").unwrap_err(), "the dataset has no prompts");
    }

    #[test]
    fn code_problems_from_plain_or_gzipped_jsonl() {
        use std::io::Write as _;
        let line = r#"{"task_id": "T/0", "prompt": "def f(x):\n", "entry_point": "f", "test": "def check(c):\n    assert c(1) == 1\n"}"#;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("p.jsonl");
        std::fs::write(&plain, format!("\n{line}\n")).unwrap();
        let gz = dir.path().join("p.jsonl.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(line.as_bytes()).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        for path in [&plain, &gz] {
            let problems = code_problems(&read(path).unwrap()).unwrap();
            assert_eq!(problems[0].task_id, "T/0");
            assert_eq!(problems[0].entry_point, "f");
        }
        assert_eq!(code_problems(&read(&plain).unwrap()).unwrap()[0].line, 2);
        let bad = line.replace("\"f\"", "\"f(); import os\"");
        assert!(
            code_problems(&bad)
                .unwrap_err()
                .contains("is not a Python name")
        );
        assert!(
            code_problems("{}")
                .unwrap_err()
                .contains("no string `entry_point`")
        );
        std::fs::write(&gz, [0x1f, 0x8b, 0, 1, 2]).unwrap();
        assert!(read(&gz).unwrap_err().starts_with("not valid gzip"));
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
