//! One request of a gate: built from its workload, sent, and checked for
//! what it generated (the tokens it asked for, the tokenizer's audit).

use super::watch::Watch;
use crate::client::{CallError, CallRequest, Client, Completion, ErrorKind, TokenSource};
use crate::load::workload;
use crate::suite::{Api, Gate, Input, Message};

/// A turn of a conversation load's session: the messages before it, the
/// user's words, and whether another turn follows (its answer's text is
/// then kept, to be sent back with it).
pub(super) struct Turn<'a> {
    pub(super) history: &'a [Message],
    pub(super) user: String,
    pub(super) more: bool,
}

fn request(gate: &Gate, index: u32, salt: u64, turn: Option<&Turn<'_>>) -> CallRequest {
    let input = match turn {
        None => Input::Prompt {
            system: None,
            prompt: workload::prompt(&gate.load, index, salt),
            images: workload::images(&gate.load, index, salt),
        },
        Some(t) => {
            let mut messages = t.history.to_vec();
            messages.push(Message::text("user", &t.user));
            Input::Messages(messages)
        }
    };
    let mut sampling = gate.sampling.clone();
    if let Some(n) = workload::output_tokens(&gate.load, index) {
        sampling.max_tokens = Some(n);
    }
    CallRequest {
        input,
        sampling,
        ignore_eos: gate.load.ignore_eos,
    }
}

/// A request that sent images to a server that counted none of them
/// measured a text request. SGLang's `/generate` serves a text-only model
/// its `image_data` ignored, without a word (a chat request is refused),
/// and SGLang 0.5.23 writes `meta_info.image_tokens` only where images
/// were consumed (`tokenizer_manager.py`): on `/generate` no count is
/// none. Elsewhere a count of 0 is (a server that counts nothing, as a
/// chat API may, is not judged).
fn saw_images(c: Completion, req: &CallRequest, api: Api) -> Result<Completion, CallError> {
    let sent = match &req.input {
        Input::Prompt { images, .. } => images.len(),
        Input::Messages(_) => 0,
    };
    let counted = match c.server_report.image_tokens {
        None if api == Api::SglangGenerate => Some(0),
        n => n,
    };
    match counted {
        Some(0) if sent > 0 => Err(CallError::new(
            ErrorKind::Protocol,
            format!(
                "the server counted 0 image tokens for the {sent} image(s) sent: it ignored them (a model without vision?), and the figure would be a text request's"
            ),
        )),
        _ => Ok(c),
    }
}

/// A gate's request that did not generate what it asked is a failure: no
/// figure can come of it. Nothing at all; fewer tokens than `ignore_eos`
/// asked for (`short`: per-token figures of a server that ignores it would
/// be another length's); more than `max_tokens` by the server's count.
/// Without a server count a chunk may carry several tokens, so only a
/// stream the server itself ended (`stop`) with fewer chunks is short.
fn checked(
    result: Result<Completion, CallError>,
    req: &CallRequest,
) -> Result<Completion, CallError> {
    let c = result?;
    if c.completion_tokens == 0 {
        return Err(CallError::new(
            ErrorKind::Protocol,
            "the stream ended without generating a token",
        ));
    }
    let got = c.completion_tokens;
    let counted = c.token_source != TokenSource::ChunkCount;
    let finish = c.finish_reason.as_deref().unwrap_or("none");
    let max = req.sampling.max_tokens.map(u64::from);
    let exact = req.ignore_eos && req.sampling.stop.as_ref().is_none_or(Vec::is_empty);
    if let Some(asked) = max.filter(|_| exact)
        && got < asked
        && (counted || finish == "stop")
    {
        return Err(CallError::new(
            ErrorKind::Short { asked, got },
            format!(
                "finish_reason `{finish}`, {} by {}",
                if counted { "counted" } else { "chunks counted" },
                c.token_source.name()
            ),
        ));
    }
    if let Some(max) = max
        && counted
        && got > max
    {
        return Err(CallError::new(
            ErrorKind::Protocol,
            format!(
                "{} = {got} for max_tokens {max}: more tokens than the request may generate",
                c.token_source.name()
            ),
        ));
    }
    Ok(c)
}

