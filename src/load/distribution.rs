//! A distribution of one per-request (or per-token) quantity, kept in an
//! HDR histogram.

use hdrhistogram::Histogram;

use crate::suite::metric::Stat;

/// Highest value a histogram holds: an hour in microseconds, or a billion
/// tokens/s in milli-tokens. Larger values saturate.
const HIGHEST: u64 = 3_600_000_000_000;

/// A distribution of one per-request (or per-token) quantity, kept in an HDR
/// histogram with 3 significant figures: memory and merge cost do not grow
/// with the number of samples.
#[derive(Debug, Clone)]
pub struct Distribution {
    hist: Histogram<u64>,
    /// Stored integer = value × scale (µs for seconds, milli-tokens for rates).
    scale: f64,
}

impl PartialEq for Distribution {
    fn eq(&self, other: &Self) -> bool {
        self.scale == other.scale && self.hist == other.hist
    }
}

impl Distribution {
    fn with_scale(scale: f64) -> Self {
        Self {
            hist: Histogram::new_with_bounds(1, HIGHEST, 3).expect("valid histogram bounds"),
            scale,
        }
    }

    /// For durations given in seconds, kept in microseconds.
    pub fn seconds() -> Self {
        Self::with_scale(1e6)
    }

    /// For rates such as tokens/s, kept in thousandths.
    pub fn rate() -> Self {
        Self::with_scale(1e3)
    }

    /// For token counts and tokens per step, kept in thousandths.
    pub fn tokens() -> Self {
        Self::with_scale(1e3)
    }

    /// Records one sample; negative and non-finite samples are dropped.
    pub fn record(&mut self, value: f64) {
        self.record_n(value, 1);
    }

    /// Records `n` equal samples.
    pub(crate) fn record_n(&mut self, value: f64, n: u64) {
        if value.is_finite() && value >= 0.0 && n > 0 {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss,
                reason = "non-negative; the float-to-int cast saturates"
            )]
            let v = (value * self.scale).round().min(HIGHEST as f64) as u64;
            // Saturating: a value beyond the bounds is kept at the bound.
            let _ = self.hist.record_n(v.min(HIGHEST), n);
        }
    }

    /// Adds another distribution of the same kind.
    pub fn merge(&mut self, other: &Distribution) {
        let _ = self.hist.add(&other.hist);
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// The statistic, or `None` without samples.
    pub fn stat(&self, stat: Stat) -> Option<f64> {
        if self.hist.is_empty() {
            return None;
        }
        #[expect(
            clippy::cast_precision_loss,
            reason = "histogram values are far below 2^52"
        )]
        let raw = match stat {
            Stat::Mean => self.hist.mean(),
            Stat::Stddev => self.hist.stdev(),
            Stat::Min => self.hist.min() as f64,
            Stat::Max => self.hist.max() as f64,
            q => self.hist.value_at_quantile(q.quantile().unwrap_or(0.5)) as f64,
        };
        Some(raw / self.scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-3 * b.abs().max(1e-6)
    }

    #[test]
    fn percentiles_within_three_significant_figures() {
        let mut d = Distribution::rate();
        for v in 1..=1000 {
            d.record(f64::from(v));
        }
        assert!(close(d.stat(Stat::P50).unwrap(), 500.0));
        assert!(close(d.stat(Stat::P90).unwrap(), 900.0));
        assert!(close(d.stat(Stat::P99).unwrap(), 990.0));
        assert!(close(d.stat(Stat::P999).unwrap(), 999.0));
        assert!(close(d.stat(Stat::Max).unwrap(), 1000.0));
        assert!(close(d.stat(Stat::Min).unwrap(), 1.0));
        assert!(close(d.stat(Stat::Mean).unwrap(), 500.5));
        assert!(close(d.stat(Stat::Stddev).unwrap(), 288.675));
        let mut empty = Distribution::seconds();
        assert_eq!(empty.stat(Stat::Mean), None);
        empty.record(f64::NAN);
        empty.record(-1.0);
        assert!(empty.is_empty());
    }

    #[test]
    fn merged_workers_equal_one_recorder() {
        let mut a = Distribution::seconds();
        let mut b = Distribution::seconds();
        let mut all = Distribution::seconds();
        for i in 0..100 {
            let v = f64::from(i) * 1e-3;
            if i % 2 == 0 {
                a.record(v);
            } else {
                b.record(v);
            }
            all.record(v);
        }
        a.merge(&b);
        assert_eq!(a, all);
    }
}
