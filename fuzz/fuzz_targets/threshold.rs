//! The threshold expression parser on arbitrary text, for every metric key:
//! an error or a threshold, never a panic; a threshold prints back to text
//! that parses to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use servegate::suite::metric::all_keys;
use servegate::suite::threshold::parse_comparison;

fuzz_target!(|text: &str| {
    for key in all_keys() {
        let Ok(key) = key.parse() else {
            continue;
        };
        if let Ok(t) = parse_comparison(key, text) {
            let again = t.to_string();
            let op_and_bound = again.split_once(' ').map_or("", |(_, rest)| rest);
            if let Ok(back) = parse_comparison(key, op_and_bound) {
                assert_eq!(back.op, t.op, "{text:?} → {again:?}");
            }
        }
    }
});
