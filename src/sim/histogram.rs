//! Prometheus histograms of the simulator's own latencies, exported in
//! SGLang's names so that a client can compare its view with the server's.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the buckets, seconds (`+Inf` is implied).
const BOUNDS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug, Default)]
struct Counts {
    buckets: [u64; BOUNDS.len()],
    sum: f64,
    count: u64,
}

/// A cumulative latency histogram.
#[derive(Debug, Default)]
pub(super) struct PromHistogram(Mutex<Counts>);

impl PromHistogram {
    /// Records one observation.
    pub(super) fn observe(&self, d: Duration) {
        self.observe_each(d, 1);
    }

    /// Records `n` observations of `d` each.
    pub(super) fn observe_each(&self, d: Duration, n: u64) {
        let secs = d.as_secs_f64();
        if let Ok(mut c) = self.0.lock() {
            for (b, bound) in c.buckets.iter_mut().zip(BOUNDS) {
                if secs <= bound {
                    *b += n;
                }
            }
            #[expect(clippy::cast_precision_loss, reason = "token counts are small")]
            let many = n as f64;
            c.sum += secs * many;
            c.count += n;
        }
    }

    /// The exposition lines of the histogram `name`.
    pub(super) fn render(&self, name: &str, model: &str) -> String {
        let mut out = format!("# TYPE {name} histogram\n");
        if let Ok(c) = self.0.lock() {
            for (b, bound) in c.buckets.iter().zip(BOUNDS) {
                let _ = writeln!(
                    out,
                    "{name}_bucket{{model_name=\"{model}\",le=\"{bound}\"}} {b}"
                );
            }
            let _ = writeln!(
                out,
                "{name}_bucket{{model_name=\"{model}\",le=\"+Inf\"}} {}",
                c.count
            );
            let _ = writeln!(out, "{name}_sum{{model_name=\"{model}\"}} {}", c.sum);
            let _ = writeln!(out, "{name}_count{{model_name=\"{model}\"}} {}", c.count);
        }
        out
    }
}
