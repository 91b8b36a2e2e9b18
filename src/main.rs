//! `servegate`: run suites (`run`), list their trials (`list`), write a
//! first one (`init`), print their schema (`schema`), or serve the
//! simulator (`sim`).
//!
//! This file holds the commands and their dispatch; the arguments and glue
//! of the larger ones (`sim`, `report`, `history`, `import`, `baseline`,
//! `bench-client`) are in `src/cli/`.

/// The binary's own modules: commands whose arguments and glue are a file
/// of their own.
mod cli {
    pub mod baseline;
    pub mod bench;
    pub mod history;
    pub mod import;
    pub mod manual;
    pub mod report;
    pub mod sim;
}

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use cli::baseline::{BaselineAction, accept_baselines};
use cli::bench::{bench_client, bench_keeping};
use cli::import::{ImportWhat, import};
use cli::report::{ReportMerge, merge_reports, report};
use cli::sim::{SimArgs, serve_sim};
use libtest_mimic::Arguments;
use servegate::bench::{self, BenchOptions};
use servegate::exit::Exit;
use servegate::harness::{self, RunOptions, target::TARGET_ENV};
use servegate::record::{DEFAULT_KEEP_RUNS, KEEP_RUNS_ENV};
use servegate::suite::OnClientLimited;

/// `--client-limited fail|warn`.
fn parse_client_limited(word: &str) -> Result<OnClientLimited, String> {
    OnClientLimited::parse(word).ok_or_else(|| format!("`{word}`: expected `fail` or `warn`"))
}

/// A cargo-test-style runner of declarative test suites for LLM inference servers.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `run` and `baseline save` take: the suites, the target, where the
/// run goes, the client's threads and its self-check, libtest's arguments.
#[derive(clap::Args)]
struct RunArgs {
    /// Suite files or directories [default: suites/].
    suites: Vec<PathBuf>,
    /// `sim` or a server URL; overrides every suite's `base_url`.
    #[arg(long, env = TARGET_ENV)]
    target: Option<String>,
    /// Where runs are written (`runs/<run>/`, `latest/`) [default: in the
    /// first suite's project, `target/servegate` in a Cargo project, else
    /// `.servegate`].
    #[arg(long, env = "SERVEGATE_OUT")]
    out_dir: Option<PathBuf>,
    /// Run directories kept under `runs/`, this one included; older
    /// ones are removed after the run (0: keep all).
    #[arg(long, env = KEEP_RUNS_ENV, default_value_t = DEFAULT_KEEP_RUNS, value_name = "N")]
    keep: usize,
    /// Client threads of every gate, whatever the suites say (each a
    /// runtime of its own owning a shard of the streams).
    #[arg(long, env = harness::CLIENT_THREADS_ENV, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    client_threads: Option<u32>,
    /// What a gate whose client was the bottleneck does, whatever the
    /// suites say: `fail`, or `warn` (figures marked client-limited,
    /// judged as they are) [default: the suite's `client_limited`].
    #[arg(long, env = harness::CLIENT_LIMITED_ENV, value_name = "fail|warn", value_parser = parse_client_limited)]
    client_limited: Option<OnClientLimited>,
    /// Where the run's figures are recorded: a SQLite file, or `off`
    /// [default: `history.sqlite` in the output directory].
    // Its value may be a PostgreSQL URL with a password: never shown.
    #[arg(long, env = servegate::history::HISTORY_ENV, value_name = "FILE|off", hide_env_values = true)]
    history: Option<String>,
    /// Say in full what a run says in short: the sandbox's layers part by
    /// part, with why one is missing.
    #[arg(long, short, env = harness::VERBOSE_ENV, value_parser = clap::builder::FalseyValueParser::new())]
    verbose: bool,
    /// libtest arguments after `--`: a filter, --exact, --skip, --list, …
    #[arg(last = true)]
    libtest: Vec<String>,
}

