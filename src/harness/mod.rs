//! The libtest-mimic harness: suites become trials named
//! `<suite>::correctness::<probe>` and `<suite>::performance::<gate>`, run one
//! at a time, correctness before performance, on the same server.
//!
//! Used by `tests/sglang_suite.rs` (`cargo test --test sglang_suite`) and by
//! `servegate run`; both accept the usual libtest arguments (filters,
//! `--exact`, `--list`, `--skip`, `--ignored`), so nextest works too.

mod compare;
mod config;
mod documents;
pub mod events;
mod executor;
mod gates;
mod judge;
mod launched;
mod liveness;
mod loading;
mod options;
mod outcome;
mod probes;
mod recording;
mod session;
mod summary;
pub mod target;
mod trials;

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use libtest_mimic::{Arguments, Conclusion, Trial};

use crate::record::{self, TrialId};

pub(crate) use events::FigureBook;
pub use events::{GateFigures, Listener, Listeners, RunEvent};
pub use loading::first_project;
pub use options::{
    CLIENT_LIMITED_ENV, CLIENT_THREADS_ENV, EnvError, Outcome, Publish, RunOptions, SUITES_ENV,
    VERBOSE_ENV, client_limited_from_env, client_threads_from_env, verbose_from_env,
};
pub use outcome::{Stop, Verdict};
pub(crate) use session::{Execution, Plan, SuiteRun};

use events::TrialBook;
use executor::Executor;
use loading::{Loaded, load_all};
use trials::{Context, Names, add_run, listing};

/// Every suite run of a harness run, once all are planned: what the
/// record is collected from.
type Book = Arc<OnceLock<Vec<Arc<SuiteRun>>>>;

