//! `process`: host processes for drivers, because WASI cannot spawn or wait.
//!
//! Each process gets a host id, random so that ids never repeat across agent restarts; the
//! host publishes its exit through a `watch` channel, which is how the host (not a guest
//! blocked in a store) waits for tasks. Processes run in their own process group, so a
//! signal to the agent does not reach them. Every call checks the component's `process`
//! grant; spawn also checks the command path.
//!
//! In the agent, processes are started by the task executor ([`crate::executor`]) and
//! recorded in the state DB before their id is returned, so they outlive the agent and are
//! found again, with the same ids, after a restart ([`ProcessTable::restore`]). Without an
//! executor (the runtime used as a library), they are children of this process.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::executor::client::{ExecutorClient, ExecutorConfig, ExitSink};
use crate::executor::{Exit, SpawnCommand};
use crate::logmon::RotatingFile;
use crate::runtime::bindings::v0_1_0::process::{Command, Host, ProcessStatus as Status};
use crate::runtime::bindings::v0_1_0::types::{ExitResult, HostError, ResourceUsage};
use crate::runtime::store::HostState;
use crate::util::signal_number;

struct Proc {
    pid: u32,
    owner: String,
    exit_tx: watch::Sender<Option<ExitResult>>,
    exit: watch::Receiver<Option<ExitResult>>,
}

impl Proc {
    fn new(pid: u32, owner: &str) -> Self {
        let (exit_tx, exit) = watch::channel(None);
        Self {
            pid,
            owner: owner.to_string(),
            exit_tx,
            exit,
        }
    }
}

/// What the state DB keeps of a process, to find it again after an agent restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// Host id.
    pub id: u64,
    /// OS pid.
    pub pid: u32,
    /// Component that started it.
    pub owner: String,
    /// Its start time in clock ticks since boot (`/proc/<pid>/stat`), to tell it from a
    /// later process that got the same pid; 0 if unknown.
    pub start_ticks: u64,
}

/// Where process records are kept.
pub trait ProcessStore: Send + Sync {
    /// Record a process (durably, before its id is handed out).
    fn put(&self, r: &ProcessRecord) -> Result<(), String>;
    /// Forget a process.
    fn delete(&self, id: u64) -> Result<(), String>;
}

struct Backend {
    executor: ExecutorConfig,
    store: Arc<dyn ProcessStore>,
    client: tokio::sync::Mutex<Option<Arc<ExecutorClient>>>,
}

type Procs = Arc<Mutex<HashMap<u64, Proc>>>;

/// Processes started through `process`, by host id.
#[derive(Default)]
pub struct ProcessTable {
    procs: Procs,
    backend: std::sync::OnceLock<Backend>,
}

/// Hands the executor's news to the table.
struct Sink {
    procs: Procs,
}

impl Sink {
    fn finish(&self, id: u64, r: ExitResult) {
        if let Some(p) = self.procs.lock().unwrap().get(&id) {
            p.exit_tx.send_if_modified(|cur| {
                if cur.is_none() {
                    *cur = Some(r);
                    true
                } else {
                    false
                }
            });
        }
    }

    /// Process `id` has no waiter: watch its pid, and report the exit as lost.
    fn orphaned(&self, id: u64) {
        let Some((pid, start)) = self
            .procs
            .lock()
            .unwrap()
            .get(&id)
            .map(|p| (p.pid, start_ticks(p.pid)))
        else {
            return;
        };
        let procs = self.procs.clone();
        tokio::spawn(async move {
            while start.is_some() && start_ticks(pid) == start {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Sink { procs }.finish(
                id,
                ExitResult {
                    exit_code: -1,
                    signal: 0,
                    oom_killed: false,
                    err: Some(
                        "exit status lost: the executor that ran this process stopped".into(),
                    ),
                },
            );
        });
    }
}

impl ExitSink for Sink {
    fn exited(&self, id: u64, exit: Exit) {
        self.finish(
            id,
            ExitResult {
                exit_code: exit.exit_code,
                signal: exit.signal,
                oom_killed: false,
                err: None,
            },
        );
    }

    fn unknown(&self, id: u64) {
        self.orphaned(id);
    }

    fn disconnected(&self) {
        let running: Vec<u64> = self
            .procs
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, p)| p.exit.borrow().is_none())
            .map(|(id, _)| *id)
            .collect();
        for id in running {
            self.orphaned(id);
        }
    }
}

