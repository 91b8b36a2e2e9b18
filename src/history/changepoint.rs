//! Change points in a performance series: where the level of one figure
//! (a gate's decode tok/s, its TTFT p99, …), recorded once a night, moved
//! and stayed moved. A threshold only says that tonight is worse than a
//! number; a change point says from which night on things have been
//! different, and by how much, which is what one bisects a regression by.
//!
//! The method is E-Divisive means (Matteson and James, 2014), as MongoDB's
//! performance CI and Apache Otava (formerly DataStax Hunter) use it,
//! applied by bisection: find the best split of the whole series, test it,
//! and where it holds look again on either side of it.
//!
//! - **Proposing a split.** For a split of a segment into a left part of
//!   `m` points and a right part of `k`, the energy statistic with
//!   alpha = 1 is `q = m·k/(m+k) · (2·mean|x−y| − mean|x−x'| − mean|y−y'|)`:
//!   the mean distance across the split against the mean distances within
//!   each part. It is largest where the two parts differ most. Distances,
//!   not squared distances: one wild point adds as much to the distances
//!   within its part as to those across, so on its own it cancels out,
//!   where a mean or a squared distance would be dragged towards it. As in
//!   MongoDB's implementation the right part always runs to the end of the
//!   segment. Matteson and James also search where it ends; tried here,
//!   that costs a factor of `n` per shuffle and, being a search over far
//!   more splits, found fewer plain steps (74% against 80% at a step of
//!   2 sd), though more excursions that come back (95% against 83%).
//! - **Is it significant?** The best split of pure noise still scores
//!   above zero, because it is the best of many. So the score is judged
//!   against itself: the segment's values are shuffled (`permutations`
//!   times, 199 by default), the best split of each shuffle found the same
//!   way, and the p-value is the share of shuffles whose best is at least
//!   the real one's, counting the real one: `(1 + as large) / (1 +
//!   permutations)`. A shuffle keeps the values and loses their order, so
//!   this is the chance of a split this good in a series with no change,
//!   the search included. A t-test at the chosen split, which is how Otava
//!   confirms, does not know the split was picked as the best of many and
//!   calls the best split of noise significant more often than its
//!   p-value says.
//! - **Did the level move?** With alpha = 1 the energy statistic sees any
//!   change of distribution, a series that only got noisier included: on
//!   such series the shuffles alone reported a change in 20% of them. A
//!   gate is about levels, so a split is kept only where Welch's t-test
//!   (unequal variances) at that split also finds the means apart at
//!   `significance`, which leaves 2.5% (below) and cost no measurable
//!   power on steps. Rank tests in its place did worse: with Mann–Whitney
//!   or Brunner–Munzel a noisier series passed 8–9% of the time, and two
//!   wild neighbouring points of one sign 4–4.5%, Welch 0–0.5%.
//! - **Placing and keeping.** Bisection places a split before it knows of
//!   the changes either side of it: the first split of a staircase can land
//!   a few points into the middle step. So each change is then placed
//!   again at the best split between its neighbours (a few rounds), and a
//!   change whose levels either side Welch's test no longer finds apart is
//!   dropped, the weakest first. In the two-step series at 2% noise this
//!   found both steps in 94% instead of 90% and cut false alarms from 16%
//!   to 12%.
//! - **Outliers.** A split leaves at least `min_segment` points (3 by
//!   default) on either side, so one point can never be a level of its
//!   own; with the cancellation above and Welch's test (one wild point
//!   widens its side's spread more than it moves its mean), none of 400
//!   series with one or two separate outliers of 5–10 sd was reported, nor
//!   a point 6, 10 or 1,000 sd off at any place of a 40-point series.
//!
//! Each segment's shuffles draw from a [`SplitMix`] seeded from
//! [`Detector::seed`] and the segment's place in the series, so a series
//! gets the same answer every time, whatever order the segments are
//! searched in. Shuffling stops once the p-value can no longer reach
//! `significance`, so a segment with no change costs a few shuffles.
//!
//! The series must be finite: a NaN or an infinity gives no changes (a
//! missing night is for the caller to leave out or fill, since indices
//! are into the series as given). Values are divided by the largest
//! magnitude before any arithmetic, which changes neither the splits nor
//! the tests, so values near `f64::MAX` do not overflow. The work is
//! `O(n log n)` per shuffle: one pass with a Fenwick tree over the values'
//! ranks gives the distances within every prefix, and since each point's
//! distance to all the others does not depend on their order, those within
//! every suffix follow. 500 points with four changes take 30–60 ms in a
//! debug build (4 ms optimized); with twenty changes, 100–150 ms.
//!
//! Measured by the tests below on seeded synthetic series: level 100,
//! Gaussian noise, 20–60 points, a step either way at least 5 points from
//! either end; the defaults (`significance` 0.01, 199 permutations,
//! `min_segment` 3); 100 series a cell (200 for those without a step), so
//! a few points either way are chance. Found: a change within ±2 points of
//! every true step. False alarm: a series with a change that no true step
//! is within ±2 points of (a change 3 or more points off is both missed
//! and false).
//!
//! ```text
//! step   noise 1%        noise 2%        noise 3%        noise 5%
//!        found  false    found  false    found  false    found  false
//!  2%     83%   10%       21%   12%        7%    6%        2%    2%
//!  4%    100%    1%       81%    2%       45%   11%        7%    5%
//!  6%    100%    0%       98%    2%       79%    7%       38%    6%
//! 10%    100%    2%      100%    2%       98%    2%       88%    7%
//!
//! no change, noise 1% / 2% / 5%              false 1% / 0% / 0.5%
//! one outlier of 5–10 sd (noise 2%)          false 0%
//! two separate outliers of 5–10 sd           false 0%
//! two neighbouring outliers, one sign        false 0.5%
//! noise 1% → 5%, level unchanged             false 2.5%
//! 4% step, noise 1%, plus an outlier         found 99%, false 0%
//! two 6% steps the same way, noise 1% / 2%   found 100% / 94%, false 0% / 12%
//! 6% up, later back, noise 1% / 2%           found 82% / 63%, false 1% / 6%
//! ```
//!
//! Without a step the rate stays near `significance` for longer series
//! too: 0.7–1.4% of 1,000 series of 20, 60 or 150 points, 0–0.7% of 300 of
//! 500. What it cannot do: a step of one noise sd in 20–60 points is
//! mostly not found (and should not be claimed); an excursion that comes
//! back (a regression fixed some nights later) is found less often than a
//! step, because the first split has the excursion and the level after it
//! on one side; levels that alternate every few nights are mostly read as
//! fewer changes; noise that drifts or follows from night to night is not
//! modelled (the shuffles assume none); and a change in the last
//! `min_segment − 1` nights is not seen until enough nights follow it.

