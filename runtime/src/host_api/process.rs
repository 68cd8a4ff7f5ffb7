//! `process`: host processes for drivers, because WASI cannot spawn or wait.
//!
//! This is the guest-facing side: every call checks the component's `process` grant, and
//! `spawn` resolves the command to an absolute path and checks it against the grant's
//! patterns before anything runs. Running, signalling and waiting for processes is the
//! embedder's [`ProcessHost`] (the agent's task executor, whose processes outlive it);
//! processes are addressed by the host id it issues, and a driver reaches only those it
//! started.

use std::path::Path;
use std::time::Duration;

use futures::future::BoxFuture;
use wasmtime::component::{HasData, Linker};

use crate::bindings::v0_1_0::process::{
    self as wit, Command as WitCommand, Host, Isolation as WitIsolation, ProcessStatus as WitStatus,
};
use crate::bindings::v0_1_0::types::{HostError as WitHostError, ResourceUsage as WitUsage};
use crate::context::ComponentContext;
use crate::types::{Command, HostError, Isolation, ProcessStatus, ResourceUsage};

/// Runs processes for drivers. `owner` is the calling component: a process is reachable
/// only by the component that started it (`not-found` otherwise). Calls other than `spawn`
/// are on the guest's call path and must not block.
pub trait ProcessHost: Send + Sync {
    /// Start `cmd` (its path resolved and allowed by the grant); returns its host id.
    fn spawn<'a>(&'a self, owner: &'a str, cmd: Command) -> BoxFuture<'a, Result<u64, HostError>>;
    /// Send a signal by name.
    fn signal(&self, owner: &str, id: u64, signal: &str) -> Result<(), HostError>;
    /// Send `signal`, then SIGKILL if it still runs after `timeout`; returns at once.
    fn stop(&self, owner: &str, id: u64, signal: &str, timeout: Duration) -> Result<(), HostError>;
    /// Running, or how it exited.
    fn status(&self, owner: &str, id: u64) -> Result<ProcessStatus, HostError>;
    /// Resource usage.
    fn stats(&self, owner: &str, id: u64) -> Result<ResourceUsage, HostError>;
    /// Forget the process, killing it first if it still runs.
    fn release(&self, owner: &str, id: u64) -> Result<(), HostError>;
    /// Start `cmd` confined as `iso` asks; the grants are checked. A host that cannot
    /// isolate keeps this default, which refuses.
    fn spawn_isolated<'a>(
        &'a self,
        _owner: &'a str,
        _cmd: Command,
        _iso: Isolation,
    ) -> BoxFuture<'a, Result<u64, HostError>> {
        Box::pin(async {
            Err(HostError::Failed(
                "this host cannot isolate processes".into(),
            ))
        })
    }
    /// Whether `spawn_isolated` can work here (cheap; starts nothing).
    fn isolation_support(&self) -> Result<(), HostError> {
        Err(HostError::Failed(
            "this host cannot isolate processes".into(),
        ))
    }
}

/// The `process` view: the calling component (for its grant) and the embedder's host.
pub struct Process<'a> {
    component: &'a ComponentContext,
    host: Option<&'a dyn ProcessHost>,
}

impl<'a> Process<'a> {
    /// Processes as `component` reaches them, through `host`.
    pub fn new(component: &'a ComponentContext, host: Option<&'a dyn ProcessHost>) -> Self {
        Self { component, host }
    }

