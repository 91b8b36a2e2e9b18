//! Generating load and measuring it: schedules, workers, histograms, the
//! figures of a gate, baselines and the server's own view.

pub mod baseline;
pub mod distribution;
pub mod estimate;
pub mod fingerprint;
pub mod metrics;
pub mod progress;
pub mod prometheus;
pub mod runner;
pub mod selfcheck;
pub mod threads;
pub mod workload;
