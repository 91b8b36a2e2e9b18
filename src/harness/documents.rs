//! The server's own documents (`/server_info`, `/model_info`,
//! `/v1/models`, `/version`, the info series of `/metrics`), fetched once
//! per suite run and kept: the config checks read them, the run record
//! keeps them (secrets redacted).

use std::sync::Mutex;

use serde_json::Value;

use crate::client::Client;
use crate::suite::ConfigSource;

/// The documents fetched so far: each source's body, or why it is missing.
#[derive(Debug, Default)]
pub struct Documents(Mutex<Vec<(ConfigSource, Fetched)>>);

/// The path that answered and its JSON body, or why there is none.
type Fetched = Result<(String, Value), Unreported>;

/// Why the server's document of a source is not there to check.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum Unreported {
    /// A path answered, but not with a document that parses.
    #[error("GET {path} answered {status} with {why}")]
    Unreadable {
        /// The path that answered.
        path: &'static str,
        /// Its status.
        status: u16,
        /// What is wrong with the body.
        why: String,
    },
    /// No path of the source answered with a success.
    #[error("the server does not report its {what}: {}", tried.join("; "))]
    Missing {
        /// The source, in words.
        what: &'static str,
        /// Each path tried, with its status or error.
        tried: Vec<String>,
    },
}

impl Documents {
    /// The document of `source` (fetched once): the path that answered and
    /// its JSON body.
    pub async fn get(&self, client: &Client, source: ConfigSource) -> Fetched {
        if let Some(found) = self.cached(source) {
            return found;
        }
        let fetched = fetch(client, source).await;
        if let Ok(mut docs) = self.0.lock() {
            docs.push((source, fetched.clone()));
        }
        fetched
    }

    fn cached(&self, source: ConfigSource) -> Option<Fetched> {
        let docs = self.0.lock().ok()?;
        docs.iter()
            .find(|(s, _)| *s == source)
            .map(|(_, d)| d.clone())
    }

    /// A fetched document's body, for the record: the values of
    /// secret-looking fields (SGLang's `server_info` holds `api_key`)
    /// redacted.
    pub fn body(&self, source: ConfigSource) -> Option<Value> {
        self.cached(source)?
            .ok()
            .map(|(_, v)| crate::secrets::json(&v))
    }
}

async fn fetch(client: &Client, source: ConfigSource) -> Fetched {
    let mut tried = Vec::new();
    for path in source.paths() {
        match client.get(path).await {
            Ok((status, text)) if (200..300).contains(&status) => {
                let parsed = if source == ConfigSource::Metrics {
                    Ok(crate::load::prometheus::info_document(&text))
                } else {
                    crate::client::stream::document(&text)
                };
                return parsed
                    .map(|v| {
                        // Its secret-looking values are scrubbed wherever
                        // the server echoes them later.
                        let _ = crate::secrets::json(&v);
                        ((*path).to_owned(), v)
                    })
                    .map_err(|why| Unreported::Unreadable { path, status, why });
            }
            Ok((status, _)) => tried.push(format!("GET {path}: {status}")),
            Err(e) => tried.push(format!("GET {path}: {e}")),
        }
    }
    Err(Unreported::Missing {
        what: source.name(),
        tried,
    })
}
