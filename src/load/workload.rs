//! What each request of a load sends: a fixed prompt, a synthetic prompt of
//! a target length, a prompt from a JSONL dataset, or a shared prefix with a
//! unique suffix (to measure prefix caching); and each turn of a
//! conversation load's sessions.

use crate::random::SplitMix;
use crate::suite::{Load, LoadPrompt, Tokenizer};

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
pub(crate) const PROMPT_APPROXIMATION: &str = "synthetic, ~1 token per word, no tokenizer";

/// A prompt of about `tokens` tokens, different for every request index so
/// that a prefix cache cannot serve one request from another, and for
/// every `salt`: a gate's window draws its own ([`crate::random::unpredictable`]),
/// so that no window's prompts are in the cache another left — an earlier
/// run's, another gate's, another repeat's (against vLLM without a cache
/// reset, the same prompts every run read an 81% prefix-cache hit rate and
/// TTFTs 2.5–3.5× too low).
pub(crate) fn synthetic_prompt(tokens: u32, index: u32, salt: u64) -> String {
    let mut rng = SplitMix::new((u64::from(index) ^ 0xD1B5_4A32_D192_ED03) ^ salt.rotate_left(21));
    let mut words = Vec::with_capacity(tokens as usize);
    words.push(format!("Request {index}:"));
    for _ in 1..tokens.max(1) {
        let i = usize::try_from(rng.next_u64() % WORDS.len() as u64).unwrap_or(0);
        words.push(WORDS[i].to_owned());
    }
    words.join(" ")
}

/// A synthetic prompt of `tokens` tokens: cut to length by the tokenizer
/// when there is one, else about one token per word.
fn sized_prompt(tokens: u32, index: u32, salt: u64, tokenizer: Option<&Tokenizer>) -> String {
    let Some(t) = tokenizer else {
        return synthetic_prompt(tokens, index, salt);
    };
    // Words are at least one token each: twice as many words always suffice.
    let text = synthetic_prompt(tokens.saturating_mul(2).max(2), index, salt);
    t.cut(&text, tokens as usize).unwrap_or(text)
}

/// The prompt of request `index` of a load, in a window salted `salt`
/// (synthetic prompts and shared prefixes are the window's own; a fixed
/// prompt and a dataset's are what they are).
pub fn prompt(load: &Load, index: u32, salt: u64) -> String {
    let tokenizer = load.tokenizer.as_ref();
    match &load.prompt {
        LoadPrompt::Text(t) => t.clone(),
        LoadPrompt::Tokens(n) => sized_prompt(*n, index, salt, tokenizer),
        LoadPrompt::Dataset { prompts, .. } => prompts[index as usize % prompts.len()][0].clone(),
        LoadPrompt::SharedPrefix {
            prefix_tokens,
            groups,
            suffix_tokens,
        } => {
            // Group g's prefix is the same for every request of the group
            // in this window (and its warm-up); the suffix is unique to the
            // request.
            let group = index % groups;
            let prefix = sized_prompt(*prefix_tokens, u32::MAX - group, salt, tokenizer);
            format!(
                "{prefix}\n{}",
                sized_prompt(*suffix_tokens, index, salt, tokenizer)
            )
        }
    }
}

/// The `max_tokens` of request `index` when a dataset's answers set it
/// (`output_tokens: dataset`): its record's answer's length.
pub fn output_tokens(load: &Load, index: u32) -> Option<u32> {
    match &load.prompt {
        LoadPrompt::Dataset {
            outputs: Some(o), ..
        } => o.get(index as usize % o.len().max(1)).copied(),
        _ => None,
    }
}

