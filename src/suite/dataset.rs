//! The dataset files a suite names, read when the suite is loaded (so a bad
//! line is an error at the suite's line): prompt lines for load shapes, and
//! question/answer lines for accuracy probes. JSONL, one record a line,
//! blank lines skipped, every error naming its line.

use std::io::{BufRead as _, Read as _};
use std::path::Path;

use super::model::{CodeProblem, QaItem, RecordPrompt, TRACE_BLOCK_TOKENS};

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

/// One record of a load's dataset: what it sends, and, when it has them,
/// the answer it was given and the time it was sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Its user turns, or a trace's blocks.
    pub prompt: RecordPrompt,
    /// The answer the record keeps.
    pub answer: Option<Answer>,
    /// Its `timestamp` in milliseconds, or what is wrong with it: only a
    /// load that replays the records' times (`arrival: trace`) reads it.
    pub timestamp: Option<Result<f64, String>>,
    /// Where it is: `line 3`, `item 3`.
    pub at: String,
}

/// A record's answer, for the length a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Its text (`ShareGPT`'s first `gpt` turn after the first human one, or
    /// `completion`), counted by the load's tokenizer.
    Text(String),
    /// Its length given (`output_tokens`, or a Mooncake trace's
    /// `output_length`), as a trace of requests keeps it.
    Tokens(u32),
    /// A length given that is none (why).
    Unusable(String),
}

/// Reads prompts: JSONL (`{"prompt": "…"}` lines, ShareGPT-style
/// `{"conversations": [{"from": "human", "value": "…"}, …]}` lines,
/// MT-Bench's `{"turns": ["…", …]}`, or a Mooncake trace's
/// `{"input_length": N, "hash_ids": […]}`), or a JSON array of such records
/// (the `.json` files of `ShareGPT` ship). Each record gives its user turns
/// in order (a single-turn load sends the first, a conversation load every
/// one), its answer and its `timestamp` where it has them. Blank lines are
/// skipped; errors name the line or the item.
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
            let prompt = match blocks_of(&value) {
                Some(blocks) => blocks.map_err(|e| format!("{at}: {e}"))?,
                None => RecordPrompt::Turns(
                    turns_of(&value).ok_or_else(|| format!("{at}: {NO_PROMPT}"))?,
                ),
            };
            Ok(Record {
                prompt,
                answer: answer_of(&value),
                timestamp: value.get("timestamp").map(timestamp_of),
                at,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    if records.is_empty() {
        return Err("the dataset has no prompts".into());
    }
    Ok(records)
}

const NO_PROMPT: &str = "expected a `prompt` string, `conversations` with a human turn, MT-Bench's `turns`, or a Mooncake trace's `input_length` and `hash_ids`";

/// A Mooncake trace's prompt (`hash_ids`, one a block of
/// [`TRACE_BLOCK_TOKENS`], and `input_length`), when the record has one:
/// the length must fall in its last block.
fn blocks_of(value: &serde_json::Value) -> Option<Result<RecordPrompt, String>> {
    let ids = value.get("hash_ids")?;
    let length = value.get("input_length");
    let hash_ids: Option<Vec<u64>> = ids
        .as_array()
        .and_then(|a| a.iter().map(serde_json::Value::as_u64).collect());
    let tokens = length
        .and_then(serde_json::Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0);
    Some(match (hash_ids, tokens) {
        (Some(ids), _) if ids.is_empty() => Err("`hash_ids` is empty".into()),
        (None, _) => Err(format!(
            "`hash_ids` is {}, not a list of block ids",
            shown(ids)
        )),
        (_, None) => Err(match length {
            Some(n) => format!(
                "`input_length` is {}, not a count of tokens above 0",
                shown(n)
            ),
            None => "a Mooncake record needs `input_length` beside `hash_ids`".into(),
        }),
        (_, Some(tokens)) if tokens > crate::suite::decode::MAX_PROMPT_TOKENS => Err(format!(
            "`input_length` {tokens} is over the {} tokens a prompt may be",
            crate::suite::decode::MAX_PROMPT_TOKENS
        )),
        (Some(hash_ids), Some(tokens)) => {
            let blocks = u64::try_from(hash_ids.len()).unwrap_or(u64::MAX);
            let fits = u64::from(TRACE_BLOCK_TOKENS);
            if u64::from(tokens) > blocks * fits || u64::from(tokens) <= (blocks - 1) * fits {
                Err(format!(
                    "`input_length` {tokens} does not end in the last of its {blocks} blocks of {TRACE_BLOCK_TOKENS} tokens"
                ))
            } else {
                Ok(RecordPrompt::Blocks { hash_ids, tokens })
            }
        }
    })
}

/// A dataset's value as an error message shows it: its JSON, scrubbed of
/// secrets and cut to 80 characters (a file's value can be megabytes).
fn shown(value: &serde_json::Value) -> String {
    match crate::secrets::cut(&value.to_string(), 80) {
        (cut, Some(_)) => format!("{cut}…"),
        (whole, None) => whole,
    }
}

/// A record's `timestamp`: milliseconds, a finite number at or above 0.
fn timestamp_of(value: &serde_json::Value) -> Result<f64, String> {
    value
        .as_f64()
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| {
            format!(
                "`timestamp` is {}, not milliseconds at or above 0",
                shown(value)
            )
        })
}

