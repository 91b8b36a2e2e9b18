//! Numerics probes: the server's log-probabilities of a fixed text's tokens
//! against a known-good configuration's mean. A wrong attention backend,
//! a broken kernel or a bad quantization still writes fluent words that
//! answer checks may pass; it cannot score text it did not write as the
//! model does.

use crate::suite::Numerics;

/// What a scoring measured: the mean token log-probability and the tokens
/// behind it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// The mean, nats per token.
    pub mean: f64,
    /// Tokens scored (the first, which nothing predicts, left out).
    pub tokens: usize,
}

/// Why a numerics probe failed: its `error:` line and what stands under it.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed {
    /// The `error:` line.
    pub error: String,
    /// The lines under it.
    pub detail: String,
}

/// The largest log-probability taken as at most 0: a server's float
/// rounding may put a certain token a hair above.
const ABOVE_ZERO: f64 = 1e-4;

/// Judges a server's log-probabilities of `n.text`'s tokens.
pub fn judge(n: &Numerics, logprobs: &[f64]) -> Result<Scored, Failed> {
    let fail = |error: String, detail: String| Failed { error, detail };
    if logprobs.is_empty() {
        return Err(fail(
            "the server scored no token of the text but its first".to_owned(),
            "expected: the log-probability of every token after the first; a longer `numerics.text`\n".to_owned(),
        ));
    }
    if let Some((i, v)) = logprobs
        .iter()
        .enumerate()
        .find(|(_, v)| !v.is_finite() || **v > ABOVE_ZERO)
    {
        let what = if v.is_nan() {
            "NaN: its numbers are broken (NaN logits)".to_owned()
        } else if v.is_infinite() && *v < 0.0 {
            "-inf: a probability of 0 for text it was given (broken logits)".to_owned()
        } else {
            format!("{v}: a log-probability is at most 0")
        };
        return Err(fail(
            format!("the server scored token {} of the text as {what}", i + 1),
            format!(
                "found:    {} token log-probabilities, token {} {v}\n",
                logprobs.len(),
                i + 1
            ),
        ));
    }
    #[expect(clippy::cast_precision_loss, reason = "token counts are small")]
    let mean = logprobs.iter().sum::<f64>() / logprobs.len() as f64;
    let scored = Scored {
        mean,
        tokens: logprobs.len(),
    };
    let measured = format!(
        "measured: mean token log-probability {mean:.4} over {} tokens\n",
        logprobs.len()
    );
    match n.mean_logprob {
        None => Err(fail(
            "numerics probe has no reference: `numerics.mean_logprob` is not set".to_owned(),
            format!(
                "{measured}expected: the mean a known-good configuration of this model measures; if this server is one, set `mean_logprob: {mean:.4}`\n"
            ),
        )),
        Some(want) if (mean - want).abs() > n.within => Err(fail(
            format!(
                "numerics changed: mean token log-probability {mean:.4}, a known-good configuration's {want} ± {}",
                n.within
            ),
            format!(
                "{measured}expected: {want} ± {} (`numerics.mean_logprob`, `within`), {:+.4} off\n          the server scores text it did not write otherwise than the model does: a wrong attention backend, kernel or quantization, whatever words it writes\n",
                n.within,
                mean - want
            ),
        )),
        Some(_) => Ok(scored),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(mean_logprob: Option<f64>) -> Numerics {
        Numerics {
            text: "t".into(),
            mean_logprob,
            within: 0.1,
        }
    }

    /// Within the tolerance passes; beyond it, no reference, no token, a
    /// NaN or a positive log-probability fails, each saying why.
    #[test]
    fn a_mean_is_judged_against_the_known_good_one() {
        let good = [-11.77, -0.32, -2.43, -0.43, -0.28, -0.39];
        let scored = judge(&probe(Some(-2.6)), &good).unwrap();
        assert_eq!(scored.tokens, 6);
        assert!((scored.mean - (-2.603_333)).abs() < 1e-4, "{scored:?}");
        let off = judge(&probe(Some(-1.5)), &good).unwrap_err();
        assert!(off.error.starts_with("numerics changed: mean token log-probability -2.6033, a known-good configuration's -1.5 ± 0.1"), "{off:?}");
        assert!(off.detail.contains("-1.1033 off"), "{off:?}");
        let none = judge(&probe(None), &good).unwrap_err();
        assert!(
            none.detail.contains("set `mean_logprob: -2.6033`"),
            "{none:?}"
        );
        assert!(judge(&probe(Some(-2.6)), &[]).is_err());
        let nan = judge(&probe(Some(-2.6)), &[-1.0, f64::NAN]).unwrap_err();
        assert!(nan.error.contains("token 2 of the text as NaN"), "{nan:?}");
        let positive = judge(&probe(Some(-2.6)), &[-1.0, 0.5]).unwrap_err();
        assert!(
            positive
                .error
                .contains("as 0.5: a log-probability is at most 0"),
            "{positive:?}"
        );
        assert!(judge(&probe(Some(0.0)), &[0.00001]).is_ok());
    }
}
