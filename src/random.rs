//! The seeded generator of load shapes: Poisson arrivals and synthetic
//! prompts draw from it, so a run is reproducible from its seed; and
//! `unpredictable`, for values no other run or program may guess.

/// A value no other run, and no program servegate starts, can guess: std's
/// per-process random hash keys, each call's own (a counter).
pub(crate) fn unpredictable() -> u64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(NEXT.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// A seeded 64-bit generator (splitmix64): small, fast, reproducible.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix(u64);

impl SplitMix {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in (0, 1].
    pub fn unit(&mut self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "53 random bits are exact")]
        let v = ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64;
        v
    }

    /// A standard normal value (Box–Muller, from two uniform values): the
    /// noise of the seeded series the history's statistics are judged on.
    #[cfg(test)]
    pub(crate) fn gauss(&mut self) -> f64 {
        let (u1, u2) = (self.unit(), self.unit());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}