impl RunArgs {
    /// The suites, the options of their run, and libtest's arguments.
    fn split(self, recording_baselines: bool) -> (Vec<PathBuf>, RunOptions, Arguments) {
        (
            suites_or_default(self.suites),
            RunOptions {
                target: self.target,
                out_dir: self.out_dir,
                publish: Some(servegate::report::publish),
                recording_baselines,
                keep_runs: self.keep,
                client_threads: self.client_threads,
                client_limited: self.client_limited,
                require_match: true,
                history: self.history,
                verbose: self.verbose,
                listeners: servegate::harness::Listeners::default(),
            },
            libtest_args(self.libtest),
        )
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run suites: correctness probes first, then performance gates.
    ///
    /// Exit codes: 0 all passed, 1 a trial failed, 2 a suite file is invalid,
    /// 3 a target could not be reached, 4 the filter matches no trial.
    Run(RunArgs),
    /// Review pending snapshots: accept, reject or skip each new or changed
    /// answer (`<probe>.snap.new`), shown with its probe's suite line,
    /// prompt, model and a diff.
    Review {
        /// `.snap.new` files, directories holding them, or suite files
        /// [default: the `snapshots/` of the working directory's project].
        paths: Vec<PathBuf>,
        /// Pending answers downloaded from a CI run (its run directory or
        /// that directory's `snapshots/`), accepted into this project.
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
        /// Accept every pending answer without asking.
        #[arg(long, conflicts_with = "reject_all")]
        accept_all: bool,
        /// Reject every pending answer without asking.
        #[arg(long)]
        reject_all: bool,
    },
    /// Record baselines: the figures that `>= baseline * 0.95` thresholds
    /// compare with. Written only by this command, never by a run.
    Baseline {
        #[command(subcommand)]
        action: BaselineAction,
    },
    /// List the trials of suites without running them.
    ///
    /// Exit codes: 0 listed, 2 a suite file is invalid, 4 the filter
    /// matches no trial.
    List {
        /// Suite files or directories [default: suites/].
        suites: Vec<PathBuf>,
        /// libtest arguments after `--`: a filter, --exact, --skip.
        #[arg(last = true)]
        libtest: Vec<String>,
    },
    /// Write a first suite for a server: asks it what it serves, runs the
    /// starter probes and a short calibration (a single stream, then
    /// concurrent streams), and sets the gates' thresholds from what it
    /// measured.
    ///
    /// Exit codes: 0 written, 1 the calibration failed, 2 the file exists
    /// (without --force) or the target is invalid, 3 the server could not be
    /// reached.
    Init {
        /// `sim` or the server's URL.
        #[arg(long, env = TARGET_ENV, default_value = "sim")]
        target: String,
        /// The suite file to write.
        #[arg(long, default_value = "suites/my-server.yaml")]
        out: PathBuf,
        /// Overwrite the suite file if it exists.
        #[arg(long)]
        force: bool,
        /// The API the server speaks.
        #[arg(long, default_value = "openai-chat", value_parser = api_named)]
        api: servegate::suite::Api,
        /// Streams of the concurrency gate.
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
        concurrency: u32,
        /// What a calibration whose client was the bottleneck does: `fail`
        /// (the default against a server), or `warn`.
        #[arg(long, env = harness::CLIENT_LIMITED_ENV, value_name = "fail|warn", value_parser = parse_client_limited)]
        client_limited: Option<OnClientLimited>,
        /// Say in full what it says in short: the sandbox its code probes
        /// run in, part by part, with why one is missing.
        #[arg(long, short, env = harness::VERBOSE_ENV, value_parser = clap::builder::FalseyValueParser::new())]
        verbose: bool,
    },
    /// Turn another tool's benchmark results into a run record that
    /// baselines (`baseline accept`), reports and comparisons read.
    Import {
        #[command(subcommand)]
        what: ImportWhat,
    },
    /// Print the JSON Schema of suite files (for editors: completion, hover
    /// docs, errors as you type; `schemas/suite.schema.json` is this).
    Schema {
        /// Print the key reference instead: every object of a suite file and
        /// its keys, as Markdown (`docs/src/suite-keys.md` is this).
        #[arg(long)]
        keys: bool,
    },
    /// Print the completion script of a shell (e.g. `servegate completions
    /// bash > ~/.local/share/bash-completion/completions/servegate`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (`servegate man | man -l -`), or write it and
    /// one page per command into a directory.
    Man {
        /// Write `servegate.1` and `servegate-<command>.1` pages here.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Serve the embedded simulator.
    // A flag given twice takes its last value, as SGLang's argparse does
    // (a variant appends `--attention-backend` to a launch that has one).
    #[command(args_override_self = true)]
    Sim(Box<SimArgs>),
    /// Render a saved run record (`report.json`, or a run directory) as
    /// Markdown, JUnit XML, GitHub annotations, HTML or JSON; `report merge`
    /// joins the records of several nodes.
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Report {
        #[command(subcommand)]
        merge: Option<ReportMerge>,
        /// `target/servegate/runs/<run>/`, `target/servegate/latest/` or a `report.json`.
        #[arg(required = true)]
        path: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value = "md")]
        format: servegate::report::Format,
    },
    /// The history of runs: list its series, show one with its runs and
    /// commits, import earlier records and other tools' results.
    History(cli::history::HistoryArgs),
    /// Hold many streams against the simulator (in its own process) for a
    /// while, and check errors, memory, files and tasks stay flat.
    Soak {
        /// Concurrent streams.
        #[arg(long, default_value_t = 1000)]
        streams: u32,
        /// Windows run back to back, the client sampled after each.
        #[arg(long, default_value_t = 6)]
        windows: u32,
        /// Length of each window.
        #[arg(long, default_value = "10s", value_parser = servegate::units::parse_duration)]
        window: Duration,
    },
    /// Measure servegate's own client: CPU per token and timing accuracy,
    /// against the simulator in a separate process.
    BenchClient {
        /// Streams (closed-loop concurrency) of the rows.
        #[arg(long, value_delimiter = ',', default_value = "1,256,512,1000")]
        streams: Vec<u32>,
        /// Client threads of the rows.
        #[arg(long, value_delimiter = ',', default_value = "1")]
        threads: Vec<usize>,
        /// The simulator's gap between tokens of the rows (`0`: unpaced,
        /// every token as fast as it can send).
        #[arg(long, value_delimiter = ',', value_parser = servegate::units::parse_duration, default_value = "0ms,10ms")]
        itl: Vec<Duration>,
        /// Tokens per stream.
        #[arg(long, default_value_t = 64)]
        tokens: u32,
        /// Measured window per row.
        #[arg(long, value_parser = servegate::units::parse_duration, default_value = "5s")]
        duration: Duration,
        /// Other work beside the client during every row: `host` (a
        /// worker at normal priority on every core), `starved` (a
        /// real-time thread on the client's core, 20 ms on, 5 ms off).
        #[arg(long, value_enum, default_value = "none")]
        contention: bench::Contention,
        /// The simulator's time to first token (default: 10ms for paced
        /// rows, 0 unpaced).
        #[arg(long, value_parser = servegate::units::parse_duration)]
        ttft: Option<Duration>,
        /// Tokens after the first the simulator writes at once, every
        /// N × ITL (a loaded server's events reaching its socket together).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        pack: u32,
        /// `table` for people, `json` for scripts.
        #[arg(long, value_enum, default_value = "table")]
        format: bench::BenchFormat,
        /// Keep every row's figures in this run history (a SQLite file, or
        /// a `postgres://` URL), under the commit measured, and compare
        /// them with the newest run of another commit on this machine.
        // Its value may be a PostgreSQL URL with a password: never shown.
        #[arg(long, value_name = "FILE")]
        history: Option<String>,
        /// The commit of the servegate measured, as the history keeps it
        /// [default: the working directory's checkout, `+dirty` with
        /// changes].
        #[arg(long, requires = "history", value_parser = bench::commit_name)]
        commit: Option<String>,
        /// Warm-up requests of each row [default: one per stream, which
        /// opens every stream's connection in the warm-up; fewer leave the
        /// rest to be opened before the window].
        #[arg(long)]
        warmup: Option<u32>,
    },
    /// The code-probe sandbox's helper: servegate re-executes itself with
    /// this to contain model-written code (never shown in `--help`).
    #[cfg(target_os = "linux")]
    #[command(name = "__sandbox", hide = true)]
    Sandbox {
        /// `supervise`, `init` or `exec`.
        role: String,
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

/// Whether the panic `info` describes is a write to a closed stdout or
/// stderr.
fn closed_output(info: &std::panic::PanicHookInfo<'_>) -> bool {
    let payload = info.payload();
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    let printer = info
        .location()
        .is_some_and(|l| l.file().contains("libtest-mimic"));
    ((text.starts_with("failed printing to stdout")
        || text.starts_with("failed printing to stderr"))
        && text.contains("Broken pipe"))
        || (printer && text.contains("kind: BrokenPipe"))
}

fn main() -> ExitCode {
    // The hidden re-exec mode a launched server is started through.
    if let Some(failed) = servegate::process::tree::exec_mode_if_asked() {
        return failed;
    }
    // `servegate list | head -1`: the reader closed the pipe. Rust ignores
    // SIGPIPE, so the next write fails and the printer (libtest's unwraps
    // it) panics. A write to a closed stdout or stderr — `println!`'s and
    // `eprintln!`'s own (`failed printing to stdout`, `… to stderr`), or
    // libtest's printer's — stops the command as Ctrl-C would: a run's
    // trials under way and its launched servers are stopped, the record of
    // the trials that finished is written (and said on stderr, where that
    // is still read), and it exits 141 without a panic.
    // Anything else (a broken pipe to a socket or a sandboxed program's
    // stdin, where SIGPIPE must not end servegate) panics as any panic.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if closed_output(info) {
            servegate::process::stop_for_closed_output();
        }
        default_hook(info);
    }));
    dispatch()
}

