//! What a harness run is asked to do and what it found: [`RunOptions`], the
//! environment's settings of every gate (`SERVEGATE_CLIENT_THREADS`,
//! `SERVEGATE_CLIENT_LIMITED`) and the run's [`Outcome`] with its exit.

use std::path::PathBuf;

use libtest_mimic::Conclusion;

use crate::exit::Exit;
use crate::record;

/// The environment variable that lists suite files or directories
/// (separated like `PATH`), replacing the default `suites/`.
pub const SUITES_ENV: &str = "SERVEGATE_SUITES";

/// The client threads of every gate (`--client-threads`).
pub const CLIENT_THREADS_ENV: &str = "SERVEGATE_CLIENT_THREADS";

/// What every gate whose client was the bottleneck does (`--client-limited`).
pub const CLIENT_LIMITED_ENV: &str = "SERVEGATE_CLIENT_LIMITED";

/// The variable that makes a run say in full what it says in short.
pub const VERBOSE_ENV: &str = "SERVEGATE_VERBOSE";

/// `SERVEGATE_VERBOSE` as `servegate run --verbose` reads it (clap's
/// `FalseyValueParser`): set, and not empty, `0`, `false`, `no`, `off`,
/// `n` or `f`.
pub fn verbose_from_env() -> bool {
    std::env::var(VERBOSE_ENV).is_ok_and(|v| {
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "" | "0" | "false" | "no" | "off" | "n" | "f"
        )
    })
}

/// A setting in the environment that is not one: a usage error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?}: expected {expected}")]
pub struct EnvError {
    /// The variable.
    pub var: &'static str,
    /// What it holds.
    pub value: String,
    /// What it may hold.
    pub expected: &'static str,
}

impl EnvError {
    /// The exit code of a run it stops: a usage error's.
    pub fn exit(&self) -> Exit {
        Exit::Usage
    }
}

/// `SERVEGATE_CLIENT_LIMITED`: unset or empty is `None`; `fail` or `warn`.
pub fn client_limited_from_env() -> Result<Option<crate::suite::OnClientLimited>, EnvError> {
    match std::env::var(CLIENT_LIMITED_ENV) {
        Ok(v) if !v.trim().is_empty() => crate::suite::OnClientLimited::parse(v.trim())
            .map(Some)
            .ok_or(EnvError {
                var: CLIENT_LIMITED_ENV,
                value: v,
                expected: "`fail` or `warn`",
            }),
        _ => Ok(None),
    }
}

/// `SERVEGATE_CLIENT_THREADS`: unset or empty is `None`; anything but a
/// count from 1 to 256 is an error that says so.
pub fn client_threads_from_env() -> Result<Option<u32>, EnvError> {
    match std::env::var(CLIENT_THREADS_ENV) {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<u32>() {
            Ok(n) if (1..=256).contains(&n) => Ok(Some(n)),
            _ => Err(EnvError {
                var: CLIENT_THREADS_ENV,
                value: v,
                expected: "a number of client threads from 1 to 256",
            }),
        },
        _ => Ok(None),
    }
}

/// What a harness run found, beyond libtest's counts.
#[derive(Debug)]
pub struct Outcome {
    /// libtest's counts.
    pub conclusion: Conclusion,
    /// Suite files that failed to load.
    pub load_failures: usize,
    /// Suites whose target could not be reached.
    pub unreachable: usize,
    /// A signal (Ctrl-C, SIGTERM, SIGHUP) interrupted the run.
    pub interrupted: bool,
    /// The filter selected no trial (only with [`RunOptions::require_match`]);
    /// nothing ran.
    pub unmatched: bool,
}

impl Outcome {
    /// An outcome in which nothing ran.
    pub(super) fn nothing_ran(conclusion: Conclusion, load_failures: usize) -> Self {
        Self {
            conclusion,
            load_failures,
            unreachable: 0,
            interrupted: false,
            unmatched: false,
        }
    }

    /// The exit of `servegate run`: interrupted, a suite file invalid, a
    /// target unreachable, the filter selected nothing, a trial failed.
    pub fn exit(&self) -> Exit {
        if self.interrupted {
            Exit::Interrupted
        } else if self.load_failures > 0 {
            Exit::Usage
        } else if self.unreachable > 0 {
            Exit::Unreachable
        } else if self.unmatched {
            Exit::NoMatch
        } else {
            Exit::failed_if(self.conclusion.has_failed())
        }
    }
}

/// What the end of a run hands its record to (the report writers, which
/// the harness does not know: it only produces records).
pub type Publish = fn(&record::RunInfo, &record::RunRecord);

/// What a run is asked to do beyond its suites and libtest's arguments.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// `sim` or a server URL, overriding every suite's `base_url`.
    pub target: Option<String>,
    /// servegate's output directory (`--out-dir`), holding `runs/` and `latest/`.
    pub out_dir: Option<PathBuf>,
    /// Where the record goes at the end of the run, and when a signal
    /// interrupts it (the report writers).
    pub publish: Option<Publish>,
    /// `baseline save`: the run records baselines, so its `baseline`
    /// bounds are not applied.
    pub recording_baselines: bool,
    /// How many run directories `<out>/runs/` keeps, this run's included
    /// (0: all); older ones are removed at the end of the run.
    pub keep_runs: usize,
    /// `--client-threads`: the client threads of every gate, whatever the
    /// suites say.
    pub client_threads: Option<u32>,
    /// `--client-limited`: what every gate whose client was the bottleneck
    /// does, whatever the suites say.
    pub client_limited: Option<crate::suite::OnClientLimited>,
    /// A filter that selects no trial is an error (exit code 4), not an
    /// empty green run: `servegate run` and `list`. Not under `cargo test`,
    /// which passes one filter to every test binary of a package.
    pub require_match: bool,
    /// `--history`: where the run's figures are recorded (a SQLite file,
    /// or `off`) [default: `SERVEGATE_HISTORY`, else
    /// `<out>/history.sqlite`].
    pub history: Option<String>,
    /// `--verbose` / `SERVEGATE_VERBOSE`: say in full what is said in
    /// short (the sandbox's layers part by part).
    pub verbose: bool,
    /// Told every event of the run after servegate's own outputs (a
    /// library user's dashboard, a test that watches a run).
    pub listeners: super::Listeners,
}
