//! The suite `init` writes: each probe live or commented out with why,
//! each gate's thresholds from what the calibration measured.

use std::fmt::Write as _;

use super::bounds::{Better, Runs};
use super::{
    CALIBRATION_RUNS, CONTRACT, Measured, Options, SCHEMA_FILE, THROUGHPUT, gates, names, say,
    target,
};
use crate::suite::metric::format_named as shown;

/// `text` with every line commented out.
pub(super) fn commented(text: &str) -> String {
    text.lines().fold(String::new(), |mut out, l| {
        let _ = writeln!(out, "  # {}", l.strip_prefix("  ").unwrap_or(l));
        out
    })
}

/// A bound at `share` of a throughput, rounded down: whole above 100,
/// else to three figures.
fn at_least(share: f64, measured: f64) -> String {
    let v = share * measured;
    let decimals = [(100.0, 0), (10.0, 1), (1.0, 2), (0.1, 3)]
        .into_iter()
        .find(|(at, _)| v >= *at)
        .map_or(4, |(_, d)| d);
    let scale = 10f64.powi(decimals);
    let floored = (v.max(0.0) * scale).floor() / scale;
    format!(
        "{floored:.prec$}",
        prec = usize::try_from(decimals).unwrap_or(0)
    )
}

/// A warning when the concurrent streams got less throughput in all than
/// one stream alone: the server does not batch them (a single slot, a
/// batch size of one), or the machine is saturated.
fn fewer_with_more(
    concurrency: u32,
    figures: &[crate::suite::figures::ByKey<Vec<f64>>],
) -> Option<String> {
    let key = THROUGHPUT.parse().ok()?;
    let median = |i: usize| Runs::of(figures.get(i)?.get(key)?, Better::Higher).map(|r| r.median);
    let (one, many) = (median(0)?, median(1)?);
    (concurrency > 1 && many < one).then(|| {
        format!(
            "{concurrency} concurrent streams got {} in all, less than one stream's {}: the server does not batch them (one slot, a batch size of 1?) or the machine is saturated; check its configuration before trusting the concurrency gate",
            shown(THROUGHPUT, many),
            shown(THROUGHPUT, one)
        )
    })
}

/// A latency in whole milliseconds, rounded up.
fn ceil_ms(seconds: f64) -> String {
    format!("{}ms", (seconds * 1000.0).ceil())
}

/// One threshold line with its comment (a YAML comment needs a space
/// before its `#`).
fn threshold(key: &str, bound: &str, comment: &str) -> String {
    let line = format!("      {key}: \"{bound}\"");
    format!("{line:<41} # {comment}\n")
}

