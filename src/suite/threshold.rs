//! Threshold expressions of performance gates: `decode_tok_s.mean: ">= 12.5"`,
//! `ttft.p99: "<= 2s"`, `errors: "== 0"`, `ttft.p99: "<= baseline + 10%"`.

use std::fmt;

use super::metric::{MetricKey, Unit, format_value};

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `>=`
    Ge,
    /// `>`
    Gt,
    /// `<=`
    Le,
    /// `<`
    Lt,
    /// `==`
    Eq,
}

impl Op {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Ge => ">=",
            Op::Gt => ">",
            Op::Le => "<=",
            Op::Lt => "<",
            Op::Eq => "==",
        }
    }

    /// Whether `value op bound` holds.
    pub fn holds(self, value: f64, bound: f64) -> bool {
        match self {
            Op::Ge => value >= bound,
            Op::Gt => value > bound,
            Op::Le => value <= bound,
            Op::Lt => value < bound,
            Op::Eq => (value - bound).abs() <= f64::EPSILON * bound.abs().max(1.0),
        }
    }
}

/// What a threshold compares against.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    /// A fixed value; seconds for durations.
    Value(f64),
    /// The figure stored in the gate's baseline, adjusted.
    Baseline(Relative),
    /// The figure the same gate measured in another variant of this run
    /// (`variant(name) * 1.05`), adjusted.
    Variant(String, Relative),
    /// A statistic of the gate's recent history of the same configuration
    /// (`history.median(10) * 0.97`), adjusted.
    History(Recent, Relative),
    /// No significant change in the bad direction against the series'
    /// current level (`>= no_regression`: higher is better).
    NoRegression,
}

/// A statistic of a gate's last runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recent {
    /// `history.median(N)`: the median of the last N.
    Median(u32),
    /// `history.mean(N)`: their mean.
    Mean(u32),
}

impl Recent {
    /// How many runs it is made of.
    pub fn runs(self) -> u32 {
        match self {
            Recent::Median(n) | Recent::Mean(n) => n,
        }
    }

    /// As a suite writes it: `history.median(10)`.
    pub fn name(self) -> String {
        match self {
            Recent::Median(n) => format!("history.median({n})"),
            Recent::Mean(n) => format!("history.mean({n})"),
        }
    }
}

/// How a baseline figure is adjusted into a bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Relative {
    /// `baseline`
    Same,
    /// `baseline * 0.95`
    Times(f64),
    /// `baseline + 10%` / `baseline - 5%` (the signed percentage)
    Percent(f64),
    /// `baseline + 50ms` / `baseline - 20` (the signed offset, in seconds for durations)
    Plus(f64),
}

impl Relative {
    /// The bound made of a reference figure.
    pub fn apply(self, reference: f64) -> f64 {
        match self {
            Relative::Same => reference,
            Relative::Times(f) => reference * f,
            Relative::Percent(p) => reference * (1.0 + p / 100.0),
            Relative::Plus(d) => reference + d,
        }
    }

    fn fmt_after(self, f: &mut fmt::Formatter<'_>, m: super::metric::Metric) -> fmt::Result {
        match self {
            Relative::Same => Ok(()),
            Relative::Times(x) => write!(f, " * {x}"),
            Relative::Percent(p) => write!(f, " {} {}%", if p < 0.0 { '-' } else { '+' }, p.abs()),
            // An offset of a percentage is written without `%`, which
            // would read back as a relative `+ 10%`.
            Relative::Plus(d) if m.spec().unit == Unit::Percent => {
                write!(f, " {} {}", if d < 0.0 { '-' } else { '+' }, d.abs())
            }
            Relative::Plus(d) => write!(
                f,
                " {} {}",
                if d < 0.0 { '-' } else { '+' },
                format_value(m, d.abs())
            ),
        }
    }
}

/// A validated threshold: `key op bound`.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// What is compared.
    pub key: MetricKey,
    /// How.
    pub op: Op,
    /// Against what.
    pub bound: Bound,
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ", self.key, self.op.symbol())?;
        let m = self.key.metric;
        match &self.bound {
            Bound::Value(v) => f.write_str(&format_value(m, *v)),
            Bound::Baseline(r) => {
                f.write_str("baseline")?;
                r.fmt_after(f, m)
            }
            Bound::Variant(name, r) => {
                write!(f, "variant({name})")?;
                r.fmt_after(f, m)
            }
            Bound::History(recent, r) => {
                f.write_str(&recent.name())?;
                r.fmt_after(f, m)
            }
            Bound::NoRegression => f.write_str("no_regression"),
        }
    }
}

