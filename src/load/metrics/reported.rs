//! What the server reported of each request beside its token counts —
//! prompt tokens served from its prefix cache, reasoning tokens,
//! speculative acceptance, retractions — gathered over a window into the
//! figures gates judge (`cache_hit_rate`, `reasoning_tokens.*`,
//! `spec_accept_length.*`, `retractions`). A figure exists only when every
//! successful request reported it: a gate on a cache hit rate the server
//! reported for half its requests would judge the half it chose.

use crate::client::Completion;
use crate::load::distribution::Distribution;
use crate::suite::metric::{Metric, Stat};

/// The server's reports over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerReports {
    /// Reasoning tokens per request that reported them.
    pub reasoning_tokens: Distribution,
    /// Tokens per verify step per request that reported it.
    pub spec_accept_length: Distribution,
    /// Requests that reported cached tokens (and prompt tokens).
    pub cache_requests: u64,
    /// Their prompt tokens.
    pub cache_prompt: u64,
    /// Their cached prompt tokens.
    pub cached: u64,
    /// Requests that reported their retractions.
    pub retraction_requests: u64,
    /// Their retractions.
    pub retractions: u64,
}

impl Default for ServerReports {
    fn default() -> Self {
        Self {
            reasoning_tokens: Distribution::tokens(),
            spec_accept_length: Distribution::tokens(),
            cache_requests: 0,
            cache_prompt: 0,
            cached: 0,
            retraction_requests: 0,
            retractions: 0,
        }
    }
}

impl ServerReports {
    /// Adds what the server reported of one successful request.
    pub fn record(&mut self, c: &Completion) {
        let r = &c.server_report;
        if let Some(n) = r.reasoning_tokens {
            #[expect(clippy::cast_precision_loss, reason = "at most 2^32 tokens")]
            self.reasoning_tokens.record(n as f64);
        }
        if let Some(l) = r.spec_accept_length {
            self.spec_accept_length.record(l);
        }
        if let (Some(cached), Some(prompt)) =
            (r.cached_tokens, c.usage.and_then(|u| u.prompt_tokens))
        {
            self.cache_requests += 1;
            self.cache_prompt = self.cache_prompt.saturating_add(prompt);
            self.cached = self.cached.saturating_add(cached);
        }
        if let Some(n) = r.retractions {
            self.retraction_requests += 1;
            self.retractions = self.retractions.saturating_add(n);
        }
    }

    /// Adds another worker's reports.
    pub fn merge(&mut self, other: &ServerReports) {
        self.reasoning_tokens.merge(&other.reasoning_tokens);
        self.spec_accept_length.merge(&other.spec_accept_length);
        self.cache_requests += other.cache_requests;
        self.cache_prompt = self.cache_prompt.saturating_add(other.cache_prompt);
        self.cached = self.cached.saturating_add(other.cached);
        self.retraction_requests += other.retraction_requests;
        self.retractions = self.retractions.saturating_add(other.retractions);
    }

    /// The figure of `metric` over `completed` successful requests, when
    /// every one of them reported it; `None` for metrics not reported.
    pub fn value(&self, metric: Metric, stat: Option<Stat>, completed: u64) -> Option<f64> {
        let every = |n: u64| completed > 0 && n == completed;
        #[expect(clippy::cast_precision_loss, reason = "token counts are small")]
        match metric {
            Metric::CacheHitRate => (every(self.cache_requests) && self.cache_prompt > 0)
                .then(|| self.cached as f64 / self.cache_prompt as f64),
            Metric::Retractions => {
                every(self.retraction_requests).then_some(self.retractions as f64)
            }
            Metric::ReasoningTokens => Self::every_request(&self.reasoning_tokens, stat, completed),
            Metric::SpecAcceptLength => {
                Self::every_request(&self.spec_accept_length, stat, completed)
            }
            _ => None,
        }
    }

    fn every_request(d: &Distribution, stat: Option<Stat>, completed: u64) -> Option<f64> {
        (completed > 0 && d.len() == completed).then(|| d.stat(stat.unwrap_or(Stat::Mean)))?
    }

    /// How many requests reported `metric`, in words.
    pub fn sample_size(&self, metric: Metric) -> String {
        match metric {
            Metric::CacheHitRate => format!(
                "{} cached of {} prompt tokens in {} requests",
                self.cached, self.cache_prompt, self.cache_requests
            ),
            Metric::Retractions => format!("{} requests", self.retraction_requests),
            Metric::ReasoningTokens => format!("{} requests", self.reasoning_tokens.len()),
            _ => format!("{} requests", self.spec_accept_length.len()),
        }
    }
}
