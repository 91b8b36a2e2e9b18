//! Configuration truth: the server's own account of how it runs
//! (`/get_server_info`, `/get_model_info`, `/v1/models`), checked against a
//! suite's `expect_server:` as the first stage and kept for the run record.

use std::fmt::Write as _;

use serde_json::Value;

use super::outcome::Stop;
use super::session::{Execution, Verdict, once};
use crate::check::message::Message;
use crate::record::{ConfigState, FailureCause, FailureKind, bounded};
use crate::suite::{ConfigCheck, ConfigExpect};

/// The value at a dotted path: object keys, list indexes.
fn lookup<'v>(doc: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(doc, |v, seg| match v {
        Value::Object(map) => map.get(seg),
        Value::Array(items) => seg.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

#[expect(
    clippy::float_cmp,
    reason = "reported settings are compared exactly: 8 and 8.0 are equal"
)]
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Whether `value` is what `expect` wants.
fn holds(expect: &ConfigExpect, value: &Value) -> bool {
    match expect {
        ConfigExpect::Equals(want) => same(value, want),
        ConfigExpect::Contains(text) => value.as_str().is_some_and(|s| s.contains(text.as_str())),
        ConfigExpect::Matches(re) => value.as_str().is_some_and(|s| re.is_match(s)),
        ConfigExpect::OneOf(options) => options.iter().any(|o| same(value, o)),
        // An adapter's card names its base model (`parent`): the base
        // model's own id is no adapter.
        ConfigExpect::ListsId(id) => value.as_array().is_some_and(|items| {
            items.iter().any(|i| {
                i.get("id").and_then(Value::as_str) == Some(id)
                    && i.get("parent")
                        .and_then(Value::as_str)
                        .is_some_and(|p| !p.is_empty())
            })
        }),
    }
}

/// A name the server sent, as a message shows it: scrubbed, cut to 80
/// characters (`…` where it was longer), made printable.
fn printable_cut(name: &str) -> String {
    let (cut, longer) = crate::secrets::cut(name, 80);
    let cut = crate::text::printable(&cut).into_owned();
    if longer.is_some() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// A value that did not hold, as the message shows it: a list searched for
/// an `id` by the ids it has (at most 40, each cut and made printable),
/// any other value as it is.
fn shown(expect: &ConfigExpect, value: &Value) -> String {
    let (ConfigExpect::ListsId(_), Some(items)) = (expect, value.as_array()) else {
        return value.to_string();
    };
    let ids: Vec<String> = items
        .iter()
        .take(40)
        .map(|i| match i.get("id").and_then(Value::as_str) {
            Some(id) => format!("{:?}", printable_cut(id)),
            None => "(no id)".to_owned(),
        })
        .collect();
    let more = if items.len() > ids.len() {
        format!(" (40 of {})", items.len())
    } else {
        String::new()
    };
    format!("a list of the ids {}{more}", ids.join(", "))
}

/// What `expect` wants, in words (`expected 8`).
fn wanted(expect: &ConfigExpect) -> String {
    match expect {
        ConfigExpect::Equals(want) => format!("expected {want}"),
        ConfigExpect::Contains(text) => format!("expected a string containing {text:?}"),
        ConfigExpect::Matches(re) => format!("expected a string matching /{}/", re.as_str()),
        ConfigExpect::OneOf(options) => format!(
            "expected one of {}",
            options
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ConfigExpect::ListsId(id) => format!(
            "expected an entry with `id` {id:?} and a `parent`: the LoRA adapter a probe or gate names, loaded by the server (vLLM `--enable-lora --lora-modules {id}=PATH`, SGLang `--enable-lora --lora-paths {id}=PATH`)"
        ),
    }
}

impl Execution {
    /// Runs config check `index` once; later calls return the first verdict.
    pub fn config(&self, index: usize) -> Verdict {
        once(
            &self.configs,
            index,
            |c| c,
            || self.run_config(&self.suite.expect_server[index]),
        )
    }

    fn run_config(&self, check: &ConfigCheck) -> Verdict {
        let target = self.connected()?;
        let file = &self.suite.file;
        let fail = |what: String, note: String, found: Option<&Value>, state: ConfigState| {
            let mut out = Message::of_error(what);
            out.at(file, check.loc);
            let _ = write!(out, "{note}");
            let cause = FailureCause::Config {
                document: check.source.name().to_owned(),
                field: bounded(&check.path.join(".")),
                expected: bounded(&wanted(&check.expect)),
                found: found.map(|v| bounded(&v.to_string())),
                state,
            };
            Stop::failed_for(FailureKind::Config, cause, out)
        };
        let (path, doc) = self
            .runtime()
            .block_on(self.documents.get(target.documents_from(), check.source))
            .map_err(|e| {
                fail(
                    format!("{} cannot be checked: {e}", check.name),
                    String::new(),
                    None,
                    ConfigState::Unreported,
                )
            })?;
        let field = check.path.join(".");
        let Some(value) = lookup(&doc, &check.path) else {
            // The fields of the deepest object on the path, which the
            // missing one would be among.
            let (depth, parent) = (0..check.path.len())
                .rev()
                .find_map(|n| lookup(&doc, &check.path[..n]).map(|v| (n, v)))
                .unwrap_or((0, &doc));
            let keys = parent.as_object().map_or_else(
                || "it is not a JSON object".to_owned(),
                |m| {
                    // The server's names, each cut and made printable.
                    let mut k: Vec<String> = m.keys().take(40).map(|k| printable_cut(k)).collect();
                    k.sort_unstable();
                    let whose = if depth == 0 {
                        "its fields".to_owned()
                    } else {
                        format!("the fields of `{}`", check.path[..depth].join("."))
                    };
                    let of = if m.len() > k.len() {
                        format!(" (40 of {})", m.len())
                    } else {
                        String::new()
                    };
                    format!("{whose}{of}: {}", k.join(", "))
                },
            );
            return Err(fail(
                format!(
                    "the server's {} has no field `{field}`",
                    check.source.name()
                ),
                format!("  = read from GET {path}; {keys}\n"),
                None,
                ConfigState::Missing,
            ));
        };
        if holds(&check.expect, value) {
            return Ok(());
        }
        Err(fail(
            format!(
                "server configuration mismatch: {} is {}, {}",
                check.name,
                shown(&check.expect, value),
                wanted(&check.expect)
            ),
            format!("  = read from GET {path} of {}\n", target.client.base_url()),
            Some(value),
            ConfigState::Mismatch,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_expectations() {
        let doc: Value =
            serde_json::json!({"tp_size": 8, "data": [{"id": "kimi"}], "backend": "triton"});
        let p = |s: &str| s.split('.').map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(lookup(&doc, &p("data.0.id")), Some(&Value::from("kimi")));
        assert_eq!(lookup(&doc, &p("data.1.id")), None);
        assert!(holds(
            &ConfigExpect::Equals(Value::from(8.0)),
            &doc["tp_size"]
        ));
        let four = ConfigExpect::Equals(Value::from(4));
        assert!(!holds(&four, &doc["tp_size"]));
        assert_eq!(wanted(&four), "expected 4");
        assert!(holds(
            &ConfigExpect::Contains("tri".into()),
            &doc["backend"]
        ));
        assert!(!holds(&ConfigExpect::Contains("8".into()), &doc["tp_size"]));
        let one = ConfigExpect::OneOf(vec![Value::from("fa3"), Value::from("triton")]);
        assert!(holds(&one, &doc["backend"]));
    }
}
