//! `servegate bench-client`: the client's cost against the raw-HTTP floor.

use std::path::Path;
use std::process::ExitCode;

use servegate::bench::{self, BenchOptions};
use servegate::exit::Exit;

/// Where `bench-client --history` keeps its rows, under which commit
/// (`None` without `--history`); the exit code where no commit can be
/// named (said).
pub(crate) fn bench_keeping(
    history: Option<String>,
    commit: Option<String>,
) -> Result<Option<bench::Keeping>, ExitCode> {
    let Some(history) = history else {
        return Ok(None);
    };
    let location = servegate::history::Location::resolve(Some(&history), Path::new("."));
    if location == servegate::history::Location::Off {
        return Ok(None);
    }
    let Some(commit) = commit.or_else(bench::checkout_commit) else {
        eprintln!(
            "error: --history keeps figures per commit: name it with --commit (the working directory is not servegate's own checkout)"
        );
        return Err(ExitCode::from(Exit::Usage));
    };
    Ok(Some(bench::Keeping { location, commit }))
}

/// `servegate bench-client`.
pub(crate) fn bench_client(opts: &BenchOptions) -> ExitCode {
    match bench::run(opts) {
        Ok(table) => {
            print!("{table}");
            ExitCode::from(Exit::Passed)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(Exit::Failed)
        }
    }
}
