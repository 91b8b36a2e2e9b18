//! The SSE parser on arbitrary bytes, split at an arbitrary point: it never
//! panics, and the events do not depend on where the bytes were split.
#![no_main]

use libfuzzer_sys::fuzz_target;
use servegate::client::sse::SseParser;

fn events(pieces: &[&[u8]]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut p = SseParser::new();
    let mut out = Vec::new();
    for piece in pieces {
        p.feed(piece);
        while let Some(e) = p.next_event() {
            out.push((e.event.to_vec(), e.data.to_vec()));
        }
    }
    if let Some(e) = p.finish() {
        out.push((e.event.to_vec(), e.data.to_vec()));
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, bytes)) = data.split_first() else {
        return;
    };
    let at = usize::from(cut) % (bytes.len() + 1);
    let whole = events(&[bytes]);
    let split = events(&[&bytes[..at], &bytes[at..]]);
    assert_eq!(whole, split, "split at {at}");
});