/// A process's start time in clock ticks since boot, if it runs.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // State is field 3 (index 0 here); a zombie has exited.
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

impl ProcessTable {
    /// Start processes through the task executor and record them in `store`.
    pub fn use_executor(&self, executor: ExecutorConfig, store: Arc<dyn ProcessStore>) {
        let _ = self.backend.set(Backend {
            executor,
            store,
            client: tokio::sync::Mutex::new(None),
        });
    }

    /// Processes recorded before an agent restart: take them back under their ids and ask
    /// the executor for their exits (those that happened while the agent was down come at
    /// once).
    pub async fn restore(&self, records: Vec<ProcessRecord>) {
        {
            let mut procs = self.procs.lock().unwrap();
            for r in &records {
                procs.insert(r.id, Proc::new(r.pid, &r.owner));
            }
        }
        if records.is_empty() {
            return;
        }
        match self.client().await {
            Ok(c) => {
                for r in &records {
                    if c.watch(r.id).await.is_err() {
                        self.sink().orphaned(r.id);
                    }
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "restored processes have no executor");
                for r in &records {
                    self.sink().orphaned(r.id);
                }
            }
        }
    }

    fn sink(&self) -> Sink {
        Sink {
            procs: self.procs.clone(),
        }
    }

    async fn client(&self) -> Result<Arc<ExecutorClient>, HostError> {
        let b = self
            .backend
            .get()
            .ok_or_else(|| HostError::Failed("no executor configured".into()))?;
        let mut guard = b.client.lock().await;
        if let Some(c) = guard.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let c = ExecutorClient::connect(&b.executor, Arc::new(self.sink()))
            .await
            .map_err(|e| HostError::Failed(e.to_string()))?;
        *guard = Some(c.clone());
        Ok(c)
    }

    /// A receiver that changes when process `id` exits; `None` if the id is unknown.
    pub fn exit_watch(&self, id: u64) -> Option<watch::Receiver<Option<ExitResult>>> {
        self.procs.lock().unwrap().get(&id).map(|p| p.exit.clone())
    }

    fn lookup(
        &self,
        id: u64,
        owner: &str,
    ) -> Result<(u32, watch::Receiver<Option<ExitResult>>), HostError> {
        let procs = self.procs.lock().unwrap();
        match procs.get(&id) {
            Some(p) if p.owner == owner => Ok((p.pid, p.exit.clone())),
            _ => Err(HostError::NotFound(format!("no process with id {id}"))),
        }
    }

    fn new_id(&self) -> u64 {
        // Random, below 2^53 so that JSON tools read it exactly.
        let procs = self.procs.lock().unwrap();
        loop {
            let id = (uuid::Uuid::new_v4().as_u64_pair().0 >> 11).max(1);
            if !procs.contains_key(&id) {
                return id;
            }
        }
    }

    async fn spawn(&self, owner: &str, cmd: Command) -> Result<u64, HostError> {
        if !cmd.user.is_empty() {
            return Err(HostError::Invalid(format!(
                "user: running as {:?} is not supported yet",
                cmd.user
            )));
        }
        match self.backend.get() {
            Some(b) => self.spawn_with_executor(b, owner, cmd).await,
            None => self.spawn_child(owner, cmd).await,
        }
    }

    async fn spawn_with_executor(
        &self,
        b: &Backend,
        owner: &str,
        cmd: Command,
    ) -> Result<u64, HostError> {
        let id = self.new_id();
        let spawn = SpawnCommand {
            path: cmd.path.clone(),
            args: cmd.args,
            env: cmd.env,
            cwd: cmd.cwd,
            stdout: cmd.stdout_path,
            stderr: cmd.stderr_path,
            rotate: cmd
                .logs
                .map(|l| (l.max_files, u64::from(l.max_file_size_mb.max(1)) << 20)),
        };
        // In the table before the request, so an exit that comes before the answer lands.
        self.procs.lock().unwrap().insert(id, Proc::new(0, owner));
        let forget = |procs: &Procs| {
            procs.lock().unwrap().remove(&id);
        };
        let client = match self.client().await {
            Ok(c) => c,
            Err(e) => {
                forget(&self.procs);
                return Err(e);
            }
        };
        let pid = match client.spawn(id, spawn).await {
            Ok(pid) => pid,
            Err(e) => {
                forget(&self.procs);
                return Err(HostError::Failed(e.to_string()));
            }
        };
        if let Some(p) = self.procs.lock().unwrap().get_mut(&id) {
            p.pid = pid;
        }
        let record = ProcessRecord {
            id,
            pid,
            owner: owner.to_string(),
            start_ticks: start_ticks(pid).unwrap_or(0),
        };
        // Durable before the id is handed out: a driver's handle names only processes the
        // agent can find again.
        if let Err(e) = b.store.put(&record) {
            let _ = send_signal(pid, "SIGKILL");
            forget(&self.procs);
            return Err(HostError::Failed(format!("recording process {id}: {e}")));
        }
        tracing::debug!(component = owner, id, pid, path = %cmd.path, "process spawned");
        Ok(id)
    }