/// Parses the comparison side (`">= 12.5"`, `"<= 2s"`, `">= baseline * 0.95"`,
/// `"<= baseline + 10%"`) for a metric.
pub fn parse_comparison(key: MetricKey, text: &str) -> Result<Threshold, String> {
    let text = text.trim();
    let (op, rest) = [
        (">=", Op::Ge),
        ("<=", Op::Le),
        ("==", Op::Eq),
        (">", Op::Gt),
        ("<", Op::Lt),
    ]
    .into_iter()
    .find_map(|(sym, op)| text.strip_prefix(sym).map(|r| (op, r.trim())))
    .ok_or_else(|| {
        format!("`{text}` does not start with a comparison operator (>=, >, <=, <, ==)")
    })?;
    // Known only as at most its bucket's bound: only `<` and `<=` judge it.
    if key.is_bucket_bound() && !matches!(op, Op::Le | Op::Lt) {
        return Err(format!(
            "`{key} {}`: the server's histogram gives a percentile only as the upper bound of the bucket that holds it, which can say it is below a bound, never above one: compare it with `<` or `<=`, or gate `{}.mean` (exact)",
            op.symbol(),
            key.metric.name()
        ));
    }
    let bound = if let Some(adjust) = rest.strip_prefix("baseline") {
        Bound::Baseline(parse_relative(key, adjust.trim(), "baseline")?)
    } else if rest == "no_regression" {
        if op == Op::Eq {
            return Err(format!(
                "`{text}`: say which way is worse: `>= no_regression` (higher is better) or `<= no_regression`"
            ));
        }
        Bound::NoRegression
    } else if let Some(named) = rest.strip_prefix("history.") {
        let (recent, adjust) = parse_recent(named)?;
        Bound::History(recent, parse_relative(key, adjust.trim(), &recent.name())?)
    } else if let Some(named) = rest.strip_prefix("variant(") {
        let (name, adjust) = named
            .split_once(')')
            .ok_or_else(|| format!("`{rest}`: expected `variant(NAME)`"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(format!(
                "`{rest}`: expected `variant(NAME)` with a variant's name"
            ));
        }
        Bound::Variant(
            name.to_owned(),
            parse_relative(key, adjust.trim(), "variant(…)")?,
        )
    } else {
        Bound::Value(parse_amount(key, rest)?)
    };
    // Two bucket bounds compared would hide any change within a bucket.
    if key.is_bucket_bound() && !matches!(bound, Bound::Value(_)) {
        return Err(format!(
            "`{key} {} {rest}`: the server's histogram gives a percentile only as the upper bound of its bucket, and another run's is a bucket's bound too: the two compared would hide any change within a bucket (0.41s and 0.59s both read ≤ 600ms); compare it with a fixed value, or gate `{}.mean` (exact) against {rest}",
            op.symbol(),
            key.metric.name()
        ));
    }
    Ok(Threshold { key, op, bound })
}

/// A value of the metric: a duration with a unit, or a number, with the
/// metric's own unit or none (`1%`, `12.5 tok/s`: what the output prints).
fn parse_amount(key: MetricKey, text: &str) -> Result<f64, String> {
    if key.metric.is_duration() {
        return crate::units::parse_duration(text)
            .map(|d| d.as_secs_f64())
            .map_err(|e| format!("{key} is a duration: {e}"));
    }
    let unit = key.metric.unit();
    let number = match text.strip_suffix(unit) {
        Some(n) if !unit.is_empty() => n.trim_end(),
        _ => text,
    };
    let value: f64 = number.parse().map_err(|_| {
        let unit_written =
            number.trim_start_matches(|c: char| c.is_ascii_digit() || ".-+".contains(c));
        if unit_written.len() < number.len() && !unit_written.trim().is_empty() {
            if unit.is_empty() {
                format!("`{text}`: {key} is a count, written without a unit")
            } else {
                format!("`{text}`: {key} is in {unit}")
            }
        } else {
            format!("`{text}` is not a number")
        }
    })?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(format!("`{text}` is not a finite number"))
    }
}

