//! Durations and sizes: one parser and one formatter each, for suites
//! (`90s`, `1.5s`, `250ms`, `8 MiB`) and for messages (`45.60ms`, `8 MiB`);
//! and the one way a moment is shown (`2026-12-03T14:53:00Z`).

use std::time::Duration;

/// Duration units, longest first so `ms` is not read as `m`.
const TIME_UNITS: [(&str, f64); 8] = [
    ("min", 60.0),
    ("ns", 1e-9),
    ("us", 1e-6),
    ("µs", 1e-6),
    ("ms", 1e-3),
    ("s", 1.0),
    ("m", 60.0),
    ("h", 3600.0),
];

/// A duration as suites write it: one or more `<number><unit>` terms
/// (`90s`, `1.5s`, `250ms`, `800us`, `10m`, `1h 30m`), fractions allowed;
/// units ns, us (µs), ms, s, m (min), h.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("an empty duration".to_owned());
    }
    let mut rest = t;
    let mut secs = 0.0_f64;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, after) = rest.split_at(split);
        if num.is_empty() {
            return Err(format!("`{t}` does not start with a number"));
        }
        let value: f64 = num
            .parse()
            .map_err(|_| format!("`{num}` in `{t}` is not a number"))?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.' || c.is_whitespace())
            .unwrap_or(after.len());
        let unit = &after[..unit_len];
        if unit.is_empty() {
            return Err(format!(
                "`{t}` has no unit: write e.g. `2s`, `250ms` or `800us`"
            ));
        }
        let scale = TIME_UNITS
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|(_, s)| *s)
            .ok_or_else(|| format!("unknown unit `{unit}` (expected ns, us, ms, s, m or h)"))?;
        secs += value * scale;
        rest = after[unit_len..].trim_start();
    }
    if !secs.is_finite() || secs > 1e12 {
        return Err(format!("`{t}` is too long"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A regular expression (JSON Schema's dialect) of what [`parse_duration`]
/// reads: `<number><unit>` terms, spaces between them allowed.
pub(crate) fn duration_pattern() -> String {
    let units: Vec<&str> = TIME_UNITS.iter().map(|(u, _)| *u).collect();
    let term = format!("([0-9]+(\\.[0-9]*)?|\\.[0-9]+)({})", units.join("|"));
    format!("\\s*{term}(\\s*{term})*\\s*")
}

/// Formats seconds as `1.234s`, `45.60ms` or `789us`.
pub(crate) fn format_secs(secs: f64) -> String {
    if secs >= 1.0 {
        format!("{secs:.3}s")
    } else if secs >= 1e-3 {
        format!("{:.2}ms", secs * 1e3)
    } else {
        format!("{:.0}us", secs * 1e6)
    }
}

/// Formats a duration like [`format_secs`].
pub(crate) fn format_duration(d: Duration) -> String {
    format_secs(d.as_secs_f64())
}

/// Binary units, largest first.
const UNITS: [(&str, u64); 4] = [
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("B", 1),
];

/// Seconds since the epoch as a UTC time (`2026-12-03T14:53:00Z`); a time
/// before the epoch or past the year 9999 (an imported record can say
/// anything) as its number.
pub fn format_unix(unix: i64) -> String {
    const YEAR_10000: u64 = 253_402_300_800;
    match u64::try_from(unix) {
        Ok(s) if s < YEAR_10000 => {
            humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(s))
                .to_string()
        }
        _ => unix.to_string(),
    }
}

/// A regular expression (JSON Schema's dialect, which has no
/// case-insensitive flag) of what [`parse_bytes`] reads: a whole number and
/// a unit of any case, or none.
pub(crate) fn bytes_pattern() -> String {
    let any_case = |unit: &str| -> String {
        unit.chars().fold(String::new(), |mut out, c| {
            out.push('[');
            out.push(c.to_ascii_lowercase());
            out.push(c.to_ascii_uppercase());
            out.push(']');
            out
        })
    };
    let units: Vec<String> = UNITS.iter().map(|(u, _)| any_case(u)).collect();
    format!("\\s*[0-9]+\\s*({})?\\s*", units.join("|"))
}

/// `8MiB`, `512 KiB`, `1GiB`, `4096` (bytes) → bytes.
pub(crate) fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (number, unit) = t
        .find(|c: char| !c.is_ascii_digit())
        .map_or((t, ""), |at| (&t[..at], t[at..].trim()));
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{t}` is not a size: expected a whole number and a unit"))?;
    let scale = if unit.is_empty() {
        1
    } else {
        UNITS
            .iter()
            .find(|(u, _)| u.eq_ignore_ascii_case(unit))
            .map(|(_, s)| *s)
            .ok_or_else(|| format!("unknown unit `{unit}` in `{t}`: expected B, KiB, MiB or GiB"))?
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("`{t}` is too large"))
}

/// Bytes in the largest unit that keeps a whole or one-decimal number:
/// `8 MiB`, `1.5 KiB`, `17 B`.
pub(crate) fn format_bytes(n: u64) -> String {
    for (unit, scale) in UNITS {
        if n >= scale {
            #[expect(clippy::cast_precision_loss, reason = "shown to one decimal")]
            let v = n as f64 / scale as f64;
            return if n.is_multiple_of(scale) {
                format!("{} {unit}", n / scale)
            } else {
                format!("{v:.1} {unit}")
            };
        }
    }
    "0 B".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A moment an imported record says is shown, never a panic: before
    /// the epoch and past the year 9999 as the number.
    #[test]
    fn any_moment_is_shown() {
        assert_eq!(format_unix(1_796_357_240), "2026-12-04T04:07:20Z");
        assert_eq!(format_unix(-5), "-5");
        assert_eq!(format_unix(i64::MAX), i64::MAX.to_string());
    }

    #[test]
    fn durations_parse_in_one_grammar() {
        let secs = |t: &str| parse_duration(t).unwrap().as_secs_f64();
        assert!((secs("1.5s") - 1.5).abs() < 1e-12);
        assert!((secs("250ms") - 0.25).abs() < 1e-12);
        assert!((secs("800us") - 0.0008).abs() < 1e-12);
        assert!((secs("10m") - 600.0).abs() < 1e-9);
        assert!((secs("2min") - 120.0).abs() < 1e-9);
        assert!((secs("1h 30m") - 5400.0).abs() < 1e-9);
        assert!(parse_duration("2").unwrap_err().contains("no unit"));
        assert!(
            parse_duration("2d")
                .unwrap_err()
                .contains("unknown unit `d`")
        );
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .contains("does not start with a number")
        );
        assert_eq!(format_secs(2.0), "2.000s");
        assert_eq!(format_secs(0.0456), "45.60ms");
        assert_eq!(format_secs(0.000_789), "789us");
    }

    #[test]
    fn sizes_round_trip() {
        assert_eq!(parse_bytes("8MiB"), Ok(8 << 20));
        assert_eq!(parse_bytes("512 KiB"), Ok(512 << 10));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(
            parse_bytes("8 MB")
                .unwrap_err()
                .contains("unknown unit `MB`")
        );
        assert!(parse_bytes("lots").is_err());
        assert!(
            parse_bytes("99999999999 GiB")
                .unwrap_err()
                .contains("too large")
        );
        assert_eq!(format_bytes(8 << 20), "8 MiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(17), "17 B");
        assert_eq!(format_bytes(0), "0 B");
    }
}