    fn forget(&self, id: u64) {
        self.procs.lock().unwrap().remove(&id);
        if let Some(b) = self.backend.get() {
            if let Err(e) = b.store.delete(id) {
                tracing::warn!(id, error = %e, "removing a process record failed");
            }
            let _ = std::fs::remove_file(crate::executor::exit_path(&b.executor.dir, id));
        }
    }

    async fn spawn_child(&self, owner: &str, cmd: Command) -> Result<u64, HostError> {
        let mut c = tokio::process::Command::new(&cmd.path);
        c.args(&cmd.args)
            .env_clear()
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .process_group(0)
            .kill_on_drop(false);
        if !cmd.cwd.is_empty() {
            c.current_dir(&cmd.cwd);
        }
        let rotate = |path: &str, what: &str| -> Result<Option<RotatingFile>, HostError> {
            match (&cmd.logs, path.is_empty()) {
                (Some(l), false) => RotatingFile::open(
                    Path::new(path),
                    l.max_files,
                    u64::from(l.max_file_size_mb.max(1)) << 20,
                )
                .map(Some)
                .map_err(|e| HostError::Failed(format!("opening {what} log {path}: {e}"))),
                _ => Ok(None),
            }
        };
        let (out_log, err_log) = (
            rotate(&cmd.stdout_path, "stdout")?,
            rotate(&cmd.stderr_path, "stderr")?,
        );
        c.stdout(if out_log.is_some() {
            Stdio::piped()
        } else {
            open_plain(&cmd.stdout_path, "stdout")?
        });
        c.stderr(if err_log.is_some() {
            Stdio::piped()
        } else {
            open_plain(&cmd.stderr_path, "stderr")?
        });

        let mut child = c
            .spawn()
            .map_err(|e| HostError::Failed(format!("spawning {}: {e}", cmd.path)))?;
        let pid = child.id().unwrap_or_default();
        let mut pumps = Vec::new();
        if let (Some(log), Some(pipe)) = (out_log, child.stdout.take()) {
            pumps.push(tokio::spawn(crate::logmon::pump(pipe, log)));
        }
        if let (Some(log), Some(pipe)) = (err_log, child.stderr.take()) {
            pumps.push(tokio::spawn(crate::logmon::pump(pipe, log)));
        }
        let id = self.new_id();
        let proc = Proc::new(pid, owner);
        let tx = proc.exit_tx.clone();
        self.procs.lock().unwrap().insert(id, proc);
        tokio::spawn(async move {
            let result = match child.wait().await {
                Ok(status) => ExitResult {
                    exit_code: status.code().unwrap_or(0),
                    signal: status.signal().unwrap_or(0),
                    oom_killed: false,
                    err: None,
                },
                Err(e) => ExitResult {
                    exit_code: -1,
                    signal: 0,
                    oom_killed: false,
                    err: Some(e.to_string()),
                },
            };
            // Let the logs drain before the exit is published, but never wait on a
            // grandchild that keeps the pipe open.
            for p in pumps {
                let _ = tokio::time::timeout(Duration::from_secs(2), p).await;
            }
            let _ = tx.send(Some(result));
        });
        tracing::debug!(component = owner, id, pid, path = %cmd.path, "process spawned");
        Ok(id)
    }
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
        return Ok(full.display().to_string());
    }
    let search = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in search.split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(path);
        if let Ok(m) = std::fs::metadata(&candidate)
            && m.is_file()
            && m.permissions().mode() & 0o111 != 0
        {
            return Ok(candidate.display().to_string());
        }
    }
    Err(HostError::Invalid(format!(
        "command: {path:?} not found in PATH ({search})"
    )))
}

