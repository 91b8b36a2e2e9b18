//! Decoding correctness probes and their assertions.

use std::path::Path;

use super::{Decoder, Fields, SAMPLING, quoted_list};
use crate::suite::diagnostics::Diagnostic;
use crate::suite::model::{
    AccuracyStat, AccuracyThreshold, Api, Assertion, Check, CodeSpec, CodeTask, Contract,
    DatasetProbe, DatasetTask, Degeneracy, Extract, Field, Input, Message, Probe, ProgramLimits,
    QaTask, Sampling, SnapshotMode,
};
use crate::suite::names::Named as _;
use crate::suite::node::{Key, Node, Yaml};
use crate::suite::threshold::Op;

pub(super) const PROBE_OWN: &[&str] = &[
    "name",
    "prompt",
    "messages",
    "system",
    "expect",
    "snapshot",
    "deterministic",
    "dataset",
    "thresholds",
    "contract",
];

pub(super) const DATASET: &[&str] = &[
    "file",
    "format",
    "question_field",
    "answer_field",
    "shots",
    "limit",
    "template",
    "extract",
    "concurrency",
    "timeout",
    "memory_mib",
];

/// The kinds of dataset (`dataset.format`).
pub(super) const FORMATS: &[&str] = &["qa", "humaneval"];

/// Keys of a question/answer dataset only.
const QA_ONLY: &[&str] = &[
    "question_field",
    "answer_field",
    "shots",
    "template",
    "extract",
];

/// Keys of a code dataset only.
const CODE_ONLY: &[&str] = &["timeout", "memory_mib"];

pub(super) const ACCURACY: &[&str] = &["accuracy", "accuracy.lower95"];

pub(super) const PASS_AT_1: &[&str] = &["pass_at_1", "pass_at_1.lower95"];

/// The default prompt of a dataset item.
const TEMPLATE: &str = "Question: {question}\nAnswer:";

pub(super) const MESSAGE: &[&str] = &["role", "content"];
/// The roles of a chat message.
pub(super) const ROLES: &[&str] = &["system", "user", "assistant"];
/// How a dataset answer is read: by name, or `{regex}`.
pub(super) const EXTRACTS: &[&str] = &["last_number", "exact"];
pub(super) const EXTRACT_REGEX: &[&str] = &["regex"];

pub(super) const CHECKS: &[&str] = &[
    "equals",
    "contains",
    "not_contains",
    "regex",
    "not_regex",
    "starts_with",
    "number",
    "one_of",
    "json",
    "finish_reason",
    "min_chars",
    "max_chars",
    "code",
    "not_degenerate",
];

pub(super) const CODE: &[&str] = &["language", "tests", "run", "timeout", "memory_mib"];

pub(super) const NUMBER: &[&str] = &["value", "tolerance"];

pub(super) const JSON: &[&str] = &["pointer", "equals"];

/// The keys of a probe: its own and the sampling keys.
pub(super) fn probe_keys() -> Vec<&'static str> {
    PROBE_OWN.iter().chain(SAMPLING).copied().collect()
}

/// The keys of an assertion: one check and `in`.
pub(super) fn assertion_keys() -> Vec<&'static str> {
    CHECKS.iter().copied().chain(["in"]).collect()
}

pub(super) const DEGENERATE: &[&str] = &["max_repeat_share", "max_char_run", "max_bad_chars"];

