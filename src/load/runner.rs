//! The closed-loop load generator: `concurrency` workers, each sending its
//! next request as soon as the previous one ends; warm-up requests first and
//! outside every figure.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use super::metrics::GateMetrics;
use crate::client::{CallError, CallRequest, Client, Completion, ErrorKind};
use crate::suite::{Gate, Input, LoadPrompt};

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
    let mut state = u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut words = Vec::with_capacity(tokens as usize);
    words.push(format!("Request {index}:"));
    for _ in 1..tokens.max(1) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        #[expect(clippy::cast_possible_truncation, reason = "index into a short list")]
        words.push(WORDS[(state % WORDS.len() as u64) as usize].to_owned());
    }
    words.join(" ")
}

fn request(gate: &Gate, index: u32) -> CallRequest {
    let prompt = match &gate.load.prompt {
        LoadPrompt::Text(t) => t.clone(),
        LoadPrompt::Tokens(n) => synthetic_prompt(*n, index),
    };
    CallRequest {
        input: Input::Prompt {
            system: None,
            prompt,
        },
        sampling: gate.sampling.clone(),
        ignore_eos: gate.load.ignore_eos,
    }
}

/// Runs `count` requests with `concurrency` workers; returns successes and
/// failures in completion order.
async fn phase(
    client: &Client,
    gate: &Gate,
    count: u32,
    first_index: u32,
) -> (Vec<Completion>, Vec<CallError>) {
    let next = Arc::new(AtomicU32::new(0));
    let workers = gate.load.concurrency.min(count).max(1);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let client = client.clone();
        let gate = gate.clone();
        let next = Arc::clone(&next);
        tasks.spawn(async move {
            let mut done = Vec::new();
            let mut failed = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                match client.complete(&request(&gate, first_index + i)).await {
                    Ok(c) if c.completion_tokens == 0 => failed.push(CallError::new(
                        ErrorKind::Protocol,
                        "the stream ended without generating a token",
                    )),
                    Ok(c) => done.push(c),
                    Err(e) => failed.push(e),
                }
            }
            (done, failed)
        });
    }
    let mut done = Vec::new();
    let mut failed = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((d, f)) => {
                done.extend(d);
                failed.extend(f);
            }
            Err(e) => failed.push(CallError::new(
                ErrorKind::Transport,
                format!("load worker failed: {e}"),
            )),
        }
    }
    (done, failed)
}

/// Applies a gate's load and measures it.
pub async fn run_gate(client: &Client, gate: &Gate) -> GateMetrics {
    if gate.load.warmup > 0 {
        phase(client, gate, gate.load.warmup, 0).await;
    }
    let start = Instant::now();
    let (done, failed) = phase(client, gate, gate.load.requests, gate.load.warmup).await;
    GateMetrics::compute(&done, &failed, start.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_prompts_have_the_asked_length_and_differ() {
        let a = synthetic_prompt(128, 1);
        let b = synthetic_prompt(128, 2);
        assert_eq!(a.split_whitespace().count(), 129); // "Request 1:" is two words
        assert_ne!(a, b);
        assert_eq!(a, synthetic_prompt(128, 1));
    }
}
