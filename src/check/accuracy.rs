//! Dataset probes: question/answer JSONL (few-shot prompts, answer
//! extraction, grading) and, through `humaneval`, code problems; the Wilson
//! interval, and the verdict on `accuracy` / `pass_at_1` thresholds and
//! their `.lower95`.

use std::fmt::Write as _;

use serde::Serialize;

use super::assertion::last_number;
use super::code::CodeRun;
use super::message::Message;
use crate::client::error::excerpt;
use crate::suite::{AccuracyStat, DatasetProbe, DatasetTask, Extract, QaItem, QaTask, SourceFile};

/// The reference answer as compared: GSM8K's `reasoning #### 42` is `42`.
pub fn reference(answer: &str) -> &str {
    answer.rsplit_once("####").map_or(answer, |(_, a)| a).trim()
}

/// The prompt of `item`: the examples, each answered, then the question.
pub fn prompt(qa: &QaTask, item: &QaItem) -> String {
    let fill = |q: &str| qa.template.replace("{question}", q);
    let mut out = String::new();
    for shot in qa.items.iter().take(qa.shots) {
        let _ = write!(
            out,
            "{} {}\n\n",
            fill(&shot.question),
            reference(&shot.answer)
        );
    }
    out.push_str(&fill(&item.question));
    out
}

/// The items scored: after the first `skip` (the examples), at most
/// `limit`.
pub fn scored<T>(items: &[T], skip: usize, limit: Option<usize>) -> &[T] {
    let rest = &items[skip.min(items.len())..];
    &rest[..limit.map_or(rest.len(), |l| l.min(rest.len()))]
}

/// What was read from an answer, and whether it is right.
pub(crate) fn grade(extract: &Extract, answer: &str, item: &QaItem) -> (Option<String>, bool) {
    let want = reference(&item.answer);
    match extract {
        Extract::LastNumber => {
            let got = last_number(answer);
            let right = match (got, last_number(want)) {
                (Some(g), Some(w)) => (g - w).abs() <= 1e-9 * w.abs().max(1.0),
                _ => false,
            };
            (got.map(|g| g.to_string()), right)
        }
        Extract::Exact => {
            let got = answer.trim();
            (Some(got.to_owned()), got == want)
        }
        Extract::Regex(re) => {
            let got = re
                .captures(answer)
                .and_then(|c| c.get(1).or_else(|| c.get(0)));
            let got = got.map(|m| m.as_str().trim().to_owned());
            let right = got.as_deref() == Some(want);
            (got, right)
        }
    }
}

/// Grades one question's answer, or records its request's error.
pub(crate) fn grade_item(
    extract: &Extract,
    item: &QaItem,
    answer: Result<crate::client::Completion, crate::client::CallError>,
) -> ItemResult {
    let expected = reference(&item.answer).to_owned();
    let (extracted, correct, answer, error) = match answer {
        Ok(c) => {
            let (extracted, correct) = grade(extract, &c.content, item);
            (
                extracted,
                correct,
                crate::secrets::cut(&c.content, 300).0,
                false,
            )
        }
        Err(e) => (None, false, e.to_string(), true),
    };
    ItemResult {
        line: item.line,
        expected,
        extracted,
        correct,
        answer,
        error,
        task_id: None,
        failure: None,
        run: None,
    }
}

/// One graded item, as the run record keeps it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ItemResult {
    /// Its line in the dataset.
    pub line: usize,
    /// The reference answer.
    pub expected: String,
    /// What was read from the answer (`None`: nothing could be read).
    pub extracted: Option<String>,
    /// Whether it was right.
    pub correct: bool,
    /// The answer (up to 300 characters), or the request's error.
    pub answer: String,
    /// Whether the request failed.
    pub error: bool,
    /// The problem's id (code datasets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Why the program failed (code datasets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The program's run in the sandbox (code datasets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<CodeRun>,
}

