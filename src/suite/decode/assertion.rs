//! Decoding a probe's assertions (`expect:`): one check per item, its
//! target text (`in`), and the checks with settings of their own
//! (`number`, `json`, `code` with its program limits, `not_degenerate`).

use super::schema::probe::{ASSERTION_IN, CHECKS, CODE, DEGENERATE, JSON, NUMBER};
use super::schema::vocabulary::keys;
use super::{Decoder, Fields, quoted_list};
use crate::suite::diagnostics::Diagnostic;
use crate::suite::model::{Assertion, Check, CodeSpec, Degeneracy, Field, ProgramLimits};
use crate::suite::node::{Key, Node, Yaml};

impl Decoder<'_> {
    pub(super) fn assertion(&mut self, y: &Yaml) -> Option<Assertion> {
        let f = self.fields(y, "assertion", &[CHECKS, ASSERTION_IN])?;
        let checks = keys(&[CHECKS]);
        let given: Vec<&(Key, Yaml)> = f
            .entries
            .iter()
            .filter(|(k, _)| checks.contains(&k.name.as_str()))
            .collect();
        let field = match f.get("in") {
            None => Some(Field::Content),
            Some(v) => self.pick(v, "assertion target (`in`)"),
        };
        let (key, value) = match given.as_slice() {
            [one] => (&one.0, &one.1),
            [] if f.entries.iter().all(|(k, _)| k.name == "in") => {
                self.error(
                    Diagnostic::new(y.loc, "assertion has no check")
                        .expected(format!("one of {}", quoted_list(&checks))),
                );
                return None;
            }
            // An unknown key was reported already; "no check" would repeat it.
            [] => return None,
            [_, second, ..] => {
                self.error(
                    Diagnostic::new(second.0.loc, "one assertion per list item")
                        .help("start a new `- ` item for each check"),
                );
                return None;
            }
        };
        let check = self.check(key, value)?;
        Some(Assertion {
            check,
            field: field?,
            loc: key.loc,
        })
    }

    fn check(&mut self, key: &Key, v: &Yaml) -> Option<Check> {
        let what = format!("`{}`", key.name);
        Some(match key.name.as_str() {
            "equals" => Check::Equals(self.text(v, &what)?),
            "contains" => Check::Contains(self.text(v, &what)?),
            "not_contains" => Check::NotContains(self.text(v, &what)?),
            "starts_with" => Check::StartsWith(self.text(v, &what)?),
            "regex" => Check::Regex(self.regex(v, &what)?),
            "not_regex" => Check::NotRegex(self.regex(v, &what)?),
            "finish_reason" => Check::FinishReason(self.text(v, &what)?),
            "min_chars" => Check::MinChars(self.count(v, &what, 0)?),
            "max_chars" => Check::MaxChars(self.count(v, &what, 0)?),
            "one_of" => {
                let items = self.list(v, &what)?;
                let choices = items
                    .iter()
                    .map(|i| self.text(i, "one_of choice"))
                    .collect::<Option<Vec<_>>>()?;
                if choices.is_empty() {
                    self.error(Diagnostic::new(v.loc, "`one_of` needs at least one choice"));
                    return None;
                }
                Check::OneOf(choices)
            }
            "number" => match &v.node {
                Node::Map(_) => {
                    let nf = self.fields(v, "number", &[NUMBER])?;
                    let value = self
                        .required(&nf, "value", "number")
                        .and_then(|x| self.float(x, "number.value"));
                    let tolerance = nf
                        .get("tolerance")
                        .map_or(Some(0.0), |x| self.float(x, "number.tolerance"));
                    Check::Number {
                        value: value?,
                        tolerance: tolerance?,
                    }
                }
                _ => Check::Number {
                    value: self.float(v, &what)?,
                    tolerance: 0.0,
                },
            },
            "json" => match &v.node {
                Node::Bool(true) => Check::Json { pointer: None },
                Node::Map(_) => {
                    let jf = self.fields(v, "json", &[JSON])?;
                    let pointer = self
                        .required(&jf, "pointer", "json")
                        .and_then(|x| self.text(x, "json.pointer"));
                    let equals = self.required(&jf, "equals", "json").map(Yaml::to_json);
                    if let Some(p) = &pointer
                        && !p.is_empty()
                        && !p.starts_with('/')
                    {
                        self.error(
                            Diagnostic::new(jf.loc, format!("invalid JSON pointer `{p}`"))
                                .expected("a pointer such as `/answer` or `/items/0/name`"),
                        );
                        return None;
                    }
                    Check::Json {
                        pointer: Some((pointer?, equals?)),
                    }
                }
                _ => {
                    self.type_error(v, "`json`", "`true` or a mapping `{pointer, equals}`");
                    return None;
                }
            },
            "code" => Check::Code(self.code(v)?),
            "not_degenerate" => Check::NotDegenerate(self.degeneracy(v)?),
            "tool_call" => self.tool_call(v)?,
            "json_schema" => self.json_schema_check(v)?,
            _ => unreachable!("only CHECKS keys reach here"),
        })
    }

    /// `not_degenerate: true` or a mapping of the limits to change.
    fn degeneracy(&mut self, v: &Yaml) -> Option<Degeneracy> {
        let mut limits = Degeneracy::default();
        match &v.node {
            Node::Bool(true) => return Some(limits),
            Node::Map(_) => {}
            _ => {
                self.type_error(
                    v,
                    "`not_degenerate`",
                    "`true` or a mapping `{max_repeat_share, max_char_run, max_bad_chars}`",
                );
                return None;
            }
        }
        let f = self.fields(v, "not_degenerate", &[DEGENERATE])?;
        if let Some(x) = f.get("max_repeat_share") {
            let share = self.float(x, "not_degenerate.max_repeat_share")?;
            if !(0.0..=1.0).contains(&share) {
                self.error(
                    Diagnostic::new(
                        x.loc,
                        format!("not_degenerate.max_repeat_share is out of range: {share}"),
                    )
                    .expected("a share between 0 and 1, such as 0.5"),
                );
                return None;
            }
            limits.max_repeat_share = share;
        }
        if let Some(x) = f.get("max_char_run") {
            limits.max_char_run = self.count(x, "not_degenerate.max_char_run", 1)?;
        }
        if let Some(x) = f.get("max_bad_chars") {
            limits.max_bad_chars = self.count(x, "not_degenerate.max_bad_chars", 0)?;
        }
        Some(limits)
    }

    fn code(&mut self, v: &Yaml) -> Option<CodeSpec> {
        let f = self.fields(v, "code", &[CODE])?;
        let language = match f.get("language") {
            Some(l) => self.text(l, "code.language")?.to_ascii_lowercase(),
            None => "python".to_owned(),
        };
        let tests = self.required(&f, "tests", "code").and_then(|t| {
            let items = self.list(t, "code.tests")?;
            if items.is_empty() {
                self.error(
                    Diagnostic::new(
                        t.loc,
                        "`code.tests` is empty: code without tests proves nothing",
                    )
                    .expected("at least one line such as `assert is_prime(97)`"),
                );
                return None;
            }
            items
                .iter()
                .map(|i| self.text(i, "a code test"))
                .collect::<Option<Vec<_>>>()
        });
        let (default_run, file_name): (Option<&str>, &str) = match language.as_str() {
            "python" => (Some("python3"), "probe.py"),
            "javascript" => (Some("node"), "probe.js"),
            "bash" | "sh" | "shell" => (Some("bash"), "probe.sh"),
            _ => (None, "probe"),
        };
        let interpreter = match (f.get("run"), default_run) {
            (Some(r), _) => {
                let items = self.list(r, "code.run")?;
                let argv = items
                    .iter()
                    .map(|i| self.text(i, "code.run argument"))
                    .collect::<Option<Vec<_>>>()?;
                if argv.is_empty() {
                    self.error(
                        Diagnostic::new(r.loc, "`code.run` is empty")
                            .expected("an interpreter's argv, e.g. `[python3, -I]`"),
                    );
                    return None;
                }
                argv
            }
            (None, Some(d)) => vec![d.to_owned()],
            (None, None) => {
                self.error(
                    Diagnostic::new(
                        f.loc,
                        format!("no default interpreter for language `{language}`"),
                    )
                    .expected("a `run:` argv, e.g. `run: [ruby]`; the program's file is appended"),
                );
                return None;
            }
        };
        let limits = self.program_limits(&f, "code", interpreter, file_name);
        Some(CodeSpec {
            language,
            tests: tests?,
            limits: limits?,
        })
    }

    /// `timeout` and `memory_mib` of `what` (`code`, `dataset`), with the
    /// suite's sandbox policy.
    pub(super) fn program_limits(
        &mut self,
        f: &Fields<'_>,
        what: &str,
        interpreter: Vec<String>,
        file_name: &str,
    ) -> Option<ProgramLimits> {
        let timeout = f
            .get("timeout")
            .map_or(Some(std::time::Duration::from_secs(10)), |t| {
                self.duration(t, &format!("{what}.timeout"))
            });
        let memory_mib = f.get("memory_mib").map_or(Some(1024), |m| {
            self.count(m, &format!("{what}.memory_mib"), 16)
        });
        Some(ProgramLimits {
            interpreter,
            file_name: file_name.to_owned(),
            timeout: timeout?,
            memory_mib: memory_mib?,
            policy: self.sandbox,
            read: self.sandbox_read.clone(),
        })
    }
}
