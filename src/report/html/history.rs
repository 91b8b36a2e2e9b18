//! The run history as one HTML page (`servegate history report`): the
//! changes of level found, then one plot per series (a suite's gate's
//! figure on one model and hardware), its runs oldest first, the changes
//! marked at the run that starts them, every run's time, value, commit,
//! servegate version and configuration in its tooltip. Same style as the
//! run report: self-contained, no script. What the history holds came
//! from records, which are input: scrubbed of secrets, then escaped.

use std::fmt::Write as _;

use super::trend::{Dot, DotKind, Marker, Size, svg};
use super::{esc, page_start};
use crate::history::{Point, SeriesChange, SeriesKey};
use crate::secrets::scrub;
use crate::suite::metric::format_stored;
use crate::units::format_unix;

/// One series as the page plots it.
pub struct SeriesPlot {
    /// Which series.
    pub series: SeriesKey,
    /// Its points, oldest first.
    pub points: Vec<Point>,
    /// The changes of level found in them.
    pub changes: Vec<SeriesChange>,
}

/// A run's tooltip: its id, time, value, commit and, where given, more
/// lines (servegate's version, the configuration).
pub(super) fn point_title(
    run: &str,
    unix: i64,
    value: &str,
    commit: Option<&str>,
    more: Option<&str>,
) -> String {
    let mut title = format!("run {run}\n{}\n{value}", format_unix(unix));
    if let Some(c) = commit {
        let _ = write!(title, "\ncommit {c}");
    }
    if let Some(m) = more {
        let _ = write!(title, "\n{m}");
    }
    title
}

/// A name or value the history holds, for the page: it came from records,
/// which are input, so secrets are scrubbed before it is escaped.
fn text(s: &str) -> String {
    esc(&scrub(s))
}

/// A value of the series' figure as the run shows it.
fn shown(plot: &SeriesPlot, value: f64) -> String {
    let unit = plot.points.first().map_or("", |p| p.unit.as_str());
    format_stored(&plot.series.key, unit, value)
}

/// The page: `at` names the history, `plots` the series drawn.
pub fn render(at: &str, plots: &[SeriesPlot]) -> String {
    let mut out = page_start("servegate history");
    let changes: usize = plots.iter().map(|p| p.changes.len()).sum();
    let _ = write!(
        out,
        "<h1>servegate history</h1><p>{} series from <code>{}</code>; {changes} change(s) of level found (E-Divisive means with a permutation test, confirmed by Welch's t: <code>servegate history show</code> lists them too).</p>",
        plots.len(),
        text(at)
    );
    if changes > 0 {
        out.push_str("<h2>Changes of level</h2><table class=\"changes\"><tr><th>series</th><th>first run on the new level</th><th>when</th><th>commit</th><th>level</th><th>change</th><th>p</th></tr>");
        for plot in plots {
            for c in &plot.changes {
                let _ = write!(
                    out,
                    "<tr><td><code>{}::{}</code> {}</td><td><code>{}</code></td><td>{}</td><td title=\"{}\"><code>{}</code></td><td class=\"level\">{} → {}</td><td>{:+.1}%</td><td>{}</td></tr>",
                    text(&plot.series.suite),
                    text(&plot.series.gate),
                    text(&plot.series.key),
                    text(&c.run_uid),
                    format_unix(c.finished_unix),
                    text(c.suite_commit.as_deref().unwrap_or("—")),
                    esc(&scrub(c.suite_commit.as_deref().unwrap_or("—"))
                        .chars()
                        .take(12)
                        .collect::<String>()),
                    text(&shown(plot, c.mean_before)),
                    text(&shown(plot, c.mean_after)),
                    100.0 * c.relative,
                    crate::history::changepoint::format_p(c.p_value)
                );
            }
        }
        out.push_str("</table>");
    }
    out.push_str("<h2>Series</h2><div class=\"series-grid\">");
    for plot in plots {
        series_section(&mut out, plot);
    }
    out.push_str("</div></body></html>\n");
    out
}

