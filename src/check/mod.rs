//! Correctness checks: assertions on completions and the failure messages
//! that explain them.

pub mod accuracy;
pub mod assertion;
pub mod code;
pub mod contract;
pub mod degenerate;
pub mod failure;
pub mod humaneval;
pub mod message;
pub mod numerics;
pub mod pyrunner;
pub mod recheck;
pub mod sandbox;
pub mod snapshot;
pub mod structured;

pub use assertion::{Mismatch, evaluate};
