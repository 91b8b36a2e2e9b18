//! Decoding performance gates: load shapes, SLOs and thresholds.

use std::sync::Arc;

use super::{Decoder, Fields, quoted_list};
use crate::suite::dataset;
use crate::suite::diagnostics::{Diagnostic, did_you_mean};
use crate::suite::metric::{Metric, MetricKey, all_keys};
use crate::suite::model::{
    Arrival, ClientThreads, Curve, CurveCheck, Gate, Load, LoadPrompt, LocatedThreshold,
    OnClientLimited, Pace, Probe, Recheck, Sampling, VerdictMode,
};
use crate::suite::node::{Node, Yaml};
use crate::suite::threshold::{Bound, Op, Threshold, parse_comparison};
use crate::suite::{Slo, SweepLevel, Tokenizer};

pub(super) const GATE: &[&str] = &[
    "name",
    "load",
    "thresholds",
    "slo",
    "repeats",
    "verdict",
    "token_accounting",
    "curve",
    "recheck",
];
pub(super) const TOKEN_ACCOUNTING: &[&str] = &["tolerance"];
pub(super) const LOAD: &[&str] = &[
    "concurrency",
    "rate",
    "arrival",
    "seed",
    "requests",
    "duration",
    "warmup",
    "prompt",
    "input_tokens",
    "output_tokens",
    "ignore_eos",
    "flush_cache",
    "abort_after",
    "client_threads",
    "client_limited",
    "dataset",
    "shared_prefix",
    "tokenizer",
];
pub(super) const SHARED_PREFIX: &[&str] = &["tokens", "groups"];
/// Largest dataset read into memory.
const MAX_DATASET_BYTES: u64 = 64 * 1024 * 1024;
pub(super) const SLO: &[&str] = &["ttft", "tpot", "e2e"];
pub(super) const ARRIVALS: &[&str] = &["constant", "poisson"];
pub(super) const CLIENT_LIMITED: &[&str] = &["fail", "warn"];
/// Most client threads a suite may ask for.
pub(super) const MAX_CLIENT_THREADS: u32 = 256;

/// A sweep level: `concurrency: [1, 8]` or `rate: [5, 10]` gives one gate
/// per value, named `<gate>::concurrency_8`.
struct Level {
    suffix: Option<String>,
    pace: Pace,
}

impl Decoder<'_> {
    /// `recheck: all` (every probe that asks one question) or a list of
    /// probe names.
    fn recheck(&mut self, v: &Yaml, probes: &[Probe]) -> Option<Recheck> {
        let askable = |p: &Probe| p.dataset.is_none();
        let indexes = match &v.node {
            Node::Str(s) if s == "all" => {
                let all: Vec<usize> = (0..probes.len()).filter(|&i| askable(&probes[i])).collect();
                if all.is_empty() {
                    self.error(
                        Diagnostic::new(v.loc, "`recheck: all`, but the suite has no probe to ask")
                            .expected("correctness probes with a prompt (dataset probes are not rechecked)"),
                    );
                    return None;
                }
                all
            }
            Node::Seq(_) => {
                let names = self.items(v, "recheck", |d, item| {
                    let name = d.text(item, "a probe name")?;
                    match probes.iter().position(|p| p.name == name) {
                        Some(i) if askable(&probes[i]) => Some(i),
                        Some(_) => {
                            d.error(Diagnostic::new(
                                item.loc,
                                format!("probe `{name}` is a dataset probe: it is not rechecked"),
                            ));
                            None
                        }
                        None => {
                            let known: Vec<&str> = probes.iter().map(|p| p.name.as_str()).collect();
                            let mut diag = Diagnostic::new(
                                item.loc,
                                format!("no probe `{name}` in this suite"),
                            )
                            .expected(format!("one of {}", quoted_list(&known)));
                            if let Some(close) = did_you_mean(&name, &known) {
                                diag = diag.help(format!("did you mean `{close}`?"));
                            }
                            d.error(diag);
                            None
                        }
                    }
                });
                match &v.node {
                    Node::Seq(items) if items.is_empty() => {
                        self.error(Diagnostic::new(v.loc, "`recheck` names no probe"));
                        return None;
                    }
                    Node::Seq(items) if names.len() < items.len() => return None,
                    _ => names,
                }
            }
            _ => {
                self.type_error(v, "`recheck`", "`all` or a list of probe names");
                return None;
            }
        };
        Some(Recheck {
            probes: indexes,
            loc: v.loc,
        })
    }
}

