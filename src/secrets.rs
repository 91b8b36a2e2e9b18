//! The secret scrubber: every value known to be secret is replaced with
//! `<redacted>` at every sink servegate writes to (its output, failure
//! messages, the run record and its reports, snapshots, server logs).
//!
//! Secrets are registered as they become known — the API key, values of
//! the process's secret-looking environment variables (`SGLANG_API_KEY`,
//! `HF_TOKEN`, …: a launch env entry `MY_CREDS: ${SGLANG_API_KEY}` carries
//! one under an innocent name), variables a suite names in
//! `target.secrets`, secret-looking launch options, a password in a
//! `base_url`, secret-looking fields a server reports about itself — and
//! are process-wide, because the sinks are.

use std::borrow::Cow;
use std::sync::RwLock;

/// What a secret is replaced with.
pub(crate) const REDACTED: &str = "<redacted>";

/// Shorter values are not scrubbed: they would blank ordinary words.
const MIN_LEN: usize = 6;

/// What a server says of itself is trusted less: a value under a
/// secret-looking key must look like a key (this long) before every
/// occurrence of it is scrubbed, or a server could blank words of the
/// report (`"admin_api_key": "outcome"`). The field itself is always hidden.
const MIN_REPORTED_LEN: usize = 12;

/// A registered secret, or a form of one a server may echo it in.
struct Known {
    text: String,
    /// A form of another ([`encodings`]): replaced where it is whole, its
    /// cut edges not looked for (they would cost as much again per form).
    encoded: bool,
}

static KNOWN: RwLock<Vec<Known>> = RwLock::new(Vec::new());

/// Whether a name (an environment variable, an option, a JSON key) says
/// its value is secret: one of its words (split at `_`, `-`, `.` and
/// case changes) is KEY, TOKEN, SECRET, PASSWORD, … — so `HF_TOKEN`,
/// `--api-key` and `apiKey` are, and `max_tokens` or `tokenizer_path` are not.
pub(crate) fn is_secret_name(name: &str) -> bool {
    const WORDS: [&str; 12] = [
        "KEY",
        "APIKEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
        "AUTHORIZATION",
        "BEARER",
    ];
    let mut words = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        let boundary = !c.is_ascii_alphanumeric() || (c.is_ascii_uppercase() && prev_lower);
        if boundary && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_uppercase());
        }
        prev_lower = c.is_ascii_lowercase();
    }
    words.push(word);
    words.iter().any(|w| WORDS.contains(&w.as_str()))
}

/// Registers a secret value, and the forms a server may echo it in
/// ([`encodings`]); short or empty values are ignored.
pub fn add(value: &str) {
    let value = value.trim();
    if value.chars().count() < MIN_LEN {
        return;
    }
    if let Ok(mut known) = KNOWN.write()
        && !known.iter().any(|k| !k.encoded && k.text == value)
    {
        known.retain(|k| k.text != value);
        known.push(Known {
            text: value.to_owned(),
            encoded: false,
        });
        for form in encodings(value) {
            if form.chars().count() >= MIN_LEN && !known.iter().any(|k| k.text == form) {
                known.push(Known {
                    text: form,
                    encoded: true,
                });
            }
        }
        // Longest first, so a secret containing another is replaced whole.
        known.sort_by_key(|k| std::cmp::Reverse(k.text.len()));
    }
}

/// The forms a secret may be echoed in besides its own: reversed, in hex
/// (either case), percent-encoded, and in base64 (standard and URL-safe)
/// at each of the three alignments it can have inside a longer encoded
/// text (`Bearer <key>`, `user:<key>` in a Basic header): of each, the
/// characters that only the secret's own bytes decide.
fn encodings(value: &str) -> Vec<String> {
    use base64::Engine as _;
    use std::fmt::Write as _;
    let bytes = value.as_bytes();
    let mut forms = vec![value.chars().rev().collect::<String>()];
    let lower = bytes.iter().fold(String::new(), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    });
    forms.push(lower.to_ascii_uppercase());
    forms.push(lower);
    let percent = bytes.iter().fold(String::new(), |mut out, &b| {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
        out
    });
    if percent != value {
        forms.push(percent);
    }
    for engine in [
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        for offset in 0..3 {
            let mut shifted = vec![0u8; offset];
            shifted.extend_from_slice(bytes);
            let encoded = engine.encode(&shifted);
            // Character i holds bits 6i..6i+6 of the bytes: the secret's
            // alone from the first past the offset's bytes to the last
            // that ends within the secret.
            let first = (8 * offset).div_ceil(6);
            let last = (8 * (offset + bytes.len())).saturating_sub(6) / 6;
            if let Some(core) = encoded.get(first..=last) {
                forms.push(core.to_owned());
            }
        }
    }
    forms
}

/// Registers the values of this process's environment variables whose
/// names look secret.
pub fn add_from_environment() {
    for (name, value) in std::env::vars_os() {
        if let (Some(name), Some(value)) = (name.to_str(), value.to_str())
            && is_secret_name(name)
        {
            add(value);
        }
    }
}

