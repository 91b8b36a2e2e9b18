//! Decoding performance gates: a gate's name, thresholds, SLOs, repeats and
//! verdict, its token accounting, the probes it rechecks, and a sweep's
//! levels and curve checks; its `load:` is decoded in `load.rs`.

use super::schema::gate::{GATE, SLO, TOKEN_ACCOUNTING};
use super::{Decoder, quoted_list};
use crate::suite::diagnostics::{Diagnostic, did_you_mean};
use crate::suite::metric::{Metric, MetricKey, all_keys};
use crate::suite::model::{
    Api, Curve, CurveCheck, Gate, Load, LocatedThreshold, Probe, Recheck, Sampling, VerdictMode,
};
use crate::suite::node::{Node, Yaml};
use crate::suite::threshold::{Bound, Op, Threshold, parse_comparison};
use crate::suite::{Slo, SweepLevel};

impl Decoder<'_> {
    /// A non-empty list of this suite's probe names under `key`, as
    /// indexes; `refuse` says why a named probe may not be listed.
    fn probe_list(
        &mut self,
        v: &Yaml,
        key: &str,
        probes: &[Probe],
        refuse: impl Fn(&Probe) -> Option<String>,
    ) -> Option<Vec<usize>> {
        let Node::Seq(items) = &v.node else {
            self.type_error(v, &format!("`{key}`"), "a list of probe names");
            return None;
        };
        if items.is_empty() {
            self.error(Diagnostic::new(v.loc, format!("`{key}` names no probe")));
            return None;
        }
        let count = items.len();
        let names = self.items(v, key, |d, item| {
            let name = d.text(item, "a probe name")?;
            let Some(i) = probes.iter().position(|p| p.name == name) else {
                let known: Vec<&str> = probes.iter().map(|p| p.name.as_str()).collect();
                let mut diag =
                    Diagnostic::new(item.loc, format!("no probe `{name}` in this suite"))
                        .expected(format!("one of {}", quoted_list(&known)));
                if let Some(close) = did_you_mean(&name, &known) {
                    diag = diag.help(format!("did you mean `{close}`?"));
                }
                d.error(diag);
                return None;
            };
            if let Some(why) = refuse(&probes[i]) {
                d.error(Diagnostic::new(item.loc, why));
                return None;
            }
            Some(i)
        });
        (names.len() == count).then_some(names)
    }

    /// `recheck: all` (every probe that asks one question) or a list of
    /// probe names.
    fn recheck(&mut self, v: &Yaml, probes: &[Probe]) -> Option<Recheck> {
        // One question each: not a dataset's items, not a conversation's turns.
        let askable = |p: &Probe| p.dataset.is_none() && p.turns.is_empty();
        let indexes = match &v.node {
            Node::Str(s) if s == "all" => {
                let all: Vec<usize> = (0..probes.len()).filter(|&i| askable(&probes[i])).collect();
                if all.is_empty() {
                    self.error(
                        Diagnostic::new(v.loc, "`recheck: all`, but the suite has no probe to ask")
                            .expected("correctness probes with a prompt (dataset and conversation probes are not rechecked)"),
                    );
                    return None;
                }
                all
            }
            Node::Seq(_) => self.probe_list(v, "recheck", probes, |p| {
                (!askable(p)).then(|| {
                    let kind = if p.dataset.is_some() {
                        "a dataset"
                    } else {
                        "a conversation"
                    };
                    format!("probe `{}` is {kind} probe: it is not rechecked", p.name)
                })
            })?,
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
        api: Api,
    ) -> Option<(Vec<Gate>, Option<Curve>)> {
        let f = self.fields(y, "gate", &[GATE])?;
        let name = self
            .required(&f, "name", "gate")
            .and_then(|v| self.name(v, "gate name"));
        let loaded = self
            .required(&f, "load", "gate")
            .and_then(|v| self.load(v, api));
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
        let needs = match f.get("needs") {
            Some(v) => Some(Some(self.probe_list(v, "needs", probes, |_| None)?)),
            None => Some(None),
        };
        let (load, levels) = loaded?;
        let mut thresholds = thresholds;
        if let (Some(list), Some(Some(extra))) = (thresholds.as_mut(), accounting) {
            list.extend(extra);
        }
        let (name, thresholds, slo, repeats, verdict, recheck, needs) = (
            name?,
            thresholds?,
            slo?,
            repeats?,
            verdict?,
            recheck?,
            needs?,
        );
        let extra_body = f.get("extra_body").map(|v| self.extra_body(v));
        let adapter = f.get("adapter").and_then(|v| self.adapter(v));
        let sampling = Sampling {
            max_tokens: Some(load.output_tokens),
            extra_body: crate::suite::model::merged(
                defaults.extra_body.as_ref(),
                extra_body.flatten().as_ref(),
            ),
            adapter: adapter.or_else(|| defaults.adapter.clone()),
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
                needs: needs.clone(),
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
                // Within this item's gates; the suite's decoder places
                // them among all of the suite's.
                levels: 0..gates.len(),
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
        let f = self.fields(y, "token_accounting", &[TOKEN_ACCOUNTING])?;
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
        let f = self.fields(y, "slo", &[SLO])?;
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

    pub(super) fn thresholds(&mut self, y: &Yaml) -> Option<Vec<LocatedThreshold>> {
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
