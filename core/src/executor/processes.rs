//! Host processes for drivers: the agent's side of the runtime's `process` interface
//! ([`ProcessHost`]). The runtime checks grants and resolves paths; this table runs,
//! signals and waits for the processes.
//!
//! Each process gets a host id, random so that ids never repeat across agent restarts; the
//! table publishes its exit through a `watch` channel, which is how the host (not a guest
//! blocked in a store) waits for tasks. Processes run in their own process group, so a
//! signal to the agent does not reach them.
//!
//! In the agent, processes are started by the task executor and recorded in the state DB
//! before their id is returned, so they outlive the agent and are found again, with the
//! same ids, after a restart ([`ProcessTable::restore`]). Without an executor (a runtime
//! used on its own, as in benchmarks) they are children of this process ([`children`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::cgroup::Cgroup;
use super::client::{ExecutorClient, ExecutorConfig, ExitSink};
use super::os::{read_usage, send_signal, start_ticks};
use super::{Exit, SpawnCommand};
use crate::runtime::host_api::process::ProcessHost;
use crate::runtime::types::{
    Command, ExecCommand, ExecProcess, ExitResult, HostError, Isolation, ProcessStatus,
    ResourceUsage,
};

pub(super) struct Proc {
    pub(super) pid: u32,
    owner: String,
    pub(super) exit_tx: watch::Sender<Option<ExitResult>>,
    exit: watch::Receiver<Option<ExitResult>>,
}

