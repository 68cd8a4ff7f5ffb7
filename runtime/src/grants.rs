//! Per-component capability grants, deny by default, from the agent config
//! (`plugin "<name>" { grant { ... } }`). `log`, `config` and `timer` are always available;
//! every other host interface checks its grant and answers `denied` when it is missing.

use serde::{Deserialize, Serialize};

/// What the operator allows one component to do.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Grants {
    /// Read the current task's environment and interpolate `${...}` through `env`.
    pub env: bool,
    /// Read the current task's device reservations through `devices`.
    pub devices: bool,
    /// Emit task events through `events`.
    pub events: bool,
    /// Start host processes whose executable path matches one of these glob patterns
    /// (`"*"` allows any command). Empty: `process` is denied.
    pub process: Vec<String>,
    /// In calls about a task, see the task's dir as `/task` and the allocation's shared dir
    /// as `/alloc` (WASI preopens, read-write). Nothing else of the host's files.
    pub task_dir: bool,
    /// Read the Nomad Variables the current task's workload identity may read, through
    /// `variables` (what the `template` hook's `nomadVar` needs).
    pub variables: bool,
    /// Confine the processes it starts with `process.spawn-isolated` (namespaces, chroot,
    /// another user, cgroup limits): what the `exec` driver needs. Only with `process`,
    /// which still decides which commands may run.
    pub isolation: bool,
    /// Host folders the component may read but not change, each preopened read-only at its
    /// own path (absolute): what the `host-devices` device plugin needs of `/sys` and
    /// `/dev`. Reading a folder lets the component read every file in it that the agent's
    /// user can read. Empty: no host files at all.
    pub read_paths: Vec<String>,
}

impl Grants {
    /// Everything: what `--dev` gives the built-in components.
    pub fn all() -> Self {
        Self {
            env: true,
            devices: true,
            events: true,
            process: vec!["*".into()],
            task_dir: true,
            variables: true,
            isolation: true,
            read_paths: vec!["/sys".into(), "/dev".into()],
        }
    }

    /// Whether `path` may be spawned under the `process` grant.
    pub fn allows_command(&self, path: &str) -> bool {
        self.process.iter().any(|p| {
            p == "*"
                || glob::Pattern::new(p)
                    .map(|pat| pat.matches(path))
                    .unwrap_or(false)
        })
    }

    /// Names of granted capabilities, for display.
    pub fn summary(&self) -> Vec<String> {
        let mut v = vec!["log".to_string(), "config".into(), "timer".into()];
        if self.env {
            v.push("env".into());
        }
        if self.devices {
            v.push("devices".into());
        }
        if self.events {
            v.push("events".into());
        }
        if self.task_dir {
            v.push("task_dir".into());
        }
        if self.variables {
            v.push("variables".into());
        }
        if self.isolation {
            v.push("isolation".into());
        }
        if !self.process.is_empty() {
            v.push(format!("process({})", self.process.join(",")));
        }
        if !self.read_paths.is_empty() {
            v.push(format!("read_paths({})", self.read_paths.join(",")));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_by_default_and_globs() {
        let g = Grants::default();
        assert!(!g.allows_command("/bin/true"));
        let g = Grants {
            process: vec!["/usr/bin/*".into()],
            ..Default::default()
        };
        assert!(g.allows_command("/usr/bin/env"));
        assert!(!g.allows_command("/bin/sh"));
        assert!(Grants::all().allows_command("/anything"));
    }
}
