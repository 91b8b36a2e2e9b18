//! One worker's record of its requests: HDR histograms and counts, no
//! per-request storage, merged once the window closes.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Bounds, GateMetrics, ServerReports};
use crate::client::dialect::ServerTimings;
use crate::client::{CallError, Completion, TokenSource};
use crate::load::distribution::Distribution;
use crate::load::selfcheck::ClientCheck;
use crate::suite::Slo;

/// Most points of latency over time kept per gate.
pub const SERIES_MAX: usize = 5000;

/// One worker's record of its requests.
#[derive(Debug, Clone)]
pub struct Recorder {
    ttft: Distribution,
    ttft_content: Distribution,
    ttft_from_send: Distribution,
    connect: Distribution,
    itl: Distribution,
    itl_chunk: Distribution,
    tpot: Distribution,
    e2e: Distribution,
    decode_tok_s: Distribution,
    server_decode_tok_s: Distribution,
    server_prompt: Distribution,
    server_ttft: Distribution,
    server_e2e: Distribution,
    server_queue: Distribution,
    reported: ServerReports,
    completed: u64,
    output_tokens: u64,
    input_tokens: u64,
    input_reported: u64,
    good_requests: u64,
    good_tokens: u64,
    late_starts: u64,
    preopened: u64,
    usage_tokens: u64,
    chunk_tokens: u64,
    /// Failed requests, by class; only the first few kept in words: a
    /// failing gate keeps what its message needs, not every error.
    errors: u64,
    error_classes: BTreeMap<&'static str, u64>,
    abandoned: u64,
    first_errors: Vec<(&'static str, String)>,
    token_sources: BTreeMap<&'static str, u64>,
    slo: Slo,
    /// When each request finished, with its TTFT and E2E (seconds), for
    /// latency over time; at most [`SERIES_MAX`] points.
    series: Vec<(std::time::Instant, f32, f32)>,
    bounds: Bounds,
}

/// A request's figures as far as the client can have moved them.
struct Moved {
    ttft_lo: f64,
    e2e_lo: f64,
    tpot_hi: Option<f64>,
}

/// Start later than this after the intended time and a request counts as
/// late. Above tokio's 1 ms timer resolution; latency counts from the
/// intended start either way, so the threshold only decides what is reported.
pub const LATE_START: Duration = Duration::from_millis(5);

impl Recorder {
    /// An empty record; `slo` decides what counts as goodput.
    pub fn new(slo: Slo) -> Self {
        Self {
            ttft: Distribution::seconds(),
            ttft_content: Distribution::seconds(),
            ttft_from_send: Distribution::seconds(),
            connect: Distribution::seconds(),
            itl: Distribution::seconds(),
            itl_chunk: Distribution::seconds(),
            tpot: Distribution::seconds(),
            e2e: Distribution::seconds(),
            decode_tok_s: Distribution::rate(),
            server_decode_tok_s: Distribution::rate(),
            server_prompt: Distribution::seconds(),
            server_ttft: Distribution::seconds(),
            server_e2e: Distribution::seconds(),
            server_queue: Distribution::seconds(),
            reported: ServerReports::default(),
            completed: 0,
            output_tokens: 0,
            input_tokens: 0,
            input_reported: 0,
            good_requests: 0,
            good_tokens: 0,
            late_starts: 0,
            preopened: 0,
            series: Vec::new(),
            usage_tokens: 0,
            chunk_tokens: 0,
            errors: 0,
            error_classes: BTreeMap::new(),
            abandoned: 0,
            first_errors: Vec::new(),
            token_sources: BTreeMap::new(),
            slo,
            bounds: Bounds::new(),
        }
    }

