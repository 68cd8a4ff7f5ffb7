//! A cgroup per isolated process: its memory limit (whose OOM killer kills the task alone),
//! CPU weight, cpuset, its `pids.max` (a fork bomb stops at the grant's `pids_max`), and
//! where its stats come from.
//!
//! cgroup v2 when `/sys/fs/cgroup/cgroup.controllers` exists, under `/sys/fs/cgroup/paddock`
//! (v2 forbids processes in a cgroup whose controllers are delegated, so it cannot nest
//! under the executor's own). With v1 each controller gets `<own cgroup>/paddock/<id>`,
//! under the executor's own cgroup in that hierarchy, so a delegated slice (systemd's
//! `Delegate=yes`, a session's cgroup) still holds and accounts for its tasks.
//!
//! The executor creates the cgroup and writes its dirs to `<dir>/<id>.cgroups`; the agent
//! reads that file for stats and removes the cgroup when the process is released, also
//! after either of them restarted.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::runtime::types::{Isolation, ResourceUsage};

const ROOT: &str = "/sys/fs/cgroup";

/// Why a cgroup could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No usable cgroup hierarchy (or its memory controller) on this host.
    #[error("no cgroup memory controller: {0}")]
    Unavailable(String),
    /// The kernel refused a step.
    #[error("cgroup {path}: {source}")]
    Io {
        /// The file or dir.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// One process's cgroup: a dir per v1 hierarchy, or the one v2 dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    /// The dirs, each `<hierarchy>/.../paddock/<id>`.
    pub dirs: Vec<PathBuf>,
    v2: bool,
}

/// Whether the host has the unified hierarchy (read once: it does not change under a
/// running executor).
fn is_v2() -> bool {
    static V2: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *V2.get_or_init(|| Path::new(ROOT).join("cgroup.controllers").exists())
}

/// The v1 hierarchy dir holding `controller`, with this process's place in it. Looked up
/// once per controller: a task start would otherwise read `/proc/self/cgroup` and resolve
/// the mount for each one.
fn v1_own(controller: &str) -> Option<PathBuf> {
    type Seen = std::sync::Mutex<std::collections::HashMap<String, Option<PathBuf>>>;
    static SEEN: std::sync::OnceLock<Seen> = std::sync::OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if let Some(found) = seen.lock().unwrap().get(controller) {
        return found.clone();
    }
    let found = v1_lookup(controller);
    seen.lock()
        .unwrap()
        .insert(controller.to_string(), found.clone());
    found
}

fn v1_lookup(controller: &str) -> Option<PathBuf> {
    let mount = std::fs::canonicalize(Path::new(ROOT).join(controller)).ok()?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        ctrls
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_string())
    })?;
    Some(mount.join(path.trim_start_matches('/')))
}

/// Whether this host can give a process a cgroup with a memory limit (cheap).
pub fn support() -> Result<(), CgroupError> {
    if is_v2() {
        let ctrls = std::fs::read_to_string(Path::new(ROOT).join("cgroup.controllers"))
            .map_err(io(Path::new(ROOT)))?;
        if !ctrls.split_whitespace().any(|c| c == "memory") {
            return Err(CgroupError::Unavailable(format!(
                "{ROOT} (v2) has no memory controller"
            )));
        }
        return Ok(());
    }
    match v1_own("memory") {
        Some(d) if d.join("memory.limit_in_bytes").exists() => Ok(()),
        _ => Err(CgroupError::Unavailable(format!(
            "no v1 memory hierarchy under {ROOT}"
        ))),
    }
}

fn write(dir: &Path, file: &str, value: &str) -> Result<(), CgroupError> {
    let path = dir.join(file);
    std::fs::write(&path, value).map_err(io(&path))
}

fn read(dir: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(file)).ok()
}

/// `key value` lines (memory.stat, cpu.stat, memory.events, memory.oom_control).
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// An empty v1 cpuset cgroup admits no process: copy its parent's CPUs and memory nodes.
fn cpuset_inherit(dir: &Path) -> Result<(), CgroupError> {
    for f in ["cpuset.cpus", "cpuset.mems"] {
        if read(dir, f).is_some_and(|v| v.trim().is_empty())
            && let Some(parent) = dir.parent().and_then(|p| read(p, f))
        {
            write(dir, f, parent.trim())?;
        }
    }
    Ok(())
}

