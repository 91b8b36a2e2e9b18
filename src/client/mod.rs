//! The streaming client: one timed call per request, in any of the
//! dialects under [`dialect`].

pub mod api;
pub mod body;
pub mod dialect;
pub mod error;
mod raw;
pub mod sse;
pub mod stream;

pub use api::{CallRequest, Usage};
pub use dialect::{Reported, ServerReport};
pub use error::{CallError, Deadline, ErrorKind};
pub use stream::{Client, Completion, Timing, TokenMark, TokenSource};
