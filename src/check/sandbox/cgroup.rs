//! A cgroup leaf for the supervisor and everything it starts: total memory
//! (`memory.max`, or `memory.limit_in_bytes` on a v1 hierarchy) and process
//! count (`pids.max`), where the host lets servegate make one; and a way to
//! kill everything in it (`cgroup.kill` on v2) whatever it did to escape
//! its process group.
//!
//! cgroup v2 is used where our own cgroup delegates the controllers; each
//! controller it lacks is looked for in a writable v1 hierarchy (hosts that
//! mount both, like many CI containers).

use std::path::{Path, PathBuf};

use super::Layers;

/// The leaves made for one program.
#[derive(Debug, Default, Clone)]
pub(super) struct Cgroup {
    /// Every leaf the supervisor joins (v2 first, where there is one).
    leaves: Vec<PathBuf>,
    /// The leaf enforcing the memory limit, and whether it is v2.
    memory: Option<(PathBuf, bool)>,
    /// The leaf enforcing the process limit, and whether it is v2.
    pids: Option<(PathBuf, bool)>,
    /// The memory limit, MiB, and the process limit.
    limits: (u64, u64),
}

/// A cgroup hierarchy as `/proc/self/mountinfo` and `/proc/self/cgroup` tell.
struct Hierarchy {
    /// Where our own cgroup is.
    dir: PathBuf,
    /// cgroup v2 (unified)?
    v2: bool,
    /// The controllers of a v1 hierarchy (from its mount options).
    controllers: Vec<String>,
}

impl Cgroup {
    /// Makes leaves named `name` limiting memory and processes, and notes
    /// in `layers` which limits hold and why any does not. The leaves may
    /// be none, or hold one limit only.
    pub fn create(name: &str, memory_mib: u64, pids: u64, layers: &mut Layers) -> Self {
        let mut cg = Self {
            limits: (memory_mib, pids),
            ..Self::default()
        };
        let hierarchies = hierarchies();
        let mut why = Vec::new();
        for h in hierarchies.iter().filter(|h| h.v2) {
            let leaf = h.dir.join(name);
            if let Err(e) = std::fs::create_dir(&leaf) {
                why.push(format!("v2 at {}: {e}", h.dir.display()));
                continue;
            }
            let controllers =
                std::fs::read_to_string(leaf.join("cgroup.controllers")).unwrap_or_default();
            let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
            if has("memory") && set(&leaf, "memory.max", memory_mib * 1024 * 1024) {
                // No swapping past the limit either, where swap is accounted.
                let _ = std::fs::write(leaf.join("memory.swap.max"), "0");
                cg.memory = Some((leaf.clone(), true));
            }
            if has("pids") && set(&leaf, "pids.max", pids) {
                cg.pids = Some((leaf.clone(), true));
            }
            if cg.memory.is_none() || cg.pids.is_none() {
                why.push(format!(
                    "v2 at {} delegates [{}]",
                    h.dir.display(),
                    controllers.trim()
                ));
            }
            cg.leaves.push(leaf);
            break;
        }
        for h in hierarchies.iter().filter(|h| !h.v2) {
            let wants_memory = cg.memory.is_none() && h.controllers.iter().any(|c| c == "memory");
            let wants_pids = cg.pids.is_none() && h.controllers.iter().any(|c| c == "pids");
            if !wants_memory && !wants_pids {
                continue;
            }
            let leaf = h.dir.join(name);
            if let Err(e) = std::fs::create_dir(&leaf) {
                why.push(format!(
                    "v1 {} at {}: {e}",
                    h.controllers.join(","),
                    h.dir.display()
                ));
                continue;
            }
            if wants_memory && set(&leaf, "memory.limit_in_bytes", memory_mib * 1024 * 1024) {
                cg.memory = Some((leaf.clone(), false));
            }
            if wants_pids && set(&leaf, "pids.max", pids) {
                cg.pids = Some((leaf.clone(), false));
            }
            cg.leaves.push(leaf);
        }
        let mut held = Vec::new();
        if let Some((_, v2)) = &cg.memory {
            held.push(if *v2 { "memory" } else { "memory v1" });
        }
        if let Some((_, v2)) = &cg.pids {
            held.push(if *v2 { "pids" } else { "pids v1" });
        }
        if why.is_empty() {
            why.push("no cgroup hierarchy found".into());
        }
        let why = why.join("; ");
        if held.is_empty() {
            layers.not_available(
                "cgroup",
                format!("no memory or pids controller to use ({why})"),
            );
        } else {
            layers.active.push(format!("cgroup({})", held.join(",")));
            // One limit without the other is named missing on its own.
            if cg.memory.is_none() {
                layers.not_available("cgroup memory", format!("no memory controller ({why})"));
            }
            if cg.pids.is_none() {
                layers.not_available("cgroup pids", format!("no pids controller ({why})"));
            }
        }
        cg
    }

