//! A tokenizer a suite names (`tokenizer: path/to/tokenizer.json`, Hugging
//! Face format), loaded when the suite is, so a bad file is an error at its
//! line; load shapes use it to cut synthetic prompts to exact token counts.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A tokenizer from a local `tokenizer.json` (Hugging Face format), used to
/// cut synthetic prompts to exact token counts.
#[derive(Clone)]
pub struct Tokenizer {
    path: PathBuf,
    inner: Arc<tokenizers::Tokenizer>,
}

impl Tokenizer {
    /// Loads `tokenizer.json`.
    pub fn load(path: &Path) -> Result<Self, String> {
        let inner = tokenizers::Tokenizer::from_file(path).map_err(|e| e.to_string())?;
        Ok(Self {
            path: path.to_path_buf(),
            inner: Arc::new(inner),
        })
    }

    /// The file it came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tokens of `text` (no special tokens).
    pub fn count(&self, text: &str) -> Option<usize> {
        self.inner.encode(text, false).ok().map(|e| e.len())
    }

    /// The longest prefix of `text` of at most `tokens` tokens.
    pub fn cut(&self, text: &str, tokens: usize) -> Option<String> {
        let encoding = self.inner.encode(text, false).ok()?;
        let offsets = encoding.get_offsets();
        if offsets.len() <= tokens {
            return Some(text.to_owned());
        }
        let end = offsets.get(tokens.checked_sub(1)?)?.1;
        Some(text.get(..end)?.to_owned())
    }
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tokenizer({})", self.path.display())
    }
}

impl PartialEq for Tokenizer {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_counts_and_cuts() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokenizers/words.json");
        let t = Tokenizer::load(&path).unwrap();
        assert_eq!(t.path(), path);
        let cut = t.cut("one two three four", 2).unwrap();
        assert_eq!(t.count(&cut), Some(2));
        assert!(Tokenizer::load(Path::new("no/such/tokenizer.json")).is_err());
    }
}
