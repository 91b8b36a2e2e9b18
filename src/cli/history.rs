//! `servegate history`: the series the history holds (`list`), one
//! series' points with the changes found in it (`show`), and records of
//! earlier runs or other tools' results added to it (`import`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod import;

use clap::Subcommand;
use import::import;
use servegate::exit::Exit;
use servegate::history::{Filter, History, Location, Point, SeriesKey, SeriesSummary};
use servegate::suite::metric::KEY_FIGURES;
use servegate::suite::metric::format_stored;
use servegate::units::format_unix;

/// Where the history is, as every `history` command takes it.
#[derive(clap::Args)]
pub(crate) struct HistoryArgs {
    /// The history: a SQLite file [default: `history.sqlite` in the
    /// output directory].
    // Its value may be a PostgreSQL URL with a password: never shown.
    #[arg(long, global = true, env = servegate::history::HISTORY_ENV, value_name = "FILE", hide_env_values = true)]
    history: Option<String>,
    /// servegate's output directory, where the default history is
    /// [default: `target/servegate` in the working directory's project, or
    /// `.servegate` outside a Cargo project].
    #[arg(long, global = true, env = "SERVEGATE_OUT")]
    out_dir: Option<PathBuf>,
    #[command(subcommand)]
    action: HistoryAction,
}

