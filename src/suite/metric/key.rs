//! A figure's key: a metric and, for a distribution, its statistic
//! (`ttft.p99`), parsed with what is wrong said.

use std::fmt;

use super::{Metric, SERVER};
use crate::suite::names::{Named as _, names};

/// The key figures of a gate, in the order summaries show them (the
/// Markdown and HTML reports, the terminal's sweep tables).
pub const KEY_FIGURES: [MetricKey; 8] = [
    MetricKey::stat(Metric::DecodeTokS, Stat::Mean),
    MetricKey::single(Metric::OutputTokS),
    MetricKey::single(Metric::RequestsPerS),
    MetricKey::stat(Metric::Ttft, Stat::P50),
    MetricKey::stat(Metric::Ttft, Stat::P99),
    MetricKey::stat(Metric::Itl, Stat::P99),
    MetricKey::stat(Metric::Tpot, Stat::Mean),
    MetricKey::single(Metric::Errors),
];

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

names!(Stat {
    Mean => "mean",
    Stddev => "stddev",
    Min => "min",
    P50 => "p50",
    P90 => "p90",
    P95 => "p95",
    P99 => "p99",
    P999 => "p99.9",
    Max => "max",
});

impl Stat {
    /// The quantile of a percentile statistic.
    pub(crate) fn quantile(self) -> Option<f64> {
        match self {
            Stat::P50 => Some(0.5),
            Stat::P90 => Some(0.9),
            Stat::P95 => Some(0.95),
            Stat::P99 => Some(0.99),
            Stat::P999 => Some(0.999),
            Stat::Mean | Stat::Stddev | Stat::Min | Stat::Max => None,
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
    MetricKey::every().map(|k| k.to_string()).collect()
}

/// Why a text is not a metric key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// No metric of that name.
    #[error("unknown metric `{0}`")]
    UnknownMetric(String),
    /// A distribution named without a statistic.
    #[error("`{0}` is a distribution: name a statistic, e.g. `{0}.p99` or `{0}.mean`")]
    NeedsStat(String),
    /// A single figure named with a statistic.
    #[error("`{0}` is a single figure and takes no statistic")]
    TakesNoStat(String),
    /// A statistic a histogram cannot give.
    #[error(
        "`{metric}` is read from the server's histogram buckets, which keep no `{stat}`: name `.mean` or a percentile (`.p99`)"
    )]
    NotInBuckets {
        /// The metric.
        metric: String,
        /// The statistic as written.
        stat: String,
    },
    /// A statistic that does not exist.
    #[error("unknown statistic `{stat}` of `{metric}`")]
    UnknownStat {
        /// The metric.
        metric: String,
        /// The statistic as written.
        stat: String,
    },
}

impl KeyError {
    /// Whether the name itself is unknown (a "did you mean" may help).
    pub(crate) fn is_unknown(&self) -> bool {
        matches!(
            self,
            KeyError::UnknownMetric(_) | KeyError::UnknownStat { .. }
        )
    }
}

impl std::str::FromStr for MetricKey {
    type Err = KeyError;

    fn from_str(text: &str) -> Result<Self, KeyError> {
        // `server.` names a namespace, not a statistic.
        let space = if text.starts_with(SERVER) {
            SERVER.len()
        } else {
            0
        };
        let (name, stat) = match text[space..].split_once('.') {
            Some((n, s)) => (&text[..space + n.len()], Some(s)),
            None => (text, None),
        };
        let metric = Metric::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| KeyError::UnknownMetric(text.to_owned()))?;
        let stat = match (metric.is_distribution(), stat) {
            (true, None) => return Err(KeyError::NeedsStat(name.to_owned())),
            (false, Some(_)) => return Err(KeyError::TakesNoStat(name.to_owned())),
            (false, None) => None,
            (true, Some(s)) => Some(Stat::named(s).ok_or_else(|| KeyError::UnknownStat {
                metric: name.to_owned(),
                stat: s.to_owned(),
            })?),
        };
        if let Some(s) = stat.filter(|s| !metric.takes(*s)) {
            return Err(KeyError::NotInBuckets {
                metric: name.to_owned(),
                stat: s.name().to_owned(),
            });
        }
        Ok(MetricKey { metric, stat })
    }
}