    /// Records a successful request that was sent `late` after its intended
    /// start (zero in a closed loop), `own` of it the client's own late
    /// wake: TTFT and E2E count from the intended start, so a stalled
    /// server cannot hide behind a stalled client.
    pub fn record(&mut self, c: &Completion, late: Duration, own: Duration) {
        let moved = self.bound(c, late, own);
        let t = &c.timing;
        if late > LATE_START {
            self.late_starts += 1;
        }
        let first = t.first_token.unwrap_or(t.end);
        let ttft = (late + first).as_secs_f64();
        let e2e = (late + t.end).as_secs_f64();
        self.ttft.record(ttft);
        if let Some(fc) = t.first_content {
            self.ttft_content.record((late + fc).as_secs_f64());
        }
        if let Some(w) = t.written {
            self.ttft_from_send
                .record(first.saturating_sub(w).as_secs_f64());
        }
        if let Some(c) = t.connect {
            self.connect.record(c.as_secs_f64());
        }
        self.e2e.record(e2e);
        if self.series.len() < SERIES_MAX {
            #[expect(clippy::cast_possible_truncation, reason = "plot points")]
            self.series
                .push((std::time::Instant::now(), ttft as f32, e2e as f32));
        }
        // Counts come from the server: every sum saturates, never wraps.
        self.completed += 1;
        self.output_tokens = self.output_tokens.saturating_add(c.completion_tokens);
        if let Some(p) = c.usage.and_then(|u| u.prompt_tokens) {
            self.input_tokens = self.input_tokens.saturating_add(p);
            self.input_reported += 1;
        }
        *self.token_sources.entry(c.count_source()).or_insert(0) += 1;
        if c.token_source != TokenSource::ChunkCount {
            self.usage_tokens = self.usage_tokens.saturating_add(c.completion_tokens);
            // What the chunks carried, each at most its text's bytes and
            // one more (`StreamReader::event_of`): never the server's own
            // count per chunk, which would agree with itself.
            let chunked = t
                .marks
                .iter()
                .fold(0u64, |n, m| n.saturating_add(u64::from(m.tokens)));
            self.chunk_tokens = self.chunk_tokens.saturating_add(chunked);
        }
        let decode_secs = t.end.saturating_sub(first).as_secs_f64();
        let mut tpot = None;
        // Tokens that all arrived with the first took no time per token
        // after it; their rate has no figure.
        if c.completion_tokens > 1 {
            #[expect(clippy::cast_precision_loss, reason = "token counts are small")]
            let after_first = (c.completion_tokens - 1) as f64;
            tpot = Some(decode_secs / after_first);
            self.tpot.record(decode_secs / after_first);
            if decode_secs > 0.0 {
                self.decode_tok_s.record(after_first / decode_secs);
            }
        }
        match c.server_timings {
            Some(ServerTimings::LlamaCpp {
                prompt_ms,
                predicted_n,
                predicted_ms,
                ..
            }) => {
                self.server_prompt.record(prompt_ms / 1000.0);
                if predicted_ms > 0.0 {
                    #[expect(clippy::cast_precision_loss, reason = "token counts are small")]
                    self.server_decode_tok_s
                        .record(predicted_n as f64 * 1000.0 / predicted_ms);
                }
            }
            Some(ServerTimings::Sglang {
                e2e_s,
                ttft_s,
                queue_s,
                decode_tok_s,
            }) => {
                self.server_e2e.record(e2e_s);
                for (d, v) in [
                    (&mut self.server_ttft, ttft_s),
                    (&mut self.server_queue, queue_s),
                    (&mut self.server_decode_tok_s, decode_tok_s),
                ] {
                    if let Some(v) = v {
                        d.record(v);
                    }
                }
            }
            None => {}
        }
        self.reported.record(c);
        // A chunk of k tokens contributes k gaps of gap/k to `itl`, one
        // whole gap to `itl_chunk`.
        for pair in t.marks.windows(2) {
            let gap = pair[1].at.saturating_sub(pair[0].at).as_secs_f64();
            let k = pair[1].tokens.max(1);
            self.itl.record_n(gap / f64::from(k), u64::from(k));
            self.itl_chunk.record(gap);
        }
        let slo = self.slo;
        let met = |ttft: f64, e2e: f64, tpot: Option<f64>| {
            let within =
                |limit: Option<Duration>, v: f64| limit.is_none_or(|l| v <= l.as_secs_f64());
            within(slo.ttft, ttft)
                && within(slo.e2e, e2e)
                && (slo.tpot.is_none() || tpot.is_some_and(|v| within(slo.tpot, v)))
        };
        if met(ttft, e2e, tpot) {
            self.good_requests += 1;
            self.good_tokens = self.good_tokens.saturating_add(c.completion_tokens);
        }
        // The client can have made the TTFT and E2E longer and the TPOT
        // shorter than the server's: a request within the SLOs at the
        // measured TTFT and E2E and the longest TPOT surely met them; one
        // within them at the shortest TTFT and E2E and the measured TPOT
        // may have.
        self.bounds.slo_surely += u64::from(met(ttft, e2e, moved.tpot_hi.or(tpot)));
        self.bounds.slo_maybe += u64::from(met(moved.ttft_lo, moved.e2e_lo, tpot));
    }

