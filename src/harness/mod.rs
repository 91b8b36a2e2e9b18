//! The libtest-mimic harness: suites become trials named
//! `<suite>::correctness::<probe>` and `<suite>::performance::<gate>`, run one
//! at a time, correctness before performance, on the same server.
//!
//! Used by `tests/sglang_suite.rs` (`cargo test --test sglang_suite`) and by
//! `servegate run`; both accept the usual libtest arguments (filters,
//! `--exact`, `--list`, `--skip`, `--ignored`), so nextest works too.

mod judge;
pub mod record;
mod session;
mod summary;
pub mod target;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use libtest_mimic::{Arguments, Conclusion, Trial};

pub use session::{GateFigures, SuiteRun};

use crate::suite::{LoadFailure, Suite, discover, load_file};

/// The environment variable that lists suite files or directories
/// (separated like `PATH`), replacing the default `suites/`.
pub const SUITES_ENV: &str = "SERVEGATE_SUITES";

/// What a harness run found, beyond libtest's counts.
#[derive(Debug)]
pub struct Outcome {
    /// libtest's counts.
    pub conclusion: Conclusion,
    /// Suite files that failed to load.
    pub load_failures: usize,
    /// Suites whose target could not be reached.
    pub unreachable: usize,
}

impl Outcome {
    /// The exit code of `servegate run`: 0 all passed, 1 a trial failed,
    /// 2 a suite file is invalid, 3 a target could not be reached.
    pub fn cli_exit_code(&self) -> ExitCode {
        if self.load_failures > 0 {
            ExitCode::from(2)
        } else if self.unreachable > 0 {
            ExitCode::from(3)
        } else if self.conclusion.has_failed() {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    }
}

/// Entry point of `tests/sglang_suite.rs`: suites from `SERVEGATE_SUITES`
/// or `<manifest_dir>/suites`, target override from `SERVEGATE_TARGET`,
/// libtest arguments from the command line.
pub fn test_main(manifest_dir: &str) -> ExitCode {
    let paths = match std::env::var_os(SUITES_ENV) {
        Some(v) if !v.is_empty() => std::env::split_paths(&v).collect(),
        _ => vec![Path::new(manifest_dir).join("suites")],
    };
    let target = std::env::var(target::TARGET_ENV).ok();
    let outcome = run(&paths, target.as_deref(), Arguments::from_args());
    outcome.conclusion.exit_code()
}

/// A suite file's outcome of loading.
enum Loaded {
    Suite(Box<Suite>),
    Failed(LoadFailure),
}

fn load_all(paths: &[PathBuf]) -> Result<Vec<Loaded>, String> {
    let files = discover(paths).map_err(|e| format!("failed to read suite directory: {e}"))?;
    if files.is_empty() {
        return Err(format!(
            "no suite files found in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(files
        .iter()
        .map(|f| {
            let shown = display_path(f);
            match load_file(&shown) {
                Ok(s) => Loaded::Suite(Box::new(s)),
                Err(e) => Loaded::Failed(e),
            }
        })
        .collect())
}

/// Paths under the working directory are shown relative to it.
fn display_path(path: &Path) -> PathBuf {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf())
}

/// Trial names of a suite, in run order: probes, gates, then sweep curves.
fn names(suite: &Suite) -> (Vec<String>, Vec<String>, Vec<String>) {
    let name = |kind: &str, item: &str| format!("{}::{kind}::{item}", suite.name);
    (
        suite
            .probes
            .iter()
            .map(|p| name("correctness", &p.name))
            .collect(),
        suite
            .gates
            .iter()
            .map(|g| name("performance", &g.name))
            .collect(),
        suite
            .curves
            .iter()
            .map(|c| name("performance", &format!("{}::curve", c.gate)))
            .collect(),
    )
}

/// Loads the suites under `paths` and runs them as libtest trials.
pub fn run(paths: &[PathBuf], target_override: Option<&str>, mut args: Arguments) -> Outcome {
    let loaded = match load_all(paths) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return Outcome {
                conclusion: failed_conclusion(),
                load_failures: 1,
                unreachable: 0,
            };
        }
    };
    let load_failures = loaded
        .iter()
        .filter(|l| matches!(l, Loaded::Failed(_)))
        .count();
    if args.list {
        let trials = loaded.iter().flat_map(listing).collect();
        let conclusion = libtest_mimic::run(&args, trials);
        return Outcome {
            conclusion,
            load_failures: 0,
            unreachable: 0,
        };
    }
    if args.test_threads.is_some_and(|n| n > 1) {
        println!("note: servegate runs trials one at a time: they share one server and measure it");
    }
    args.test_threads = Some(1);
    // Against a server elsewhere the client runs on one thread: cheaper per
    // token and more precise than a work-stealing pool (see bench-client). The
    // embedded simulator needs threads of its own, or it would share the
    // client's and distort what is measured.
    let embedded = loaded.iter().any(|l| {
        matches!(l, Loaded::Suite(s)
            if matches!(target::effective_base(s, target_override), Ok(crate::suite::BaseUrl::Sim)))
    });
    let built = if embedded {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let runtime = match built {
        Ok(rt) => Arc::new(rt),
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return Outcome {
                conclusion: failed_conclusion(),
                load_failures,
                unreachable: 0,
            };
        }
    };
    let mut trials = Vec::new();
    // Every suite run, shared with the gate trials so each can write the
    // figures measured so far: an interrupted run still leaves them.
    let book: Arc<Mutex<Vec<Arc<SuiteRun>>>> = Arc::default();
    for l in loaded {
        match l {
            Loaded::Failed(f) => trials.push(load_trial(f)),
            Loaded::Suite(suite) => {
                let (probe_names, gate_names, curve_names) = names(&suite);
                let selected =
                    |n: &String| !args.is_filtered_out(&Trial::test(n.clone(), || Ok(())));
                let probes_selected = probe_names.iter().filter(|n| selected(n)).count();
                let curves_selected = curve_names.iter().filter(|n| selected(n)).count();
                let gates_selected =
                    gate_names.iter().filter(|n| selected(n)).count() + curves_selected;
                if probes_selected + gates_selected == 0 {
                    continue;
                }
                let connected = runtime.block_on(target::connect(&suite, target_override));
                match &connected {
                    Ok(c) => println!("servegate: suite `{}` → {}", suite.name, c.description),
                    Err(e) => println!("servegate: suite `{}` → target FAILED: {e}", suite.name),
                }
                if gates_selected > 0 && probes_selected < probe_names.len() {
                    println!(
                        "note: suite `{}`: its {} correctness probe(s) run first as prerequisites of the selected performance gates",
                        suite.name,
                        probe_names.len()
                    );
                }
                if curves_selected > 0
                    && gate_names.iter().filter(|n| selected(n)).count() < gate_names.len()
                {
                    println!(
                        "note: suite `{}`: the levels of its selected curves run first as prerequisites",
                        suite.name
                    );
                }
                let run = Arc::new(SuiteRun::new(*suite, connected, Arc::clone(&runtime)));
                for (i, name) in probe_names.into_iter().enumerate() {
                    let r = Arc::clone(&run);
                    trials.push(Trial::test(name, move || r.probe(i).map_err(Into::into)));
                }
                for (i, name) in gate_names.into_iter().enumerate() {
                    let (r, book) = (Arc::clone(&run), Arc::clone(&book));
                    trials.push(Trial::test(name, move || {
                        let verdict = r.gate(i);
                        if let Ok(runs) = book.lock()
                            && let Err(e) = record::write(&record::collect(&runs))
                        {
                            eprintln!("warning: {e}");
                        }
                        verdict.map_err(Into::into)
                    }));
                }
                for (i, name) in curve_names.into_iter().enumerate() {
                    let r = Arc::clone(&run);
                    trials.push(Trial::test(name, move || r.curve(i).map_err(Into::into)));
                }
                if let Ok(mut runs) = book.lock() {
                    runs.push(run);
                }
            }
        }
    }
    let conclusion = libtest_mimic::run(&args, trials);
    let runs = book.lock().map(|r| r.clone()).unwrap_or_default();
    summary::print(&runs);
    match record::write(&record::collect(&runs)) {
        Ok(path) => println!("servegate: figures written to {}", path.display()),
        Err(e) => eprintln!("warning: {e}"),
    }
    let unreachable = runs.iter().filter(|r| r.target.is_err()).count();
    drop(runs);
    drop(book);
    if let Ok(rt) = Arc::try_unwrap(runtime) {
        rt.shutdown_timeout(std::time::Duration::from_secs(2));
    }
    Outcome {
        conclusion,
        load_failures,
        unreachable,
    }
}

fn listing(loaded: &Loaded) -> Vec<Trial> {
    match loaded {
        Loaded::Failed(failure) => vec![load_trial(failure.clone())],
        Loaded::Suite(suite) => {
            let (probes, gates, curves) = names(suite);
            probes
                .into_iter()
                .chain(gates)
                .chain(curves)
                .map(|n| Trial::test(n, || Ok(())))
                .collect()
        }
    }
}

fn load_trial(f: LoadFailure) -> Trial {
    Trial::test(format!("{}::load", f.name), move || {
        Err(f.message.clone().into())
    })
}

fn failed_conclusion() -> Conclusion {
    Conclusion {
        num_filtered_out: 0,
        num_passed: 0,
        num_failed: 1,
        num_ignored: 0,
        num_measured: 0,
    }
}
