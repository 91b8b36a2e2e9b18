//! Figures of a performance gate. Each load worker records its requests into
//! its own [`Recorder`] (HDR histograms, no per-request storage); the
//! recorders are merged once the window closes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::distribution::Distribution;
use super::prometheus::ServerView;
use super::selfcheck::{ClientCheck, FigureBound};
use crate::client::{CallError, Completion, TokenSource};
pub use crate::suite::Slo;
use crate::suite::metric::{Metric, MetricKey, Stat, format_value};
use crate::units::format_secs;

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
    tpot: Distribution,
    e2e: Distribution,
    decode_tok_s: Distribution,
    server_decode_tok_s: Distribution,
    server_prompt: Distribution,
    completed: u64,
    output_tokens: u64,
    input_tokens: u64,
    input_reported: u64,
    good_requests: u64,
    good_tokens: u64,
    late_starts: u64,
    usage_tokens: u64,
    chunk_tokens: u64,
    /// Failed requests, by class; only the first few kept in words: a
    /// failing gate keeps what its message needs, not every error.
    errors: u64,
    error_classes: BTreeMap<&'static str, u64>,
    first_errors: Vec<String>,
    token_sources: BTreeMap<&'static str, u64>,
    slo: Slo,
    /// When each request finished, with its TTFT and E2E (seconds), for
    /// latency over time; at most [`SERIES_MAX`] points.
    series: Vec<(std::time::Instant, f32, f32)>,
    bounds: Bounds,
}

/// Each figure's samples moved as far as the client can have moved them
/// (the self-check's evidence): the true value of every sample lies
/// between its `lo` and `hi`, so every statistic's true value lies between
/// that statistic of the two ([`super::selfcheck`]). Figures the client
/// can only have inflated keep a `lo`, those it can only have deflated a
/// `hi`.
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
}

impl Bounds {
    fn new() -> Self {
        Self {
            ttft_lo: Distribution::seconds(),
            ttft_content_lo: Distribution::seconds(),
            ttft_from_send_lo: Distribution::seconds(),
            e2e_lo: Distribution::seconds(),
            itl_lo: Distribution::seconds(),
            itl_hi: Distribution::seconds(),
            tpot_hi: Distribution::seconds(),
            decode_tok_s_lo: Distribution::rate(),
            merged: 0,
            marks: 0,
            unstamped: 0,
        }
    }

    fn merge(&mut self, other: &Bounds) {
        self.ttft_lo.merge(&other.ttft_lo);
        self.ttft_content_lo.merge(&other.ttft_content_lo);
        self.ttft_from_send_lo.merge(&other.ttft_from_send_lo);
        self.e2e_lo.merge(&other.e2e_lo);
        self.itl_lo.merge(&other.itl_lo);
        self.itl_hi.merge(&other.itl_hi);
        self.tpot_hi.merge(&other.tpot_hi);
        self.decode_tok_s_lo.merge(&other.decode_tok_s_lo);
        self.merged += other.merged;
        self.marks += other.marks;
        self.unstamped += other.unstamped;
    }

