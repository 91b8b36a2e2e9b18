//! The decoder's readers of one YAML value: a mapping's fields, text,
//! names, numbers, durations, lists, choices, interpolated text, regexes
//! and files; each reports a wrong value at its location and gives `None`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;

use super::schema::vocabulary::{Field, keys};
use super::{Decoder, Fields, quoted_list};
use crate::suite::diagnostics::{Diagnostic, did_you_mean};
use crate::suite::interpolate::interpolate;
use crate::suite::names::Named;
use crate::suite::node::{Node, Yaml};

impl Decoder<'_> {
    pub(super) fn fields<'y>(
        &mut self,
        y: &'y Yaml,
        what: &str,
        tables: &[&[Field]],
    ) -> Option<Fields<'y>> {
        self.named_fields(y, what, &keys(tables))
    }

    /// [`Decoder::fields`] of an object whose keys an enumeration's table
    /// names (`expect_server`'s documents).
    pub(super) fn named_fields<'y>(
        &mut self,
        y: &'y Yaml,
        what: &str,
        allowed: &[&str],
    ) -> Option<Fields<'y>> {
        let Node::Map(entries) = &y.node else {
            self.type_error(y, what, "a mapping");
            return None;
        };
        for (key, _) in entries {
            if !allowed.contains(&key.name.as_str()) {
                let mut d =
                    Diagnostic::new(key.loc, format!("unknown field `{}` in {what}", key.name))
                        .expected(format!("one of {}", quoted_list(allowed)));
                if let Some(close) = did_you_mean(&key.name, allowed) {
                    d = d.help(format!("did you mean `{close}`?"));
                }
                self.error(d);
            }
        }
        Some(Fields {
            entries,
            loc: y.loc,
        })
    }

    pub(super) fn type_error(&mut self, y: &Yaml, what: &str, expected: &str) {
        self.error(
            Diagnostic::new(
                y.loc,
                format!("{what} must be {expected}, found {}", y.node.kind()),
            )
            .expected(expected.to_owned()),
        );
    }

    pub(super) fn required<'y>(
        &mut self,
        f: &Fields<'y>,
        name: &str,
        what: &str,
    ) -> Option<&'y Yaml> {
        let v = f.get(name);
        if v.is_none() {
            self.error(Diagnostic::new(
                f.loc,
                format!("missing field `{name}` in {what}"),
            ));
        }
        v
    }

    /// A scalar as text, as it is written: YAML `4` is the text "4", `yes`
    /// is "yes" (not YAML 1.1's `true`) and `1.0` is "1.0" where text is
    /// expected.
    pub(super) fn text(&mut self, y: &Yaml, what: &str) -> Option<String> {
        match &y.node {
            Node::Str(s) => Some(s.clone()),
            Node::Int(_) | Node::Float(_) | Node::Bool(_) if y.written.is_some() => {
                y.written.clone()
            }
            Node::Int(i) => Some(i.to_string()),
            Node::Float(f) => Some(f.to_string()),
            Node::Bool(b) => Some(b.to_string()),
            _ => {
                self.type_error(y, what, "a string");
                None
            }
        }
    }

    /// A name usable in a trial name: letters, digits, `_`, `-`, `.`.
    pub(super) fn name(&mut self, y: &Yaml, what: &str) -> Option<String> {
        let name = self.text(y, what)?;
        // Names become parts of paths (snapshots, baselines, logs) as well
        // as of test names: never `.`, `..` or a hidden file.
        let valid = !name.is_empty()
            && !name.starts_with('.')
            && name.chars().all(crate::files::is_name_char);
        if valid {
            Some(name)
        } else {
            self.error(
                Diagnostic::new(y.loc, format!("invalid {what} `{name}`")).expected(
                    "letters, digits, `_`, `-` or `.`, not first (it becomes part of a test name and of file paths)",
                ),
            );
            None
        }
    }

    pub(super) fn int(&mut self, y: &Yaml, what: &str) -> Option<i64> {
        if let Node::Int(i) = y.node {
            Some(i)
        } else {
            self.type_error(y, what, "an integer");
            None
        }
    }

    pub(super) fn count<T: TryFrom<i64>>(&mut self, y: &Yaml, what: &str, min: i64) -> Option<T> {
        let i = self.int(y, what)?;
        match T::try_from(i) {
            Ok(v) if i >= min => Some(v),
            _ => {
                self.error(
                    Diagnostic::new(y.loc, format!("{what} is out of range: {i}"))
                        .expected(format!("an integer >= {min}")),
                );
                None
            }
        }
    }

    pub(super) fn float(&mut self, y: &Yaml, what: &str) -> Option<f64> {
        match y.node {
            #[expect(clippy::cast_precision_loss, reason = "suite numbers are small")]
            Node::Int(i) => Some(i as f64),
            Node::Float(f) if f.is_finite() => Some(f),
            _ => {
                self.type_error(y, what, "a finite number");
                None
            }
        }
    }

    pub(super) fn boolean(&mut self, y: &Yaml, what: &str) -> Option<bool> {
        if let Node::Bool(b) = y.node {
            Some(b)
        } else {
            self.type_error(y, what, "true or false");
            None
        }
    }

    pub(super) fn duration(&mut self, y: &Yaml, what: &str) -> Option<Duration> {
        let text = self.interpolated(y, what)?;
        match crate::units::parse_duration(&text) {
            Ok(d) if !d.is_zero() => Some(d),
            Ok(_) => {
                self.error(Diagnostic::new(
                    y.loc,
                    format!("{what} must be longer than 0"),
                ));
                None
            }
            Err(e) => {
                self.error(
                    Diagnostic::new(y.loc, format!("invalid duration `{text}` for {what}: {e}"))
                        .expected("a duration such as `90s`, `500ms` or `10m`"),
                );
                None
            }
        }
    }

    pub(super) fn list<'y>(&mut self, y: &'y Yaml, what: &str) -> Option<&'y [Yaml]> {
        if let Node::Seq(items) = &y.node {
            Some(items)
        } else {
            self.type_error(y, what, "a list");
            None
        }
    }

    /// The value of a named type (`api: openai-chat`) that `y` names.
    pub(super) fn pick<T: Named>(&mut self, y: &Yaml, what: &str) -> Option<T> {
        let name = self.one_of(y, what, &T::names())?;
        T::named(&name)
    }

    pub(super) fn one_of(&mut self, y: &Yaml, what: &str, choices: &[&str]) -> Option<String> {
        let text = self.text(y, what)?;
        if choices.contains(&text.as_str()) {
            return Some(text);
        }
        let mut d = Diagnostic::new(y.loc, format!("invalid {what} `{text}`"))
            .expected(format!("one of {}", quoted_list(choices)));
        if let Some(close) = did_you_mean(&text, choices) {
            d = d.help(format!("did you mean `{close}`?"));
        }
        self.error(d);
        None
    }

    pub(super) fn interpolated(&mut self, y: &Yaml, what: &str) -> Option<String> {
        let raw = self.text(y, what)?;
        match interpolate(&raw, self.env) {
            Ok(v) => Some(v),
            Err(e) => {
                self.error(Diagnostic::new(y.loc, format!("in {what}: {e}")));
                None
            }
        }
    }

    pub(super) fn regex(&mut self, y: &Yaml, what: &str) -> Option<Regex> {
        let text = self.text(y, what)?;
        match Regex::new(&text) {
            Ok(r) => Some(r),
            Err(e) => {
                let detail = e.to_string();
                let last = detail.lines().last().unwrap_or("invalid regex").trim();
                self.error(
                    Diagnostic::new(y.loc, format!("invalid regex in {what}: {last}"))
                        .expected("a regular expression in Rust `regex` syntax"),
                );
                None
            }
        }
    }

    pub(super) fn items<T>(
        &mut self,
        y: &Yaml,
        what: &str,
        mut each: impl FnMut(&mut Self, &Yaml) -> Option<T>,
    ) -> Vec<T> {
        let Some(items) = self.list(y, what) else {
            return Vec::new();
        };
        items.iter().filter_map(|item| each(self, item)).collect()
    }

    /// A file named relative to the suite's directory or one of its
    /// parents; reports `<what> `…` not found` at its location otherwise.
    pub(super) fn file(&mut self, y: &Yaml, what: &str) -> Option<PathBuf> {
        // `${SERVEGATE_DATA:-${HOME}/.cache/servegate/data}/…` names a cache.
        let rel = self.interpolated(y, what)?;
        let found = resolve_relative(&self.suite_dir, Path::new(&rel));
        if found.is_none() {
            self.error(
                Diagnostic::new(y.loc, format!("{what} `{rel}` not found")).expected(format!(
                    "a file relative to the suite's directory `{}` or one of its parents",
                    self.suite_dir.display()
                )),
            );
        }
        found
    }
}

/// `rel` against `dir`, then against each parent of `dir`: suites name
/// fixtures relative to the project root or to themselves.
fn resolve_relative(dir: &Path, rel: &Path) -> Option<PathBuf> {
    if rel.is_absolute() {
        return rel.exists().then(|| rel.to_path_buf());
    }
    let mut base = Some(dir);
    while let Some(b) = base {
        let candidate = b.join(rel);
        if candidate.exists() {
            return Some(candidate);
        }
        base = b.parent();
    }
    rel.exists().then(|| rel.to_path_buf())
}