/// A record's answer: `output_tokens` or `output_length` (a count),
/// `completion` (text), or
/// `ShareGPT`'s first `gpt` (or `assistant`) turn after its first human one.
/// A count that is none is kept as what is wrong with it: only a load that
/// asks for the answers' lengths reads it.
fn answer_of(value: &serde_json::Value) -> Option<Answer> {
    for key in ["output_tokens", "output_length"] {
        if let Some(n) = value.get(key) {
            return Some(
                n.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| *n > 0)
                    .map_or_else(
                        || {
                            Answer::Unusable(format!(
                                "`{key}` is {}, not a count of tokens above 0",
                                shown(n)
                            ))
                        },
                        Answer::Tokens,
                    ),
            );
        }
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

    fn turns_of_strs(turns: &[&str]) -> RecordPrompt {
        RecordPrompt::Turns(turns.iter().map(|t| (*t).to_owned()).collect())
    }

    #[test]
    fn mooncake_traces_give_blocks_lengths_and_times() {
        let text = "{\"timestamp\": 27482, \"input_length\": 700, \"output_length\": 52, \"hash_ids\": [46, 47]}\n{\"timestamp\": 30000.5, \"input_length\": 512, \"output_length\": 8, \"hash_ids\": [46]}\n";
        let records = prompts(text).unwrap();
        assert_eq!(
            records[0].prompt,
            RecordPrompt::Blocks {
                hash_ids: vec![46, 47],
                tokens: 700
            }
        );
        assert_eq!(records[0].answer, Some(Answer::Tokens(52)));
        assert_eq!(records[1].timestamp, Some(Ok(30000.5)));
        // A timestamp is read only by a replay: any record may carry one.
        let bad_time = prompts("{\"prompt\": \"a\", \"timestamp\": -1}").unwrap();
        assert_eq!(
            bad_time[0].timestamp,
            Some(Err(
                "`timestamp` is -1, not milliseconds at or above 0".into()
            ))
        );
        for (line, why) in [
            (
                "{\"input_length\": 513, \"hash_ids\": [1]}",
                "line 1: `input_length` 513 does not end in the last of its 1 blocks of 512 tokens",
            ),
            (
                "{\"input_length\": 512, \"hash_ids\": [1, 2]}",
                "line 1: `input_length` 512 does not end in the last of its 2 blocks of 512 tokens",
            ),
            (
                "{\"input_length\": 5, \"hash_ids\": []}",
                "line 1: `hash_ids` is empty",
            ),
            (
                "{\"input_length\": 5, \"hash_ids\": [\"a\"]}",
                "line 1: `hash_ids` is [\"a\"], not a list of block ids",
            ),
            (
                "{\"hash_ids\": [1]}",
                "line 1: a Mooncake record needs `input_length` beside `hash_ids`",
            ),
            (
                "{\"input_length\": 0, \"hash_ids\": [1]}",
                "line 1: `input_length` is 0, not a count of tokens above 0",
            ),
        ] {
            assert_eq!(prompts(line).unwrap_err(), why);
        }
        // A file's value is shown cut, however long.
        let long = format!(
            "{{\"input_length\": 5, \"hash_ids\": \"{}\"}}",
            "x".repeat(100_000)
        );
        let why = prompts(&long).unwrap_err();
        assert!(why.len() < 200 && why.contains("…, not a list"), "{why}");
    }

    #[test]
    fn prompts_in_both_shapes() {
        let text = "{\"prompt\": \"a\"}\n\n{\"conversations\": [{\"from\": \"system\", \"value\": \"s\"}, {\"from\": \"human\", \"value\": \"b\"}, {\"from\": \"gpt\", \"value\": \"c\"}, {\"from\": \"human\", \"value\": \"b2\"}]}\n{\"question_id\": 81, \"turns\": [\"d\", \"e\"]}\n";
        let records = prompts(text).unwrap();
        let turns: Vec<RecordPrompt> = records.iter().map(|r| r.prompt.clone()).collect();
        assert_eq!(
            turns,
            [
                turns_of_strs(&["a"]),
                turns_of_strs(&["b", "b2"]),
                turns_of_strs(&["d", "e"])
            ]
        );
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
        let turns: Vec<RecordPrompt> = prompts(text)
            .unwrap()
            .into_iter()
            .map(|r| r.prompt)
            .collect();
        assert_eq!(turns, [turns_of_strs(&["hi"]), turns_of_strs(&["p"])]);
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
