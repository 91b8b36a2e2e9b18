//! Choosing and reaching a suite's server: the embedded simulator or a URL,
//! and the model it serves.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use crate::client::api::AdapterField;
use crate::client::{CallError, Client, Deadline, ErrorKind};
use crate::server::Server;
use crate::sim::{self, Profile, RunningSim};
use crate::suite::{Api, BaseUrl, Suite};

pub use super::launched::{LaunchPlace, Worker};
use super::launched::{launch_target, worker_clients};

/// Where the override of every suite's `base_url` comes from.
pub const TARGET_ENV: &str = "SERVEGATE_TARGET";

/// Why a suite's server could not be reached: the message every trial of
/// the suite fails with. The launch, the simulator's profile and the
/// server's readiness say theirs in words (their floors' errors are text).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// `--target` or `SERVEGATE_TARGET` is neither `sim` nor a URL.
    #[error(
        "invalid target `{0}` (from --target or {TARGET_ENV}): expected `sim` or an http(s) URL"
    )]
    InvalidOverride(String),
    /// A key variable the suite names is not set.
    #[error("target.{field} names `{name}`, which is not set in the environment")]
    KeyUnset {
        /// `api_key_env` or `admin_key_env`.
        field: &'static str,
        /// The variable.
        name: String,
    },
    /// A key holds what an HTTP header cannot carry.
    #[error(
        "target.{field} names `{name}`, whose value holds {what} at byte {at} of {len}: an HTTP header cannot carry it (a key read with `$(cat file)` keeps no newline, one pasted may)"
    )]
    KeyNotHeader {
        /// `api_key_env` or `admin_key_env`.
        field: &'static str,
        /// The variable.
        name: String,
        /// The character, in words.
        what: String,
        /// Its byte offset.
        at: usize,
        /// The value's length in bytes.
        len: usize,
    },
    /// The server could not be launched, or never became ready.
    #[error("launch failed: {0}")]
    Launch(String),
    /// The simulator's profile could not be read.
    #[error("{0}")]
    Profile(String),
    /// The embedded simulator could not start.
    #[error("failed to start the embedded simulator: {0}")]
    Simulator(#[source] std::io::Error),
    /// The client could not be built.
    #[error(transparent)]
    Client(#[from] CallError),
    /// Nothing answered at the target's address.
    #[error("target {shown} is unreachable: {source}")]
    Unreachable {
        /// The target, secrets scrubbed.
        shown: String,
        /// Discovery's error.
        #[source]
        source: CallError,
    },
    /// It took the connection but answered no discovery in time.
    #[error(
        "target {shown} is not answering: it accepted the connection but sent no answer to discovery in {waited_s:.1}s ({source})"
    )]
    NotAnswering {
        /// The target, secrets scrubbed.
        shown: String,
        /// How long discovery waited, seconds.
        waited_s: f64,
        /// Discovery's error.
        #[source]
        source: CallError,
    },
    /// It answered discovery with an error.
    #[error("target {shown} failed discovery: {source}")]
    Discovery {
        /// The target, secrets scrubbed.
        shown: String,
        /// Discovery's error.
        #[source]
        source: CallError,
    },
}

impl From<super::launched::LaunchError> for TargetError {
    fn from(e: super::launched::LaunchError) -> Self {
        TargetError::Launch(e.to_string())
    }
}

/// A reachable server and how to talk to it.
#[derive(Debug)]
pub struct Connected {
    /// The client for the suite's API and model.
    pub client: Client,
    /// What the run prints about the target.
    pub description: String,
    /// What baselines and the history key figures by: the API, the served
    /// model, the server's version and the digest of `config`.
    pub fingerprint: String,
    /// The whole configuration the fingerprint digests: SGLang's resolved
    /// server arguments, and the environment a launched server was given
    /// that configures it; empty where neither is known.
    pub config: crate::load::fingerprint::Config,
    /// Keeps the embedded simulator alive while the suite runs.
    pub sim: Option<RunningSim>,
    /// The server servegate launched for this run, if it did.
    pub server: Option<Server>,
    /// The workers behind it, when it is a router servegate launched them
    /// for, in the suite's order.
    pub workers: Vec<Worker>,
    /// The model the server says it serves (else the one requests name).
    pub model_id: String,
    /// The model the suite pins (`target.model`), which its requests name.
    pub pinned_model: Option<String>,
    /// Whether the server said which model it serves (else `model_id` is
    /// the one requests name).
    pub model_reported: bool,
    /// The server's version, when it reports one.
    pub server_version: Option<String>,
    /// The API through which the server scores a prompt (a numerics
    /// probe's request), by the server it is: SGLang's `/generate`, vLLM's
    /// completions; `None` for a server servegate knows no such way for.
    pub scorer: Option<Api>,
    /// When discovery's one deadline (a first token's) ends: the documents
    /// kept for the record are read by it too.
    pub discovery_ends: tokio::time::Instant,
}

