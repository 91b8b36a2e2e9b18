//! Decoding a gate's `load:`: its pace (closed loop, open loop, or a sweep
//! of levels), its window, its workload (a prompt, synthetic tokens with a
//! shared prefix, or a dataset of prompts), its tokenizer and its client
//! threads.

use std::sync::Arc;

use super::pace::{Level, mean_rate, replays, trace_slowdown};
use super::schema::gate::{CONVERSATION, LOAD, SHARED_PREFIX};
use super::{Decoder, Fields};
use crate::suite::Tokenizer;
use crate::suite::dataset;
use crate::suite::diagnostics::Diagnostic;
use crate::suite::model::{
    Api, ClientThreads, Conversation, Load, LoadPrompt, OnClientLimited, Pace, RecordPrompt,
};
use crate::suite::node::{Node, Yaml};

/// Longest synthetic prompt: past any served model's context (2M tokens
/// and more are rare), and every request's is made in memory.
pub(crate) const MAX_PROMPT_TOKENS: u32 = 4_000_000;
/// Largest dataset read into memory.
const MAX_DATASET_BYTES: u64 = 64 * 1024 * 1024;
pub(super) const CLIENT_LIMITED: &[&str] = &["fail", "warn"];
/// Most turns of a conversation load's session: each sends the whole
/// conversation before it, kept in memory per session in flight.
pub(super) const MAX_TURNS: u32 = 64;
/// Most client threads a suite may ask for.
pub(super) const MAX_CLIENT_THREADS: u32 = 256;

