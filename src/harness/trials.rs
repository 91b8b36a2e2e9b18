//! Building the trial list: each suite run's trials named and in run order
//! ([`Names`]), the notes on prerequisites that run first, each selected
//! trial a step of the run loop ([`Executor`]), and the list of `--list`.

use std::path::Path;
use std::sync::Arc;

use libtest_mimic::{Arguments, Trial};

use super::events::{FigureBook, Listeners, TrialBook};
use super::executor::{self, Executor, Item};
use super::loading::Loaded;
use super::session::{Execution, Plan, SuiteRun};
use super::target;
use crate::record::{Part, Stage, TrialId};
use crate::suite::{SnapshotMode, Suite};

/// Trials of one run of a suite (`label`: `<suite>` or
/// `<suite>[<variant>]`), in run order: config checks, each probe followed
/// by its snapshot, gates, then sweep curves.
pub(super) struct Names {
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
    pub(super) fn labels(suite: &Suite) -> Vec<(String, Option<crate::suite::Variant>)> {
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
    fn in_order(self, suite: &Suite) -> Vec<Item> {
        let mut out = Vec::new();
        let mut push = |id, loc, each, index| {
            out.push(Item {
                id,
                loc,
                each,
                index,
            });
        };
        for (i, name) in self.configs.into_iter().enumerate() {
            push(name, suite.expect_server[i].loc, Execution::config, i);
        }
        let mut snapshots = self.snapshots.into_iter().peekable();
        for (i, name) in self.probes.into_iter().enumerate() {
            let loc = suite.probes[i].loc;
            push(name, loc, Execution::probe, i);
            if let Some((_, snap)) = snapshots.next_if(|(p, _)| *p == i) {
                push(snap, loc, Execution::snapshot, i);
            }
        }
        let mut rechecks = self.rechecks.into_iter().peekable();
        for (i, name) in self.gates.into_iter().enumerate() {
            push(name, suite.gates[i].loc, Execution::gate, i);
            if let Some((_, recheck)) = rechecks.next_if(|(g, _)| *g == i) {
                let loc = suite.gates[i]
                    .recheck
                    .as_ref()
                    .map_or(suite.gates[i].loc, |r| r.loc);
                push(recheck, loc, Execution::recheck, i);
            }
        }
        for (i, name) in self.curves.into_iter().enumerate() {
            push(name, suite.curves[i].loc, Execution::curve, i);
        }
        out
    }
}

/// What every suite run of a harness run shares.
pub(super) struct Context<'a> {
    pub(super) args: &'a Arguments,
    pub(super) runtime: &'a Arc<tokio::runtime::Runtime>,
    /// Every gate's figures, by suite and variant.
    pub(super) figures: &'a Arc<FigureBook>,
    /// Every trial's record.
    pub(super) trials: &'a Arc<TrialBook>,
    /// Who is told what happens.
    pub(super) listeners: &'a Listeners,
    pub(super) dir: &'a Path,
    pub(super) target_override: Option<&'a str>,
    /// What this run does with new and changed answers.
    pub(super) snapshots: &'a crate::check::snapshot::Policy,
    /// `baseline save`: `baseline` bounds are not applied.
    pub(super) recording_baselines: bool,
    pub(super) client_threads: Option<u32>,
    pub(super) client_limited: Option<crate::suite::OnClientLimited>,
    /// The run history: gates read it, the run is recorded in it.
    pub(super) history: &'a crate::history::Location,
}

impl Context<'_> {
    /// Whether the trial `name` runs: libtest's filter, `--skip` and
    /// `--ignored` keep it.
    pub(super) fn runs(&self, name: &str) -> bool {
        let trial = Trial::test(name, || Ok(()));
        !self.args.is_filtered_out(&trial) && !self.args.is_ignored(&trial)
    }
}

/// Adds the trials of one run of `suite` (one variant, or the suite alone).
pub(super) fn add_run(
    ctx: &Context<'_>,
    suite: &Suite,
    label: &str,
    variant: Option<crate::suite::Variant>,
    executor: &mut Executor,
    trials: &mut Vec<Trial>,
) {
    let names = Names::of(suite, label);
    let selected = |id: &TrialId| !ctx.args.is_filtered_out(&Trial::test(id.name(), || Ok(())));
    // A probe `--skip` leaves out is left out of the gates' prerequisites
    // too: the run was told not to ask it. One a filter merely does not
    // select still runs first for the selected gates that need it.
    let skips = Arguments {
        filter: None,
        ..ctx.args.clone()
    };
    let skipped_probes: Vec<usize> = (0..names.probes.len())
        .filter(|&i| skips.is_filtered_out(&Trial::test(names.probes[i].name(), || Ok(()))))
        .collect();
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
        // Nothing of the suite runs, and no server is asked; its trials
        // are still handed to libtest, whose filter leaves each one out
        // and counts it (`N filtered out`, as in any Rust test run).
        trials.extend(named_only(names, suite));
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
        trials: Arc::clone(ctx.trials),
        listeners: ctx.listeners.clone(),
        history: ctx.history.clone(),
        skipped_probes: skipped_probes.clone(),
    };
    let run = Arc::new(SuiteRun::new(suite.clone(), plan, Arc::clone(ctx.runtime)));
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
        // What the gates that run wait for (a curve's or a recheck's gates
        // among them: all, for the note).
        let waited: std::collections::BTreeSet<usize> = suite
            .gates
            .iter()
            .zip(&names.gates)
            .filter(|(_, n)| curves > 0 || selected(n))
            .flat_map(|(g, _)| g.needed(names.probes.len()))
            .filter(|i| !skipped_probes.contains(i))
            .collect();
        earlier(
            waited
                .iter()
                .filter(|&&i| selected(&names.probes[i]))
                .count(),
            waited.len(),
            "correctness probe(s)",
        );
        if !skipped_probes.is_empty() {
            let list: Vec<String> = skipped_probes
                .iter()
                .map(|&i| format!("`{}`", suite.probes[i].name))
                .collect();
            eprintln!(
                "note: suite `{label}`: correctness probe(s) {} left out by --skip: no gate waits for them, and each gate's record says it ran without them",
                list.join(", ")
            );
        }
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
    executor.add_run(
        Execution::new(run),
        names.in_order(suite),
        |name| ctx.runs(name),
        trials,
    );
}

pub(super) fn listing(loaded: &Loaded) -> Vec<Trial> {
    match loaded {
        Loaded::Failed(f) => vec![executor::unloaded(
            TrialId::load(&f.name).name(),
            f.message.clone(),
        )],
        Loaded::Suite(suite) => Names::labels(suite)
            .into_iter()
            .flat_map(|(label, variant)| {
                let run = suite.of_variant(variant.as_ref());
                named_only(Names::of(&run, &label), &run)
            })
            .collect(),
    }
}

/// The trials of a suite run by name only, in order: what a listing shows,
/// and what libtest's filter counts for a suite none of whose trials run.
fn named_only(names: Names, suite: &Suite) -> Vec<Trial> {
    names
        .in_order(suite)
        .into_iter()
        .map(|item| Trial::test(item.id.name(), || Ok(())))
        .collect()
}