#![expect(
    clippy::doc_markdown,
    reason = "MongoDB and DataStax are names, not code"
)]

use crate::random::SplitMix;

/// How changes are looked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Detector {
    /// The p-value at or below which a split counts as a change (both the
    /// permutation test's and Welch's). 1 keeps every split there is; a
    /// value that is not a number counts nothing as significant.
    pub significance: f64,
    /// How many shuffles judge each split. The smallest p-value possible is
    /// `1 / (permutations + 1)`, so it must be at least `1 / significance - 1`
    /// for anything to be found (99 at 0.01); more shuffles make a p-value
    /// near `significance` less of a coin toss, at proportional cost.
    pub permutations: u32,
    /// The fewest points a level must have on either side of a change;
    /// below 2 counts as 2 (a spread needs two points).
    pub min_segment: usize,
    /// The seed of the shuffles: the same seed gives the same answer.
    pub seed: u64,
}

impl Default for Detector {
    /// Significance 0.01, 199 shuffles, levels of at least 3 points: the
    /// settings the measured table in the module's documentation is for.
    fn default() -> Self {
        Self {
            significance: 0.01,
            permutations: 199,
            min_segment: 3,
            seed: 0x6368_616E_6765_7074,
        }
    }
}

/// One change of level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    /// The first point of the new level, a 0-based index into the series.
    pub index: usize,
    /// The mean of the segment before: from the previous change (or the
    /// start) up to this one.
    pub mean_before: f64,
    /// The mean of the segment after: from this change up to the next one
    /// (or the end).
    pub mean_after: f64,
    /// `(mean_after - mean_before) / mean_before`: `0.04` is 4% up. Not
    /// finite when `mean_before` is zero.
    pub relative: f64,
    /// Welch's two-sided p-value between the two levels as reported: a
    /// test of their means (exact for normal noise) whose value ranks
    /// changes, the smaller the surer. At most [`Detector::significance`].
    pub p_value: f64,
    /// The permutation test's p-value when the split was made: the chance
    /// of a split this good in the segment shuffled, the search included.
    /// It decides, it does not rank: it is at least `1 / (permutations +
    /// 1)`, a floor most real changes reach. At most `significance`.
    pub p_permutation: f64,
}

/// A p-value as people read it: three decimals, or where that would read
/// 0.000 its order of magnitude (`3.2e-9`).
pub fn format_p(p: f64) -> String {
    if p >= 0.000_5 || p.is_nan() {
        format!("{p:.3}")
    } else if p > 0.0 {
        format!("{p:.1e}")
    } else {
        "< 1e-300".to_owned()
    }
}

impl Detector {
    /// The changes of level in `series` (one figure, oldest first), in
    /// index order. None where the series is shorter than two levels of
    /// `min_segment` points, has no change, or holds a value that is not
    /// finite.
    pub fn detect(&self, series: &[f64]) -> Vec<Change> {
        let min_segment = self.min_segment.max(2);
        if series.len() < min_segment.saturating_mul(2) || series.iter().any(|x| !x.is_finite()) {
            return Vec::new();
        }
        let scale = series.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
        if scale == 0.0 {
            return Vec::new();
        }
        let values: Vec<f64> = series.iter().map(|x| x / scale).collect();
        // (index, the permutation test's p-value when it was found)
        let mut found: Vec<(usize, f64)> = Vec::new();
        let mut pending = vec![(0, values.len())];
        while let Some((start, end)) = pending.pop() {
            if let Some((split, p_value)) = self.split(&values[start..end], start, min_segment) {
                found.push((start + split, p_value));
                pending.push((start, start + split));
                pending.push((start + split, end));
            }
        }
        found.sort_by_key(|&(index, _)| index);
        place(&values, &mut found, min_segment);
        self.prune(&values, &mut found);
        found
            .iter()
            .enumerate()
            .map(|(i, &(index, permuted))| {
                let (before, after) = levels(&found, i, series.len());
                let mean_before = mean(&series[before..index]);
                let mean_after = mean(&series[index..after]);
                Change {
                    index,
                    mean_before,
                    mean_after,
                    // As `(after - before) / before`, without overflowing there.
                    relative: mean_after / mean_before - 1.0,
                    p_value: welch_p(&values[before..index], &values[index..after]),
                    p_permutation: permuted,
                }
            })
            .collect()
    }

