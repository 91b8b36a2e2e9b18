//! `cargo test --test my_server`: every suite under `suites/` as libtest
//! trials (`SERVEGATE_TARGET=URL` points them at a server of yours). Runs,
//! reports and the run history go to the project's `target/servegate/`
//! (this example's `snapshots/` makes it a project of its own).
fn main() -> std::process::ExitCode {
    servegate::test_main(env!("CARGO_MANIFEST_DIR"))
}
