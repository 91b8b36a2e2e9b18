//! A gate's thresholds in the record: each one's line as printed and its
//! verdict as data, which renders that line.

use serde::{Deserialize, Serialize};

use crate::suite::metric::{MetricKey, Unit, format_value};
use crate::suite::threshold::Op;

/// One threshold of a gate and its verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThresholdRecord {
    /// The threshold with its bound and what was measured, as the
    /// terminal prints it (`decode_tok_s.mean >= 12.5 tok/s (measured
    /// 500.1 tok/s)`).
    pub check: String,
    /// Whether it held.
    pub passed: bool,
    /// The threshold as data (absent for the client self-check's row,
    /// and in records written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<ThresholdVerdict>,
}

/// A threshold's verdict as data: what was compared, how, against what,
/// what was measured, and where the threshold is written. Written with its
/// figure's unit (`unit`: `s`, `tok/s`, `req/s`, `%`, `tokens`, or empty
/// for a count or a share), which its key decides and readers need not
/// look up; read back from its key.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ThresholdVerdict {
    /// The figure, as a suite names it: `ttft.p99`.
    pub key: MetricKey,
    /// The comparison, written as in the suite: `>=`, `>`, `<=`, `<`,
    /// `==`, `!=`.
    #[serde(deserialize_with = "op_symbol")]
    pub op: Op,
    /// The bound the figure was held to, in the figure's unit; absent
    /// when a relative bound had no reference (then it cannot pass).
    pub bound: Option<f64>,
    /// What a relative bound was made from (a baseline's or a variant's
    /// figure), in the figure's unit.
    #[serde(default)]
    pub reference: Option<f64>,
    /// The figure judged, combined over repeats as its metric says (the
    /// mean; the total for a count such as `errors`); absent when nothing
    /// measured it.
    pub measured: Option<f64>,
    /// Each repeat's figure, when the gate repeated.
    #[serde(default)]
    pub repeats: Vec<f64>,
    /// The 1-based line of the suite file it is written at (the gate's
    /// own for the implicit error bound).
    pub line: u32,
    /// The `errors == 0` a gate gets when it states no error bound.
    #[serde(default)]
    pub implicit: bool,
    /// Why it was not applied, when it was not (it then passes).
    #[serde(default)]
    pub not_applied: Option<String>,
    /// The most the client can have moved the figure, by its self-check
    /// (the largest over repeats), in the figure's unit; absent where
    /// nothing bounds it or the self-check does not gate the figure.
    #[serde(default)]
    pub client_error: Option<f64>,
    /// The bound as servegate writes the threshold back: a value in the
    /// figure's unit, or how a relative bound is made (`baseline * 1.1`,
    /// `variant(base)`, `history.median(10)`, `no_regression`); empty in
    /// records written before it.
    #[serde(default)]
    pub written: String,
    /// What a relative bound was made from, in words (`baseline`,
    /// ``variant `base`'s``, the history's own words), where it was.
    #[serde(default)]
    pub reference_from: Option<String>,
}

impl ThresholdVerdict {
    /// The unit of `bound`, `reference` and `measured`: the figure's.
    pub fn unit(&self) -> Unit {
        self.key.metric.spec().unit
    }

    /// ` = 2.1 s from baseline 1.9 s`: how a relative bound was made;
    /// empty for a fixed bound, or one that had no reference.
    pub fn against(&self) -> String {
        let m = self.key.metric;
        match (&self.reference_from, self.reference, self.bound) {
            (Some(from), Some(r), Some(b)) => format!(
                " = {} from {from} {}",
                format_value(m, b),
                format_value(m, r)
            ),
            _ => String::new(),
        }
    }

    /// What was measured, in words: the figure, and over repeats its
    /// spread and 95% interval; `nothing` when nothing measured it.
    pub(crate) fn measured_text(&self) -> String {
        let Some(measured) = self.measured else {
            return "nothing".to_owned();
        };
        let estimate = if self.repeats.len() > 1 {
            crate::load::estimate::combine(self.key.metric, self.repeats.clone())
        } else {
            crate::load::estimate::Estimate::of(vec![measured])
        };
        crate::load::estimate::describe(self.key, &estimate)
    }
}

/// The threshold's line as the terminal and the reports print it: the
/// threshold as written, how a relative bound was made, what was measured
/// (`decode_tok_s.mean >= 12.5 tok/s (measured 500.1 tok/s)`), or why it
/// was not applied.
impl std::fmt::Display for ThresholdVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ", self.key, self.op.symbol())?;
        match (self.written.is_empty(), self.bound) {
            (false, _) => f.write_str(&self.written)?,
            (true, Some(b)) => f.write_str(&format_value(self.key.metric, b))?,
            (true, None) => f.write_str("?")?,
        }
        match &self.not_applied {
            Some(why) => write!(f, " (not applied: {why})"),
            None => write!(f, "{} (measured {})", self.against(), self.measured_text()),
        }
    }
}

