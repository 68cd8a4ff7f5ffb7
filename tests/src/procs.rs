//! Processes an agent leaves behind by design: its task executor outlives it (and its tasks
//! with it), which a finished test or soak must not leave running.

use std::path::Path;
use std::process::{Command, Stdio};

/// Kill the task executor of the agent whose data dir is `data`, and every process in its
/// session (its tasks: the executor leads a session of its own).
pub fn reap_executor(data: &Path) {
    let needle = format!("{}/executor", data.display());
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    let pids: Vec<i32> = procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    for exec in pids.iter().copied().filter(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            c.contains(" executor ") && c.contains(&needle)
        })
    }) {
        let doomed: Vec<String> = pids
            .iter()
            .copied()
            .filter(|p| *p == exec || session_of(*p) == Some(exec))
            .map(|p| p.to_string())
            .collect();
        let _ = Command::new("kill")
            .arg("-KILL")
            .args(&doomed)
            .stderr(Stdio::null())
            .status();
    }
}

/// The session `pid` belongs to (after the `(comm)` of its stat: state, ppid, pgrp,
/// session).
pub fn session_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}