impl Decoder<'_> {
    /// Exactly one of `prompt`, `input_tokens` or `dataset`; `shared_prefix`
    /// goes with `input_tokens` (the length of each request's own suffix).
    /// A dataset's records come too, for their answers.
    fn workload(
        &mut self,
        f: &Fields<'_>,
        y: &Yaml,
    ) -> Option<(LoadPrompt, Option<Vec<dataset::Record>>)> {
        let given: Vec<&str> = ["prompt", "input_tokens", "dataset"]
            .into_iter()
            .filter(|k| f.get(k).is_some())
            .collect();
        match given.as_slice() {
            [] => {
                self.error(
                    Diagnostic::new(y.loc, "missing field `prompt`, `input_tokens` or `dataset` in load")
                        .expected("`input_tokens: 128` (a synthetic prompt), `prompt: \"…\"` or `dataset: fixtures/datasets/….jsonl`"),
                );
                return None;
            }
            [_, second, ..] => {
                let k = f.key(second).map_or(y.loc, |k| k.loc);
                self.error(Diagnostic::new(
                    k,
                    format!("give one of `prompt`, `input_tokens` or `dataset`, not `{}` and `{second}`", given[0]),
                ));
                return None;
            }
            [_] => {}
        }
        if let Some(p) = f.get("prompt") {
            if let Some(k) = f.key("shared_prefix") {
                self.error(Diagnostic::new(
                    k.loc,
                    "`shared_prefix` goes with `input_tokens`, not a fixed prompt",
                ));
            }
            return self.text(p, "prompt").map(|p| (LoadPrompt::Text(p), None));
        }
        if let Some(d) = f.get("dataset") {
            return self
                .dataset(d)
                .map(|(prompt, records)| (prompt, Some(records)));
        }
        let tokens = f
            .get("input_tokens")
            .and_then(|n| self.prompt_tokens(n, "input_tokens"))?;
        let Some(sp) = f.get("shared_prefix") else {
            return Some((LoadPrompt::Tokens(tokens), None));
        };
        let sf = self.fields(sp, "shared_prefix", &[SHARED_PREFIX])?;
        let prefix_tokens = self
            .required(&sf, "tokens", "shared_prefix")
            .and_then(|v| self.prompt_tokens(v, "shared_prefix.tokens"));
        let groups = sf
            .get("groups")
            .map_or(Some(1), |v| self.count(v, "shared_prefix.groups", 1));
        Some((
            LoadPrompt::SharedPrefix {
                prefix_tokens: prefix_tokens?,
                groups: groups?,
                suffix_tokens: tokens,
            },
            None,
        ))
    }

    /// A synthetic prompt's length: 1 to [`MAX_PROMPT_TOKENS`] (each
    /// request's prompt is made in memory).
    fn prompt_tokens(&mut self, y: &Yaml, what: &str) -> Option<u32> {
        let n = self.count::<u32>(y, what, 1)?;
        if n > MAX_PROMPT_TOKENS {
            self.error(
                Diagnostic::new(y.loc, format!("{what} is out of range: {n}")).expected(format!(
                    "1 to {MAX_PROMPT_TOKENS} tokens (a prompt is made in memory for every request)"
                )),
            );
            return None;
        }
        Some(n)
    }

    fn tokenizer(&mut self, y: &Yaml) -> Option<Tokenizer> {
        let path = self.file(y, "tokenizer")?;
        match Tokenizer::load(&path) {
            Ok(t) => Some(t),
            Err(e) => {
                self.error(Diagnostic::new(y.loc, e.message).expected(e.expected));
                None
            }
        }
    }

    fn dataset(&mut self, y: &Yaml) -> Option<(LoadPrompt, Vec<dataset::Record>)> {
        let path = self.file(y, "dataset")?;
        let text = match std::fs::metadata(&path) {
            Ok(m) if m.len() > MAX_DATASET_BYTES => Err(format!(
                "it is {} bytes; the limit is {MAX_DATASET_BYTES}",
                m.len()
            )),
            _ => std::fs::read_to_string(&path).map_err(|e| e.to_string()),
        };
        match text.and_then(|t| dataset::prompts(&t)) {
            Ok(records) => Some((
                LoadPrompt::Dataset {
                    path,
                    prompts: Arc::new(records.iter().map(|r| r.prompt.clone()).collect()),
                    outputs: None,
                    times: None,
                },
                records,
            )),
            Err(e) => {
                self.error(
                    Diagnostic::new(y.loc, format!("invalid dataset {}: {e}", path.display())).expected(
                        "JSONL lines of `{\"prompt\": \"…\"}`, ShareGPT `{\"conversations\": [{\"from\": \"human\", \"value\": \"…\"}]}`, MT-Bench `{\"turns\": [\"…\"]}` or a Mooncake trace's `{\"timestamp\": 0, \"input_length\": 700, \"hash_ids\": [1, 2]}`",
                    ),
                );
                None
            }
        }
    }

    pub(super) fn load(&mut self, y: &Yaml, api: Api) -> Option<(Load, Vec<Level>)> {
        let f = self.fields(y, "load", &[LOAD])?;
        let mut levels = self.pace(&f);
        let replay = levels.as_deref().and_then(trace_slowdown);
        let requests = f.get("requests").map(|v| self.count(v, "requests", 1));
        let duration = f.get("duration").map(|v| self.duration(v, "duration"));
        if requests.is_none() && duration.is_none() && !replays(&f) {
            self.error(
                Diagnostic::new(y.loc, "missing field `requests` or `duration` in load")
                    .expected("`requests: 100`, `duration: 60s`, or both (whichever ends first)"),
            );
        }
        let warmup = f
            .get("warmup")
            .map_or(Some(0), |v| self.count(v, "warmup", 0));
        let output_at = self.required(&f, "output_tokens", "load");
        let from_answers =
            output_at.is_some_and(|v| matches!(&v.node, Node::Str(s) if s == "dataset"));
        let output_tokens = match output_at {
            Some(_) if from_answers => Some(1),
            Some(v) => self.count(v, "output_tokens", 1),
            None => None,
        };
        let ignore_eos = f
            .get("ignore_eos")
            .map_or(Some(false), |v| self.boolean(v, "ignore_eos"));
        let flush_cache = f
            .get("flush_cache")
            .map_or(Some(false), |v| self.boolean(v, "flush_cache"));
        let abort_after = f
            .get("abort_after")
            .map_or(Some(3), |v| self.count(v, "abort_after", 0));
        let client_threads = f
            .get("client_threads")
            .map_or(Some(ClientThreads::Auto), |v| self.client_threads(v));
        let client_limited = match f.get("client_limited") {
            None => Some(None),
            Some(v) => self
                .one_of(v, "client_limited", CLIENT_LIMITED)
                .map(|w| OnClientLimited::parse(&w)),
        };
        let (mut prompt, records) = self.workload(&f, y).unzip();
        let mut requests = requests;
        if let (Some(slowdown), Some(levels)) = (replay, levels.as_mut()) {
            // A `requests` given but invalid was reported.
            let asked = requests.map(|r| r.ok_or(())).transpose().ok()?;
            let given = records.as_ref().and_then(Option::as_deref);
            let times = self.trace_times(&f, given, (warmup, asked));
            match (times, prompt.as_mut(), warmup) {
                (Some((t, count)), Some(LoadPrompt::Dataset { times, .. }), Some(w)) => {
                    let replayed = t.iter().skip(w as usize).take(count as usize);
                    levels[0].pace = levels[0].pace.with_rate(mean_rate(replayed, slowdown));
                    *times = Some(Arc::new(t));
                    requests = Some(Some(count));
                }
                _ => return None,
            }
        }
        let tokenizer = f
            .get("tokenizer")
            .map_or(Some(None), |v| self.tokenizer(v).map(Some));
        let mut output_tokens = output_tokens;
        if let (Some(at), true) = (output_at, from_answers) {
            let lengths = self.answer_lengths(
                at,
                records.flatten(),
                tokenizer.as_ref(),
                (
                    f.get("dataset").is_some(),
                    f.key("conversation").map(|k| k.loc),
                ),
            );
            output_tokens = lengths.as_ref().and_then(|l| l.iter().max().copied());
            if let (Some(LoadPrompt::Dataset { outputs, .. }), Some(l)) = (prompt.as_mut(), lengths)
            {
                *outputs = Some(Arc::new(l));
            }
        }
        let images = match f.get("images") {
            None => Some(None),
            Some(v) => self.load_images(v, api, &f).map(Some),
        };
        let conversation = match (f.get("conversation"), prompt.as_mut()) {
            (Some(v), Some(p)) => self.conversation_load(v, &f, api, p).map(Some),
            (Some(_), None) => None,
            (None, _) => Some(None),
        };
        // Outer `None`: not given; inner `None`: given but invalid (reported).
        let (requests, duration) = match (requests, duration) {
            (None, None) | (Some(None), _) | (_, Some(None)) => return None,
            (r, d) => (r.flatten(), d.flatten()),
        };
        if let (Some(n), None, Some(levels), Some(p), Some(w)) =
            (requests, duration, levels.as_ref(), prompt.as_ref(), warmup)
        {
            self.schedule_within_reach(&f, levels, (w, n), p)?;
        }
        let load = Load {
            pace: Pace::Closed { concurrency: 1 },
            requests,
            duration,
            warmup: warmup?,
            prompt: prompt?,
            output_tokens: output_tokens?,
            ignore_eos: ignore_eos?,
            flush_cache: flush_cache?,
            tokenizer: tokenizer?,
            conversation: conversation?,
            images: images?,
            abort_after: abort_after?,
            client_threads: client_threads?,
            client_limited: client_limited?,
        };
        Some((load, levels?))
    }

    /// `output_tokens: dataset`: each record's answer's length, its own
    /// (`output_tokens`) or its text's by the load's tokenizer; every
    /// record must have one.
    fn answer_lengths(
        &mut self,
        at: &Yaml,
        records: Option<Vec<dataset::Record>>,
        tokenizer: Option<&Option<Tokenizer>>,
        (has_dataset, conversation): (bool, Option<crate::suite::node::Loc>),
    ) -> Option<Vec<u32>> {
        let Some(records) = records else {
            if has_dataset {
                // The dataset itself was refused, and said why.
                return None;
            }
            self.error(
                Diagnostic::new(at.loc, "`output_tokens: dataset` needs a `dataset`").expected(
                    "a dataset whose records keep their answers, or a count: `output_tokens: 128`",
                ),
            );
            return None;
        };
        if let Some(loc) = conversation {
            self.error(
                Diagnostic::new(
                    loc,
                    "`conversation` does not go with `output_tokens: dataset`",
                )
                .expected("a count of output tokens for every turn: `output_tokens: 128`"),
            );
            return None;
        }
        let mut lengths = Vec::with_capacity(records.len());
        for r in &records {
            let n = match (&r.answer, tokenizer) {
                (Some(dataset::Answer::Tokens(n)), _) => Some(*n),
                (Some(dataset::Answer::Unusable(why)), _) => {
                    self.error(
                        Diagnostic::new(at.loc, format!("{} of the dataset: {why}", r.at))
                            .expected("each record's `output_tokens` a count above 0"),
                    );
                    return None;
                }
                (Some(dataset::Answer::Text(text)), Some(Some(t))) => {
                    let n = t.count(text);
                    if n.is_none() {
                        self.error(Diagnostic::new(
                            at.loc,
                            format!("the tokenizer could not split the answer of {}", r.at),
                        ));
                    }
                    n.map(|n| u32::try_from(n.max(1)).unwrap_or(u32::MAX))
                }
                (Some(dataset::Answer::Text(_)), Some(None)) => {
                    self.error(
                        Diagnostic::new(at.loc, format!("the dataset's answers are text ({} first): counting them needs a `tokenizer`", r.at))
                            .expected("the model's `tokenizer.json` beside `dataset`, which counts each answer's tokens"),
                    );
                    return None;
                }
                (Some(_), None) => return None,
                (None, _) => {
                    self.error(
                        Diagnostic::new(at.loc, format!("{} of the dataset keeps no answer", r.at))
                            .expected("every record with `output_tokens`, `completion`, or a ShareGPT `gpt` turn after its human one"),
                    );
                    return None;
                }
            };
            lengths.push(n?);
        }
        Some(lengths)
    }

    /// `conversation: {turns: 3, think: 2s}`: a closed loop of sessions on
    /// a chat API. A dataset's sessions are its records with that many user
    /// turns (MT-Bench's have two), each sent in its order; other prompts
    /// make a fresh user turn per request.
    fn conversation_load(
        &mut self,
        y: &Yaml,
        load: &Fields<'_>,
        api: Api,
        prompt: &mut LoadPrompt,
    ) -> Option<Conversation> {
        let f = self.fields(y, "conversation", &[CONVERSATION])?;
        let turns_at = self.required(&f, "turns", "conversation")?;
        let turns = self.count::<u32>(turns_at, "conversation.turns", 2)?;
        if turns > MAX_TURNS {
            self.error(
                Diagnostic::new(
                    turns_at.loc,
                    format!("conversation.turns is out of range: {turns}"),
                )
                .expected(format!(
                    "2 to {MAX_TURNS}: every turn sends the whole conversation before it"
                )),
            );
            return None;
        }
        let think = match f.get("think") {
            Some(v) => self.duration(v, "conversation.think")?,
            None => std::time::Duration::ZERO,
        };
        let mut refused = false;
        let mut refuse = |d: &mut Self, loc, message: String, expected: &str| {
            d.error(Diagnostic::new(loc, message).expected(expected));
            refused = true;
        };
        if api != Api::OpenAiChat {
            refuse(
                self,
                y.loc,
                format!(
                    "`conversation` needs `api: openai-chat`; this suite uses {}",
                    api.name()
                ),
                "a chat suite: each turn carries the conversation so far as messages",
            );
        }
        let trace = replays(load).then(|| load.key("arrival")).flatten();
        if let Some(k) = load.key("rate").or(trace) {
            refuse(
                self,
                k.loc,
                format!(
                    "`conversation` goes with a closed loop (`concurrency`), not `{}`",
                    k.name
                ),
                "`concurrency: N`: N sessions at once, each turn sent when the answer before it (and the think time) ended",
            );
        }
        if let Some(k) = load.key("shared_prefix") {
            refuse(
                self,
                k.loc,
                "`shared_prefix` does not go with `conversation`".into(),
                "a conversation's shared prefix is its own history: drop `shared_prefix`",
            );
        }
        if let LoadPrompt::Dataset { path, prompts, .. } = prompt {
            let long: Vec<RecordPrompt> = prompts
                .iter()
                .filter(|r| r.turns() >= turns as usize)
                .cloned()
                .collect();
            if long.is_empty() {
                let most = prompts.iter().map(RecordPrompt::turns).max().unwrap_or(0);
                refuse(
                    self,
                    turns_at.loc,
                    format!(
                        "no record of {} has {turns} user turns (the most is {most})",
                        path.display()
                    ),
                    "`turns` no more than the records' own user turns (MT-Bench's have 2)",
                );
            }
            *prompts = Arc::new(long);
        }
        (!refused).then_some(Conversation { turns, think })
    }

    /// `client_threads: auto` or a count.
    fn client_threads(&mut self, y: &Yaml) -> Option<ClientThreads> {
        match &y.node {
            Node::Str(s) if s == "auto" => Some(ClientThreads::Auto),
            Node::Int(n) => match u32::try_from(*n) {
                Ok(n) if (1..=MAX_CLIENT_THREADS).contains(&n) => Some(ClientThreads::Fixed(n)),
                _ => {
                    self.error(
                        Diagnostic::new(y.loc, format!("client_threads is out of range: {n}"))
                            .expected(format!("`auto` or 1 to {MAX_CLIENT_THREADS}")),
                    );
                    None
                }
            },
            _ => {
                self.type_error(y, "client_threads", "`auto` or a number of threads");
                None
            }
        }
    }
}
