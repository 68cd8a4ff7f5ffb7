//! Per-component capability grants, deny by default, from the agent config
//! (`plugin "<name>" { grant { ... } }`). `log`, `config` and `timer` are always available;
//! every other host interface checks its grant and answers `denied` when it is missing.

use std::path::{Component, Path, PathBuf};

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
    /// Read the Nomad-native services registered in the current task's namespace, through
    /// `services` (what the `template` hook's `nomadService` and `nomadServices` need).
    pub services: bool,
    /// Confine the processes it starts with `process.spawn-isolated` (namespaces, chroot,
    /// another user, cgroup limits): what the `exec` driver needs. Only with `process`,
    /// which still decides which commands may run.
    pub isolation: bool,
    /// Host folders the component may read but not change, each preopened read-only at its
    /// own path (absolute): what the `host-devices` device plugin needs of `/sys` and
    /// `/dev`. Reading a folder lets the component read every file in it that the agent's
    /// user can read. Empty: no host files at all.
    pub read_paths: Vec<String>,
    /// Loader and interpreter variables ([`LOADER_VARIABLES`]: `LD_PRELOAD`, `PYTHONPATH`,
    /// …) the component may pass to the processes it starts, or return in a hook's env:
    /// names or glob patterns (`"LD_LIBRARY_PATH"`, `"PYTHON*"`). Empty: none, whoever set
    /// them (the guest, the job or a hook): a process asked for with one is refused, naming
    /// it.
    pub loader_env: Vec<String>,
    /// With `isolation`: the host paths an isolated task's chroot holds (Nomad's
    /// `chroot_env`), a list of paths kept at the same place or a map of host path to path
    /// inside. Absent: Nomad's default list ([`DEFAULT_CHROOT_ENV`]). The task's alloc dir
    /// is always bound at `/alloc`; nothing else of the host is.
    pub chroot_env: Option<ChrootEnv>,
    /// With `isolation`: uids an isolated process may not run as, Nomad's syntax
    /// (`"0,1000-1999"`). Absent: `"0"` (root is refused, whatever name the task gives it);
    /// `""` allows any.
    pub denied_host_uids: Option<String>,
    /// With `isolation`: gids an isolated process may not run as (the user's primary
    /// group), the same syntax. Absent: none.
    pub denied_host_gids: Option<String>,
    /// Outbound TCP connections through WASI sockets, to the `hosts` it lists
    /// ([`crate::network`]). Absent: no network at all.
    pub network: Option<crate::network::NetworkGrant>,
    /// With `isolation`: the most processes and threads an isolated task may have at once
    /// (its cgroup's `pids.max`). Absent: [`DEFAULT_PIDS_MAX`]; 0: no limit.
    pub pids_max: Option<u64>,
}

/// An isolated task's chroot: host paths kept at the same place, or host path → path inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ChrootEnv {
    /// Each host path at the same place inside.
    List(Vec<String>),
    /// Host path → path inside the chroot.
    Map(std::collections::BTreeMap<String, String>),
}

/// Nomad's default `chroot_env`: these host paths, where they exist, at the same place.
pub const DEFAULT_CHROOT_ENV: &[&str] = &[
    "/bin",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/run/resolvconf",
    "/sbin",
    "/usr",
    "/run/systemd/resolve",
];

/// An isolated task's `pids.max` when the grant sets none.
pub const DEFAULT_PIDS_MAX: u64 = 4096;