    /// Moves a process (the supervisor, before it starts anything) into
    /// every leaf.
    pub fn add(&self, pid: u32) -> Result<(), String> {
        for leaf in &self.leaves {
            std::fs::write(leaf.join("cgroup.procs"), pid.to_string())
                .map_err(|e| format!("failed to move into {}: {e}", leaf.display()))?;
        }
        Ok(())
    }

    /// What the limits stopped: processes killed at the memory limit,
    /// forks refused at the process limit.
    pub fn contained(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((leaf, v2)) = &self.memory {
            let file = if *v2 {
                "memory.events"
            } else {
                "memory.oom_control"
            };
            let kills = counter(&leaf.join(file), "oom_kill");
            if kills > 0 {
                out.push(format!(
                    "the {} MiB memory limit of all its processes together killed {kills} of them",
                    self.limits.0
                ));
            }
        }
        if let Some((leaf, _)) = &self.pids {
            let refused = counter(&leaf.join("pids.events"), "max");
            if refused > 0 {
                out.push(format!(
                    "{refused} fork{} refused at the limit of {} processes",
                    if refused == 1 { " was" } else { "s were" },
                    self.limits.1
                ));
            }
        }
        out
    }

    /// Kills everything left in the leaves and removes them.
    pub fn remove(&self) {
        for _ in 0..100 {
            for leaf in &self.leaves {
                if std::fs::write(leaf.join("cgroup.kill"), "1").is_err() {
                    let procs =
                        std::fs::read_to_string(leaf.join("cgroup.procs")).unwrap_or_default();
                    for pid in procs.split_whitespace().filter_map(|p| p.parse().ok()) {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                }
            }
            self.leaves
                .iter()
                .for_each(|l| drop(std::fs::remove_dir(l)));
            if self.leaves.iter().all(|l| !l.exists()) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

fn set(leaf: &Path, file: &str, value: u64) -> bool {
    std::fs::write(leaf.join(file), value.to_string()).is_ok()
}

/// The value of `key` in a flat-keyed file (`oom_kill 2`).
fn counter(file: &Path, key: &str) -> u64 {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok()).flatten()
        })
        .unwrap_or(0)
}

/// The cgroup hierarchies mounted here, each at our own cgroup in it.
fn hierarchies() -> Vec<Hierarchy> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out = Vec::new();
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(point), Some(fstype), Some(options)) =
            (fields.get(4), fields.get(dash + 1), fields.get(dash + 3))
        else {
            continue;
        };
        let (v2, controllers): (bool, Vec<String>) = match *fstype {
            "cgroup2" => (true, Vec::new()),
            "cgroup" => (
                false,
                options
                    .split(',')
                    .filter(|o| matches!(*o, "memory" | "pids"))
                    .map(str::to_owned)
                    .collect(),
            ),
            _ => continue,
        };
        // Our cgroup in it: `0::/path` for v2, `N:memory:/path` for v1.
        let path = own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
            let matches = if v2 {
                list.is_empty()
            } else {
                list.split(',').any(|c| controllers.iter().any(|x| x == c))
            };
            matches.then(|| path.to_owned())
        });
        if let Some(path) = path
            && (v2 || !controllers.is_empty())
        {
            out.push(Hierarchy {
                dir: Path::new(point).join(path.trim_start_matches('/')),
                v2,
                controllers,
            });
        }
    }
    out
}
