//! Correctness checks: assertions on completions and the failure messages
//! that explain them.

pub mod assertion;
pub mod failure;

pub use assertion::{Mismatch, evaluate};