/// `text` with every registered secret replaced by `REDACTED`, and any
/// part of one that a cut left at an edge of it (the start of the text; its
/// end, or the `…` or `"…` of an excerpt): shortened text must be cut
/// after it is scrubbed ([`cut`]), and this holds where it was not.
pub fn scrub(text: &str) -> Cow<'_, str> {
    let Ok(known) = KNOWN.read() else {
        return Cow::Borrowed(text);
    };
    let mut out = Cow::Borrowed(text);
    for secret in known.iter() {
        if out.contains(secret.text.as_str()) {
            out = Cow::Owned(out.replace(secret.text.as_str(), REDACTED));
        }
    }
    for secret in known.iter().filter(|k| !k.encoded).map(|k| k.text.as_str()) {
        // Each pass hides one edge: a text cut at both ends, or at several
        // ellipses, has more (bounded: each pass shortens what is left).
        for _ in 0..16 {
            let Some(clean) = scrub_cut(&out, secret) else {
                break;
            };
            out = Cow::Owned(clean);
        }
    }
    out
}

/// `text` with a part of `secret` of at least [`MIN_LEN`] characters
/// replaced where a cut leaves one: its head at the end of the text or
/// before an ellipsis (`…`, `"…`), its tail at the start; `None` when
/// there is none. Only those edges are looked at, so its cost is the
/// ellipses' count times the secret's length, not the text's.
fn scrub_cut(text: &str, secret: &str) -> Option<String> {
    let heads: Vec<&str> = secret
        .char_indices()
        .map(|(i, _)| &secret[..i])
        .skip(MIN_LEN)
        .collect();
    let edges = text
        .match_indices('…')
        .map(|(at, _)| at)
        .chain(std::iter::once(text.len()));
    for edge in edges {
        let before = &text[..edge];
        let before = before.strip_suffix('"').unwrap_or(before);
        if let Some(head) = heads.iter().rev().find(|h| before.ends_with(**h)) {
            let at = before.len() - head.len();
            return Some(format!(
                "{}{REDACTED}{}",
                &text[..at],
                &text[before.len()..]
            ));
        }
    }
    // The cheap test first: a tail's length is counted only where the text
    // starts with it.
    secret
        .char_indices()
        .skip(1)
        .map(|(i, _)| &secret[i..])
        .find(|tail| text.starts_with(tail) && tail.chars().count() >= MIN_LEN)
        .map(|tail| format!("{REDACTED}{}", &text[tail.len()..]))
}

/// At most `max` characters of `text`, scrubbed before it is cut (a cut
/// never shows part of a secret), and how many characters there were in
/// all when it was cut.
pub fn cut(text: &str, max: usize) -> (String, Option<usize>) {
    cut_scrubbed(&scrub(text), max)
}

/// [`cut`] of a text already scrubbed: its first `max` characters, and
/// its length in characters when it was longer.
pub(crate) fn cut_scrubbed(clean: &str, max: usize) -> (String, Option<usize>) {
    let count = clean.chars().count();
    if count <= max {
        (clean.to_owned(), None)
    } else {
        (clean.chars().take(max).collect(), Some(count))
    }
}

/// Scrubs every string of a JSON document in place, keys included.
pub fn scrub_json(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => {
            if let Cow::Owned(clean) = scrub(s) {
                *s = clean;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(scrub_json),
        serde_json::Value::Object(map) => {
            let entries = std::mem::take(map);
            for (k, mut v) in entries {
                scrub_json(&mut v);
                map.insert(scrub(&k).into_owned(), v);
            }
        }
        _ => {}
    }
}

/// A URL with the password of its userinfo registered and hidden:
/// `http://user:pw@host` → `http://user:<redacted>@host`.
pub fn url(url: &str) -> String {
    hide_userinfo(url, true)
}

/// A URL a server sent (a redirect's `Location`) with its userinfo hidden
/// but not registered: a server must not choose what the scrubber blanks
/// (`http://u:outcome@h/` would blank every "outcome"), nor grow its list.
pub(crate) fn url_from_server(url: &str) -> String {
    hide_userinfo(url, false)
}

fn hide_userinfo(url: &str, register: bool) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some((userinfo, host)) = rest[..authority_end].rsplit_once('@') else {
        return url.to_owned();
    };
    let shown = if let Some((user, password)) = userinfo.split_once(':') {
        if register {
            add(password);
        }
        format!("{user}:{REDACTED}")
    } else {
        if register {
            add(userinfo);
        }
        REDACTED.to_owned()
    };
    format!("{scheme}://{shown}@{host}{}", &rest[authority_end..])
}