fn series_section(out: &mut String, plot: &SeriesPlot) {
    let s = &plot.series;
    let dots: Vec<Dot> = plot
        .points
        .iter()
        .map(|p| Dot {
            value: p.value,
            kind: if p.counted() {
                DotKind::Counted
            } else {
                DotKind::NotCounted
            },
            title: scrub(&point_title(
                &p.run_uid,
                p.finished_unix,
                &format!(
                    "{}{}",
                    shown(plot, p.value),
                    match (p.gate_passed, p.client_limited) {
                        (_, true) => " (client-limited: not compared)",
                        (false, false) => " (gate failed: not in the level)",
                        (true, false) => "",
                    }
                ),
                p.suite_commit.as_deref(),
                Some(&format!(
                    "servegate {}\nconfiguration {}",
                    p.servegate, p.fingerprint
                )),
            ))
            .into_owned(),
        })
        .collect();
    let markers: Vec<Marker> = plot
        .changes
        .iter()
        .filter_map(|c| {
            let at = plot.points.iter().position(|p| p.run_uid == c.run_uid)?;
            Some(Marker {
                at,
                label: format!("{:+.1}%", 100.0 * c.relative),
                title: scrub(&format!(
                    "change of level from run {} ({}, commit {}): {} → {} ({:+.1}%, p = {}){}",
                    c.run_uid,
                    format_unix(c.finished_unix),
                    c.suite_commit.as_deref().unwrap_or("unknown"),
                    shown(plot, c.mean_before),
                    shown(plot, c.mean_after),
                    100.0 * c.relative,
                    crate::history::changepoint::format_p(c.p_value),
                    c.configuration
                        .as_ref()
                        .map_or_else(String::new, |f| format!(
                            "; configuration now {f}{}",
                            c.configuration_differs
                                .as_ref()
                                .map_or_else(String::new, |d| format!(", by {d}"))
                        ))
                ))
                .into_owned(),
            })
        })
        .collect();
    let n = plot.points.len();
    // Days, or times where the runs are of one day (`2026-12-04T03:00:00Z`).
    let one_day = plot
        .points
        .first()
        .zip(plot.points.last())
        .is_none_or(|(a, b)| {
            format_unix(a.finished_unix).get(..10) == format_unix(b.finished_unix).get(..10)
        });
    let date = |i: usize| {
        plot.points.get(i).map(|p| {
            let at = format_unix(p.finished_unix);
            let part = if one_day {
                at.get(11..16)
            } else {
                at.get(..10)
            };
            part.map_or_else(|| at.clone(), str::to_owned)
        })
    };
    let mut x_labels: Vec<(usize, String)> = Vec::new();
    for i in [0, n / 2, n.saturating_sub(1)] {
        if let Some(d) = date(i)
            && !x_labels.iter().any(|(j, _)| *j == i)
        {
            x_labels.push((i, d));
        }
    }
    let newest = plot
        .points
        .last()
        .map_or_else(String::new, |p| shown(plot, p.value));
    let _ = write!(
        out,
        "<section class=\"series\"><h3><code>{}::{}</code> {}</h3><p class=\"load\">{} on {}: {n} run(s), the newest {}</p>{}</section>",
        text(&s.suite),
        text(&s.gate),
        text(&s.key),
        text(&s.model),
        text(&s.hardware),
        text(&newest),
        svg(
            &scrub(&format!("{}::{} {} over {n} runs", s.suite, s.gate, s.key)),
            &dots,
            &markers,
            Size::Large,
            &|v| shown(plot, v),
            &x_labels
        )
    );
}

#[cfg(test)]
mod tests {
    use super::{SeriesPlot, render};
    use crate::history::{Point, SeriesChange, SeriesKey};

    /// Every run is a dot with its tooltip, the change is marked at its
    /// run, and a name the history holds cannot act on the page.
    #[test]
    fn the_page_marks_the_change_and_names_every_run() {
        let points: Vec<Point> = (0..8)
            .map(|i| Point {
                run_uid: format!("gpu-1/{i}"),
                node: "gpu-1".into(),
                finished_unix: 1_800_000_000 + i64::from(i) * 86_400,
                value: if i < 4 { 100.0 } else { 75.0 },
                unit: "tok/s".into(),
                suite_commit: Some(format!("c{i}")),
                fingerprint: "openai-chat m".into(),
                served_model: "m".into(),
                server_version: None,
                servegate: "0.1.0".into(),
                gate_passed: i != 6,
                client_limited: false,
            })
            .collect();
        let plot = SeriesPlot {
            series: SeriesKey {
                suite: "nightly".into(),
                gate: "<decode>".into(),
                key: "decode_tok_s.mean".into(),
                model: "m".into(),
                hardware: "no GPU".into(),
            },
            changes: vec![SeriesChange {
                index: 4,
                run_uid: "gpu-1/4".into(),
                finished_unix: points[4].finished_unix,
                suite_commit: Some("c4".into()),
                mean_before: 100.0,
                mean_after: 75.0,
                relative: -0.25,
                p_value: 0.005,
                p_permutation: 0.005,
                configuration: None,
                configuration_differs: None,
            }],
            points,
        };
        let page = render("h.sqlite", &[plot]);
        assert_eq!(page.matches("<circle class=\"run\"").count(), 7, "{page}");
        assert_eq!(page.matches("<circle class=\"run not-counted\"").count(), 1);
        assert!(page.contains("run gpu-1/4\n"), "{page}");
        assert!(page.contains("commit c4"));
        assert!(page.contains("<g class=\"change\"><title>change of level from run gpu-1/4"));
        assert!(page.contains("-25.0%"));
        assert!(page.contains("&lt;decode&gt;") && !page.contains("<decode>"));
        assert!(page.contains("1 change(s) of level found"));
    }
}