/// Environment variables that make a program load or run code other than itself: the
/// dynamic loader's, glibc's and the common interpreters' (each entry a name, or a prefix
/// ending in `*`), and Python's `PYTHON<LETTER>…` ones (`PYTHONPATH`, `PYTHONSTARTUP`,
/// `PYTHONBREAKPOINT`; `PYTHON_…` names are not Python's). A process started with one runs
/// what the variable names, so a component may pass one only with the `loader_env` grant.
/// Names jobs use for their own values (`ENV`, `CLASSPATH`, `MALLOC_ARENA_MAX`,
/// `GIT_COMMIT`) are not on it.
pub const LOADER_VARIABLES: &[&str] = &[
    "LD_*",
    "DYLD_*",
    "GCONV_PATH",
    "GETCONF_DIR",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "LOCPATH",
    "MALLOC_TRACE",
    "NIS_PATH",
    "NLSPATH",
    "RESOLV_HOST_CONF",
    "RES_OPTIONS",
    "BASH_ENV",
    "BASH_FUNC_*",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PERL5LIB",
    "PERL5OPT",
    "PERL5DB",
    "PERLLIB",
    "RUBYLIB",
    "RUBYOPT",
    "NODE_OPTIONS",
    "NODE_PATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "LUA_INIT*",
    "LUA_PATH*",
    "LUA_CPATH*",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_ASKPASS",
    "GIT_EDITOR",
    "GIT_PAGER",
    "GIT_EXTERNAL_DIFF",
    "GIT_PROXY_COMMAND",
    "GIT_TEMPLATE_DIR",
    "GIT_CONFIG*",
];

/// Whether `key` is one of the [`LOADER_VARIABLES`] (or a `PYTHON<LETTER>…` one).
pub fn is_loader_variable(key: &str) -> bool {
    let python = key
        .strip_prefix("PYTHON")
        .and_then(|rest| rest.chars().next())
        .is_some_and(|c| c.is_ascii_uppercase());
    python
        || LOADER_VARIABLES.iter().any(|v| match v.strip_suffix('*') {
            Some(prefix) => key.starts_with(prefix),
            None => key == *v,
        })
}

impl Grants {
    /// Whether the host may act for this component on the host path `path` (a device
    /// node or mount a device plugin reserved): it lies in one of the `read_paths` folders,
    /// by its text, absolute and without `..`.
    pub fn reads(&self, path: &str) -> bool {
        self.read_paths.iter().any(|dir| within(path, dir))
    }

    /// Everything: what `--dev` gives the built-in components.
    pub fn all() -> Self {
        Self {
            env: true,
            devices: true,
            events: true,
            process: vec!["*".into()],
            task_dir: true,
            variables: true,
            services: true,
            isolation: true,
            read_paths: vec!["/sys".into(), "/dev".into()],
            // Loopback, where a dev agent's services listen: what the built-in checks need.
            network: Some(crate::network::NetworkGrant {
                hosts: vec!["127.0.0.1:*".into(), "[::1]:*".into()],
                max_response_bytes: None,
            }),
            ..Self::default()
        }
    }

    /// Whether the process environment variable `key` may be passed on: any that is not a
    /// loader or interpreter variable, and those the `loader_env` grant names.
    pub fn allows_env(&self, key: &str) -> bool {
        !is_loader_variable(key)
            || self
                .loader_env
                .iter()
                .any(|p| p == key || (p.contains(['*', '?', '[']) && pattern_matches(p, key)))
    }

    /// The chroot an isolated task gets: (host path, path inside) pairs.
    pub fn chroot_binds(&self) -> Vec<(String, String)> {
        match &self.chroot_env {
            None => DEFAULT_CHROOT_ENV
                .iter()
                .map(|p| (p.to_string(), p.to_string()))
                .collect(),
            Some(ChrootEnv::List(l)) => l.iter().map(|p| (p.clone(), p.clone())).collect(),
            Some(ChrootEnv::Map(m)) => m.iter().map(|(h, i)| (h.clone(), i.clone())).collect(),
        }
    }

    /// Check the isolation and network keys, naming the bad one (`grant.denied_host_uids:
    /// …`, `grant.network.hosts[2]: …`).
    pub fn validate(&self) -> Result<(), String> {
        if let Some(n) = &self.network {
            n.validate()?;
        }
        for (host, inside) in self.chroot_binds() {
            if !host.starts_with('/')
                || !inside.starts_with('/')
                || [&host, &inside]
                    .iter()
                    .any(|p| p.split('/').any(|s| s == ".." || s == "."))
            {
                return Err(format!(
                    "grant.chroot_env: {host:?} -> {inside:?}: both must be absolute paths without . or .."
                ));
            }
        }
        for (key, v) in [
            ("denied_host_uids", &self.denied_host_uids),
            ("denied_host_gids", &self.denied_host_gids),
        ] {
            if let Some(v) = v {
                IdRanges::parse(v).map_err(|e| format!("grant.{key}: {e}"))?;
            }
        }
        Ok(())
    }

