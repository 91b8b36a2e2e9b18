//! A fast path for the chunk every OpenAI-compatible stream sends per token:
//! one pass over the bytes that reads only the fields the client needs and
//! skips the rest (strings by `memchr`), instead of a general JSON parse.
//! Anything outside the common shape — an escape in a needed string, an
//! error object, a malformed document — returns `None`, and the caller
//! falls back to `serde_json`, which stays the reference (a property test
//! holds the two equal wherever the fast path answers).

use std::borrow::Cow;

use super::api::{Delta, OpenAiChoice, OpenAiChunk, Usage};

/// Deepest nesting skipped before giving up to the general parser.
const MAX_DEPTH: usize = 32;
/// Most keys in one object before giving up to the general parser.
const MAX_KEYS: usize = 24;

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\n' | b'\r' | b'\t') {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string's raw bytes and whether it holds an escape; checks UTF-8.
    fn string(&mut self) -> Option<(&'a [u8], bool)> {
        self.eat(b'"')?;
        let start = self.i;
        let mut escaped = false;
        loop {
            let at = self.i + memchr::memchr2(b'"', b'\\', &self.b[self.i..])?;
            if self.b[at] == b'"' {
                let raw = &self.b[start..at];
                std::str::from_utf8(raw).ok()?;
                if raw.iter().any(|&c| c < 0x20) {
                    return None;
                }
                self.i = at + 1;
                return Some((raw, escaped));
            }
            escaped = true;
            self.i = at + 2;
            if self.i > self.b.len() {
                return None;
            }
        }
    }

    /// A string needed as text: escapes go to the general parser.
    #[expect(
        clippy::option_option,
        reason = "outer None: leave to serde; inner None: JSON null"
    )]
    fn text(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.peek()? == b'n' {
            return self.literal(b"null").map(|()| None);
        }
        let (raw, escaped) = self.string()?;
        if escaped {
            return None;
        }
        // Checked by `string`.
        std::str::from_utf8(raw)
            .ok()
            .map(|s| Some(Cow::Borrowed(s)))
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.ws();
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Some(())
        } else {
            None
        }
    }

    fn number(&mut self) -> Option<&'a [u8]> {
        self.ws();
        let start = self.i;
        while self.i < self.b.len()
            && matches!(
                self.b[self.i],
                b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'
            )
        {
            self.i += 1;
        }
        let n = &self.b[start..self.i];
        // The grammar is checked by parsing: `1.2.3` is not a number.
        std::str::from_utf8(n).ok()?.parse::<f64>().ok()?;
        Some(n)
    }

    #[expect(
        clippy::option_option,
        reason = "outer None: leave to serde; inner None: JSON null"
    )]
    fn count(&mut self) -> Option<Option<u64>> {
        if self.peek()? == b'n' {
            return self.literal(b"null").map(|()| None);
        }
        let n = self.number()?;
        std::str::from_utf8(n).ok()?.parse::<u64>().ok().map(Some)
    }

    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' => self.object(|c, _| c.skip(depth + 1)),
            b'[' => self.array(|c| c.skip(depth + 1)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(|_| ()),
        }
    }

    /// Walks an object, handing each value to `field` with its key (keys
    /// with escapes, and a key given twice, go to the general parser, which
    /// rejects duplicate fields).
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        // Keys seen so far, on the stack: a chunk's objects have a handful.
        let mut seen: [&'a [u8]; MAX_KEYS] = [&[]; MAX_KEYS];
        let mut n = 0;
        loop {
            let (key, escaped) = self.string()?;
            if escaped || n == MAX_KEYS || seen[..n].contains(&key) {
                return None;
            }
            seen[n] = key;
            n += 1;
            self.eat(b':')?;
            field(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            item(self)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}

#[expect(
    clippy::option_option,
    reason = "outer None: leave to serde; inner None: JSON null"
)]
fn null_or<'a, T>(
    c: &mut Cursor<'a>,
    read: impl FnOnce(&mut Cursor<'a>) -> Option<T>,
) -> Option<Option<T>> {
    if c.peek()? == b'n' {
        return c.literal(b"null").map(|()| None);
    }
    read(c).map(Some)
}

fn delta<'a>(c: &mut Cursor<'a>) -> Option<Delta<'a>> {
    let mut d = Delta {
        content: None,
        reasoning_content: None,
        reasoning: None,
    };
    c.object(|c, key| {
        match key {
            b"content" => d.content = c.text()?,
            b"reasoning_content" => d.reasoning_content = c.text()?,
            b"reasoning" => d.reasoning = c.text()?,
            _ => c.skip(2)?,
        }
        Some(())
    })?;
    Some(d)
}

fn choice<'a>(c: &mut Cursor<'a>) -> Option<OpenAiChoice<'a>> {
    let mut ch = OpenAiChoice {
        delta: None,
        text: None,
        finish_reason: None,
    };
    c.object(|c, key| {
        match key {
            b"delta" => ch.delta = null_or(c, delta)?,
            b"text" => ch.text = c.text()?,
            b"finish_reason" => ch.finish_reason = c.text()?,
            _ => c.skip(1)?,
        }
        Some(())
    })?;
    Some(ch)
}