impl Decoder<'_> {
    pub(super) fn probe(
        &mut self,
        y: &Yaml,
        defaults: &Sampling,
        snapshot_default: SnapshotMode,
        api: Api,
    ) -> Option<Probe> {
        let f = self.fields(y, "probe", &probe_keys())?;
        let name = self
            .required(&f, "name", "probe")
            .and_then(|v| self.name(v, "probe name"));
        if let Some(d) = f.get("dataset") {
            let dataset = self.dataset_probe(&f, d);
            let system = f.get("system").and_then(|v| self.text(v, "system"));
            return Some(Probe {
                name: name?,
                loc: y.loc,
                input: Input::Prompt {
                    system,
                    prompt: match &dataset.as_ref()?.task {
                        DatasetTask::Qa(qa) => qa.template.clone(),
                        DatasetTask::HumanEval(_) => "{prompt}".to_owned(),
                    },
                },
                sampling: self.sampling(&f).or(defaults),
                expect: Vec::new(),
                snapshot: SnapshotMode::Off,
                deterministic: None,
                dataset: Some(dataset?),
                contract: Vec::new(),
            });
        }
        if let Some(k) = f.key("thresholds") {
            self.error(
                Diagnostic::new(k.loc, "`thresholds` on a probe needs a `dataset`")
                    .expected("`expect:` assertions, or a `dataset:` with `accuracy` thresholds"),
            );
        }
        let input = self.input(&f, api);
        let sampling = self.sampling(&f).or(defaults);
        let snapshot = match f.get("snapshot") {
            Some(v) => self.snapshot_mode(v, "snapshot")?,
            None => snapshot_default,
        };
        let deterministic = f
            .get("deterministic")
            .and_then(|v| self.count::<u32>(v, "deterministic", 2));
        let contract = f
            .get("contract")
            .map_or_else(Vec::new, |v| self.contract(v, &sampling));
        // A snapshot, a determinism or a contract check is a check of its own.
        let expect = if snapshot != SnapshotMode::Off
            || f.get("deterministic").is_some()
            || f.get("contract").is_some()
        {
            Some(
                f.get("expect")
                    .map_or_else(Vec::new, |v| self.items(v, "expect", Decoder::assertion)),
            )
        } else {
            self.required(&f, "expect", "probe")
                .map(|v| self.items(v, "expect", Decoder::assertion))
        };
        if let (Some(v), Some(list)) = (f.get("expect"), &expect)
            && list.is_empty()
            && matches!(&v.node, Node::Seq(items) if items.is_empty())
        {
            self.error(
                Diagnostic::new(
                    v.loc,
                    "`expect` is empty: a probe without assertions always passes",
                )
                .expected("at least one assertion, e.g. `- contains: \"def is_prime\"`"),
            );
        }
        Some(Probe {
            name: name?,
            loc: y.loc,
            input: input?,
            sampling,
            expect: expect?,
            snapshot,
            deterministic,
            dataset: None,
            contract,
        })
    }

    fn contract(&mut self, y: &Yaml, sampling: &Sampling) -> Vec<Contract> {
        let list = self.items(y, "contract", |d, item| {
            let c: Contract = d.pick(item, "contract check")?;
            let needs = match c {
                Contract::MaxTokens | Contract::IgnoreEos if sampling.max_tokens.is_none() => {
                    Some("`max_tokens` on the probe (or in `defaults`)")
                }
                Contract::Stop if sampling.stop.as_ref().is_none_or(Vec::is_empty) => {
                    Some("`stop` sequences on the probe that its answer would contain")
                }
                _ => None,
            };
            if let Some(needs) = needs {
                d.error(Diagnostic::new(
                    item.loc,
                    format!("contract check `{}` needs {needs}", c.name()),
                ));
                return None;
            }
            Some(c)
        });
        if list.is_empty() && matches!(&y.node, Node::Seq(items) if items.is_empty()) {
            self.error(
                Diagnostic::new(y.loc, "`contract` is empty")
                    .expected(format!("some of {}", quoted_list(&Contract::names()))),
            );
        }
        list
    }

    fn dataset_probe(&mut self, probe: &Fields<'_>, y: &Yaml) -> Option<DatasetProbe> {
        for key in ["prompt", "messages", "expect", "snapshot", "deterministic"] {
            if let Some(k) = probe.key(key) {
                self.error(
                    Diagnostic::new(k.loc, format!("`{key}` does not go with `dataset`"))
                        .expected("a dataset probe builds its prompts from its items and judges by `thresholds`"),
                );
            }
        }
        let f = self.fields(y, "dataset", DATASET)?;
        let format = match f.get("format") {
            Some(v) => self.one_of(v, "dataset.format", FORMATS)?,
            None => "qa".to_owned(),
        };
        let other = if format == "qa" { CODE_ONLY } else { QA_ONLY };
        for key in other {
            if let Some(k) = f.key(key) {
                self.error(Diagnostic::new(
                    k.loc,
                    format!("`dataset.{key}` does not go with `format: {format}`"),
                ));
            }
        }
        let file = self.required(&f, "file", "dataset")?;
        let path = self.file(file, "dataset file")?;
        let limit = match f.get("limit") {
            Some(v) => Some(self.count(v, "dataset.limit", 1)?),
            None => None,
        };
        let concurrency = f
            .get("concurrency")
            .map_or(Some(4), |v| self.count(v, "dataset.concurrency", 1))?;
        let (task, figure) = if format == "humaneval" {
            let task = self.code_task(&f, file, &path).map(DatasetTask::HumanEval);
            (task, "pass_at_1")
        } else {
            (
                self.qa_task(&f, file, &path).map(DatasetTask::Qa),
                "accuracy",
            )
        };
        let Some(t) = probe.get("thresholds") else {
            self.error(
                Diagnostic::new(probe.loc, "a dataset probe needs `thresholds`").expected(
                    format!("e.g. `thresholds: {{{figure}: \">= 0.6\"}}` or `{{{figure}.lower95: \">= 0.5\"}}`"),
                ),
            );
            return None;
        };
        let thresholds = self.accuracy_thresholds(t, figure);
        Some(DatasetProbe {
            path,
            task: task?,
            limit,
            concurrency,
            thresholds,
        })
    }

    fn qa_task(&mut self, f: &Fields<'_>, file: &Yaml, path: &Path) -> Option<QaTask> {
        let text_or = |d: &mut Self, key: &str, default: &str| {
            f.get(key).map_or(Some(default.to_owned()), |v| {
                d.text(v, &format!("dataset.{key}"))
            })
        };
        let question_field = text_or(self, "question_field", "question")?;
        let answer_field = text_or(self, "answer_field", "answer")?;
        let template = text_or(self, "template", TEMPLATE)?;
        if !template.contains("{question}") {
            let loc = f.key("template").map_or(f.loc, |k| k.loc);
            self.error(
                Diagnostic::new(loc, "dataset.template has no `{question}`")
                    .expected("a template such as `Question: {question}\\nAnswer:`"),
            );
        }
        let items = crate::suite::dataset::read(path)
            .and_then(|t| crate::suite::dataset::qa_items(&t, &question_field, &answer_field));
        let items = match items {
            Ok(i) => i,
            Err(e) => {
                self.error(
                    Diagnostic::new(file.loc, format!("invalid dataset {}: {e}", path.display()))
                        .expected(format!(
                            "JSONL lines with `{question_field}` and `{answer_field}`"
                        )),
                );
                return None;
            }
        };
        let shots = f
            .get("shots")
            .map_or(Some(0), |v| self.count(v, "dataset.shots", 0))?;
        if shots >= items.len() {
            let loc = f.key("shots").map_or(f.loc, |k| k.loc);
            self.error(Diagnostic::new(
                loc,
                format!(
                    "dataset.shots is {shots}, but the file has {} items: none would be scored",
                    items.len()
                ),
            ));
        }
        let extract = match f.get("extract") {
            None => Some(Extract::LastNumber),
            Some(v) if matches!(v.node, Node::Map(_)) => {
                let ef = self.fields(v, "dataset.extract", EXTRACT_REGEX)?;
                let re = self.required(&ef, "regex", "dataset.extract")?;
                self.regex(re, "dataset.extract.regex").map(Extract::Regex)
            }
            Some(v) => self.one_of(v, "dataset.extract", EXTRACTS).map(|e| {
                if e == "exact" {
                    Extract::Exact
                } else {
                    Extract::LastNumber
                }
            }),
        };
        Some(QaTask {
            items: std::sync::Arc::new(items),
            shots,
            template,
            extract: extract?,
        })
    }

    fn code_task(&mut self, f: &Fields<'_>, file: &Yaml, path: &Path) -> Option<CodeTask> {
        let problems = crate::suite::dataset::read(path)
            .and_then(|t| crate::suite::dataset::code_problems(&t));
        let problems = match problems {
            Ok(p) => p,
            Err(e) => {
                self.error(
                    Diagnostic::new(file.loc, format!("invalid dataset {}: {e}", path.display()))
                        .expected(
                            "HumanEval's JSONL (or .jsonl.gz): `task_id`, `prompt`, `entry_point` and `test` on each line",
                        ),
                );
                return None;
            }
        };
        let limits = self.program_limits(f, "dataset", vec!["python3".to_owned()], "probe.py")?;
        Some(CodeTask {
            problems: std::sync::Arc::new(problems),
            limits,
        })
    }

    /// The thresholds on `figure` (`accuracy`, `pass_at_1`) and its
    /// `.lower95`.
    fn accuracy_thresholds(&mut self, y: &Yaml, figure: &str) -> Vec<AccuracyThreshold> {
        let keys = if figure == "accuracy" {
            ACCURACY
        } else {
            PASS_AT_1
        };
        let Some(f) = self.fields(y, "thresholds", keys) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (key, value) in f.entries {
            let stat = match key.name.strip_prefix(figure) {
                Some("") => AccuracyStat::Point,
                Some(".lower95") => AccuracyStat::Lower95,
                _ => continue,
            };
            let Some(text) = self.text(value, &key.name) else {
                continue;
            };
            let parsed = [(">=", Op::Ge), ("<=", Op::Le), (">", Op::Gt), ("<", Op::Lt)]
                .into_iter()
                .find_map(|(sym, op)| text.trim().strip_prefix(sym).map(|r| (op, r.trim())))
                .and_then(|(op, r)| r.parse::<f64>().ok().map(|b| (op, b)))
                .filter(|(_, b)| (0.0..=1.0).contains(b));
            match parsed {
                Some((op, bound)) => out.push(AccuracyThreshold {
                    stat,
                    op,
                    bound,
                    loc: key.loc,
                }),
                None => self.error(
                    Diagnostic::new(value.loc, format!("invalid {figure} threshold `{text}`"))
                        .expected("a comparison with a fraction, such as `>= 0.62`"),
                ),
            }
        }
        if out.is_empty() && self.errors.is_empty() {
            self.error(
                Diagnostic::new(y.loc, format!("no {figure} threshold"))
                    .expected(format!("`{figure}` or `{figure}.lower95`")),
            );
        }
        out
    }

    fn input(&mut self, f: &Fields<'_>, api: Api) -> Option<Input> {
        let system = f.get("system").and_then(|v| self.text(v, "system"));
        let chat_only = |d: &mut Self, key: &str| {
            if api != Api::OpenAiChat
                && let Some(k) = f.key(key)
            {
                d.error(
                    Diagnostic::new(
                        k.loc,
                        format!(
                            "`{key}` needs `api: openai-chat`; this suite uses {}",
                            api.name()
                        ),
                    )
                    .expected("`prompt` alone for completion-style APIs"),
                );
            }
        };
        chat_only(self, "system");
        chat_only(self, "chat_template_kwargs");
        chat_only(self, "separate_reasoning");
        match (f.get("prompt"), f.get("messages")) {
            (Some(p), None) => {
                let prompt = self.text(p, "prompt")?;
                Some(Input::Prompt { system, prompt })
            }
            (None, Some(m)) => {
                chat_only(self, "messages");
                if f.get("system").is_some() {
                    self.error(Diagnostic::new(
                        m.loc,
                        "`system` and `messages` both given: put the system message in `messages`",
                    ));
                }
                let messages = self.items(m, "messages", |d, item| {
                    let mf = d.fields(item, "message", MESSAGE)?;
                    let role = d
                        .required(&mf, "role", "message")
                        .and_then(|v| d.one_of(v, "role", ROLES));
                    let content = d
                        .required(&mf, "content", "message")
                        .and_then(|v| d.text(v, "content"));
                    Some(Message {
                        role: role?,
                        content: content?,
                    })
                });
                Some(Input::Messages(messages))
            }
            (Some(p), Some(_)) => {
                self.error(Diagnostic::new(
                    p.loc,
                    "a probe has either `prompt` or `messages`, not both",
                ));
                None
            }
            (None, None) => {
                self.error(
                    Diagnostic::new(f.loc, "missing field `prompt` in probe")
                        .expected("`prompt: \"…\"` or a `messages:` list"),
                );
                None
            }
        }
    }

    fn assertion(&mut self, y: &Yaml) -> Option<Assertion> {
        let allowed = assertion_keys();
        let f = self.fields(y, "assertion", &allowed)?;
        let checks: Vec<&(Key, Yaml)> = f
            .entries
            .iter()
            .filter(|(k, _)| CHECKS.contains(&k.name.as_str()))
            .collect();
        let field = match f.get("in") {
            None => Some(Field::Content),
            Some(v) => self.pick(v, "assertion target (`in`)"),
        };
        let (key, value) = match checks.as_slice() {
            [one] => (&one.0, &one.1),
            [] if f
                .entries
                .iter()
                .all(|(k, _)| allowed.contains(&k.name.as_str())) =>
            {
                self.error(
                    Diagnostic::new(y.loc, "assertion has no check")
                        .expected(format!("one of {}", quoted_list(CHECKS))),
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
                    let nf = self.fields(v, "number", NUMBER)?;
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
                    let jf = self.fields(v, "json", JSON)?;
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
            _ => unreachable!("only CHECKS keys reach here"),
        })
    }
}

impl Decoder<'_> {
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
        let f = self.fields(v, "not_degenerate", DEGENERATE)?;
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
        let f = self.fields(v, "code", CODE)?;
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
    fn program_limits(
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
