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
    /// noise of the seeded series the history's statistics are judged on,
    /// and the gamma draws below.
    pub(crate) fn gauss(&mut self) -> f64 {
        let (u1, u2) = (self.unit(), self.unit());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// A gamma-distributed value of shape `shape` (above 0) and scale 1:
    /// Marsaglia and Tsang's squeeze for shapes of 1 and more, and for a
    /// shape below 1 a draw of shape + 1 scaled by `U^(1/shape)`.
    pub(crate) fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            let u = self.unit();
            return self.gamma(shape + 1.0) * u.powf(1.0 / shape);
        }
        let shifted = shape - 1.0 / 3.0;
        let spread = 1.0 / (9.0 * shifted).sqrt();
        loop {
            let normal = self.gauss();
            let base = 1.0 + spread * normal;
            if base <= 0.0 {
                continue;
            }
            let cube = base * base * base;
            let uniform = self.unit();
            if uniform < 1.0 - 0.0331 * normal.powi(4)
                || uniform.ln() < 0.5 * normal * normal + shifted * (1.0 - cube + cube.ln())
            {
                return shifted * cube;
            }
        }
    }
}
