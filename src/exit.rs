//! servegate's exit codes, each in one place with what it means: every
//! command and the test harness entry map their outcome here, never to a
//! number of their own.

use std::process::ExitCode;

/// How a servegate command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything passed (or the command did what it was asked).
    Passed,
    /// A trial failed, or what the command checks did not hold.
    Failed,
    /// What was asked cannot be done: an invalid suite file, flag or
    /// environment variable, a file that cannot be read.
    Usage,
    /// A target could not be reached or launched.
    Unreachable,
    /// The filter selected no trial (nextest has a code of its own for it
    /// too).
    NoMatch,
    /// Interrupted (Ctrl-C, SIGTERM), after its record was written: 128 +
    /// SIGINT, as a shell reports it.
    Interrupted,
    /// The reader of its output went away (`servegate list | head -1`):
    /// 128 + SIGPIPE, as a shell reports a process a closed pipe ended.
    ClosedPipe,
}

impl Exit {
    /// Every exit, in order of its code.
    pub const ALL: [Exit; 7] = [
        Exit::Passed,
        Exit::Failed,
        Exit::Usage,
        Exit::Unreachable,
        Exit::NoMatch,
        Exit::Interrupted,
        Exit::ClosedPipe,
    ];

    /// The process's exit status.
    pub fn code(self) -> u8 {
        match self {
            Exit::Passed => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::Unreachable => 3,
            Exit::NoMatch => 4,
            Exit::Interrupted => 130,
            Exit::ClosedPipe => 141,
        }
    }

    /// [`Exit::Failed`] when `failed`, else [`Exit::Passed`].
    pub fn failed_if(failed: bool) -> Exit {
        if failed { Exit::Failed } else { Exit::Passed }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command-line page's table lists exactly these codes, in order.
    #[test]
    fn the_documented_codes_are_these() {
        let page = include_str!("../docs/src/command-line.md");
        let documented: Vec<u8> = page
            .lines()
            .filter_map(|l| l.strip_prefix("| ")?.split(" |").next()?.parse().ok())
            .collect();
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(documented, codes);
    }
}
