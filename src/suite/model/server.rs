//! The server under test as a suite describes it: `target:` (where it is,
//! its API, deadlines, read caps), `target.launch`, `variants:` and the
//! `expect_server:` checks of its configuration.

use std::path::PathBuf;
use std::time::Duration;

use regex::Regex;

use crate::suite::names::names;
use crate::suite::node::Loc;

/// Where the suite's server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseUrl {
    /// The embedded simulator (`sim`, or no `base_url`).
    Sim,
    /// A server at this URL (root, without `/v1`).
    Url(String),
}

/// Which HTTP API requests use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/chat/completions`.
    OpenAiChat,
    /// `POST /v1/completions`.
    OpenAiCompletions,
    /// SGLang's native `POST /generate`.
    SglangGenerate,
    /// llama.cpp's native `POST /completion` (with the server's timings).
    LlamacppCompletion,
}

names!(Api {
    OpenAiChat => "openai-chat",
    OpenAiCompletions => "openai-completions",
    SglangGenerate => "sglang-generate",
    LlamacppCompletion => "llamacpp-completion",
});

/// Deadlines of every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP connect.
    pub connect: Duration,
    /// From sending the request to the first token.
    pub first_token: Duration,
    /// Longest allowed gap between two chunks of a stream.
    pub idle: Duration,
    /// Whole request.
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_token: Duration::from_secs(120),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(600),
        }
    }
}

/// How much of a server's answers is read: past a cap the request fails
/// (a server that never stops sending must not exhaust memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Text of one answer (content and reasoning together).
    pub answer: u64,
    /// Body of one small GET (`/v1/models`, info, health, `/metrics`).
    pub document: u64,
    /// What the streams in flight hold together (line buffers, kept text).
    pub buffers: u64,
}

impl Default for ReadLimits {
    fn default() -> Self {
        Self {
            answer: 8 << 20,
            document: 4 << 20,
            buffers: 256 << 20,
        }
    }
}

/// The server under test.
#[derive(Debug, Clone)]
pub struct Target {
    /// Where it is.
    pub base_url: BaseUrl,
    /// How to talk to it.
    pub api: Api,
    /// The model name sent in requests; the served id when absent.
    pub model: Option<String>,
    /// The NAME of the environment variable that holds the API key.
    pub api_key_env: Option<String>,
    /// The NAME of the environment variable that holds the admin key
    /// (SGLang's `--admin-api-key`), sent to administrative endpoints
    /// (`/flush_cache`) in place of the API key.
    pub admin_key_env: Option<String>,
    /// NAMES of environment variables whose values are secrets: scrubbed
    /// from everything servegate prints or writes.
    pub secrets: Vec<String>,
    /// Request deadlines.
    pub timeouts: Timeouts,
    /// Byte caps on what is read.
    pub limits: ReadLimits,
    /// A server process servegate starts and stops; its URL is then
    /// `http://<host>:<port>`.
    pub launch: Option<Launch>,
    /// Where `target:` is written.
    pub loc: Loc,
}

/// How to start the server under test.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The argv; `{port}` and `{host}` are replaced in each element.
    pub command: Vec<String>,
    /// Environment variables set for the server (on top of servegate's own);
    /// `{port}` and `{host}` are replaced in values.
    pub env: Vec<(String, String)>,
    /// Working directory; the suite's directory when absent.
    pub cwd: Option<PathBuf>,
    /// Address the server listens on, as the client reaches it.
    pub host: String,
    /// Port; a free one is picked when absent.
    pub port: Option<u16>,
    /// Readiness polling.
    pub ready: Ready,
    /// Log lines that mean the server is broken (regular expressions).
    pub fatal_log_patterns: Vec<Regex>,
    /// Time between SIGTERM and SIGKILL at teardown.
    pub grace: Duration,
    /// The servers started, each ready, before `command` (a router in
    /// front of them), which names each as `{worker.NAME}`; empty for a
    /// server alone (and in a worker's own launch).
    pub workers: Vec<Worker>,
    /// Where `launch:` is written.
    pub loc: Loc,
}

