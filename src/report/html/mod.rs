//! A self-contained HTML report: no script, no network, inline CSS and
//! SVG plots drawn here. Hand-written SVG rather than a plotting crate: the
//! plots are a few lines, points and bars, and plotters would bring font
//! rendering and image crates for nothing this report needs.
//!
//! This file writes the page (its head and style, the trials and probes
//! tables, a gate's figures and thresholds); [`charts`] draws its plots.

mod charts;
pub mod history;
mod trend;

use std::fmt::Write as _;

use super::counts;
use crate::record::{GateRecord, RunRecord, TrialOutcome, TrialRecord};
use crate::suite::metric::MetricKey;
use charts::{Series, XAxis, chart, percentile_chart, secs, sweeps, variants};

/// Escapes text for HTML.
pub(super) fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn gate_section(out: &mut String, suite: &str, g: &GateRecord) {
    let _ = write!(
        out,
        "<section><h3><code>{}::performance::{}</code></h3><p class=\"load\">{}{}</p>{}",
        esc(suite),
        esc(&g.gate),
        esc(&g.load),
        if g.repeats > 1 {
            format!(" — means over {} repeats", g.repeats)
        } else {
            String::new()
        },
        g.skipped_note().map_or_else(String::new, |n| format!(
            "<p class=\"skipped\">⚠ {}</p>",
            esc(&n)
        ))
    );
    let shown = crate::suite::metric::format_figure;
    let table = |out: &mut String, keys: &mut dyn Iterator<Item = (MetricKey, &f64)>| {
        out.push_str("<table class=\"figures\"><tr><th>figure</th><th>value</th></tr>");
        for (k, v) in keys {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td></tr>",
                esc(&k.to_string()),
                esc(&shown(k, *v))
            );
        }
        out.push_str("</table>");
    };
    table(
        out,
        &mut g
            .figures
            .iter()
            .filter(|(k, _)| crate::suite::metric::KEY_FIGURES.contains(k)),
    );
    if !g.thresholds.is_empty() {
        out.push_str("<table class=\"thresholds\"><tr><th>threshold</th><th>verdict</th></tr>");
        for t in &g.thresholds {
            let (class, verdict) = if t.passed {
                ("pass", "pass")
            } else {
                ("fail", "FAIL")
            };
            let _ = write!(
                out,
                "<tr class=\"{class}\"><td>{}</td><td>{verdict}</td></tr>",
                esc(&t.check)
            );
        }
        out.push_str("</table>");
    }
    trends(out, g);
    out.push_str("<details><summary>every figure</summary>");
    table(out, &mut g.figures.iter());
    out.push_str("</details><div class=\"charts\">");
    out.push_str(&percentile_chart(g));
    if !g.series.is_empty() {
        let over_time = [
            Series {
                name: "E2E",
                color: "#2ca02c",
                points: g.series.iter().map(|&(t, _, e)| (t, e)).collect(),
                line: false,
            },
            Series {
                name: "TTFT",
                color: "#1f77b4",
                points: g.series.iter().map(|&(t, f, _)| (t, f)).collect(),
                line: false,
            },
        ];
        out.push_str(&chart(
            "latency over time",
            ("seconds since the first completion", XAxis::Linear),
            "latency",
            &secs,
            &over_time,
        ));
    }
    out.push_str("</div></section>");
}

/// Each gated figure's earlier values beside this run's, small, with
/// whether this run moved off their level.
fn trends(out: &mut String, g: &GateRecord) {
    if g.trends.is_empty() {
        return;
    }
    out.push_str("<div class=\"trends\">");
    for t in &g.trends {
        let Some(&value) = g.figures.get(t.key) else {
            continue;
        };
        let shown = |v: f64| crate::suite::metric::format_figure(t.key, v);
        let mut dots: Vec<trend::Dot> = t
            .earlier
            .iter()
            .map(|p| trend::Dot {
                value: p.value,
                kind: if p.counted {
                    trend::DotKind::Counted
                } else {
                    trend::DotKind::NotCounted
                },
                title: history::point_title(
                    &p.run,
                    p.finished_unix,
                    &shown(p.value),
                    p.commit.as_deref(),
                    None,
                ),
            })
            .collect();
        let limited = g.client.as_ref().is_some_and(|c| c.limits(t.key));
        dots.push(trend::Dot {
            value,
            kind: match (&t.moved, limited) {
                (_, true) => trend::DotKind::NotCounted,
                (Some(_), false) => trend::DotKind::Moved,
                (None, false) => trend::DotKind::This,
            },
            title: format!(
                "this run: {}{}",
                shown(value),
                if limited {
                    " (client-limited: not compared)"
                } else {
                    ""
                }
            ),
        });
        let counted: Vec<f64> = t
            .earlier
            .iter()
            .filter(|p| p.counted)
            .map(|p| p.value)
            .collect();
        let against = (!counted.is_empty())
            .then(|| crate::history::gate::median(&counted))
            .map_or_else(String::new, |m| {
                format!(
                    "; median of the {} earlier passing run(s) drawn {} ({})",
                    counted.len(),
                    shown(m),
                    crate::history::trend::change(value, m)
                )
            });
        let verdict = match (&t.moved, limited) {
            (_, true) => "<span class=\"load\">client-limited: not compared</span>".to_owned(),
            (Some(m), false) => format!("<strong class=\"moved\">moved: {}</strong>", esc(m)),
            (None, false) => "<span class=\"steady\">on its level</span>".to_owned(),
        };
        let _ = write!(
            out,
            "<div class=\"trend-row\">{}<p><code>{}</code>: this run {}{}; {verdict}</p></div>",
            trend::svg(
                &format!("{} over the last {} runs", t.key, dots.len()),
                &dots,
                &[],
                trend::Size::Small,
                &shown,
                &[]
            ),
            esc(&t.key.to_string()),
            esc(&shown(value)),
            esc(&against)
        );
    }
    out.push_str("</div>");
}

