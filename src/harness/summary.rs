//! What a run prints after libtest's lines: the target of every suite again
//! and the figures each gate measured, so a green run shows its numbers.

use std::sync::Arc;

use super::session::SuiteRun;

/// Prints the targets and the measured figures.
pub fn print(runs: &[Arc<SuiteRun>]) {
    if runs.is_empty() {
        return;
    }
    println!("servegate: figures measured in this run");
    for run in runs {
        match &run.target {
            Ok(c) => println!("  suite `{}` against {}", run.suite.name, c.description),
            Err(e) => println!("  suite `{}`: target failed: {e}", run.suite.name),
        }
        let figures = run.figures();
        if figures.is_empty() {
            println!("    (no performance gate measured)");
        }
        for f in figures {
            println!("  {}::performance::{} [{}]", run.suite.name, f.gate, f.load);
            if f.repeats > 1 {
                println!(
                    "    (figures of the last of {} repeats; verdicts over all of them)",
                    f.repeats
                );
            }
            print!("{}", f.metrics.render());
            for (check, pass) in &f.checks {
                println!("    {} {check}", if *pass { "pass" } else { "FAIL" });
            }
        }
    }
}
