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
    /// `!=`
    Ne,
}

impl Op {
    /// Every operator, in the order the docs list them.
    pub const ALL: [Op; 6] = [Op::Ge, Op::Gt, Op::Le, Op::Lt, Op::Eq, Op::Ne];

    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Ge => ">=",
            Op::Gt => ">",
            Op::Le => "<=",
            Op::Lt => "<",
            Op::Eq => "==",
            Op::Ne => "!=",
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
            Op::Ne => !Op::Eq.holds(value, bound),
        }
    }

    /// Whether the bound is a point (`==`, `!=`), with no better side.
    pub(crate) fn is_point(self) -> bool {
        matches!(self, Op::Eq | Op::Ne)
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
        self.fmt_bound(f)
    }
}

impl Threshold {
    /// The bound as servegate writes it back: a value in the figure's
    /// unit, `baseline * 1.1`, `variant(base) * 1.05`,
    /// `history.median(10)`, `no_regression`.
    pub(crate) fn bound_text(&self) -> String {
        struct Written<'a>(&'a Threshold);
        impl fmt::Display for Written<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt_bound(f)
            }
        }
        Written(self).to_string()
    }

    fn fmt_bound(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
pub(crate) fn parse_comparison(key: MetricKey, text: &str) -> Result<Threshold, String> {
    let text = text.trim();
    let (op, rest) = [
        (">=", Op::Ge),
        ("<=", Op::Le),
        ("==", Op::Eq),
        ("!=", Op::Ne),
        (">", Op::Gt),
        ("<", Op::Lt),
    ]
    .into_iter()
    .find_map(|(sym, op)| text.strip_prefix(sym).map(|r| (op, r.trim())))
    .ok_or_else(|| {
        format!("`{text}` does not start with a comparison operator (>=, >, <=, <, ==, !=)")
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
        if op.is_point() {
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
mod tests;
