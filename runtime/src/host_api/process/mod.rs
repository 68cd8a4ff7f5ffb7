//! `process`: host processes for drivers, because WASI cannot spawn or wait.
//!
//! This is the guest-facing side: every call checks the component's `process` grant, and
//! `spawn` resolves the command to an absolute path and checks it against the grant's
//! patterns before anything runs; [`checks`] decides the rest of what a guest hands over
//! (environment, working dir, output files, isolation). Running, signalling and waiting
//! for processes is the embedder's [`ProcessHost`] (the agent's task executor, whose
//! processes outlive it); processes are addressed by the host id it issues, and a driver
//! reaches only those it started.

pub mod checks;

use std::path::Path;
use std::time::Duration;

use futures::future::BoxFuture;
use wasmtime::component::{HasData, Linker};

use crate::bindings::v0_1::exec::exports::paddock::plugin::task_exec::{
    ExecOutput as ExecWitOutput, ExecPlan as ExecWitPlan,
};
use crate::bindings::v0_1::process::{
    self as wit, Command as WitCommand, Host, Isolation as WitIsolation, ProcessStatus as WitStatus,
};
use crate::bindings::v0_1::types::{HostError as WitHostError, ResourceUsage as WitUsage};
use crate::context::{ComponentContext, TaskContext, TaskPaths};
use crate::types::{
    Command, ExecCommand, ExecOutput, ExecProcess, ExecStarted, HostError, Isolation,
    ProcessStatus, ResourceUsage,
};

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
    /// Start a process for `alloc exec` (checked: its command against the grant, a
    /// joined process among `owner`'s isolated ones); its stdio is the caller's. A host
    /// that cannot keeps this default, which refuses.
    fn exec<'a>(
        &'a self,
        _owner: &'a str,
        _cmd: ExecCommand,
    ) -> BoxFuture<'a, Result<ExecProcess, HostError>> {
        Box::pin(async {
            Err(HostError::Failed(
                "this host cannot run commands in tasks".into(),
            ))
        })
    }
}

/// The most a driver-answered exec session's `state` may hold.
pub const EXEC_STATE_MAX: usize = 64 << 10;
/// The most one output of a driver-answered exec session may carry (stdout and stderr).
pub const EXEC_OUTPUT_MAX: usize = 1 << 20;

/// A driver-answered session's output, checked against the bounds above (a driver that
/// says more is refused, naming the field: its output is not cut, which would lose bytes
/// silently).
pub fn exec_output(o: ExecWitOutput) -> Result<ExecOutput, HostError> {
    if o.state.len() > EXEC_STATE_MAX {
        return Err(HostError::Invalid(format!(
            "exec-output.state holds {} bytes, more than the {EXEC_STATE_MAX} a session may keep",
            o.state.len()
        )));
    }
    if o.stdout.len() + o.stderr.len() > EXEC_OUTPUT_MAX {
        return Err(HostError::Invalid(format!(
            "exec-output.stdout and .stderr hold {} bytes, more than the {EXEC_OUTPUT_MAX} one output may carry",
            o.stdout.len() + o.stderr.len()
        )));
    }
    Ok(ExecOutput {
        stdout: o.stdout,
        stderr: o.stderr,
        state: o.state,
        exited: o.exited,
    })
}

/// The `process` view: the calling component (for its grant), the task the call is about
/// (where its processes may run and write) and the embedder's host.
pub struct Process<'a> {
    component: &'a ComponentContext,
    task: Option<&'a TaskPaths>,
    host: Option<&'a dyn ProcessHost>,
}

