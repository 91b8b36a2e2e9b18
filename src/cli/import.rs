//! `servegate import`: another tool's results as a servegate record.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use servegate::exit::Exit;

#[derive(Subcommand)]
pub(crate) enum ImportWhat {
    /// The result file of `sglang.bench_serving --output-file` (JSON lines,
    /// one run each) or of `vllm bench serve --save-result` (one JSON
    /// object): each run a gate, its figures in servegate's names (its ITL
    /// is `itl_chunk`, the gap between chunks, or `itl` where SGLang's
    /// bench shares a chunk's gap among its tokens: its native backend, or
    /// beside a speculative accept length). Written as
    /// `<out>/runs/<run>/report.json` and `<out>/latest/report.json`.
    ///
    /// Exit codes: 0 written, 1 the record could not be written, 2 the file
    /// cannot be read or is not a result file.
    BenchServing {
        /// The result file.
        file: PathBuf,
        /// The suite its figures belong to: a servegate suite's name, for
        /// `baseline accept` to give them to its gates [default:
        /// `bench_serving`].
        #[arg(long)]
        suite: Option<String>,
        /// The gate, for a file of one result [default: named by its load,
        /// `c8_rate_inf`].
        #[arg(long)]
        gate: Option<String>,
        /// The configuration fingerprint, in place of the one made from the
        /// result (copy it from a servegate run's record to compare with
        /// that configuration).
        #[arg(long)]
        fingerprint: Option<String>,
        /// The hardware it ran on (`8 x NVIDIA H200`), which the result
        /// does not say: the history keys its series by it [default:
        /// `unknown`, never `no GPU`].
        #[arg(long)]
        hardware: Option<String>,
        /// servegate's output directory [default: `target/servegate` (or `.servegate` outside a Cargo project) in the
        /// working directory's project].
        #[arg(long, env = "SERVEGATE_OUT")]
        out_dir: Option<PathBuf>,
    },
}

pub(crate) fn import(what: ImportWhat) -> ExitCode {
    let ImportWhat::BenchServing {
        file,
        suite,
        gate,
        fingerprint,
        hardware,
        out_dir,
    } = what;
    import_bench_serving(
        &file,
        &servegate::record::import::Naming {
            suite,
            gate,
            fingerprint,
            hardware,
        },
        out_dir.as_deref(),
    )
}

pub(crate) fn import_bench_serving(
    file: &Path,
    naming: &servegate::record::import::Naming,
    out_dir: Option<&Path>,
) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", file.display());
            return ExitCode::from(Exit::Usage);
        }
    };
    let record = match servegate::record::import::file_record(&text, naming, file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            return ExitCode::from(Exit::Usage);
        }
    };
    let out = servegate::record::out_dir(out_dir, None);
    // Its run id is the file's (`import-<hash>`), whatever the directory
    // is called: `servegate history import` of either finds one run.
    let dir = servegate::record::new_run_dir(&out);
    let info = servegate::record::RunInfo {
        dir,
        out,
        started_unix: record.started_unix,
    };
    for suite in &record.suites {
        eprintln!(
            "servegate: suite `{}` ({}): {}",
            suite.suite, suite.fingerprint, suite.target
        );
        for g in &suite.gates {
            eprintln!(
                "  gate `{}`: {} figures ({})",
                g.gate,
                g.figures.iter().count(),
                g.load
            );
        }
    }
    match servegate::record::write(&info, &record) {
        Ok(path) => {
            eprintln!(
                "servegate: run record written to {} (`servegate baseline accept` makes its figures baselines; `servegate report {}` shows them)",
                path.display(),
                info.dir.display()
            );
            ExitCode::from(Exit::Passed)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(Exit::Failed)
        }
    }
}
