//! The streaming client: OpenAI chat/completions and SGLang `/generate`.

pub mod api;
pub mod error;
mod raw;
mod recv;
pub mod sse;
pub mod stream;

pub use api::{CallRequest, Usage};
pub use error::{CallError, Deadline, ErrorKind};
pub use stream::{Client, Completion, Timing, TokenMark, TokenSource};
