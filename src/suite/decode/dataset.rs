//! Decoding a dataset probe's `dataset:` and `thresholds`: a question/answer
//! file (`format: qa`, its template, shots and extraction) or `HumanEval`'s
//! code problems (`format: humaneval`), and the accuracy bounds.

use std::path::Path;

use super::schema::probe::{ACCURACY, DATASET, EXTRACT_REGEX, PASS_AT_1};
use super::{Decoder, Fields};
use crate::suite::diagnostics::Diagnostic;
use crate::suite::model::{
    AccuracyStat, AccuracyThreshold, CodeTask, DatasetProbe, DatasetTask, Extract, QaTask,
};
use crate::suite::node::{Node, Yaml};
use crate::suite::threshold::Op;

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

/// The default prompt of a dataset item.
const TEMPLATE: &str = "Question: {question}\nAnswer:";

/// How a dataset answer is read: by name, or `{regex}`.
pub(super) const EXTRACTS: &[&str] = &["last_number", "exact"];

impl Decoder<'_> {
    pub(super) fn dataset_probe(&mut self, probe: &Fields<'_>, y: &Yaml) -> Option<DatasetProbe> {
        for key in [
            "prompt",
            "messages",
            "images",
            "turns",
            "expect",
            "snapshot",
            "deterministic",
        ] {
            if let Some(k) = probe.key(key) {
                self.error(
                    Diagnostic::new(k.loc, format!("`{key}` does not go with `dataset`"))
                        .expected("a dataset probe builds its prompts from its items and judges by `thresholds`"),
                );
            }
        }
        let f = self.fields(y, "dataset", &[DATASET])?;
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
                let ef = self.fields(v, "dataset.extract", &[EXTRACT_REGEX])?;
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
        let table = if figure == "accuracy" {
            ACCURACY
        } else {
            PASS_AT_1
        };
        let Some(f) = self.fields(y, "thresholds", &[table]) else {
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
}
