//! The thresholds `servegate init` writes, from the runs of its
//! calibration: each figure's median and how the runs spread, so that the
//! written suite passes its own next run on the same (busy) machine and
//! still fails a server that got twice as slow. A bound from one sample is
//! a bound on one moment; a bound from the lowest of several is as low as
//! the slowest moment was (a cold first run made `>= 22.3 tok/s` of a
//! server doing 80, which a 3× regression passes).

/// Which way a figure is better: a throughput higher, a latency lower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Better {
    Higher,
    Lower,
}

/// What the calibration's runs of one figure say.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Runs {
    pub(super) n: usize,
    /// The lowest and highest of all runs.
    pub(super) lo: f64,
    pub(super) hi: f64,
    /// The median of the runs that did not stall.
    pub(super) median: f64,
    /// Their standard deviation relative to their median (the stalls left
    /// out, which would inflate it; of five runs, steadier than a median
    /// absolute deviation, which three close runs make near zero).
    pub(super) spread: f64,
    /// Runs at half the median of all or worse (a throughput under half
    /// of it, a latency over twice it): a moment the machine or the server
    /// stalled (a cold first run), left out of the bound, and named.
    pub(super) stalled: Vec<f64>,
}

/// Spreads of margin: a one-sided 99.5% prediction bound for one more run
/// from five is 4.6 standard deviations × √(1 + 1/5) ≈ 5.
pub(super) const SPREADS: f64 = 5.0;

/// The margin a bound keeps from the median, relative: five spreads, at
/// least 20%, at most 50% (so a server at half its speed always fails).
/// The floor is what a shared machine moves between a calibration and a
/// later run, which the calibration's runs, a few seconds apart, do not
/// see: llama.cpp on two cores measured 82.9–84.4 tok/s over five runs,
/// then 74.5 (−11%) a minute later with a build started beside it.
pub(super) const MIN_MARGIN: f64 = 0.20;
pub(super) const MAX_MARGIN: f64 = 0.50;

impl Runs {
    /// The runs of `values` (finite ones) of a figure better `better`, or
    /// `None` without any.
    pub(super) fn of(values: &[f64], better: Better) -> Option<Runs> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        // A run at half the level or worse is a stall, not the server's
        // level: named, and left out of the median and the spread, which
        // it would drag and widen.
        let all = median_of(&v);
        let (stalled, kept): (Vec<f64>, Vec<f64>) = v.iter().partition(|&&x| match better {
            Better::Higher => x < all * (1.0 - MAX_MARGIN),
            Better::Lower => x > all / (1.0 - MAX_MARGIN),
        });
        let median = median_of(&kept);
        #[expect(clippy::cast_precision_loss, reason = "a handful of runs")]
        let n = kept.len() as f64;
        let mean = kept.iter().sum::<f64>() / n;
        let variance = kept.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
        let spread = if median > 0.0 {
            variance.sqrt() / median
        } else {
            0.0
        };
        Some(Runs {
            n: v.len(),
            lo: v[0],
            hi: v[v.len() - 1],
            median,
            spread,
            stalled,
        })
    }

    /// The relative margin of a bound on these runs.
    pub(super) fn margin(&self) -> f64 {
        (SPREADS * self.spread).clamp(MIN_MARGIN, MAX_MARGIN)
    }

    /// Whether the runs spread so much that a server at half the speed
    /// could pass the bound: its own run, at a 99% high of 2.3 spreads,
    /// reaches `0.5 × (1 + 2.3 s)`, which the bound `1 − 5 s` stays above
    /// only while the margin is under 40%.
    pub(super) fn too_noisy(&self) -> bool {
        SPREADS * self.spread >= 0.40
    }

    /// A lower bound on a rate: the median less the margin.
    pub(super) fn rate_bound(&self) -> f64 {
        self.median * (1.0 - self.margin())
    }

    /// An upper bound on a latency: the highest run, stalls included (a
    /// p99 of a few requests is as high as its slowest moment, and a
    /// loaded machine's latency tail is heavy: llama.cpp under stress-ng
    /// answered a rerun's first token in 222 ms where the calibration's
    /// runs that did not stall topped out at 94 ms), plus the margin of
    /// the median and at least `floor_s` (what a busy machine adds to a
    /// fast server's latency), and never under twice the highest. Loose on
    /// purpose: a latency bound from five runs cannot be tight and true.
    pub(super) fn latency_bound(&self, floor_s: f64) -> f64 {
        (self.hi + (self.median * self.margin()).max(floor_s)).max(2.0 * self.hi)
    }
}

