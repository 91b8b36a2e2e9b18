//! What repeats of a gate say about a figure: mean, spread and a 95%
//! confidence interval (Student's t), so that a verdict can account for noise.

use crate::suite::metric::{MetricKey, format_value};

/// The estimate of one figure from its repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// The value of each repeat.
    pub values: Vec<f64>,
    /// Their mean.
    pub mean: f64,
    /// Their sample standard deviation (0 for one value).
    pub stddev: f64,
    /// The 95% confidence interval of the mean; `None` for one value.
    pub ci95: Option<(f64, f64)>,
}

/// The figure of a metric over a gate's repeats, combined as its row of
/// the metric table says: counts (errors) total over repeats, rates and
/// latencies are the mean with its interval. The judge and baselines both
/// use it, so they cannot disagree.
pub(crate) fn combine(metric: crate::suite::metric::Metric, values: Vec<f64>) -> Estimate {
    match metric.spec().combine {
        crate::suite::metric::Combine::Sum => Estimate::of(vec![values.iter().sum()]),
        crate::suite::metric::Combine::Mean => Estimate::of(values),
    }
}

/// Two-sided 95% quantiles of Student's t for 1..=30 degrees of freedom.
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The two-sided 95% t quantile for `df` degrees of freedom.
pub(crate) fn t95(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T95[df - 1],
        // Past 30 the quantile is within 2% of the normal one.
        _ => 1.960 + 2.4 / f64::from(u32::try_from(df).unwrap_or(u32::MAX)),
    }
}

impl Estimate {
    /// The estimate of `values` (at least one).
    pub fn of(values: Vec<f64>) -> Self {
        let n = values.len();
        #[expect(clippy::cast_precision_loss, reason = "repeat counts are small")]
        let nf = n as f64;
        let mean = values.iter().sum::<f64>() / nf;
        if n < 2 {
            return Self {
                values,
                mean,
                stddev: 0.0,
                ci95: None,
            };
        }
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (nf - 1.0);
        let stddev = var.sqrt();
        let half = t95(n - 1) * stddev / nf.sqrt();
        Self {
            values,
            mean,
            stddev,
            ci95: Some((mean - half, mean + half)),
        }
    }
}

/// An estimate of `key`'s figure in words: its value, and over repeats
/// its spread and 95% interval (`500.1 tok/s ± 3.2 tok/s (95% CI …, 3
/// repeats)`); a histogram's percentile as the bucket bound it is.
pub fn describe(key: MetricKey, e: &Estimate) -> String {
    let v = |x: f64| format_value(key.metric, x);
    // A percentile of the server's histogram is its bucket's bound.
    let at_most = if key.is_bucket_bound() { "≤ " } else { "" };
    match e.ci95 {
        None => format!("{at_most}{}", v(e.mean)),
        Some((lo, hi)) => format!(
            "{at_most}{} ± {} (95% CI {} … {}, {} repeats)",
            v(e.mean),
            v(e.stddev),
            v(lo),
            v(hi),
            e.values.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_of_three_repeats() {
        let e = Estimate::of(vec![10.0, 12.0, 14.0]);
        assert!((e.mean - 12.0).abs() < 1e-12);
        assert!((e.stddev - 2.0).abs() < 1e-12);
        let (lo, hi) = e.ci95.unwrap();
        // 12 ± 4.303 · 2 / √3
        assert!((hi - 12.0 - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
        assert!((12.0 - lo - (hi - 12.0)).abs() < 1e-9);
    }

    #[test]
    fn one_value_has_no_interval() {
        let e = Estimate::of(vec![5.0]);
        assert_eq!((e.mean, e.stddev, e.ci95), (5.0, 0.0, None));
        assert!(t95(100) > 1.96 && t95(100) < 2.0);
    }
}