impl Proc {
    pub(super) fn new(pid: u32, owner: &str) -> Self {
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
    fn put(&self, r: &ProcessRecord) -> Result<(), ProcessStoreError>;
    /// Forget a process.
    fn delete(&self, id: u64) -> Result<(), ProcessStoreError>;
}

/// A process record could not be written or removed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProcessStoreError(pub String);

struct Backend {
    executor: ExecutorConfig,
    store: Arc<dyn ProcessStore>,
    client: tokio::sync::Mutex<Option<Arc<ExecutorClient>>>,
}

pub(super) type Procs = Arc<Mutex<HashMap<u64, Proc>>>;

/// Processes started through `process`, by host id.
#[derive(Default)]
pub struct ProcessTable {
    pub(super) procs: Procs,
    backend: std::sync::OnceLock<Backend>,
    /// Processes taken back at a restart that no driver has asked about since: once every
    /// restored task has reattached, those left belong to no task ([`Self::reap_unclaimed`]).
    /// By host id, the start time recorded (to tell the process from a later one that
    /// got its pid).
    unclaimed: Mutex<HashMap<u64, u64>>,
    /// Processes killed at their start because the store refused their record.
    records_refused: std::sync::atomic::AtomicU64,
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
                oom_killed: exit.oom_killed,
                // As Nomad's drivers word it, so the Terminated event says why.
                err: exit.oom_killed.then(|| "OOM Killed".to_string()),
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
            let mut unclaimed = self.unclaimed.lock().unwrap();
            for r in &records {
                procs.insert(r.id, Proc::new(r.pid, &r.owner));
                unclaimed.insert(r.id, r.start_ticks);
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

    /// How many processes were killed at their start because their record could not be
    /// stored (the state DB refused it): a start that failed while this changed failed for
    /// the disk's sake.
    pub fn records_refused(&self) -> u64 {
        self.records_refused
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A receiver that changes when process `id` exits; `None` if the id is unknown.
    pub fn exit_watch(&self, id: u64) -> Option<watch::Receiver<Option<ExitResult>>> {
        self.procs.lock().unwrap().get(&id).map(|p| p.exit.clone())
    }

    pub(super) fn lookup(
        &self,
        id: u64,
        owner: &str,
    ) -> Result<(u32, watch::Receiver<Option<ExitResult>>), HostError> {
        let procs = self.procs.lock().unwrap();
        match procs.get(&id) {
            Some(p) if p.owner == owner => {
                self.unclaimed.lock().unwrap().remove(&id);
                Ok((p.pid, p.exit.clone()))
            }
            _ => Err(HostError::NotFound(format!("no process with id {id}"))),
        }
    }

    /// Kill and forget the processes taken back at a restart that no driver asked about
    /// since (a driver asks when it reattaches its task): call once every restored task
    /// has reattached or given up. They belong to no task the state DB knows of (a task
    /// whose handle a failing disk refused, an allocation whose rows are gone), and nothing
    /// would ever stop them. Returns their ids.
    pub fn reap_unclaimed(&self) -> Vec<u64> {
        let ids: Vec<(u64, u64)> = self.unclaimed.lock().unwrap().drain().collect();
        let mut reaped = Vec::new();
        for (id, ticks) in ids {
            let Some((pid, running)) = self
                .procs
                .lock()
                .unwrap()
                .get(&id)
                .map(|p| (p.pid, p.exit.borrow().is_none()))
            else {
                continue;
            };
            // Only the process recorded: its pid may have gone to another since.
            if running && ticks != 0 && start_ticks(pid) == Some(ticks) {
                tracing::warn!(
                    id,
                    pid,
                    "a process recorded before the restart belongs to no task: killing it"
                );
                let _ = send_signal(pid, "SIGKILL");
            }
            self.forget(id);
            reaped.push(id);
        }
        reaped
    }

    pub(super) fn new_id(&self) -> u64 {
        // Random, below 2^53 so that JSON tools read it exactly.
        let procs = self.procs.lock().unwrap();
        loop {
            let id = (uuid::Uuid::new_v4().as_u64_pair().0 >> 11).max(1);
            if !procs.contains_key(&id) {
                return id;
            }
        }
    }

    async fn spawn_process(
        &self,
        owner: &str,
        cmd: Command,
        isolation: Option<Isolation>,
    ) -> Result<u64, HostError> {
        match (self.backend.get(), isolation) {
            (Some(b), isolation) => self.spawn_with_executor(b, owner, cmd, isolation).await,
            (None, None) => self.spawn_child(owner, cmd).await,
            // Only the executor's tasks outlive the agent, and a confined task must not
            // die with it: no isolation without one.
            (None, Some(_)) => Err(HostError::Failed(
                "isolation needs the task executor, which this runtime has none of".into(),
            )),
        }
    }

    /// Whether isolated processes can be started here.
    fn can_isolate(&self) -> Result<(), HostError> {
        if self.backend.get().is_none() {
            return Err(HostError::Failed(
                "no task executor to parent isolated processes".into(),
            ));
        }
        if !rustix::process::geteuid().is_root() {
            return Err(HostError::Failed(
                "isolation needs root: the agent does not run as root".into(),
            ));
        }
        super::cgroup::support().map_err(|e| HostError::Failed(e.to_string()))
    }

    async fn spawn_with_executor(
        &self,
        b: &Backend,
        owner: &str,
        cmd: Command,
        isolation: Option<Isolation>,
    ) -> Result<u64, HostError> {
        if let Some(iso) = &isolation
            && iso.user.is_empty()
            && !cmd.user.is_empty()
        {
            return Err(HostError::Invalid(
                "user: give the user in the isolation, not the command".into(),
            ));
        }
        let id = self.new_id();
        let isolated = isolation.is_some();
        let spawn = SpawnCommand {
            path: cmd.path.clone(),
            args: cmd.args,
            env: cmd.env,
            cwd: cmd.cwd,
            stdout: cmd.stdout_path,
            stderr: cmd.stderr_path,
            rotate: cmd.logs.map(|l| (l.max_files, l.max_bytes())),
            isolation,
            argv0: cmd.argv0,
            alloc_root: cmd.alloc_root,
            user: if isolated { String::new() } else { cmd.user },
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
            Ok((pid, true)) => pid,
            // It opened the task's files the old way, following links: stop the process
            // before it writes anything.
            Ok((pid, false)) => {
                let _ = send_signal(pid, "SIGKILL");
                forget(&self.procs);
                return Err(HostError::Failed(
                    "the running task executor predates guarded task paths (it follows links \
                     in task folders): stop it once its tasks are done so the agent starts a \
                     current one"
                        .into(),
                ));
            }
            Err(e) => {
                forget(&self.procs);
                return Err(HostError::Failed(e.to_string()));
            }
        };
        // An executor started by an agent from before isolation ignores the request and
        // runs the task unconfined; only one that made the cgroup (and recorded it before
        // answering) isolated it.
        if isolated && Cgroup::load(&b.executor.dir, id).is_none() {
            let _ = send_signal(pid, "SIGKILL");
            forget(&self.procs);
            return Err(HostError::Failed(
                "the running task executor cannot isolate processes (it predates isolation): \
                 stop it once its tasks are done so the agent starts a current one"
                    .into(),
            ));
        }
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
            self.records_refused
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
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
            if let Some(cg) = Cgroup::load(&b.executor.dir, id) {
                let record = Cgroup::record_path(&b.executor.dir, id);
                // Off the guest's call path: removal waits for the last process to go.
                std::thread::spawn(move || {
                    cg.remove();
                    let _ = std::fs::remove_file(record);
                });
            }
        }
    }

    /// Process `id`'s cgroup, when it is isolated.
    pub(super) fn cgroup(&self, id: u64) -> Option<Cgroup> {
        Cgroup::load(&self.backend.get()?.executor.dir, id)
    }
}

impl ProcessHost for ProcessTable {
    fn spawn<'a>(&'a self, owner: &'a str, cmd: Command) -> BoxFuture<'a, Result<u64, HostError>> {
        Box::pin(self.spawn_process(owner, cmd, None))
    }

