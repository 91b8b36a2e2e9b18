//! Baselines: the figures of a reference run, kept under `baselines/` as
//! JSON, one file per suite and gate, one entry per fingerprint (the API,
//! the served model, the server's version and its whole configuration:
//! [`super::fingerprint`]), so a threshold can say `>= baseline * 0.95`.
//! Written only by `servegate baseline save|accept`.

use crate::files::{self, FileError};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::fingerprint::{self, Config, UNKNOWN_VERSION};
use super::metrics::GateMetrics;
use crate::suite::figures::Figures;
use crate::suite::metric::MetricKey;

/// The directory of baselines: `SERVEGATE_BASELINES`, else `baselines/` in
/// the suite's project.
pub fn dir(project: &Path) -> PathBuf {
    std::env::var_os("SERVEGATE_BASELINES")
        .filter(|v| !v.is_empty())
        .map_or_else(
            || project.join("baselines"),
            |d| crate::suite::absolute(Path::new(&d)),
        )
}

/// The file of a gate's baselines: `gate` is its name, or a sweep's name
/// and the level (a directory per sweep).
pub fn path(dir: &Path, suite: &str, gate: &[&str]) -> PathBuf {
    let mut p = dir.join(suite);
    for part in gate {
        p.push(part);
    }
    p.set_extension("json");
    p
}

/// One reference run of a gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Seconds since the Unix epoch when it was saved.
    pub saved_unix: u64,
    /// The servegate version that measured it.
    pub servegate: String,
    /// The gate's load, in words.
    pub load: String,
    /// Repeats behind each figure.
    pub repeats: u32,
    /// Every figure (`ttft.p99`, `output_tok_s`, …): the mean over repeats.
    pub figures: Figures,
    /// The whole configuration its fingerprint digests, where it was known
    /// (empty in an entry saved before servegate kept it): what another
    /// configuration's lookup names its differences from.
    #[serde(default, skip_serializing_if = "Config::is_empty")]
    pub config: Config,
}

/// A gate's baselines file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct File {
    /// Format version.
    pub schema: u32,
    /// Entries by fingerprint.
    pub entries: BTreeMap<String, Entry>,
}

/// Reads a baselines file; `Ok(None)` when there is none.
pub fn read(path: &Path) -> Result<Option<File>, FileError> {
    files::read_json_if_any(path, "a baselines file")
}

/// Adds or replaces the entry of `fingerprint`.
pub fn write(path: &Path, fingerprint: &str, entry: Entry) -> Result<(), FileError> {
    let mut file = read(path)?.unwrap_or_default();
    file.schema = 1;
    file.entries.insert(fingerprint.to_owned(), entry);
    files::write_json(path, "the baselines", &file)
}

/// Every figure of a gate, each the mean of its repeats.
pub fn figures(repeats: &[GateMetrics]) -> Figures {
    MetricKey::every()
        .filter_map(|key| {
            let values: Vec<f64> = repeats
                .iter()
                .map(|m| m.value(key))
                .collect::<Option<_>>()?;
            (!values.is_empty()).then(|| (key, super::estimate::combine(key.metric, values).mean))
        })
        .collect()
}

/// Why a baselines file has no entry for a configuration: the entries it
/// has, and how the nearest one's configuration differs by name (or that
/// it was saved before servegate kept whole configurations).
fn missing(path: &Path, file: &File, fingerprint: &str, config: &Config) -> String {
    let known: Vec<&str> = file.entries.keys().map(String::as_str).collect();
    // An imported result that named no server version is filed under
    // none; the import can name this configuration.
    let mut why = if known
        .iter()
        .any(|k| k.contains(&format!("server {UNKNOWN_VERSION}")))
    {
        format!(
            " (a server of unknown version is what a result file that names none, such as `vllm bench serve`'s, is filed under: import it again with `--fingerprint \"{fingerprint}\"` for this configuration's baselines)"
        )
    } else {
        String::new()
    };
    let nearest = file
        .entries
        .iter()
        .filter(|(_, e)| !e.config.is_empty() && !config.is_empty())
        .min_by_key(|(_, e)| fingerprint::differences(&e.config, config).len());
    if let Some((key, e)) = nearest {
        let _ = write!(
            why,
            "; this configuration differs from `{key}`'s by {}",
            fingerprint::differences_line(&e.config, config, 8)
        );
    } else if let Some(head) = fingerprint::without_digest(fingerprint)
        && known.contains(&head)
    {
        let _ = write!(
            why,
            "; `{head}` was saved before servegate keyed baselines by the server's whole configuration, which it cannot compare: save this configuration's baseline again (`servegate baseline save` after a run of the configuration you trust)"
        );
    }
    format!(
        "{} has no entry for this configuration ({fingerprint}); it has: {}{why}",
        path.display(),
        if known.is_empty() {
            "none".to_owned()
        } else {
            known.join("; ")
        }
    )
}

/// A gate's baseline as a run sees it: the entry of its fingerprint, or why
/// there is none.
#[derive(Debug, Clone)]
pub(crate) struct Lookup {
    /// Where it was looked for.
    pub path: PathBuf,
    /// The run's fingerprint.
    pub fingerprint: String,
    /// The entry, or why there is none.
    pub entry: Result<Entry, String>,
}

impl Lookup {
    /// Looks up the baseline of a gate for a fingerprint and the whole
    /// configuration it digests.
    pub fn find(
        dir: &Path,
        suite: &str,
        gate: &[&str],
        fingerprint: &str,
        config: &Config,
    ) -> Self {
        let path = path(dir, suite, gate);
        let entry = match read(&path) {
            Err(e) => Err(e.to_string()),
            Ok(None) => Err(format!("no baseline file {}", path.display())),
            Ok(Some(file)) => file
                .entries
                .get(fingerprint)
                .cloned()
                .ok_or_else(|| missing(&path, &file, fingerprint, config)),
        };
        Self {
            path,
            fingerprint: fingerprint.to_owned(),
            entry,
        }
    }

    /// The baseline figure of a key, or why there is none.
    pub fn figure(&self, key: MetricKey) -> Result<f64, String> {
        let entry = self.entry.as_ref().map_err(Clone::clone)?;
        entry.figures.get(key).copied().ok_or_else(|| {
            format!(
                "the baseline in {} has no figure `{key}`",
                self.path.display()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_gates_get_nested_files() {
        assert_eq!(
            path(
                Path::new("baselines"),
                "sglang",
                &["sweep", "concurrency_8"]
            ),
            PathBuf::from("baselines/sglang/sweep/concurrency_8.json")
        );
    }
}
