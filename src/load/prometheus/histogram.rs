//! A latency histogram's change over a window.

use std::collections::BTreeMap;

use super::Scrape;
use super::counters::PREFIXES;
use crate::units::format_secs;

/// A latency histogram's change over the window.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramDelta {
    /// Observations in the window.
    pub count: f64,
    /// Their sum, seconds.
    pub sum: f64,
    /// Cumulative counts by upper bound, ascending.
    pub buckets: Vec<(f64, f64)>,
}

impl HistogramDelta {
    /// The mean, seconds.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }

    /// Why the histogram's change cannot be believed, if it cannot: a
    /// count or sum that went backwards (a restart in the window) or is no
    /// number, no `+Inf` bucket or one that disagrees with the count,
    /// buckets that are not cumulative, a mean above the bound of the
    /// largest observation's bucket. A quantile is read off the buckets,
    /// so buckets that say less than the server saw would make it look
    /// faster than it was.
    pub fn fault(&self) -> Option<String> {
        let (count, sum) = (self.count, self.sum);
        if !(count.is_finite() && sum.is_finite()) || count < 0.0 || sum < 0.0 {
            return Some(format!(
                "its count or its sum went backwards or is no number ({count} observations, {sum} s in all)"
            ));
        }
        let Some(&(last, all)) = self.buckets.last() else {
            return Some("it has no buckets".to_owned());
        };
        if last != f64::INFINITY {
            return Some("it has no `+Inf` bucket".to_owned());
        }
        if (all - count).abs() > 0.5 {
            return Some(format!(
                "its `+Inf` bucket counts {all} observations, its `_count` {count}"
            ));
        }
        if self.buckets.first().is_some_and(|(_, c)| *c < 0.0)
            || self.buckets.windows(2).any(|w| w[1].1 < w[0].1)
        {
            return Some("its buckets are not cumulative".to_owned());
        }
        if let (Some(mean), Some(top)) = (self.mean(), self.quantile_bound(1.0))
            && mean > top
        {
            return Some(format!(
                "its mean, {}, is above the bucket of its largest observation, ≤ {}",
                format_secs(mean),
                format_secs(top)
            ));
        }
        None
    }

    /// The upper bound of the bucket holding quantile `q`: the server only
    /// knows its buckets, so this is "at most".
    pub(crate) fn quantile_bound(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last()?.1;
        if total <= 0.0 {
            return None;
        }
        self.buckets
            .iter()
            .find(|(_, c)| *c >= q * total)
            .map(|(le, _)| *le)
    }
}

/// The first of the histograms named `suffixes` (new names before old)
/// that the server has.
pub(super) fn histogram_delta(
    before: &Scrape,
    after: &Scrape,
    suffixes: &[&str],
) -> Option<HistogramDelta> {
    suffixes
        .iter()
        .find_map(|s| one_histogram_delta(before, after, s))
}

pub(super) fn one_histogram_delta(
    before: &Scrape,
    after: &Scrape,
    suffix: &str,
) -> Option<HistogramDelta> {
    PREFIXES.iter().find_map(|p| {
        let base = format!("{p}{suffix}");
        let count = after.values.get(&format!("{base}_count"))?
            - before
                .values
                .get(&format!("{base}_count"))
                .copied()
                .unwrap_or(0.0);
        let sum = after.values.get(&format!("{base}_sum"))?
            - before
                .values
                .get(&format!("{base}_sum"))
                .copied()
                .unwrap_or(0.0);
        let empty = BTreeMap::new();
        let was = before.buckets.get(&base).unwrap_or(&empty);
        let mut buckets: Vec<(f64, f64)> = after
            .buckets
            .get(&base)?
            .iter()
            .filter_map(|(le, c)| {
                // A bound that is no number is no bucket.
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok().filter(|b: &f64| b.is_finite())?
                };
                Some((bound, c - was.get(le).copied().unwrap_or(0.0)))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Some(HistogramDelta {
            count,
            sum,
            buckets,
        })
    })
}