/// A JSON document with the values of secret-looking keys replaced (and
/// registered): what a server reports about itself may hold its API key.
pub fn json(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let v = if is_secret_name(k) && !v.is_null() && !v.is_boolean() {
                    let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    if text.trim().chars().count() >= MIN_REPORTED_LEN {
                        add(&text);
                    }
                    serde_json::Value::String(REDACTED.to_owned())
                } else {
                    json(v)
                };
                (k.clone(), v)
            })
            .collect(),
        serde_json::Value::Array(items) => items.iter().map(json).collect(),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_never_shows_part_of_a_secret() {
        let key = "sk-cut-0123456789abcdefghijklmnopqrstuv";
        add(key);
        let body = format!("{} {key} and more", "x".repeat(480));
        let (shown, all) = cut(&body, 495);
        assert_eq!(all, Some(500), "{shown}");
        assert!(shown.ends_with(" <redacted> and"), "{shown}");
        // Cut before it was scrubbed: the part at an edge still goes.
        let early: String = body.chars().take(500).collect();
        assert_eq!(scrub(&early), format!("{} <redacted>", "x".repeat(480)));
        let quoted = format!("{early:?}… (520 chars in all)");
        assert!(!scrub(&quoted).contains("sk-cut-01"), "{}", scrub(&quoted));
        assert!(scrub(&body[490..]).starts_with("<redacted> and more"));
        // Both edges at once, and two ellipses.
        let both = format!("{}…{}", &key[10..], &key[..20]);
        assert_eq!(scrub(&both), "<redacted>…<redacted>");
        // Fewer characters than a secret is scrubbed by stay.
        assert_eq!(scrub("it ends in sk-cu"), "it ends in sk-cu");
        assert_eq!(scrub("mid sk-cut-0123 text"), "mid sk-cut-0123 text");
    }

    /// A key a server echoes encoded is scrubbed as the key is: reversed,
    /// in hex, percent-encoded, and in base64 alone or inside a longer
    /// encoded text, at every alignment.
    #[test]
    fn encoded_echoes_are_scrubbed() {
        use base64::Engine as _;
        let key = "sk-enc/0123+456789&abc def";
        add(key);
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let b64url = |s: &str| base64::engine::general_purpose::URL_SAFE.encode(s);
        let hex = key.bytes().fold(String::new(), |mut hex, b| {
            use std::fmt::Write as _;
            let _ = write!(hex, "{b:02x}");
            hex
        });
        // Each form, and how many of its characters no secret decides (the
        // encoded prefix, a character at an edge that a prefix shares).
        for (echoed, own) in [
            (key.chars().rev().collect::<String>(), 0),
            (hex.clone(), 0),
            (hex.to_ascii_uppercase(), 0),
            ("sk-enc%2F0123%2B456789%26abc%20def".to_owned(), 0),
            (b64(key), 2),
            (b64(&format!("Bearer {key}")), 12),
            (b64(&format!("x{key}")), 4),
            (b64(&format!("xy{key}")), 6),
            (b64url(&format!("user:{key}")), 10),
        ] {
            let said = format!("the server said {echoed} back");
            let shown = scrub(&said);
            let left = shown
                .strip_prefix("the server said ")
                .and_then(|s| s.strip_suffix(" back"))
                .unwrap_or_else(|| panic!("{shown}"));
            assert_eq!(left.matches(REDACTED).count(), 1, "`{echoed}`: {shown}");
            let rest = left.replace(REDACTED, "");
            assert!(
                rest.len() <= own,
                "`{echoed}` left {} characters of it shown: {shown}",
                rest.len()
            );
        }
    }

    #[test]
    fn secret_names_are_whole_words() {
        for name in [
            "SGLANG_API_KEY",
            "HF_TOKEN",
            "api-key",
            "--hf-token",
            "apiKey",
            "AWS_SECRET_ACCESS_KEY",
            "db.password",
            "MY_CREDS",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "max_tokens",
            "tokenizer_path",
            "--max-total-tokens",
            "MONKEY",
            "keyfile_path",
            "NCCL_PROTO",
            "passes",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn registered_values_are_scrubbed_longest_first() {
        add("sk-canary-123");
        add("sk-canary-123-and-more");
        add("short");
        assert_eq!(
            scrub("a sk-canary-123-and-more b sk-canary-123 c short"),
            "a <redacted> b <redacted> c short"
        );
        assert!(matches!(scrub("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn short_reported_values_hide_their_field_but_are_not_scrubbed_everywhere() {
        let shown = json(&serde_json::json!({"admin_api_key": "outcome"}));
        assert_eq!(shown["admin_api_key"], REDACTED);
        assert_eq!(scrub("the outcome"), "the outcome");
    }

    #[test]
    fn userinfo_and_secret_fields_are_hidden() {
        assert_eq!(
            url("http://bob:pw-canary-456@gpu-7:30000/v1"),
            "http://bob:<redacted>@gpu-7:30000/v1"
        );
        assert_eq!(scrub("pw-canary-456"), REDACTED);
        assert_eq!(url("http://gpu-7:30000"), "http://gpu-7:30000");
        let info = serde_json::json!({
            "tp_size": 8,
            "api_key": "key-canary-789",
            "nested": [{"hf_token": "hf-canary-000", "enable_x": true}],
            "tokenizer_path": "/models/k2"
        });
        let shown = json(&info);
        assert_eq!(shown["api_key"], REDACTED);
        assert_eq!(shown["nested"][0]["hf_token"], REDACTED);
        assert_eq!(shown["tp_size"], 8);
        assert_eq!(shown["nested"][0]["enable_x"], true);
        assert_eq!(scrub("echo key-canary-789"), "echo <redacted>");
    }
}