impl Connected {
    /// The client whose documents (`/server_info`, `/model_info`, …) are
    /// the server's: a launched router's first worker, as the router
    /// answers with its own; else the target's.
    pub(crate) fn documents_from(&self) -> &Client {
        self.client
            .metrics_from()
            .first()
            .map_or(&self.client, |(_, worker)| worker)
    }

    /// Which model the suite's figures are of, as the history keys them.
    pub(crate) fn model_identity(&self) -> crate::history::ModelIdentity<'_> {
        crate::history::ModelIdentity {
            pinned: self.pinned_model.as_deref(),
            served: &self.model_id,
            reported: self.model_reported,
        }
    }
}

/// The base URL a suite uses after the override.
pub(crate) fn effective_base(
    suite: &Suite,
    override_target: Option<&str>,
) -> Result<BaseUrl, TargetError> {
    match override_target.map(str::trim) {
        None | Some("") => Ok(suite.target.base_url.clone()),
        Some("sim") => Ok(BaseUrl::Sim),
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
            let url = url.trim_end_matches('/');
            Ok(BaseUrl::Url(
                url.strip_suffix("/v1").unwrap_or(url).to_owned(),
            ))
        }
        Some(other) => Err(TargetError::InvalidOverride(other.to_owned())),
    }
}

/// Whether the suite's server is launched by servegate in this run (a
/// `--target`/`SERVEGATE_TARGET` override replaces the launch).
pub fn launches(suite: &Suite, override_target: Option<&str>) -> bool {
    suite.target.launch.is_some() && override_target.is_none_or(|t| t.trim().is_empty())
}

/// The key from the variable `env` names (the suite's `target.{field}`):
/// it must be set and be what an HTTP header can carry (visible ASCII,
/// spaces, tabs).
fn key_from(field: &'static str, env: Option<&str>) -> Result<Option<String>, TargetError> {
    Ok(match env {
        None => None,
        Some(name) => match std::env::var(name) {
            Ok(v) if !v.is_empty() => {
                crate::secrets::add(&v);
                // What an HTTP header can carry: visible ASCII, spaces, tabs.
                if let Some((i, c)) = v
                    .char_indices()
                    .find(|&(_, c)| !(c == ' ' || c == '\t' || c.is_ascii_graphic()))
                {
                    return Err(TargetError::KeyNotHeader {
                        field,
                        name: name.to_owned(),
                        what: match c {
                            '\n' => "a newline".to_owned(),
                            '\r' => "a carriage return".to_owned(),
                            c => format!("the character {}", c.escape_unicode()),
                        },
                        at: i,
                        len: v.len(),
                    });
                }
                Some(v)
            }
            _ => {
                return Err(TargetError::KeyUnset {
                    field,
                    name: name.to_owned(),
                });
            }
        },
    })
}

