use super::*;

#[test]
fn secrets_in_argv_are_redacted() {
    let argv: Vec<String> = [
        "sglang",
        "--api-key",
        "s3cret",
        "--hf-token=abc",
        "--tp-size",
        "8",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    assert_eq!(
        redact_argv(&argv),
        [
            "sglang",
            "--api-key",
            "<redacted>",
            "--hf-token=<redacted>",
            "--tp-size",
            "8"
        ]
    );
    assert_eq!(
        shell_line(&["a b".to_owned(), "it's".to_owned(), "{port}".to_owned()]),
        r"'a b' 'it'\''s' '{port}'"
    );
}
