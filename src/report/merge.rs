//! `servegate report merge`: the run records of several nodes (one GitHub
//! Actions job each, on a node type of its own) as one report — a row per
//! node and suite, the same gate across nodes side by side, every trial —
//! in Markdown (the step summary), JUnit XML and HTML. The fleet itself is
//! the workflow's matrix; this only reads what its jobs left.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::html::{esc, trial_row};
use crate::record::{GateRecord, RunRecord, Stage, TrialOutcome};
use crate::suite::metric::{KEY_FIGURES, format_figure};

/// One run record of the merge and the node it ran on.
#[derive(Debug, Clone)]
pub struct Node {
    /// The node's name in the report (a runner label, a node type).
    pub label: String,
    /// Its run record, secrets scrubbed.
    pub record: RunRecord,
}

/// Where a record argument's file is: `report.json`, a run directory, or
/// an output directory holding `latest/` (what the action uploads).
fn record_file(path: &Path) -> PathBuf {
    if path.is_dir() && !path.join("report.json").exists() {
        crate::record::latest_in(path)
    } else {
        path.to_path_buf()
    }
}

/// The label of a record given without one: the name of the directory it
/// was downloaded to, above `latest/` or `runs/<run>/`.
fn label_of(path: &Path) -> String {
    let mut dir = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    };
    if dir.file_name().is_some_and(|n| n == "latest") {
        dir = dir.parent().unwrap_or(dir);
    } else if dir
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == "runs")
    {
        dir = dir.parent().and_then(Path::parent).unwrap_or(dir);
    }
    let dir = crate::suite::absolute(dir);
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Why `report merge` wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A record could not be read, or a file written.
    #[error(transparent)]
    File(#[from] crate::files::FileError),
    /// The merged JUnit XML could not be written out.
    #[error("failed to render the merged JUnit XML: {0}")]
    Junit(#[from] quick_junit::SerializeError),
}

/// Reads one argument of `report merge`: `LABEL=PATH`, or `PATH` labelled
/// by its directory.
pub(crate) fn read_node(arg: &str) -> Result<Node, MergeError> {
    let (label, path) = match arg.split_once('=') {
        Some((label, path)) if !label.is_empty() && !label.contains('/') => {
            (Some(label.to_owned()), Path::new(path))
        }
        _ => (None, Path::new(arg)),
    };
    let record = crate::record::read(&record_file(path))?;
    Ok(Node {
        label: label.unwrap_or_else(|| label_of(path)),
        record: record.scrubbed(),
    })
}

/// The records as one: every trial and suite under `<node>/<suite>`, so
/// that each format's groups are per node and suite.
pub(crate) fn combined(nodes: &[Node]) -> RunRecord {
    let labels: Vec<&str> = nodes.iter().map(|n| n.label.as_str()).collect();
    let mut out = RunRecord {
        schema: crate::record::SCHEMA.to_owned(),
        run_id: format!("merge of {}", labels.join(", ")),
        started_unix: nodes
            .iter()
            .map(|n| n.record.started_unix)
            .min()
            .unwrap_or(0),
        finished_unix: nodes
            .iter()
            .map(|n| n.record.finished_unix)
            .max()
            .unwrap_or(0),
        complete: nodes.iter().all(|n| n.record.complete),
        servegate: env!("CARGO_PKG_VERSION").to_owned(),
        ..RunRecord::default()
    };
    for n in nodes {
        let on = |name: &str| format!("{}/{name}", n.label);
        out.trials.extend(n.record.trials.iter().map(|t| {
            let mut t = t.clone();
            t.name = on(&t.name);
            t.id.suite = on(&t.id.suite);
            t
        }));
        out.suites.extend(n.record.suites.iter().map(|s| {
            let mut s = s.clone();
            s.suite = on(&s.suite);
            s
        }));
    }
    out
}

/// Outcomes of the trials of one suite on one node.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    passed: usize,
    failed: usize,
    gated: usize,
}

/// A row of the table per node and suite.
struct SuiteRow<'a> {
    node: &'a str,
    hardware: String,
    suite: &'a str,
    target: &'a str,
    tally: Tally,
}

