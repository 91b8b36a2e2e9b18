//! Code datasets in `HumanEval`'s format (`dataset.format: humaneval`): each
//! problem is a function's imports, signature and docstring (`prompt`), the
//! function's name (`entry_point`) and a `test` defining `check(candidate)`.
//! The program is assembled as `HumanEval` does — the prompt, then the answer,
//! then the test and `check(<entry_point>)` — and runs in the code-probe
//! sandbox with its limits. Passing means the program exits 0.

use super::accuracy::ItemResult;
use super::code::{self, CodeRun};
use super::sandbox;
use crate::suite::{CodeProblem, ProgramLimits};

/// What a chat model is asked before the problem.
pub const INSTRUCTION: &str = "Complete the following Python function. Answer with the \
    complete function (imports included) in one ```python block.";

/// Where a raw completion stops being the function's body: `HumanEval`'s own
/// stop sequences and the end of a fenced block (an instruction-tuned model
/// closes the fence it thinks it is in), sent with each request and applied
/// to the answer again (a server may ignore some).
pub const STOPS: [&str; 6] = ["\nclass", "\ndef", "\n#", "\nif", "\nprint", "\n```"];

/// The prompt of a problem: the raw prompt for a completions API, an
/// instruction and the prompt in a fenced block for a chat API.
pub fn prompt(problem: &CodeProblem, chat: bool) -> String {
    if chat {
        format!("{INSTRUCTION}\n\n```python\n{}```", problem.prompt)
    } else {
        problem.prompt.clone()
    }
}

/// The program run for an answer, and where its code came from. A chat
/// answer's code block follows the whole prompt (the prompt's function,
/// its docstring for a body, is redefined by the answer's; a block holding
/// only the body continues it); a completion continues the prompt up to
/// the first stop sequence.
pub fn program(
    problem: &CodeProblem,
    answer: &str,
    chat: bool,
    seal: Option<&code::Seal>,
) -> (String, String) {
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
    let (future, prompt) = code::split_future(&problem.prompt);
    let program = format!(
        "{future}{}{prompt}{code}\n\n\n{}\n\ncheck({})\n{}",
        seal.map_or("", code::Seal::head),
        problem.test,
        problem.entry_point,
        seal.map_or("", code::Seal::tail),
    );
    (program, source)
}

/// Runs the answer's program and grades it; `answer` is the request's
/// error when it failed.
pub fn grade(
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
    let seal = code::Seal::new("python");
    let (program, _source) = program(problem, answer, chat, seal.as_ref());
    let outcome = match sandbox::run(&program, limits) {
        Ok(o) => o,
        Err(e) => {
            item.failure = Some(format!("not run: {e}"));
            return item;
        }
    };
    let stopped = outcome.stopped.as_ref().map(|s| code::stop_line(s, limits));
    item.run = Some(CodeRun {
        layers: outcome.layers.clone(),
        elapsed_s: outcome.elapsed.as_secs_f64(),
        contained: stopped.iter().chain(&outcome.contained).cloned().collect(),
    });
    item.correct = outcome.passed() && seal.as_ref().is_none_or(|s| s.held(&outcome.stdout));
    item.failure = if item.correct {
        None
    } else if let Some(s) = stopped {
        Some(s)
    } else {
        let line = code::traceback_line(&outcome.stderr, &limits.file_name)
            .and_then(|n| program.lines().nth(n.checked_sub(1)?))
            .map(str::trim);
        let last = outcome.stderr.lines().rev().find(|l| !l.trim().is_empty());
        let why = match (line, last) {
            (Some(l), Some(e)) => format!("{e} at `{l}`"),
            (Some(l), None) => format!("failed at `{l}`"),
            (None, Some(e)) => e.trim().to_owned(),
            (None, None) => "the program failed without a message".to_owned(),
        };
        // Exited 0 without the seal's line: its code ended the run.
        Some(match (outcome.passed(), line.is_some() || last.is_some()) {
            (true, true) => format!("{}; {why}", code::Seal::BROKEN),
            (true, false) => code::Seal::BROKEN.to_owned(),
            (false, _) => why,
        })
    };
    item.extracted = Some(program);
    item
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
            None,
        );
        assert!(p.contains("\"\"\"Sum.\"\"\"\n    return sum(xs)\n"), "{p}");
        assert!(p.find("return sum").unwrap() < p.find("def check(").unwrap());
        assert!(!p.contains("def other"), "{p}");
        assert!(p.ends_with("check(total)\n"));
    }

    #[test]
    fn a_chat_answer_redefines_the_function_or_continues_its_body() {
        let whole = "Here:\n```python\ndef total(xs):\n    return sum(xs)\n```\n";
        let (p, source) = program(&problem(), whole, true, None);
        assert_eq!(source, "the ```python block");
        assert!(
            p.contains("\"\"\"Sum.\"\"\"\n\n\ndef total(xs):\n    return sum(xs)\n"),
            "{p}"
        );
        let body = "```python\n    return sum(xs)\n```";
        let (p, _) = program(&problem(), body, true, None);
        assert!(p.contains("\"\"\"Sum.\"\"\"\n    return sum(xs)\n"), "{p}");
        assert!(prompt(&problem(), true).starts_with(INSTRUCTION));
        assert_eq!(prompt(&problem(), false), problem().prompt);
    }
}