#[derive(Subcommand)]
enum HistoryAction {
    /// List the series: each suite's gate's figure, per model and
    /// hardware, with its points and newest value.
    ///
    /// Exit codes: 0 listed, 2 the history cannot be read.
    List {
        #[command(flatten)]
        series: SeriesArgs,
        /// `table` for people, `json` for scripts.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// Show one series' newest points, oldest first, with their runs,
    /// machines and commits.
    ///
    /// Exit codes: 0 shown, 2 the history cannot be read or the series is
    /// not in it (or is several: name --model or --hardware).
    Show {
        /// `<suite>::<gate>`, as the trial's name writes them
        /// (`sglang::decode`, `sglang::sweep::concurrency_8`).
        gate: String,
        /// The figure (`decode_tok_s.mean`).
        figure: String,
        /// The served model, where the series has several.
        #[arg(long)]
        model: Option<String>,
        /// The hardware (`8 x NVIDIA H200`, `no GPU`), where it has several.
        #[arg(long)]
        hardware: Option<String>,
        /// How many of the newest points to show (the changes of level
        /// are found in the whole series).
        #[arg(long, default_value_t = 20)]
        last: usize,
        /// `table` for people, `json` for scripts.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// Write the history as an HTML page: the changes of level found, and
    /// one plot per series with its runs (hover a dot: run, time, value,
    /// commit, configuration) and its changes marked.
    ///
    /// Exit codes: 0 written, 2 the history cannot be read or the page
    /// cannot be written.
    Report {
        #[command(flatten)]
        series: SeriesArgs,
        /// How many of each series' newest points to plot (the changes of
        /// level are found in the whole series).
        #[arg(long, default_value_t = 100)]
        last: usize,
        /// The page [default: `history.html` in the output directory].
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Add earlier runs to the history: their `report.json`, run
    /// directories, output directories (every run under `runs/`), or the
    /// result files of `sglang.bench_serving` and `vllm bench serve`.
    /// A run already in it is left as it is.
    ///
    /// Exit codes: 0 imported, 2 a file is not a record or the history
    /// cannot be written (the others are imported).
    Import {
        /// The records.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
}

/// Which series `list` and `report` take.
#[derive(clap::Args)]
struct SeriesArgs {
    /// Only series whose suite's label holds this.
    #[arg(long, default_value = "")]
    suite: String,
    /// Only series whose gate's name holds this.
    #[arg(long, default_value = "")]
    gate: String,
    /// Only series whose figure's name holds this (`decode_tok_s`)
    /// [default: the key figures, as the reports show them].
    #[arg(long)]
    figure: Option<String>,
    /// Every figure's series, not only the key figures'.
    #[arg(long, conflicts_with = "figure")]
    all: bool,
}

impl SeriesArgs {
    /// The filter, and whether only the key figures' series are taken.
    fn filter(self) -> (Filter, bool) {
        let key_only = self.figure.is_none() && !self.all;
        let filter = Filter {
            suite: self.suite,
            gate: self.gate,
            key: self.figure.unwrap_or_default(),
        };
        (filter, key_only)
    }
}

/// How a listing is written.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    /// Aligned columns.
    Table,
    /// One JSON document.
    Json,
}

/// `servegate history`.
pub(crate) fn history(args: HistoryArgs) -> ExitCode {
    // What the history holds came from records: the environment's
    // secrets are scrubbed from everything shown of it.
    servegate::secrets::add_from_environment();
    let out = servegate::record::out_dir(args.out_dir.as_deref(), None);
    let location = Location::resolve(args.history.as_deref(), &out);
    // Reading a SQLite history that is not there would create an empty one
    // and list nothing: a run from elsewhere recorded beside its suite's
    // project, not here, and that is said.
    if let Location::Sqlite(path) = &location
        && !path.exists()
        && !matches!(args.action, HistoryAction::Import { .. })
    {
        eprintln!(
            "error: there is no history at {}: `servegate run` records beside the suite's project (its `target/servegate/`, `.servegate/` outside a Cargo project, or the output directory it printed); name it with --out-dir, --history FILE or SERVEGATE_HISTORY",
            path.display()
        );
        return Exit::Usage.into();
    }
    if matches!(args.action, HistoryAction::Import { .. }) {
        servegate::record::prepare(&out);
    }
    let mut history = match History::open(&location) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {}", servegate::text::for_log(&e.to_string()));
            return Exit::Usage.into();
        }
    };
    let done = match args.action {
        HistoryAction::List { series, format } => {
            let (filter, key_only) = series.filter();
            list(&mut history, &filter, key_only, format)
        }
        HistoryAction::Show {
            gate,
            figure,
            model,
            hardware,
            last,
            format,
        } => show(
            &mut history,
            &gate,
            &figure,
            (model.as_deref(), hardware.as_deref()),
            last,
            format,
        ),
        HistoryAction::Report {
            series,
            last,
            output,
        } => {
            let (filter, key_only) = series.filter();
            let page = output.unwrap_or_else(|| out.join("history.html"));
            report(&mut history, &location, (&filter, key_only), last, &page)
        }
        HistoryAction::Import { paths } => import(&mut history, &location, &paths),
    };
    match done {
        Ok(()) => Exit::Passed.into(),
        Err(e) => {
            eprintln!("error: {}", servegate::text::for_log(&e));
            Exit::Usage.into()
        }
    }
}

/// The series `filter` names (with `key_only`, of the key figures only),
/// and how many it names of any figure.
fn selected(
    history: &mut History,
    filter: &Filter,
    key_only: bool,
) -> Result<(Vec<SeriesSummary>, usize), String> {
    let mut series = history.series(filter).map_err(|e| e.to_string())?;
    let every = series.len();
    if key_only {
        // A gate's key figures, and every figure of the client's own bench.
        let key = |k: &str| KEY_FIGURES.iter().any(|f| f.to_string() == k);
        series.retain(|s| key(&s.series.key) || s.series.suite == servegate::bench::HISTORY_SUITE);
    }
    Ok((series, every))
}

fn list(
    history: &mut History,
    filter: &Filter,
    key_only: bool,
    format: Format,
) -> Result<(), String> {
    use std::fmt::Write as _;
    let (series, every) = selected(history, filter, key_only)?;
    let mut out = String::new();
    match format {
        Format::Json => return print_json(&series),
        Format::Table => {
            if series.is_empty() {
                eprintln!("servegate: no series in the history match");
            }
            for s in &series {
                let _ = writeln!(
                    out,
                    "{}::{} {}  ({}, {})  {} point(s), newest {} at {}",
                    s.series.suite,
                    s.series.gate,
                    s.series.key,
                    s.series.model,
                    s.series.hardware,
                    s.points,
                    format_stored(&s.series.key, &s.unit, s.last_value),
                    format_unix(s.last_unix)
                );
            }
        }
    }
    print_out(&out);
    if every > series.len() && matches!(format, Format::Table) {
        eprintln!(
            "servegate: {} series of other figures not shown (--all, or --figure NAME)",
            every - series.len()
        );
    }
    Ok(())
}

/// `servegate history report`: the page of the series selected, each
/// with its newest `last` points and the changes found in them.
fn report(
    history: &mut History,
    location: &Location,
    (filter, key_only): (&Filter, bool),
    last: usize,
    page: &Path,
) -> Result<(), String> {
    use servegate::report::html::history::{SeriesPlot, render};
    let (series, _) = selected(history, filter, key_only)?;
    let mut plots = Vec::with_capacity(series.len());
    for s in series {
        let (points, _, changes) = newest_with_changes(history, &s.series, last)?;
        plots.push(SeriesPlot {
            changes,
            series: s.series,
            points,
        });
    }
    let html = render(&location.describe(), &plots);
    if let Some(dir) = page.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("failed to create {}: {e}", dir.display()))?;
    }
    std::fs::write(page, html).map_err(|e| format!("failed to write {}: {e}", page.display()))?;
    let changes: usize = plots.iter().map(|p| p.changes.len()).sum();
    eprintln!(
        "servegate: history report written to {} ({} series, {changes} change(s) of level)",
        page.display(),
        plots.len()
    );
    Ok(())
}