    /// The (low, high) samples of `metric`, where the client can move it.
    fn of(&self, metric: Metric) -> Option<(Option<&Distribution>, Option<&Distribution>)> {
        Some(match metric {
            Metric::Ttft => (Some(&self.ttft_lo), None),
            Metric::TtftContent => (Some(&self.ttft_content_lo), None),
            Metric::TtftFromSend => (Some(&self.ttft_from_send_lo), None),
            // The client's own part of a connect (its wake for the
            // accept) is in it, and no stamp tells how much.
            Metric::Connect => (None, None),
            Metric::E2e => (Some(&self.e2e_lo), None),
            Metric::Itl => (Some(&self.itl_lo), Some(&self.itl_hi)),
            Metric::Tpot => (None, Some(&self.tpot_hi)),
            Metric::DecodeTokS => (Some(&self.decode_tok_s_lo), None),
            _ => return None,
        })
    }
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
            tpot: Distribution::seconds(),
            e2e: Distribution::seconds(),
            decode_tok_s: Distribution::rate(),
            server_decode_tok_s: Distribution::rate(),
            server_prompt: Distribution::seconds(),
            completed: 0,
            output_tokens: 0,
            input_tokens: 0,
            input_reported: 0,
            good_requests: 0,
            good_tokens: 0,
            late_starts: 0,
            series: Vec::new(),
            usage_tokens: 0,
            chunk_tokens: 0,
            errors: 0,
            error_classes: BTreeMap::new(),
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
        self.bound(c, late, own);
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
        *self.token_sources.entry(c.token_source.name()).or_insert(0) += 1;
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
        if let Some(s) = c.server_timings {
            self.server_prompt.record(s.prompt_ms / 1000.0);
            if s.predicted_ms > 0.0 {
                #[expect(clippy::cast_precision_loss, reason = "token counts are small")]
                self.server_decode_tok_s
                    .record(s.predicted_n as f64 * 1000.0 / s.predicted_ms);
            }
        }
        // A chunk of k tokens contributes k gaps of gap/k.
        for pair in t.marks.windows(2) {
            let gap = pair[1].at.saturating_sub(pair[0].at).as_secs_f64();
            let k = pair[1].tokens.max(1);
            self.itl.record_n(gap / f64::from(k), u64::from(k));
        }
        let within = |limit: Option<Duration>, v: f64| limit.is_none_or(|l| v <= l.as_secs_f64());
        if within(self.slo.ttft, ttft)
            && within(self.slo.e2e, e2e)
            && (self.slo.tpot.is_none() || tpot.is_some_and(|v| within(self.slo.tpot, v)))
        {
            self.good_requests += 1;
            self.good_tokens = self.good_tokens.saturating_add(c.completion_tokens);
        }
    }

    /// Records how far the client can have moved each sample of `c`.
    fn bound(&mut self, c: &Completion, late: Duration, own: Duration) {
        let t = &c.timing;
        let secs = Duration::as_secs_f64;
        // The send: from taking the start to the request written, less
        // the connect (the server's accept); and a late wake of its own.
        let send = t.written.map_or(Duration::ZERO, |w| {
            w.saturating_sub(t.connect.unwrap_or_default())
        }) + own;
        let early = |at: Option<Duration>| {
            at.and_then(|at| t.marks.iter().find(|m| m.at == at))
                .map_or(Duration::ZERO, crate::client::TokenMark::early)
        };
        let first = t.first_token.unwrap_or(t.end);
        let b = &mut self.bounds;
        b.ttft_lo.record(secs(
            &(late + first).saturating_sub(send + early(t.first_token)),
        ));
        if let Some(fc) = t.first_content {
            b.ttft_content_lo
                .record(secs(&(late + fc).saturating_sub(send + early(Some(fc)))));
        }
        if let Some(w) = t.written {
            b.ttft_from_send_lo.record(secs(
                &first.saturating_sub(w).saturating_sub(early(t.first_token)),
            ));
        }
        b.e2e_lo.record(secs(&(late + t.end).saturating_sub(send)));
        if !t.stamped {
            b.unstamped += 1;
        }
        let decode = t.end.saturating_sub(first);
        if c.completion_tokens > 1 {
            #[expect(clippy::cast_precision_loss, reason = "token counts are small")]
            let after_first = (c.completion_tokens - 1) as f64;
            let longest = secs(&(decode + early(t.first_token)));
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
        }
    }

    /// Records a failed request.
    pub fn fail(&mut self, e: &CallError) {
        self.errors += 1;
        *self.error_classes.entry(e.class()).or_insert(0) += 1;
        if self.first_errors.len() < KEEP_ERRORS {
            self.first_errors.push(e.to_string());
        }
    }

    /// Adds another worker's record.
    pub fn merge(&mut self, other: Recorder) {
        self.ttft.merge(&other.ttft);
        self.ttft_content.merge(&other.ttft_content);
        self.ttft_from_send.merge(&other.ttft_from_send);
        self.connect.merge(&other.connect);
        self.itl.merge(&other.itl);
        self.tpot.merge(&other.tpot);
        self.e2e.merge(&other.e2e);
        self.decode_tok_s.merge(&other.decode_tok_s);
        self.server_decode_tok_s.merge(&other.server_decode_tok_s);
        self.server_prompt.merge(&other.server_prompt);
        self.completed += other.completed;
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.input_reported += other.input_reported;
        self.good_requests += other.good_requests;
        self.good_tokens = self.good_tokens.saturating_add(other.good_tokens);
        self.late_starts += other.late_starts;
        let room = SERIES_MAX.saturating_sub(self.series.len());
        self.series.extend(other.series.into_iter().take(room));
        self.usage_tokens = self.usage_tokens.saturating_add(other.usage_tokens);
        self.chunk_tokens = self.chunk_tokens.saturating_add(other.chunk_tokens);
        self.errors += other.errors;
        for (k, v) in other.error_classes {
            *self.error_classes.entry(k).or_insert(0) += v;
        }
        let room = KEEP_ERRORS.saturating_sub(self.first_errors.len());
        self.first_errors
            .extend(other.first_errors.into_iter().take(room));
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
            tpot: self.tpot,
            e2e: self.e2e,
            decode_tok_s: self.decode_tok_s,
            server_decode_tok_s: self.server_decode_tok_s,
            server_prompt: self.server_prompt,
            completed: self.completed,
            errors: self.errors,
            error_classes: self.error_classes,
            first_errors: self.first_errors,
            output_tokens: self.output_tokens,
            input_tokens: (self.input_reported == self.completed && self.completed > 0)
                .then_some(self.input_tokens),
            good_requests: self.slo.is_set().then_some(self.good_requests),
            good_tokens: self.good_tokens,
            late_starts: self.late_starts,
            usage_tokens: self.usage_tokens,
            chunk_tokens: self.chunk_tokens,
            token_sources: self.token_sources,
            side_tokens: 0,
            unsolicited: 0,
            server: Err("the server's /metrics was not read".to_owned()),
            wall,
            bounds: self.bounds,
        }
    }
}

