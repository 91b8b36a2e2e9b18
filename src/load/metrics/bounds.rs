//! How far the client can have moved each figure's samples: the
//! self-check's evidence.

use crate::load::distribution::Distribution;
use crate::suite::metric::Metric;

/// Each figure's samples moved as far as the client can have moved them
/// (the self-check's evidence): the true value of every sample lies
/// between its `lo` and `hi`, so every statistic's true value lies between
/// that statistic of the two ([`crate::load::selfcheck`]). Figures the
/// client can only have inflated keep a `lo`, those it can only have
/// deflated a `hi`.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// TTFT less its client error (the send, a late wake, a first token
    /// read with a later one).
    pub ttft_lo: Distribution,
    /// TTFT to content, the same way.
    pub ttft_content_lo: Distribution,
    /// TTFT from the request's write, less a first token read with a
    /// later one.
    pub ttft_from_send_lo: Distribution,
    /// E2E less the send and a late wake.
    pub e2e_lo: Distribution,
    /// Each ITL gap less the error of its later end, and plus that of its
    /// earlier one.
    pub itl_lo: Distribution,
    /// See `itl_lo`.
    pub itl_hi: Distribution,
    /// The same of each whole chunk gap (`itl_chunk`).
    pub itl_chunk_lo: Distribution,
    /// See `itl_chunk_lo`.
    pub itl_chunk_hi: Distribution,
    /// TPOT with the first token as early as it can have come.
    pub tpot_hi: Distribution,
    /// The decode rate the same way.
    pub decode_tok_s_lo: Distribution,
    /// Token chunks read together with a later one, and all of them.
    pub merged: u64,
    /// See `merged`.
    pub marks: u64,
    /// Requests whose arrivals were not dated where bytes came off the
    /// socket (`https://`): no figure of them is bounded.
    pub unstamped: u64,
    /// Requests that met every SLO of the gate however the client moved
    /// them, and those that met them had it moved them as far as it can:
    /// the true number of requests within the SLOs lies between.
    pub slo_surely: u64,
    /// See `slo_surely`.
    pub slo_maybe: u64,
}

impl Bounds {
    pub(super) fn new() -> Self {
        Self {
            ttft_lo: Distribution::seconds(),
            ttft_content_lo: Distribution::seconds(),
            ttft_from_send_lo: Distribution::seconds(),
            e2e_lo: Distribution::seconds(),
            itl_lo: Distribution::seconds(),
            itl_hi: Distribution::seconds(),
            itl_chunk_lo: Distribution::seconds(),
            itl_chunk_hi: Distribution::seconds(),
            tpot_hi: Distribution::seconds(),
            decode_tok_s_lo: Distribution::rate(),
            merged: 0,
            marks: 0,
            unstamped: 0,
            slo_surely: 0,
            slo_maybe: 0,
        }
    }

    pub(super) fn merge(&mut self, other: &Bounds) {
        self.ttft_lo.merge(&other.ttft_lo);
        self.ttft_content_lo.merge(&other.ttft_content_lo);
        self.ttft_from_send_lo.merge(&other.ttft_from_send_lo);
        self.e2e_lo.merge(&other.e2e_lo);
        self.itl_lo.merge(&other.itl_lo);
        self.itl_hi.merge(&other.itl_hi);
        self.itl_chunk_lo.merge(&other.itl_chunk_lo);
        self.itl_chunk_hi.merge(&other.itl_chunk_hi);
        self.tpot_hi.merge(&other.tpot_hi);
        self.decode_tok_s_lo.merge(&other.decode_tok_s_lo);
        self.merged += other.merged;
        self.marks += other.marks;
        self.unstamped += other.unstamped;
        self.slo_surely += other.slo_surely;
        self.slo_maybe += other.slo_maybe;
    }

    /// The (low, high) samples of `metric`, where the client can move it.
    pub(super) fn of(
        &self,
        metric: Metric,
    ) -> Option<(Option<&Distribution>, Option<&Distribution>)> {
        Some(match metric {
            Metric::Ttft => (Some(&self.ttft_lo), None),
            Metric::TtftContent => (Some(&self.ttft_content_lo), None),
            Metric::TtftFromSend => (Some(&self.ttft_from_send_lo), None),
            // The client's own part of a connect (its wake for the
            // accept) is in it, and no stamp tells how much.
            Metric::Connect => (None, None),
            Metric::E2e => (Some(&self.e2e_lo), None),
            Metric::Itl => (Some(&self.itl_lo), Some(&self.itl_hi)),
            Metric::ItlChunk => (Some(&self.itl_chunk_lo), Some(&self.itl_chunk_hi)),
            Metric::Tpot => (None, Some(&self.tpot_hi)),
            Metric::DecodeTokS => (Some(&self.decode_tok_s_lo), None),
            _ => return None,
        })
    }
}
