//! The helpers the test binaries share, one copy each: `run` runs the
//! `servegate` binary and collects what it printed, `verdicts` reads that
//! output (a trial's verdict, its failure text, needles in a text).
//! `golden.rs` and `markdown.rs` beside them are included on their own
//! (`#[path]`) by the binaries that use them.

pub mod run;
pub mod verdicts;