/// Starts or reaches the target and finds the served model. An `Err` is the
/// message every trial of the suite fails with.
pub async fn connect(
    suite: &Suite,
    override_target: Option<&str>,
    place: LaunchPlace<'_>,
) -> Result<Connected, TargetError> {
    let t = &suite.target;
    for name in &t.secrets {
        if let Ok(v) = std::env::var(name) {
            crate::secrets::add(&v);
        }
    }
    let api_key = key_from("api_key_env", t.api_key_env.as_deref())?;
    let admin_key = key_from("admin_key_env", t.admin_key_env.as_deref())?;
    // Declared before the router, so dropped after it on every way out: a
    // router is stopped before the workers it sends to.
    let mut launched_workers = Vec::new();
    let mut launched = None;
    let (base, sim, what) = match effective_base(suite, override_target)? {
        _ if launches(suite, override_target) => {
            let launch = t.launch.as_ref().expect("launches() checked it");
            // `suite.yaml` in the working directory has the parent "".
            let suite_dir = suite
                .file
                .path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let (s, workers, what) = launch_target(launch, place, suite_dir).await?;
            let base = s.base_url.clone();
            launched_workers = workers;
            launched = Some(s);
            (base, None, what)
        }
        BaseUrl::Sim => {
            let profile = match &suite.sim.profile {
                Some(p) => Profile::load(p).map_err(TargetError::Profile)?,
                None => Profile::default(),
            };
            let running = sim::spawn(profile, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
                .map_err(TargetError::Simulator)?;
            let profile_name = suite.sim.profile.as_ref().map_or_else(
                || "built-in default profile".to_owned(),
                |p| format!("profile {}", p.display()),
            );
            let what = format!(
                "SIMULATOR (embedded, {profile_name}) at {}",
                running.base_url()
            );
            (running.base_url(), Some(running), what)
        }
        BaseUrl::Url(url) => (
            url.clone(),
            None,
            format!("server at {}", crate::secrets::url(&url)),
        ),
    };
    let shown = crate::secrets::url(&base);
    // Discovery goes through the same client as the calls: a GET's answer
    // is due within the suite's connect and first_token deadlines.
    let probe = Client::new(&base, t.api, "", api_key.clone(), t.timeouts)?.with_limits(t.limits);
    let asked = std::time::Instant::now();
    // Discovery's GETs (the model, the version, the documents kept for the
    // record) share one deadline, a first token's: each bounded alone, a
    // server that answers every one just in time would take it that many
    // times over.
    let budget = t.timeouts.first_token.min(t.timeouts.total);
    let ends = tokio::time::Instant::now() + budget;
    let served = served_model(&probe, ends, budget)
        .await
        .map_err(|source| match source.kind {
            ErrorKind::Connect | ErrorKind::Timeout(Deadline::Connect, _) => {
                TargetError::Unreachable { shown, source }
            }
            ErrorKind::Timeout(..) => TargetError::NotAnswering {
                shown,
                waited_s: asked.elapsed().as_secs_f64(),
                source,
            },
            _ => TargetError::Discovery { shown, source },
        })?;
    let model = t
        .model
        .clone()
        .or_else(|| served.clone())
        .unwrap_or_else(|| "default".to_owned());
    let description = format!(
        "{what}, api {}, served model {}, requests name model {model:?}",
        t.api.name(),
        served.as_deref().map_or_else(
            || format!(
                "unknown (no {})",
                probe
                    .discovery()
                    .iter()
                    .map(|(p, _)| *p)
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
            |s| format!("{s:?}")
        ),
    );
    let Identity {
        version,
        config,
        mut whole,
        incremental,
        engine,
    } = identity_of(&probe, &launched_workers, (t, api_key.as_ref()), ends).await?;
    let shown = |v: &str| {
        crate::text::printable(v)
            .chars()
            .take(200)
            .collect::<String>()
    };
    let version = version.as_deref().map(shown);
    if let Some(router) = &launched {
        whole.extend(super::launched::launch_config(
            t.launch.as_ref(),
            place.variant,
            router,
            &launched_workers,
        ));
    }
    let fingerprint = crate::load::fingerprint::fingerprint(
        t.api,
        served.as_deref().unwrap_or(&model),
        version.as_deref(),
        &config,
        &whole,
    );
    let client = Client::new(&base, t.api, &model, api_key.clone(), t.timeouts)?
        .with_limits(t.limits)
        .with_admin_key(admin_key)
        .with_incremental_output(incremental)
        .with_token_ids(engine.is_some_and(|e| e.lists_token_ids(t.api)))
        .with_adapter_field(engine.map_or(AdapterField::Both, Engine::adapter_field))
        .with_metrics_from(worker_clients(
            &launched_workers,
            (t, &model),
            api_key.as_ref(),
        )?);
    Ok(Connected {
        client,
        description,
        fingerprint,
        config: whole,
        sim,
        server: launched,
        workers: launched_workers,
        model_reported: served.is_some(),
        model_id: served.unwrap_or(model),
        pinned_model: t.model.clone(),
        server_version: version,
        scorer: engine.and_then(Engine::scorer),
        discovery_ends: ends,
    })
}

/// What the server at `probe` says it is — or, a router being its own
/// document's subject and not its engines', what the first of its
/// `workers` says — by discovery's deadline `ends`; nothing where none
/// answers.
async fn identity_of(
    probe: &Client,
    workers: &[Worker],
    (t, api_key): (&crate::suite::Target, Option<&String>),
    ends: tokio::time::Instant,
) -> Result<Identity, CallError> {
    let worker = worker_clients(&workers[..workers.len().min(1)], (t, ""), api_key)?;
    let asked = worker.first().map_or(probe, |(_, c)| c);
    Ok(tokio::time::timeout_at(ends, server_identity(asked))
        .await
        .unwrap_or_default())
}

/// GET a path as JSON; `Ok(None)` for a non-2xx answer or a body that is not JSON.
async fn get_json(client: &Client, path: &str) -> Result<Option<serde_json::Value>, CallError> {
    Ok(client
        .get_text(path)
        .await?
        .and_then(|text| crate::client::stream::document(&text).ok()))
}

/// What the server says it is.
#[derive(Debug, Default)]
struct Identity {
    /// Its version.
    version: Option<String>,
    /// The configuration it reports (`dialect::server_config`).
    config: Vec<(&'static str, String)>,
    /// The whole of it (SGLang's: `fingerprint::sglang_config`).
    whole: crate::load::fingerprint::Config,
    /// It sends `/generate`'s text as segments
    /// (`incremental_streaming_output`).
    incremental: bool,
    /// Which engine it is, by the path that answered.
    engine: Option<Engine>,
}

/// The engines servegate knows by the document that gave their version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    /// `/server_info` or `/get_server_info`.
    Sglang,
    /// `/version` (asked after SGLang's paths), and `/v1/models` saying
    /// `owned_by: vllm`.
    Vllm,
    /// `/props`.
    LlamaCpp,
}

impl Engine {
    /// The API through which it scores a prompt: SGLang's `/generate`
    /// (`return_logprob`), vLLM's completions (`prompt_logprobs`); none for
    /// llama.cpp's `/completion`, which scores generated tokens only.
    fn scorer(self) -> Option<Api> {
        match self {
            Engine::Sglang => Some(Api::SglangGenerate),
            Engine::Vllm => Some(Api::OpenAiCompletions),
            Engine::LlamaCpp => None,
        }
    }

    /// Where its requests name a LoRA adapter.
    fn adapter_field(self) -> AdapterField {
        match self {
            Engine::Sglang => AdapterField::LoraPath,
            Engine::Vllm | Engine::LlamaCpp => AdapterField::Model,
        }
    }

    /// Whether its streams of `api` list each chunk's token ids when asked
    /// (`return_token_ids`): SGLang 0.5.23's completions
    /// (`serving_completions.py`; its chat refuses the field when
    /// streaming, `serving_chat.py`), vLLM 0.32's chat and completions.
    fn lists_token_ids(self, api: Api) -> bool {
        match self {
            Engine::Sglang => api == Api::OpenAiCompletions,
            Engine::Vllm => matches!(api, Api::OpenAiChat | Api::OpenAiCompletions),
            Engine::LlamaCpp => false,
        }
    }
}

/// The server's version — SGLang's `/server_info` (or the older
/// `/get_server_info`), vLLM's `/version`, llama.cpp's `/props`
/// `build_info` — and, from SGLang's document, its configuration and
/// streaming mode; nothing when none answers.
async fn server_identity(client: &Client) -> Identity {
    for (path, pointer, engine) in [
        ("/server_info", "/version", Engine::Sglang),
        ("/get_server_info", "/version", Engine::Sglang),
        ("/version", "/version", Engine::Vllm),
        ("/props", "/build_info", Engine::LlamaCpp),
    ] {
        if let Ok(Some(body)) = get_json(client, path).await
            && let Some(v) = body.pointer(pointer).and_then(|v| v.as_str())
        {
            let config = crate::client::dialect::server_config(&body);
            // `/version` answers on other servers too (TensorRT-LLM's
            // `trtllm-serve`): vLLM is the one whose models it owns.
            let engine = match engine {
                Engine::Vllm => owned_by_vllm(client).await.then_some(engine),
                _ => Some(engine),
            };
            let whole = if engine == Some(Engine::Sglang) {
                crate::load::fingerprint::sglang_config(&body)
            } else {
                crate::load::fingerprint::Config::new()
            };
            return Identity {
                version: Some(v.to_owned()),
                config,
                whole,
                incremental: body
                    .get("incremental_streaming_output")
                    .and_then(serde_json::Value::as_bool)
                    .unwrap_or(false),
                engine,
            };
        }
    }
    Identity::default()
}

/// Whether `/v1/models` says vLLM owns the served model (`owned_by`, which
/// vLLM 0.32 sets to `vllm`).
async fn owned_by_vllm(client: &Client) -> bool {
    get_json(client, "/v1/models")
        .await
        .ok()
        .flatten()
        .is_some_and(|b| {
            b.pointer("/data/0/owned_by")
                .and_then(serde_json::Value::as_str)
                == Some("vllm")
        })
}

/// The served model id where the dialect names it (`/v1/models`
/// `data[0].id`, SGLang's `/get_model_info` `model_path`, llama.cpp's
/// `/props`); `Ok(None)` when the server answers but has none of them.
/// All by `ends`: once a GET was answered, a budget spent leaves the model
/// unknown; with none answered, the server is not answering.
async fn served_model(
    client: &Client,
    ends: tokio::time::Instant,
    budget: std::time::Duration,
) -> Result<Option<String>, CallError> {
    for (i, &(path, pointer)) in client.discovery().iter().enumerate() {
        let body = match tokio::time::timeout_at(ends, get_json(client, path)).await {
            Ok(body) => body?,
            Err(_) if i > 0 => return Ok(None),
            Err(_) => {
                return Err(CallError::new(
                    ErrorKind::Timeout(Deadline::FirstToken, budget),
                    format!("GET {path}"),
                ));
            }
        };
        if let Some(id) = body
            .as_ref()
            .and_then(|b| b.pointer(pointer))
            .and_then(|v| v.as_str())
        {
            return Ok(Some(id.to_owned()));
        }
    }
    Ok(None)
}