/// Everything measured by one gate.
#[derive(Debug, Clone)]
pub struct GateMetrics {
    /// Why the gate stopped before its bound (consecutive stalls or
    /// connection failures); its figures are those measured until then.
    pub stopped_early: Option<String>,
    /// The client threads' self-check: whether the client, not the
    /// server, set these figures.
    pub client: ClientCheck,
    /// Time to first token of any kind, seconds.
    pub ttft: Distribution,
    /// Time to first content token, seconds.
    pub ttft_content: Distribution,
    /// Time from the request's write to the first token, seconds.
    pub ttft_from_send: Distribution,
    /// Time to open a connection, for requests that opened one, seconds.
    pub connect: Distribution,
    /// Inter-token latency, seconds.
    pub itl: Distribution,
    /// Time per output token after the first, seconds.
    pub tpot: Distribution,
    /// End-to-end latency, seconds.
    pub e2e: Distribution,
    /// Per-request decode rate, tokens/s.
    pub decode_tok_s: Distribution,
    /// Per-request decode rate by the server's own timings, tokens/s.
    pub server_decode_tok_s: Distribution,
    /// Per-request prompt time by the server's own timings, seconds.
    pub server_prompt: Distribution,
    /// Successful requests.
    pub completed: u64,
    /// Failed requests.
    pub errors: u64,
    /// Failed requests by class.
    pub error_classes: BTreeMap<&'static str, u64>,
    /// The first few error messages.
    pub first_errors: Vec<String>,
    /// Output tokens generated by successful requests.
    pub output_tokens: u64,
    /// Prompt tokens, when the server reported them for every request.
    pub input_tokens: Option<u64>,
    /// Requests that met every SLO, when the gate has SLOs.
    pub good_requests: Option<u64>,
    /// Output tokens of those requests.
    pub good_tokens: u64,
    /// Open loop: requests that started late.
    pub late_starts: u64,
    /// Where token counts came from, with how many requests each.
    pub token_sources: BTreeMap<&'static str, u64>,
    /// Output tokens the server reported, over requests with server counts.
    pub usage_tokens: u64,
    /// Tokens counted from chunks, over the same requests.
    pub chunk_tokens: u64,
    /// Tokens received by requests beside the load between the two reads
    /// of the server's `/metrics` (a recheck of the probes): its counter
    /// has them too.
    pub side_tokens: u64,
    /// Kept-alive connections closed before their reuse in the window
    /// because the server had sent bytes on them that no request asked
    /// for (they were not read as an answer).
    pub unsolicited: u64,
    /// The server's own `/metrics` view of the window, or why there is none.
    pub server: Result<ServerView, String>,
    /// The measured window.
    pub wall: Duration,
    /// How far the client can have moved each sample.
    pub bounds: Bounds,
    /// Per request, in completion order: seconds since the first completion,
    /// TTFT and E2E in seconds (at most [`SERIES_MAX`]).
    pub series: Vec<(f64, f64, f64)>,
}

