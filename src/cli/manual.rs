//! `servegate completions <shell>` and `servegate man`: the shell
//! completions and the manual pages, generated from the command line's own
//! definition, so they never drift from it. The release archives and the
//! wheel carry them as generated here (`packaging/share/`, kept equal to
//! this output by `tests/cli/manual.rs`).

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use servegate::exit::Exit;

/// Prints the completion script of `shell` for `command`.
pub(crate) fn completions(shell: clap_complete::Shell, mut command: clap::Command) -> ExitCode {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "servegate", &mut out);
    write_out(&out)
}

/// Prints `servegate.1`, or with `dir` writes it there with a page per
/// command (`servegate-run.1`, `servegate-history-list.1`, …).
pub(crate) fn man(command: clap::Command, dir: Option<&Path>) -> ExitCode {
    let Some(dir) = dir else {
        let mut out = Vec::new();
        // As `generate_to` writes it: no page lists `help` as a command.
        let command = command.disable_help_subcommand(true);
        return match clap_mangen::Man::new(command).render(&mut out) {
            Ok(()) => write_out(&out),
            Err(e) => failed("render the manual page", &e),
        };
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        return failed(&format!("create {}", dir.display()), &e);
    }
    match clap_mangen::generate_to(command, dir) {
        Ok(()) => Exit::Passed.into(),
        Err(e) => failed(&format!("write the manual pages to {}", dir.display()), &e),
    }
}

fn write_out(bytes: &[u8]) -> ExitCode {
    match std::io::stdout().lock().write_all(bytes) {
        Ok(()) => Exit::Passed.into(),
        Err(e) => failed("write to standard output", &e),
    }
}

fn failed(what: &str, e: &std::io::Error) -> ExitCode {
    eprintln!("error: failed to {what}: {e}");
    Exit::Failed.into()
}
