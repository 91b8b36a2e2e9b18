//! A command's standard output and error through one pipe: servegate's own
//! lines go to stderr and libtest's to stdout, and a test that checks their
//! order reads both as they were printed.

use std::io::Read as _;
use std::process::Command;

/// Runs `cmd` (taken whole, so that no copy of the pipe's write end stays
/// open here) and returns its exit code and everything it printed.
pub fn merged(mut cmd: Command) -> (Option<i32>, String) {
    let (mut reader, writer) = std::io::pipe().expect("a pipe");
    cmd.stdout(writer.try_clone().expect("a second write end"))
        .stderr(writer);
    let mut child = cmd.spawn().expect("the command starts");
    drop(cmd);
    let mut out = Vec::new();
    reader.read_to_end(&mut out).expect("its output reads");
    let status = child.wait().expect("it ends");
    (status.code(), String::from_utf8_lossy(&out).into_owned())
}