    /// The host, once the grant is checked.
    fn granted(&self, what: &str) -> Result<&'a dyn ProcessHost, HostError> {
        if self.component.grants.process.is_empty() {
            return Err(crate::types::HostError::denied(
                &self.component.name,
                "process",
                what,
            ));
        }
        self.host
            .ok_or_else(|| crate::types::HostError::unavailable(what))
    }

    /// The command with its path resolved, once the grant allows that path.
    ///
    /// The grant is matched on the absolute path with `.` and `..` folded away, and for a
    /// plain spawn on the file itself, every symlink resolved: a link inside an allowed
    /// folder to a program outside it is refused, and the resolved file is what runs (its
    /// `argv[0]` still the name asked for). An isolated command runs inside the task's chroot,
    /// where the host's links mean nothing: its path is matched as it is.
    fn allowed(&self, cmd: WitCommand, isolated: bool) -> Result<Command, HostError> {
        let mut cmd = Command::from(cmd);
        let asked = lexical(&resolve_program(&cmd.path, &cmd.env, &cmd.cwd)?);
        let grants = &self.component.grants;
        let denied = |shown: String| {
            HostError::Denied(format!(
                "component {:?} may not run {shown}: allowed commands are {:?}",
                self.component.name, grants.process
            ))
        };
        if isolated {
            if !grants.allows_command(&asked) {
                return Err(denied(format!("{asked:?}")));
            }
            cmd.path = asked;
            return Ok(cmd);
        }
        let real = match std::fs::canonicalize(&asked) {
            Ok(real) => real.display().to_string(),
            // Say nothing of a file the grant would not let it run anyway.
            Err(_) if !grants.allows_command(&asked) => return Err(denied(format!("{asked:?}"))),
            Err(e) => return Err(HostError::Failed(format!("spawning {asked}: {e}"))),
        };
        if !grants.allows_real_command(&real) {
            return Err(denied(if real == asked {
                format!("{asked:?}")
            } else {
                format!("{asked:?} (it resolves to {real:?})")
            }));
        }
        if real != asked {
            cmd.argv0 = asked;
        }
        cmd.path = real;
        Ok(cmd)
    }

    /// The host, once both the `process` and the `isolation` grants are checked.
    fn isolating(&self, what: &str) -> Result<&'a dyn ProcessHost, HostError> {
        let host = self.granted(what)?;
        if !self.component.grants.isolation {
            return Err(HostError::Denied(format!(
                "component {name:?} has no `isolation` grant ({what}): plugin {name:?} {{ grant {{ isolation = true }} }}",
                name = self.component.name
            )));
        }
        Ok(host)
    }
}

impl Host for Process<'_> {
    async fn spawn(&mut self, cmd: WitCommand) -> Result<u64, WitHostError> {
        let host = self.granted("process.spawn")?;
        let cmd = self.allowed(cmd, false)?;
        Ok(host.spawn(&self.component.name, cmd).await?)
    }

    async fn spawn_isolated(
        &mut self,
        cmd: WitCommand,
        iso: WitIsolation,
    ) -> Result<u64, WitHostError> {
        let host = self.isolating("process.spawn-isolated")?;
        let cmd = self.allowed(cmd, true)?;
        Ok(host
            .spawn_isolated(&self.component.name, cmd, iso.into())
            .await?)
    }

    async fn isolation_support(&mut self) -> Result<(), WitHostError> {
        let host = self.isolating("process.isolation-support")?;
        Ok(host.isolation_support()?)
    }

    async fn signal(&mut self, id: u64, signal: String) -> Result<(), WitHostError> {
        let host = self.granted("process.signal")?;
        Ok(host.signal(&self.component.name, id, &signal)?)
    }

    async fn stop(&mut self, id: u64, signal: String, timeout_ns: u64) -> Result<(), WitHostError> {
        let host = self.granted("process.stop")?;
        Ok(host.stop(
            &self.component.name,
            id,
            &signal,
            Duration::from_nanos(timeout_ns),
        )?)
    }

    async fn status(&mut self, id: u64) -> Result<WitStatus, WitHostError> {
        let host = self.granted("process.status")?;
        Ok(match host.status(&self.component.name, id)? {
            ProcessStatus::Running => WitStatus::Running,
            ProcessStatus::Exited(r) => WitStatus::Exited(r.into()),
        })
    }

    async fn stats(&mut self, id: u64) -> Result<WitUsage, WitHostError> {
        let host = self.granted("process.stats")?;
        Ok(host.stats(&self.component.name, id)?.into())
    }

    async fn release(&mut self, id: u64) -> Result<(), WitHostError> {
        let host = self.granted("process.release")?;
        Ok(host.release(&self.component.name, id)?)
    }
}

struct HasProcess;

impl HasData for HasProcess {
    type Data<'a> = Process<'a>;
}

/// Add `process` to `linker`; `view` projects the interface's view out of the store data.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> Process<'_>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HasProcess>(linker, view)
}

/// The absolute path a command runs: a bare name is looked up in the command's `PATH`
/// (else the agent's), a relative path is taken from the working directory. The grant is
/// checked against this path, so `sh` cannot slip past a `/usr/bin/*` allowlist.
fn resolve_program(path: &str, env: &[(String, String)], cwd: &str) -> Result<String, HostError> {
    use std::os::unix::fs::PermissionsExt;
    if path.is_empty() {
        return Err(HostError::Invalid("command: must not be empty".into()));
    }
    if path.contains('/') {
        let p = Path::new(path);
        let full = if p.is_absolute() || cwd.is_empty() {
            p.to_path_buf()
        } else {
            Path::new(cwd).join(p)
        };
        return absolute(&full);
    }
    let search = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in search.split(':').filter(|d| !d.is_empty()) {
        // A relative entry is taken from the folder the command will run in.
        let dir = match Path::new(dir) {
            d if d.is_absolute() || cwd.is_empty() => d.to_path_buf(),
            d => Path::new(cwd).join(d),
        };
        let candidate = dir.join(path);
        if let Ok(m) = std::fs::metadata(&candidate)
            && m.is_file()
            && m.permissions().mode() & 0o111 != 0
        {
            return absolute(&candidate);
        }
    }
    Err(HostError::Invalid(format!(
        "command: {path:?} not found in PATH ({search})"
    )))
}

