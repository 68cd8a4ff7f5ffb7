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

    /// Whether `path` (absolute, with no `.` or `..` parts) may be spawned under the
    /// `process` grant. A `*` matches within one folder (`/usr/bin/*` is not
    /// `/usr/bin/x/y`); `**` spans folders; `"*"` alone allows any command.
    pub fn allows_command(&self, path: &str) -> bool {
        self.process
            .iter()
            .any(|p| p == "*" || pattern_matches(p, path))
    }

    /// Whether the file `real` (a path with every symlink resolved) may be spawned: it must
    /// match a pattern as written or with the pattern's own literal folders resolved (so
    /// `/bin/*` still allows `/usr/bin/dash` where `/bin` links to `/usr/bin` and `/bin/sh`
    /// to `dash`). A link inside an allowed folder to a file outside it does not match.
    pub fn allows_real_command(&self, real: &str) -> bool {
        self.process.iter().any(|p| {
            p == "*" || pattern_matches(p, real) || pattern_matches(&resolve_pattern(p), real)
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

/// Glob match where `*`, `?` and `[..]` never match a `/`.
fn pattern_matches(pattern: &str, path: &str) -> bool {
    const OPTIONS: glob::MatchOptions = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: false,
    };
    glob::Pattern::new(pattern)
        .map(|pat| pat.matches_with(path, OPTIONS))
        .unwrap_or(false)
}

/// `pattern` with the symlinks of its literal part resolved: the whole path when it has no
/// wildcard, else the folders before the first part with one. Unresolvable: as written.
fn resolve_pattern(pattern: &str) -> String {
    let is_glob = |part: &str| part.contains(['*', '?', '[']);
    let parts: Vec<&str> = pattern.split('/').collect();
    let literal = parts.iter().take_while(|p| !is_glob(p)).count();
    let head = parts[..literal].join("/");
    let Ok(real) = std::fs::canonicalize(if head.is_empty() { "/" } else { &head }) else {
        return pattern.to_string();
    };
    let mut out = real.display().to_string();
    for part in &parts[literal..] {
        if !out.ends_with('/') {
            out.push('/');
        }
        out.push_str(part);
    }
    out
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
        // `*` stays in its folder; `**` spans folders.
        assert!(!g.allows_command("/usr/bin/x/y"));
        let deep = Grants {
            process: vec!["/opt/tools/**/run".into()],
            ..Default::default()
        };
        assert!(deep.allows_command("/opt/tools/a/b/run"));
        assert!(!deep.allows_command("/opt/other/run"));
    }

    #[test]
    fn a_real_path_matches_the_pattern_with_its_folders_resolved() {
        let dir = std::env::temp_dir().join(format!("paddock-grants-{}", std::process::id()));
        let allowed = dir.join("allowed");
        let elsewhere = dir.join("elsewhere");
        std::fs::create_dir_all(&allowed).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        let link = dir.join("link-to-allowed");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&allowed, &link).unwrap();
        let g = Grants {
            process: vec![format!("{}/*", link.display())],
            ..Default::default()
        };
        let real = std::fs::canonicalize(&allowed).unwrap();
        assert!(g.allows_real_command(&format!("{}/tool", real.display())));
        let outside = std::fs::canonicalize(&elsewhere).unwrap();
        assert!(!g.allows_real_command(&format!("{}/tool", outside.display())));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
