#![allow(dead_code)] // each test binary that includes this module uses part of it
//! The project's Markdown (README.md and the book's pages under docs/src/)
//! read the way GitHub and mdBook read it: fenced blocks, the HTML comment
//! that marks a block, links outside code, and heading anchors.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// README.md and every page under docs/src/, relative to the repository root.
pub fn pages() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md")];
    let mut dirs = vec![PathBuf::from("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// A fenced code block.
pub struct Block {
    /// 1-based line of its opening fence.
    pub line: usize,
    /// The info string after the opening fence (`yaml`, `sh`, or empty).
    pub info: String,
    /// Its lines, the fence's indentation removed.
    pub lines: Vec<String>,
    /// The HTML comment on the nearest non-blank line before the fence
    /// (`sample: …`, `file: …`, `measured …`), without `<!--` and `-->`.
    pub marker: Option<String>,
}

/// A line outside fenced blocks, with its 1-based number.
pub struct Prose {
    /// 1-based line number.
    pub line: usize,
    /// The line as written.
    pub raw: String,
    /// The line with its inline code spans removed.
    pub text: String,
}

/// The fenced blocks of a page and its lines outside them.
pub fn parse(text: &str) -> (Vec<Block>, Vec<Prose>) {
    let mut blocks = Vec::new();
    let mut prose = Vec::new();
    // The open block: its fence's backtick count and indentation.
    let mut open: Option<(usize, usize, Block)> = None;
    let mut last_nonblank: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        if let Some((fence, indent, block)) = open.as_mut() {
            if ticks >= *fence && trimmed.trim_end().len() == ticks {
                blocks.push(open.take().unwrap().2);
                last_nonblank = None;
            } else {
                let strip = (line.len() - trimmed.len()).min(*indent);
                block.lines.push(line[strip..].to_owned());
            }
            continue;
        }
        if ticks >= 3 {
            let marker = last_nonblank
                .map(str::trim)
                .and_then(|l| l.strip_prefix("<!--"))
                .and_then(|l| l.strip_suffix("-->"))
                .map(|m| m.trim().to_owned());
            let block = Block {
                line: i + 1,
                info: trimmed[ticks..].trim().to_owned(),
                lines: Vec::new(),
                marker,
            };
            open = Some((ticks, line.len() - trimmed.len(), block));
            continue;
        }
        if !trimmed.is_empty() {
            last_nonblank = Some(line);
        }
        prose.push(Prose {
            line: i + 1,
            raw: line.to_owned(),
            text: without_code_spans(line),
        });
    }
    (blocks, prose)
}

/// A line with its inline code spans (`` `…` ``) removed.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let fence = &rest[start..start + ticks];
        match rest[start + ticks..].find(fence) {
            Some(end) => rest = &rest[start + ticks + end + ticks..],
            None => {
                rest = &rest[start + ticks..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// A heading's anchor as GitHub and mdBook write it: lower case, letters,
/// digits, `-` and `_` kept, spaces as `-`, everything else dropped.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings.
pub fn anchors(path: &Path) -> HashSet<String> {
    let text = std::fs::read_to_string(path).unwrap();
    parse(&text)
        .1
        .iter()
        .filter_map(|p| {
            let hashes = p.raw.chars().take_while(|&c| c == '#').count();
            (hashes > 0 && p.raw[hashes..].starts_with(' ')).then(|| slug(&p.raw[hashes..]))
        })
        .collect()
}

/// The targets of a prose line's Markdown links and images, `[…](target)`.
pub fn links(text: &str) -> Vec<&str> {
    text.match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &text[i + 2..];
            rest.find(')').map(|end| rest[..end].trim())
        })
        .filter(|t| !t.is_empty())
        .collect()
}