/// `path` made absolute against the agent's folder (where a command with no working
/// directory runs).
fn absolute(path: &Path) -> Result<String, HostError> {
    std::path::absolute(path)
        .map(|p| p.display().to_string())
        .map_err(|e| HostError::Invalid(format!("command: {}: {e}", path.display())))
}

/// An absolute path with `.` and `..` folded away by its text alone (the grant is matched on
/// this, so `/usr/bin/../../tmp/x` is `/tmp/x`).
fn lexical(path: &str) -> String {
    use std::path::Component;
    let mut out = std::path::PathBuf::from("/");
    for part in Path::new(path).components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_resolve_to_absolute_paths() {
        let env = vec![("PATH".to_string(), "/nonexistent:/bin:/usr/bin".to_string())];
        let sh = resolve_program("sh", &env, "/tmp").unwrap();
        assert!(sh == "/bin/sh" || sh == "/usr/bin/sh", "{sh}");
        assert_eq!(
            resolve_program("local/run.sh", &env, "/alloc/t").unwrap(),
            "/alloc/t/local/run.sh"
        );
        assert_eq!(resolve_program("/bin/true", &env, "").unwrap(), "/bin/true");
        assert!(matches!(
            resolve_program("no-such-program-here", &env, ""),
            Err(HostError::Invalid(_))
        ));
    }

    /// Records what reaches the embedder.
    #[derive(Default)]
    struct Recorder(std::sync::Mutex<Vec<(String, String)>>);

    impl ProcessHost for Recorder {
        fn spawn<'a>(
            &'a self,
            owner: &'a str,
            cmd: Command,
        ) -> BoxFuture<'a, Result<u64, HostError>> {
            self.0.lock().unwrap().push((owner.to_string(), cmd.path));
            Box::pin(async { Ok(7) })
        }
        fn signal(&self, _: &str, _: u64, _: &str) -> Result<(), HostError> {
            Ok(())
        }
        fn stop(&self, _: &str, _: u64, _: &str, _: Duration) -> Result<(), HostError> {
            Ok(())
        }
        fn status(&self, _: &str, _: u64) -> Result<ProcessStatus, HostError> {
            Ok(ProcessStatus::Running)
        }
        fn stats(&self, _: &str, _: u64) -> Result<ResourceUsage, HostError> {
            Ok(ResourceUsage::default())
        }
        fn release(&self, _: &str, _: u64) -> Result<(), HostError> {
            Ok(())
        }
    }

    fn command(path: &str) -> WitCommand {
        WitCommand {
            path: path.into(),
            args: vec![],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: String::new(),
            stdout_path: String::new(),
            stderr_path: String::new(),
            logs: None,
            user: String::new(),
        }
    }

    #[test]
    fn only_granted_commands_reach_the_host_and_by_their_absolute_path() {
        let host = Recorder::default();
        let mut component = ComponentContext {
            name: "raw_exec".into(),
            grants: Default::default(),
            plugin_config: "{}".into(),
            limits: Default::default(),
        };
        let denied = futures::executor::block_on(
            Process::new(&component, Some(&host)).spawn(command("/bin/true")),
        );
        assert!(matches!(denied, Err(WitHostError::Denied(m)) if m.contains("`process` grant")));

        component.grants.process = vec!["/usr/bin/*".into(), "/bin/*".into()];
        let mut view = Process::new(&component, Some(&host));
        assert_eq!(
            futures::executor::block_on(view.spawn(command("true"))).unwrap(),
            7
        );
        let outside = futures::executor::block_on(view.spawn(command("/etc/passwd")));
        assert!(
            matches!(outside, Err(WitHostError::Denied(m)) if m.contains("may not run \"/etc/passwd\""))
        );
        let spawned = host.0.lock().unwrap().clone();
        assert_eq!(spawned.len(), 1, "a refused command never reaches the host");
        assert_eq!(spawned[0].0, "raw_exec");
        assert!(spawned[0].1.ends_with("/true") && spawned[0].1.starts_with('/'));

        let mut no_host = Process::new(&component, None);
        assert!(matches!(
            futures::executor::block_on(no_host.status(1)),
            Err(WitHostError::Failed(m)) if m.contains("not available")
        ));
    }

    #[test]
    fn escapes_by_dots_links_and_path_are_refused() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let dir = std::env::temp_dir().join(format!("paddock-escape-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (allowed, outside) = (dir.join("allowed"), dir.join("outside"));
        for d in [&allowed, &outside] {
            std::fs::create_dir_all(d).unwrap();
            let tool = d.join("tool");
            std::fs::write(&tool, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        symlink(outside.join("tool"), allowed.join("escape")).unwrap();
        symlink(allowed.join("tool"), allowed.join("alias")).unwrap();
        let allowed = std::fs::canonicalize(&allowed)
            .unwrap()
            .display()
            .to_string();
        let host = Recorder::default();
        let component = ComponentContext {
            name: "raw_exec".into(),
            grants: crate::Grants {
                process: vec![format!("{allowed}/*")],
                ..Default::default()
            },
            plugin_config: "{}".into(),
            limits: Default::default(),
        };
        let mut view = Process::new(&component, Some(&host));
        let mut spawn = |path: String, path_env: &str, cwd: &str| {
            let mut cmd = command(&path);
            cmd.env = vec![("PATH".into(), path_env.into())];
            cmd.cwd = cwd.into();
            futures::executor::block_on(view.spawn(cmd))
        };
        let denied = |r: Result<u64, WitHostError>, want: &str| match r {
            Err(WitHostError::Denied(m)) => assert!(m.contains(want), "{m}"),
            other => panic!("expected a denial naming {want:?}, got {other:?}"),
        };
        assert_eq!(spawn(format!("{allowed}/tool"), "", "").unwrap(), 7);
        assert_eq!(spawn(format!("{allowed}/alias"), "", "").unwrap(), 7);
        assert_eq!(spawn("tool".into(), &allowed, "").unwrap(), 7);
        let outside_tool = format!("{}/outside/tool", dir.display());
        denied(
            spawn(format!("{allowed}/../outside/tool"), "", ""),
            &outside_tool,
        );
        denied(spawn(format!("{allowed}/escape"), "", ""), "resolves to");
        denied(
            spawn("escape".into(), "allowed", &dir.display().to_string()),
            "resolves to",
        );
        denied(spawn("sh".into(), "/usr/bin:/bin", ""), "may not run");
        denied(
            spawn(format!("{allowed}/../../../../../../etc/passwd"), "", ""),
            "\"/etc/passwd\"",
        );
        // A missing file outside the grant is refused without saying whether it exists.
        denied(
            spawn("/no/such/file".into(), "", ""),
            "may not run \"/no/such/file\"",
        );
        let ran = host.0.lock().unwrap().clone();
        let tool = format!("{allowed}/tool");
        assert_eq!(
            ran.iter().map(|(_, p)| p.as_str()).collect::<Vec<_>>(),
            [&tool, &tool, &tool]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn isolation_needs_its_own_grant_besides_process() {
        let host = Recorder::default();
        let mut component = ComponentContext {
            name: "exec".into(),
            grants: crate::Grants {
                process: vec!["*".into()],
                ..Default::default()
            },
            plugin_config: "{}".into(),
            limits: Default::default(),
        };
        let iso = || WitIsolation {
            pid_namespace: true,
            ipc_namespace: true,
            uts_namespace: true,
            chroot: String::new(),
            binds: vec![],
            user: String::new(),
            no_new_privs: true,
            memory_bytes: 32 << 20,
            memory_max_bytes: 0,
            cpu_shares: 100,
            cpuset_cpus: String::new(),
        };
        let mut view = Process::new(&component, Some(&host));
        let denied = futures::executor::block_on(view.spawn_isolated(command("true"), iso()));
        assert!(
            matches!(&denied, Err(WitHostError::Denied(m)) if m.contains("`isolation` grant") && m.contains("isolation = true")),
            "{denied:?}"
        );
        assert!(matches!(
            futures::executor::block_on(view.isolation_support()),
            Err(WitHostError::Denied(_))
        ));
        component.grants.isolation = true;
        let mut view = Process::new(&component, Some(&host));
        // Granted: the host's answer (this one cannot isolate), not a denial.
        assert!(matches!(
            futures::executor::block_on(view.spawn_isolated(command("true"), iso())),
            Err(WitHostError::Failed(m)) if m.contains("cannot isolate")
        ));
        assert!(host.0.lock().unwrap().is_empty());
    }
}