/// Runs the command the arguments name.
fn dispatch() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => {
            let (suites, options, libtest) = args.split(false);
            harness::run(&suites, &options, libtest).exit().into()
        }
        Command::Review {
            paths,
            from,
            accept_all,
            reject_all,
        } => review(paths, from, accept_all, reject_all),
        Command::Report {
            merge: Some(ReportMerge::Merge { records, out_dir }),
            ..
        } => merge_reports(&records, &out_dir),
        Command::Report { path, format, .. } => report(&path.expect("clap requires it"), format),
        Command::History(args) => cli::history::history(args),
        Command::Soak {
            streams,
            windows,
            window,
        } => match servegate::bench::soak(&servegate::bench::SoakOptions {
            streams,
            windows,
            window,
        }) {
            Ok((text, held)) => {
                print!("{text}");
                if held {
                    ExitCode::from(Exit::Passed)
                } else {
                    ExitCode::from(Exit::Failed)
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(Exit::Failed)
            }
        },
        Command::Baseline { action } => match action {
            BaselineAction::Save(args) => {
                // `baseline` bounds are not applied (the first save has no
                // baseline to compare with); everything else is, and a run
                // that fails records nothing.
                let (suites, options, libtest) = args.split(true);
                let outcome = harness::run(&suites, &options, libtest);
                if outcome.exit() != Exit::Passed {
                    eprintln!(
                        "error: the run failed: no baseline recorded (the figures of a failed run are no reference; `servegate baseline accept` records a run you reviewed)"
                    );
                    return outcome.exit().into();
                }
                let project = harness::first_project(&suites);
                let out =
                    servegate::record::out_dir(options.out_dir.as_deref(), project.as_deref());
                accept_baselines(Some(&out))
            }
            BaselineAction::Accept { out_dir } => accept_baselines(out_dir.as_deref()),
        },
        Command::List { suites, libtest } => {
            let outcome = harness::run(
                &suites_or_default(suites),
                &RunOptions {
                    require_match: true,
                    ..RunOptions::default()
                },
                libtest_args(std::iter::once("--list".to_owned()).chain(libtest)),
            );
            outcome.exit().into()
        }
        Command::Sim(args) => serve_sim(&args),
        Command::Init {
            target,
            out,
            force,
            api,
            concurrency,
            client_limited,
            verbose,
        } => init(
            &servegate::init::Options {
                target,
                api,
                out,
                force,
                concurrency,
                client_limited,
            },
            verbose,
        ),
        Command::Import { what } => import(what),
        Command::Completions { shell } => {
            cli::manual::completions(shell, <Cli as clap::CommandFactory>::command())
        }
        Command::Man { dir } => {
            cli::manual::man(<Cli as clap::CommandFactory>::command(), dir.as_deref())
        }
        Command::Schema { keys } => {
            let text = if keys {
                servegate::suite::key_reference()
            } else {
                schema_text()
            };
            // A closed pipe (`| head`) is no error worth a panic.
            let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
            ExitCode::from(Exit::Passed)
        }
        #[cfg(target_os = "linux")]
        Command::Sandbox { role } => servegate::check::sandbox::helper::main(&role),
        Command::BenchClient {
            streams,
            threads,
            itl,
            tokens,
            duration,
            contention,
            ttft,
            pack,
            format,
            history,
            commit,
            warmup,
        } => {
            let history = match bench_keeping(history, commit) {
                Ok(h) => h,
                Err(code) => return code,
            };
            bench_client(&BenchOptions {
                streams,
                threads,
                itl,
                tokens,
                duration,
                contention,
                ttft,
                pack,
                format,
                history,
                warmup,
            })
        }
    }
}

