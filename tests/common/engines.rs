//! What the binaries that run real engines share (`engine.rs`, llama.cpp;
//! `servers.rs`, SGLang and vLLM): a run's verdict against its expected
//! exit code and output, and whether a server they started is healthy.
//! Included on its own (`#[path]`) by those binaries.

use libtest_mimic::Failed;

/// `Ok` when the run ended with `code` and printed every needle; else the
/// failure, with servegate's whole output.
pub fn expect(
    got: Option<i32>,
    out: &str,
    code: i32,
    why: &str,
    needles: &[&str],
) -> Result<(), Failed> {
    let fail = |what: String| Err(format!("{what}\n--- servegate's output ---\n{out}").into());
    if got != Some(code) {
        return fail(format!("{why} (exit {got:?}, expected {code})"));
    }
    match needles.iter().find(|n| !out.contains(**n)) {
        Some(missing) => fail(format!("`{missing}` not in the output")),
        None => Ok(()),
    }
}

/// Whether `GET /health` on a loopback port answers 200.
pub fn healthy(port: u16) -> bool {
    use std::io::{Read as _, Write as _};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
    let mut answer = String::new();
    s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_ok()
        && s.read_to_string(&mut answer).is_ok()
        && answer.starts_with("HTTP/1.1 200")
}
