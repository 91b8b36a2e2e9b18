//! A server process servegate launches and owns: its own process group,
//! its output in a log file, readiness polled with a deadline, death and
//! fatal log lines noticed, and teardown (SIGTERM to the group, a grace
//! period, SIGKILL) on every way out — the end of its suite, a panic
//! (`Drop`), Ctrl-C or SIGTERM ([`crate::process::reaper`]).

pub mod log;
mod ports;

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::process::{ExitInfo, reaper, tree};
use crate::suite::{Api, Launch, Ready, Timeouts, Variant};

use log::{FatalLine, Scanner, TAIL_LINES};
pub(crate) use ports::free_ports;
use ports::{fill, free_port};

/// How long a server's exit waits for its output to reach its log.
const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

/// When start-up milestones were reached, since the spawn.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Timeline {
    /// Seconds since the Unix epoch at the spawn.
    pub spawned_unix: u64,
    /// The port accepted a connection.
    pub port_open_s: Option<f64>,
    /// The readiness path answered 2xx.
    pub ready_s: Option<f64>,
}

/// A launched server.
#[derive(Debug)]
pub struct Server {
    /// The argv it was started with, values of secret-looking options
    /// (`--api-key X`, `--hf-token=X`) redacted.
    pub argv: Vec<String>,
    /// The environment variables servegate set, values of secret-looking
    /// names redacted.
    pub env_shown: Vec<(String, String)>,
    /// The environment it runs with that configures it (NCCL's, SGLang's,
    /// CUDA's, vLLM's; `fingerprint::launch_env`): part of its
    /// configuration's fingerprint.
    pub env_config: crate::load::fingerprint::Config,
    /// Its stdout and stderr.
    pub log_path: PathBuf,
    /// `http://host:port`.
    pub base_url: String,
    addr: String,
    pid: u32,
    spawned: Instant,
    grace: Duration,
    child: Mutex<Child>,
    exit: Mutex<Option<ExitInfo>>,
    scanner: Mutex<Scanner>,
    timeline: Mutex<Timeline>,
    /// `SERVEGATE_LAUNCH` of every process it starts.
    marker: String,
    /// The threads copying its output into the log.
    pumps: log::Pumps,
}

use crate::secrets::is_secret_name as is_secret;

/// `argv` for output and records: the value of an option whose name looks
/// secret is `<redacted>`.
fn redact_argv(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut hide_next = false;
    for a in argv {
        if hide_next {
            out.push("<redacted>".to_owned());
            hide_next = false;
            continue;
        }
        match a.strip_prefix("--").map(|o| o.split_once('=')) {
            Some(Some((name, _))) if is_secret(name) => out.push(format!("--{name}=<redacted>")),
            Some(None) if is_secret(a) => {
                out.push(a.clone());
                hide_next = true;
            }
            _ => out.push(a.clone()),
        }
    }
    out
}

/// Registers the secret values of a launch with the scrubber: those of
/// secret-looking environment variables and options.
fn register_secrets(argv: &[String], env: &[(String, String)]) {
    for (k, v) in env {
        if is_secret(k) {
            crate::secrets::add(v);
        }
    }
    for (shown, real) in redact_argv(argv).iter().zip(argv) {
        if shown == "<redacted>" {
            crate::secrets::add(real);
        } else if shown.ends_with("=<redacted>")
            && let Some((_, v)) = real.split_once('=')
        {
            crate::secrets::add(v);
        }
    }
}