    /// Records how far the client can have moved each sample of `c`; its
    /// TTFT and E2E as short, and its TPOT as long, as they can have been.
    fn bound(&mut self, c: &Completion, late: Duration, own: Duration) -> Moved {
        let t = &c.timing;
        let secs = Duration::as_secs_f64;
        // The send: from taking the start to the request written, less
        // the part of a connect that is surely not the client's (until its
        // thread's last wake: a slow accept queue, the network); and a late
        // wake of its own.
        let send = t.written.map_or(Duration::ZERO, |w| {
            w.saturating_sub(t.connected.unwrap_or_default())
        }) + own;
        let early = |at: Option<Duration>| {
            at.and_then(|at| t.marks.iter().find(|m| m.at == at))
                .map_or(Duration::ZERO, crate::client::TokenMark::early)
        };
        let first = t.first_token.unwrap_or(t.end);
        let b = &mut self.bounds;
        let mut moved = Moved {
            ttft_lo: secs(&(late + first).saturating_sub(send + early(t.first_token))),
            e2e_lo: secs(&(late + t.end).saturating_sub(send)),
            tpot_hi: None,
        };
        b.ttft_lo.record(moved.ttft_lo);
        if let Some(fc) = t.first_content {
            b.ttft_content_lo
                .record(secs(&(late + fc).saturating_sub(send + early(Some(fc)))));
        }
        if let Some(w) = t.written {
            b.ttft_from_send_lo.record(secs(
                &first.saturating_sub(w).saturating_sub(early(t.first_token)),
            ));
        }
        b.e2e_lo.record(moved.e2e_lo);
        if !t.stamped {
            b.unstamped += 1;
        }
        let decode = t.end.saturating_sub(first);
        if c.completion_tokens > 1 {
            #[expect(clippy::cast_precision_loss, reason = "token counts are small")]
            let after_first = (c.completion_tokens - 1) as f64;
            let longest = secs(&(decode + early(t.first_token)));
            moved.tpot_hi = Some(longest / after_first);
            b.tpot_hi.record(longest / after_first);
            if !decode.is_zero() {
                b.decode_tok_s_lo.record(after_first / longest);
            }
        }
        b.marks += t.marks.len() as u64;
        b.merged += t.marks.iter().filter(|m| m.early_us > 0).count() as u64;
        for pair in t.marks.windows(2) {
            let gap = pair[1].at.saturating_sub(pair[0].at);
            let k = pair[1].tokens.max(1);
            let lo = secs(&gap.saturating_sub(pair[1].early())) / f64::from(k);
            let hi = secs(&(gap + pair[0].early())) / f64::from(k);
            b.itl_lo.record_n(lo, u64::from(k));
            b.itl_hi.record_n(hi, u64::from(k));
            b.itl_chunk_lo.record(lo * f64::from(k));
            b.itl_chunk_hi.record(hi * f64::from(k));
        }
        moved
    }

    /// Records a failed request.
    pub fn fail(&mut self, e: &CallError) {
        self.errors += 1;
        *self.error_classes.entry(e.class()).or_insert(0) += 1;
        if e.abandoned() {
            self.abandoned += 1;
        }
        keep_error(&mut self.first_errors, e.class(), e.to_string());
    }

    /// Connections opened for the window before it began, each with how
    /// long it took: the gate's `connect`, beside those its requests opened.
    pub fn opened(&mut self, took: &[Duration]) {
        for t in took {
            self.connect.record(t.as_secs_f64());
        }
        self.preopened += took.len() as u64;
    }