impl Decoder<'_> {
    /// One gate, or one per level of a sweep, with the sweep's curve checks.
    pub(super) fn gate(
        &mut self,
        y: &Yaml,
        defaults: &Sampling,
        probes: &[Probe],
    ) -> Option<(Vec<Gate>, Option<Curve>)> {
        let f = self.fields(y, "gate", GATE)?;
        let name = self
            .required(&f, "name", "gate")
            .and_then(|v| self.name(v, "gate name"));
        let loaded = self.required(&f, "load", "gate").and_then(|v| self.load(v));
        let thresholds = self
            .required(&f, "thresholds", "gate")
            .and_then(|v| self.thresholds(v));
        let slo = f.get("slo").map_or(Some(Slo::default()), |v| self.slo(v));
        let repeats = f
            .get("repeats")
            .map_or(Some(1), |v| self.count(v, "repeats", 1));
        let verdict = match f.get("verdict") {
            None => Some(VerdictMode::Mean),
            Some(v) => self.pick(v, "verdict"),
        };
        let accounting = f.get("token_accounting").map(|v| self.token_accounting(v));
        let curve = f.get("curve").map(|v| (v.loc, self.curve(v)));
        let recheck = match f.get("recheck") {
            Some(v) => Some(Some(self.recheck(v, probes)?)),
            None => Some(None),
        };
        let (load, levels) = loaded?;
        let mut thresholds = thresholds;
        if let (Some(list), Some(Some(extra))) = (thresholds.as_mut(), accounting) {
            list.extend(extra);
        }
        let (name, thresholds, slo, repeats, verdict, recheck) =
            (name?, thresholds?, slo?, repeats?, verdict?, recheck?);
        let sampling = Sampling {
            max_tokens: Some(load.output_tokens),
            ..defaults.clone()
        };
        let gates: Vec<Gate> = levels
            .into_iter()
            .map(|level| Gate {
                name: level
                    .suffix
                    .as_ref()
                    .map_or_else(|| name.clone(), |s| format!("{name}::{s}")),
                sweep: level.suffix.map(|level| SweepLevel {
                    sweep: name.clone(),
                    level,
                }),
                loc: y.loc,
                load: Load {
                    pace: level.pace,
                    ..load.clone()
                },
                sampling: sampling.clone(),
                thresholds: thresholds.clone(),
                slo,
                repeats,
                verdict,
                recheck: recheck.clone(),
            })
            .collect();
        let curve = match curve {
            None => None,
            Some((loc, _)) if gates.len() < 2 => {
                self.error(Diagnostic::new(loc, "`curve` needs a sweep").expected(
                    "a list of levels, e.g. `concurrency: [1, 8, 32]` or `rate: [5, 10]`",
                ));
                return None;
            }
            Some((loc, checks)) => Some(Curve {
                gate: name.clone(),
                levels: gates.iter().map(|g| g.name.clone()).collect(),
                checks: checks?,
                loc,
            }),
        };
        Some((gates, curve))
    }

    /// `curve: {output_tok_s: non_decreasing, ttft.p99: "non_increasing within 10%"}`
    fn curve(&mut self, y: &Yaml) -> Option<Vec<CurveCheck>> {
        let Node::Map(entries) = &y.node else {
            self.type_error(
                y,
                "curve",
                "a mapping of metric to `non_decreasing` or `non_increasing`",
            );
            return None;
        };
        let mut checks = Vec::new();
        for (k, v) in entries {
            let key: MetricKey = match k.name.parse() {
                Ok(key) => key,
                Err(e) => {
                    self.error(Diagnostic::new(k.loc, e.to_string()));
                    continue;
                }
            };
            let Some(text) = self.text(v, "curve direction") else {
                continue;
            };
            let (direction, tolerance) = match text.split_once(" within ") {
                Some((d, t)) => (d.trim(), Some(t.trim())),
                None => (text.trim(), None),
            };
            let rising = match direction {
                "non_decreasing" => true,
                "non_increasing" => false,
                other => {
                    let mut d = Diagnostic::new(
                        v.loc,
                        format!("invalid curve direction `{other}`"),
                    )
                    .expected(
                        "`non_decreasing` or `non_increasing`, optionally followed by `within 5%`",
                    );
                    if let Some(close) = did_you_mean(other, &["non_decreasing", "non_increasing"])
                    {
                        d = d.help(format!("did you mean `{close}`?"));
                    }
                    self.error(d);
                    continue;
                }
            };
            let tolerance = match tolerance.map(|t| t.trim_end_matches('%').trim().parse::<f64>()) {
                None => 0.0,
                Some(Ok(t)) if t >= 0.0 && t.is_finite() => t,
                Some(_) => {
                    self.error(
                        Diagnostic::new(v.loc, format!("invalid tolerance in `{text}`"))
                            .expected("a percentage such as `within 5%`"),
                    );
                    continue;
                }
            };
            checks.push(CurveCheck {
                key,
                rising,
                tolerance,
                loc: k.loc,
            });
        }
        Some(checks)
    }

    /// `token_accounting: {tolerance: 1%}`: the server's token counts (usage
    /// against chunks, `/metrics` against what arrived) may differ by at most
    /// the tolerance; two thresholds at this key's location.
    fn token_accounting(&mut self, y: &Yaml) -> Option<Vec<LocatedThreshold>> {
        let f = self.fields(y, "token_accounting", TOKEN_ACCOUNTING)?;
        let tolerance = match f.get("tolerance") {
            None => 1.0,
            Some(v) => {
                let text = self.text(v, "tolerance")?;
                match text.trim().trim_end_matches('%').trim().parse::<f64>() {
                    Ok(p) if p >= 0.0 && p.is_finite() => p,
                    _ => {
                        self.error(
                            Diagnostic::new(v.loc, format!("invalid tolerance `{text}`"))
                                .expected("a percentage such as `1%` or `0.5%`"),
                        );
                        return None;
                    }
                }
            }
        };
        Some(
            [Metric::TokenDriftChunks, Metric::TokenDriftMetrics]
                .into_iter()
                .map(|metric| LocatedThreshold {
                    threshold: Threshold {
                        key: MetricKey { metric, stat: None },
                        op: Op::Le,
                        bound: Bound::Value(tolerance),
                    },
                    loc: y.loc,
                })
                .collect(),
        )
    }

    fn slo(&mut self, y: &Yaml) -> Option<Slo> {
        let f = self.fields(y, "slo", SLO)?;
        let mut slo = Slo::default();
        for (key, slot) in [
            ("ttft", &mut slo.ttft),
            ("tpot", &mut slo.tpot),
            ("e2e", &mut slo.e2e),
        ] {
            if let Some(v) = f.get(key) {
                *slot = Some(self.duration(v, &format!("slo.{key}"))?);
            }
        }
        if !slo.is_set() {
            self.error(
                Diagnostic::new(y.loc, "`slo` sets no objective")
                    .expected("`ttft`, `tpot` or `e2e`"),
            );
            return None;
        }
        Some(slo)
    }

    /// Integers, or a list of them (a sweep).
    fn levels_of<T>(
        &mut self,
        y: &Yaml,
        what: &str,
        one: impl Fn(&mut Self, &Yaml) -> Option<T>,
    ) -> Option<Vec<T>> {
        match &y.node {
            Node::Seq(items) if items.is_empty() => {
                self.error(Diagnostic::new(y.loc, format!("`{what}` sweep is empty")));
                None
            }
            Node::Seq(items) => items.iter().map(|i| one(self, i)).collect(),
            _ => one(self, y).map(|v| vec![v]),
        }
    }

    fn pace(&mut self, f: &Fields<'_>) -> Option<Vec<Level>> {
        let concurrency = f.get("concurrency");
        let Some(rate) = f.get("rate") else {
            for key in ["arrival", "seed"] {
                if let Some(k) = f.key(key) {
                    self.error(
                        Diagnostic::new(k.loc, format!("`{key}` applies to an open loop only"))
                            .expected("a `rate:` in this load"),
                    );
                }
            }
            let levels = match concurrency {
                None => vec![1],
                Some(v) => {
                    self.levels_of(v, "concurrency", |d, i| d.count::<u32>(i, "concurrency", 1))?
                }
            };
            let sweep = levels.len() > 1;
            return Some(
                levels
                    .into_iter()
                    .map(|c| Level {
                        suffix: sweep.then(|| format!("concurrency_{c}")),
                        pace: Pace::Closed { concurrency: c },
                    })
                    .collect(),
            );
        };
        let max_in_flight = match concurrency {
            None => None,
            Some(v) if matches!(v.node, Node::Seq(_)) => {
                self.error(Diagnostic::new(
                    v.loc,
                    "with `rate`, `concurrency` is one cap on requests in flight, not a sweep",
                ));
                return None;
            }
            Some(v) => Some(self.count::<u32>(v, "concurrency", 1)?),
        };
        let arrival = match f.get("arrival") {
            None => Arrival::Constant,
            Some(v) => match self.one_of(v, "arrival", ARRIVALS)?.as_str() {
                "poisson" => Arrival::Poisson,
                _ => Arrival::Constant,
            },
        };
        let seed = f
            .get("seed")
            .map_or(Some(0), |v| self.count(v, "seed", 0))?;
        let rates = self.levels_of(rate, "rate", |d, i| {
            let r = d.float(i, "rate")?;
            if r > 0.0 {
                Some(r)
            } else {
                d.error(
                    Diagnostic::new(i.loc, format!("rate must be above 0, found {r}"))
                        .expected("requests per second, e.g. `rate: 20`"),
                );
                None
            }
        })?;
        let sweep = rates.len() > 1;
        Some(
            rates
                .into_iter()
                .map(|rate| Level {
                    suffix: sweep.then(|| format!("rate_{}", rate.to_string().replace('.', "_"))),
                    pace: Pace::Open {
                        rate,
                        arrival,
                        seed,
                        max_in_flight,
                    },
                })
                .collect(),
        )
    }

    /// Exactly one of `prompt`, `input_tokens` or `dataset`; `shared_prefix`
    /// goes with `input_tokens` (the length of each request's own suffix).
    fn workload(&mut self, f: &Fields<'_>, y: &Yaml) -> Option<LoadPrompt> {
        let given: Vec<&str> = ["prompt", "input_tokens", "dataset"]
            .into_iter()
            .filter(|k| f.get(k).is_some())
            .collect();
        match given.as_slice() {
            [] => {
                self.error(
                    Diagnostic::new(y.loc, "missing field `prompt`, `input_tokens` or `dataset` in load")
                        .expected("`input_tokens: 128` (a synthetic prompt), `prompt: \"…\"` or `dataset: fixtures/datasets/….jsonl`"),
                );
                return None;
            }
            [_, second, ..] => {
                let k = f.key(second).map_or(y.loc, |k| k.loc);
                self.error(Diagnostic::new(
                    k,
                    format!("give one of `prompt`, `input_tokens` or `dataset`, not `{}` and `{second}`", given[0]),
                ));
                return None;
            }
            [_] => {}
        }
        if let Some(p) = f.get("prompt") {
            if let Some(k) = f.key("shared_prefix") {
                self.error(Diagnostic::new(
                    k.loc,
                    "`shared_prefix` goes with `input_tokens`, not a fixed prompt",
                ));
            }
            return self.text(p, "prompt").map(LoadPrompt::Text);
        }
        if let Some(d) = f.get("dataset") {
            return self.dataset(d);
        }
        let tokens = f
            .get("input_tokens")
            .and_then(|n| self.count(n, "input_tokens", 1))?;
        let Some(sp) = f.get("shared_prefix") else {
            return Some(LoadPrompt::Tokens(tokens));
        };
        let sf = self.fields(sp, "shared_prefix", SHARED_PREFIX)?;
        let prefix_tokens = self
            .required(&sf, "tokens", "shared_prefix")
            .and_then(|v| self.count(v, "shared_prefix.tokens", 1));
        let groups = sf
            .get("groups")
            .map_or(Some(1), |v| self.count(v, "shared_prefix.groups", 1));
        Some(LoadPrompt::SharedPrefix {
            prefix_tokens: prefix_tokens?,
            groups: groups?,
            suffix_tokens: tokens,
        })
    }

    fn tokenizer(&mut self, y: &Yaml) -> Option<Tokenizer> {
        let path = self.file(y, "tokenizer")?;
        match Tokenizer::load(&path) {
            Ok(t) => Some(t),
            Err(e) => {
                self.error(Diagnostic::new(y.loc, e.message).expected(e.expected));
                None
            }
        }
    }

    fn dataset(&mut self, y: &Yaml) -> Option<LoadPrompt> {
        let path = self.file(y, "dataset")?;
        let text = match std::fs::metadata(&path) {
            Ok(m) if m.len() > MAX_DATASET_BYTES => Err(format!(
                "it is {} bytes; the limit is {MAX_DATASET_BYTES}",
                m.len()
            )),
            _ => std::fs::read_to_string(&path).map_err(|e| e.to_string()),
        };
        match text.and_then(|t| dataset::prompts(&t)) {
            Ok(prompts) => Some(LoadPrompt::Dataset {
                path,
                prompts: Arc::new(prompts),
            }),
            Err(e) => {
                self.error(
                    Diagnostic::new(y.loc, format!("invalid dataset {}: {e}", path.display())).expected(
                        "JSONL lines of `{\"prompt\": \"…\"}` or ShareGPT `{\"conversations\": [{\"from\": \"human\", \"value\": \"…\"}]}`",
                    ),
                );
                None
            }
        }
    }

    fn load(&mut self, y: &Yaml) -> Option<(Load, Vec<Level>)> {
        let f = self.fields(y, "load", LOAD)?;
        let levels = self.pace(&f);
        let requests = f.get("requests").map(|v| self.count(v, "requests", 1));
        let duration = f.get("duration").map(|v| self.duration(v, "duration"));
        if requests.is_none() && duration.is_none() {
            self.error(
                Diagnostic::new(y.loc, "missing field `requests` or `duration` in load")
                    .expected("`requests: 100`, `duration: 60s`, or both (whichever ends first)"),
            );
        }
        let warmup = f
            .get("warmup")
            .map_or(Some(0), |v| self.count(v, "warmup", 0));
        let output_tokens = self
            .required(&f, "output_tokens", "load")
            .and_then(|v| self.count(v, "output_tokens", 1));
        let ignore_eos = f
            .get("ignore_eos")
            .map_or(Some(false), |v| self.boolean(v, "ignore_eos"));
        let flush_cache = f
            .get("flush_cache")
            .map_or(Some(false), |v| self.boolean(v, "flush_cache"));
        let abort_after = f
            .get("abort_after")
            .map_or(Some(3), |v| self.count(v, "abort_after", 0));
        let client_threads = f
            .get("client_threads")
            .map_or(Some(ClientThreads::Auto), |v| self.client_threads(v));
        let client_limited = match f.get("client_limited") {
            None => Some(None),
            Some(v) => self
                .one_of(v, "client_limited", CLIENT_LIMITED)
                .map(|w| OnClientLimited::parse(&w)),
        };
        let prompt = self.workload(&f, y);
        let tokenizer = f
            .get("tokenizer")
            .map_or(Some(None), |v| self.tokenizer(v).map(Some));
        // Outer `None`: not given; inner `None`: given but invalid (reported).
        let (requests, duration) = match (requests, duration) {
            (None, None) | (Some(None), _) | (_, Some(None)) => return None,
            (r, d) => (r.flatten(), d.flatten()),
        };
        let load = Load {
            pace: Pace::Closed { concurrency: 1 },
            requests,
            duration,
            warmup: warmup?,
            prompt: prompt?,
            output_tokens: output_tokens?,
            ignore_eos: ignore_eos?,
            flush_cache: flush_cache?,
            tokenizer: tokenizer?,
            abort_after: abort_after?,
            client_threads: client_threads?,
            client_limited: client_limited?,
        };
        Some((load, levels?))
    }

    /// `client_threads: auto` or a count.
    fn client_threads(&mut self, y: &Yaml) -> Option<ClientThreads> {
        match &y.node {
            Node::Str(s) if s == "auto" => Some(ClientThreads::Auto),
            Node::Int(n) => match u32::try_from(*n) {
                Ok(n) if (1..=MAX_CLIENT_THREADS).contains(&n) => Some(ClientThreads::Fixed(n)),
                _ => {
                    self.error(
                        Diagnostic::new(y.loc, format!("client_threads is out of range: {n}"))
                            .expected(format!("`auto` or 1 to {MAX_CLIENT_THREADS}")),
                    );
                    None
                }
            },
            _ => {
                self.type_error(y, "client_threads", "`auto` or a number of threads");
                None
            }
        }
    }

    fn thresholds(&mut self, y: &Yaml) -> Option<Vec<LocatedThreshold>> {
        let Node::Map(entries) = &y.node else {
            self.type_error(y, "thresholds", "a mapping of metric to comparison");
            return None;
        };
        let keys = all_keys();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let mut out = Vec::new();
        for (k, v) in entries {
            let key: MetricKey = match k.name.parse() {
                Ok(key) => key,
                Err(e) => {
                    let unknown = e.is_unknown();
                    let mut d = Diagnostic::new(k.loc, e.to_string())
                        .expected("a metric such as `ttft.p99`, `decode_tok_s.mean`, `output_tok_s` or `errors`");
                    if unknown && let Some(close) = did_you_mean(&k.name, &key_refs) {
                        d = d.help(format!("did you mean `{close}`?"));
                    }
                    self.error(d);
                    continue;
                }
            };
            let Node::Str(text) = &v.node else {
                self.error(
                    Diagnostic::new(
                        v.loc,
                        format!("threshold of `{key}` must be a quoted comparison"),
                    )
                    .expected("e.g. \">= 12.5\", \"<= 2s\" or \"== 0\""),
                );
                continue;
            };
            match parse_comparison(key, text) {
                Ok(threshold) => out.push(LocatedThreshold {
                    threshold,
                    loc: k.loc,
                }),
                Err(e) => self.error(
                    Diagnostic::new(v.loc, format!("invalid threshold: {e}"))
                        .expected("a comparison such as \">= 12.5\", \"<= 2s\" or \"== 0\""),
                ),
            }
        }
        if out.is_empty() && entries.is_empty() {
            self.error(Diagnostic::new(
                y.loc,
                "`thresholds` is empty: a gate without thresholds always passes",
            ));
        }
        Some(out)
    }
}