fn median_of(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        f64::midpoint(sorted[n / 2 - 1], sorted[n / 2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::SplitMix;

    #[test]
    fn a_slow_run_is_named_and_left_out_of_a_rate_bound() {
        // The case: a cold first run at 28 tok/s of a server doing
        // 76–89.
        let r = Runs::of(&[28.0, 80.0, 82.0, 89.0, 76.0], Better::Higher).unwrap();
        assert_eq!((r.n, r.lo, r.hi, r.median), (5, 28.0, 89.0, 81.0));
        assert_eq!(r.stalled, [28.0]);
        let bound = r.rate_bound();
        assert!((50.0..=72.0).contains(&bound), "{bound} from {r:?}");
        // A 3× regression fails it; the runs it came from pass it.
        assert!(80.0 / 3.0 < bound && 76.0 > bound);
        assert!(!r.too_noisy());
        // A latency's bound keeps above the highest run, twice at least,
        // a stall included (a cold first run at 6 s of a server answering
        // in 0.1 s is named, and still bounds).
        let t = Runs::of(&[0.21, 0.25, 0.22, 0.40, 0.23], Better::Lower).unwrap();
        assert!(t.stalled.is_empty() && t.latency_bound(0.1) >= 0.8, "{t:?}");
        let cold = Runs::of(&[6.169, 0.111, 0.066, 0.098, 0.120], Better::Lower).unwrap();
        assert_eq!(cold.stalled, [6.169]);
        assert!(cold.latency_bound(0.1) >= 2.0 * 6.169);
        assert!(
            Runs::of(&[], Better::Higher).is_none()
                && Runs::of(&[f64::NAN], Better::Lower).is_none()
        );
    }

    /// Judged like a classifier, on seeded calibrations of a server whose
    /// figure wanders run to run (Gaussian noise of 1–10%, and one run in
    /// ten stalled at a third of the speed, as a cold start or a busy
    /// moment does): the written bound fails a rerun of the same server
    /// (not itself stalled) in at most 1% of calibrations at any noise, and
    /// passes a server at half its speed in at most 1% of the calibrations
    /// that did not warn that their runs spread too much to tell (the
    /// margin at its 50% cap). Three stalls in five runs (0.9% of
    /// calibrations at one in ten) are a calibration of a stalled server,
    /// which no rule can tell from a slow one: those are counted, not
    /// excused.
    #[test]
    fn a_rate_bound_passes_its_own_reruns_and_fails_half_the_speed() {
        let mut rng = SplitMix::new(29);
        for noise in [0.01, 0.03, 0.05, 0.10] {
            let mut draw = |level: f64| {
                if rng.unit() < 0.1 {
                    level / 3.0
                } else {
                    level * (1.0 + noise * rng.gauss())
                }
            };
            let trials = 2000_u32;
            let (mut false_red, mut missed, mut warned) = (0_u32, 0_u32, 0_u32);
            for _ in 0..trials {
                let runs = Runs::of(
                    &(0..5).map(|_| draw(100.0)).collect::<Vec<_>>(),
                    Better::Higher,
                )
                .unwrap();
                let bound = runs.rate_bound();
                // A rerun of the same server, and one of a server at half
                // its speed (neither stalled).
                let mut rerun = || loop {
                    let v = draw(100.0);
                    if v > 50.0 {
                        break v;
                    }
                };
                false_red += u32::from(rerun() < bound);
                let half = rerun() / 2.0;
                if runs.too_noisy() {
                    warned += 1;
                } else {
                    missed += u32::from(half >= bound);
                }
            }
            let share = |n: u32| f64::from(n) / f64::from(trials);
            println!(
                "noise {noise}: false red {:.3}, warned too noisy {:.3}, half speed passed unwarned {:.3}",
                share(false_red),
                share(warned),
                share(missed)
            );
            assert!(
                share(false_red) <= 0.01,
                "noise {noise}: {false_red} of {trials} reruns failed"
            );
            assert!(
                share(missed) <= 0.01,
                "noise {noise}: {missed} of {trials} half-speed servers passed unwarned"
            );
        }
        // Without noise or stalls the margin is its floor, 20%.
        let steady = Runs::of(&[100.0; 5], Better::Higher).unwrap();
        assert!((steady.rate_bound() - 80.0).abs() < 1e-9 && !steady.too_noisy());
    }
}