/// Sends request `first + i` of a window salted `salt` (a session's turn
/// when `turn` is given): whole when its watch keeps it or another turn
/// needs its answer.
pub(super) async fn send(
    client: &Client,
    gate: &Gate,
    (window_first, salt): (u32, u64),
    i: u32,
    watch: &Watch,
    turn: Option<&Turn<'_>>,
) -> Result<Completion, CallError> {
    let index = window_first + i;
    let req = request(gate, index, salt, turn);
    // The measured window starts after the warm-up's requests.
    let measured = window_first == gate.load.warmup && watch.wants(i);
    let audited = gate
        .load
        .tokenizer
        .as_ref()
        .filter(|_| audited(&gate.load, salt, index));
    let result = if measured || audited.is_some() || turn.is_some_and(|t| t.more) {
        client.sample(&req).await
    } else {
        client.measure(&req).await
    };
    let mut result = checked(result, &req).and_then(|c| saw_images(c, &req, client.api()));
    if let (Some(t), Ok(c)) = (turn, &result)
        && t.more
        && c.content.trim().is_empty()
    {
        result = Err(CallError::new(
            ErrorKind::Protocol,
            format!(
                "the answer to a conversation's turn is empty ({} tokens{}): nothing to carry into the next turn, which is not sent",
                c.completion_tokens,
                if c.reasoning.is_empty() {
                    ""
                } else {
                    ", all of them reasoning"
                }
            ),
        ));
    }
    if let (Some(tokenizer), Ok(c)) = (audited, &result)
        && let Err(e) = audit(tokenizer, c, &req).await
    {
        result = Err(e);
    }
    if measured && let Ok(c) = &result {
        watch.keep(index, c);
    }
    result
}

/// About one request in this many of a gate whose load names a tokenizer
/// keeps its text, which the tokenizer then splits: the server's count is
/// checked against it.
const AUDIT_EVERY: u64 = 16;

/// Whether request `index` of a gate salted `salt` is audited: drawn by a
/// keyed hash whose key is this process's and never leaves it, so a server
/// cannot tell which of its answers will be checked (it could when they
/// were requests 0, 16, 32, …). One in `AUDIT_EVERY`, and one of the first
/// `AUDIT_EVERY` requests (warm-up included) at least, so a short gate has
/// one too.
fn audited(load: &crate::suite::Load, salt: u64, index: u32) -> bool {
    static KEY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let key = *KEY.get_or_init(crate::random::unpredictable);
    let draw =
        |what: u64| crate::random::SplitMix::new(key ^ salt.rotate_left(32) ^ what).next_u64();
    let total = u64::from(load.warmup) + u64::from(load.requests.unwrap_or(u32::MAX));
    let surely = draw(u64::MAX) % total.clamp(1, AUDIT_EVERY);
    u64::from(index) == surely || draw(u64::from(index)).is_multiple_of(AUDIT_EVERY)
}

/// Tokens an answer may hold that print nothing, for the tokenizer's
/// check: a chat format's own markers (gpt-oss's harmony has about ten).
const AUDIT_UNPRINTED: u64 = 16;

/// Characters of `text` that end a repetition of the one to four
/// characters before them (the second `\n` of `\n\n`, the last `b` of
/// `abab`, the last three of `ababab`): where a model repeats itself, it may have sampled each
/// repetition as a token of its own, which the tokenizer's split of the
/// text merges (`\n` × 200 splits into a few tokens; a model held past its
/// end by `ignore_eos` often repeats). English prose has few of them (a
/// double letter).
fn repeats(text: &str) -> u64 {
    const PERIOD: usize = 4;
    let chars: Vec<char> = text.chars().collect();
    let n = (0..chars.len())
        .filter(|&i| {
            (1..=PERIOD).any(|p| i + 1 >= 2 * p && (0..p).all(|k| chars[i - k] == chars[i - k - p]))
        })
        .count();
    n as u64
}