/// Keep this many error messages for the failure text.
const KEEP_ERRORS: usize = 3;

impl GateMetrics {
    /// Figures of finished requests, for tests and one-shot use.
    pub fn compute(done: &[Completion], failed: &[CallError], wall: Duration) -> Self {
        let mut r = Recorder::new(Slo::default());
        for c in done {
            r.record(c, Duration::ZERO, Duration::ZERO);
        }
        for e in failed {
            r.fail(e);
        }
        r.finish(wall)
    }

    fn distribution(&self, metric: Metric) -> Option<&Distribution> {
        match metric {
            Metric::Ttft => Some(&self.ttft),
            Metric::TtftContent => Some(&self.ttft_content),
            Metric::TtftFromSend => Some(&self.ttft_from_send),
            Metric::Connect => Some(&self.connect),
            Metric::Itl => Some(&self.itl),
            Metric::Tpot => Some(&self.tpot),
            Metric::E2e => Some(&self.e2e),
            Metric::DecodeTokS => Some(&self.decode_tok_s),
            Metric::ServerDecodeTokS => Some(&self.server_decode_tok_s),
            _ => None,
        }
    }

    #[expect(clippy::cast_precision_loss, reason = "counts are small")]
    fn per_sec(&self, n: u64) -> Option<f64> {
        let secs = self.wall.as_secs_f64();
        (self.completed > 0 && secs > 0.0).then(|| n as f64 / secs)
    }

    /// The gated figures `keys` the client can move, each with the most it
    /// can have moved it; and whether a rate is among them (judged by the
    /// client threads' room, not by stamps).
    pub fn client_bounds(&self, keys: &[MetricKey]) -> (Vec<FigureBound>, bool) {
        let mut figures: Vec<FigureBound> = Vec::new();
        let mut rates = false;
        for &key in keys {
            let name = key.to_string();
            if figures.iter().any(|f| f.figure == name) {
                continue;
            }
            let Some(value) = self.value(key) else {
                continue;
            };
            if matches!(
                key.metric,
                Metric::OutputTokS
                    | Metric::InputTokS
                    | Metric::TotalTokS
                    | Metric::RequestsPerS
                    | Metric::GoodputRequestsPerS
                    | Metric::GoodputTokS
            ) {
                rates = true;
                continue;
            }
            let Some((lo, hi)) = self.bounds.of(key.metric) else {
                continue;
            };
            let stat = key.stat.unwrap_or(Stat::Mean);
            let time = key.metric.is_duration();
            // A standard deviation is no order statistic, and a connect or
            // an unstamped arrival has no bound: shown as not bounded.
            if stat == Stat::Stddev || (lo.is_none() && hi.is_none()) || self.bounds.unstamped > 0 {
                figures.push(FigureBound::new(name, value, None, time));
                continue;
            }
            let down = lo
                .and_then(|d| d.stat(stat))
                .map_or(0.0, |v| (value - v).max(0.0));
            let up = hi
                .and_then(|d| d.stat(stat))
                .map_or(0.0, |v| (v - value).max(0.0));
            figures.push(FigureBound::new(name, value, Some(down.max(up)), time));
        }
        (figures, rates)
    }