fn open_plain(path: &str, what: &str) -> Result<Stdio, HostError> {
    if path.is_empty() {
        return Ok(Stdio::null());
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(Into::into)
        .map_err(|e| HostError::Failed(format!("opening {what} file {path}: {e}")))
}

fn send_signal(pid: u32, signal: &str) -> Result<(), HostError> {
    let n = signal_number(signal)
        .ok_or_else(|| HostError::Invalid(format!("signal: unknown signal {signal:?}")))?;
    let sig = rustix::process::Signal::from_named_raw(n)
        .ok_or_else(|| HostError::Invalid(format!("signal: {signal:?} cannot be sent")))?;
    let pid = rustix::process::Pid::from_raw(pid as i32)
        .ok_or_else(|| HostError::Invalid("process has no pid".into()))?;
    // The process leads its own group: signal the group so its children get it too.
    rustix::process::kill_process_group(pid, sig)
        .or_else(|_| rustix::process::kill_process(pid, sig))
        .map_err(|e| HostError::Failed(format!("sending {signal}: {e}")))
}

fn read_usage(pid: u32) -> Result<ResourceUsage, HostError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| HostError::NotFound(format!("process {pid}: {e}")))?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let tick_ns = 1_000_000_000 / 100;
    let rss_pages = fields
        .get(21)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    Ok(ResourceUsage {
        rss_bytes: rss_pages * 4096,
        cpu_user_ns: ticks(11) * tick_ns,
        cpu_system_ns: ticks(12) * tick_ns,
        cpu_percent: 0.0,
        timestamp: crate::util::now_nanos(),
    })
}

impl HostState {
    fn check_process_grant(&self, what: &str) -> Result<(), HostError> {
        if self.component.grants.process.is_empty() {
            return Err(super::denied(self, "process", what));
        }
        Ok(())
    }
}

impl Host for HostState {
    async fn spawn(&mut self, mut cmd: Command) -> Result<u64, HostError> {
        self.check_process_grant("process.spawn")?;
        cmd.path = resolve_program(&cmd.path, &cmd.env, &cmd.cwd)?;
        if !self.component.grants.allows_command(&cmd.path) {
            return Err(HostError::Denied(format!(
                "component {:?} may not run {:?}: allowed commands are {:?}",
                self.component.name, cmd.path, self.component.grants.process
            )));
        }
        self.services
            .processes
            .spawn(&self.component.name, cmd)
            .await
    }

    async fn signal(&mut self, id: u64, signal: String) -> Result<(), HostError> {
        self.check_process_grant("process.signal")?;
        let (pid, exit) = self.services.processes.lookup(id, &self.component.name)?;
        if exit.borrow().is_some() {
            return Err(HostError::NotFound(format!("process {id} has exited")));
        }
        send_signal(pid, &signal)
    }

    async fn stop(&mut self, id: u64, signal: String, timeout_ns: u64) -> Result<(), HostError> {
        self.check_process_grant("process.stop")?;
        let (pid, mut exit) = self.services.processes.lookup(id, &self.component.name)?;
        if exit.borrow().is_some() {
            return Ok(());
        }
        send_signal(pid, &signal)?;
        let timeout = Duration::from_nanos(timeout_ns);
        tokio::spawn(async move {
            let exited = tokio::time::timeout(timeout, exit.wait_for(|e| e.is_some())).await;
            if exited.is_err() {
                tracing::info!(pid, "process ignored its stop signal; sending SIGKILL");
                let _ = send_signal(pid, "SIGKILL");
            }
        });
        Ok(())
    }

    async fn status(&mut self, id: u64) -> Result<Status, HostError> {
        self.check_process_grant("process.status")?;
        let (_, exit) = self.services.processes.lookup(id, &self.component.name)?;
        let current = exit.borrow().clone();
        Ok(match current {
            Some(r) => Status::Exited(r),
            None => Status::Running,
        })
    }

    async fn stats(&mut self, id: u64) -> Result<ResourceUsage, HostError> {
        self.check_process_grant("process.stats")?;
        let (pid, _) = self.services.processes.lookup(id, &self.component.name)?;
        read_usage(pid)
    }

    async fn release(&mut self, id: u64) -> Result<(), HostError> {
        self.check_process_grant("process.release")?;
        let (pid, exit) = self.services.processes.lookup(id, &self.component.name)?;
        if exit.borrow().is_none() {
            let _ = send_signal(pid, "SIGKILL");
        }
        self.services.processes.forget(id);
        Ok(())
    }
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
}
