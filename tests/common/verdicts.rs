//! Reading what a run printed: a trial's verdict, its failure text, and
//! needles that must be in a text.

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

/// Asserts that `text` contains every needle, showing the text when not.
pub fn assert_has(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(text.contains(needle), "`{needle}` not in:\n{text}");
    }
}
