//! `servegate`: run suites (`run`), list their trials (`list`), or serve the
//! simulator (`sim`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use libtest_mimic::Arguments;
use servegate::harness::{self, target::TARGET_ENV};
use servegate::sim::{self, Profile};

/// A cargo-test-style runner of declarative test suites for LLM inference servers.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run suites: correctness probes first, then performance gates.
    ///
    /// Exit codes: 0 all passed, 1 a trial failed, 2 a suite file is invalid,
    /// 3 a target could not be reached.
    Run {
        /// Suite files or directories [default: suites/].
        suites: Vec<PathBuf>,
        /// `sim` or a server URL; overrides every suite's `base_url`.
        #[arg(long, env = TARGET_ENV)]
        target: Option<String>,
        /// libtest arguments after `--`: a filter, --exact, --skip, --list, …
        #[arg(last = true)]
        libtest: Vec<String>,
    },
    /// List the trials of suites without running them.
    List {
        /// Suite files or directories [default: suites/].
        suites: Vec<PathBuf>,
    },
    /// Serve the embedded simulator.
    Sim {
        /// Port to listen on (0 picks a free one).
        #[arg(long, default_value_t = 30000)]
        port: u16,
        /// Address to bind; loopback unless you mean otherwise.
        #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
        host: IpAddr,
        /// A simulator profile (fixtures/sim/*.yaml).
        #[arg(long)]
        profile: Option<PathBuf>,
    },
}

fn suites_or_default(suites: Vec<PathBuf>) -> Vec<PathBuf> {
    if suites.is_empty() {
        vec![PathBuf::from("suites")]
    } else {
        suites
    }
}

fn libtest_args(extra: impl IntoIterator<Item = String>) -> Arguments {
    Arguments::from_iter(std::iter::once("servegate".to_owned()).chain(extra))
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run {
            suites,
            target,
            libtest,
        } => {
            let outcome = harness::run(
                &suites_or_default(suites),
                target.as_deref(),
                libtest_args(libtest),
            );
            outcome.cli_exit_code()
        }
        Command::List { suites } => {
            let outcome = harness::run(
                &suites_or_default(suites),
                None,
                libtest_args(["--list".to_owned()]),
            );
            outcome.cli_exit_code()
        }
        Command::Sim {
            port,
            host,
            profile,
        } => serve_sim(SocketAddr::new(host, port), profile.as_deref()),
    }
}

fn serve_sim(addr: SocketAddr, profile: Option<&Path>) -> ExitCode {
    let profile = match profile.map(Profile::load).transpose() {
        Ok(p) => p.unwrap_or_default(),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let model = profile.model.clone();
        match sim::spawn(profile, addr).await {
            Ok(running) => {
                println!(
                    "servegate sim: serving model {model:?} at {} (Ctrl-C to stop)",
                    running.base_url()
                );
                let _ = tokio::signal::ctrl_c().await;
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: failed to bind {addr}: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