impl Cgroup {
    /// Make process `id`'s cgroup with `iso`'s limits.
    pub fn create(id: u64, iso: &Isolation) -> Result<Self, CgroupError> {
        let (hard, soft) = limits(iso);
        if is_v2() {
            let base = Path::new(ROOT).join("paddock");
            std::fs::create_dir_all(&base).map_err(io(&base))?;
            let want = ["+memory", "+cpu", "+pids", "+cpuset"];
            for parent in [Path::new(ROOT), base.as_path()] {
                for c in want {
                    // A controller the kernel lacks is left out; the memory limit is
                    // checked below.
                    let _ = write(parent, "cgroup.subtree_control", c);
                }
            }
            let dir = base.join(id.to_string());
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
            let cg = Self {
                dirs: vec![dir.clone()],
                v2: true,
            };
            if hard > 0 {
                write(&dir, "memory.max", &hard.to_string())?;
                let _ = write(&dir, "memory.swap.max", "0");
            }
            if soft > 0 {
                write(&dir, "memory.low", &soft.to_string())?;
            }
            if iso.cpu_shares > 0 {
                // Shares (2..262144) onto weight (1..10000), as runc converts them.
                let s = iso.cpu_shares.clamp(2, 262_144);
                write(
                    &dir,
                    "cpu.weight",
                    &(1 + ((s - 2) * 9999) / 262_142).to_string(),
                )?;
            }
            if !iso.cpuset_cpus.is_empty() {
                write(&dir, "cpuset.cpus", &iso.cpuset_cpus)?;
            }
            if iso.pids_max > 0 {
                write(&dir, "pids.max", &iso.pids_max.to_string())?;
            }
            return Ok(cg);
        }
        let mut controllers = vec!["memory", "cpu", "cpuacct", "pids"];
        if !iso.cpuset_cpus.is_empty() {
            controllers.push("cpuset");
        }
        let mut cg = Self {
            dirs: Vec::new(),
            v2: false,
        };
        for c in controllers {
            let Some(own) = v1_own(c) else {
                if c == "memory" {
                    return Err(CgroupError::Unavailable(format!("no v1 {c} hierarchy")));
                }
                continue;
            };
            let base = own.join("paddock");
            let dir = base.join(id.to_string());
            if cg.dirs.contains(&dir) {
                continue; // co-mounted with a controller already done (cpu,cpuacct)
            }
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
            cg.dirs.push(dir.clone());
            match c {
                "memory" => {
                    if hard > 0 {
                        write(&dir, "memory.limit_in_bytes", &hard.to_string())?;
                        // No escape into swap: memory+swap gets the same limit.
                        let _ = write(&dir, "memory.memsw.limit_in_bytes", &hard.to_string());
                    }
                    if soft > 0 {
                        write(&dir, "memory.soft_limit_in_bytes", &soft.to_string())?;
                    }
                }
                "cpu" if iso.cpu_shares > 0 => {
                    write(&dir, "cpu.shares", &iso.cpu_shares.max(2).to_string())?;
                }
                "pids" if iso.pids_max > 0 => {
                    write(&dir, "pids.max", &iso.pids_max.to_string())?;
                }
                "cpuset" => {
                    cpuset_inherit(&base)?;
                    cpuset_inherit(&dir)?;
                    write(&dir, "cpuset.cpus", &iso.cpuset_cpus)?;
                }
                _ => {}
            }
        }
        Ok(cg)
    }

    /// The file of each dir that the child writes "0" (itself) into before it execs, so
    /// that not one allocation of the task happens outside its limit.
    ///
    /// On v1 that is `tasks`, which moves one thread: the forked child has only the one,
    /// so it is the whole process, and the kernel moves the current thread without the
    /// global threadgroup lock that `cgroup.procs` takes (a write lock that waits for an
    /// RCU grace period: about a millisecond per task start on this machine's kernel). On
    /// v2, whose `cgroup.threads` works only in threaded cgroups, `cgroup.procs`.
    pub fn procs_files(&self) -> Result<Vec<std::fs::File>, CgroupError> {
        let file = if self.v2 { "cgroup.procs" } else { "tasks" };
        self.dirs
            .iter()
            .map(|d| {
                let p = d.join(file);
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .map_err(io(&p))
            })
            .collect()
    }

    fn dir_with(&self, file: &str) -> Option<&Path> {
        self.dirs
            .iter()
            .map(PathBuf::as_path)
            .find(|d| d.join(file).exists())
    }

    /// Whether the cgroup's OOM killer killed anything in it.
    pub fn oom_killed(&self) -> bool {
        let (file, key) = if self.v2 {
            ("memory.events", "oom_kill")
        } else {
            ("memory.oom_control", "oom_kill")
        };
        self.dir_with(file)
            .and_then(|d| read(d, file))
            .and_then(|t| keyed(&t, key))
            .is_some_and(|n| n > 0)
    }