    /// Removes, one at a time and the least significant first, the changes
    /// whose levels either side (as they are now) Welch's test does not
    /// find apart: a change placed again, or whose neighbour moved, may no
    /// longer separate two levels.
    fn prune(&self, values: &[f64], found: &mut Vec<(usize, f64)>) {
        loop {
            let worst = (0..found.len())
                .map(|i| {
                    let (before, after) = levels(found, i, values.len());
                    let at = found[i].0;
                    (i, welch_p(&values[before..at], &values[at..after]))
                })
                .filter(|&(_, p)| p.is_nan() || p > self.significance)
                .max_by(|a, b| a.1.total_cmp(&b.1));
            match worst {
                Some((i, _)) => {
                    found.remove(i);
                }
                None => return,
            }
        }
    }

    /// The best split of `segment` (which starts at `start` in the series)
    /// and its p-value, where it is a significant change of level.
    fn split(&self, segment: &[f64], start: usize, min_segment: usize) -> Option<(usize, f64)> {
        let significant = |p: f64| p <= self.significance;
        let mut points = Points::of(segment);
        let mut scan = Scan::new(segment.len());
        let (split, observed) = scan.best(&points.0, min_segment)?;
        if observed.is_nan() || observed <= 0.0 {
            return None;
        }
        // Welch's first: it is cheap, and a split whose sides' means are not
        // apart is no change of level, whatever the shuffles say (nor is
        // either side searched further).
        let welch = welch_p(&segment[..split], &segment[split..]);
        if !significant(welch) {
            return None;
        }
        let mut rng = SplitMix::new(
            self.seed
                ^ (to_u64(start) << 32 ^ to_u64(segment.len())).wrapping_mul(0xD1B5_4A32_D192_ED03),
        );
        let total = f64::from(self.permutations) + 1.0;
        // The same arithmetic on the same values in another order can round
        // differently; a shuffle that ties the real split must count.
        let tie = observed * (1.0 - 1e-9);
        let mut as_large = 1.0;
        for _ in 0..self.permutations {
            points.shuffle(&mut rng);
            if scan
                .best(&points.0, min_segment)
                .is_some_and(|(_, q)| q >= tie)
            {
                as_large += 1.0;
                if !significant(as_large / total) {
                    return None;
                }
            }
        }
        let p_value = as_large / total;
        significant(p_value).then_some((split, p_value))
    }
}

/// Where the level around change `i` of `found` runs: from the change
/// before (or the start) to the change after (or `len`).
fn levels(found: &[(usize, f64)], i: usize, len: usize) -> (usize, usize) {
    let before = i.checked_sub(1).map_or(0, |j| found[j].0);
    let after = found.get(i + 1).map_or(len, |c| c.0);
    (before, after)
}

/// Places each change again at the best split between its neighbours.
/// Bisection places a split before it knows of the changes on either side
/// of it: in a staircase the first split of the whole series can land a
/// few points into the middle step, the level after it pulling it over.
/// Between its final neighbours it falls where it belongs. A few rounds,
/// since moving one change moves its neighbours' levels.
fn place(values: &[f64], found: &mut [(usize, f64)], min_segment: usize) {
    for _ in 0..4 {
        let mut moved = false;
        for i in 0..found.len() {
            let (before, after) = levels(found, i, values.len());
            let segment = &values[before..after];
            let points = Points::of(segment);
            let best = Scan::new(segment.len()).best(&points.0, min_segment);
            if let Some((split, q)) = best
                && q > 0.0
                && before + split != found[i].0
            {
                found[i].0 = before + split;
                moved = true;
            }
        }
        if !moved {
            return;
        }
    }
}

/// A segment's points in their current order, each with what the scan
/// needs of it that shuffling does not change.
struct Points(Vec<Point>);

/// One point of a segment.
#[derive(Clone, Copy)]
struct Point {
    /// Its value.
    value: f64,
    /// Its place among the segment's values sorted (ties in any order).
    rank: usize,
    /// The sum of its distances to every point of the segment.
    spread: f64,
}

impl Points {
    fn of(segment: &[f64]) -> Self {
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
    fn shuffle(&mut self, rng: &mut SplitMix) {
        for i in (1..self.0.len()).rev() {
            self.0.swap(i, below(rng, i + 1));
        }
    }
}

/// The buffers of one segment's scans, kept across its shuffles.
struct Scan {
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
    fn new(n: usize) -> Self {
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
    fn best(&mut self, points: &[Point], min_segment: usize) -> Option<(usize, f64)> {
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

/// The two-sided p-value of Welch's t-test that `a` and `b` (two points
/// or more each) have the same mean.
fn welch_p(a: &[f64], b: &[f64]) -> f64 {
    let moments = |v: &[f64]| {
        let n = real(v.len());
        let m = mean(v);
        let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
        (n, m, var / n)
    };
    let (na, ma, va) = moments(a);
    let (nb, mb, vb) = moments(b);
    let se2 = va + vb;
    if se2.is_nan() || se2 <= 0.0 {
        // Two constant sides: apart or not, without doubt.
        #[expect(
            clippy::float_cmp,
            reason = "constant sides are equal exactly or not at all"
        )]
        let same = ma == mb;
        return if same { 1.0 } else { 0.0 };
    }
    let t = (ma - mb) / se2.sqrt();
    // Welch–Satterthwaite, in shares of the variance so that tiny
    // variances do not underflow.
    let (sa, sb) = (va / se2, vb / se2);
    let df = 1.0 / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0));
    student_p(t, df)
}

