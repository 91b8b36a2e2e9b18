//! Threshold expressions of performance gates: `decode_tok_s.mean: ">= 12.5"`,
//! `ttft.p99: "<= 2s"`, `errors: "== 0"`.

use std::fmt;
use std::time::Duration;

/// A measured quantity of a performance gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Time to first token (any token, reasoning included).
    Ttft,
    /// Time to the first content token (after any reasoning).
    TtftContent,
    /// Inter-token latency.
    Itl,
    /// Time per output token after the first.
    Tpot,
    /// End-to-end request latency.
    E2e,
    /// Per-request decode rate, tokens per second after the first token.
    DecodeTokS,
    /// Aggregate output tokens per second over the measured window.
    OutputTokS,
    /// Aggregate prompt tokens per second (server-reported counts).
    InputTokS,
    /// Aggregate prompt plus output tokens per second.
    TotalTokS,
    /// Completed requests per second over the measured window.
    RequestsPerS,
    /// Failed requests in the measured window.
    Errors,
    /// Requests per second that met every SLO of the gate.
    GoodputRequestsPerS,
    /// Output tokens per second of the requests that met every SLO.
    GoodputTokS,
    /// Open loop: requests that started more than 5 ms after their intended time.
    LateStarts,
    /// Percent difference between server-reported output tokens and the
    /// tokens counted from chunks, over requests with server counts.
    TokenDriftChunks,
    /// Percent difference between the server's `/metrics` generation-token
    /// counter delta and the output tokens the client received.
    TokenDriftMetrics,
}

impl Metric {
    /// All metrics, in report order.
    pub const ALL: [Metric; 16] = [
        Metric::Ttft,
        Metric::TtftContent,
        Metric::Itl,
        Metric::Tpot,
        Metric::E2e,
        Metric::DecodeTokS,
        Metric::OutputTokS,
        Metric::InputTokS,
        Metric::TotalTokS,
        Metric::RequestsPerS,
        Metric::Errors,
        Metric::GoodputRequestsPerS,
        Metric::GoodputTokS,
        Metric::LateStarts,
        Metric::TokenDriftChunks,
        Metric::TokenDriftMetrics,
    ];

    /// The name used in suites.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::TtftContent => "ttft_content",
            Metric::Itl => "itl",
            Metric::Tpot => "tpot",
            Metric::E2e => "e2e",
            Metric::DecodeTokS => "decode_tok_s",
            Metric::OutputTokS => "output_tok_s",
            Metric::InputTokS => "input_tok_s",
            Metric::TotalTokS => "total_tok_s",
            Metric::RequestsPerS => "requests_per_s",
            Metric::Errors => "errors",
            Metric::GoodputRequestsPerS => "goodput_requests_per_s",
            Metric::GoodputTokS => "goodput_tok_s",
            Metric::LateStarts => "late_starts",
            Metric::TokenDriftChunks => "token_drift_chunks",
            Metric::TokenDriftMetrics => "token_drift_metrics",
        }
    }

    /// Whether values are durations (stored in seconds).
    pub fn is_duration(self) -> bool {
        matches!(
            self,
            Metric::Ttft | Metric::TtftContent | Metric::Itl | Metric::Tpot | Metric::E2e
        )
    }

    /// Whether the metric is a per-request distribution that needs a statistic.
    pub fn is_distribution(self) -> bool {
        self.is_duration() || self == Metric::DecodeTokS
    }

    /// The unit printed after a value.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::DecodeTokS
            | Metric::OutputTokS
            | Metric::InputTokS
            | Metric::TotalTokS
            | Metric::GoodputTokS => "tok/s",
            Metric::RequestsPerS | Metric::GoodputRequestsPerS => "req/s",
            Metric::Errors | Metric::LateStarts => "",
            Metric::TokenDriftChunks | Metric::TokenDriftMetrics => "%",
            Metric::Ttft | Metric::TtftContent | Metric::Itl | Metric::Tpot | Metric::E2e => "s",
        }
    }
}

/// A statistic of a distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stat {
    /// Arithmetic mean.
    Mean,
    /// Standard deviation.
    Stddev,
    /// Smallest sample.
    Min,
    /// Median.
    P50,
    /// 90th percentile.
    P90,
    /// 95th percentile.
    P95,
    /// 99th percentile.
    P99,
    /// 99.9th percentile.
    P999,
    /// Largest sample.
    Max,
}

impl Stat {
    /// All statistics, in report order.
    pub const ALL: [Stat; 9] = [
        Stat::Mean,
        Stat::Stddev,
        Stat::Min,
        Stat::P50,
        Stat::P90,
        Stat::P95,
        Stat::P99,
        Stat::P999,
        Stat::Max,
    ];

    /// The quantile of a percentile statistic.
    pub fn quantile(self) -> Option<f64> {
        match self {
            Stat::P50 => Some(0.5),
            Stat::P90 => Some(0.9),
            Stat::P95 => Some(0.95),
            Stat::P99 => Some(0.99),
            Stat::P999 => Some(0.999),
            Stat::Mean | Stat::Stddev | Stat::Min | Stat::Max => None,
        }
    }

    /// The name used in suites.
    pub fn name(self) -> &'static str {
        match self {
            Stat::Mean => "mean",
            Stat::Stddev => "stddev",
            Stat::Min => "min",
            Stat::P50 => "p50",
            Stat::P90 => "p90",
            Stat::P95 => "p95",
            Stat::P99 => "p99",
            Stat::P999 => "p99.9",
            Stat::Max => "max",
        }
    }
}

