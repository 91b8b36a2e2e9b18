//! `cargo test --test sglang_suite`: the suites under `suites/` (or the files and
//! directories in `SERVEGATE_SUITES`) as libtest trials;
//! `SERVEGATE_TARGET=URL` points them at a real server, otherwise each
//! suite's `base_url` decides. These are servegate's own tests: their runs
//! and history go under `target/tmp/servegate/` (or `SERVEGATE_OUT`), never
//! into the checkout's `target/servegate/`, where `servegate run` keeps its
//! user's runs. In a project of your own, `servegate::test_main` writes
//! there (`examples/consumer`).

use std::process::ExitCode;

fn main() -> ExitCode {
    servegate::test_main_writing_to(
        env!("CARGO_MANIFEST_DIR"),
        concat!(env!("CARGO_TARGET_TMPDIR"), "/servegate"),
    )
}
