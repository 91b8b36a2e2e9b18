//! Performance gates: thresholds, metrics and the load generator.

pub mod baseline;
pub mod distribution;
pub mod estimate;
pub mod metrics;
pub mod progress;
pub mod prometheus;
pub mod runner;
pub mod thresholds;
pub mod workload;
