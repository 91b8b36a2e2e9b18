//! The libtest-mimic harness: suites become trials named
//! `<suite>::correctness::<probe>` and `<suite>::performance::<gate>`, run one
//! at a time, correctness before performance, on the same server.
//!
//! Used by `tests/sglang_suite.rs` (`cargo test --test sglang_suite`) and by
//! `servegate run`; both accept the usual libtest arguments (filters,
//! `--exact`, `--list`, `--skip`, `--ignored`), so nextest works too.

mod compare;
mod config;
mod gates;
mod judge;
mod outcome;
mod probes;
mod recording;
mod session;
mod summary;
pub mod target;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use libtest_mimic::{Arguments, Conclusion, Trial};

use crate::exit::Exit;
use crate::record::{self, Part, Stage, TrialId};

pub use outcome::{Stop, Verdict};
pub use session::{GateFigures, Plan, SuiteRun};

use crate::suite::node::Loc;
use crate::suite::{LoadFailure, SnapshotMode, Suite, discover, load_file};

/// The environment variable that lists suite files or directories
/// (separated like `PATH`), replacing the default `suites/`.
pub const SUITES_ENV: &str = "SERVEGATE_SUITES";

/// The client threads of every gate (`--client-threads`).
pub const CLIENT_THREADS_ENV: &str = "SERVEGATE_CLIENT_THREADS";

/// What every gate whose client was the bottleneck does (`--client-limited`).
pub const CLIENT_LIMITED_ENV: &str = "SERVEGATE_CLIENT_LIMITED";

/// `SERVEGATE_CLIENT_LIMITED`: unset or empty is `None`; `fail` or `warn`.
pub fn client_limited_from_env() -> Result<Option<crate::suite::OnClientLimited>, String> {
    match std::env::var(CLIENT_LIMITED_ENV) {
        Ok(v) if !v.trim().is_empty() => crate::suite::OnClientLimited::parse(v.trim())
            .map(Some)
            .ok_or_else(|| format!("{CLIENT_LIMITED_ENV}={v:?}: expected `fail` or `warn`")),
        _ => Ok(None),
    }
}

/// `SERVEGATE_CLIENT_THREADS`: unset or empty is `None`; anything but a
/// count from 1 to 256 is an error that says so.
pub fn client_threads_from_env() -> Result<Option<u32>, String> {
    match std::env::var(CLIENT_THREADS_ENV) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=256).contains(n))
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "{CLIENT_THREADS_ENV}={v:?}: expected a number of client threads from 1 to 256"
                )
            }),
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
    fn nothing_ran(conclusion: Conclusion, load_failures: usize) -> Self {
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
    let mut loaded: Vec<Loaded> = Vec::new();
    for f in &files {
        let shown = display_path(f);
        let l = match load_file(&shown) {
            // Trial names, snapshots and baselines are keyed by the suite's
            // name: two files of one name would share them.
            Ok(s) => match loaded.iter().find_map(|l| match l {
                Loaded::Suite(other) if other.name == s.name => Some(other.file.display()),
                _ => None,
            }) {
                Some(first) => Loaded::Failed(LoadFailure {
                    path: shown.clone(),
                    name: s.name.clone(),
                    message: format!(
                        "error: suite `{}` is defined twice: in {first} and in {}\n  = suite names key trial names, snapshots and baselines: give each file its own `suite:` name",
                        s.name,
                        shown.display()
                    ),
                }),
                None => Loaded::Suite(Box::new(s)),
            },
            Err(e) => Loaded::Failed(e),
        };
        loaded.push(l);
    }
    Ok(loaded)
}

/// Paths under the working directory are shown relative to it.
fn display_path(path: &Path) -> PathBuf {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf())
}

/// Trials of one run of a suite (`label`: `<suite>` or
/// `<suite>[<variant>]`), in run order: config checks, each probe followed
/// by its snapshot, gates, then sweep curves.
struct Names {
    configs: Vec<TrialId>,
    probes: Vec<TrialId>,
    /// Each snapshot trial with its probe's index.
    snapshots: Vec<(usize, TrialId)>,
    gates: Vec<TrialId>,
    /// Each recheck trial with its gate's index.
    rechecks: Vec<(usize, TrialId)>,
    curves: Vec<TrialId>,
}