/// `servegate init`.
fn init(options: &servegate::init::Options, verbose: bool) -> ExitCode {
    servegate::check::sandbox::set_verbose(verbose);
    match servegate::init::init(options) {
        Ok(path) => {
            eprintln!(
                "servegate init: wrote {0}: run it with `servegate run {0}`",
                path.display()
            );
            ExitCode::from(Exit::Passed)
        }
        Err(e) => {
            eprintln!("error: {e}");
            e.exit().into()
        }
    }
}

/// An API by its name in suites.
fn api_named(name: &str) -> Result<servegate::suite::Api, String> {
    use servegate::suite::names::Named as _;
    servegate::suite::Api::named(name).ok_or_else(|| {
        format!(
            "expected one of {}",
            servegate::suite::Api::names().join(", ")
        )
    })
}

/// The suite schema as `servegate schema` prints it.
fn schema_text() -> String {
    let mut text =
        serde_json::to_string_pretty(&servegate::suite::schema()).expect("a JSON value serializes");
    text.push('\n');
    text
}

/// `servegate review`: asks on stdin unless told what to do with them all.
fn review(
    paths: Vec<PathBuf>,
    from: Option<PathBuf>,
    accept_all: bool,
    reject_all: bool,
) -> ExitCode {
    use std::io::IsTerminal as _;
    let project = servegate::record::working_project();
    let options = servegate::review::Options {
        paths,
        from,
        snapshots: servegate::check::snapshot::root(&project),
        all: if accept_all {
            Some(servegate::review::Decision::Accept)
        } else if reject_all {
            Some(servegate::review::Decision::Reject)
        } else {
            None
        },
        color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    match servegate::review::review(&options, &mut stdin.lock(), &mut stdout.lock()) {
        Ok(_) => ExitCode::from(Exit::Passed),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(Exit::Failed)
        }
    }
}
