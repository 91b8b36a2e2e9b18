//! Figures keyed by metric: the one shape every figure of a gate takes —
//! in the gate's result, a baseline, a variant's reference, the run record
//! and the reports. Keys are [`MetricKey`]s, never strings; on disk they
//! are the strings suites use (`ttft.p99`), in the same order as before, so
//! every record and baseline written earlier reads unchanged.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::metric::{Metric, MetricKey, Stat};

/// Values keyed by metric (a figure, its samples in words, each repeat's
/// values), in the order of the keys' names.
#[derive(Debug, Clone, PartialEq)]
pub struct ByKey<T>(BTreeMap<MetricKey, T>);

/// Every figure of a gate: the mean over its repeats, by key.
pub type Figures = ByKey<f64>;

impl<T> Default for ByKey<T> {
    fn default() -> Self {
        Self(BTreeMap::new())
    }
}

impl<T> ByKey<T> {
    /// The value of `key`, if there is one.
    pub fn get(&self, key: MetricKey) -> Option<&T> {
        self.0.get(&key)
    }

    /// Sets the value of `key`.
    pub fn insert(&mut self, key: MetricKey, value: T) {
        self.0.insert(key, value);
    }

    /// Every key with its value, in the order of the keys' names.
    pub fn iter(&self) -> impl Iterator<Item = (MetricKey, &T)> {
        self.0.iter().map(|(k, v)| (*k, v))
    }

    /// Every key, in the order of their names.
    pub fn keys(&self) -> impl Iterator<Item = MetricKey> + '_ {
        self.0.keys().copied()
    }

    /// Whether there is no value at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<T> FromIterator<(MetricKey, T)> for ByKey<T> {
    fn from_iter<I: IntoIterator<Item = (MetricKey, T)>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl MetricKey {
    /// Every key a figure can have: each statistic of a distribution, each
    /// single figure once, in the order of [`Metric::ALL`].
    pub fn every() -> impl Iterator<Item = MetricKey> {
        Metric::ALL.into_iter().flat_map(|metric| {
            let stats: Vec<Option<Stat>> = if metric.is_distribution() {
                Stat::ALL
                    .iter()
                    .filter(|(_, s)| metric.takes(*s))
                    .map(|(_, s)| Some(*s))
                    .collect()
            } else {
                vec![None]
            };
            stats
                .into_iter()
                .map(move |stat| MetricKey { metric, stat })
        })
    }

    /// Whether the figure is known only as at most a value: a percentile
    /// (or the largest) of the server's histogram, the bound of the bucket
    /// that holds it.
    pub(crate) fn is_bucket_bound(self) -> bool {
        self.metric.is_bucketed() && self.stat.is_some_and(|s| s != Stat::Mean)
    }

    /// The key of a single figure (`output_tok_s`).
    pub const fn single(metric: Metric) -> Self {
        MetricKey { metric, stat: None }
    }

    /// The key of a statistic of a distribution (`itl.p99`).
    pub const fn stat(metric: Metric, stat: Stat) -> Self {
        MetricKey {
            metric,
            stat: Some(stat),
        }
    }
}

/// Keys sort as their names do (`itl.p99` < `itl.p99.9` < `itl_chunk…`),
/// so a record lists them in the order it always has: names are letters
/// and `_`, which sort after the `.` that ends a metric's name (the
/// `server.` figures' namespace sorts them before `server_decode_tok_s`).
impl Ord for MetricKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let name = |k: &Self| (k.metric.name(), k.stat.map(Stat::name));
        name(self).cmp(&name(other))
    }
}

impl PartialOrd for MetricKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for MetricKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MetricKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl<T: Serialize> Serialize for ByKey<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(&k.to_string(), v)?;
        }
        map.end()
    }
}

/// A key this servegate does not know (a record or baseline written by a
/// later one, with a metric it added) is passed over: the figures it does
/// know still read.
impl<'de, T: Deserialize<'de>> Deserialize<'de> for ByKey<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Keys<T> {
            type Value = ByKey<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from metric keys (`ttft.p99`) to values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = BTreeMap::new();
                while let Some((key, value)) = map.next_entry::<String, T>()? {
                    if let Ok(key) = key.parse::<MetricKey>() {
                        out.insert(key, value);
                    }
                }
                Ok(ByKey(out))
            }
        }
        d.deserialize_map(Keys(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys sort exactly as their names do, so a record rewritten through
    /// [`ByKey`] lists its figures in the order it was written in.
    #[test]
    fn keys_sort_as_their_names() {
        let mut typed: Vec<MetricKey> = MetricKey::every().collect();
        typed.sort();
        let mut names: Vec<String> = MetricKey::every().map(|k| k.to_string()).collect();
        names.sort();
        let typed: Vec<String> = typed.iter().map(ToString::to_string).collect();
        assert_eq!(typed, names);
    }

    /// Figures read back as written; a key this version does not know is
    /// passed over, and the rest still read.
    #[test]
    fn figures_round_trip_as_strings_and_pass_over_unknown_keys() {
        let text = r#"{"errors":0.0,"itl.p99":0.02,"not_a_metric_yet.p99":1.0,"ttft.p50":0.1}"#;
        let figures: Figures = serde_json::from_str(text).unwrap();
        assert_eq!(figures.get("itl.p99".parse().unwrap()), Some(&0.02));
        assert_eq!(figures.keys().count(), 3);
        assert_eq!(
            serde_json::to_string(&figures).unwrap(),
            r#"{"errors":0.0,"itl.p99":0.02,"ttft.p50":0.1}"#
        );
    }
}