/// The last user message (or prompt) of a request body.
fn prompt_of(request: &serde_json::Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .or_else(|| request["prompt"].as_str())
        .or_else(|| request["text"].as_str())
        .unwrap_or("")
        .to_owned()
}

/// A trial's row of the trials table, its failure message folded below it.
pub(super) fn trial_row(out: &mut String, t: &TrialRecord) {
    let (class, mark, why) = match t.outcome {
        TrialOutcome::Passed => ("pass", "passed", "failure"),
        TrialOutcome::Failed => ("fail", "FAILED", "failure"),
        TrialOutcome::Gated => ("gated", "gated", "why it was gated"),
    };
    let _ = write!(
        out,
        "<tr class=\"{class}\"><td><code>{}</code></td><td>{mark}</td><td>{:.2}s</td><td>{}:{}</td></tr>",
        esc(&t.name),
        t.duration_s,
        esc(&t.file),
        t.line
    );
    if let Some(m) = &t.message {
        let _ = write!(
            out,
            "<tr class=\"{class}\"><td colspan=\"4\"><details><summary>{why}</summary><pre>{}</pre></details></td></tr>",
            esc(m)
        );
    }
}

/// A page's head and style, the same for every page servegate writes, and
/// its body's start.
pub(super) fn page_start(title: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>\
         body{{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}}\
         table{{border-collapse:collapse;margin:.5em 0}}td,th{{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}}\
         tr.fail td{{background:#fde8e8}}tr.gated td{{background:#fdf3e1}}tr.pass td:nth-child(2){{color:#176317}}pre{{white-space:pre-wrap;font-size:12px}}\
         .charts{{display:flex;flex-wrap:wrap;gap:1em}}.chart,.trend{{border:1px solid #eee;background:#fff}}.load{{color:#555}}\
         .trend-row{{display:flex;align-items:center;gap:1em}}.trend{{flex-shrink:0}}.series-grid{{display:flex;flex-wrap:wrap;gap:0 2em}}td.level{{white-space:nowrap}}.trend-row p{{margin:.2em 0}}.moved{{color:#b00}}.steady{{color:#176317}}\
         h1 .fail{{color:#b00}}h1 .pass{{color:#176317}}</style></head><body>",
        esc(title)
    )
}

/// The record as one HTML page.
pub fn render(record: &RunRecord) -> String {
    let (counted, failed) = counts(record);
    let mut out = page_start("servegate report");
    let _ = write!(
        out,
        "<h1>servegate: <span class=\"{}\">{counted}</span>{}</h1><p>run <code>{}</code>, servegate {}</p><ul>",
        if failed { "fail" } else { "pass" },
        if record.complete {
            ""
        } else {
            " (interrupted)"
        },
        esc(&record.run_id),
        esc(&record.servegate)
    );
    for s in &record.suites {
        let _ = write!(
            out,
            "<li><code>{}</code> against {}</li>",
            esc(&s.suite),
            esc(&s.target)
        );
    }
    out.push_str("</ul><h2>Trials</h2><table><tr><th>trial</th><th>outcome</th><th>time</th><th>where</th></tr>");
    for t in &record.trials {
        trial_row(&mut out, t);
    }
    out.push_str("</table>");
    let probes: Vec<&TrialRecord> = record
        .trials
        .iter()
        .filter(|t| t.exchange.is_some())
        .collect();
    if !probes.is_empty() {
        out.push_str("<h2>Correctness probes</h2><table><tr><th>probe</th><th>prompt</th><th>answer</th><th>verdict</th></tr>");
        for t in probes {
            let ex = t.exchange.as_ref().expect("filtered");
            let _ = write!(
                out,
                "<tr class=\"{}\"><td><code>{}</code></td><td><pre>{}</pre></td><td><pre>{}</pre></td><td>{}</td></tr>",
                if t.outcome.passed() { "pass" } else { "fail" },
                esc(&t.name),
                esc(&prompt_of(&ex.request)),
                esc(&kept_answer(ex)),
                t.outcome.name()
            );
        }
        out.push_str("</table>");
    }
    out.push_str("<h2>Performance</h2>");
    for s in &record.suites {
        for g in &s.gates {
            gate_section(&mut out, &s.suite, g);
        }
        sweeps(&mut out, &s.suite, &s.gates);
    }
    variants(&mut out, record);
    out.push_str("</body></html>\n");
    out
}

/// A probe's answer as the record kept it, saying so when that is an
/// excerpt.
fn kept_answer(ex: &crate::record::Exchange) -> String {
    let kept = ex.content.chars().count();
    if ex.content_chars > kept {
        format!(
            "{}… ({} characters in all; the record keeps the first {kept})",
            ex.content, ex.content_chars
        )
    } else {
        ex.content.clone()
    }
}