/// The runtime of a run's client: one thread against a server elsewhere
/// (cheaper per token and more precise than a work-stealing pool, see
/// bench-client); a pool when the embedded simulator shares the process,
/// or it would share the client's thread and distort what is measured.
pub fn runtime(embedded_sim: bool) -> std::io::Result<tokio::runtime::Runtime> {
    if embedded_sim {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
}

/// Loads the suites under `paths` and runs them as libtest trials.
pub fn run(paths: &[PathBuf], options: &RunOptions, mut args: Arguments) -> Outcome {
    let target_override = options.target.as_deref();
    let loaded = match load_all(paths) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return Outcome::nothing_ran(failed_conclusion(), 1);
        }
    };
    let load_failures = loaded
        .iter()
        .filter(|l| matches!(l, Loaded::Failed(_)))
        .count();
    let listed: Vec<Trial> = loaded.iter().flat_map(listing).collect();
    if options.require_match && selects_nothing(&args, &listed) {
        return Outcome {
            unmatched: true,
            ..Outcome::nothing_ran(no_trials(), load_failures)
        };
    }
    if args.list {
        // The list names a broken file's `<file>::load` trial; its problems
        // go to stderr, where they do not break the list.
        for l in &loaded {
            if let Loaded::Failed(f) = l {
                eprintln!("{}", f.message);
            }
        }
        let conclusion = libtest_mimic::run(&args, listed);
        return Outcome::nothing_ran(conclusion, load_failures);
    }
    if args.test_threads.is_some_and(|n| n > 1) {
        eprintln!(
            "note: servegate runs trials one at a time: they share one server and measure it"
        );
    }
    // The values of this process's secret-looking variables are scrubbed
    // from everything the run prints or writes, whatever name they travel
    // under later (a launch env `MY_CREDS: ${HF_TOKEN}`).
    crate::secrets::add_from_environment();
    crate::check::sandbox::set_verbose(options.verbose);
    // Orphans of launched servers (a `setsid` daemon) re-parent to this
    // process, which stops them at teardown.
    crate::process::tree::become_subreaper();
    // Two libtest workers, each waiting for the outcomes the run loop hands
    // it (see `executor`): one prints a trial's line while the next waits.
    args.test_threads = Some(2);
    // One client thread unless the embedded simulator shares the process.
    let embedded = loaded.iter().any(|l| {
        matches!(l, Loaded::Suite(s)
            if !target::launches(s, target_override)
                && matches!(target::effective_base(s, target_override), Ok(crate::suite::BaseUrl::Sim)))
    });
    let runtime = match runtime(embedded) {
        Ok(rt) => Arc::new(rt),
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return Outcome::nothing_ran(failed_conclusion(), load_failures);
        }
    };
    let mut trials = Vec::new();
    // Every suite run, read by the journal and by a stop: an interrupted
    // run still leaves the figures measured so far.
    let book: Book = Arc::default();
    let out = record::out_dir(options.out_dir.as_deref(), first_project(paths).as_deref());
    let dir = record::new_run_dir(&out);
    let snapshots = crate::check::snapshot::Policy::from_env(&|k| std::env::var(k).ok(), &dir);
    for note in &snapshots.notes {
        eprintln!("note: {note}");
    }
    let info = record::RunInfo {
        dir: dir.clone(),
        out,
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    // The suite files that could not be loaded, as failed trials of the
    // record, selected or not: a broken file fails the run (exit 2), and
    // its reports and annotations say which, at its line.
    let invalid = recording::invalid_suites(&loaded);
    let (trial_book, figure_book) = (
        Arc::new(TrialBook::default()),
        Arc::new(FigureBook::default()),
    );
    let listeners = listeners(options, &info, &book, &trial_book, &figure_book);
    write_when_interrupted(&book, &info, &listeners, invalid.clone());
    let history = crate::history::Location::resolve(options.history.as_deref(), &info.out);
    let ctx = Context {
        args: &args,
        runtime: &runtime,
        figures: &figure_book,
        trials: &trial_book,
        listeners: &listeners,
        dir: &dir,
        target_override,
        snapshots: &snapshots,
        recording_baselines: options.recording_baselines,
        client_threads: options.client_threads,
        client_limited: options.client_limited,
        history: &history,
    };
    let mut executor = Executor::default();
    for l in loaded {
        let suite = match l {
            Loaded::Failed(f) => {
                let name = TrialId::load(&f.name).name();
                let runs = ctx.runs(&name);
                if !runs {
                    eprintln!(
                        "{}\nnote: `{name}` is filtered out, but a suite file that does not load fails the run (exit 2)",
                        f.message
                    );
                }
                executor.add_unloaded(name, f.message, runs, &mut trials);
                continue;
            }
            Loaded::Suite(suite) => suite,
        };
        for (label, variant) in Names::labels(&suite) {
            add_run(
                &ctx,
                &suite.of_variant(variant.as_ref()),
                &label,
                variant,
                &mut executor,
                &mut trials,
            );
        }
    }
    let _ = book.set(executor.runs());
    let conclusion = executor.run_as(&args, trials).unwrap_or_else(|e| {
        eprintln!("error: failed to start the run loop's thread: {e}");
        failed_conclusion()
    });
    // Stopped meanwhile (a signal, a closed output): the stopping thread
    // writes the record and exits with its cause's code, never this one.
    crate::process::reaper::park_if_stopping();
    let runs = book.get().cloned().unwrap_or_default();
    let mut final_record = recording::collect(&info, &runs, true);
    final_record.trials.splice(0..0, invalid);
    listeners.emit(&RunEvent::RunFinished(&final_record));
    // Read before this run is recorded in it: the earlier values of each
    // gated figure, for the reports.
    crate::history::trend::attach(&history, &mut final_record);
    keep(&info, options, &history, &final_record);
    listeners.emit(&RunEvent::RecordWritten {
        info: &info,
        record: &final_record,
    });
    // The interrupt hook holds this run's listeners and books: the run is
    // over, a later signal writes nothing of it.
    crate::process::no_interrupt_hook();
    let unreachable = runs
        .iter()
        .filter(|r| matches!(r.target(), Some(Err(_))))
        .count();
    for r in &runs {
        r.stop_server();
    }
    drop(runs);
    drop(book);
    if let Ok(rt) = Arc::try_unwrap(runtime) {
        rt.shutdown_timeout(std::time::Duration::from_secs(2));
    }
    Outcome {
        conclusion,
        load_failures,
        unreachable,
        interrupted: crate::process::interrupted(),
        unmatched: false,
    }
}

/// Who is told what happens in a run, in this order: the stores the record
/// is built from (every trial's record, every gate's figures), the
/// journal that keeps the record current, the target lines, the summary,
/// the report writers, then the run's own listeners.
fn listeners(
    options: &RunOptions,
    info: &record::RunInfo,
    book: &Book,
    trial_book: &Arc<TrialBook>,
    figure_book: &Arc<FigureBook>,
) -> Listeners {
    let journal = {
        let (book, info) = (Arc::downgrade(book), info.clone());
        events::Journal::new(
            info.clone(),
            Box::new(move || {
                // Weak: the runs hold the listeners, which would hold them.
                let runs = book
                    .upgrade()
                    .and_then(|b| b.get().cloned())
                    .unwrap_or_default();
                recording::collect(&info, &runs, false)
            }),
        )
    };
    Listeners::default()
        .and([
            Arc::clone(trial_book) as Arc<dyn Listener>,
            Arc::clone(figure_book) as Arc<dyn Listener>,
            Arc::new(journal),
            Arc::new(events::TargetLines),
            Arc::new(summary::Summary::new(Arc::clone(figure_book))),
        ])
        .and(
            options
                .publish
                .map(|p| Arc::new(events::Publisher(p)) as Arc<dyn Listener>),
        )
        .then(&options.listeners)
}