fn usage(c: &mut Cursor<'_>) -> Option<Usage> {
    let mut u = Usage::default();
    c.object(|c, key| {
        match key {
            b"prompt_tokens" => u.prompt_tokens = c.count()?,
            b"completion_tokens" => u.completion_tokens = c.count()?,
            _ => c.skip(1)?,
        }
        Some(())
    })?;
    Some(u)
}

/// The chunk, when it has the common shape; `None` sends it to `serde_json`.
pub fn openai_chunk(data: &[u8]) -> Option<OpenAiChunk<'_>> {
    let mut c = Cursor { b: data, i: 0 };
    let mut chunk = OpenAiChunk {
        choices: Vec::new(),
        usage: None,
        error: None,
        object: None,
        message: None,
    };
    c.object(|c, key| {
        match key {
            b"choices" => {
                if c.peek()? == b'n' {
                    return c.literal(b"null");
                }
                c.array(|c| {
                    chunk.choices.push(choice(c)?);
                    Some(())
                })?;
            }
            b"usage" => chunk.usage = null_or(c, usage)?,
            // Error shapes are rare: the general parser reads them.
            b"error" | b"message" => return None,
            b"object" => {
                let object = c.text()?;
                if object.as_deref() == Some("error") {
                    return None;
                }
                chunk.object = object;
            }
            _ => c.skip(1)?,
        }
        Some(())
    })?;
    c.ws();
    (c.i == data.len()).then_some(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn serde(data: &str) -> Option<OpenAiChunk<'_>> {
        serde_json::from_str(data).ok()
    }

    #[test]
    fn reads_the_common_chunks() {
        let sglang = r#"{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":null,"content":" tok","reasoning_content":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}"#;
        let fast = openai_chunk(sglang.as_bytes()).unwrap();
        assert_eq!(Some(&fast), serde(sglang).as_ref());
        assert_eq!(
            fast.choices[0].delta.as_ref().unwrap().content.as_deref(),
            Some(" tok")
        );
        assert_eq!(fast.usage.unwrap().completion_tokens, Some(3));
        let usage_only = r#"{"id":"x","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":30,"total_tokens":37}}"#;
        assert_eq!(openai_chunk(usage_only.as_bytes()), serde(usage_only));
        let completion = r#"{"choices":[{"index":0,"text":"hi","finish_reason":"length"}]}"#;
        assert_eq!(openai_chunk(completion.as_bytes()), serde(completion));
    }

    #[test]
    fn leaves_the_unusual_to_serde() {
        for data in [
            r#"{"choices":[{"delta":{"content":"a\nb"}}]}"#,
            r#"{"error":{"message":"boom"}}"#,
            r#"{"object":"error","message":"boom"}"#,
            r#"{"choices":[{"delta":{"content":"x"}}]"#,
            r#"{"choices":[{"delta":{"content":"x"}}]} trailing"#,
            r#"{"choices":[{"delta":{"content":"x"}},]}"#,
            r#"{"usage":{"completion_tokens":1.5}}"#,
            r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
        ] {
            assert_eq!(openai_chunk(data.as_bytes()), None, "{data}");
        }
    }

    fn json_string() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z ]{0,8}",
            "[a-zé中 \"\\\\\n\t]{0,8}",
            Just(String::new()),
        ]
    }

    proptest! {
        /// Wherever the fast path answers, it answers what serde_json does.
        #[test]
        fn agrees_with_serde(
            content in proptest::option::of(json_string()),
            reasoning in proptest::option::of(json_string()),
            finish in proptest::option::of(prop_oneof![Just("stop"), Just("length")]),
            usage in proptest::option::of((0u64..1000, 0u64..1000)),
            extra in "[a-z]{1,6}",
            extra_value in prop_oneof![Just("1".to_owned()), Just("null".to_owned()), Just("[1, {\"a\": [true]}]".to_owned()), json_string().prop_map(|s| serde_json::to_string(&s).unwrap())],
            usage_first in any::<bool>(),
        ) {
            let mut delta = serde_json::Map::new();
            delta.insert("content".into(), content.map_or(serde_json::Value::Null, serde_json::Value::String));
            if let Some(r) = reasoning {
                delta.insert("reasoning_content".into(), serde_json::Value::String(r));
            }
            let choice = serde_json::json!({"index": 0, "delta": delta, "finish_reason": finish});
            let choices = format!("\"choices\": [{choice}]");
            let usage = usage.map(|(p, c)| format!("\"usage\": {{\"prompt_tokens\": {p}, \"completion_tokens\": {c}}}"));
            let extra = format!("\"x{extra}\": {extra_value}");
            let mut fields = vec![choices, extra];
            if let Some(u) = usage {
                if usage_first { fields.insert(0, u) } else { fields.push(u) }
            }
            let text = format!("{{{}}}", fields.join(", "));
            if let Some(fast) = openai_chunk(text.as_bytes()) {
                prop_assert_eq!(Some(fast), serde(&text));
            }
        }
    }
}