impl Names {
    fn of(suite: &Suite, label: &str) -> Self {
        let id = |stage, item: &str| TrialId::new(label, stage, item);
        Self {
            configs: suite
                .expect_server
                .iter()
                .map(|c| id(Stage::Config, &c.name))
                .collect(),
            probes: suite
                .probes
                .iter()
                .map(|p| id(Stage::Correctness, &p.name))
                .collect(),
            snapshots: suite
                .probes
                .iter()
                .enumerate()
                .filter(|(_, p)| p.snapshot != SnapshotMode::Off)
                .map(|(i, p)| (i, id(Stage::Snapshot, &p.name)))
                .collect(),
            gates: suite
                .gates
                .iter()
                .map(|g| id(Stage::Performance, &g.name))
                .collect(),
            rechecks: suite
                .gates
                .iter()
                .enumerate()
                .filter(|(_, g)| g.recheck.is_some())
                .map(|(i, g)| (i, id(Stage::Performance, &g.name).part(Part::Recheck)))
                .collect(),
            curves: suite
                .curves
                .iter()
                .map(|c| id(Stage::Performance, &c.gate).part(Part::Curve))
                .collect(),
        }
    }

    /// One label per run of the suite: its variants, or the suite alone.
    fn labels(suite: &Suite) -> Vec<(String, Option<crate::suite::Variant>)> {
        if suite.variants.is_empty() {
            return vec![(suite.name.clone(), None)];
        }
        suite
            .variants
            .iter()
            .map(|v| (format!("{}[{}]", suite.name, v.name), Some(v.clone())))
            .collect()
    }

    /// Every trial in run order: its name, where its item is written, what
    /// runs it and the item's index in its list.
    fn in_order(self, suite: &Suite) -> Vec<(TrialId, Loc, Each, usize)> {
        let mut out: Vec<(TrialId, Loc, Each, usize)> = Vec::new();
        for (i, name) in self.configs.into_iter().enumerate() {
            out.push((name, suite.expect_server[i].loc, SuiteRun::config, i));
        }
        let mut snapshots = self.snapshots.into_iter().peekable();
        for (i, name) in self.probes.into_iter().enumerate() {
            let loc = suite.probes[i].loc;
            out.push((name, loc, SuiteRun::probe, i));
            if let Some((_, snap)) = snapshots.next_if(|(p, _)| *p == i) {
                out.push((snap, loc, SuiteRun::snapshot, i));
            }
        }
        let mut rechecks = self.rechecks.into_iter().peekable();
        for (i, name) in self.gates.into_iter().enumerate() {
            out.push((name, suite.gates[i].loc, SuiteRun::gate, i));
            if let Some((_, recheck)) = rechecks.next_if(|(g, _)| *g == i) {
                let loc = suite.gates[i]
                    .recheck
                    .as_ref()
                    .map_or(suite.gates[i].loc, |r| r.loc);
                out.push((recheck, loc, SuiteRun::recheck, i));
            }
        }
        for (i, name) in self.curves.into_iter().enumerate() {
            out.push((name, suite.curves[i].loc, SuiteRun::curve, i));
        }
        out
    }
}

/// Trials taking turns: libtest-mimic runs them on two worker threads, so
/// that it prints each `test … ok` line after its trial ended and what a
/// trial prints (a server launched or stopped, a snapshot recorded) comes
/// before that line, never inside it; the turns keep them one at a time and
/// in order.
#[derive(Default)]
struct Turns {
    next: Mutex<usize>,
    changed: std::sync::Condvar,
}

impl Turns {
    /// Runs `f` once every trial with an earlier turn has ended.
    fn take<R>(&self, turn: usize, f: impl FnOnce() -> R) -> R {
        /// Passes the turn on even when the trial panics.
        struct Done<'a>(&'a Turns);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                if let Ok(mut next) = self.0.next.lock() {
                    *next += 1;
                }
                self.0.changed.notify_all();
            }
        }
        if let Ok(mut next) = self.next.lock() {
            while *next < turn {
                next = match self.changed.wait(next) {
                    Ok(n) => n,
                    Err(_) => break,
                };
            }
        }
        let _done = Done(self);
        f()
    }
}