    /// Adds another worker's record.
    pub fn merge(&mut self, other: Recorder) {
        self.ttft.merge(&other.ttft);
        self.ttft_content.merge(&other.ttft_content);
        self.ttft_from_send.merge(&other.ttft_from_send);
        self.connect.merge(&other.connect);
        self.itl.merge(&other.itl);
        self.itl_chunk.merge(&other.itl_chunk);
        self.tpot.merge(&other.tpot);
        self.e2e.merge(&other.e2e);
        self.decode_tok_s.merge(&other.decode_tok_s);
        self.server_decode_tok_s.merge(&other.server_decode_tok_s);
        self.server_prompt.merge(&other.server_prompt);
        self.server_ttft.merge(&other.server_ttft);
        self.server_e2e.merge(&other.server_e2e);
        self.server_queue.merge(&other.server_queue);
        self.reported.merge(&other.reported);
        self.completed += other.completed;
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.input_reported += other.input_reported;
        self.good_requests += other.good_requests;
        self.good_tokens = self.good_tokens.saturating_add(other.good_tokens);
        self.late_starts += other.late_starts;
        self.preopened += other.preopened;
        let room = SERIES_MAX.saturating_sub(self.series.len());
        self.series.extend(other.series.into_iter().take(room));
        self.usage_tokens = self.usage_tokens.saturating_add(other.usage_tokens);
        self.chunk_tokens = self.chunk_tokens.saturating_add(other.chunk_tokens);
        self.errors += other.errors;
        self.abandoned += other.abandoned;
        for (k, v) in other.error_classes {
            *self.error_classes.entry(k).or_insert(0) += v;
        }
        for (class, text) in other.first_errors {
            keep_error(&mut self.first_errors, class, text);
        }
        for (k, v) in other.token_sources {
            *self.token_sources.entry(k).or_insert(0) += v;
        }
        self.bounds.merge(&other.bounds);
    }

    /// The figures of a window of `wall` duration.
    pub fn finish(self, wall: Duration) -> GateMetrics {
        let mut points = self.series;
        points.sort_by_key(|p| p.0);
        let series = points.first().map_or_else(Vec::new, |&(t0, ..)| {
            points
                .iter()
                .map(|&(t, ttft, e2e)| {
                    (
                        t.duration_since(t0).as_secs_f64(),
                        f64::from(ttft),
                        f64::from(e2e),
                    )
                })
                .collect()
        });
        GateMetrics {
            stopped_early: None,
            client: ClientCheck::default(),
            series,
            ttft: self.ttft,
            ttft_content: self.ttft_content,
            ttft_from_send: self.ttft_from_send,
            connect: self.connect,
            itl: self.itl,
            itl_chunk: self.itl_chunk,
            tpot: self.tpot,
            e2e: self.e2e,
            decode_tok_s: self.decode_tok_s,
            server_decode_tok_s: self.server_decode_tok_s,
            server_prompt: self.server_prompt,
            server_ttft: self.server_ttft,
            server_e2e: self.server_e2e,
            server_queue: self.server_queue,
            completed: self.completed,
            errors: self.errors,
            error_classes: self.error_classes,
            abandoned: self.abandoned,
            first_errors: self.first_errors.into_iter().map(|(_, e)| e).collect(),
            output_tokens: self.output_tokens,
            input_tokens: (self.input_reported == self.completed && self.completed > 0)
                .then_some(self.input_tokens),
            good_requests: self.slo.is_set().then_some(self.good_requests),
            good_tokens: self.good_tokens,
            late_starts: self.late_starts,
            preopened: self.preopened,
            usage_tokens: self.usage_tokens,
            chunk_tokens: self.chunk_tokens,
            token_sources: self.token_sources,
            side_tokens: 0,
            unsolicited: 0,
            cache_unasked: None,
            reported: self.reported,
            server: Err("the server's /metrics was not read".to_owned()),
            wall,
            bounds: self.bounds,
        }
    }
}

/// Keep this many error messages for the failure text, and besides them
/// the first of each class: a gate whose requests failed two ways shows
/// both, whichever came first.
const KEEP_ERRORS: usize = 3;

/// Keeps an error's message where [`KEEP_ERRORS`] are not yet kept, or
/// none of its class is.
fn keep_error(kept: &mut Vec<(&'static str, String)>, class: &'static str, text: String) {
    if kept.len() < KEEP_ERRORS || kept.iter().all(|(c, _)| *c != class) {
        kept.push((class, text));
    }
}

#[cfg(test)]
mod tests {
    use super::keep_error;

    /// The first three errors are kept, and the first of a class that came
    /// after them: fifteen protocol errors do not hide an oversize one.
    #[test]
    fn the_first_error_of_each_class_is_kept() {
        let mut kept = Vec::new();
        for i in 0..15 {
            keep_error(&mut kept, "protocol", format!("p{i}"));
        }
        keep_error(&mut kept, "oversize", "o0".to_owned());
        keep_error(&mut kept, "oversize", "o1".to_owned());
        let texts: Vec<&str> = kept.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["p0", "p1", "p2", "o0"]);
    }
}