/// Where a finished run's record is kept: its run directory (and
/// `latest/`), the history, and the pruning of old run directories.
fn keep(
    info: &record::RunInfo,
    options: &RunOptions,
    history: &crate::history::Location,
    final_record: &record::RunRecord,
) {
    match record::write(info, final_record) {
        Ok(path) => eprintln!("servegate: run record written to {}", path.display()),
        Err(e) => eprintln!("warning: {e}"),
    }
    // An interrupted run's figures are a part of a run: its record holds
    // them (`servegate history import` adds them), the history does not.
    if !crate::process::interrupted() {
        crate::history::record_run(history, final_record);
    }
    let removed = record::prune_runs(&info.out, options.keep_runs, &info.dir);
    if removed > 0 {
        eprintln!(
            "servegate: removed {removed} old run director{} of {} (it keeps the newest {}: --keep or {})",
            if removed == 1 { "y" } else { "ies" },
            info.out.join("runs").display(),
            options.keep_runs,
            record::KEEP_RUNS_ENV
        );
    }
}

/// `error: no trial matches …`, with the trial names closest to the filter.
/// Whether a filter or `--skip` leaves no trial of `listed`, said on
/// stderr with the names closest to the filter.
fn selects_nothing(args: &Arguments, listed: &[Trial]) -> bool {
    if (args.filter.is_none() && args.skip.is_empty())
        || !listed.iter().all(|t| args.is_filtered_out(t))
    {
        return false;
    }
    let names: Vec<&str> = listed.iter().map(Trial::name).collect();
    match &args.filter {
        Some(filter) => eprint!("{}", no_match(filter, args.exact, &names)),
        None => eprintln!(
            "error: --skip {} leaves no trial of the {} (nothing ran)",
            args.skip.join(" --skip "),
            names.len()
        ),
    }
    true
}

fn no_match(filter: &str, exact: bool, names: &[&str]) -> String {
    use std::fmt::Write as _;
    let how = if exact { "exactly " } else { "" };
    let mut out = format!("error: no trial matches `{filter}` {how}(nothing ran)\n");
    let closest = crate::suite::diagnostics::closest(filter, names, 3);
    if !closest.is_empty() {
        let shown: Vec<String> = closest.iter().map(|n| format!("`{n}`")).collect();
        let _ = writeln!(out, "  = closest: {}", shown.join(", "));
    }
    let _ = writeln!(
        out,
        "  = the suites have {} trial(s): `servegate list` names them; a filter matches part of a name, `--exact` all of it",
        names.len()
    );
    out
}

/// A signal (Ctrl-C, a CI cancel), or a reader that closed the run's
/// output, stops every server, then writes the record of what finished and
/// its reports before the run exits (130, or 141 for the closed output).
fn write_when_interrupted(
    book: &Book,
    info: &record::RunInfo,
    listeners: &Listeners,
    invalid: Vec<record::TrialRecord>,
) {
    {
        let (book, info, listeners) = (Arc::clone(book), info.clone(), listeners.clone());
        crate::process::on_interrupt(Box::new(move || {
            // Before the runs were planned, none has a trial to record.
            let runs = book.get().cloned().unwrap_or_default();
            let mut rec = recording::collect(&info, &runs, false);
            rec.trials.splice(0..0, invalid.iter().cloned());
            record::merge_journal(&mut rec, &info.dir);
            if record::write(&info, &rec).is_ok() {
                listeners.emit(&RunEvent::RecordWritten {
                    info: &info,
                    record: &rec,
                });
                // Not `eprintln!`: standard error may be the pipe that closed.
                let _ = writeln!(
                    std::io::stderr(),
                    "servegate: the record of the {} finished trial(s) is in {}",
                    rec.trials.len(),
                    info.dir.display()
                );
            }
        }));
    }
}

fn no_trials() -> Conclusion {
    Conclusion {
        num_filtered_out: 0,
        num_passed: 0,
        num_failed: 0,
        num_ignored: 0,
        num_measured: 0,
    }
}

fn failed_conclusion() -> Conclusion {
    Conclusion {
        num_failed: 1,
        ..no_trials()
    }
}