/// `median(10) …` or `mean(5) …` (after `history.`): the statistic and
/// what follows it.
fn parse_recent(text: &str) -> Result<(Recent, &str), String> {
    let expected = "expected `history.median(N)` or `history.mean(N)`, N the runs (2 to 1000)";
    let (name, rest) = text
        .split_once('(')
        .ok_or_else(|| format!("`history.{text}`: {expected}"))?;
    let (n, adjust) = rest
        .split_once(')')
        .ok_or_else(|| format!("`history.{text}`: {expected}"))?;
    let n: u32 = n
        .trim()
        .parse()
        .ok()
        .filter(|n| (2..=1000).contains(n))
        .ok_or_else(|| format!("`history.{text}`: {expected}"))?;
    match name.trim() {
        "median" => Ok((Recent::Median(n), adjust)),
        "mean" => Ok((Recent::Mean(n), adjust)),
        _ => Err(format!("`history.{text}`: {expected}")),
    }
}

fn parse_relative(key: MetricKey, text: &str, after: &str) -> Result<Relative, String> {
    if text.is_empty() {
        return Ok(Relative::Same);
    }
    let expected = format!(
        "after `{after}`: nothing, `* 0.95`, `+ 10%`, `- 5%` or an offset such as `+ 50ms`"
    );
    let (sign, rest) = match text.chars().next() {
        Some('*') => {
            let factor: f64 = text[1..]
                .trim()
                .parse()
                .map_err(|_| format!("`{text}`: expected a factor {expected}"))?;
            return if factor.is_finite() && factor > 0.0 {
                Ok(Relative::Times(factor))
            } else {
                Err(format!("`{text}`: the factor must be above 0"))
            };
        }
        Some('+') => (1.0, text[1..].trim()),
        Some('-') => (-1.0, text[1..].trim()),
        _ => return Err(format!("`{after} {text}`: expected {expected}")),
    };
    if let Some(p) = rest.strip_suffix('%') {
        let p: f64 = p
            .trim()
            .parse()
            .map_err(|_| format!("`{rest}` is not a percentage"))?;
        return Ok(Relative::Percent(sign * p));
    }
    Ok(Relative::Plus(sign * parse_amount(key, rest)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> MetricKey {
        s.parse().unwrap()
    }

    /// A percentile of the server's histogram is known only as at most
    /// its bucket's bound: `<`/`<=` judge it, `>`, `>=` and `==` cannot;
    /// its mean is exact and takes any comparison.
    #[test]
    fn a_histograms_percentile_is_judged_only_from_above() {
        assert!(parse_comparison(key("server.ttft.p99"), "<= 2s").is_ok());
        assert!(parse_comparison(key("server.queue_time.mean"), "< baseline * 2").is_ok());
        for relative in [
            "baseline * 1.1",
            "variant(fast)",
            "history.median(5)",
            "no_regression",
        ] {
            let why = parse_comparison(key("server.queue_time.p99"), &format!("<= {relative}"))
                .unwrap_err();
            assert!(
                why.contains("would hide any change within a bucket"),
                "{why}"
            );
        }
        assert!(parse_comparison(key("server.e2e.mean"), ">= 1s").is_ok());
        for op in [">=", ">", "=="] {
            let why = parse_comparison(key("server.itl.p50"), &format!("{op} 5ms")).unwrap_err();
            assert!(
                why.contains(
                    "gives a percentile only as the upper bound of the bucket that holds it"
                ) && why.ends_with("or gate `server.itl.mean` (exact)"),
                "{why}"
            );
        }
        for stat in ["min", "stddev"] {
            let err = format!("server.tpot.{stat}")
                .parse::<MetricKey>()
                .unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "`server.tpot` is read from the server's histogram buckets, which keep no `{stat}`: name `.mean` or a percentile (`.p99`)"
                )
            );
        }
    }

    #[test]
    fn parses_comparisons_with_units() {
        let t = parse_comparison(key("ttft.p99"), "<= 2s").unwrap();
        assert_eq!((t.op, &t.bound), (Op::Le, &Bound::Value(2.0)));
        let t = parse_comparison(key("itl.p50"), "<250ms").unwrap();
        assert_eq!(t.op, Op::Lt);
        assert!(matches!(t.bound, Bound::Value(v) if (v - 0.25).abs() < 1e-12));
        let t = parse_comparison(key("decode_tok_s.mean"), ">= 12.5").unwrap();
        assert_eq!((t.op, &t.bound), (Op::Ge, &Bound::Value(12.5)));
        let t = parse_comparison(key("errors"), "== 0").unwrap();
        assert_eq!((t.op, &t.bound), (Op::Eq, &Bound::Value(0.0)));
        assert_eq!(t.to_string(), "errors == 0");
    }

    #[test]
    fn parses_variant_comparisons() {
        let t = parse_comparison(key("decode_tok_s.mean"), ">= variant(baseline) * 1.05").unwrap();
        assert_eq!(
            t.bound,
            Bound::Variant("baseline".into(), Relative::Times(1.05))
        );
        assert_eq!(
            t.to_string(),
            "decode_tok_s.mean >= variant(baseline) * 1.05"
        );
        let t = parse_comparison(key("ttft.p99"), "<= variant(a)").unwrap();
        assert_eq!(t.bound, Bound::Variant("a".into(), Relative::Same));
        assert!(parse_comparison(key("ttft.p99"), "<= variant() * 2").is_err());
        assert!(parse_comparison(key("ttft.p99"), "<= variant(a * 2").is_err());
        assert!(parse_comparison(key("ttft.p99"), "<= variant(a) / 2").is_err());
    }

    #[test]
    fn parses_baseline_comparisons() {
        let rel = |k: &str, text: &str| parse_comparison(key(k), text).unwrap();
        let t = rel("decode_tok_s.mean", ">= baseline * 0.95");
        assert_eq!(t.bound, Bound::Baseline(Relative::Times(0.95)));
        assert!((Relative::Times(0.95).apply(200.0) - 190.0).abs() < 1e-9);
        assert_eq!(t.to_string(), "decode_tok_s.mean >= baseline * 0.95");
        let t = rel("ttft.p99", "<= baseline + 10%");
        assert_eq!(t.bound, Bound::Baseline(Relative::Percent(10.0)));
        assert!((Relative::Percent(10.0).apply(0.2) - 0.22).abs() < 1e-9);
        assert_eq!(t.to_string(), "ttft.p99 <= baseline + 10%");
        let t = rel("itl.p99", "<= baseline + 500us");
        assert_eq!(t.bound, Bound::Baseline(Relative::Plus(0.0005)));
        assert!((Relative::Plus(0.0005).apply(0.01) - 0.0105).abs() < 1e-12);
        assert_eq!(t.to_string(), "itl.p99 <= baseline + 500us");
        assert_eq!(
            rel("output_tok_s", ">= baseline - 5%").bound,
            Bound::Baseline(Relative::Percent(-5.0))
        );
        assert_eq!(
            rel("errors", "<= baseline").bound,
            Bound::Baseline(Relative::Same)
        );
        for bad in [
            ">= baseline * 0",
            ">= baseline / 2",
            "<= baseline + 10",
            ">= baseline + lots%",
        ] {
            let k = if bad.starts_with("<=") {
                "ttft.p99"
            } else {
                "output_tok_s"
            };
            assert!(parse_comparison(key(k), bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rejects_bad_comparisons() {
        assert!(
            parse_comparison(key("ttft.p99"), "<= 2")
                .unwrap_err()
                .contains("no unit")
        );
        assert!(
            parse_comparison(key("ttft.p99"), "<= 2d")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(
            parse_comparison(key("errors"), "0")
                .unwrap_err()
                .contains("operator")
        );
        assert!(parse_comparison(key("errors"), "== zero").is_err());
        assert!(parse_comparison(key("output_tok_s"), ">= inf").is_err());
    }

    /// `token_drift_chunks <= 1.00%` as the output prints it, and a rate
    /// with its unit, are read as written.
    #[test]
    fn units_as_printed_are_accepted() {
        let t = parse_comparison(key("token_drift_chunks"), "<= 1%").unwrap();
        assert_eq!(t.bound, Bound::Value(1.0));
        let t = parse_comparison(key("token_drift_metrics"), "<= 1.00 %").unwrap();
        assert_eq!(t.bound, Bound::Value(1.0));
        let t = parse_comparison(key("decode_tok_s.mean"), ">= 12.5 tok/s").unwrap();
        assert_eq!(t.bound, Bound::Value(12.5));
        let t = parse_comparison(key("requests_per_s"), ">= 2 req/s").unwrap();
        assert_eq!(t.bound, Bound::Value(2.0));
        let err = parse_comparison(key("decode_tok_s.mean"), ">= 12.5 req/s").unwrap_err();
        assert!(err.contains("decode_tok_s.mean is in tok/s"), "{err}");
        assert!(parse_comparison(key("errors"), "== 0%").is_err());
    }

    /// Every threshold as the output prints it is accepted back and prints
    /// the same again: every key, every operator, every kind of bound.
    #[test]
    fn every_threshold_as_printed_is_accepted_back() {
        let relatives = [
            Relative::Same,
            Relative::Times(0.95),
            Relative::Percent(10.0),
            Relative::Percent(-5.0),
            Relative::Plus(0.05),
            Relative::Plus(-0.5),
        ];
        let mut checked = 0;
        for k in crate::suite::metric::all_keys() {
            let key = key(&k);
            let mut bounds = vec![Bound::Value(1.5), Bound::Value(0.0), Bound::Value(0.0004)];
            for r in relatives {
                bounds.push(Bound::Baseline(r));
                bounds.push(Bound::Variant("fast".into(), r));
                bounds.push(Bound::History(Recent::Median(10), r));
                bounds.push(Bound::History(Recent::Mean(3), r));
            }
            bounds.push(Bound::NoRegression);
            for op in [Op::Ge, Op::Gt, Op::Le, Op::Lt, Op::Eq] {
                for bound in &bounds {
                    if (op == Op::Eq && *bound == Bound::NoRegression)
                        || (key.is_bucket_bound()
                            && (!matches!(op, Op::Le | Op::Lt)
                                || !matches!(bound, Bound::Value(_))))
                    {
                        continue;
                    }
                    let t = Threshold {
                        key,
                        op,
                        bound: bound.clone(),
                    };
                    let printed = t.to_string();
                    let side = printed
                        .strip_prefix(&format!("{k} "))
                        .expect("the key first");
                    let back = parse_comparison(key, side)
                        .unwrap_or_else(|e| panic!("`{printed}` is not accepted back: {e}"));
                    assert_eq!(back.to_string(), printed);
                    // The kind of bound survives (a `+ 1.00%` offset is not
                    // read back as a relative percentage).
                    assert_eq!(
                        std::mem::discriminant(&back.bound),
                        std::mem::discriminant(&t.bound),
                        "{printed}"
                    );
                    if let (Bound::Baseline(a), Bound::Baseline(b)) = (&back.bound, &t.bound) {
                        assert_eq!(
                            std::mem::discriminant(a),
                            std::mem::discriminant(b),
                            "{printed}"
                        );
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 1000, "{checked}");
    }

    #[test]
    fn parses_history_comparisons() {
        let t = parse_comparison(key("decode_tok_s.mean"), ">= history.median(10) * 0.97").unwrap();
        assert_eq!(
            t.bound,
            Bound::History(Recent::Median(10), Relative::Times(0.97))
        );
        assert_eq!(
            t.to_string(),
            "decode_tok_s.mean >= history.median(10) * 0.97"
        );
        let t = parse_comparison(key("ttft.p99"), "<= history.mean(5) + 10%").unwrap();
        assert_eq!(
            t.bound,
            Bound::History(Recent::Mean(5), Relative::Percent(10.0))
        );
        let t = parse_comparison(key("ttft.p99"), "<= no_regression").unwrap();
        assert_eq!((t.op, &t.bound), (Op::Le, &Bound::NoRegression));
        for bad in [
            ">= history.median(1)",
            ">= history.median(x)",
            ">= history.p99(10)",
            ">= history.median",
            "== no_regression",
        ] {
            assert!(
                parse_comparison(key("decode_tok_s.mean"), bad).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn comparisons_hold() {
        assert!(Op::Ge.holds(12.5, 12.5));
        assert!(!Op::Gt.holds(12.5, 12.5));
        assert!(Op::Eq.holds(0.0, 0.0));
        assert!(!Op::Eq.holds(1.0, 0.0));
        assert!(Op::Le.holds(1.9, 2.0));
    }
}