/// A series' newest `last` points, how many it has, and the changes of
/// level found in the whole of it (a change is a fact of the series, not
/// of the stretch shown: the newest 20 alone can hide one).
fn newest_with_changes(
    history: &mut History,
    series: &SeriesKey,
    last: usize,
) -> Result<(Vec<Point>, usize, Vec<servegate::history::SeriesChange>), String> {
    let mut points = history
        .points(series, usize::MAX)
        .map_err(|e| e.to_string())?;
    let mut changes = servegate::history::changes(&points);
    for c in &mut changes {
        let before = points[..c.index]
            .iter()
            .rev()
            .find(|p| !p.client_limited)
            .map(|p| p.fingerprint.clone());
        if let (Some(before), Some(now)) = (before, &c.configuration) {
            c.configuration_differs = history
                .differences(&before, now)
                .map_err(|e| e.to_string())?;
        }
    }
    let total = points.len();
    points.drain(..total.saturating_sub(last));
    Ok((points, total, changes))
}

/// Writes `text` to stdout as a log may show it (what the history holds
/// came from records, which are input: secrets scrubbed, acting
/// characters escaped, no forged workflow command); a reader that went
/// away (`| head`) ends it quietly.
fn print_out(text: &str) {
    let shown = servegate::text::for_log(text);
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), shown.as_bytes());
}