fn suite_rows(nodes: &[Node]) -> Vec<SuiteRow<'_>> {
    let mut rows: Vec<SuiteRow> = Vec::new();
    for n in nodes {
        for t in &n.record.trials {
            let i = rows
                .iter()
                .position(|r| r.node == n.label && r.suite == t.id.suite)
                .unwrap_or_else(|| {
                    let target = n
                        .record
                        .suites
                        .iter()
                        .find(|s| s.suite == t.id.suite)
                        .map_or("not reached", |s| s.target.as_str());
                    rows.push(SuiteRow {
                        node: &n.label,
                        hardware: crate::history::record_hardware(&n.record),
                        suite: &t.id.suite,
                        target,
                        tally: Tally::default(),
                    });
                    rows.len() - 1
                });
            let tally = &mut rows[i].tally;
            match t.outcome {
                TrialOutcome::Passed => tally.passed += 1,
                TrialOutcome::Failed => tally.failed += 1,
                TrialOutcome::Gated => tally.gated += 1,
            }
        }
    }
    rows
}

/// One gate on one node: how its trial ended, what it measured.
struct Cell<'a> {
    outcome: TrialOutcome,
    gate: Option<&'a GateRecord>,
}

/// One gate of one suite across the nodes, a cell per node label.
struct GateRow<'a> {
    suite: &'a str,
    gate: String,
    cells: Vec<Option<Cell<'a>>>,
}

/// The node labels, each once, in order.
fn labels(nodes: &[Node]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for n in nodes {
        if !out.contains(&n.label.as_str()) {
            out.push(&n.label);
        }
    }
    out
}

fn gate_rows(nodes: &[Node]) -> Vec<GateRow<'_>> {
    let labels = labels(nodes);
    let mut rows: Vec<GateRow> = Vec::new();
    for n in nodes {
        for t in n
            .record
            .trials
            .iter()
            .filter(|t| t.id.stage == Stage::Performance)
        {
            let gate = t.id.within_stage();
            let i = rows
                .iter()
                .position(|r| r.suite == t.id.suite && r.gate == gate)
                .unwrap_or_else(|| {
                    rows.push(GateRow {
                        suite: &t.id.suite,
                        gate: gate.clone(),
                        cells: labels.iter().map(|_| None).collect(),
                    });
                    rows.len() - 1
                });
            let column = labels
                .iter()
                .position(|l| *l == n.label)
                .expect("every node's label is listed");
            let measured = n
                .record
                .suites
                .iter()
                .filter(|s| s.suite == t.id.suite)
                .flat_map(|s| &s.gates)
                .find(|g| g.gate == gate);
            rows[i].cells[column] = Some(Cell {
                outcome: t.outcome,
                gate: measured,
            });
        }
    }
    rows
}

/// The key figures any node measured for a gate, with each node's value
/// shown and its change against the first node that measured it.
fn figure_cells(row: &GateRow) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for key in KEY_FIGURES {
        let values: Vec<Option<f64>> = row
            .cells
            .iter()
            .map(|c| c.as_ref()?.gate?.figures.get(key).copied())
            .collect();
        let Some(first) = values.iter().flatten().next().copied() else {
            continue;
        };
        let mut reference_seen = false;
        let shown = values
            .iter()
            .map(|v| match v {
                None => "—".to_owned(),
                Some(v) if !reference_seen => {
                    reference_seen = true;
                    format_figure(key, *v)
                }
                Some(v) if first == 0.0 => format_figure(key, *v),
                Some(v) => format!(
                    "{} ({:+.1}%)",
                    format_figure(key, *v),
                    (v - first) / first.abs() * 100.0
                ),
            })
            .collect();
        out.push((key.to_string(), shown));
    }
    out
}

/// The verdict over every node: passed and failed (gated included) trials.
pub fn counts(nodes: &[Node]) -> (usize, usize) {
    nodes.iter().fold((0, 0), |(p, f), n| {
        let (np, nf) = super::tally(&n.record);
        (p + np, f + nf)
    })
}