/// `Err` when the server counts more completion tokens than the suite's
/// tokenizer finds in the text that came, beyond what a sampled token
/// sequence can differ from the tokenizer's own split of its text (a
/// quarter, and a token for each repeated character), the stop sequences'
/// tokens (one per byte) and the end-of-sequence and think markers that
/// print nothing. `ignore_eos` requests are audited too: they ask
/// `skip_special_tokens: false`, so every token SGLang or vLLM samples past
/// the end prints (llama.cpp's are not: it ignores the field). The split
/// runs off the client thread's loop.
async fn audit(
    tokenizer: &crate::suite::Tokenizer,
    c: &Completion,
    req: &CallRequest,
) -> Result<(), CallError> {
    // llama.cpp ignores `skip_special_tokens`: a control token it samples
    // past the end prints nothing, so its `ignore_eos` text is no split's
    // measure.
    if c.token_source == TokenSource::ChunkCount
        || (req.ignore_eos && c.token_source == TokenSource::TokensPredicted)
    {
        return Ok(());
    }
    let t = tokenizer.clone();
    let (content, reasoning) = (c.content.clone(), c.reasoning.clone());
    let split = tokio::task::spawn_blocking(move || {
        let split = t.count(&content)? + t.count(&reasoning)?;
        Some((split as u64, repeats(&content) + repeats(&reasoning)))
    })
    .await
    .ok()
    .flatten();
    let Some((split, repeated)) = split else {
        return Ok(());
    };
    let stop = req.sampling.stop_bytes();
    let bound = split + split / 4 + repeated + stop + AUDIT_UNPRINTED;
    if c.completion_tokens > bound {
        return Err(CallError::new(
            ErrorKind::Protocol,
            format!(
                "the server counts {} completion tokens, but the suite's tokenizer ({}) splits the text that came into {split}: at most {bound} can have been sent (a quarter more for a sampled split, {repeated} for repeated characters, {} unprinted) — a count the text does not bear out",
                c.completion_tokens,
                tokenizer.path().display(),
                stop + AUDIT_UNPRINTED,
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(warmup: u32, requests: u32) -> crate::suite::Load {
        let pace = crate::suite::Pace::Closed { concurrency: 1 };
        crate::suite::Load {
            warmup,
            requests: Some(requests),
            ..crate::suite::Load::new(pace, crate::suite::LoadPrompt::Tokens(16), 16)
        }
    }

    /// A repetition of a period of up to four characters counts each
    /// character that ends a second period; prose counts its double
    /// letters.
    #[test]
    fn repeats_count_what_a_model_may_have_sampled_apart() {
        assert_eq!(repeats(""), 0);
        assert_eq!(repeats("\n"), 0);
        assert_eq!(repeats(&"\n".repeat(200)), 199);
        assert_eq!(repeats("abab"), 1);
        assert_eq!(repeats("ababab"), 3);
        assert_eq!(
            repeats(&"<|x|>".repeat(3)),
            0,
            "a period of five is not counted"
        );
        assert_eq!(repeats("!!!!"), 3);
        assert_eq!(repeats("a woman and a man"), 0);
        assert_eq!(repeats("all good"), 2);
        assert_eq!(repeats("é\u{1F642}é\u{1F642}"), 1, "characters, not bytes");
    }

    /// Every gate has an audited request among its first 16; about one in
    /// 16 in all; and which ones changes with the gate's salt.
    #[test]
    fn the_audited_requests_are_drawn() {
        for salt in 0..200 {
            for (w, r) in [(0, 1), (1, 2), (0, 5), (4, 64)] {
                let first = (w + r).min(16);
                assert!(
                    (0..first).any(|i| audited(&load(w, r), salt, i)),
                    "salt {salt}, {w}+{r} requests"
                );
            }
        }
        let many = load(0, 16_000);
        let n = (0..16_000).filter(|&i| audited(&many, 7, i)).count();
        assert!((700..1300).contains(&n), "{n} of 16000 audited");
        let set = |salt| {
            (0..64)
                .filter(|&i| audited(&many, salt, i))
                .collect::<Vec<_>>()
        };
        assert!((1..20).any(|salt| set(salt) != set(0)));
    }
}