/// The project of the first suite file under `paths` that loads: where a
/// run of them writes by default.
pub fn first_project(paths: &[PathBuf]) -> Option<PathBuf> {
    discover(paths)
        .ok()?
        .first()
        .map(|f| crate::suite::project_root(f))
}

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
    if options.require_match
        && let Some(filter) = &args.filter
        && listed.iter().all(|t| args.is_filtered_out(t))
    {
        let names: Vec<&str> = listed.iter().map(Trial::name).collect();
        eprint!("{}", no_match(filter, args.exact, &names));
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
    // Orphans of launched servers (a `setsid` daemon) re-parent to this
    // process, which stops them at teardown.
    crate::process::tree::become_subreaper();
    // Two libtest workers taking turns (see `Turns`): one trial at a time.
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
    // Every suite run, shared with the gate trials so each can write the
    // figures measured so far: an interrupted run still leaves them.
    let book: Arc<Mutex<Vec<Arc<SuiteRun>>>> = Arc::default();
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
    write_when_interrupted(&book, &info, options.publish);
    let ctx = Context {
        args: &args,
        runtime: &runtime,
        book: &book,
        figures: &Arc::default(),
        dir: &dir,
        info: &info,
        target_override,
        turns: (Arc::default(), AtomicUsize::new(0)),
        snapshots: &snapshots,
        checkpoints: Arc::default(),
        recording_baselines: options.recording_baselines,
        client_threads: options.client_threads,
        client_limited: options.client_limited,
    };
    for l in loaded {
        let suite = match l {
            Loaded::Failed(f) => {
                let name = format!("{}::load", f.name);
                let turn = ctx.turn(&name);
                let turns = Arc::clone(&ctx.turns.0);
                let message = f.message;
                trials.push(Trial::test(name, move || {
                    let fail = || Err(message.clone().into());
                    turn.map_or_else(fail, |t| turns.take(t, fail))
                }));
                continue;
            }
            Loaded::Suite(suite) => suite,
        };
        for (label, variant) in Names::labels(&suite) {
            add_run(&ctx, &suite, &label, variant, &mut trials);
        }
    }
    let conclusion = libtest_mimic::run(&args, trials);
    let runs = book.lock().map(|r| r.clone()).unwrap_or_default();
    summary::print(&runs);
    let final_record = recording::collect(&info, &runs, true);
    match record::write(&info, &final_record) {
        Ok(path) => eprintln!("servegate: run record written to {}", path.display()),
        Err(e) => eprintln!("warning: {e}"),
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
    if let Some(publish) = options.publish {
        publish(&info, &final_record);
    }
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

/// `error: no trial matches …`, with the trial names closest to the filter.
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

/// A signal (Ctrl-C, a CI cancel) stops every server, then writes the
/// record of what finished and its reports before the run exits 130.
fn write_when_interrupted(
    book: &Arc<Mutex<Vec<Arc<SuiteRun>>>>,
    info: &record::RunInfo,
    publish: Option<Publish>,
) {
    {
        let (book, info) = (Arc::clone(book), info.clone());
        crate::process::on_interrupt(Box::new(move || {
            // A trial may hold the book for a moment; never wait on it long.
            let runs = (0..100).find_map(|_| {
                let runs = book.try_lock().ok().map(|r| r.clone());
                if runs.is_none() {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                runs
            });
            let Some(runs) = runs else {
                return;
            };
            let mut rec = recording::collect(&info, &runs, false);
            record::merge_journal(&mut rec, &info.dir);
            if record::write(&info, &rec).is_ok() {
                if let Some(publish) = publish {
                    publish(&info, &rec);
                }
                eprintln!(
                    "servegate: the record of the {} finished trial(s) is in {}",
                    rec.trials.len(),
                    info.dir.display()
                );
            }
        }));
    }
}

/// What every suite run of a harness run shares.
struct Context<'a> {
    args: &'a Arguments,
    runtime: &'a Arc<tokio::runtime::Runtime>,
    book: &'a Arc<Mutex<Vec<Arc<SuiteRun>>>>,
    /// Every gate's figures, by suite and variant.
    figures: &'a Arc<session::FigureBook>,
    dir: &'a Path,
    info: &'a record::RunInfo,
    target_override: Option<&'a str>,
    /// The turns of the trials that run, and how many were handed out.
    turns: (Arc<Turns>, AtomicUsize),
    /// What this run does with new and changed answers.
    snapshots: &'a crate::check::snapshot::Policy,
    /// When the run's record is rewritten.
    checkpoints: Arc<recording::Checkpoints>,
    /// `baseline save`: `baseline` bounds are not applied.
    recording_baselines: bool,
    client_threads: Option<u32>,
    client_limited: Option<crate::suite::OnClientLimited>,
}

impl Context<'_> {
    /// Whether the trial `name` runs (not filtered out); then its turn.
    fn turn(&self, name: &str) -> Option<usize> {
        let trial = Trial::test(name, || Ok(()));
        (!self.args.is_filtered_out(&trial) && !self.args.is_ignored(&trial))
            .then(|| self.turns.1.fetch_add(1, Ordering::SeqCst))
    }
}

/// Runs item `index` of a stage of a suite run.
type Each = fn(&SuiteRun, usize) -> session::Verdict;

/// Adds the trials of one run of `suite` (one variant, or the suite alone).
fn add_run(
    ctx: &Context<'_>,
    suite: &Suite,
    label: &str,
    variant: Option<crate::suite::Variant>,
    trials: &mut Vec<Trial>,
) {
    let (runtime, book) = (ctx.runtime, ctx.book);
    let names = Names::of(suite, label);
    let selected = |id: &TrialId| !ctx.args.is_filtered_out(&Trial::test(id.name(), || Ok(())));
    let count = |list: &[TrialId]| list.iter().filter(|n| selected(n)).count();
    let snapshot_names: Vec<TrialId> = names.snapshots.iter().map(|(_, n)| n.clone()).collect();
    let recheck_names: Vec<TrialId> = names.rechecks.iter().map(|(_, n)| n.clone()).collect();
    // A recheck, like a curve, needs its gate's load: both count as gates'
    // dependants.
    let (configs, probes, snapshots, gates, curves) = (
        count(&names.configs),
        count(&names.probes),
        count(&snapshot_names),
        count(&names.gates),
        count(&names.curves) + count(&recheck_names),
    );
    if configs + probes + snapshots + gates + curves == 0 {
        return;
    }
    let plan = Plan {
        label: label.to_owned(),
        target_override: ctx.target_override.map(str::to_owned),
        variant,
        run_dir: ctx.dir.to_path_buf(),
        recording_baselines: ctx.recording_baselines,
        client_threads: ctx.client_threads,
        client_limited: ctx.client_limited,
        snapshots: ctx.snapshots.update.clone(),
        figures: Arc::clone(ctx.figures),
    };
    let run = Arc::new(SuiteRun::new(suite.clone(), plan, Arc::clone(runtime)));
    if target::launches(suite, ctx.target_override) {
        eprintln!(
            "servegate: suite `{label}` → a server launched before its first trial (target.launch at {}:{})",
            suite.file.display(),
            suite.target.launch.as_ref().map_or(0, |l| l.loc.line)
        );
    } else {
        if suite.target.launch.is_some() {
            eprintln!(
                "note: suite `{label}`: target.launch is skipped: the target is overridden (--target or {})",
                target::TARGET_ENV
            );
        }
        run.connect();
    }
    let earlier = |n: usize, total: usize, what: &str| {
        if n < total && probes + snapshots + gates + curves > 0 {
            eprintln!(
                "note: suite `{label}`: its {total} {what} run first as prerequisites of the selected trials"
            );
        }
    };
    earlier(configs, names.configs.len(), "config check(s)");
    if gates + curves > 0 {
        earlier(probes, names.probes.len(), "correctness probe(s)");
    } else if snapshots > 0 {
        let unselected = names
            .snapshots
            .iter()
            .filter(|(i, n)| selected(n) && !selected(&names.probes[*i]))
            .count();
        if unselected > 0 {
            eprintln!(
                "note: suite `{label}`: the correctness probes of its {unselected} selected snapshot(s) run first: a snapshot compares their answers"
            );
        }
    }
    if count(&names.curves) > 0 && gates < names.gates.len() {
        eprintln!(
            "note: suite `{label}`: the levels of its selected curves run first as prerequisites"
        );
    }
    let unrun = names
        .rechecks
        .iter()
        .filter(|(g, n)| selected(n) && !selected(&names.gates[*g]))
        .count();
    if unrun > 0 {
        eprintln!(
            "note: suite `{label}`: the gates of its {unrun} selected recheck(s) run first: a recheck asks during its gate's load"
        );
    }
    for (id, loc, each, i) in names.in_order(suite) {
        let name = id.name();
        let turn = ctx.turn(&name);
        if turn.is_some() {
            run.expect_trial();
        }
        let (r, book, info) = (Arc::clone(&run), Arc::clone(book), ctx.info.clone());
        let (turns, checkpoints) = (Arc::clone(&ctx.turns.0), Arc::clone(&ctx.checkpoints));
        trials.push(Trial::test(name, move || {
            let body = || {
                let verdict = r.trial(&id, loc, || each(&r, i));
                // After every trial: an interrupted run leaves its record.
                if let (Ok(runs), Some(done)) = (book.lock(), r.last_outcome()) {
                    checkpoints.after_trial(&info, &runs, &done);
                }
                verdict.map_err(Into::into)
            };
            match turn {
                Some(turn) => turns.take(turn, body),
                None => body(),
            }
        }));
    }
    if let Ok(mut runs) = book.lock() {
        runs.push(run);
    }
}

fn listing(loaded: &Loaded) -> Vec<Trial> {
    match loaded {
        Loaded::Failed(failure) => vec![load_trial(failure.clone())],
        Loaded::Suite(suite) => Names::labels(suite)
            .into_iter()
            .flat_map(|(label, _)| Names::of(suite, &label).in_order(suite))
            .map(|(id, ..)| Trial::test(id.name(), || Ok(())))
            .collect(),
    }
}

fn load_trial(f: LoadFailure) -> Trial {
    Trial::test(format!("{}::load", f.name), move || {
        Err(f.message.clone().into())
    })
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
