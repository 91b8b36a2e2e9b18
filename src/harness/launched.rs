//! A launch's processes: its workers first, each ready, then the server
//! in front of them, and where their logs go.

use std::path::Path;

use crate::client::{CallError, Client};
use crate::server::Server;
use crate::suite::Variant;

/// Where a launched server's log of this run goes.
#[derive(Debug, Clone, Copy)]
pub struct LaunchPlace<'a> {
    /// The run's directory (`target/servegate/runs/<run>`).
    pub dir: &'a Path,
    /// The log's file stem (`<suite>` or `<suite>-<variant>`).
    pub label: &'a str,
    /// The variant whose overrides apply.
    pub variant: Option<&'a Variant>,
}

/// Why a launch did not come up: a worker's start or readiness, or the
/// server's own, in the words of the process floor.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A worker could not be started or was not ready.
    #[error("worker `{name}`: {why}")]
    Worker {
        /// Its name.
        name: String,
        /// What went wrong.
        why: String,
    },
    /// The server in front (or alone) could not be started or was not
    /// ready, or no port was free for it.
    #[error("{0}")]
    Server(String),
}

/// A server a launched router stands in front of.
#[derive(Debug)]
pub struct Worker {
    /// Its name in the suite.
    pub name: String,
    /// Its process.
    pub server: Server,
}

/// Prints how long a launched server took to be ready.
fn announce_ready(label: &str, s: &Server) {
    let tl = s.timeline();
    eprintln!(
        "servegate: `{label}` ready after {:.1}s (port open after {:.1}s)",
        tl.ready_s.unwrap_or_default(),
        tl.port_open_s.unwrap_or_default()
    );
}

/// Starts the workers of `launch` (a variant's environment on each, its
/// arguments being the router's), their logs in `<label>.workers/` (no
/// name of a variant can make another's log that), and waits until every
/// one is ready; the first that is not, in time, fails the launch in its
/// name (the others, dropped, are stopped).
async fn launch_workers(
    launch: &crate::suite::Launch,
    place: LaunchPlace<'_>,
    suite_dir: &Path,
    names: &[(String, String)],
) -> Result<Vec<Worker>, LaunchError> {
    let env_only = place.variant.map(|v| Variant {
        args: Vec::new(),
        ..v.clone()
    });
    let dir = place.dir.join(format!("{}.workers", place.label));
    let mut workers = Vec::new();
    for w in &launch.workers {
        let server = Server::spawn(
            &w.launch,
            env_only.as_ref(),
            (suite_dir, &dir, &w.name),
            names,
        )
        .map_err(|why| LaunchError::Worker {
            name: w.name.clone(),
            why,
        })?;
        let line = format!(
            "servegate: launched worker `{}` of `{}`: `{}` (log {})",
            w.name,
            place.label,
            server.command_line(),
            server.log_path.display()
        );
        eprintln!("{}", crate::text::for_log(&line));
        workers.push(Worker {
            name: w.name.clone(),
            server,
        });
    }
    let waits = workers
        .iter()
        .zip(&launch.workers)
        .map(|(w, spec)| async move {
            w.server
                .wait_ready(&spec.launch.ready)
                .await
                .map_err(|why| LaunchError::Worker {
                    name: w.name.clone(),
                    why,
                })?;
            announce_ready(
                &format!("worker `{}` of `{}`", w.name, place.label),
                &w.server,
            );
            Ok::<(), LaunchError>(())
        });
    futures_util::future::try_join_all(waits).await?;
    Ok(workers)
}