/// A word as a shell would need it typed: anything but
/// `[A-Za-z0-9_./:=,@%+-]` single-quoted.
fn shell_word(a: &str) -> String {
    let plain = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=,@%+-".contains(c));
    if plain {
        a.to_owned()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

/// An argv as a shell would need it typed.
fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_word(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `program` can be started: a path to a file, or a name on PATH.
fn runnable(program: &str, cwd: &Path) -> bool {
    if program.contains('/') {
        let p = Path::new(program);
        return if p.is_absolute() {
            p.is_file()
        } else {
            cwd.join(p).is_file()
        };
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

/// How long a readiness answer must have been held to say the server was
/// up and tried: SGLang 0.5.23 answers `/health_generate` at once while it
/// starts (`ServerStatus.Starting`), after its 1 s check when a token came,
/// and with 503 after `SGLANG_HEALTH_CHECK_TIMEOUT` (20 s) when none did
/// (`srt/entrypoints/http_server.py:722-799`).
const HELD: Duration = Duration::from_secs(5);

/// Held refusals in a row that name the server hung: a minute at SGLang's
/// 20 s, where one or two could be a first batch compiling.
const HELD_IN_A_ROW: usize = 3;

/// Counts a refused readiness answer asked at `asked`: one held past
/// [`HELD`] adds to the run, a quick one ends it.
fn held_or_not(held: &mut Vec<f64>, asked: Instant) {
    let took = asked.elapsed();
    if took >= HELD {
        held.push(took.as_secs_f64());
    } else {
        held.clear();
    }
}

impl Server {
    /// Starts `launch` (with a variant's overrides) in its own process group,
    /// its life tied to servegate's, its output scrubbed into
    /// `<dir>/<label>.log`; `names` are the placeholders its command and
    /// env hold beside `{host}` and `{port}` (`{worker.NAME}`,
    /// `{free_port.NAME}`) with what each stands for.
    pub fn spawn(
        launch: &Launch,
        variant: Option<&Variant>,
        (suite_dir, dir, label): (&Path, &Path, &str),
        names: &[(String, String)],
    ) -> Result<Self, String> {
        let port = match launch.port {
            // Something already listening there would answer the readiness
            // checks and be measured in the server's place.
            Some(p) => match std::net::TcpListener::bind((launch.host.as_str(), p)) {
                Ok(_) => p,
                Err(e) => {
                    return Err(format!(
                        "port {p} on {} is not free ({e}): another server there would be measured in this one's place",
                        launch.host
                    ));
                }
            },
            None => free_port(&launch.host)?,
        };
        let host = launch.host.as_str();
        let fill = |a: &str| fill(a, host, port, names);
        let mut argv: Vec<String> = launch.command.iter().map(|a| fill(a)).collect();
        let mut env: Vec<(String, String)> = launch
            .env
            .iter()
            .map(|(k, v)| (k.clone(), fill(v)))
            .collect();
        if let Some(v) = variant {
            argv.extend(v.args.iter().map(|a| fill(a)));
            for (k, val) in &v.env {
                env.retain(|(name, _)| name != k);
                env.push((k.clone(), fill(val)));
            }
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
        let log_path = dir.join(format!("{label}.log"));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("could not create {}: {e}", log_path.display()))?;
        register_secrets(&argv, &env);
        let cwd = launch.cwd.as_deref().unwrap_or(suite_dir);
        if !runnable(&argv[0], cwd) {
            return Err(format!(
                "could not start `{}`: no such program (not a file, and not on PATH)",
                argv[0]
            ));
        }
        let marker = tree::new_marker();
        let mut cmd = tree::command(&argv);
        cmd.envs(env.iter().map(|(k, v)| (k, v)))
            .env(tree::MARKER, &marker)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt as _;
            cmd.process_group(0);
        }
        let mut child =
            tree::spawn(cmd).map_err(|e| format!("could not start `{}`: {e}", argv.join(" ")))?;
        let pid = child.id();
        reaper::register(pid);
        let streams: Vec<Box<dyn std::io::Read + Send>> = [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        .collect();
        let pumps = log::pump(log, streams);
        let argv: Vec<String> = redact_argv(&argv)
            .iter()
            .map(|a| crate::secrets::scrub(a).into_owned())
            .collect();
        let env_config = crate::load::fingerprint::launch_env(
            std::env::vars(),
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        );
        let env_shown = env
            .into_iter()
            .map(|(k, v)| {
                let v = if is_secret(&k) {
                    crate::secrets::REDACTED.to_owned()
                } else {
                    crate::secrets::scrub(&v).into_owned()
                };
                (k, v)
            })
            .collect();
        let spawned_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let addr = format!("{host}:{port}");
        Ok(Self {
            argv,
            env_shown,
            env_config,
            base_url: format!("http://{addr}"),
            addr,
            scanner: Mutex::new(Scanner::new(
                log_path.clone(),
                launch.fatal_log_patterns.clone(),
            )),
            log_path,
            pid,
            spawned: Instant::now(),
            grace: launch.grace,
            child: Mutex::new(child),
            exit: Mutex::new(None),
            timeline: Mutex::new(Timeline {
                spawned_unix,
                ..Timeline::default()
            }),
            marker,
            pumps,
        })
    }

    /// How it was started, as a shell would need it typed: the
    /// environment servegate set (`NAME=value …`, secrets redacted), then
    /// the argv.
    pub(crate) fn command_line(&self) -> String {
        let env = self
            .env_shown
            .iter()
            .map(|(k, v)| format!("{k}={} ", shell_word(v)));
        env.chain([shell_line(&self.argv)]).collect()
    }

    /// The start-up milestones so far.
    pub fn timeline(&self) -> Timeline {
        self.timeline.lock().map(|t| *t).unwrap_or_default()
    }

    /// How the process ended, if it has (once it has, with its output all
    /// in the log, or after [`OUTPUT_DRAIN`] where a process left behind
    /// holds its pipes open).
    pub fn exited(&self) -> Option<ExitInfo> {
        let mut exit = self.exit.lock().ok()?;
        if exit.is_none()
            && let Ok(mut child) = self.child.lock()
        {
            *exit = peek(self.pid, &mut child);
            if exit.is_some() {
                // What it wrote as it died goes into its log before anyone
                // reads it for a fatal line or a tail: on a busy host the
                // copier threads can be behind the exit (a NaN line written
                // just before an abort was missing from the message).
                self.pumps.wait(OUTPUT_DRAIN);
            }
        }
        *exit
    }

    /// A fatal pattern in the log lines written since the last look.
    pub(crate) fn fatal_line(&self) -> Option<FatalLine> {
        self.scanner.lock().ok()?.scan()
    }

    /// The log's last lines, introduced by its path.
    pub fn tail(&self) -> String {
        format!(
            "  server log {}, last {TAIL_LINES} lines:\n{}",
            self.log_path.display(),
            log::tail(&self.log_path, TAIL_LINES)
        )
    }

    /// A fatal line, in the words of a failure message.
    pub(crate) fn describe_fatal(&self, f: &FatalLine) -> String {
        format!(
            "fatal log pattern `{}` at {}:{}: {}",
            f.pattern,
            self.log_path.display(),
            f.line_no,
            f.line
        )
    }

    /// Polls `ready.path` until it answers 2xx; fails as soon as the process
    /// exits or a fatal pattern appears, and at the deadline.
    pub async fn wait_ready(&self, ready: &Ready) -> Result<(), String> {
        let deadline = self.spawned + ready.timeout;
        let poll = Timeouts {
            connect: Duration::from_secs(2),
            total: Duration::from_secs(30),
            ..Timeouts::default()
        };
        let client = Client::new(&self.base_url, Api::OpenAiChat, "", None, poll)
            .map_err(|e| e.to_string())?;
        let mut last = "nothing (the port never opened)".to_owned();
        let mut said = Instant::now();
        // The answers in a row the server held before refusing (seconds
        // each): it is up, and tried to generate, and nothing came.
        let mut held: Vec<f64> = Vec::new();
        loop {
            if let Some(exit) = self.exited() {
                return Err(format!(
                    "the server {exit} before it was ready ({:.1}s after the start)\n{}",
                    self.spawned.elapsed().as_secs_f64(),
                    self.tail()
                ));
            }
            if let Some(f) = self.fatal_line() {
                return Err(format!(
                    "{} (before the server was ready, {:.1}s after the start)\n{}",
                    self.describe_fatal(&f),
                    self.spawned.elapsed().as_secs_f64(),
                    self.tail()
                ));
            }
            if self.timeline().port_open_s.is_none()
                && tokio::time::timeout(
                    Duration::from_secs(1),
                    tokio::net::TcpStream::connect(&self.addr),
                )
                .await
                .is_ok_and(|c| c.is_ok())
                && let Ok(mut t) = self.timeline.lock()
            {
                t.port_open_s = Some(self.spawned.elapsed().as_secs_f64());
            }
            if let Some(open) = self.timeline().port_open_s {
                if last.ends_with("(the port never opened)") {
                    last = format!("nothing yet (the port opened after {open:.1}s)");
                }
                let left = deadline.saturating_duration_since(Instant::now());
                let asked = Instant::now();
                match tokio::time::timeout(left, client.get(&ready.path)).await {
                    Ok(Ok((status, _))) if (200..300).contains(&status) => {
                        if let Ok(mut t) = self.timeline.lock() {
                            t.ready_s = Some(self.spawned.elapsed().as_secs_f64());
                        }
                        return Ok(());
                    }
                    Ok(Ok((status, body))) => {
                        let body = body.trim();
                        last = if body.is_empty() {
                            status.to_string()
                        } else {
                            format!("{status} {}", crate::client::error::excerpt(body, 200))
                        };
                        held_or_not(&mut held, asked);
                    }
                    Ok(Err(e)) => {
                        last = e.to_string();
                        held_or_not(&mut held, asked);
                    }
                    // Cut short by the deadline: a GET that never answered
                    // says so; an earlier answer stands.
                    Err(_) if last.starts_with("nothing yet") => {
                        let waited = asked.elapsed().as_secs_f64();
                        last = if waited < 1.0 {
                            format!(
                                "nothing: the port opened only {open:.1}s after the start, as the deadline came"
                            )
                        } else {
                            format!(
                                "nothing: the port is open, and GET {} was still waiting for an answer after {waited:.1}s (a hung scheduler answers no generation)",
                                ready.path
                            )
                        };
                    }
                    Err(_) => {}
                }
            }
            // Named hung only where the process lives and logged nothing
            // fatal: the next turn names an exit or a fatal line first.
            if held.len() >= HELD_IN_A_ROW && self.exited().is_none() && self.fatal_line().is_none()
            {
                let each: Vec<String> = held.iter().map(|s| format!("{s:.1}s")).collect();
                let sglang = if ready.path.ends_with("/health_generate") {
                    "; SGLang answers so once it is up and its scheduler gave no token for SGLANG_HEALTH_CHECK_TIMEOUT (20 s by default), and at once while it starts: its scheduler is hung"
                } else {
                    ""
                };
                return Err(format!(
                    "the server is up but generates nothing: GET {} was held {} without a 2xx, {} times in a row ({:.1}s after the start; last: {last}){sglang}\n{}",
                    ready.path,
                    each.join(", "),
                    held.len(),
                    self.spawned.elapsed().as_secs_f64(),
                    self.tail()
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!(
                    "the server is not ready after {}: GET {} last answered: {last}\n{}",
                    humantime::format_duration(ready.timeout),
                    ready.path,
                    self.tail()
                ));
            }
            if said.elapsed() >= Duration::from_secs(60) {
                let line = format!(
                    "servegate: still waiting for {}{} ({:.0}s; last answer: {last})",
                    self.base_url,
                    ready.path,
                    self.spawned.elapsed().as_secs_f64()
                );
                eprintln!("{}", crate::text::for_log(&line));
                said = Instant::now();
            }
            tokio::time::sleep(ready.interval.min(deadline - now)).await;
        }
    }

    /// Stops the process group: SIGTERM, up to the grace period, SIGKILL.
    /// Returns how the server process ended. Idempotent.
    pub fn stop(&self) -> Option<ExitInfo> {
        let Ok(mut child) = self.child.lock() else {
            return None;
        };
        let mut exit = self.exit.lock().ok()?;
        // The server is reaped last: while it is a zombie its pid, and so
        // its process group's id, cannot be taken by another process, which
        // the group kills below would otherwise reach.
        if exit.is_none() {
            *exit = peek(self.pid, &mut child);
        }
        if exit.is_none() {
            reaper::signal_group(self.pid, reaper::Stop::Term, &mut child);
            *exit = wait_ended(self.pid, &mut child, self.grace);
            if exit.is_none() {
                reaper::signal_group(self.pid, reaper::Stop::Kill, &mut child);
                *exit = wait_ended(self.pid, &mut child, Duration::from_secs(5));
            }
        }
        // What the server started and left behind goes too: in its group,
        // and what left the group (a `setsid` daemon) found by its marker
        // or as an orphan re-parented to servegate.
        if reaper::unregister(self.pid) {
            reaper::signal_group(self.pid, reaper::Stop::Kill, &mut child);
            let left = tree::leftovers(self.pid, &self.marker, &reaper::live());
            if !left.is_empty() {
                tree::kill(&left);
            }
        }
        if let Ok(status) = child.wait() {
            exit.get_or_insert(ExitInfo::new(status));
        }
        // Its output is all in the log once the pipes closed.
        self.pumps.wait(Duration::from_secs(2));
        *exit
    }
}

/// How the server ended, if it has, without reaping it (Linux): its pid
/// stays its own until [`Server::stop`] is done with its group.
#[cfg(target_os = "linux")]
fn peek(pid: u32, _child: &mut Child) -> Option<ExitInfo> {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    use std::os::unix::process::ExitStatusExt as _;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).ok()?);
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::Pid(pid), flags).ok()? {
        WaitStatus::Exited(_, code) => Some(ExitInfo::new(ExitStatus::from_raw(code << 8))),
        WaitStatus::Signaled(_, sig, core) => Some(ExitInfo::new(ExitStatus::from_raw(
            sig as i32 | if core { 0x80 } else { 0 },
        ))),
        _ => None,
    }
}

/// How the server ended, if it has (reaping it: no `waitid` here).
#[cfg(not(target_os = "linux"))]
fn peek(_pid: u32, child: &mut Child) -> Option<ExitInfo> {
    child.try_wait().ok().flatten().map(ExitInfo)
}

/// Waits up to `limit` for the server to end.
fn wait_ended(pid: u32, child: &mut Child, limit: Duration) -> Option<ExitInfo> {
    let until = Instant::now() + limit;
    loop {
        if let Some(e) = peek(pid, child) {
            return Some(e);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests;
