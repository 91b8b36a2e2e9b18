//! A launched server's log file: its tail for failure messages, and a scan
//! of new lines for fatal patterns.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};

use regex::Regex;

/// How many lines failure messages quote.
pub const TAIL_LINES: usize = 40;

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
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A fatal pattern found in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FatalLine {
    /// The pattern that matched.
    pub pattern: String,
    /// 1-based line number in the log.
    pub line_no: u64,
    /// The line.
    pub line: String,
}

/// Reads the lines appended to a log since the last scan.
#[derive(Debug)]
pub struct Scanner {
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
    pub fn scan(&mut self) -> Option<FatalLine> {
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
