//! The verdict on a sweep's curve: each check of it (a figure rising or
//! falling across the levels, within a tolerance) over the levels' figures.

use std::fmt::Write as _;

use crate::check::message::Message;
use crate::load::metrics::GateMetrics;
use crate::suite::metric::format_value;
use crate::suite::{Curve, Suite};

/// Judges the checks of a sweep's curve over the figures of its levels.
pub fn judge_curve(
    suite: &Suite,
    curve: &Curve,
    rows: &[(&str, GateMetrics)],
) -> Result<(), Message> {
    let file = &suite.file;
    let mut out = Message::new();
    for check in &curve.checks {
        let values: Vec<(&str, Option<f64>)> =
            rows.iter().map(|(l, m)| (*l, m.value(check.key))).collect();
        let shown: Vec<String> = values
            .iter()
            .map(|(l, v)| {
                format!(
                    "{l} {}",
                    v.map_or_else(|| "nothing".into(), |v| format_value(check.key.metric, v))
                )
            })
            .collect();
        let broken = values.windows(2).find_map(|w| {
            let ((from, a), (to, b)) = (w[0], w[1]);
            let (Some(a), Some(b)) = (a, b) else {
                return Some(format!("{to} has no value"));
            };
            let slack = a.abs() * check.tolerance / 100.0;
            let ok = if check.rising {
                b >= a - slack
            } else {
                b <= a + slack
            };
            (!ok).then(|| {
                let change = if a == 0.0 {
                    0.0
                } else {
                    100.0 * (b - a) / a.abs()
                };
                format!("{change:+.1}% from {from} to {to}")
            })
        });
        if let Some(step) = broken {
            let direction = if check.rising {
                "non_decreasing"
            } else {
                "non_increasing"
            };
            out.error(format_args!(
                "curve failed: {} should be {direction}{} across the levels of `{}`",
                check.key,
                if check.tolerance > 0.0 {
                    format!(" within {}%", check.tolerance)
                } else {
                    String::new()
                },
                curve.gate
            ));
            out.at(file, check.loc);
            let _ = writeln!(out, "levels:   {}", shown.join(" → "));
            let _ = writeln!(out, "broken:   {step}\n");
        }
    }
    if out.is_empty() { Ok(()) } else { Err(out) }
}