    /// The measured value of a key; `None` when nothing could be measured.
    pub fn value(&self, key: MetricKey) -> Option<f64> {
        #[expect(clippy::cast_precision_loss, reason = "counts are small")]
        match key.metric {
            Metric::Errors => Some(self.errors as f64),
            Metric::LateStarts => Some(self.late_starts as f64),
            Metric::TokenDriftChunks => (self.usage_tokens > 0).then(|| {
                100.0 * (self.usage_tokens as f64 - self.chunk_tokens as f64).abs()
                    / self.usage_tokens as f64
            }),
            Metric::TokenDriftMetrics => {
                let served = self.server.as_ref().ok()?.generation_tokens?;
                let received = self.output_tokens.saturating_add(self.side_tokens) as f64;
                (self.output_tokens > 0)
                    .then(|| 100.0 * (served - received).abs() / self.output_tokens as f64)
            }
            Metric::OutputTokS => self.per_sec(self.output_tokens),
            Metric::InputTokS => self.input_tokens.and_then(|n| self.per_sec(n)),
            Metric::TotalTokS => self
                .input_tokens
                .and_then(|n| self.per_sec(n + self.output_tokens)),
            Metric::RequestsPerS => self.per_sec(self.completed),
            Metric::GoodputRequestsPerS => self.good_requests.and_then(|n| self.per_sec(n)),
            Metric::GoodputTokS => self
                .good_requests
                .and_then(|_| self.per_sec(self.good_tokens)),
            m => self
                .distribution(m)
                .and_then(|d| d.stat(key.stat.unwrap_or(Stat::Mean))),
        }
    }

    /// Why this window has no figure of `metric` although requests
    /// succeeded, where the window knows: what the server lacked.
    pub fn missing(&self, metric: Metric) -> Option<String> {
        match (metric, &self.server) {
            (Metric::TokenDriftMetrics, Err(why)) => Some(format!(
                "{why}: this figure needs its generation-token counter"
            )),
            (Metric::TokenDriftMetrics, Ok(view)) if view.generation_tokens.is_none() => {
                Some(format!(
                    "/metrics lacked the counter this figure needs: it has none of {}",
                    super::prometheus::generation_counter_names().join(", ")
                ))
            }
            _ => None,
        }
    }

    /// How many samples stand behind a key's value.
    pub fn sample_size(&self, key: MetricKey) -> String {
        let window = format_secs(self.wall.as_secs_f64());
        match key.metric {
            Metric::Errors | Metric::LateStarts => {
                format!("{} requests", self.completed + self.errors)
            }
            Metric::TokenDriftChunks => {
                format!(
                    "{} server-counted tokens, {} counted from chunks",
                    self.usage_tokens, self.chunk_tokens
                )
            }
            Metric::TokenDriftMetrics => format!(
                "{} output tokens received{}, {} by the server's counter",
                self.output_tokens,
                if self.side_tokens > 0 {
                    format!(" (and {} by the recheck beside the load)", self.side_tokens)
                } else {
                    String::new()
                },
                self.server
                    .as_ref()
                    .ok()
                    .and_then(|s| s.generation_tokens)
                    .map_or_else(|| "none".to_owned(), |g| format!("{g:.0}"))
            ),
            Metric::OutputTokS | Metric::InputTokS | Metric::TotalTokS | Metric::GoodputTokS => {
                format!(
                    "{} output tokens from {} requests in {window}",
                    self.output_tokens, self.completed
                )
            }
            Metric::RequestsPerS | Metric::GoodputRequestsPerS => {
                format!("{} requests in {window}", self.completed)
            }
            m => {
                let n = self.distribution(m).map_or(0, Distribution::len);
                let unit = if m == Metric::Itl { "gaps" } else { "requests" };
                format!("{n} {unit}")
            }
        }
    }