/// The two-sided p-value of Student's t distribution with `df` degrees of
/// freedom: `P(|T| >= |t|)`, through the regularized incomplete beta
/// function.
fn student_p(t: f64, df: f64) -> f64 {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return 1.0;
    }
    if t.is_infinite() {
        return 0.0;
    }
    incomplete_beta(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0)
}

/// `ln Γ(x)` for `x > 0` (Lanczos, as in Numerical Recipes; about 1e-10
/// relative).
fn ln_gamma(x: f64) -> f64 {
    const COEFFICIENTS: [f64; 6] = [
        76.180_091_729_471_46,
        -86.505_320_329_416_77,
        24.014_098_240_830_91,
        -1.231_739_572_450_155,
        0.001_208_650_973_866_179,
        -0.000_005_395_239_384_953,
    ];
    let tmp = x + 5.5;
    let tmp = tmp - (x + 0.5) * tmp.ln();
    let mut series = 1.000_000_000_190_015;
    let mut y = x;
    for c in COEFFICIENTS {
        y += 1.0;
        series += c / y;
    }
    -tmp + (2.506_628_274_631_000_5 * series / x).ln()
}

/// The regularized incomplete beta function `I_x(a, b)`.
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    // The continued fraction converges fast below the mean; above it, by
    // symmetry.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of the incomplete beta function (modified
/// Lentz).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let away = |v: f64| if v.abs() < TINY { TINY } else { v };
    let mut upper = 1.0;
    let mut lower = 1.0 / away(1.0 - (a + b) * x / (a + 1.0));
    let mut fraction = lower;
    for m in 1..300 {
        let m = f64::from(m);
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        let mut last = 1.0;
        for term in [even, odd] {
            lower = 1.0 / away(1.0 + term * lower);
            upper = away(1.0 + term / upper);
            last = lower * upper;
            fraction *= last;
        }
        if (last - 1.0).abs() < 3e-14 {
            break;
        }
    }
    fraction
}

/// The mean, as a sum of `x / n` so that values near `f64::MAX` do not
/// overflow.
fn mean(values: &[f64]) -> f64 {
    let n = real(values.len());
    values.iter().map(|x| x / n).sum()
}

/// A count as a float.
fn real(n: usize) -> f64 {
    #[expect(
        clippy::cast_precision_loss,
        reason = "counts of points, far below 2^53"
    )]
    let v = n as f64;
    v
}

