//! A figure over runs as SVG: one dot a run, oldest left, on an axis that
//! spans the values (not from zero: a 4% step must show), with the runs
//! that do not count toward the level hollow, this run marked, and the
//! changes of level found drawn as dashed lines at the run that starts
//! them. Every dot and line names its run in a tooltip (SVG `<title>`: no
//! script). Drawn small beside a gate's figures in the run report, large
//! in the history report.

use std::fmt::Write as _;

use super::esc;

/// One run's value.
pub(crate) struct Dot {
    /// The value.
    pub(crate) value: f64,
    /// What it is.
    pub(crate) kind: DotKind,
    /// The tooltip: run, time, value, commit, configuration.
    pub(crate) title: String,
}

/// How a dot is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DotKind {
    /// A run that counts toward the level (its gate passed, its client
    /// did not set the figure).
    Counted,
    /// A run that does not (hollow).
    NotCounted,
    /// This run, on the level.
    This,
    /// This run, moved off the level.
    Moved,
}

/// A change of level, before the dot at `at`.
pub(crate) struct Marker {
    /// The first dot on the new level.
    pub(crate) at: usize,
    /// Its label (`−25.9%`).
    pub(crate) label: String,
    /// Its tooltip.
    pub(crate) title: String,
}

/// The size a trend is drawn at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Size {
    /// Beside a gate's figures: no axes, the range in words.
    Small,
    /// A plot of its own, with axes.
    Large,
}

/// The trend of `dots` as an SVG; `x_labels` name some dots' positions
/// (dates) on a large one.
pub(crate) fn svg(
    title: &str,
    dots: &[Dot],
    markers: &[Marker],
    size: Size,
    y_fmt: &dyn Fn(f64) -> String,
    x_labels: &[(usize, String)],
) -> String {
    let (w, h, left, pad) = match size {
        Size::Small => (240.0, 56.0, 6.0, 6.0),
        Size::Large => (560.0, 240.0, 72.0, 40.0),
    };
    let values = dots.iter().map(|d| d.value).filter(|v| v.is_finite());
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() {
        return String::new();
    }
    // A flat series spans 5% of its value about it; one of zeros (no
    // errors, ever) 0 to 1.
    let (y0, y1) = if hi > lo {
        (lo - (hi - lo) * 0.15, hi + (hi - lo) * 0.15)
    } else if hi == 0.0 {
        (0.0, 1.0)
    } else {
        (lo - hi.abs() * 0.05, hi + hi.abs() * 0.05)
    };
    #[expect(clippy::cast_precision_loss, reason = "runs in a plot")]
    let last = dots.len().saturating_sub(1).max(1) as f64;
    #[expect(clippy::cast_precision_loss, reason = "runs in a plot")]
    let px = |i: usize| left + i as f64 / last * (w - left - pad);
    let py = |v: f64| h - pad - (v - y0) / (y1 - y0) * (h - 2.0 * pad);
    let mut out = format!(
        r#"<svg class="trend" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(title)
    );
    if size == Size::Large {
        super::charts::frame(
            &mut out,
            (left, w - pad, pad, h - pad),
            (y0, y1),
            &py,
            y_fmt,
        );
        for (i, label) in x_labels {
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{}" text-anchor="middle" font-size="10">{}</text>"#,
                px(*i),
                h - pad + 14.0,
                esc(label)
            );
        }
    }
    for m in markers {
        // Between the last run before the change and the first after.
        let x = match m.at {
            0 => px(0),
            at => f64::midpoint(px(at - 1), px(at)),
        };
        let _ = write!(
            out,
            r##"<g class="change"><title>{t}</title><line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{b}" stroke="#d62728" stroke-dasharray="4 3"/>"##,
            t = esc(&m.title),
            top = pad / 2.0,
            b = h - pad
        );
        if size == Size::Large {
            let _ = write!(
                out,
                r##"<text x="{:.1}" y="{}" font-size="10" fill="#d62728">{}</text>"##,
                x + 3.0,
                pad / 2.0 + 10.0,
                esc(&m.label)
            );
        }
        out.push_str("</g>");
    }
    let line: Vec<String> = dots
        .iter()
        .enumerate()
        .filter(|(_, d)| d.value.is_finite())
        .map(|(i, d)| format!("{:.1},{:.1}", px(i), py(d.value)))
        .collect();
    let _ = write!(
        out,
        r##"<polyline fill="none" stroke="#9bb8d3" stroke-width="1" points="{}"/>"##,
        line.join(" ")
    );
    let r = if size == Size::Small { 2.0 } else { 3.0 };
    for (i, d) in dots.iter().enumerate().filter(|(_, d)| d.value.is_finite()) {
        let (fill, stroke, radius) = match d.kind {
            DotKind::Counted => ("#1f77b4", "#1f77b4", r),
            DotKind::NotCounted => ("#fff", "#888", r),
            DotKind::This => ("#2ca02c", "#176317", r + 1.5),
            DotKind::Moved => ("#d62728", "#8b0000", r + 1.5),
        };
        let _ = write!(
            out,
            r#"<circle class="{class}" cx="{:.1}" cy="{:.1}" r="{radius}" fill="{fill}" stroke="{stroke}"><title>{}</title></circle>"#,
            px(i),
            py(d.value),
            esc(&d.title),
            class = match d.kind {
                DotKind::Counted => "run",
                DotKind::NotCounted => "run not-counted",
                DotKind::This => "this-run",
                DotKind::Moved => "this-run moved",
            }
        );
    }
    out.push_str("</svg>");
    out
}
