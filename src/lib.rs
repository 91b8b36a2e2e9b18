//! servegate: a `cargo test`-style runner of declarative test suites for LLM
//! inference servers.
//!
//! A YAML suite names a target server, correctness probes and performance
//! gates; the [`harness`] turns each into a libtest trial. Correctness probes
//! run first; a performance gate never passes on a server that failed them.

pub mod bench;
pub mod check;
pub mod client;
pub mod harness;
pub mod load;
#[cfg(target_os = "linux")]
pub mod procfs;
pub mod report;
pub mod review;
pub mod secrets;
pub mod server;
pub mod sim;
pub mod suite;
pub mod text;
pub mod units;
