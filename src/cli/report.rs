//! `servegate report`: a saved run record rendered in a format, and
//! `servegate report merge`, the records of several nodes joined.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use servegate::exit::Exit;
use servegate::report::Format;

#[derive(Subcommand)]
pub(crate) enum ReportMerge {
    /// Merge the run records of several nodes (one CI job each) into one
    /// report: `summary.md` (also printed), `junit.xml` and `report.html`,
    /// a row per node and suite, the same gate across nodes side by side.
    ///
    /// Exit codes: 0 every trial passed, 1 one failed, 2 a record is unreadable.
    Merge {
        /// `LABEL=PATH` or `PATH` (labelled by its directory's name): a
        /// `report.json`, a run directory, or an output directory holding `latest/`.
        #[arg(required = true, value_name = "RECORD")]
        records: Vec<String>,
        /// Where the three files are written.
        #[arg(long, default_value = "servegate-merged")]
        out_dir: PathBuf,
    },
}

/// `servegate report merge`.
pub(crate) fn merge_reports(records: &[String], out_dir: &Path) -> ExitCode {
    use servegate::report::merge;
    match merge::write(records, out_dir) {
        Ok(nodes) => {
            print!("{}", merge::markdown(&nodes));
            eprintln!(
                "servegate: {} records merged into {}: {}",
                nodes.len(),
                out_dir.display(),
                merge::FILES.join(", ")
            );
            Exit::failed_if(merge::counts(&nodes).1 > 0).into()
        }
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Usage.into()
        }
    }
}

pub(crate) fn report(path: &Path, format: Format) -> ExitCode {
    let record = match servegate::record::read(path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Usage.into();
        }
    };
    let text = servegate::report::render(format, &record, Some(path));
    match text {
        Ok(t) => {
            print!("{t}");
            ExitCode::from(Exit::Passed)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(Exit::Failed)
        }
    }
}
