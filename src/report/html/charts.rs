//! The report's SVG plots: a chart of series with labelled axes, latency by
//! percentile on a log tail axis, throughput against concurrency for a
//! sweep, and variant bars with their 95% intervals.

use std::fmt::Write as _;

use super::esc;
use crate::record::{GateRecord, RunRecord};
use crate::suite::metric::{Metric, MetricKey, Stat};

/// A value in a fitting unit: durations (seconds) as ms or s.
pub(super) fn secs(v: f64) -> String {
    crate::units::format_secs(v)
}

/// One plotted series.
pub(super) struct Series<'a> {
    pub(super) name: &'a str,
    pub(super) color: &'a str,
    pub(super) points: Vec<(f64, f64)>,
    /// Joined by a line (else dots).
    pub(super) line: bool,
}

const W: f64 = 560.0;
const H: f64 = 240.0;
const PAD: f64 = 48.0;
/// Room for the value labels left of the plot.
const LEFT: f64 = 72.0;

/// How a chart's x axis is labelled.
pub(super) enum XAxis<'a> {
    /// Five evenly spaced values.
    Linear,
    /// These positions, labelled so (and spanning at least them).
    Ticks(&'a [(f64, &'a str)]),
}

/// An SVG chart of `series` with labelled axes.
pub(super) fn chart(
    title: &str,
    (x_label, x_axis): (&str, XAxis<'_>),
    y_label: &str,
    y_fmt: &dyn Fn(f64) -> String,
    series: &[Series<'_>],
) -> String {
    let all = series.iter().flat_map(|s| s.points.iter().copied());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0_f64);
    for (x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        return String::new();
    }
    if let XAxis::Ticks(ticks) = x_axis {
        for (x, _) in ticks {
            x0 = x0.min(*x);
            x1 = x1.max(*x);
        }
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * (W - LEFT - PAD);
    let py = |y: f64| H - PAD + -(y / y1) * (H - 2.0 * PAD);
    let mut svg = format!(
        r#"<svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(title)
    );
    frame(
        &mut svg,
        (LEFT, W - PAD, PAD, H - PAD),
        (0.0, y1),
        &py,
        y_fmt,
    );
    let linear: Vec<(f64, String)> = (0..=4)
        .map(|i| {
            let x = x0 + (x1 - x0) * f64::from(i) / 4.0;
            let label = format!("{x:.3}");
            (
                x,
                label.trim_end_matches('0').trim_end_matches('.').to_owned(),
            )
        })
        .collect();
    let x_ticks: Vec<(f64, &str)> = match x_axis {
        XAxis::Linear => linear.iter().map(|(x, l)| (*x, l.as_str())).collect(),
        XAxis::Ticks(ticks) => ticks.to_vec(),
    };
    for (x, label) in x_ticks {
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{}" text-anchor="middle" font-size="10">{}</text>"#,
            px(x),
            H - PAD + 14.0,
            esc(label)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle" font-size="11">{}</text><text x="12" y="{}" font-size="11" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>"#,
        W / 2.0,
        H - 8.0,
        esc(x_label),
        H / 2.0,
        H / 2.0,
        esc(y_label)
    );
    for (i, s) in series.iter().enumerate() {
        if s.line {
            let pts: Vec<String> = s
                .points
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            let _ = write!(
                svg,
                r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
                s.color,
                pts.join(" ")
            );
        }
        for &(x, y) in &s.points {
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{}"/>"#,
                px(x),
                py(y),
                s.color
            );
        }
        #[expect(clippy::cast_precision_loss, reason = "a handful of series")]
        let ly = PAD - 30.0 + 12.0 * i as f64;
        let _ = write!(
            svg,
            r#"<rect x="{}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}" font-size="11">{}</text>"#,
            W - PAD - 150.0,
            ly,
            s.color,
            W - PAD - 135.0,
            ly + 9.0,
            esc(s.name)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A plot's axes (`left`, `right`, `top`, `bottom` of its area) and five
/// grid lines from `y0` to `y1`, placed by `py` and labelled by `y_fmt`.
pub(super) fn frame(
    svg: &mut String,
    (left, right, top, bottom): (f64, f64, f64, f64),
    (y0, y1): (f64, f64),
    py: &dyn Fn(f64) -> f64,
    y_fmt: &dyn Fn(f64) -> String,
) {
    let _ = write!(
        svg,
        r##"<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#444"/><line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#444"/>"##
    );
    for i in 0..=4 {
        let v = y0 + (y1 - y0) * f64::from(i) / 4.0;
        let _ = write!(
            svg,
            r##"<line x1="{left}" y1="{y:.1}" x2="{right}" y2="{y:.1}" stroke="#ddd"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="10">{l}</text>"##,
            y = py(v),
            tx = left - 4.0,
            ty = py(v) + 3.0,
            l = esc(&y_fmt(v))
        );
    }
}

/// Where quantile `q` sits on the percentile axis: log10(1/(1−q)), so that
/// p90, p99 and p99.9 are a decade apart and the tail, where latency goes
/// wrong, gets as much room as the body (a linear axis squeezes p99 to max
/// into its last 2%); the maximum one decade past p99.9.
fn tail_position(q: f64) -> f64 {
    if q >= 1.0 { 4.0 } else { -(1.0 - q).log10() }
}

/// The statistics the percentile plot draws, with their quantiles.
const QUANTILES: [(Stat, f64); 6] = [
    (Stat::P50, 0.5),
    (Stat::P90, 0.9),
    (Stat::P95, 0.95),
    (Stat::P99, 0.99),
    (Stat::P999, 0.999),
    (Stat::Max, 1.0),
];

/// The percentile curve of a distribution from the record's quantiles, at
/// their [`tail_position`]s.
fn percentiles(g: &GateRecord, metric: Metric) -> Vec<(f64, f64)> {
    QUANTILES
        .iter()
        .filter_map(|(stat, q)| {
            g.figures
                .get(MetricKey {
                    metric,
                    stat: Some(*stat),
                })
                .map(|v| (tail_position(*q), *v))
        })
        .collect()
}

/// TTFT and ITL by percentile.
pub(super) fn percentile_chart(g: &GateRecord) -> String {
    let dist = [
        ("TTFT", Metric::Ttft, "#1f77b4"),
        ("ITL", Metric::Itl, "#d62728"),
    ]
    .iter()
    .map(|(name, metric, color)| Series {
        name,
        color,
        points: percentiles(g, *metric),
        line: true,
    })
    .filter(|s| !s.points.is_empty())
    .collect::<Vec<_>>();
    let ticks: Vec<(f64, &str)> = QUANTILES
        .iter()
        .filter(|(stat, _)| *stat != Stat::P95)
        .map(|(stat, q)| (tail_position(*q), stat.name()))
        .collect();
    chart(
        "latency percentiles",
        ("percentile (log scale of 1/(1−q))", XAxis::Ticks(&ticks)),
        "latency",
        &secs,
        &dist,
    )
}

/// Throughput against concurrency for the levels of each concurrency sweep.
pub(super) fn sweeps(out: &mut String, suite: &str, gates: &[GateRecord]) {
    let mut sweeps: Vec<(&str, Vec<(f64, f64)>)> = Vec::new();
    for g in gates {
        let Some((name, level)) = g
            .sweep
            .as_ref()
            .and_then(|s| Some((s.of.sweep.as_str(), s.concurrency?)))
        else {
            continue;
        };
        let Some(tps) = g.figures.get(MetricKey::single(Metric::OutputTokS)) else {
            continue;
        };
        let n = f64::from(level);
        match sweeps.iter_mut().find(|(s, _)| *s == name) {
            Some((_, pts)) => pts.push((n, *tps)),
            None => sweeps.push((name, vec![(n, *tps)])),
        }
    }
    for (name, points) in sweeps.into_iter().filter(|(_, p)| p.len() > 1) {
        let _ = write!(
            out,
            "<section><h3>sweep <code>{}::performance::{}</code></h3>",
            esc(suite),
            esc(name)
        );
        out.push_str(&chart(
            "throughput against concurrency",
            ("concurrency", XAxis::Linear),
            "output tok/s",
            &|v| format!("{v:.0}"),
            &[Series {
                name: "output tok/s",
                color: "#9467bd",
                points,
                line: true,
            }],
        ));
        out.push_str("</section>");
    }
}

/// Variant comparison bars with their 95% intervals.
pub(super) fn variants(out: &mut String, record: &RunRecord) {
    if record.comparisons.is_empty() {
        return;
    }
    out.push_str("<h2>Variants</h2>");
    for c in &record.comparisons {
        let top = c
            .rows
            .iter()
            .map(|r| r.ci95.map_or(r.value, |(_, hi)| hi))
            .fold(0.0_f64, f64::max)
            .max(f64::MIN_POSITIVE)
            * 1.1;
        let bar_w = 80.0;
        #[expect(clippy::cast_precision_loss, reason = "a handful of variants")]
        let width = PAD * 2.0 + bar_w * 1.5 * c.rows.len() as f64;
        let _ = write!(
            out,
            r#"<h3><code>{}</code>: {} ({} is better){}</h3><svg class="chart" viewBox="0 0 {width} {H}" width="{width}" height="{H}" role="img" aria-label="variants"><title>variants</title>"#,
            esc(&c.gate),
            esc(&c.figure),
            esc(&c.better),
            match (&c.best, &c.no_best) {
                (Some(b), _) => format!(" — best: <code>{}</code>", esc(b)),
                (None, Some(why)) => format!(" — no best: {}", esc(why)),
                (None, None) => String::new(),
            }
        );
        let py = |v: f64| H - PAD - v / top * (H - 2.0 * PAD);
        for (i, r) in c.rows.iter().enumerate() {
            #[expect(clippy::cast_precision_loss, reason = "a handful of variants")]
            let x = PAD + bar_w * 1.5 * i as f64;
            let _ = write!(
                out,
                r##"<rect x="{x:.1}" y="{y:.1}" width="{bar_w}" height="{h:.1}" fill="#1f77b4"/><text x="{cx:.1}" y="{ly}" text-anchor="middle" font-size="11">{n}</text><text x="{cx:.1}" y="{vy:.1}" text-anchor="middle" font-size="10">{v}</text>"##,
                y = py(r.value),
                h = (H - PAD) - py(r.value),
                cx = x + bar_w / 2.0,
                ly = H - PAD + 14.0,
                n = esc(&r.variant),
                vy = py(r.value) - 4.0,
                v = esc(&r.shown)
            );
            if let Some((lo, hi)) = r.ci95 {
                let _ = write!(
                    out,
                    r##"<line x1="{cx:.1}" y1="{a:.1}" x2="{cx:.1}" y2="{b:.1}" stroke="#000" stroke-width="2"/>"##,
                    cx = x + bar_w / 2.0,
                    a = py(lo),
                    b = py(hi)
                );
            }
        }
        out.push_str("</svg>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(name: &str, sweep: Option<(&str, u32)>, tok_s: f64) -> GateRecord {
        GateRecord {
            gate: name.into(),
            load: String::new(),
            repeats: 1,
            figures: [(MetricKey::single(Metric::OutputTokS), tok_s)]
                .into_iter()
                .collect(),
            series: Vec::new(),
            samples: crate::suite::figures::ByKey::default(),
            token_sources: std::collections::BTreeMap::new(),
            thresholds: Vec::new(),
            client: None,
            trends: Vec::new(),
            probes_skipped: Vec::new(),
            sweep: sweep.map(|(s, c)| crate::record::SweepPoint {
                of: crate::suite::SweepLevel {
                    sweep: s.into(),
                    level: format!("concurrency_{c}"),
                },
                concurrency: Some(c),
                rate: None,
            }),
        }
    }

    /// A sweep's chart comes from the record's sweep points, never from
    /// gate names: gates named like levels but not a sweep's draw none.
    #[test]
    fn a_sweep_is_drawn_from_its_levels_not_from_names() {
        let mut out = String::new();
        let levels = [
            gate("odd name", Some(("load", 1)), 100.0),
            gate("odd name 2", Some(("load", 8)), 500.0),
            gate("fake::concurrency_1", None, 100.0),
            gate("fake::concurrency_8", None, 500.0),
        ];
        sweeps(&mut out, "s", &levels);
        assert!(
            out.contains("sweep <code>s::performance::load</code>"),
            "{out}"
        );
        assert!(!out.contains("fake"), "{out}");
        assert_eq!(xs(&out).len(), 2, "{out}");
    }

    /// The `cx` of every point of an SVG, in order.
    fn xs(svg: &str) -> Vec<f64> {
        svg.split("<circle cx=\"")
            .skip(1)
            .map(|c| c[..c.find('"').unwrap()].parse().unwrap())
            .collect()
    }

    /// p50, p90, p99, p99.9 and max evenly apart on a log 1/(1−q) axis:
    /// the tail, where latency goes wrong, gets as much room as the body.
    #[test]
    fn the_percentile_axis_gives_the_tail_room() {
        let figures = [
            ("p50", 0.010),
            ("p90", 0.012),
            ("p95", 0.013),
            ("p99", 0.020),
            ("p99.9", 0.050),
            ("max", 0.400),
        ]
        .iter()
        .map(|(stat, v)| (format!("ttft.{stat}").parse().unwrap(), *v))
        .collect();
        let g = GateRecord {
            gate: "g".into(),
            load: String::new(),
            repeats: 1,
            figures,
            series: Vec::new(),
            samples: crate::suite::figures::ByKey::default(),
            token_sources: std::collections::BTreeMap::new(),
            thresholds: Vec::new(),
            client: None,
            sweep: None,
            trends: Vec::new(),
            probes_skipped: Vec::new(),
        };
        let svg = percentile_chart(&g);
        let x = xs(&svg);
        assert_eq!(x.len(), 6, "{svg}");
        let (p50, p90, p99, p999, max) = (x[0], x[1], x[3], x[4], x[5]);
        let plot = W - LEFT - PAD;
        assert!(
            (p50 - LEFT).abs() < 0.1 && (max - (W - PAD)).abs() < 0.1,
            "{x:?}"
        );
        // A decade of tail apiece: p90→p99, p99→p99.9, p99.9→max.
        for (a, b) in [(p90, p99), (p99, p999), (p999, max)] {
            assert!(((b - a) - (p99 - p90)).abs() < 0.2, "{x:?}");
        }
        assert!(max - p99 > plot / 2.0, "p99 to max squeezed: {x:?}");
        for tick in ["p50", "p90", "p99", "p99.9", "max"] {
            assert!(
                svg.contains(&format!(">{tick}</text>")),
                "no tick {tick}: {svg}"
            );
        }
    }
}
