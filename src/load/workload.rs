//! What each request of a load sends: a fixed prompt, a synthetic prompt of
//! a target length, a prompt from a JSONL dataset, or a shared prefix with a
//! unique suffix (to measure prefix caching).

use crate::load::runner::SplitMix;
use crate::suite::LoadPrompt;

/// Words for synthetic prompts: common English words, about one token each
/// in the tokenizers of current models.
const WORDS: &[&str] = &[
    "time", "year", "people", "way", "day", "man", "thing", "woman", "life", "child", "world",
    "school", "state", "family", "student", "group", "country", "problem", "hand", "part", "place",
    "case", "week", "company", "system", "program", "question", "work", "number", "night", "point",
    "home", "water", "room", "mother", "area", "money", "story", "fact", "month", "lot", "right",
    "study", "book", "eye", "job", "word", "business", "issue", "side",
];

/// How synthetic prompts are sized, for the report.
pub const PROMPT_APPROXIMATION: &str = "synthetic, ~1 token per word, no tokenizer";

/// A prompt of about `tokens` tokens, different for every request index so
/// that a prefix cache cannot serve one request from another.
pub fn synthetic_prompt(tokens: u32, index: u32) -> String {
    let mut rng = SplitMix::new(u64::from(index) ^ 0xD1B5_4A32_D192_ED03);
    let mut words = Vec::with_capacity(tokens as usize);
    words.push(format!("Request {index}:"));
    for _ in 1..tokens.max(1) {
        let i = usize::try_from(rng.next_u64() % WORDS.len() as u64).unwrap_or(0);
        words.push(WORDS[i].to_owned());
    }
    words.join(" ")
}

/// The prompt of request `index`.
pub fn prompt(workload: &LoadPrompt, index: u32) -> String {
    match workload {
        LoadPrompt::Text(t) => t.clone(),
        LoadPrompt::Tokens(n) => synthetic_prompt(*n, index),
        LoadPrompt::Dataset { prompts, .. } => prompts[index as usize % prompts.len()].clone(),
        LoadPrompt::SharedPrefix {
            prefix_tokens,
            groups,
            suffix_tokens,
        } => {
            // Group g's prefix is the same for every request of the group;
            // the suffix is unique to the request.
            let group = index % groups;
            let prefix = synthetic_prompt(*prefix_tokens, u32::MAX - group);
            format!("{prefix}\n{}", synthetic_prompt(*suffix_tokens, index))
        }
    }
}

/// Reads prompts from JSONL text: `{"prompt": "…"}` lines, or ShareGPT-style
/// `{"conversations": [{"from": "human", "value": "…"}, …]}` lines (the first
/// human turn). Blank lines are skipped; errors name the line.
pub fn parse_dataset(text: &str) -> Result<Vec<String>, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn synthetic_prompts_have_the_asked_length_and_differ() {
        let a = synthetic_prompt(128, 1);
        let b = synthetic_prompt(128, 2);
        assert_eq!(a.split_whitespace().count(), 129); // "Request 1:" is two words
        assert_ne!(a, b);
        assert_eq!(a, synthetic_prompt(128, 1));
    }

    #[test]
    fn datasets_in_both_shapes() {
        let text = "{\"prompt\": \"a\"}\n\n{\"conversations\": [{\"from\": \"system\", \"value\": \"s\"}, {\"from\": \"human\", \"value\": \"b\"}, {\"from\": \"gpt\", \"value\": \"c\"}]}\n";
        assert_eq!(parse_dataset(text).unwrap(), ["a", "b"]);
        assert!(
            parse_dataset("{\"x\": 1}\n")
                .unwrap_err()
                .starts_with("line 1:")
        );
        assert!(parse_dataset("nope").unwrap_err().contains("not JSON"));
        assert!(parse_dataset("\n").is_err());
        let w = LoadPrompt::Dataset {
            path: "d".into(),
            prompts: Arc::new(vec!["x".into(), "y".into()]),
        };
        assert_eq!(
            [prompt(&w, 0), prompt(&w, 1), prompt(&w, 2)],
            ["x", "y", "x"]
        );
    }

    #[test]
    fn shared_prefixes_repeat_within_a_group() {
        let w = LoadPrompt::SharedPrefix {
            prefix_tokens: 32,
            groups: 2,
            suffix_tokens: 8,
        };
        let (a, b, c) = (prompt(&w, 0), prompt(&w, 1), prompt(&w, 2));
        let prefix = |s: &str| s.split('\n').next().unwrap().to_owned();
        assert_eq!(
            prefix(&a),
            prefix(&c),
            "requests 0 and 2 share group 0's prefix"
        );
        assert_ne!(prefix(&a), prefix(&b));
        assert_ne!(a, c, "suffixes differ");
        assert_eq!(prefix(&a).split_whitespace().count(), 33);
    }
}