/// One of the servers behind a launched router.
#[derive(Debug, Clone)]
pub struct Worker {
    /// Its name: in its log's file name, its failures and its
    /// `/metrics` samples' `servegate_worker` label.
    pub name: String,
    /// How it is started (no workers of its own).
    pub launch: Launch,
}

/// How readiness is polled.
#[derive(Debug, Clone)]
pub struct Ready {
    /// The path polled until it answers 2xx: `/health_generate` for SGLang
    /// (`sglang-generate`, or `sglang` in the command), `/health` otherwise.
    pub path: String,
    /// Time between polls.
    pub interval: Duration,
    /// How long start-up may take.
    pub timeout: Duration,
}

/// One launch variant of an A/B run.
#[derive(Debug, Clone)]
pub struct Variant {
    /// The name, in trial names as `<suite>[<name>]`.
    pub name: String,
    /// Environment variables set on top of the launch's.
    pub env: Vec<(String, String)>,
    /// Arguments appended to the launch command.
    pub args: Vec<String>,
    /// What its launch must have changed, checked before anything is
    /// measured: added to the suite's `expect_server`, replacing a check of
    /// the same field.
    pub expect_server: Vec<ConfigCheck>,
    /// Thresholds only this variant's gates are judged by, by gate (a
    /// sweep's name for each of its levels): added to the gate's,
    /// replacing one of the same figure (`server.spec_accept_length` where
    /// only this variant decodes speculatively).
    pub thresholds: Vec<(String, Loc, Vec<super::LocatedThreshold>)>,
    /// Where the variant is written.
    pub loc: Loc,
}

/// Which document a configuration check reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// `/server_info` (or the older `/get_server_info`): the server's
    /// arguments.
    ServerInfo,
    /// `/model_info` (or the older `/get_model_info`).
    ModelInfo,
    /// `/v1/models`.
    Models,
    /// `/version`: vLLM's `{"version": …}` (`vllm/entrypoints/serve/
    /// instrumentator/basic.py`, 0.32.0).
    Version,
    /// `/metrics`: the labels of its info series
    /// ([`crate::load::prometheus::info_document`]), vLLM's
    /// `vllm:cache_config_info` (`vllm/v1/metrics/loggers.py`, 0.32.0).
    Metrics,
}

names!(ConfigSource {
    ServerInfo => "server_info",
    ModelInfo => "model_info",
    Models => "models",
    Version => "version",
    Metrics => "metrics",
});

impl ConfigSource {
    /// The paths tried in order: SGLang 0.5.23 logs a deprecation warning
    /// for every call of `/get_server_info` and `/get_model_info`, kept for
    /// servers older than their replacements.
    pub fn paths(self) -> &'static [&'static str] {
        match self {
            ConfigSource::ServerInfo => &["/server_info", "/get_server_info"],
            ConfigSource::ModelInfo => &["/model_info", "/get_model_info"],
            ConfigSource::Models => &["/v1/models"],
            ConfigSource::Version => &["/version"],
            ConfigSource::Metrics => &["/metrics"],
        }
    }
}

/// What a reported configuration value must be.
#[derive(Debug, Clone)]
pub enum ConfigExpect {
    /// Equal (numbers compared as numbers).
    Equals(serde_json::Value),
    /// A string containing this text.
    Contains(String),
    /// A string matching this regex.
    Matches(Regex),
    /// Equal to one of these.
    OneOf(Vec<serde_json::Value>),
    /// A list with an entry whose `id` is this and that has a `parent`:
    /// `/v1/models` serving a LoRA adapter a probe or gate names (SGLang
    /// 0.5.23 and vLLM 0.32 list each loaded adapter there, its `parent`
    /// the base model).
    ListsId(String),
}

/// One `expect_server:` assertion.
#[derive(Debug, Clone)]
pub struct ConfigCheck {
    /// The trial name: `<source>.<field path>`.
    pub name: String,
    /// The document read.
    pub source: ConfigSource,
    /// The field: keys and list indexes.
    pub path: Vec<String>,
    /// What it must be.
    pub expect: ConfigExpect,
    /// Where it is written.
    pub loc: Loc,
}
