//! A launched server's log file: written by servegate from the server's
//! output, a line at a time with every secret scrubbed (the raw output never
//! reaches the disk: SGLang logs its `server_args`, API key included); its
//! tail for failure messages; a scan of new lines for fatal patterns.

use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use regex::Regex;

/// How many lines failure messages quote.
pub(crate) const TAIL_LINES: usize = 40;

/// The most of a server's output one log keeps; what follows is counted.
const MAX_LOG: u64 = 256 << 20;

/// A line longer than this is written in pieces.
const MAX_LINE: usize = 64 << 10;

/// The log file, shared by the copiers of stdout and stderr.
struct Sink {
    file: std::fs::File,
    written: u64,
    dropped: u64,
}

impl Sink {
    fn line(&mut self, raw: &[u8]) {
        let text = String::from_utf8_lossy(raw);
        let text = crate::secrets::scrub(&text);
        if self.written + text.len() as u64 + 1 > MAX_LOG {
            self.dropped += text.len() as u64 + 1;
            return;
        }
        self.written += text.len() as u64 + 1;
        let _ = self.file.write_all(text.as_bytes());
        let _ = self.file.write_all(b"\n");
    }
}

/// The copiers of a server's output: done when every stream closed.
#[derive(Debug)]
pub(crate) struct Pumps {
    left: Arc<(Mutex<usize>, std::sync::Condvar)>,
}

impl Pumps {
    /// Waits until the server's output is all in the log, at most `limit`:
    /// a process that escaped teardown may hold the pipes open, and the
    /// copiers then go on without holding teardown up.
    pub fn wait(&self, limit: std::time::Duration) -> bool {
        let (left, done) = &*self.left;
        let Ok(guard) = left.lock() else {
            return false;
        };
        done.wait_timeout_while(guard, limit, |n| *n > 0)
            .is_ok_and(|(n, _)| *n == 0)
    }

    fn one_done(&self) {
        let (left, done) = &*self.left;
        if let Ok(mut n) = left.lock() {
            *n = n.saturating_sub(1);
        }
        done.notify_all();
    }
}

/// Copies the output of a server into its log (one thread per stream);
/// the threads end when the server's end of the pipes closes.
pub(crate) fn pump(file: std::fs::File, streams: Vec<Box<dyn std::io::Read + Send>>) -> Pumps {
    let pumps = Pumps {
        left: Arc::new((Mutex::new(streams.len()), std::sync::Condvar::new())),
    };
    let sink = Arc::new(Mutex::new(Sink {
        file,
        written: 0,
        dropped: 0,
    }));
    for (i, stream) in streams.into_iter().enumerate() {
        let sink = Arc::clone(&sink);
        let done = Pumps {
            left: Arc::clone(&pumps.left),
        };
        let spawned = std::thread::Builder::new()
            .name(format!("servegate-log-{i}"))
            .spawn(move || {
                copy(stream, &sink);
                done.one_done();
            });
        if spawned.is_err() {
            pumps.one_done();
        }
    }
    pumps
}

/// Copies one stream into the sink a line at a time until it closes.
fn copy(mut stream: Box<dyn std::io::Read + Send>, sink: &Arc<Mutex<Sink>>) {
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        // A line ends at `\n` or `\r` (progress bars redraw with `\r`
        // and would otherwise never end).
        let mut start = 0;
        while let Some(at) = pending[start..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
        {
            let line = &pending[start..start + at];
            if !line.is_empty()
                && let Ok(mut s) = sink.lock()
            {
                s.line(line);
            }
            start += at + 1;
        }
        pending.drain(..start);
        if pending.len() > MAX_LINE
            && let Ok(mut s) = sink.lock()
        {
            // A line too long to hold is written in pieces, cut at a space
            // where there is one: a secret is one word, so it is scrubbed
            // whole.
            let cut = pending[..MAX_LINE]
                .iter()
                .rposition(|&b| b == b' ' || b == b'\t')
                .map_or(MAX_LINE, |at| at + 1);
            s.line(&pending[..cut]);
            pending.drain(..cut);
        }
    }
    if let Ok(mut s) = sink.lock() {
        if !pending.is_empty() {
            s.line(&pending);
        }
        if s.dropped > 0 && Arc::strong_count(sink) == 1 {
            let note = format!(
                "[servegate: the log stopped at {} MiB; {} more bytes of output were dropped]",
                MAX_LOG >> 20,
                s.dropped
            );
            let _ = writeln!(s.file, "{note}");
        }
    }
}

