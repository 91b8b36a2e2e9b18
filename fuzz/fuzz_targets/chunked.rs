//! The chunked-body decoder of the HTTP/1.1 transport on arbitrary bytes,
//! split at an arbitrary point: it never panics, never yields more bytes
//! than it was given, and what it yields (or the error) does not depend on
//! where the bytes were split.
#![no_main]

use libfuzzer_sys::fuzz_target;
use servegate::client::body::decode_chunked;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, bytes)) = data.split_first() else {
        return;
    };
    let at = usize::from(cut) % (bytes.len() + 1);
    let whole = decode_chunked(&[bytes]);
    if let Ok((body, _)) = &whole {
        assert!(body.len() <= bytes.len());
    }
    let split = decode_chunked(&[&bytes[..at], &bytes[at..]]);
    assert_eq!(whole, split, "split at {at}");
});
