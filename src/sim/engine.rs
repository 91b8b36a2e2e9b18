//! What the simulator generates for a prompt: a scripted or seeded answer,
//! cut into tokens, limited by `max_tokens` and extended by `ignore_eos`.

use super::profile::Profile;
use crate::random::SplitMix;

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The answer ended (end-of-sequence).
    Stop,
    /// `max_tokens` was reached.
    Length,
}

impl Finish {
    /// The OpenAI name.
    pub fn name(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
        }
    }
}

/// The end-of-sequence token's id the simulator reports stopping on.
pub(crate) const EOS_TOKEN_ID: u64 = 2;

/// The tokens of one response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Reasoning tokens, streamed first.
    pub reasoning: Vec<String>,
    /// Answer tokens.
    pub content: Vec<String>,
    /// Why it ends.
    pub finish: Finish,
    /// Prompt length in simulator tokens.
    pub prompt_tokens: u64,
    /// What the server reports beside the counts.
    pub server: ServerCounts,
    /// A tool call, streamed after the content: the function's name, then
    /// its arguments' JSON text in pieces (a token each).
    pub tool_call: Option<(String, Vec<String>)>,
    /// The stop sequence the answer was ended before, where one was.
    pub matched: Option<String>,
}

/// What a server reports of a request beside its token counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounts {
    /// Whether it reports its prefix cache (`--enable-cache-report`).
    pub cache_report: bool,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: u64,
    /// Tokens per verify step, when it decodes speculatively.
    pub spec_step: Option<usize>,
    /// Times the request was retracted.
    pub retractions: u64,
    /// Prompt tokens its images took (a vision profile's).
    pub image_tokens: u64,
}

/// The length of the longest token prefix `prompt` shares with one of
/// `earlier`: what a radix cache would serve.
pub(crate) fn cached_prefix(prompt: &[String], earlier: &[Vec<String>]) -> u64 {
    earlier
        .iter()
        .map(|e| e.iter().zip(prompt).take_while(|(a, b)| a == b).count())
        .max()
        .unwrap_or(0) as u64
}

impl Plan {
    /// At least `n` tokens, filler after the natural end (SGLang's
    /// `min_tokens`: no end of sequence before them), ending as it would.
    pub(crate) fn pad_to(&mut self, n: usize, seed: u64) {
        let have = self.reasoning.len() + self.content.len();
        if have < n {
            self.content
                .extend(filler(&mut SplitMix::new(seed), n - have));
        }
    }

