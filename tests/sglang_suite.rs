//! `cargo test --test sglang_suite`: the suites under `suites/` (or the files and
//! directories in `SERVEGATE_SUITES`) as libtest trials;
//! `SERVEGATE_TARGET=URL` points them at a real server, otherwise each
//! suite's `base_url` decides.

use std::process::ExitCode;

fn main() -> ExitCode {
    servegate::test_main(env!("CARGO_MANIFEST_DIR"))
}