/// The series a `show` names: the one matching, or why not one.
fn pick(
    history: &mut History,
    gate: &str,
    figure: &str,
    (model, hardware): (Option<&str>, Option<&str>),
) -> Result<SeriesKey, String> {
    // The name as `list` renders it, compared whole: never parsed.
    let named = gate;
    let candidates: Vec<SeriesSummary> = history
        .series(&Filter::default())
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|s| {
            format!("{}::{}", s.series.suite, s.series.gate) == named
                && s.series.key == figure
                && model.is_none_or(|m| s.series.model == m)
                && hardware.is_none_or(|h| s.series.hardware == h)
        })
        .collect();
    match candidates.as_slice() {
        [one] => Ok(one.series.clone()),
        [] => Err(format!(
            "the history has no series `{named}` `{figure}`{}: `servegate history list` names those it has (`<suite>::<gate>`)",
            match (model, hardware) {
                (None, None) => String::new(),
                _ => " of that model and hardware".to_owned(),
            }
        )),
        many => Err(format!(
            "`{named}` `{figure}` is {} series; name one with --model and --hardware: {}",
            many.len(),
            many.iter()
                .map(|s| format!("{:?} on {:?}", s.series.model, s.series.hardware))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn show(
    history: &mut History,
    gate: &str,
    figure: &str,
    identity: (Option<&str>, Option<&str>),
    last: usize,
    format: Format,
) -> Result<(), String> {
    use std::fmt::Write as _;
    let series = pick(history, gate, figure, identity)?;
    let (points, total, changes) = newest_with_changes(history, &series, last)?;
    let mut out = String::new();
    match format {
        Format::Json => {
            return print_json(&serde_json::json!({
                "series": series,
                "points_total": total,
                // The index in the series of the first point shown.
                "first_index": total - points.len(),
                "points": points,
                "changes": changes,
            }));
        }
        Format::Table => {
            let _ = writeln!(
                out,
                "{}::{} {} ({}, {}): {} point(s){}",
                series.suite,
                series.gate,
                series.key,
                series.model,
                series.hardware,
                total,
                if points.len() < total {
                    format!(", the newest {} shown (--last)", points.len())
                } else {
                    String::new()
                }
            );
            let mut previous: Option<&str> = None;
            for p in &points {
                let differs = match previous {
                    Some(f) if f != p.fingerprint => history
                        .differences(f, &p.fingerprint)
                        .map_err(|e| e.to_string())?
                        .map_or_else(String::new, |d| format!(", by {d}")),
                    _ => String::new(),
                };
                let mut flags = Vec::new();
                if !p.gate_passed {
                    flags.push("gate failed".to_owned());
                }
                if p.client_limited {
                    flags.push("client-limited".to_owned());
                }
                if previous.is_some_and(|f| f != p.fingerprint) {
                    flags.push(format!("configuration now: {}{differs}", p.fingerprint));
                }
                previous = Some(&p.fingerprint);
                let _ = writeln!(
                    out,
                    "  {}  {:>14}  {}  {}  commit {}{}",
                    format_unix(p.finished_unix),
                    format_stored(&series.key, &p.unit, p.value),
                    p.run_uid,
                    p.servegate,
                    p.suite_commit
                        .as_deref()
                        .map_or_else(|| "-".to_owned(), commit_shown),
                    if flags.is_empty() {
                        String::new()
                    } else {
                        format!("  ({})", flags.join("; "))
                    }
                );
            }
        }
    }
    if matches!(format, Format::Table) {
        let unit = points.first().map_or("", |p| p.unit.as_str());
        if changes.is_empty() {
            let _ = writeln!(out, "no change of level in the series' {total} point(s)");
        }
        for c in &changes {
            let _ = writeln!(
                out,
                "change at {} (run {}, point {} of {total}, commit {}): {} → {} ({:+.1}%, p = {}){}",
                format_unix(c.finished_unix),
                c.run_uid,
                c.index + 1,
                c.suite_commit
                    .as_deref()
                    .map_or_else(|| "-".to_owned(), commit_shown),
                format_stored(&series.key, unit, c.mean_before),
                format_stored(&series.key, unit, c.mean_after),
                100.0 * c.relative,
                servegate::history::changepoint::format_p(c.p_value),
                c.configuration
                    .as_ref()
                    .map_or_else(String::new, |f| format!(
                        "; configuration now: {f}{}",
                        c.configuration_differs
                            .as_ref()
                            .map_or_else(String::new, |d| format!(", by {d}"))
                    ))
            );
        }
    }
    print_out(&out);
    Ok(())
}

/// Writes `value` to stdout as JSON that stays JSON: every string
/// scrubbed of the environment's secrets, and every character that would
/// act on a terminal written as a `\u` escape (serde escapes the C0
/// controls; DEL, C1 and the bidirectional overrides are escaped here).
fn print_json<T: serde::Serialize>(value: &T) -> Result<(), String> {
    let mut value = serde_json::to_value(value).map_err(|e| e.to_string())?;
    servegate::secrets::scrub_json(&mut value);
    let text = serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?;
    let shown = servegate::text::json_inert(&text) + "\n";
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), shown.as_bytes());
    Ok(())
}

/// A commit as `show` prints it: its first 12 characters, shown as text
/// (a history is input: an imported record or another writer can hold
/// anything there).
fn commit_shown(commit: &str) -> String {
    servegate::text::printable(&commit.chars().take(12).collect::<String>()).into_owned()
}
