//! A tokenizer a suite names (`tokenizer: path/to/tokenizer.json`, Hugging
//! Face format), loaded when the suite is, so a bad file is an error at its
//! line; load shapes use it to cut synthetic prompts to exact token counts.
//!
//! The `tokenizers` crate (46 of the packages in the build) is behind the
//! default-on cargo feature `tokenizers`. A build without it reads every
//! suite the same way, and a suite that names a tokenizer is an error at
//! that line which says so.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(feature = "tokenizers")]
type Inner = tokenizers::Tokenizer;
/// A build without the feature has no tokenizer to hold: a `Tokenizer` is
/// never made there.
#[cfg(not(feature = "tokenizers"))]
type Inner = std::convert::Infallible;

/// A tokenizer from a local `tokenizer.json` (Hugging Face format), used to
/// cut synthetic prompts to exact token counts.
#[derive(Clone)]
pub struct Tokenizer {
    path: PathBuf,
    inner: Arc<Inner>,
}

/// Why a suite's `tokenizer:` cannot be used, in a suite diagnostic's words.
#[derive(Debug)]
pub struct LoadError {
    /// What is wrong.
    pub message: String,
    /// What would have been accepted.
    pub expected: &'static str,
}

impl Tokenizer {
    /// Loads `tokenizer.json`.
    #[cfg(feature = "tokenizers")]
    pub fn load(path: &Path) -> Result<Self, LoadError> {
        let inner = tokenizers::Tokenizer::from_file(path).map_err(|e| LoadError {
            message: format!("invalid tokenizer {}: {e}", path.display()),
            expected: "a Hugging Face `tokenizer.json`",
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            inner: Arc::new(inner),
        })
    }

    /// Loads `tokenizer.json`: not in a build without the `tokenizers` feature.
    #[cfg(not(feature = "tokenizers"))]
    pub fn load(path: &Path) -> Result<Self, LoadError> {
        Err(LoadError {
            message: format!(
                "tokenizer {}: this servegate was built without its `tokenizers` feature",
                path.display()
            ),
            expected: "a servegate built with its default features (the wheel, the release \
                       binaries, `cargo install servegate`), or no `tokenizer:` (synthetic \
                       prompts are then about one token per word)",
        })
    }

    /// The file it came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tokens of `text` (no special tokens).
    pub fn count(&self, text: &str) -> Option<usize> {
        self.offsets(text).map(|o| o.len())
    }

    /// The longest prefix of `text` of at most `tokens` tokens.
    pub fn cut(&self, text: &str, tokens: usize) -> Option<String> {
        let offsets = self.offsets(text)?;
        if offsets.len() <= tokens {
            return Some(text.to_owned());
        }
        let end = offsets.get(tokens.checked_sub(1)?)?.1;
        Some(text.get(..end)?.to_owned())
    }

    /// The byte span of each token of `text` (no special tokens).
    #[cfg(feature = "tokenizers")]
    fn offsets(&self, text: &str) -> Option<Vec<(usize, usize)>> {
        let encoding = self.inner.encode(text, false).ok()?;
        Some(encoding.get_offsets().to_vec())
    }

    #[cfg(not(feature = "tokenizers"))]
    fn offsets(&self, _text: &str) -> Option<Vec<(usize, usize)>> {
        match *self.inner {}
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

    #[cfg(feature = "tokenizers")]
    #[test]
    fn loads_counts_and_cuts() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokenizers/words.json");
        let t = Tokenizer::load(&path).unwrap();
        assert_eq!(t.path(), path);
        let cut = t.cut("one two three four", 2).unwrap();
        assert_eq!(t.count(&cut), Some(2));
        let err = Tokenizer::load(Path::new("no/such/tokenizer.json")).unwrap_err();
        assert!(err.message.starts_with("invalid tokenizer"), "{err:?}");
    }

    #[cfg(not(feature = "tokenizers"))]
    #[test]
    fn a_build_without_the_feature_says_so() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokenizers/words.json");
        let err = Tokenizer::load(&path).unwrap_err();
        assert!(
            err.message
                .ends_with("built without its `tokenizers` feature"),
            "{err:?}"
        );
    }
}