    /// The uids an isolated process may not run as.
    pub fn denied_uids(&self) -> IdRanges {
        IdRanges::parse(self.denied_host_uids.as_deref().unwrap_or("0")).unwrap_or_default()
    }

    /// The gids an isolated process may not run as.
    pub fn denied_gids(&self) -> IdRanges {
        IdRanges::parse(self.denied_host_gids.as_deref().unwrap_or("")).unwrap_or_default()
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

    /// What `self` asks for that `other` does not give, one line each (`+ network
    /// api.example.com:443`, `+ task_dir`): how a new version's declared grants are
    /// compared with the running version's. A path is within `other` when it is one of its
    /// paths or under one; any other entry counts when it is not literally in `other`
    /// (a glob is not reasoned about); a changed isolation setting counts as `~ field`.
    pub fn beyond(&self, other: &Grants) -> Vec<String> {
        let mut out = Vec::new();
        for (mine, theirs, name) in [
            (self.env, other.env, "env"),
            (self.devices, other.devices, "devices"),
            (self.events, other.events, "events"),
            (self.task_dir, other.task_dir, "task_dir"),
            (self.variables, other.variables, "variables"),
            (self.services, other.services, "services"),
            (self.isolation, other.isolation, "isolation"),
        ] {
            if mine && !theirs {
                out.push(format!("+ {name}"));
            }
        }
        let list = |out: &mut Vec<String>, mine: &[String], theirs: &[String], name: &str| {
            for m in mine {
                if !theirs.contains(m) {
                    out.push(format!("+ {name} {m}"));
                }
            }
        };
        list(&mut out, &self.process, &other.process, "process");
        list(&mut out, &self.loader_env, &other.loader_env, "loader_env");
        for p in &self.read_paths {
            let within = other.read_paths.iter().any(|o| {
                let o = o.trim_end_matches('/');
                p == o || p.starts_with(&format!("{o}/")) || o.is_empty()
            });
            if !within {
                out.push(format!("+ read_paths {p}"));
            }
        }
        match (&self.network, &other.network) {
            (Some(n), None) => {
                out.push(format!("+ network {}", n.hosts.join(",")));
            }
            (Some(n), Some(o)) => {
                for h in &n.hosts {
                    if !o.hosts.contains(h) {
                        out.push(format!("+ network {h}"));
                    }
                }
                if n.max_response_bytes.is_none() && o.max_response_bytes.is_some()
                    || n.max_response_bytes > o.max_response_bytes && o.max_response_bytes.is_some()
                {
                    out.push("~ network.max_response_bytes".into());
                }
            }
            _ => {}
        }
        if self.chroot_env != other.chroot_env {
            out.push("~ chroot_env".into());
        }
        if self.denied_host_uids != other.denied_host_uids {
            out.push("~ denied_host_uids".into());
        }
        if self.denied_host_gids != other.denied_host_gids {
            out.push("~ denied_host_gids".into());
        }
        if self.pids_max != other.pids_max {
            out.push("~ pids_max".into());
        }
        out
    }

    /// [`Self::summary`] without what every component has (`log`, `config`, `timer`), as
    /// one line: `"no grants"` when that is all.
    pub fn extra(&self) -> String {
        let v = self.summary();
        if v.len() <= 3 {
            "no grants".into()
        } else {
            v[3..].join(", ")
        }
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
        if self.services {
            v.push("services".into());
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
        if !self.loader_env.is_empty() {
            v.push(format!("loader_env({})", self.loader_env.join(",")));
        }
        if let Some(n) = &self.network {
            v.push(format!("network({})", n.hosts.join(",")));
        }
        v
    }
}

/// Sets of user or group ids in Nomad's syntax: comma-separated ids and `lo-hi` ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdRanges(pub Vec<(u32, u32)>);

impl IdRanges {
    /// Parse `"0,1000-1999"`; empty is no ids.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let bound = |s: &str| {
                s.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("invalid range {part:?}: range bound not valid"))
            };
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (bound(lo)?, bound(hi)?),
                None => (bound(part)?, bound(part)?),
            };
            if lo > hi {
                return Err(format!(
                    "invalid range {part:?}: lower bound cannot be greater than upper bound"
                ));
            }
            out.push((lo, hi));
        }
        Ok(Self(out))
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: u32) -> bool {
        self.0.iter().any(|(lo, hi)| (*lo..=*hi).contains(&id))
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

// The path rules by text, below the grants and the process checks that use them.

/// `path` with `.` parts dropped, if it is absolute and has no `..` part.
pub(crate) fn plain_absolute(path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Whether `path` is `dir` or below it, by their text (both absolute, without `..`).
pub(crate) fn within(path: &str, dir: &str) -> bool {
    match (plain_absolute(path), plain_absolute(dir)) {
        (Some(p), Some(d)) => p.starts_with(d),
        _ => false,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_declaration_beyond_another_names_each_new_need() {
        let old: Grants = serde_json::from_str(
            r#"{"task_dir": true, "read_paths": ["/sys"], "network": {"hosts": ["a.example.com:443"]}}"#,
        )
        .unwrap();
        let same: Grants =
            serde_json::from_str(r#"{"read_paths": ["/sys/class"], "task_dir": true}"#).unwrap();
        assert!(same.beyond(&old).is_empty(), "{:?}", same.beyond(&old));
        let wider: Grants = serde_json::from_str(
            r#"{"task_dir": true, "env": true, "read_paths": ["/dev"], "network": {"hosts": ["a.example.com:443", "b.example.com:443"]}}"#,
        )
        .unwrap();
        assert_eq!(
            wider.beyond(&old),
            vec!["+ env", "+ read_paths /dev", "+ network b.example.com:443"]
        );
        assert_eq!(
            Grants::default().beyond(&old),
            Vec::<String>::new(),
            "asking less is never more"
        );
    }

    #[test]
    fn a_reserved_host_path_must_lie_in_the_read_paths_grant() {
        let g = Grants {
            read_paths: vec!["/dev".into(), "/sys/class/drm/".into()],
            ..Default::default()
        };
        for ok in [
            "/dev/null",
            "/dev/dri/renderD128",
            "/sys/class/drm/card0",
            "/dev",
        ] {
            assert!(g.reads(ok), "{ok}");
        }
        for bad in [
            "/devil",
            "/dev/../etc/shadow",
            "/etc/shadow",
            "dev/null",
            "/sys/class/drmx",
        ] {
            assert!(!g.reads(bad), "{bad}");
        }
        assert!(!Grants::default().reads("/dev/null"), "no grant, nothing");
    }
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
    fn loader_variables_need_the_loader_env_grant() {
        let g = Grants::default();
        for key in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "PYTHONPATH",
            "GCONV_PATH",
            "BASH_ENV",
            "NODE_OPTIONS",
        ] {
            assert!(!g.allows_env(key), "{key}");
        }
        for key in [
            "PATH",
            "HOME",
            "NOMAD_TASK_DIR",
            "LANG",
            "OLD_PRELOAD",
            "ENV",
            "CLASSPATH",
            "MALLOC_ARENA_MAX",
            "GIT_COMMIT",
            "PYTHON_HOOK_TASK",
            "PYTHON",
        ] {
            assert!(g.allows_env(key), "{key}");
        }
        let g = Grants {
            loader_env: vec!["LD_LIBRARY_PATH".into(), "PYTHON*".into()],
            ..Default::default()
        };
        assert!(g.allows_env("LD_LIBRARY_PATH") && g.allows_env("PYTHONPATH"));
        assert!(!g.allows_env("LD_PRELOAD"));
    }

    #[test]
    fn id_ranges_read_nomads_syntax() {
        let r = IdRanges::parse("0, 1000-1999").unwrap();
        assert!(r.contains(0) && r.contains(1500) && !r.contains(2000) && !r.contains(1));
        assert!(IdRanges::parse("").unwrap().0.is_empty());
        assert!(IdRanges::parse("5-1").unwrap_err().contains("lower bound"));
        assert!(IdRanges::parse("x").unwrap_err().contains("not valid"));
        assert!(
            Grants::default().denied_uids().contains(0),
            "root is refused by default"
        );
        let open = Grants {
            denied_host_uids: Some(String::new()),
            ..Default::default()
        };
        assert!(!open.denied_uids().contains(0));
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