impl Serialize for ThresholdVerdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut out = s.serialize_struct("ThresholdVerdict", 13)?;
        out.serialize_field("key", &self.key)?;
        out.serialize_field("op", self.op.symbol())?;
        out.serialize_field("bound", &self.bound)?;
        match self.reference {
            Some(r) => out.serialize_field("reference", &r)?,
            None => out.skip_field("reference")?,
        }
        out.serialize_field("measured", &self.measured)?;
        if self.repeats.is_empty() {
            out.skip_field("repeats")?;
        } else {
            out.serialize_field("repeats", &self.repeats)?;
        }
        out.serialize_field("unit", self.key.metric.unit())?;
        out.serialize_field("line", &self.line)?;
        out.serialize_field("implicit", &self.implicit)?;
        match &self.not_applied {
            Some(why) => out.serialize_field("not_applied", why)?,
            None => out.skip_field("not_applied")?,
        }
        match self.client_error {
            Some(e) => out.serialize_field("client_error", &e)?,
            None => out.skip_field("client_error")?,
        }
        if self.written.is_empty() {
            out.skip_field("written")?;
        } else {
            out.serialize_field("written", &self.written)?;
        }
        match &self.reference_from {
            Some(from) => out.serialize_field("reference_from", from)?,
            None => out.skip_field("reference_from")?,
        }
        out.end()
    }
}

/// An operator as a record writes it (`>=`); any other text is an error
/// that names the ones there are.
fn op_symbol<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Op, D::Error> {
    let text = String::deserialize(d)?;
    Op::ALL
        .into_iter()
        .find(|op| op.symbol() == text)
        .ok_or_else(|| {
            let known: Vec<&str> = Op::ALL.iter().map(|op| op.symbol()).collect();
            serde::de::Error::custom(format!(
                "unknown operator `{text}` (one of {})",
                known.join(" ")
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A verdict renders the threshold's line: as written, how a relative
    /// bound was made, what was measured over the repeats; or why it was
    /// not applied.
    #[test]
    fn a_verdict_renders_its_line() {
        let v = ThresholdVerdict {
            key: "ttft.p99".parse().expect("a key"),
            op: Op::Le,
            bound: Some(0.22),
            reference: Some(0.2),
            measured: Some(0.25),
            repeats: vec![0.24, 0.25, 0.26],
            line: 9,
            implicit: false,
            not_applied: None,
            client_error: None,
            written: "baseline * 1.1".into(),
            reference_from: Some("baseline".into()),
        };
        assert_eq!(
            v.to_string(),
            "ttft.p99 <= baseline * 1.1 = 220.00ms from baseline 200.00ms (measured 250.00ms ± 10.00ms (95% CI 225.16ms … 274.84ms, 3 repeats))"
        );
        let not_applied = ThresholdVerdict {
            bound: None,
            reference: None,
            measured: None,
            repeats: Vec::new(),
            not_applied: Some("`baseline save` records this run's figures".into()),
            ..v
        };
        assert_eq!(
            not_applied.to_string(),
            "ttft.p99 <= baseline * 1.1 (not applied: `baseline save` records this run's figures)"
        );
    }

    /// A verdict is written with its operator as in the suite and its
    /// figure's unit, and read back typed; an operator no suite can write
    /// is an error naming those there are.
    #[test]
    fn a_verdict_writes_its_operator_and_unit_and_reads_back_typed() {
        let v = ThresholdVerdict {
            key: "spec_accept_length.mean".parse().expect("a key"),
            op: Op::Ne,
            bound: Some(64.0),
            reference: None,
            measured: Some(64.0),
            repeats: Vec::new(),
            line: 9,
            implicit: false,
            not_applied: None,
            client_error: Some(0.000_2),
            written: "64.00 tokens".into(),
            reference_from: None,
        };
        let text = serde_json::to_string(&v).expect("written");
        assert_eq!(
            text,
            r#"{"key":"spec_accept_length.mean","op":"!=","bound":64.0,"measured":64.0,"unit":"tokens","line":9,"implicit":false,"client_error":0.0002,"written":"64.00 tokens"}"#
        );
        let back: ThresholdVerdict = serde_json::from_str(&text).expect("read back");
        assert_eq!((back.op, back.unit()), (Op::Ne, Unit::Tokens));
        assert_eq!(back, v);
        let bad = text.replace("!=", "=~");
        let e = serde_json::from_str::<ThresholdVerdict>(&bad).expect_err("not an operator");
        assert!(
            e.to_string()
                .contains("unknown operator `=~` (one of >= > <= < == !=)"),
            "{e}"
        );
    }
}
