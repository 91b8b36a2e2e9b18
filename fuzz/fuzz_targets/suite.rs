//! The suite loader on arbitrary text: an error or a suite, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = servegate::suite::load_text(std::path::Path::new("suites/fuzz.yaml"), text, &|_| None);
});