/// A count as 64 bits, for seeding.
fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A uniform index below `n` (`n > 0`), by multiplying out 64 random bits.
fn below(rng: &mut SplitMix, n: usize) -> usize {
    let wide = (u128::from(rng.next_u64()) * u128::from(to_u64(n))) >> 64;
    usize::try_from(wide).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(rng: &mut SplitMix) -> f64 {
        if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 }
    }

    /// Level 100 with relative noise `noise`, `len` points, the levels'
    /// relative offsets changing at `steps` (index, offset from 100).
    fn series(rng: &mut SplitMix, len: usize, noise: f64, steps: &[(usize, f64)]) -> Vec<f64> {
        (0..len)
            .map(|i| {
                let offset = steps.iter().rev().find(|s| i >= s.0).map_or(0.0, |s| s.1);
                100.0 * (1.0 + offset) * (1.0 + noise * rng.gauss())
            })
            .collect()
    }

    /// 20–60 points with one step of `step` (either way) at least 5 points
    /// from either end.
    fn one_step(rng: &mut SplitMix, noise: f64, step: f64) -> (Vec<f64>, Vec<usize>) {
        let len = 20 + below(rng, 41);
        let at = 5 + below(rng, len - 9);
        let step = sign(rng) * step;
        (series(rng, len, noise, &[(at, step)]), vec![at])
    }

    /// 20–60 points of 2% noise and no step, with `count` outliers of 5–10
    /// sd, at separate random places or (`together`) side by side and of
    /// one sign.
    fn outliers(rng: &mut SplitMix, count: usize, together: bool) -> (Vec<f64>, Vec<usize>) {
        let len = 20 + below(rng, 41);
        let mut s = series(rng, len, 0.02, &[]);
        let first = below(rng, len - count + 1);
        let way = sign(rng);
        for n in 0..count {
            let at = if together { first + n } else { below(rng, len) };
            let way = if together { way } else { sign(rng) };
            s[at] = 100.0 * (1.0 + way * (5.0 + 5.0 * rng.unit()) * 0.02);
        }
        (s, Vec::new())
    }

    /// Two steps of 6% at least 8 points from the ends and 10 apart, the
    /// second the same way as the first or back.
    fn two_steps(rng: &mut SplitMix, noise: f64, back: bool) -> (Vec<f64>, Vec<usize>) {
        let len = 40 + below(rng, 21);
        let first = 8 + below(rng, len / 2 - 12);
        let second = first + 10 + below(rng, len - first - 18);
        let to = if back { 0.0 } else { 0.12 };
        let s = series(rng, len, noise, &[(first, 0.06), (second, to)]);
        (s, vec![first, second])
    }

    /// How a detector did on one kind of series.
    #[derive(Debug)]
    struct Cell {
        name: String,
        trials: u32,
        /// Series with every true step found within ±2 points.
        found: u32,
        /// Series with a reported change no true step is within ±2 of.
        false_alarms: u32,
        /// Whether its series have steps to find.
        stepped: bool,
    }

    impl Cell {
        fn run(
            name: String,
            seed: u64,
            trials: u32,
            mut make: impl FnMut(&mut SplitMix) -> (Vec<f64>, Vec<usize>),
        ) -> Self {
            let detector = Detector::default();
            let mut rng = SplitMix::new(seed);
            let mut cell = Cell {
                name,
                trials,
                found: 0,
                false_alarms: 0,
                stepped: false,
            };
            for _ in 0..trials {
                let (s, truth) = make(&mut rng);
                cell.stepped |= !truth.is_empty();
                let changes = detector.detect(&s);
                assert!(changes.windows(2).all(|w| w[0].index < w[1].index));
                for c in &changes {
                    let sig = detector.significance;
                    assert!((0.0..=sig).contains(&c.p_value), "{c:?}");
                    assert!(c.p_permutation > 0.0 && c.p_permutation <= sig, "{c:?}");
                }
                let near = |a: usize, b: usize| a.abs_diff(b) <= 2;
                if !truth.is_empty()
                    && truth
                        .iter()
                        .all(|&t| changes.iter().any(|c| near(c.index, t)))
                {
                    cell.found += 1;
                }
                if changes
                    .iter()
                    .any(|c| !truth.iter().any(|&t| near(c.index, t)))
                {
                    cell.false_alarms += 1;
                }
            }
            cell
        }

        fn found(&self) -> f64 {
            100.0 * f64::from(self.found) / f64::from(self.trials)
        }

        fn false_alarms(&self) -> f64 {
            100.0 * f64::from(self.false_alarms) / f64::from(self.trials)
        }
    }

    /// The detector judged as a classifier against known truth, both ways:
    /// how often a true step is found and how often a change is reported
    /// where there is none. Prints the table the module's documentation
    /// quotes.
    #[test]
    fn found_and_false_alarms_against_known_truth() {
        let mut cells = Vec::new();
        let mut seed = 0x7AB1E;
        let mut next_seed = || {
            seed += 1;
            seed
        };
        for noise in [0.01, 0.02, 0.03, 0.05] {
            for step in [0.02, 0.04, 0.06, 0.10] {
                let name = format!("step {:>2.0}% noise {:.0}%", step * 100.0, noise * 100.0);
                cells.push(Cell::run(name, next_seed(), 100, |r| {
                    one_step(r, noise, step)
                }));
            }
        }
        for noise in [0.01, 0.02, 0.05] {
            let name = format!("no change, noise {:.0}%", noise * 100.0);
            cells.push(Cell::run(name, next_seed(), 200, |r| {
                let len = 20 + below(r, 41);
                (series(r, len, noise, &[]), Vec::new())
            }));
        }
        for (count, together, name) in [
            (1, false, "one outlier"),
            (2, false, "two separate outliers"),
            (2, true, "two neighbouring outliers"),
        ] {
            cells.push(Cell::run(name.to_owned(), next_seed(), 200, |r| {
                outliers(r, count, together)
            }));
        }
        cells.push(Cell::run(
            "noise 1% -> 5%, no step".to_owned(),
            next_seed(),
            200,
            |r| {
                let len = 20 + below(r, 41);
                let at = 5 + below(r, len - 9);
                let s = (0..len)
                    .map(|i| 100.0 * (1.0 + if i < at { 0.01 } else { 0.05 } * r.gauss()))
                    .collect();
                (s, Vec::new())
            },
        ));
        cells.push(Cell::run(
            "step 4% noise 1% + outlier".to_owned(),
            next_seed(),
            100,
            |r| {
                let (mut s, truth) = one_step(r, 0.01, 0.04);
                let at = below(r, s.len());
                s[at] *= 1.0 + sign(r) * (5.0 + 5.0 * r.unit()) * 0.01;
                (s, truth)
            },
        ));
        for noise in [0.01, 0.02] {
            for back in [false, true] {
                let kind = if back { "up, back" } else { "up, up" };
                let name = format!("two 6% steps {kind}, noise {:.0}%", noise * 100.0);
                cells.push(Cell::run(name, next_seed(), 100, |r| {
                    two_steps(r, noise, back)
                }));
            }
        }
        eprintln!(
            "{:<36} {:>6} {:>7} {:>7}",
            "series", "trials", "found", "false"
        );
        for c in &cells {
            let found = if c.stepped {
                format!("{:.1}%", c.found())
            } else {
                "-".to_owned()
            };
            eprintln!(
                "{:<36} {:>6} {found:>7} {:>6.1}%",
                c.name,
                c.trials,
                c.false_alarms()
            );
        }
        let cell = |name: &str| {
            cells
                .iter()
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("no cell {name}"))
        };
        // Steps of 3 sd or more: found, and placed.
        for name in [
            "step 10% noise 1%",
            "step 10% noise 2%",
            "step 10% noise 3%",
            "step  6% noise 1%",
            "step  6% noise 2%",
            "step  4% noise 1%",
        ] {
            let c = cell(name);
            assert!(c.found() >= 95.0, "{c:?}");
            assert!(c.false_alarms() <= 8.0, "{c:?}");
        }
        // At 2 sd most are found.
        for name in [
            "step  4% noise 2%",
            "step  6% noise 3%",
            "step 10% noise 5%",
        ] {
            assert!(cell(name).found() >= 65.0, "{:?}", cell(name));
        }
        // No change, outliers: quiet.
        for name in [
            "no change, noise 1%",
            "no change, noise 2%",
            "no change, noise 5%",
            "one outlier",
            "two separate outliers",
        ] {
            assert!(cell(name).false_alarms() <= 3.0, "{:?}", cell(name));
        }
        assert!(cell("two neighbouring outliers").false_alarms() <= 5.0);
        assert!(cell("noise 1% -> 5%, no step").false_alarms() <= 10.0);
        let c = cell("step 4% noise 1% + outlier");
        assert!(c.found() >= 90.0 && c.false_alarms() <= 8.0, "{c:?}");
        assert!(cell("two 6% steps up, up, noise 1%").found() >= 95.0);
        assert!(cell("two 6% steps up, back, noise 1%").found() >= 70.0);
        // Power grows with the step: the test is not deciding by chance.
        assert!(cell("step  2% noise 5%").found() < cell("step 10% noise 5%").found());
    }

    #[test]
    fn a_change_is_placed_again_between_its_neighbours() {
        let mut rng = SplitMix::new(71);
        let s = series(&mut rng, 60, 0.01, &[(20, 0.06), (40, 0.12)]);
        let values: Vec<f64> = s.iter().map(|x| x / 200.0).collect();
        // As bisection might leave them: the first 4 points off.
        let mut found = vec![(24, 0.005), (40, 0.005)];
        place(&values, &mut found, 3);
        assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), [20, 40]);
    }

    #[test]
    fn a_staircase_is_placed_where_its_steps_are() {
        // Two 3-sd steps close to the start: bisection's first split of
        // the whole series tends to land inside the middle step. Measured:
        // both within a point in 341 of 400, 317 without placing again.
        let placed = (0..400)
            .filter(|&seed| {
                let mut rng = SplitMix::new(seed);
                let s = series(&mut rng, 60, 0.02, &[(12, 0.06), (24, 0.12)]);
                let got: Vec<usize> = Detector::default()
                    .detect(&s)
                    .iter()
                    .map(|c| c.index)
                    .collect();
                got.len() == 2 && got[0].abs_diff(12) <= 1 && got[1].abs_diff(24) <= 1
            })
            .count();
        assert!(placed >= 330, "{placed} of 400");
    }

    #[test]
    fn a_change_between_levels_that_are_not_apart_is_dropped() {
        let mut rng = SplitMix::new(72);
        let s = series(&mut rng, 60, 0.01, &[(30, 0.06)]);
        let mut found = vec![(12, 0.005), (30, 0.005), (45, 0.005)];
        Detector::default().prune(&s, &mut found);
        assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), [30]);
    }

    #[test]
    fn a_clean_step_is_reported_where_and_as_it_is() {
        for seed in 0..20 {
            let mut rng = SplitMix::new(seed);
            let s = series(&mut rng, 60, 0.01, &[(30, 0.04)]);
            let detector = Detector::default();
            let changes = detector.detect(&s);
            assert_eq!(changes.len(), 1, "seed {seed}: {changes:?}");
            let c = changes[0];
            assert!(c.index.abs_diff(30) <= 1, "seed {seed}: {c:?}");
            assert!((c.relative - 0.04).abs() <= 0.01, "seed {seed}: {c:?}");
            assert!((c.mean_before - 100.0).abs() <= 1.0, "seed {seed}: {c:?}");
            assert!((c.mean_after - 104.0).abs() <= 1.0, "seed {seed}: {c:?}");
            let before = mean(&s[..c.index]);
            let after = mean(&s[c.index..]);
            assert!((c.mean_before - before).abs() < 1e-9 && (c.mean_after - after).abs() < 1e-9);
            assert!((c.relative - (after - before) / before).abs() < 1e-12);
            // 199 shuffles: none as good, so the smallest p-value there
            // is; Welch's between the levels, far below it, says how sure.
            assert!((c.p_permutation - 1.0 / 200.0).abs() < 1e-12, "{c:?}");
            assert!(c.p_value > 0.0 && c.p_value < 1e-6, "{c:?}");
        }
    }

    /// Changes rank by their p-value: of three steps in one series, the
    /// larger against the same noise is the surer, though the shuffles
    /// find each as good as can be (their floor).
    #[test]
    fn p_values_rank_changes_where_the_shuffles_floor() {
        let mut rng = SplitMix::new(7);
        let s = series(&mut rng, 90, 0.01, &[(30, 0.03), (60, 0.12)]);
        let changes = Detector::default().detect(&s);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert!(
            changes
                .iter()
                .all(|c| (c.p_permutation - 1.0 / 200.0).abs() < 1e-12),
            "{changes:?}"
        );
        assert!(changes[1].p_value < changes[0].p_value, "{changes:?}");
        assert_eq!(format_p(0.0123), "0.012");
        assert_eq!(format_p(3.21e-9), "3.2e-9");
        assert_eq!(format_p(0.0), "< 1e-300");
    }

    #[test]
    fn means_are_those_of_the_levels_between_changes() {
        let mut rng = SplitMix::new(3);
        let s = series(&mut rng, 90, 0.01, &[(30, 0.10), (60, -0.05)]);
        let changes = Detector::default().detect(&s);
        let indices: Vec<usize> = changes.iter().map(|c| c.index).collect();
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert!(
            indices[0].abs_diff(30) <= 1 && indices[1].abs_diff(60) <= 1,
            "{indices:?}"
        );
        assert!((changes[0].mean_after - changes[1].mean_before).abs() < 1e-12);
        assert!((changes[0].mean_after - mean(&s[indices[0]..indices[1]])).abs() < 1e-9);
        assert!((changes[0].relative - 0.10).abs() < 0.01, "{changes:?}");
        assert!(
            (changes[1].relative - (95.0 / 110.0 - 1.0)).abs() < 0.01,
            "{changes:?}"
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_answer_and_the_seed_is_used() {
        // At significance 1 every split is kept, so the p-values show the
        // shuffles themselves.
        let mut rng = SplitMix::new(11);
        let s = series(&mut rng, 50, 0.02, &[(25, 0.02)]);
        let a = Detector {
            significance: 1.0,
            ..Detector::default()
        };
        let b = Detector {
            seed: 12345,
            ..a.clone()
        };
        assert!(!a.detect(&s).is_empty());
        assert_eq!(a.detect(&s), a.detect(&s));
        assert_eq!(b.detect(&s), b.detect(&s));
        assert_ne!(a.detect(&s), b.detect(&s));
        let mut rng = SplitMix::new(12);
        for _ in 0..20 {
            let (s, _) = one_step(&mut rng, 0.03, 0.04);
            assert_eq!(
                Detector::default().detect(&s),
                Detector::default().detect(&s)
            );
        }
    }

    #[test]
    fn nothing_is_found_in_what_cannot_hold_a_change() {
        let d = Detector::default();
        let mut rng = SplitMix::new(5);
        let step = series(&mut rng, 40, 0.01, &[(20, 0.10)]);
        assert!(!d.detect(&step).is_empty(), "the series the others spoil");
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut s = step.clone();
            s[7] = bad;
            assert!(d.detect(&s).is_empty(), "{bad}");
        }
        assert!(d.detect(&[]).is_empty());
        assert!(d.detect(&[1.0]).is_empty());
        assert!(
            d.detect(&[1.0, 1.0, 1.0, 9.0, 9.0]).is_empty(),
            "shorter than two levels"
        );
        assert!(d.detect(&[100.0; 100]).is_empty());
        assert!(d.detect(&[0.0; 100]).is_empty());
        assert!(d.detect(&[-0.0; 10]).is_empty());
        let never = [
            Detector {
                significance: f64::NAN,
                ..d.clone()
            },
            Detector {
                significance: 0.0,
                ..d.clone()
            },
            Detector {
                permutations: 0,
                ..d.clone()
            },
            Detector {
                min_segment: usize::MAX,
                ..d.clone()
            },
            Detector {
                min_segment: 21,
                ..d.clone()
            },
        ];
        for d in never {
            assert!(d.detect(&step).is_empty(), "{d:?}");
        }
    }

    #[test]
    fn magnitude_does_not_matter_and_extremes_do_not_overflow() {
        let mut rng = SplitMix::new(8);
        let s = series(&mut rng, 48, 0.01, &[(20, 0.05)]);
        let d = Detector::default();
        let at = |s: &[f64]| d.detect(s).iter().map(|c| c.index).collect::<Vec<_>>();
        let expected = at(&s);
        assert_eq!(expected.len(), 1);
        for factor in [1e300, 1e-300, -1.0, 1e-12] {
            let scaled: Vec<f64> = s.iter().map(|x| x * factor).collect();
            assert_eq!(at(&scaled), expected, "scaled by {factor}");
            for c in d.detect(&scaled) {
                assert!(
                    (c.relative - d.detect(&s)[0].relative).abs() < 1e-9,
                    "{c:?}"
                );
            }
        }
        let huge: Vec<f64> = (0..40)
            .map(|i| if i < 20 { f64::MAX } else { -f64::MAX } * (1.0 - 1e-3 * rng.unit()))
            .collect();
        let changes = d.detect(&huge);
        assert_eq!(changes.iter().map(|c| c.index).collect::<Vec<_>>(), [20]);
        assert!(changes[0].mean_before.is_finite() && changes[0].relative.is_finite());
        let zero_then: Vec<f64> = (0..20).map(|i| if i < 10 { 0.0 } else { 5.0 }).collect();
        let changes = d.detect(&zero_then);
        assert_eq!(changes.len(), 1);
        assert!(
            changes[0].index == 10 && changes[0].relative == f64::INFINITY,
            "{changes:?}"
        );
    }

    #[test]
    fn levels_are_never_shorter_than_min_segment() {
        let mut rng = SplitMix::new(21);
        for min_segment in [0, 2, 3, 5] {
            // Significance 1 keeps every split: the most changes there can be.
            let d = Detector {
                significance: 1.0,
                permutations: 9,
                min_segment,
                ..Detector::default()
            };
            let least = min_segment.max(2);
            for len in [4, 7, 13, 31] {
                let s = series(&mut rng, len, 0.05, &[]);
                let changes = d.detect(&s);
                let mut bounds = vec![0];
                bounds.extend(changes.iter().map(|c| c.index));
                bounds.push(len);
                assert!(
                    changes.is_empty() || bounds.windows(2).all(|w| w[1] - w[0] >= least),
                    "{min_segment} {bounds:?}"
                );
                // Kept splits, so the bound above is met, not vacuous (a
                // segment whose best split has a statistic of 0 or less,
                // no sign of any difference, is not split even here).
                if len == 31 {
                    assert!(!changes.is_empty(), "{min_segment} {changes:?}");
                }
            }
        }
    }

    #[test]
    fn a_lone_outlier_anywhere_is_not_a_change() {
        let mut rng = SplitMix::new(31);
        let base = series(&mut rng, 40, 0.01, &[]);
        assert!(Detector::default().detect(&base).is_empty());
        for at in 0..base.len() {
            for sd in [-10.0, 6.0, 10.0, 1000.0] {
                let mut s = base.clone();
                s[at] = 100.0 * (1.0 + sd * 0.01);
                let changes = Detector::default().detect(&s);
                assert!(changes.is_empty(), "outlier {sd} sd at {at}: {changes:?}");
            }
        }
    }

    #[test]
    fn a_long_series_with_four_levels_changes_is_read_whole() {
        let mut rng = SplitMix::new(41);
        let steps = [(100, 0.04), (200, -0.03), (300, 0.03), (400, 0.0)];
        let s = series(&mut rng, 500, 0.01, &steps);
        let started = std::time::Instant::now();
        let changes = Detector::default().detect(&s);
        eprintln!(
            "500 points, 4 changes: {:?} (debug builds are slow)",
            started.elapsed()
        );
        let indices: Vec<usize> = changes.iter().map(|c| c.index).collect();
        assert_eq!(indices.len(), 4, "{changes:?}");
        for (found, (at, _)) in indices.iter().zip(steps) {
            assert!(found.abs_diff(at) <= 2, "{indices:?}");
        }
    }

    #[test]
    fn student_t_matches_its_tables() {
        for (t, df, p) in [
            (12.706, 1.0, 0.05),
            (2.228, 10.0, 0.05),
            (2.086, 20.0, 0.05),
            (3.169, 10.0, 0.01),
            (2.576, 1e6, 0.01),
            (1.96, 1e6, 0.05),
            (0.0, 5.0, 1.0),
        ] {
            let got = student_p(t, df);
            assert!(
                (got - p).abs() <= 2e-4 * p.max(1.0),
                "t {t} df {df}: {got}, not {p}"
            );
            assert!((student_p(-t, df) - got).abs() < 1e-12);
        }
        assert!(
            (student_p(1.0, 1.0) - 0.5).abs() < 1e-9,
            "Cauchy: P(|T| >= 1) = 1/2"
        );
        assert!(student_p(f64::INFINITY, 3.0) < f64::MIN_POSITIVE);
        assert!(student_p(f64::NAN, 3.0) >= 1.0 && student_p(1.0, 0.0) >= 1.0);
        let p = student_p(40.0, 998.0);
        assert!((0.0..1e-100).contains(&p), "{p}");
    }

    #[test]
    fn welch_sees_means_not_spreads() {
        let mut rng = SplitMix::new(51);
        let narrow = series(&mut rng, 30, 0.01, &[]);
        let wide = series(&mut rng, 30, 0.05, &[]);
        assert!(welch_p(&narrow, &wide) > 0.05);
        let higher = series(&mut rng, 30, 0.01, &[(0, 0.02)]);
        assert!(welch_p(&narrow, &higher) < 1e-6);
        assert!((welch_p(&[1.0, 1.0], &[1.0, 1.0]) - 1.0).abs() < f64::EPSILON);
        assert!(welch_p(&[1.0, 1.0], &[2.0, 2.0]) < f64::MIN_POSITIVE);
    }

    #[test]
    fn the_scan_agrees_with_the_definition() {
        let mut rng = SplitMix::new(61);
        for len in [4, 9, 25] {
            let values = series(&mut rng, len, 0.03, &[(len / 3, 0.05)]);
            let points = Points::of(&values);
            let (split, scanned) = Scan::new(len).best(&points.0, 2).unwrap_or((0, f64::NAN));
            // The statistic straight from its definition, every split.
            let distance = |a: &[f64], b: &[f64]| -> f64 {
                a.iter()
                    .map(|x| b.iter().map(|y| (x - y).abs()).sum::<f64>())
                    .sum()
            };
            let mut best = (0, f64::NEG_INFINITY);
            for at in 2..=len - 2 {
                let (left, right) = values.split_at(at);
                let (m, k) = (real(left.len()), real(right.len()));
                let energy = 2.0 * distance(left, right) / (m * k)
                    - distance(left, left) / (m * (m - 1.0))
                    - distance(right, right) / (k * (k - 1.0));
                let q = m * k / (m + k) * energy;
                if q > best.1 {
                    best = (at, q);
                }
            }
            assert_eq!(split, best.0, "{len}");
            assert!(
                (scanned - best.1).abs() <= 1e-9 * best.1.abs(),
                "{len}: {scanned} vs {}",
                best.1
            );
        }
    }
}