/// The Wilson score interval at 95% for `k` successes in `n`.
pub(crate) fn wilson95(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = 1.959_964_f64;
    #[expect(clippy::cast_precision_loss, reason = "dataset sizes are small")]
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The sandbox time of a code dataset's programs: in all and a problem.
pub(crate) fn sandbox_time(results: &[ItemResult]) -> Option<String> {
    let runs: Vec<f64> = results
        .iter()
        .filter_map(|r| r.run.as_ref().map(|r| r.elapsed_s))
        .collect();
    if runs.is_empty() {
        return None;
    }
    let total: f64 = runs.iter().sum();
    #[expect(clippy::cast_precision_loss, reason = "dataset sizes are small")]
    let each = total / runs.len() as f64;
    Some(format!(
        "sandbox time {total:.1} s for {} programs, {:.0?} each",
        runs.len(),
        std::time::Duration::from_secs_f64(each)
    ))
}

/// The verdict on the dataset's thresholds; `Err` lists what failed and
/// the first wrong items.
pub fn judge(file: &SourceFile, ds: &DatasetProbe, results: &[ItemResult]) -> Result<(), Message> {
    let n = results.len();
    let k = results.iter().filter(|r| r.correct).count();
    let errors = results.iter().filter(|r| r.error).count();
    #[expect(clippy::cast_precision_loss, reason = "dataset sizes are small")]
    let accuracy = if n == 0 { 0.0 } else { k as f64 / n as f64 };
    let (lo, hi) = wilson95(k, n);
    let figure = ds.task.figure();
    let summary = format!(
        "{figure} {accuracy:.3} ({k}/{n} {}, Wilson 95% interval {lo:.3}–{hi:.3}{}){}",
        if matches!(ds.task, DatasetTask::Qa(_)) {
            "right"
        } else {
            "passed"
        },
        if errors > 0 {
            format!(", {errors} request(s) failed")
        } else {
            String::new()
        },
        sandbox_time(results).map_or_else(String::new, |t| format!("; {t}"))
    );
    let mut out = Message::new();
    if errors == n {
        out.error(format_args!("could not measure: all {n} requests failed"));
    }
    for t in &ds.thresholds {
        let (name, value) = match t.stat {
            AccuracyStat::Point => (figure.to_owned(), accuracy),
            AccuracyStat::Lower95 => (format!("{figure}.lower95"), lo),
        };
        if errors < n && t.op.holds(value, t.bound) {
            continue;
        }
        out.error(format_args!(
            "threshold failed: {name} {} {}",
            t.op.symbol(),
            t.bound
        ))
        .at(file, t.loc);
        let _ = writeln!(out, "measured: {summary}");
    }
    if out.is_empty() {
        return Ok(());
    }
    let wrong: Vec<&ItemResult> = results.iter().filter(|r| !r.correct).collect();
    let _ = writeln!(
        out,
        "\nfirst wrong items ({} of {}), from {}:",
        wrong.len().min(5),
        wrong.len(),
        ds.path.display()
    );
    for r in wrong.iter().take(5) {
        match &ds.task {
            DatasetTask::Qa(qa) => {
                let item = qa.items.iter().find(|i| i.line == r.line);
                let _ = writeln!(
                    out,
                    "  line {}: {}\n    expected {:?}, read {}; answer: {}",
                    r.line,
                    item.map_or_else(String::new, |i| excerpt(&i.question, 120)),
                    r.expected,
                    r.extracted
                        .as_deref()
                        .map_or_else(|| "nothing".to_owned(), |e| format!("{e:?}")),
                    excerpt(&r.answer, 200)
                );
            }
            DatasetTask::HumanEval(_) => {
                let _ = writeln!(
                    out,
                    "  {} (line {}): {}\n    answer: {}",
                    r.task_id.as_deref().unwrap_or("?"),
                    r.line,
                    r.failure.as_deref().unwrap_or("failed"),
                    excerpt(&r.answer, 200)
                );
            }
        }
    }
    Err(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(q: &str, a: &str) -> QaItem {
        QaItem {
            question: q.into(),
            answer: a.into(),
            line: 1,
        }
    }

    #[test]
    fn grading_reads_numbers_text_and_groups() {
        let i = item("q", "Reasoning… #### 1,200");
        assert_eq!(
            grade(&Extract::LastNumber, "So it is 1200.", &i),
            (Some("1200".into()), true)
        );
        assert!(!grade(&Extract::LastNumber, "1201", &i).1);
        assert_eq!(grade(&Extract::LastNumber, "no idea", &i), (None, false));
        assert!(grade(&Extract::Exact, " Paris \n", &item("q", "Paris")).1);
        let re = Extract::Regex(regex::Regex::new(r"answer is (\w+)").unwrap());
        assert!(grade(&re, "The answer is B.", &item("q", "B")).1);
    }

    #[test]
    fn wilson_interval() {
        let (lo, hi) = wilson95(8, 10);
        assert!(
            (lo - 0.490).abs() < 0.001 && (hi - 0.943).abs() < 0.001,
            "{lo} {hi}"
        );
        assert_eq!(wilson95(0, 0), (0.0, 1.0));
        let (lo, _) = wilson95(0, 5);
        assert!(lo.abs() < 1e-12);
    }
}
