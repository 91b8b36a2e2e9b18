//! What each request of a load sends: a fixed prompt, a synthetic prompt of
//! a target length, a prompt from a JSONL dataset, or a shared prefix with a
//! unique suffix (to measure prefix caching); and each turn of a
//! conversation load's sessions.

use crate::random::SplitMix;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::suite::image::Image;
use crate::suite::{ImageSource, Load, LoadPrompt, RecordPrompt, TRACE_BLOCK_TOKENS, Tokenizer};

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
    let seed = (u64::from(index) ^ 0xD1B5_4A32_D192_ED03) ^ salt.rotate_left(21);
    words(format!("Request {index}:"), seed, tokens)
}

/// `label`, then words drawn from `seed`: `tokens` words in all.
fn words(label: String, seed: u64, tokens: u32) -> String {
    let mut rng = SplitMix::new(seed);
    let mut words = Vec::with_capacity(tokens as usize);
    words.push(label);
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

/// A Mooncake trace's prompt: block `hash_ids[j]` is the same words
/// wherever the trace names it in a window salted `salt`, every block
/// [`TRACE_BLOCK_TOKENS`] tokens long but the last, cut to make `tokens`
/// (by the tokenizer when there is one, else about one token per word).
fn block_prompt(hash_ids: &[u64], tokens: u32, salt: u64, tokenizer: Option<&Tokenizer>) -> String {
    let mut left = tokens;
    let mut blocks = Vec::with_capacity(hash_ids.len());
    for &h in hash_ids {
        let n = left.min(TRACE_BLOCK_TOKENS);
        if n == 0 {
            break;
        }
        left -= n;
        let seed = (h ^ 0x9E37_79B9_7F4A_7C15) ^ salt.rotate_left(37);
        blocks.push(match tokenizer {
            None => words(format!("Block {h}:"), seed, n),
            Some(t) => {
                let text = words(format!("Block {h}:"), seed, n.saturating_mul(2).max(2));
                t.cut(&text, n as usize).unwrap_or(text)
            }
        });
    }
    blocks.join(" ")
}

/// A dataset record's user turn `turn` (its last when it has fewer), in a
/// window salted `salt`.
fn record_turn(load: &Load, record: &RecordPrompt, turn: usize, salt: u64) -> String {
    match record {
        RecordPrompt::Turns(t) => t[turn.min(t.len() - 1)].clone(),
        RecordPrompt::Blocks { hash_ids, tokens } => {
            block_prompt(hash_ids, *tokens, salt, load.tokenizer.as_ref())
        }
    }
}

/// The prompt of request `index` of a load, in a window salted `salt`
/// (synthetic prompts, shared prefixes and a trace's blocks are the
/// window's own; a fixed prompt and a dataset's text are what they are).
pub fn prompt(load: &Load, index: u32, salt: u64) -> String {
    let tokenizer = load.tokenizer.as_ref();
    match &load.prompt {
        LoadPrompt::Text(t) => t.clone(),
        LoadPrompt::Tokens(n) => sized_prompt(*n, index, salt, tokenizer),
        LoadPrompt::Dataset { prompts, .. } => {
            record_turn(load, &prompts[index as usize % prompts.len()], 0, salt)
        }
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

/// The images request `index` of a window salted `salt` sends: one-colour
/// PNGs each another colour (from the request, its image and the salt:
/// no two of a window alike, no window's like another's), or a
/// directory's files in turn from one the salt draws.
pub fn images(load: &Load, index: u32, salt: u64) -> Vec<Image> {
    let Some(li) = &load.images else {
        return Vec::new();
    };
    (0..li.count)
        .map(|j| {
            let nth = u64::from(index) * u64::from(li.count) + u64::from(j);
            match &li.source {
                ImageSource::Generated { width, height, png } => {
                    let mut rng = SplitMix::new(nth ^ salt.rotate_left(29) ^ 0x5851_F42D_4C95_7F2D);
                    let [r, g, b, ..] = rng.next_u64().to_le_bytes();
                    let mut bytes = png.to_vec();
                    crate::media::recolour_png(&mut bytes, [r, g, b]);
                    Image {
                        name: format!("generated #{nth}"),
                        about: format!(
                            "image/png, {width}×{height}, {}",
                            crate::units::format_bytes(bytes.len() as u64)
                        ),
                        url: format!("data:image/png;base64,{}", STANDARD.encode(&bytes)).into(),
                    }
                }
                ImageSource::Files { images, .. } => {
                    let len = images.len().max(1) as u64;
                    images[usize::try_from((salt % len + nth) % len).unwrap_or(0)].clone()
                }
            }
        })
        .collect()
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
            record_turn(
                load,
                &prompts[usize::try_from(at).unwrap_or(0)],
                turn as usize,
                salt,
            )
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

    fn turns(t: &[&str]) -> RecordPrompt {
        RecordPrompt::Turns(t.iter().map(|t| (*t).to_owned()).collect())
    }

    fn trace(records: Vec<(Vec<u64>, u32)>) -> Load {
        let prompts = records
            .into_iter()
            .map(|(hash_ids, tokens)| RecordPrompt::Blocks { hash_ids, tokens })
            .collect();
        let w = LoadPrompt::Dataset {
            path: "t".into(),
            prompts: Arc::new(prompts),
            outputs: None,
            times: None,
        };
        load_of(w, None)
    }

    #[test]
    fn a_traces_blocks_are_the_same_words_wherever_it_names_them() {
        let l = trace(vec![(vec![1, 2], 600), (vec![1, 3], 1000), (vec![4], 10)]);
        let (a, b) = (prompt(&l, 0, 5), prompt(&l, 1, 5));
        let count = |s: &str| s.split_whitespace().count();
        // About a token a word ("Block 1:" is two words).
        assert_eq!([count(&a), count(&b)], [602, 1002]);
        let block = |s: &str| s.split("Block").nth(1).unwrap().to_owned();
        assert_eq!(block(&a), block(&b), "block 1 is shared");
        assert_ne!(a.split("Block").nth(2), b.split("Block").nth(2));
        assert_eq!(count(&prompt(&l, 2, 5)), 11);
        // Another window's blocks are its own.
        assert_ne!(block(&a), block(&prompt(&l, 0, 6)));
    }

    /// Every request's generated images are another colour (no server's
    /// image cache serves one from another), the same again for the same
    /// request of the same window; a directory's files go in turn.
    #[test]
    fn each_request_sends_images_of_its_own() {
        let png: std::sync::Arc<[u8]> = crate::media::flat_png(16, 8).unwrap().into();
        let mut l = load_of(LoadPrompt::Tokens(4), None);
        l.images = Some(crate::suite::LoadImages {
            count: 2,
            source: ImageSource::Generated {
                width: 16,
                height: 8,
                png,
            },
        });
        let urls = |index, salt| -> Vec<String> {
            images(&l, index, salt)
                .iter()
                .map(|i| i.url.to_string())
                .collect()
        };
        let mut all: Vec<String> = (0..50).flat_map(|i| urls(i, 7)).collect();
        assert_eq!(urls(3, 7), urls(3, 7));
        assert_ne!(urls(3, 7), urls(3, 8));
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 100, "100 images, each its own");
        assert_eq!(images(&l, 0, 7)[1].about, "image/png, 16×8, 110 B");
        let file = |name: &str| Image {
            name: name.into(),
            url: name.into(),
            about: String::new(),
        };
        l.images = Some(crate::suite::LoadImages {
            count: 1,
            source: ImageSource::Files {
                path: "d".into(),
                images: Arc::new(vec![file("a"), file("b"), file("c")]),
            },
        });
        let names: Vec<String> = (0..4).map(|i| images(&l, i, 1)[0].name.clone()).collect();
        assert_eq!(names, ["b", "c", "a", "b"]);
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
            prompts: Arc::new(vec![turns(&["x"]), turns(&["y", "y2"])]),
            outputs: None,
            times: None,
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
            prompts: Arc::new(vec![turns(&["x"]), turns(&["y"])]),
            outputs: Some(Arc::new(vec![7, 300])),
            times: None,
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
        let mut blocks = trace(vec![(vec![1, 2], 700)]);
        blocks.tokenizer = Some(t.clone());
        assert_eq!(t.count(&prompt(&blocks, 0, 0)), Some(700));
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
