//! Welch's t-test, through Student's t distribution and the incomplete
//! beta function.

use super::{mean, real};

/// The two-sided p-value of Welch's t-test that `a` and `b` (two points
/// or more each) have the same mean.
pub(super) fn welch_p(a: &[f64], b: &[f64]) -> f64 {
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
pub(super) fn student_p(t: f64, df: f64) -> f64 {
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
pub(super) fn ln_gamma(x: f64) -> f64 {
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
pub(super) fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
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
pub(super) fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::changepoint::tests::series;
    use crate::random::SplitMix;

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
}
