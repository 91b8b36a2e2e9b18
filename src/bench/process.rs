//! The processes of a bench: the simulator in a child process of its own
//! (killed when dropped), this one pinned with `taskset`, and this one's
//! CPU time.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A child process, killed when dropped.
struct Killed {
    child: Child,
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A simulator in a child process, killed when dropped.
pub(super) struct SimProcess {
    _child: Killed,
    pub(super) url: String,
}

/// `command` run under `taskset -c cpus` when `cpus` is given.
fn pinned(program: &std::ffi::OsStr, cpus: Option<&str>) -> Command {
    match cpus {
        Some(cpus) => {
            let mut c = Command::new("taskset");
            c.args(["-c", cpus]).arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// `servegate sim` in a child process (on `cpu` when given): the stamped
/// streamer writing `stamped` tokens at a time, or the simulator (`None`).
pub(super) fn spawn_sim(
    ttft: Duration,
    itl: Duration,
    stamped: Option<u32>,
    cpu: Option<usize>,
) -> Result<SimProcess, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let (ttft, itl) = (
        format!("{}us", ttft.as_micros()),
        format!("{}us", itl.as_micros()),
    );
    // Capacity beyond any level measured: the batching model must not
    // stretch the truth the client is compared with.
    let mut args = vec![
        "sim",
        "--port",
        "0",
        "--ttft",
        &ttft,
        "--itl",
        &itl,
        "--capacity",
        "1000000",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect::<Vec<_>>();
    if let Some(pack) = stamped {
        args.extend([
            "--stamp-tokens".into(),
            "--pack-tokens".into(),
            pack.to_string(),
        ]);
    }
    let cpu = cpu.map(|c| c.to_string());
    let mut child = pinned(exe.as_os_str(), cpu.as_deref())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("failed to start the simulator process: {e}"))?;
    let stdout = child.stdout.take().ok_or("no simulator stdout")?;
    let child = Killed { child };
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| format!("failed to read the simulator's address: {e}"))?;
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .ok_or_else(|| format!("the simulator printed no address: {line:?}"))?
        .to_owned();
    Ok(SimProcess { _child: child, url })
}

/// Whether `taskset` can pin processes here.
pub(super) fn taskset() -> bool {
    Command::new("taskset")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Pins every thread of this process to `cpus` (threads started later
/// inherit it).
pub(super) fn pin_self(cpus: &str) -> bool {
    Command::new("taskset")
        .args(["-a", "-cp", cpus, &std::process::id().to_string()])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