impl<'a> Process<'a> {
    /// Processes as `component` reaches them in a call about `task`, through `host`.
    pub fn new(
        component: &'a ComponentContext,
        task: Option<&'a TaskContext>,
        host: Option<&'a dyn ProcessHost>,
    ) -> Self {
        Self {
            component,
            task: task.and_then(|t| t.paths.as_ref()),
            host,
        }
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

    /// The command with its path resolved, once the grant allows that path and
    /// [`checks`] allow the rest.
    ///
    /// The grant is matched on the absolute path with `.` and `..` folded away, and for a
    /// plain spawn on the file itself, every symlink resolved: a link inside an allowed
    /// folder to a program outside it is refused, and the resolved file is what runs (its
    /// `argv[0]` still the name asked for). A denial names where a link leads only when
    /// the path asked for is itself in the grant: a path outside it is no oracle of the
    /// host's files. An isolated command runs inside the task's chroot, where the host's
    /// links mean nothing: its path is matched as it is.
    fn allowed(&self, cmd: WitCommand, isolated: bool) -> Result<Command, HostError> {
        let mut cmd = Command::from(cmd);
        checks::environment(self.component, &cmd.env)?;
        checks::placement(self.component, self.task, &mut cmd)?;
        let grants = &self.component.grants;
        let asked = lexical(&resolve_program(&cmd.path, &cmd.env, &cmd.cwd, |p| {
            grants.allows_command(&lexical(p))
        })?);
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
        let in_grant = grants.allows_command(&asked);
        let real = match std::fs::canonicalize(&asked) {
            Ok(real) => real.display().to_string(),
            // Say nothing of a file the grant would not let it run anyway.
            Err(_) if !in_grant => return Err(denied(format!("{asked:?}"))),
            Err(e) => return Err(HostError::Failed(format!("spawning {asked}: {e}"))),
        };
        if !grants.allows_real_command(&real) {
            return Err(denied(if real == asked || !in_grant {
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

impl Process<'_> {
    /// Carry out a driver's `task-exec` plan for `alloc exec`: a joined command needs the
    /// `process` and `isolation` grants and reaches only the driver's own processes (the
    /// host's check); a spawned one is checked as `process.spawn` checks a command; both
    /// lose their output paths and logs (the caller gets the output), a joined one its
    /// user too (the process's own is used). A session's first output is bounded.
    pub async fn exec(&self, plan: ExecWitPlan, tty: bool) -> Result<ExecStarted, HostError> {
        let quiet = |mut c: WitCommand| {
            c.stdout_path.clear();
            c.stderr_path.clear();
            c.logs = None;
            c
        };
        let (host, cmd, join) = match plan {
            ExecWitPlan::Session(o) => return exec_output(o).map(ExecStarted::Session),
            ExecWitPlan::Spawn(c) => {
                let host = self.granted("task-exec.spawn")?;
                (host, self.allowed(quiet(c), false)?, None)
            }
            ExecWitPlan::Join(j) => {
                let host = self.isolating("task-exec.join")?;
                let mut c = quiet(j.command);
                c.user.clear();
                (host, self.allowed(c, true)?, Some(j.process))
            }
        };
        let task_dir = self.task.map(|t| t.task_dir.clone()).unwrap_or_default();
        if task_dir.is_empty() {
            return Err(HostError::Invalid(
                "alloc exec: the call names no task dir to run the command in".into(),
            ));
        }
        let started = host
            .exec(
                &self.component.name,
                ExecCommand {
                    cmd,
                    join,
                    tty,
                    task_dir,
                },
            )
            .await?;
        Ok(ExecStarted::Process(started))
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
        let iso = checks::isolation(self.component, self.task, iso.into())?;
        Ok(host.spawn_isolated(&self.component.name, cmd, iso).await?)
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
/// checked against this path, so `sh` cannot slip past a `/usr/bin/*` allowlist. The
/// lookup looks only at candidates `may_run` allows, so a `PATH` of the guest's choosing
/// tells it nothing of files outside its grant.
fn resolve_program(
    path: &str,
    env: &[(String, String)],
    cwd: &str,
    may_run: impl Fn(&Path) -> bool,
) -> Result<String, HostError> {
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
        if !candidate.is_absolute() || !may_run(&candidate) {
            continue;
        }
        if let Ok(m) = std::fs::metadata(&candidate)
            && m.is_file()
            && m.permissions().mode() & 0o111 != 0
        {
            return absolute(&candidate);
        }
    }
    Err(HostError::Invalid(format!(
        "command: {path:?} not found in PATH ({search}) among the commands the component may run"
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
fn lexical(path: impl AsRef<Path>) -> String {
    use std::path::Component;
    let mut out = std::path::PathBuf::from("/");
    for part in path.as_ref().components() {
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
mod tests;
