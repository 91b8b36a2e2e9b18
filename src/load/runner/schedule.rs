//! When an open loop's requests are due: evenly spaced, a seeded Poisson
//! or gamma process, or at the times a trace recorded.

use std::sync::Arc;
use std::time::Duration;

use crate::random::SplitMix;
use crate::suite::Arrival;

/// Offsets of a window's intended starts from its start. `times`: the
/// dataset's records' times (a trace), of which the window's first
/// request sends record `first` (the warm-up sent those before it), so a
/// replay's first offset is zero and it ends with the trace.
pub fn schedule(
    (rate, arrival, seed): (f64, Arrival, u64),
    times: Option<Arc<Vec<Duration>>>,
    first: u32,
) -> Box<dyn Iterator<Item = Duration> + Send> {
    if let Arrival::Trace { slowdown } = arrival {
        let times = times.unwrap_or_default();
        let start = times.get(first as usize).copied().unwrap_or_default();
        return Box::new((first as usize..times.len()).map_while(move |i| {
            Duration::try_from_secs_f64(times[i].saturating_sub(start).as_secs_f64() * slowdown)
                .ok()
        }));
    }
    let mut rng = SplitMix::new(seed);
    let mut at = 0.0_f64;
    // A start past what a duration holds (a rate near 0, a gamma shape near
    // 0) ends the schedule: no deadline reaches it.
    Box::new(std::iter::from_fn(move || {
        let now = at;
        at += match arrival {
            Arrival::Constant | Arrival::Trace { .. } => 1.0 / rate,
            Arrival::Poisson => -rng.unit().ln() / rate,
            Arrival::Gamma { burstiness } => rng.gamma(burstiness) / (rate * burstiness),
        };
        Duration::try_from_secs_f64(now).ok()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(arrival: Arrival, rate: f64, n: usize) -> Vec<Duration> {
        schedule((rate, arrival, 7), None, 0).take(n).collect()
    }

    /// The mean gap and the squared coefficient of variation of the gaps.
    fn gaps(s: &[Duration]) -> (f64, f64) {
        let g: Vec<f64> = s
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]).as_secs_f64())
            .collect();
        #[expect(clippy::cast_precision_loss, reason = "a test's small count")]
        let n = g.len() as f64;
        let mean = g.iter().sum::<f64>() / n;
        let var = g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        (mean, var / (mean * mean))
    }

    #[test]
    fn constant_schedule_is_evenly_spaced() {
        assert_eq!(
            take(Arrival::Constant, 4.0, 3),
            [
                Duration::ZERO,
                Duration::from_millis(250),
                Duration::from_millis(500)
            ]
        );
    }

    #[test]
    fn poisson_schedule_is_seeded_with_the_right_mean_rate() {
        let a = take(Arrival::Poisson, 100.0, 20_000);
        assert_eq!(a, take(Arrival::Poisson, 100.0, 20_000));
        let (mean, cv2) = gaps(&a);
        assert!((mean - 0.01).abs() < 0.0005, "mean gap {mean}");
        assert!((cv2 - 1.0).abs() < 0.1, "exponential gaps: cv² {cv2}");
    }

    /// A gamma process of shape k has gaps of mean 1/rate and squared
    /// coefficient of variation 1/k: bursty below 1, even above.
    #[test]
    fn gamma_schedules_keep_the_rate_and_vary_as_their_burstiness_says() {
        for k in [0.1, 0.5, 1.0, 4.0] {
            let s = take(Arrival::Gamma { burstiness: k }, 50.0, 40_000);
            assert_eq!(s, take(Arrival::Gamma { burstiness: k }, 50.0, 40_000));
            let (mean, cv2) = gaps(&s);
            assert!((mean - 0.02).abs() < 0.02 * 0.06, "k {k}: mean gap {mean}");
            assert!(
                (cv2 * k - 1.0).abs() < 0.15,
                "k {k}: cv² {cv2}, expected {}",
                1.0 / k
            );
        }
    }

    #[test]
    fn a_trace_replays_from_the_first_record_after_the_warm_up() {
        let times = Arc::new([0, 100, 250, 1000].map(Duration::from_millis).to_vec());
        let replay = |slowdown, first| -> Vec<Duration> {
            schedule(
                (1.0, Arrival::Trace { slowdown }, 0),
                Some(Arc::clone(&times)),
                first,
            )
            .collect()
        };
        assert_eq!(
            replay(1.0, 0),
            [0, 100, 250, 1000].map(Duration::from_millis)
        );
        assert_eq!(replay(2.0, 1), [0, 300, 1800].map(Duration::from_millis));
        assert!(replay(1.0, 4).is_empty());
    }
}
