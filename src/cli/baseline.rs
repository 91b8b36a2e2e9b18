//! `servegate baseline`: a gate's figures kept as the reference its
//! `baseline` bounds are relative to.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use servegate::exit::Exit;

use crate::RunArgs;

#[derive(Subcommand)]
pub(crate) enum BaselineAction {
    /// Run suites, then record the figures of every gate measured; a run
    /// that fails records nothing (exit codes as `run`'s). Its `baseline`
    /// bounds are not applied: it replaces them.
    Save(RunArgs),
    /// Record the figures of the latest run (`<out>/latest/report.json`).
    Accept {
        /// servegate's output directory [default: `target/servegate` (or `.servegate` outside a Cargo project) in the
        /// working directory's project].
        #[arg(long, env = "SERVEGATE_OUT")]
        out_dir: Option<PathBuf>,
    },
}

pub(crate) fn accept_baselines(out_dir: Option<&Path>) -> ExitCode {
    let out = servegate::record::out_dir(out_dir, None);
    match servegate::record::accept(&out) {
        Ok(files) => {
            for f in files {
                eprintln!("servegate: baseline written to {}", f.display());
            }
            ExitCode::from(Exit::Passed)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(Exit::Failed)
        }
    }
}
