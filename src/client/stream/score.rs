//! Scoring a text: the request that has the server give the
//! log-probability of each of its tokens (SGLang's `/generate` with
//! `return_logprob`, vLLM's completions with `prompt_logprobs`), and where
//! a request names its LoRA adapter.

use super::Client;
use super::http::bounded_text;
use crate::client::api::{AdapterField, put_adapter};
use crate::client::dialect;
use crate::client::error::{CallError, ErrorKind, excerpt};
use crate::suite::Api;

impl Client {
    /// The request that has the server score `text` through `api` (SGLang's
    /// `sglang-generate`, vLLM's `openai-completions`), by `adapter` when
    /// one is named, where that API can ask: its path and body.
    pub fn score_request(
        &self,
        api: Api,
        text: &str,
        adapter: Option<&str>,
    ) -> Option<(&'static str, serde_json::Value)> {
        let (path, mut body) = dialect::of(api).score_request(&self.model, text)?;
        put_adapter(&mut body, adapter, self.field_of(api));
        Some((path, body))
    }

    /// Where a request through `api` names its adapter.
    pub(super) fn field_of(&self, api: Api) -> AdapterField {
        match api {
            Api::SglangGenerate => AdapterField::LoraPath,
            _ => self.adapter_field,
        }
    }

    /// Has the server score a text through `api` by its scoring request
    /// (`path`, `body`: [`Client::score_request`]): the log-probability of
    /// each of its tokens but the first, not streamed (a prefill),
    /// answered within a first token's deadline and read up to the
    /// document limit.
    pub async fn score(
        &self,
        api: Api,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<Vec<f64>, CallError> {
        let url = format!("{}{path}", self.base_url);
        let deadline = tokio::time::Instant::now() + self.small_deadline().1;
        let req = self
            .http
            .small()?
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        let resp = self
            .send_small(req, path, deadline, self.auth.as_ref())
            .await?;
        let status = resp.status();
        let text = bounded_text(resp, self.limits.document, deadline, path).await?;
        if !status.is_success() {
            return Err(CallError::new(
                ErrorKind::Http(status.as_u16()),
                format!("POST {path}: {}", excerpt(&text, 300)),
            ));
        }
        let answer = super::document(&text).map_err(|e| {
            CallError::new(ErrorKind::Protocol, format!("POST {path}: not JSON: {e}"))
        })?;
        dialect::of(api)
            .scored(&answer)
            .map_err(|why| CallError::new(ErrorKind::Protocol, format!("POST {path}: {why}")))
    }
}
