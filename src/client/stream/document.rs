//! A server's JSON document (`/get_server_info`, `/v1/models`), parsed
//! only when it is small enough.

/// The most values (keys, elements, members) a server's JSON document may
/// hold to be parsed. SGLang 0.5.23's `/get_server_info` holds a few
/// hundred (its server arguments, each rank's internal state); a parsed
/// tree costs ~40× its text in small values (a 4 MiB body of 250,000
/// keys took ~170 MiB).
pub const DOCUMENT_VALUES: usize = 100_000;

/// A server's JSON document, parsed when it holds at most
/// [`DOCUMENT_VALUES`] values; the error says why not.
pub fn document(text: &str) -> Result<serde_json::Value, String> {
    let values = json_values(text.as_bytes());
    if values > DOCUMENT_VALUES {
        return Err(format!(
            "a document of about {values} JSON values, more than servegate parses ({DOCUMENT_VALUES}): not parsed"
        ));
    }
    serde_json::from_str(text).map_err(|e| format!("a body that is not JSON ({e})"))
}

/// About how many values a JSON text holds, counted without parsing it:
/// one, and one more for each `,`, `:` and `[` outside strings.
fn json_values(text: &[u8]) -> usize {
    let (mut values, mut in_string, mut escaped) = (1, false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b',' | b':' | b'[' => values += 1,
                _ => {}
            }
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_counted_outside_strings_only() {
        assert_eq!(json_values(br#"{"a":1,"b":[2,3]}"#), 6);
        assert_eq!(json_values(br#"{"a, b: [c":"d\", e: ["}"#), 2);
        assert!(document(&format!("[{}0]", "0,".repeat(DOCUMENT_VALUES))).is_err());
        assert!(document(&format!("[{}0]", "0,".repeat(DOCUMENT_VALUES - 2))).is_ok());
    }
}