    /// Memory and CPU of everything in the cgroup.
    pub fn usage(&self) -> Option<ResourceUsage> {
        let mut u = ResourceUsage {
            timestamp: crate::util::now_nanos(),
            ..Default::default()
        };
        if self.v2 {
            let d = &self.dirs[0];
            let stat = read(d, "memory.stat").unwrap_or_default();
            u.rss_bytes = keyed(&stat, "anon")
                .or_else(|| read(d, "memory.current").and_then(|v| v.trim().parse().ok()))?;
            let cpu = read(d, "cpu.stat").unwrap_or_default();
            u.cpu_user_ns = keyed(&cpu, "user_usec").unwrap_or(0) * 1000;
            u.cpu_system_ns = keyed(&cpu, "system_usec").unwrap_or(0) * 1000;
            return Some(u);
        }
        let mem = self.dir_with("memory.stat")?;
        let stat = read(mem, "memory.stat").unwrap_or_default();
        u.rss_bytes = keyed(&stat, "total_rss")
            .or_else(|| keyed(&stat, "rss"))
            .unwrap_or(0);
        if let Some(d) = self.dir_with("cpuacct.stat") {
            // USER_HZ ticks, 100 a second.
            let stat = read(d, "cpuacct.stat").unwrap_or_default();
            u.cpu_user_ns = keyed(&stat, "user").unwrap_or(0) * 10_000_000;
            u.cpu_system_ns = keyed(&stat, "system").unwrap_or(0) * 10_000_000;
        }
        Some(u)
    }

    /// Kill what is left in it and remove it, trying for a while: a cgroup is busy until
    /// its last process has been reaped.
    pub fn remove(&self) {
        for _ in 0..100 {
            for d in &self.dirs {
                for pid in read(d, "cgroup.procs").unwrap_or_default().lines() {
                    if let Some(p) = pid
                        .trim()
                        .parse()
                        .ok()
                        .and_then(rustix::process::Pid::from_raw)
                    {
                        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                    }
                }
            }
            let left: Vec<&PathBuf> = self
                .dirs
                .iter()
                .filter(|d| d.exists() && std::fs::remove_dir(d).is_err())
                .collect();
            if left.is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        tracing::warn!(dirs = ?self.dirs, "a task cgroup could not be removed");
    }

    /// Where the executor keeps process `id`'s cgroup dirs.
    pub fn record_path(dir: &Path, id: u64) -> PathBuf {
        dir.join(format!("{id}.cgroups"))
    }

    /// Write the dirs where the agent finds them.
    pub fn save(&self, dir: &Path, id: u64) -> std::io::Result<()> {
        let mut f = std::fs::File::create(Self::record_path(dir, id))?;
        writeln!(f, "{}", if self.v2 { "v2" } else { "v1" })?;
        for d in &self.dirs {
            writeln!(f, "{}", d.display())?;
        }
        Ok(())
    }

    /// Process `id`'s cgroup, if it has one.
    pub fn load(dir: &Path, id: u64) -> Option<Self> {
        let text = std::fs::read_to_string(Self::record_path(dir, id)).ok()?;
        let mut lines = text.lines();
        let v2 = lines.next()? == "v2";
        Some(Self {
            dirs: lines.map(PathBuf::from).collect(),
            v2,
        })
    }
}

/// (hard, soft) memory limits in bytes: with a `memory_max` above `memory`, `memory_max`
/// is the hard limit and `memory` the soft one (Nomad's oversubscription); else `memory`
/// is the hard limit.
pub fn limits(iso: &Isolation) -> (u64, u64) {
    if iso.memory_max_bytes > iso.memory_bytes && iso.memory_bytes > 0 {
        (iso.memory_max_bytes, iso.memory_bytes)
    } else {
        (iso.memory_bytes.max(iso.memory_max_bytes), 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_max_above_memory_is_the_hard_limit() {
        let iso = |m, x| Isolation {
            memory_bytes: m,
            memory_max_bytes: x,
            ..Default::default()
        };
        assert_eq!(limits(&iso(32, 0)), (32, 0));
        assert_eq!(limits(&iso(32, 64)), (64, 32));
        assert_eq!(limits(&iso(64, 32)), (64, 0));
        assert_eq!(
            keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", "oom_kill"),
            Some(2)
        );
    }
}
