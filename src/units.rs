//! Sizes in bytes as suites write them (`8 MiB`) and as messages show them.

/// Binary units, largest first.
const UNITS: [(&str, u64); 4] = [
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("B", 1),
];

/// `8MiB`, `512 KiB`, `1GiB`, `4096` (bytes) → bytes.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
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
pub fn format_bytes(n: u64) -> String {
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
