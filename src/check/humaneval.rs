//! Code datasets in `HumanEval`'s format (`dataset.format: humaneval`): each
//! problem is a function's imports, signature and docstring (`prompt`), the
//! function's name (`entry_point`) and a `test` defining `check(candidate)`.
//! The program is the prompt, then the answer, as `HumanEval` assembles it;
//! it runs in the code-probe sandbox with its limits, and the test's
//! `check(<entry_point>)` runs apart, in servegate's test runner
//! (`pyrunner`), with `candidate` the program's function. The runner runs
//! the prompt too (trusted: the dataset's), so the test's helpers and
//! imports are its own, not the program's. Passing means `check` returned
//! and the program ended cleanly.

use super::accuracy::ItemResult;
use super::code;
use super::pyrunner;
use crate::suite::{CodeProblem, ProgramLimits};

/// What a chat model is asked before the problem.
pub(crate) const INSTRUCTION: &str = "Complete the following Python function. Answer with the \
    complete function (imports included) in one ```python block.";

/// Where a raw completion stops being the function's body: `HumanEval`'s own
/// stop sequences and the end of a fenced block (an instruction-tuned model
/// closes the fence it thinks it is in), sent with each request and applied
/// to the answer again (a server may ignore some).
pub(crate) const STOPS: [&str; 6] = ["\nclass", "\ndef", "\n#", "\nif", "\nprint", "\n```"];

/// The prompt of a problem: the raw prompt for a completions API, an
/// instruction and the prompt in a fenced block for a chat API.
pub fn prompt(problem: &CodeProblem, chat: bool) -> String {
    if chat {
        format!("{INSTRUCTION}\n\n```python\n{}```", problem.prompt)
    } else {
        problem.prompt.clone()
    }
}

/// The program's code for an answer, and where the answer's code came
/// from. A chat answer's code block follows the whole prompt (the prompt's
/// function, its docstring for a body, is redefined by the answer's; a
/// block holding only the body continues it); a completion continues the
/// prompt up to the first stop sequence.
pub fn program(problem: &CodeProblem, answer: &str, chat: bool) -> (String, String) {
    let (code, source) = if chat {
        let (code, source) = code::extract(answer, "python");
        let defines = code.contains(&format!("def {}(", problem.entry_point));
        let joint = if defines { "\n\n" } else { "" };
        (format!("{joint}{code}"), source)
    } else {
        let end = STOPS
            .iter()
            .filter_map(|s| answer.find(s))
            .min()
            .unwrap_or(answer.len());
        (
            answer[..end].to_owned(),
            "the completion, up to the first stop sequence".to_owned(),
        )
    };
    (format!("{}{code}\n", problem.prompt), source)
}

/// Runs the answer's program and grades it; `answer` is the request's
/// error when it failed.
pub(crate) fn grade(
    problem: &CodeProblem,
    answer: Result<&str, String>,
    chat: bool,
    limits: &ProgramLimits,
) -> ItemResult {
    let mut item = ItemResult {
        line: problem.line,
        expected: format!("check({}) passes", problem.entry_point),
        extracted: None,
        correct: false,
        answer: String::new(),
        error: false,
        task_id: Some(problem.task_id.clone()),
        failure: None,
        run: None,
    };
    let answer = match answer {
        Ok(a) => a,
        Err(e) => {
            item.answer.clone_from(&e);
            item.error = true;
            item.failure = Some(format!("the request failed: {e}"));
            return item;
        }
    };
    item.answer = crate::secrets::cut(answer, 300).0;
    let (code, _source) = program(problem, answer, chat);
    let program = pyrunner::Program::new(&code);
    let entry = [problem.entry_point.clone()];
    let tests = [
        problem.test.clone(),
        format!("check({})", problem.entry_point),
    ];
    let job = pyrunner::Job {
        prelude: &problem.prompt,
        bind: Some(&entry),
        tests: &tests,
    };
    let run = match pyrunner::run(&program, &job, limits) {
        Ok(run) => run,
        Err(e) => {
            item.failure = Some(format!("not run: {e}"));
            return item;
        }
    };
    item.run = Some(code::code_run(&run.outcome, limits));
    item.correct = run.passed();
    item.failure = (!item.correct).then(|| failure(&run, &tests, limits));
    item.extracted = Some(program.text);
    item
}

/// Why an item failed, in one line: the error, the test line it ended at
/// and the last call's answer, or how the program ended and where.
fn failure(run: &pyrunner::Run, tests: &[String], limits: &ProgramLimits) -> String {
    let Some(f) = &run.report.failed else {
        return run.why(tests, limits).join("; ");
    };
    let mut line = match &run.outcome.stopped {
        Some(stop) => stop.describe(limits),
        None if f.ended => run.why(tests, limits).last().cloned().unwrap_or_default(),
        None => f.error.lines().last().unwrap_or("").to_owned(),
    };
    if let Some(at) = &f.line {
        line = format!("{line} at `{at}`");
    }
    if let Some(call) = f.calls.last().filter(|_| !f.ended) {
        line = format!("{line} ({call})");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem() -> CodeProblem {
        CodeProblem {
            task_id: "T/0".into(),
            prompt: "from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    \"\"\"Sum.\"\"\"\n"
                .into(),
            entry_point: "total".into(),
            test: "def check(candidate):\n    assert candidate([]) == 0\n    assert candidate([1, 2]) == 3\n"
                .into(),
            line: 1,
        }
    }

    #[test]
    fn a_completion_continues_the_prompt_up_to_the_first_stop() {
        let (p, _) = program(
            &problem(),
            "    return sum(xs)\n\n\ndef other():\n    pass\n",
            false,
        );
        assert!(p.contains("\"\"\"Sum.\"\"\"\n    return sum(xs)\n"), "{p}");
        // The test is not the program's: it runs apart.
        assert!(
            !p.contains("def check(") && !p.contains("check(total)"),
            "{p}"
        );
        assert!(!p.contains("def other"), "{p}");
    }

    #[test]
    fn a_chat_answer_redefines_the_function_or_continues_its_body() {
        let whole = "Here:\n```python\ndef total(xs):\n    return sum(xs)\n```\n";
        let (p, source) = program(&problem(), whole, true);
        assert_eq!(source, "the ```python block");
        assert!(
            p.contains("\"\"\"Sum.\"\"\"\n\n\ndef total(xs):\n    return sum(xs)\n"),
            "{p}"
        );
        let body = "```python\n    return sum(xs)\n```";
        let (p, _) = program(&problem(), body, true);
        assert!(p.contains("\"\"\"Sum.\"\"\"\n    return sum(xs)\n"), "{p}");
        assert!(prompt(&problem(), true).starts_with(INSTRUCTION));
        assert_eq!(prompt(&problem(), false), problem().prompt);
    }
}