    /// Ends the answer before the first stop sequence in it, as servers
    /// honour `stop` (the sequence itself is not returned).
    pub(crate) fn stop_at(&mut self, stops: &[String]) {
        let text = self.content.concat();
        let Some(cut) = stops
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| text.find(s.as_str()))
            .min()
        else {
            return;
        };
        let mut kept = Vec::new();
        let mut len = 0;
        for token in self.content.drain(..) {
            if len + token.len() <= cut {
                len += token.len();
                kept.push(token);
            } else {
                let rest = &token[..cut - len];
                if !rest.is_empty() {
                    kept.push(rest.to_owned());
                }
                break;
            }
        }
        self.content = kept;
        self.finish = Finish::Stop;
        self.matched = stops
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| text.find(s.as_str()).map(|at| (at, s)))
            .min_by_key(|(at, _)| *at)
            .map(|(_, s)| s.clone());
    }

    /// The ids of tokens `from..to` of the answer (its reasoning first), as
    /// SGLang's `/generate` lists them in `output_ids`: each token's text
    /// hashed into the vocabulary of `SmolLM2` (49,152), the same text the same
    /// id; a token past the plan (a misbehaving stream's filler) counts as
    /// `" more"`.
    pub fn output_ids(&self, from: u64, to: u64) -> Vec<u64> {
        let tokens = self.reasoning.iter().chain(&self.content);
        let planned: Vec<u64> = tokens.map(|t| token_id(t)).collect();
        (from..to)
            .map(|i| {
                usize::try_from(i)
                    .ok()
                    .and_then(|i| planned.get(i).copied())
                    .unwrap_or_else(|| token_id(" more"))
            })
            .collect()
    }

    /// What ended the answer as SGLang 0.5.23 names it (`matched_stop` of
    /// a chat or completions choice, `finish_reason.matched` of
    /// `/generate`): the stop sequence, else the end-of-sequence token's
    /// id (`SmolLM2`'s, 2, as real SGLang sent it); nothing at `length`.
    pub fn matched_stop(&self) -> serde_json::Value {
        match (self.finish, &self.matched) {
            (Finish::Length, _) => serde_json::Value::Null,
            (Finish::Stop, Some(stop)) => serde_json::Value::String(stop.clone()),
            (Finish::Stop, None) => serde_json::json!(EOS_TOKEN_ID),
        }
    }

    /// Generated tokens in all.
    pub fn completion_tokens(&self) -> u64 {
        let call = self.tool_call.as_ref().map_or(0, |(_, a)| 1 + a.len());
        (self.reasoning.len() + self.content.len() + call) as u64
    }

    /// The finish reason a chat stream ends with: `tool_calls` after a
    /// tool call, else the plan's own.
    pub fn finish_reason(&self) -> &'static str {
        if self.tool_call.is_some() {
            "tool_calls"
        } else {
            self.finish.name()
        }
    }

    /// Makes the scripted tool call `call` (name, arguments) the answer:
    /// streamed as `delta.tool_calls`, or, by a server whose tool parser is
    /// wrong (`parsed` false), as the text the model wrote for it.
    pub(crate) fn call_tool(&mut self, call: &(String, String), parsed: bool) {
        let (name, arguments) = call;
        self.content.clear();
        self.finish = Finish::Stop;
        if parsed {
            let chars: Vec<char> = arguments.chars().collect();
            let pieces = chars.chunks(8).map(|c| c.iter().collect()).collect();
            self.tool_call = Some((name.clone(), pieces));
        } else {
            self.content = tokenize(&format!(
                "<tool_call>{{\"name\": \"{name}\", \"arguments\": {arguments}}}</tool_call>"
            ));
        }
    }
}

/// Filler vocabulary; each word is one simulator token.
const FILLER: &[&str] = &[
    " the", " model", " server", " token", " answer", " is", " a", " of", " and", " to", " in",
    " that", " it", " with", " for", " on", " decode", " batch", " cache", " prefix", ".", ",",
    " we", " can", " see", " this", " value", " result",
];

/// Cuts text into simulator tokens: a word with its leading whitespace,
/// long words in pieces of four characters.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    for ch in text.chars() {
        let space = ch.is_whitespace();
        if (space && in_word) || current.chars().count() >= 6 && !space {
            tokens.push(std::mem::take(&mut current));
        }
        in_word = !space;
        current.push(ch);
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

/// Counts prompt tokens the way [`tokenize`] cuts them.
pub fn count_tokens(text: &str) -> u64 {
    tokenize(text).len() as u64
}

/// A token's id: its text hashed into the vocabulary of `SmolLM2`
/// (49,152), the same text the same id.
pub(crate) fn token_id(token: &str) -> u64 {
    hash(token) % 49_152
}

/// The ids of a prompt's tokens, as vLLM lists them (`prompt_token_ids`).
pub(crate) fn prompt_ids(prompt: &str) -> Vec<u64> {
    tokenize(prompt).iter().map(|t| token_id(t)).collect()
}

/// FNV-1a of a text: the simulator's fixed draw from it.
pub(crate) fn hash(text: &str) -> u64 {
    text.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    })
}

fn filler(rng: &mut SplitMix, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            #[expect(clippy::cast_possible_truncation, reason = "index into a short list")]
            let i = (rng.next_u64() % FILLER.len() as u64) as usize;
            FILLER[i].to_owned()
        })
        .collect()
}