pub(super) fn render(o: &Options, base_url: &str, name: &str, m: &Measured) -> String {
    let mut out = format!("# yaml-language-server: $schema={SCHEMA_FILE}\n");
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    let _ = write!(
        out,
        "# A first suite for {}, written by `servegate init`\n\
         # at {stamp} against:\n#   {}\n\
         # The thresholds come from what it measured then, {CALIBRATION_RUNS} runs of each\n\
         # gate: each figure's median, less (or, for a latency, the highest run\n\
         # plus) a margin of five times how the runs spread, at least 20% and\n\
         # at most 50% of the median (so half the speed always fails); a run at\n\
         # half the level or worse (a stall) is named, and left out of a\n\
         # throughput's bound (a latency's keeps it: tails are heavy). Each\n\
         # bound says what it came from. Tighten or loosen them as you learn\n\
         # the server; `servegate run {}` checks it.\n",
        m.server,
        m.description,
        o.out.display()
    );
    let _ = write!(
        out,
        "suite: {name}\n{}defaults: {{ temperature: 0, max_tokens: 256 }}   # `snapshot: true` keeps every answer for review\n\ncorrectness:\n",
        target(base_url, o.api, m.model.as_deref())
    );
    for (text, why) in &m.probes {
        match why {
            None => out.push_str(text),
            Some(why) => {
                let _ = writeln!(
                    out,
                    "  # Failed on this server when written ({why}):\n  # uncomment once it passes."
                );
                out.push_str(&commented(text));
            }
        }
    }
    if m.held.is_empty() {
        out.push_str("  # Every contract check broke on this server when written:\n");
        out.push_str(&commented(CONTRACT));
    } else {
        out.push_str(CONTRACT);
        let _ = writeln!(out, "    contract: [{}]", names(&m.held));
    }
    for (c, why) in &m.broke {
        let _ = writeln!(
            out,
            "    # left out: `{}` broke on this server when written: {why}",
            c.name()
        );
    }
    out.push_str("\nperformance:\n");
    if let Some(warning) = fewer_with_more(o.concurrency, &m.figures) {
        say(&format!("warning: {warning}"));
        let _ = writeln!(out, "  # warning: {warning}");
    }
    for (g, f) in gates(o.concurrency).iter().zip(&m.figures) {
        let _ = write!(
            out,
            "  - name: {}                  # {}\n    load: {}\n    thresholds:\n",
            g.name, g.what, g.load
        );
        let runs = |key: &str, better| {
            key.parse()
                .ok()
                .and_then(|k| f.get(k))
                .and_then(|v: &Vec<f64>| Runs::of(v, better))
        };
        for (key, floor) in g.keys {
            let better = if floor.is_some() {
                Better::Lower
            } else {
                Better::Higher
            };
            let Some(r) = runs(key, better) else {
                // Every gate measured every key, or the calibration failed.
                out.push_str(&threshold(
                    key,
                    "<= 0",
                    "not measured when written: set a bound",
                ));
                continue;
            };
            let spread = format!(
                "{} runs, {}–{}, spread ±{:.1}%",
                r.n,
                shown(key, r.lo),
                shown(key, r.hi),
                100.0 * r.spread
            );
            let stalled = match r.stalled.len() {
                0 => String::new(),
                n => format!(
                    "; {n} stalled run(s){}: {}",
                    if floor.is_some() { "" } else { " left out" },
                    r.stalled
                        .iter()
                        .map(|v| shown(key, *v))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            let line = match floor {
                None => threshold(
                    key,
                    &format!(">= {}", at_least(1.0, r.rate_bound())),
                    &format!(
                        "measured median {} ({spread}{stalled}): the median less {:.0}%",
                        shown(key, r.median),
                        100.0 * r.margin()
                    ),
                ),
                Some(ms) => threshold(
                    key,
                    &format!("<= {}", ceil_ms(r.latency_bound(ms / 1000.0))),
                    &format!(
                        "measured median {} ({spread}{stalled}): the highest plus the larger of {:.0}% of the median and {ms}ms, at least twice the highest",
                        shown(key, r.median),
                        100.0 * r.margin()
                    ),
                ),
            };
            out.push_str(&line);
            if r.too_noisy() {
                let warning = format!(
                    "{}::{key} spread ±{:.0}% between runs: its bound keeps a margin of {:.0}% of the median, so a server twice as slow could pass it; run `servegate init` again on a quieter machine",
                    g.name,
                    100.0 * r.spread,
                    100.0 * r.margin()
                );
                say(&format!("warning: {warning}"));
                let _ = writeln!(out, "      # warning: {warning}");
            }
        }
        out.push_str(&threshold("errors", "== 0", "no request may fail"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_rounded_the_safe_way() {
        assert_eq!(at_least(0.8, 500.1), "400");
        assert_eq!(at_least(0.8, 12.34), "9.87");
        // 0.8 * 39.25 is 31.400000000000002 in binary floating point.
        assert_eq!(at_least(0.8, 39.25), "31.4");
        assert_eq!(at_least(0.8, 0.0), "0.0000");
        // Padded, or one space when the line is long: never `"#`, which
        // YAML reads as no comment at all.
        for bound in [">= 31.4", ">= 31.400000000000002"] {
            let line = threshold("decode_tok_s.mean", bound, "measured");
            assert!(line.ends_with(" # measured\n"), "{line}");
            assert!(!line.contains("\"#"), "{line}");
        }
        assert_eq!(ceil_ms(0.0213), "22ms");
        // Eight streams that together got less than one alone are named.
        let throughput =
            |runs: &[f64]| std::iter::once((THROUGHPUT.parse().unwrap(), runs.to_vec())).collect();
        let warned = fewer_with_more(
            8,
            &[
                throughput(&[80.0, 82.0, 81.0]),
                throughput(&[61.0, 60.0, 62.0]),
            ],
        );
        assert!(
            warned.as_deref().is_some_and(|w| w.starts_with(
                "8 concurrent streams got 61.0 tok/s in all, less than one stream's 81.0 tok/s"
            )),
            "{warned:?}"
        );
        assert_eq!(
            fewer_with_more(8, &[throughput(&[80.0]), throughput(&[300.0])]),
            None
        );
        assert_eq!(ceil_ms(0.5), "500ms");
    }
}
