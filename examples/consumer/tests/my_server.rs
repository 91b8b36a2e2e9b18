//! `cargo test --test my_server`: every suite under `suites/` as libtest
//! trials (`SERVEGATE_TARGET=URL` points them at a server of yours).
fn main() -> std::process::ExitCode {
    servegate::test_main(env!("CARGO_MANIFEST_DIR"))
}