    /// A table of every figure, for the run output.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let stats = [
            Stat::Mean,
            Stat::Stddev,
            Stat::P50,
            Stat::P90,
            Stat::P99,
            Stat::P999,
            Stat::Max,
        ];
        for metric in [
            Metric::Ttft,
            Metric::TtftContent,
            Metric::TtftFromSend,
            Metric::Connect,
            Metric::Itl,
            Metric::Tpot,
            Metric::E2e,
            Metric::DecodeTokS,
        ] {
            let d = self.distribution(metric).expect("distribution metric");
            // Connections opened in the warm-up are not the window's.
            if metric == Metric::Connect && d.is_empty() {
                continue;
            }
            let _ = write!(out, "    {:<14}", metric.name());
            if d.is_empty() {
                out.push_str("  no samples\n");
                continue;
            }
            for stat in stats {
                let v = d.stat(stat).unwrap_or(f64::NAN);
                let shown = format_value(metric, v).replace(" tok/s", "");
                let _ = write!(out, " {} {:<9}", stat.name(), shown);
            }
            let unit = if metric == Metric::DecodeTokS {
                "tok/s "
            } else {
                ""
            };
            let _ = writeln!(out, "{unit}(n={})", d.len());
        }
        let rate = |m: Metric| {
            self.value(MetricKey {
                metric: m,
                stat: None,
            })
            .map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
        };
        // A server's count passed only where the text that came bears it
        // out (`StreamReader::evidenced`): said beside it.
        let chunks = TokenSource::ChunkCount.name();
        let sources: Vec<String> = self
            .token_sources
            .iter()
            .map(|(s, n)| {
                let checked = if *s == chunks {
                    ""
                } else {
                    ", borne out by the text"
                };
                format!("{s} ×{n}{checked}")
            })
            .collect();
        let _ = writeln!(
            out,
            "    tok/s output {} input {} total {}  requests/s {}  errors {}  ({} output tokens in {}, counts from {})",
            rate(Metric::OutputTokS),
            rate(Metric::InputTokS),
            rate(Metric::TotalTokS),
            rate(Metric::RequestsPerS),
            self.errors,
            self.output_tokens,
            format_secs(self.wall.as_secs_f64()),
            if sources.is_empty() {
                "-".into()
            } else {
                sources.join(", ")
            },
        );
        if self.unsolicited > 0 {
            let _ = writeln!(
                out,
                "    {} kept-alive connection{} closed before reuse: the server had sent bytes on {} that no request asked for (a server bug; they were not read as an answer)",
                self.unsolicited,
                if self.unsolicited == 1 { "" } else { "s" },
                if self.unsolicited == 1 { "it" } else { "them" },
            );
        }
        if let Some(good) = self.good_requests {
            let _ = writeln!(
                out,
                "    goodput {good}/{} requests met the SLOs: {} req/s, {} tok/s",
                self.completed,
                rate(Metric::GoodputRequestsPerS),
                rate(Metric::GoodputTokS),
            );
        }
        if !self.server_decode_tok_s.is_empty() {
            let stat = |d: &Distribution, s| d.stat(s).unwrap_or(f64::NAN);
            let _ = writeln!(
                out,
                "    server's own timings (n={}): prompt mean {} p99 {}, decode mean {:.1} tok/s p50 {:.1} (client decode_tok_s mean {:.1})",
                self.server_decode_tok_s.len(),
                format_secs(stat(&self.server_prompt, Stat::Mean)),
                format_secs(stat(&self.server_prompt, Stat::P99)),
                stat(&self.server_decode_tok_s, Stat::Mean),
                stat(&self.server_decode_tok_s, Stat::P50),
                stat(&self.decode_tok_s, Stat::Mean),
            );
        }
        if let Ok(server) = &self.server {
            out.push_str(&server.render());
        }
        if self.late_starts > 0 {
            let _ = writeln!(
                out,
                "    late starts {} (more than 5ms after the intended time)",
                self.late_starts
            );
        }
        if !self.client.threads.is_empty() {
            out.push_str(&self.client.render());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{Timing, TokenMark, Usage};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-3 * b.abs().max(1e-6)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn completion() -> Completion {
        // 5 tokens: first at 100ms, then chunks at 110, 120 (2 tokens), 150.
        Completion {
            completion_tokens: 5,
            usage: Some(Usage {
                prompt_tokens: Some(7),
                completion_tokens: Some(5),
            }),
            timing: Timing {
                first_token: Some(ms(100)),
                first_content: Some(ms(110)),
                marks: vec![
                    TokenMark {
                        at: ms(100),
                        tokens: 1,
                        early_us: 0,
                    },
                    TokenMark {
                        at: ms(110),
                        tokens: 1,
                        early_us: 0,
                    },
                    TokenMark {
                        at: ms(120),
                        tokens: 2,
                        early_us: 0,
                    },
                    TokenMark {
                        at: ms(150),
                        tokens: 1,
                        early_us: 0,
                    },
                ],
                end: ms(150),
                ..Timing::default()
            },
            ..Completion::default()
        }
    }

    #[test]
    fn figures_from_timings() {
        let m = GateMetrics::compute(&[completion()], &[], Duration::from_secs(1));
        let v = |k: &str| m.value(k.parse().unwrap()).unwrap();
        assert!(close(v("ttft.mean"), 0.1));
        assert!(close(v("ttft_content.mean"), 0.11));
        // 4 tokens after the first in 50ms.
        assert!(close(v("tpot.mean"), 0.0125));
        assert!(close(v("decode_tok_s.mean"), 80.0));
        // Gaps: 10ms, 5ms, 5ms (the 2-token chunk), 30ms.
        assert_eq!(m.itl.len(), 4);
        assert!(close(v("itl.max"), 0.03));
        assert!(close(v("itl.min"), 0.005));
        assert!(close(v("output_tok_s"), 5.0));
        assert!(close(v("input_tok_s"), 7.0));
        assert!(close(v("total_tok_s"), 12.0));
        assert_eq!(
            m.value("goodput_tok_s".parse().unwrap()),
            None,
            "no SLO, no goodput"
        );
    }

    #[test]
    fn late_starts_count_into_latency_and_goodput() {
        let slo = Slo {
            ttft: Some(ms(200)),
            tpot: Some(ms(20)),
            e2e: None,
        };
        let mut r = Recorder::new(slo);
        r.record(&completion(), Duration::ZERO, Duration::ZERO);
        r.record(&completion(), ms(500), Duration::ZERO);
        let m = r.finish(Duration::from_secs(2));
        assert_eq!(m.late_starts, 1);
        assert!(
            close(m.ttft.stat(Stat::Max).unwrap(), 0.6),
            "latency counts from the intended start"
        );
        assert_eq!(m.good_requests, Some(1));
        assert!(close(
            m.value("goodput_requests_per_s".parse().unwrap()).unwrap(),
            0.5
        ));
        assert!(close(
            m.value("goodput_tok_s".parse().unwrap()).unwrap(),
            2.5
        ));
    }

    #[test]
    fn nothing_measured_is_none_not_zero() {
        let m = GateMetrics::compute(&[], &[], Duration::from_secs(1));
        assert_eq!(m.value("ttft.p99".parse().unwrap()), None);
        assert_eq!(m.value("output_tok_s".parse().unwrap()), None);
        assert_eq!(m.value("errors".parse().unwrap()), Some(0.0));
    }
}