/// The last `n` lines of a file, each indented for a failure message.
pub fn tail(path: &Path, n: usize) -> String {
    const WINDOW: u64 = 256 * 1024;
    let Ok(mut file) = std::fs::File::open(path) else {
        return format!("    (log {} could not be read)", path.display());
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(WINDOW)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return "    (the log is empty)".to_owned();
    }
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| {
            format!(
                "    | {}",
                crate::text::printable(&crate::secrets::scrub(l))
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A fatal pattern found in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FatalLine {
    /// The pattern that matched.
    pub pattern: String,
    /// 1-based line number in the log.
    pub line_no: u64,
    /// The line.
    pub line: String,
}

/// Reads the lines appended to a log since the last scan.
#[derive(Debug)]
pub(crate) struct Scanner {
    path: PathBuf,
    offset: u64,
    lines: u64,
    patterns: Vec<Regex>,
}

impl Scanner {
    /// A scanner of `path` from its start.
    pub fn new(path: PathBuf, patterns: Vec<Regex>) -> Self {
        Self {
            path,
            offset: 0,
            lines: 0,
            patterns,
        }
    }

    /// The first complete new line that matches a pattern, if any. A line
    /// still being written is read on the next scan.
    pub(crate) fn scan(&mut self) -> Option<FatalLine> {
        if self.patterns.is_empty() {
            return None;
        }
        let mut file = std::fs::File::open(&self.path).ok()?;
        file.seek(SeekFrom::Start(self.offset)).ok()?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).ok()?;
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let mut found = None;
        for raw in bytes[..complete].split_inclusive(|&b| b == b'\n') {
            self.lines += 1;
            let line = String::from_utf8_lossy(raw);
            if found.is_none()
                && let Some(p) = self.patterns.iter().find(|p| p.is_match(&line))
            {
                found = Some(FatalLine {
                    pattern: p.as_str().to_owned(),
                    line_no: self.lines,
                    line: line.trim_end().to_owned(),
                });
            }
        }
        self.offset += complete as u64;
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log is written a line at a time, scrubbed; a line too long to
    /// hold is cut at a space, so a secret across the cut is still caught.
    #[test]
    fn output_is_copied_in_lines_scrubbed_and_cut_between_words() {
        let dir = std::env::temp_dir().join(format!("servegate-pump-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("server.log");
        crate::secrets::add("pump-canary-5f1e");
        // The secret straddles the 64 KiB point of a line twice that long.
        let wide = format!(
            "{}pump-canary-5f1e {}tail",
            "w ".repeat(MAX_LINE / 2 - 3),
            "w ".repeat(MAX_LINE / 2)
        );
        let out =
            format!("starting\rloading 50%\rloading 100%\nkey=pump-canary-5f1e\n{wide}\nlast");
        let pumps = pump(
            std::fs::File::create(&path).unwrap(),
            vec![Box::new(std::io::Cursor::new(out.into_bytes()))],
        );
        assert!(pumps.wait(std::time::Duration::from_secs(5)));
        let log = std::fs::read_to_string(&path).unwrap();
        assert!(
            log.starts_with("starting\nloading 50%\nloading 100%\nkey=<redacted>\n"),
            "{}",
            &log[..80]
        );
        assert!(!log.contains("pump-canary"));
        assert!(
            log.contains("w \n<redacted> w w"),
            "the secret was not cut before"
        );
        assert!(log.ends_with("w tail\nlast\n"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn scans_new_complete_lines_once() {
        let dir = std::env::temp_dir().join(format!("servegate-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("server.log");
        std::fs::write(&path, "loading\nweights ok\nhalf a li").unwrap();
        let mut s = Scanner::new(
            path.clone(),
            vec![Regex::new("CUDA out of memory").unwrap()],
        );
        assert_eq!(s.scan(), None);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"ne\nRuntimeError: CUDA out of memory\n").unwrap();
        let hit = s.scan().unwrap();
        assert_eq!(hit.line_no, 4);
        assert_eq!(hit.line, "RuntimeError: CUDA out of memory");
        assert_eq!(s.scan(), None, "a line is reported once");
        assert!(tail(&path, 2).contains("| half a line\n    | RuntimeError"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