/// Starts a launch — its workers first, each ready, then the server in
/// front of them — and waits until it is ready: the server, its workers,
/// and what the run prints of it. Each `{free_port.NAME}` is one port
/// for the whole launch, wherever it is written.
pub(super) async fn launch_target(
    launch: &crate::suite::Launch,
    place: LaunchPlace<'_>,
    suite_dir: &Path,
) -> Result<(Server, Vec<Worker>, String), LaunchError> {
    let texts = |l: &crate::suite::Launch| {
        l.command
            .iter()
            .chain(l.env.iter().map(|(_, v)| v))
            .cloned()
            .collect::<Vec<String>>()
    };
    let mut all = texts(launch);
    all.extend(launch.workers.iter().flat_map(|w| texts(&w.launch)));
    all.extend(place.variant.into_iter().flat_map(|v| {
        v.args
            .iter()
            .chain(v.env.iter().map(|(_, val)| val))
            .cloned()
    }));
    let mut names =
        crate::server::free_ports(all.iter(), &launch.host).map_err(LaunchError::Server)?;
    let workers = launch_workers(launch, place, suite_dir, &names).await?;
    let urls: Vec<(String, String)> = workers
        .iter()
        .map(|w| (w.name.clone(), w.server.base_url.clone()))
        .collect();
    names.extend(
        urls.iter()
            .map(|(name, url)| (format!("{{worker.{name}}}"), url.clone())),
    );
    let s = Server::spawn(
        launch,
        place.variant,
        (suite_dir, place.dir, place.label),
        &names,
    )
    .map_err(LaunchError::Server)?;
    let line = format!(
        "servegate: launched `{}` for `{}` (log {})",
        s.command_line(),
        place.label,
        s.log_path.display()
    );
    eprintln!("{}", crate::text::for_log(&line));
    s.wait_ready(&launch.ready)
        .await
        .map_err(LaunchError::Server)?;
    announce_ready(place.label, &s);
    let mut what = format!("LAUNCHED server `{}` at {}", s.command_line(), s.base_url);
    if !workers.is_empty() {
        let each: Vec<String> = urls.iter().map(|(n, u)| format!("`{n}` at {u}")).collect();
        what = format!(
            "{what} in front of {} workers ({})",
            each.len(),
            each.join(", ")
        );
    }
    Ok((s, workers, what))
}

/// A client of each worker's own address, by name, its requests naming
/// `model` (the liveness question's one token asks for the suite's).
pub(super) fn worker_clients(
    workers: &[Worker],
    (t, model): (&crate::suite::Target, &str),
    api_key: Option<&String>,
) -> Result<Vec<(String, Client)>, CallError> {
    workers
        .iter()
        .map(|w| {
            Client::new(
                &w.server.base_url,
                t.api,
                model,
                api_key.cloned(),
                t.timeouts,
            )
            .map(|c| (w.name.clone(), c.with_limits(t.limits)))
        })
        .collect()
}

/// What a launch adds to the configuration its figures are keyed by: the
/// server's environment (`env:NAME`); and with workers, each one's
/// environment and command (`worker.NAME:env:…`, `worker.NAME:command`),
/// their names (`launch:workers`), and the router's command with a
/// variant's arguments (`launch:router`) — each as a launch command is
/// read ([`crate::load::fingerprint::argv_config`]: addresses and ports
/// left out, paths by their file names, secrets by their presence).
/// Another routing policy, or one worker more, is another configuration,
/// not the same one's history.
pub(super) fn launch_config(
    launch: Option<&crate::suite::Launch>,
    variant: Option<&Variant>,
    router: &Server,
    workers: &[Worker],
) -> crate::load::fingerprint::Config {
    use crate::load::fingerprint::argv_config;
    let mut config = router.env_config.clone();
    let Some(launch) = launch.filter(|_| !workers.is_empty()) else {
        return config;
    };
    for (w, spec) in workers.iter().zip(&launch.workers) {
        config.extend(
            w.server
                .env_config
                .iter()
                .map(|(k, v)| (format!("worker.{}:{k}", w.name), v.clone())),
        );
        config.insert(
            format!("worker.{}:command", w.name),
            argv_config(&spec.launch.command),
        );
    }
    let names: Vec<&str> = workers.iter().map(|w| w.name.as_str()).collect();
    config.insert("launch:workers".to_owned(), names.join(","));
    let mut command = launch.command.clone();
    command.extend(variant.iter().flat_map(|v| v.args.iter().cloned()));
    config.insert("launch:router".to_owned(), argv_config(&command));
    config
}