    fn spawn_isolated<'a>(
        &'a self,
        owner: &'a str,
        cmd: Command,
        iso: Isolation,
    ) -> BoxFuture<'a, Result<u64, HostError>> {
        Box::pin(async move {
            self.can_isolate()?;
            self.spawn_process(owner, cmd, Some(iso)).await
        })
    }

    fn isolation_support(&self) -> Result<(), HostError> {
        self.can_isolate()
    }

    fn exec<'a>(
        &'a self,
        owner: &'a str,
        cmd: ExecCommand,
    ) -> BoxFuture<'a, Result<ExecProcess, HostError>> {
        Box::pin(self.exec_process(owner, cmd))
    }

    fn signal(&self, owner: &str, id: u64, signal: &str) -> Result<(), HostError> {
        let (pid, exit) = self.lookup(id, owner)?;
        if exit.borrow().is_some() {
            return Err(HostError::NotFound(format!("process {id} has exited")));
        }
        send_signal(pid, signal)
    }

    fn stop(&self, owner: &str, id: u64, signal: &str, timeout: Duration) -> Result<(), HostError> {
        let (pid, mut exit) = self.lookup(id, owner)?;
        if exit.borrow().is_some() {
            return Ok(());
        }
        send_signal(pid, signal)?;
        tokio::spawn(async move {
            let exited = tokio::time::timeout(timeout, exit.wait_for(|e| e.is_some())).await;
            if exited.is_err() {
                tracing::info!(pid, "process ignored its stop signal; sending SIGKILL");
                let _ = send_signal(pid, "SIGKILL");
            }
        });
        Ok(())
    }

    fn status(&self, owner: &str, id: u64) -> Result<ProcessStatus, HostError> {
        let (_, exit) = self.lookup(id, owner)?;
        let current = exit.borrow().clone();
        Ok(match current {
            Some(r) => ProcessStatus::Exited(r),
            None => ProcessStatus::Running,
        })
    }

    fn stats(&self, owner: &str, id: u64) -> Result<ResourceUsage, HostError> {
        let (pid, _) = self.lookup(id, owner)?;
        // An isolated task's processes are all in its cgroup, which counts them all.
        if let Some(usage) = self.cgroup(id).and_then(|cg| cg.usage()) {
            return Ok(usage);
        }
        read_usage(pid)
    }

    fn release(&self, owner: &str, id: u64) -> Result<(), HostError> {
        let (pid, exit) = self.lookup(id, owner)?;
        if exit.borrow().is_none() {
            let _ = send_signal(pid, "SIGKILL");
        }
        self.forget(id);
        Ok(())
    }
}
