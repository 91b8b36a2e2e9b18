//! Helpers shared by the tests that read the harness's output.

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
