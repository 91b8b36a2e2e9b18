//! The energy statistic's scan of one segment, over its shuffles.

use super::{below, real};
use crate::random::SplitMix;

/// A segment's points in their current order, each with what the scan
/// needs of it that shuffling does not change.
pub(super) struct Points(pub(super) Vec<Point>);

/// One point of a segment.
#[derive(Clone, Copy)]
pub(super) struct Point {
    /// Its value.
    value: f64,
    /// Its place among the segment's values sorted (ties in any order).
    rank: usize,
    /// The sum of its distances to every point of the segment.
    spread: f64,
}

impl Points {
    pub(super) fn of(segment: &[f64]) -> Self {
        let n = segment.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&i, &j| segment[i].total_cmp(&segment[j]));
        let sum: f64 = segment.iter().sum();
        let mut points = vec![
            Point {
                value: 0.0,
                rank: 0,
                spread: 0.0
            };
            n
        ];
        let mut below = 0.0;
        for (rank, &i) in order.iter().enumerate() {
            let x = segment[i];
            let above = sum - below - x;
            points[i] = Point {
                value: x,
                rank,
                spread: x * real(rank) - below + above - x * real(n - 1 - rank),
            };
            below += x;
        }
        Self(points)
    }

    /// A uniform shuffle (Fisher–Yates).
    pub(super) fn shuffle(&mut self, rng: &mut SplitMix) {
        for i in (1..self.0.len()).rev() {
            self.0.swap(i, below(rng, i + 1));
        }
    }
}

/// The buffers of one segment's scans, kept across its shuffles.
pub(super) struct Scan {
    /// A Fenwick tree over ranks: how many points so far, and their sum.
    tree: Vec<(f64, f64)>,
    /// `within[t]`: the sum of distances between pairs of the first `t`.
    within: Vec<f64>,
    /// `after[t]`: the sum of distances between pairs from `t` on.
    after: Vec<f64>,
    /// The statistic's weights of the distances across, before and after
    /// a split at `t`, which depend only on where it is.
    weights: Vec<(f64, f64, f64)>,
}

impl Scan {
    pub(super) fn new(n: usize) -> Self {
        Self {
            tree: vec![(0.0, 0.0); n + 1],
            within: vec![0.0; n + 1],
            after: vec![0.0; n + 1],
            // q = m·k/(m+k) · (2·across/(m·k) − before/C(m,2) − after/C(k,2))
            weights: (0..=n)
                .map(|split| {
                    let (m, k) = (real(split), real(n - split));
                    let scale = m * k / (m + k);
                    (
                        2.0 / (m + k),
                        scale * 2.0 / (m * (m - 1.0)),
                        scale * 2.0 / (k * (k - 1.0)),
                    )
                })
                .collect(),
        }
    }

    /// The split with the largest energy statistic, leaving at least
    /// `min_segment` points either side, and that statistic; `None` where
    /// there is no such split.
    pub(super) fn best(&mut self, points: &[Point], min_segment: usize) -> Option<(usize, f64)> {
        let n = points.len();
        if n < min_segment.saturating_mul(2) {
            return None;
        }
        let Self {
            tree,
            within,
            after,
            weights,
        } = self;
        tree.fill((0.0, 0.0));
        let (mut count, mut sum) = (0.0, 0.0);
        within[0] = 0.0;
        for (k, p) in points.iter().enumerate() {
            let (mut count_below, mut sum_below) = (0.0, 0.0);
            let mut i = p.rank;
            while i > 0 {
                let node = tree[i];
                count_below += node.0;
                sum_below += node.1;
                i &= i - 1;
            }
            // Its distances to the points before it: up to those below,
            // down to those above.
            let earlier = p.value * (2.0 * count_below - count) + sum - 2.0 * sum_below;
            within[k + 1] = within[k] + earlier;
            // Its distances to the points after it: all of them but these.
            after[k] = p.spread - earlier;
            let mut i = p.rank + 1;
            while i <= n {
                let node = &mut tree[i];
                node.0 += 1.0;
                node.1 += p.value;
                i += i & i.wrapping_neg();
            }
            count += 1.0;
            sum += p.value;
        }
        after[n] = 0.0;
        for k in (0..n).rev() {
            after[k] += after[k + 1];
        }
        let all = within[n];
        let mut best = (min_segment, f64::NEG_INFINITY);
        for split in min_segment..=n - min_segment {
            let (left, right) = (within[split], after[split]);
            let (w_across, w_left, w_right) = weights[split];
            let q = w_across * (all - left - right) - w_left * left - w_right * right;
            if q > best.1 {
                best = (split, q);
            }
        }
        Some(best)
    }
}