/// The merge as Markdown (a GitHub step summary).
pub fn markdown(nodes: &[Node]) -> String {
    let (passed, failed) = counts(nodes);
    let labels = labels(nodes);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## {} servegate on {} nodes: {passed} passed, {failed} failed{}\n",
        super::markdown::headline_mark(passed + failed, failed > 0),
        labels.len(),
        if nodes.iter().all(|n| n.record.complete) {
            ""
        } else {
            " (a run was interrupted)"
        }
    );
    let _ = writeln!(
        out,
        "| node | hardware | suite | target | passed | failed | gated |\n|---|---|---|---|---|---|---|"
    );
    for r in suite_rows(nodes) {
        let _ = writeln!(
            out,
            "| {} | {} | `{}` | {} | {} | {} | {} |",
            r.node, r.hardware, r.suite, r.target, r.tally.passed, r.tally.failed, r.tally.gated
        );
    }
    let header = labels.join(" | ");
    let rule = "---|".repeat(labels.len());
    for row in gate_rows(nodes) {
        let _ = writeln!(
            out,
            "\n### `{}::performance::{}` across nodes\n\n| | {header} |\n|---|{rule}",
            row.suite, row.gate
        );
        let outcomes: Vec<&str> = row
            .cells
            .iter()
            .map(|c| c.as_ref().map_or("—", |c| super::markdown::mark(c.outcome)))
            .collect();
        let _ = writeln!(out, "| outcome | {} |", outcomes.join(" | "));
        for (key, shown) in figure_cells(&row) {
            let _ = writeln!(out, "| {key} | {} |", shown.join(" | "));
        }
    }
    let failures: Vec<(&str, &crate::record::TrialRecord)> = nodes
        .iter()
        .flat_map(|n| n.record.trials.iter().map(move |t| (n.label.as_str(), t)))
        .filter(|(_, t)| t.message.is_some())
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "\n### Failures");
        for (node, t) in failures {
            super::markdown::failure(&mut out, &format!("{node}/{}", t.name), t);
        }
    }
    out
}

/// The merge as one self-contained HTML page.
pub fn html(nodes: &[Node]) -> String {
    let (passed, failed) = counts(nodes);
    let labels = labels(nodes);
    let mut out = String::from(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>servegate fleet report</title><style>\
         body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}\
         table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}\
         tr.fail td,td.fail{background:#fde8e8}td.pass{color:#176317}pre{white-space:pre-wrap;font-size:12px}\
         h1 .fail{color:#b00}h1 .pass{color:#176317}</style></head><body>",
    );
    let _ = write!(
        out,
        "<h1>servegate on {} nodes: <span class=\"{}\">{passed} passed, {failed} failed</span></h1>\
         <h2>Nodes and suites</h2><table><tr><th>node</th><th>hardware</th><th>suite</th><th>target</th><th>passed</th><th>failed</th><th>gated</th></tr>",
        labels.len(),
        if failed == 0 { "pass" } else { "fail" },
    );
    for r in suite_rows(nodes) {
        let _ = write!(
            out,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if r.tally.failed + r.tally.gated == 0 {
                "pass"
            } else {
                "fail"
            },
            esc(r.node),
            esc(&r.hardware),
            esc(r.suite),
            esc(r.target),
            r.tally.passed,
            r.tally.failed,
            r.tally.gated
        );
    }
    out.push_str("</table><h2>Gates across nodes</h2>");
    let header = labels.iter().fold(String::new(), |mut h, l| {
        let _ = write!(h, "<th>{}</th>", esc(l));
        h
    });
    for row in gate_rows(nodes) {
        let _ = write!(
            out,
            "<h3><code>{}::performance::{}</code></h3><table><tr><th></th>{header}</tr><tr><td>outcome</td>",
            esc(row.suite),
            esc(&row.gate)
        );
        for c in &row.cells {
            let class = match c.as_ref().map(|c| c.outcome) {
                Some(TrialOutcome::Passed) => "pass",
                Some(_) => "fail",
                None => "",
            };
            let _ = write!(
                out,
                "<td class=\"{class}\">{}</td>",
                c.as_ref().map_or("—", |c| c.outcome.name())
            );
        }
        out.push_str("</tr>");
        for (key, shown) in figure_cells(&row) {
            let _ = write!(out, "<tr><td>{}</td>", esc(&key));
            for s in shown {
                let _ = write!(out, "<td>{}</td>", esc(&s));
            }
            out.push_str("</tr>");
        }
        out.push_str("</table>");
    }
    out.push_str(
        "<h2>Trials</h2><table><tr><th>trial</th><th>outcome</th><th>time</th><th>where</th></tr>",
    );
    for t in &combined(nodes).trials {
        trial_row(&mut out, t);
    }
    out.push_str("</table></body></html>\n");
    out
}

/// The files `report merge` writes into its output directory.
pub const FILES: [&str; 3] = ["summary.md", "junit.xml", "report.html"];

/// Reads every record argument and writes [`FILES`] into `out`; returns
/// the nodes read.
pub fn write(args: &[String], out: &Path) -> Result<Vec<Node>, MergeError> {
    let nodes = args
        .iter()
        .map(|a| read_node(a))
        .collect::<Result<Vec<_>, _>>()?;
    let junit = super::junit::render(&combined(&nodes))?;
    for (name, text) in FILES.iter().zip([markdown(&nodes), junit, html(&nodes)]) {
        crate::files::write_atomically(&out.join(name), &text)?;
    }
    Ok(nodes)
}
