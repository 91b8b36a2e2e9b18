//! The timing error of a row against the stamped simulator's own stamps:
//! each answer's TTFT against the server's, and each gap between tokens
//! against the gap between their send stamps, with their quantiles.

use crate::load::runner::Sample as Answer;
use crate::units::format_secs;

/// The timing error of a row, from the answers kept whole.
#[derive(Default)]
pub(super) struct Truth {
    pub(super) ttft: Vec<f64>,
    /// The server's TTFT: first token sent − request read.
    pub(super) ttft_true: Vec<f64>,
    pub(super) ttft_err: Vec<f64>,
    /// Where the error goes: the request waiting in the server's socket
    /// (its last bytes' arrival → read), and the rest, outside the
    /// server: the client's write, the wire both ways, the client's
    /// stamping (measured TTFT − (first token sent − request arrived)).
    pub(super) queue: Vec<f64>,
    pub(super) outside: Vec<f64>,
    /// The client's write of the request (sent → written).
    pub(super) write: Vec<f64>,
    pub(super) itl: Vec<f64>,
    pub(super) itl_true: Vec<f64>,
    pub(super) itl_err: Vec<f64>,
    /// Answers whose stamps did not match their tokens.
    pub(super) unreadable: u64,
}

/// Microseconds since the epoch, as the simulator wrote them.
fn micros(word: &str) -> Option<f64> {
    word.parse::<f64>().ok().map(|us| us / 1e6)
}

impl Truth {
    pub(super) fn add(&mut self, a: &Answer) {
        let words: Vec<&str> = a.content.split_whitespace().collect();
        let first: Vec<Option<f64>> = words
            .first()
            .map(|w| w.split(':').map(micros).collect())
            .unwrap_or_default();
        let marks = &a.timing.marks;
        let (&[Some(arrived), Some(read), Some(sent)], Some(measured)) =
            (first.as_slice(), a.timing.first_token)
        else {
            self.unreadable += 1;
            return;
        };
        let mut stamps = vec![sent];
        stamps.extend(words[1..].iter().filter_map(|w| micros(w)));
        if stamps.len() != marks.len() {
            self.unreadable += 1;
            return;
        }
        let (measured, truth) = (measured.as_secs_f64(), sent - read);
        self.ttft.push(measured);
        self.ttft_true.push(truth);
        self.ttft_err.push((measured - truth).abs());
        self.queue.push(read - arrived);
        self.outside.push(measured - (sent - arrived));
        if let Some(w) = a.timing.written {
            self.write.push(w.as_secs_f64());
        }
        for (m, s) in marks.windows(2).zip(stamps.windows(2)) {
            let measured = m[1].at.saturating_sub(m[0].at).as_secs_f64();
            let truth = s[1] - s[0];
            self.itl.push(measured);
            self.itl_true.push(truth);
            self.itl_err.push((measured - truth).abs());
        }
    }
}

/// The `q` quantile of `values` (nearest rank), or NaN for none.
pub(super) fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short list"
    )]
    let i = ((q * v.len() as f64).ceil() as usize).saturating_sub(1);
    v.get(i).copied().unwrap_or(f64::NAN)
}

pub(super) fn p99(values: &[f64]) -> String {
    let v = quantile(values, 0.99);
    if v.is_nan() {
        "-".into()
    } else {
        format_secs(v)
    }
}