/// The user's words in turn `turn` of a conversation load's session in
/// `slot`, request `index` of a window salted `salt`: a dataset record's
/// own turn (the decoder kept only records with enough of them), else the
/// load's prompt for the request. The records a window's sessions send
/// start at one drawn from its salt, so that no window, repeat, gate or
/// earlier run that sent the same records finds its sessions in the cache;
/// slot 0 is that record, slot -1 the one before it.
pub fn turn_prompt(load: &Load, (slot, turn): (i64, u32), index: u32, salt: u64) -> String {
    match &load.prompt {
        LoadPrompt::Dataset { prompts, .. } => {
            let len = u64::try_from(prompts.len().max(1)).unwrap_or(1);
            let first = i64::try_from(salt % len).unwrap_or(0);
            let at = (first + slot).rem_euclid(i64::try_from(len).unwrap_or(1));
            let record = &prompts[usize::try_from(at).unwrap_or(0)];
            record[(turn as usize).min(record.len() - 1)].clone()
        }
        _ => prompt(load, index, salt),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::Pace;
    use std::sync::Arc;

    fn load_of(prompt: LoadPrompt, tokenizer: Option<Tokenizer>) -> Load {
        Load {
            requests: Some(1),
            tokenizer,
            ..Load::new(Pace::Closed { concurrency: 1 }, prompt, 1)
        }
    }

    #[test]
    fn synthetic_prompts_have_the_asked_length_and_differ() {
        let a = synthetic_prompt(128, 1, 7);
        let b = synthetic_prompt(128, 2, 7);
        assert_eq!(a.split_whitespace().count(), 129); // "Request 1:" is two words
        assert_ne!(a, b);
        assert_eq!(a, synthetic_prompt(128, 1, 7));
        // Another window's: the same request index, other words after the
        // first two.
        let other = synthetic_prompt(128, 1, 8);
        let shared = a
            .split_whitespace()
            .zip(other.split_whitespace())
            .take_while(|(x, y)| x == y)
            .count();
        assert!(shared <= 4, "{shared} words shared: {a} / {other}");
    }

    #[test]
    fn dataset_prompts_take_turns_and_sessions_their_records_turns() {
        let w = LoadPrompt::Dataset {
            path: "d".into(),
            prompts: Arc::new(vec![vec!["x".into()], vec!["y".into(), "y2".into()]]),
            outputs: None,
        };
        assert_eq!(
            [
                prompt(&load_of(w.clone(), None), 0, 0),
                prompt(&load_of(w.clone(), None), 1, 0),
                prompt(&load_of(w.clone(), None), 2, 0)
            ],
            ["x", "y", "x"]
        );
        let l = load_of(w, None);
        assert_eq!(turn_prompt(&l, (1, 1), 9, 0), "y2");
        assert_eq!(turn_prompt(&l, (3, 0), 9, 0), "y");
        // The window's salt picks its first record; the warm-up's slots
        // count back from the one before it.
        assert_eq!(turn_prompt(&l, (0, 1), 9, 1), "y2");
        assert_eq!(turn_prompt(&l, (-1, 0), 9, 1), "x");
        assert_eq!(turn_prompt(&l, (-1, 1), 9, 0), "y2");
        assert_eq!(output_tokens(&l, 1), None);
        let answered = LoadPrompt::Dataset {
            path: "d".into(),
            prompts: Arc::new(vec![vec!["x".into()], vec!["y".into()]]),
            outputs: Some(Arc::new(vec![7, 300])),
        };
        let a = load_of(answered, None);
        assert_eq!(
            [output_tokens(&a, 0), output_tokens(&a, 3)],
            [Some(7), Some(300)]
        );
        let synthetic = load_of(LoadPrompt::Tokens(8), None);
        assert_eq!(
            turn_prompt(&synthetic, (0, 1), 5, 3),
            prompt(&synthetic, 5, 3)
        );
    }

    #[cfg(feature = "tokenizers")]
    #[test]
    fn a_tokenizer_cuts_prompts_to_exact_lengths() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokenizers/words.json");
        let t = Tokenizer::load(&path).unwrap();
        for n in [1, 7, 64, 300] {
            let p = prompt(&load_of(LoadPrompt::Tokens(n), Some(t.clone())), 3, 0);
            assert_eq!(t.count(&p), Some(n as usize), "{n}: {p}");
        }
        let shared = LoadPrompt::SharedPrefix {
            prefix_tokens: 40,
            groups: 1,
            suffix_tokens: 10,
        };
        let p = prompt(&load_of(shared, Some(t.clone())), 0, 0);
        assert_eq!(t.count(&p), Some(50));
    }

    #[test]
    fn shared_prefixes_repeat_within_a_group() {
        let w = LoadPrompt::SharedPrefix {
            prefix_tokens: 32,
            groups: 2,
            suffix_tokens: 8,
        };
        let (a, b, c) = (
            prompt(&load_of(w.clone(), None), 0, 0),
            prompt(&load_of(w.clone(), None), 1, 0),
            prompt(&load_of(w.clone(), None), 2, 0),
        );
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
