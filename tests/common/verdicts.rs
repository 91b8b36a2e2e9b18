//! Reading what a run printed: a trial's verdict, its failure text, and
//! needles that must be in a text.
#![allow(dead_code)] // each test binary that includes this module uses part of it

/// The verdict libtest printed for trial `name` (`ok`, `FAILED`): on its
/// `test <name> ... ` line, or, where the trial printed lines of its own
/// after that, on the first line that is a verdict alone.
pub fn verdict<'a>(out: &'a str, name: &str) -> &'a str {
    let prefix = format!("test {name} ");
    let start = out
        .match_indices(&prefix)
        .map(|(at, _)| at)
        .find(|&at| at == 0 || out[..at].ends_with('\n'))
        .or_else(|| out.find(&prefix))
        .unwrap_or_else(|| panic!("no trial {name} in:\n{out}"));
    let rest = &out[start..];
    let is_verdict = |v: &&str| *v == "ok" || *v == "FAILED";
    let first = rest.lines().next().unwrap_or("");
    first
        .rsplit("... ")
        .next()
        .filter(is_verdict)
        .or_else(|| rest.lines().skip(1).find(is_verdict))
        .unwrap_or_else(|| panic!("no verdict for {name} in:\n{out}"))
}

/// The failure text libtest prints for `name`.
pub fn failure_of(out: &str, name: &str) -> String {
    let start = out
        .find(&format!("---- {name} ----\n"))
        .unwrap_or_else(|| panic!("no failure section for {name} in:\n{out}"));
    let body = &out[start + name.len() + 11..];
    let end = body
        .find("\n\n---- ")
        .or_else(|| body.find("\n\nfailures:"))
        .unwrap_or(body.len());
    body[..end].to_owned()
}

/// Whether a gate's failure text is the self-check's, blaming the client
/// kept from its CPU (a loaded machine): the figures could not be vouched
/// for, a true red. The two wordings: the threads waited for a CPU over
/// the window, or were kept from it when a request went out or tokens came.
pub fn client_kept_from_cpu(failure: &str) -> bool {
    failure.contains("the client could have changed this gate's verdict")
        && (failure.contains("its threads waited for a CPU up to")
            || failure.contains(
                "its threads were kept from a CPU when a request went out or tokens came",
            ))
}

/// Asserts that `text` contains every needle, showing the text when not.
pub fn assert_has(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(text.contains(needle), "`{needle}` not in:\n{text}");
    }
}