/// Plans the response to `prompt`.
pub fn plan(
    profile: &Profile,
    prompt: &str,
    max_tokens: u32,
    ignore_eos: bool,
    seed: Option<u64>,
) -> Plan {
    let limit = max_tokens as usize;
    let mut rng = SplitMix::new(profile.seed ^ hash(prompt) ^ seed.unwrap_or(0));
    let scripted = profile
        .replies
        .iter()
        .find(|r| r.pattern.is_match(prompt))
        .filter(|r| r.answers());
    let (mut reasoning, mut content) = if let Some(r) = scripted {
        (
            r.reasoning.as_deref().map(tokenize).unwrap_or_default(),
            tokenize(&r.reply),
        )
    } else {
        let n = 16 + usize::try_from(rng.next_u64() % 48).unwrap_or(0);
        (Vec::new(), filler(&mut rng, n))
    };
    let natural = reasoning.len() + content.len();
    let finish = if natural > limit || (ignore_eos && natural < limit) {
        Finish::Length
    } else {
        Finish::Stop
    };
    if ignore_eos && natural < limit {
        content.extend(filler(&mut rng, limit - natural));
    }
    reasoning.truncate(limit);
    content.truncate(limit - reasoning.len());
    Plan {
        reasoning,
        content,
        finish,
        prompt_tokens: count_tokens(prompt),
        server: ServerCounts::default(),
        tool_call: None,
        matched: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::profile::Reply;
    use regex::Regex;

    fn profile() -> Profile {
        Profile {
            replies: vec![Reply {
                pattern: Regex::new(r"2\+2").unwrap(),
                reply: "The answer is 4".into(),
                reasoning: Some("two plus two".into()),
                tool_call: None,
                wrong_every: None,
                adapter: None,
                matched: std::sync::Arc::default(),
            }],
            ..Profile::default()
        }
    }

    #[test]
    fn tokens_rejoin_to_the_text() {
        let text = "def is_prime(n):\n    return n > 1";
        assert_eq!(tokenize(text).concat(), text);
        assert!(tokenize(text).len() > 5);
    }

    #[test]
    fn scripted_reply_with_reasoning() {
        let p = plan(&profile(), "what is 2+2", 100, false, None);
        assert_eq!(p.reasoning.concat(), "two plus two");
        assert_eq!(p.content.concat(), "The answer is 4");
        assert_eq!(p.finish, Finish::Stop);
    }

    #[test]
    fn max_tokens_and_ignore_eos() {
        let p = plan(&profile(), "what is 2+2", 4, false, None);
        assert_eq!(p.completion_tokens(), 4);
        assert_eq!(p.finish, Finish::Length);
        let p = plan(&profile(), "what is 2+2", 50, true, None);
        assert_eq!(p.completion_tokens(), 50);
        assert_eq!(p.finish, Finish::Length);
    }

    #[test]
    fn stop_sequences_end_the_answer_before_them() {
        let mut p = plan(&profile(), "what is 2+2", 100, false, None);
        p.stop_at(&["is 4".to_owned(), "nowhere".to_owned()]);
        assert_eq!(p.content.concat(), "The answer ");
        assert_eq!(p.finish, Finish::Stop);
        let mut p = plan(&profile(), "what is 2+2", 100, false, None);
        p.stop_at(&["swer".to_owned()]);
        assert_eq!(p.content.concat(), "The an");
        let mut p = plan(&profile(), "what is 2+2", 100, false, None);
        p.stop_at(&[]);
        assert_eq!(p.content.concat(), "The answer is 4");
    }

    #[test]
    fn filler_is_deterministic_per_prompt_and_seed() {
        let a = plan(&Profile::default(), "hello", 200, false, None);
        assert_eq!(a, plan(&Profile::default(), "hello", 200, false, None));
        assert_ne!(
            a.content,
            plan(&Profile::default(), "hello", 200, false, Some(1)).content
        );
    }
}
