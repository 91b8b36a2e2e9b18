//! A program's output, read through the pipes it was given (never by path,
//! so nothing it plants in its directory is followed): at most `OUTPUT_CAP`
//! bytes of each stream, of which the last `KEEP` are kept. Each stream is
//! read on a thread of its own that reports once, at its end or at the cap;
//! a thread whose pipe a stray process still holds is left behind, never
//! waited for.

use std::io::Read;
use std::sync::mpsc::Sender;

use super::OUTPUT_CAP;

/// How much of the end of each stream is kept.
const KEEP: usize = 64 * 1024;

/// How a stream ended.
#[derive(Debug)]
pub(super) struct Finished {
    /// `stdout` or `stderr`.
    pub stream: &'static str,
    /// The last `KEEP` bytes read, as text.
    pub text: String,
    /// Whether it passed `OUTPUT_CAP` (reading stopped there, the pipe was
    /// closed).
    pub capped: bool,
}

/// Reads `pipe` on a thread named after `stream`; sends `wrap(Finished)` on
/// `events` when it ends or passes the cap.
pub(super) fn read<E: Send + 'static>(
    stream: &'static str,
    mut pipe: impl Read + Send + 'static,
    events: Sender<E>,
    wrap: fn(Finished) -> E,
) -> Result<(), String> {
    std::thread::Builder::new()
        .name(format!("sandbox-{stream}"))
        .spawn(move || {
            let mut kept: Vec<u8> = Vec::new();
            let mut total: u64 = 0;
            let mut buf = vec![0u8; 64 * 1024];
            let capped = loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break false,
                    Ok(n) => {
                        total += n as u64;
                        kept.extend_from_slice(&buf[..n]);
                        if kept.len() > 2 * KEEP {
                            kept.drain(..kept.len() - KEEP);
                        }
                        if total > OUTPUT_CAP {
                            break true;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break false,
                }
            };
            // Closing the pipe now: a writer past the cap gets EPIPE at once.
            drop(pipe);
            let start = kept.len().saturating_sub(KEEP);
            let text = String::from_utf8_lossy(&kept[start..]).into_owned();
            let _ = events.send(wrap(Finished {
                stream,
                text,
                capped,
            }));
        })
        .map(drop)
        .map_err(|e| format!("failed to start a thread reading {stream}: {e}"))
}

/// As [`read`], for a stream that may have gone elsewhere (the program's
/// stdout given to the test runner): none ends at once, empty.
pub(super) fn read_or_none<E: Send + 'static>(
    stream: &'static str,
    pipe: Option<impl Read + Send + 'static>,
    events: Sender<E>,
    wrap: fn(Finished) -> E,
) -> Result<(), String> {
    if let Some(pipe) = pipe {
        return read(stream, pipe, events, wrap);
    }
    let _ = events.send(wrap(Finished {
        stream,
        text: String::new(),
        capped: false,
    }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_end_and_stops_at_the_cap() {
        let (tx, rx) = std::sync::mpsc::channel();
        read("stdout", &b"hello\nworld\n"[..], tx.clone(), |f| f).unwrap();
        let f = rx.recv().unwrap();
        assert_eq!((f.text.as_str(), f.capped), ("hello\nworld\n", false));
        // An endless stream: reading stops just past the cap.
        read("stderr", std::io::repeat(b'x'), tx, |f| f).unwrap();
        let f = rx.recv().unwrap();
        assert!(f.capped);
        assert_eq!(f.text.len(), KEEP);
    }
}