/// `metric` or `metric.stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MetricKey {
    /// The metric.
    pub metric: Metric,
    /// The statistic, for distributions.
    pub stat: Option<Stat>,
}

impl fmt::Display for MetricKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.stat {
            Some(s) => write!(f, "{}.{}", self.metric.name(), s.name()),
            None => f.write_str(self.metric.name()),
        }
    }
}

/// Every key a threshold may use, for "did you mean" and "expected" lines.
pub fn all_keys() -> Vec<String> {
    let mut keys = Vec::new();
    for m in Metric::ALL {
        if m.is_distribution() {
            keys.extend(
                Stat::ALL
                    .iter()
                    .map(|s| format!("{}.{}", m.name(), s.name())),
            );
        } else {
            keys.push(m.name().to_owned());
        }
    }
    keys
}

impl std::str::FromStr for MetricKey {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (name, stat) = match text.split_once('.') {
            Some((n, s)) => (n, Some(s)),
            None => (text, None),
        };
        let metric = Metric::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| format!("unknown metric `{text}`"))?;
        let stat = match (metric.is_distribution(), stat) {
            (true, None) => {
                return Err(format!(
                    "`{name}` is a distribution: name a statistic, e.g. `{name}.p99` or `{name}.mean`"
                ));
            }
            (false, Some(_)) => {
                return Err(format!(
                    "`{name}` is a single figure and takes no statistic"
                ));
            }
            (false, None) => None,
            (true, Some(s)) => Some(
                Stat::ALL
                    .into_iter()
                    .find(|st| st.name() == s)
                    .ok_or_else(|| format!("unknown statistic `{s}` of `{name}`"))?,
            ),
        };
        Ok(MetricKey { metric, stat })
    }
}

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

    fn fmt_after(self, f: &mut fmt::Formatter<'_>, m: Metric) -> fmt::Result {
        match self {
            Relative::Same => Ok(()),
            Relative::Times(x) => write!(f, " * {x}"),
            Relative::Percent(p) => write!(f, " {} {}%", if p < 0.0 { '-' } else { '+' }, p.abs()),
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
    let bound = if let Some(adjust) = rest.strip_prefix("baseline") {
        Bound::Baseline(parse_relative(key, adjust.trim(), "baseline")?)
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
    Ok(Threshold { key, op, bound })
}

/// A value of the metric: a duration with a unit, or a plain number.
fn parse_amount(key: MetricKey, text: &str) -> Result<f64, String> {
    if key.metric.is_duration() {
        return parse_duration_secs(text).map_err(|e| format!("{key} is a duration: {e}"));
    }
    let value: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(format!("`{text}` is not a finite number"))
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

/// Parses `2s`, `250ms`, `1.5s`, `800us`, `1m` into seconds.
fn parse_duration_secs(text: &str) -> Result<f64, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("`{text}` has no unit: write e.g. `2s`, `250ms` or `800us`"))?;
    let (num, unit) = text.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{text}` does not start with a number"))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        other => {
            return Err(format!(
                "unknown unit `{other}` (expected ns, us, ms, s or m)"
            ));
        }
    };
    Ok(value * scale)
}

/// Formats a value of a metric for people: durations in a fitting unit.
pub fn format_value(metric: Metric, value: f64) -> String {
    if metric.is_duration() {
        format_secs(value)
    } else if matches!(metric, Metric::Errors | Metric::LateStarts) {
        format!("{value}")
    } else if matches!(metric, Metric::TokenDriftChunks | Metric::TokenDriftMetrics) {
        format!("{value:.2}%")
    } else {
        format!("{value:.1} {}", metric.unit())
    }
}

/// Formats seconds as `1.23s`, `45.6ms` or `789us`.
pub fn format_secs(secs: f64) -> String {
    if secs >= 1.0 {
        format!("{secs:.3}s")
    } else if secs >= 1e-3 {
        format!("{:.2}ms", secs * 1e3)
    } else {
        format!("{:.0}us", secs * 1e6)
    }
}

/// Formats a duration like [`format_secs`].
pub fn format_duration(d: Duration) -> String {
    format_secs(d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> MetricKey {
        s.parse().unwrap()
    }

    #[test]
    fn parses_keys() {
        assert_eq!(
            key("ttft.p99"),
            MetricKey {
                metric: Metric::Ttft,
                stat: Some(Stat::P99)
            }
        );
        assert_eq!(key("errors").stat, None);
        assert!(
            "ttft"
                .parse::<MetricKey>()
                .unwrap_err()
                .contains("ttft.p99")
        );
        assert!("errors.p99".parse::<MetricKey>().is_err());
        assert!("ttft.p42".parse::<MetricKey>().is_err());
        assert_eq!(key("itl.p99.9").stat, Some(Stat::P999));
        assert_eq!(key("ttft_content.p50").metric, Metric::TtftContent);
        assert!("latency".parse::<MetricKey>().is_err());
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
            parse_comparison(key("ttft.p99"), "<= 2h")
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

    #[test]
    fn comparisons_hold() {
        assert!(Op::Ge.holds(12.5, 12.5));
        assert!(!Op::Gt.holds(12.5, 12.5));
        assert!(Op::Eq.holds(0.0, 0.0));
        assert!(!Op::Eq.holds(1.0, 0.0));
        assert!(Op::Le.holds(1.9, 2.0));
    }

    #[test]
    fn formats_durations() {
        assert_eq!(format_secs(2.0), "2.000s");
        assert_eq!(format_secs(0.0456), "45.60ms");
        assert_eq!(format_secs(0.000_789), "789us");
    }
}
