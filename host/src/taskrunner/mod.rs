//! The task runner: one task of an allocation, from setup through its driver to exit.
//!
//! Run loop: each run is one invocation (prestart hooks, validate the driver config, start,
//! wait, Terminated); the restart tracker decides whether and when another run follows.
//! Waiting is the host's job: the driver's non-blocking `wait` says either "exited" or what
//! to wake on (process exits, a timer), and the runner sleeps on those host events, not in
//! a guest. A kill (cancellation) sends the driver's `stop` and keeps waiting, bounded by
//! the kill timeout, so a misbehaving driver cannot hold the runner forever.
//!
//! The runner knows its allocation only through [`TaskStateHandler`] and is given the rest
//! in a [`TaskRunnerConfig`].
//!
//! Files: this one (the run loop and the operations on a running task), `invocation.rs`
//! (one start: build it, start or reattach, follow it to its exit), `phases.rs` (the hook
//! phases, Nomad's `task_runner_hooks.go`), `task_config.rs` (the driver's task config),
//! `wait.rs` (waiting for the exit and killing), `local.rs` (the persisted local state),
//! `interfaces.rs` and `hooks/` (the hook contract and built-in hooks), `restarts.rs` (the
//! restart policy).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::allocdir::AllocDir;
use crate::drivermanager::types::ResourceUsage;
use crate::drivermanager::{DriverCallError, DriverManager, TaskBinding};
use crate::jobspec::Task;
use crate::state::LocalTaskState;
use crate::structs::{Allocation, TaskEvent, TaskEventType, TaskRunState};
use crate::taskenv::NodeInfo;

mod exec;
pub mod hooks;
pub mod interfaces;
mod invocation;
mod local;
mod phases;
mod restarts;
mod task_config;
pub mod templates;
mod wait;

use interfaces::{Invocation, TaskHook, TaskRunnerConfig, TaskStateHandler, TaskView};
pub use restarts::{Decision, RestartTracker};

/// Extra time after the kill timeout before the runner gives up on a driver that never
/// reports the task's exit.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// Why an operation on a task was refused.
#[derive(Debug, thiserror::Error)]
pub enum TaskActionError {
    /// The task is not running.
    #[error("task {0:?} is not running")]
    NotRunning(String),
    /// The driver refused or failed the signal.
    #[error("signalling task {task:?}: {error}")]
    Signal {
        /// The task.
        task: String,
        /// What the driver said.
        error: DriverCallError,
    },
    /// The driver refused or failed an `alloc exec`.
    #[error("exec in task {task:?}: {error}")]
    Exec {
        /// The task.
        task: String,
        /// What the driver (or the host, of its plan) said.
        error: DriverCallError,
    },
}

pub use exec::{DriverSession, TaskExec};

/// Runs one task.
pub struct TaskRunner {
    alloc_id: String,
    task: Task,
    handler: Arc<dyn TaskStateHandler>,
    db: Arc<dyn crate::state::StateDb>,
    alloc_dir: AllocDir,
    node: Arc<NodeInfo>,
    drivers: Arc<DriverManager>,
    /// Built-in then WASM hooks, in run order ([`hooks::for_task`]).
    hooks: Vec<Arc<dyn TaskHook>>,
    kill: CancellationToken,
    /// The latest start, for the poststart, exited, update and stop phases.
    last: std::sync::Mutex<Option<Arc<Invocation>>>,
    /// The values of the task's secrets (longest first): task events show `<redacted>` in
    /// their place. Set by each invocation's prestart.
    secret_values: Arc<std::sync::RwLock<Vec<String>>>,
    /// A restart was asked for (`Restart Signaled`): the running invocation is stopped and
    /// the task starts again at once, not counted against its restart policy.
    restart_requested: AtomicBool,
    /// A render of the templates is running ([`templates`]), and another was asked for
    /// meanwhile.
    render_busy: AtomicBool,
    render_again: AtomicBool,
    /// The requested restart counts as a failure (a check's `check_restart`).
    restart_as_failure: AtomicBool,
    restart_signal: tokio::sync::Notify,
    /// This task's local state (driver handle, hook state); this runner is its only writer
    /// (through [`TaskRunner::update_local`] and its running task's binding).
    local: Arc<std::sync::Mutex<LocalTaskState>>,
    /// A write of the local state failed: written again by [`TaskRunner::resync_local`].
    local_unsynced: Arc<AtomicBool>,
    /// The running invocation's binding to its driver version, while it runs.
    binding: std::sync::Mutex<Option<Arc<TaskBinding>>>,
}

/// How one run of the task ended.
enum RunEnd {
    /// The task ran and exited (or was killed while running).
    Exited {
        /// Exited with code 0, no signal, no error.
        success: bool,
        /// It exited because it was killed.
        killed: bool,
    },
    /// It failed before or while running: an event to emit, and whether a retry may help.
    Failed(Box<TaskEvent>, bool),
    /// Killed before it started.
    KilledBeforeStart,
    /// Its start failed because the state DB refused to record its process (the disk failed
    /// then): not the task's failure, so not counted against its restart policy; started
    /// again once the state DB writes.
    NotRecorded(Box<TaskEvent>),
}

impl TaskRunner {
    /// A runner for the task `config` describes, with its local state as stored.
    pub fn new(config: TaskRunnerConfig) -> Arc<Self> {
        let TaskRunnerConfig {
            alloc_id,
            task,
            handler,
            db,
            alloc_dir,
            node,
            plugins,
            kill,
        } = config;
        let local = db
            .local_state(&alloc_id, &task.name)
            .ok()
            .flatten()
            .unwrap_or_default();
        let a = handler.allocation();
        let hooks = match a.group() {
            Some(group) => hooks::for_task(
                &plugins,
                &alloc_dir,
                TaskView {
                    alloc: &a,
                    group,
                    task: &task,
                    node: &node,
                },
            ),
            None => Vec::new(),
        };
        Arc::new(Self {
            alloc_id,
            task,
            handler,
            db,
            alloc_dir,
            node,
            drivers: plugins.drivers,
            hooks,
            kill,
            last: std::sync::Mutex::new(None),
            secret_values: Arc::default(),
            restart_requested: AtomicBool::new(false),
            render_busy: AtomicBool::new(false),
            render_again: AtomicBool::new(false),
            restart_as_failure: AtomicBool::new(false),
            restart_signal: tokio::sync::Notify::new(),
            local: Arc::new(std::sync::Mutex::new(local)),
            local_unsynced: Arc::default(),
            binding: std::sync::Mutex::new(None),
        })
    }

    /// Task name.
    pub fn name(&self) -> &str {
        &self.task.name
    }

    /// The task's spec.
    pub fn task(&self) -> &Task {
        &self.task
    }

    fn state(&self) -> Option<TaskRunState> {
        self.handler.task_state(&self.task.name).map(|s| s.state)
    }

    /// Restart the running task: `Restart Signaled`, its kill signal (SIGKILL after its
    /// kill timeout), and a new start at once that does not count against its restart
    /// policy. Refused when the task is not running.
    pub fn restart(&self, reason: &str) -> Result<(), TaskActionError> {
        if self.state() != Some(TaskRunState::Running) || self.kill.is_cancelled() {
            return Err(TaskActionError::NotRunning(self.task.name.clone()));
        }
        self.event(
            TaskEvent::new(TaskEventType::RestartSignaled, reason.to_string())
                .detail("restart_reason", reason),
        );
        self.restart_requested.store(true, Ordering::SeqCst);
        self.restart_signal.notify_one();
        Ok(())
    }

    /// [`Self::restart`] for an unhealthy check (`check_restart`): the restart counts as a
    /// failure against the task's restart policy, its delay and attempts, as Nomad's
    /// check watcher restarts.
    pub fn restart_failed(&self, reason: &str) -> Result<(), TaskActionError> {
        self.restart_as_failure.store(true, Ordering::SeqCst);
        let r = self.restart(reason);
        if r.is_err() {
            self.restart_as_failure.store(false, Ordering::SeqCst);
        }
        r
    }

    /// Send `signal` to the running task through its driver version.
    pub async fn signal(&self, signal: &str) -> Result<(), TaskActionError> {
        self.signal_as(signal, "Task being sent a signal").await
    }

    /// [`Self::signal`], its `Signaling` event saying `why`.
    pub async fn signal_as(&self, signal: &str, why: &str) -> Result<(), TaskActionError> {
        let Some(binding) = self.binding.lock().unwrap().clone() else {
            return Err(TaskActionError::NotRunning(self.task.name.clone()));
        };
        self.event(TaskEvent::new(TaskEventType::Signaling, why).detail("signal", signal));
        binding
            .call(|d, h| async move {
                let h = d.signal(h, signal.to_string()).await?;
                Ok(((), Some(h)))
            })
            .await
            .map_err(|error| TaskActionError::Signal {
                task: self.task.name.clone(),
                error,
            })
    }

    /// Resource usage of the running task, from its driver version.
    pub async fn stats(&self) -> Option<ResourceUsage> {
        let binding = self.binding.lock().unwrap().clone()?;
        binding
            .call(|d, h| async move { Ok((d.stats(h).await?, None)) })
            .await
            .ok()
    }

    /// Ask the task to stop (its kill signal, then SIGKILL after its kill timeout).
    pub fn kill(&self) {
        self.kill.cancel();
    }

    fn event(&self, ev: TaskEvent) {
        self.handler
            .event(&self.task.name, redact(&self.secret_values, ev));
    }

    fn failure(kind: TaskEventType, message: String) -> TaskEvent {
        let mut ev = TaskEvent::new(kind, message.clone());
        match kind {
            TaskEventType::FailedValidation => ev.validation_error = message,
            TaskEventType::SetupFailure => ev.setup_error = message,
            TaskEventType::ArtifactDownloadFailed => ev.download_error = message,
            _ => ev.driver_error = message,
        }
        ev
    }

    /// Run the task until it exits for good: each run is one invocation with a fresh task
    /// id; the restart tracker decides whether and when another run follows.
    pub async fn run(self: Arc<Self>) {
        // Only the job's type is needed here: no copy of the allocation is held in this
        // future for the task's whole life.
        let job_type = self.handler.job_type();
        let ephemeral = self
            .task
            .lifecycle
            .as_ref()
            .is_some_and(|l| l.hook == "prestart" && !l.sidecar);
        let seed = uuid::Uuid::new_v4().as_u64_pair().0;
        let mut tracker = RestartTracker::new(
            self.task.restart_policy.clone(),
            job_type,
            ephemeral,
            std::time::Instant::now(),
            seed,
        );
        // A restored task that had finished for good stays as it was.
        if self.state() == Some(TaskRunState::Dead) {
            return;
        }
        // A restored task with a stored handle is reattached, not started again.
        let mut restore = self.local.lock().unwrap().handle.clone();
        let mut first = restore.is_none()
            && self.handler.task_state(&self.task.name).is_none_or(|s| {
                s.events
                    .iter()
                    .all(|e| e.event_type != TaskEventType::TaskSetup)
            });
        loop {
            let end = self.start_and_wait(first, restore.take()).await;
            first = false;
            self.drivers
                .unregister_event_handler(&self.alloc_id, &self.task.name);
            let mut success = false;
            match end {
                RunEnd::KilledBeforeStart => {
                    self.event(TaskEvent::new(
                        TaskEventType::Killed,
                        "Task killed before it started",
                    ));
                    return Box::pin(self.finish(false)).await;
                }
                RunEnd::Exited {
                    success: ok,
                    killed,
                } => {
                    success = ok;
                    let restart = self.restart_requested.swap(false, Ordering::SeqCst);
                    let as_failure = self.restart_as_failure.swap(false, Ordering::SeqCst);
                    if restart && as_failure && !self.kill.is_cancelled() {
                        tracker.set_exit(false);
                    } else if restart && !self.kill.is_cancelled() {
                        tracker.set_restart_triggered();
                    } else if killed {
                        tracker.set_killed();
                    } else {
                        tracker.set_exit(ok);
                    }
                }
                RunEnd::Failed(ev, recoverable) => {
                    self.event(*ev);
                    tracker.set_start_error(recoverable);
                }
                RunEnd::NotRecorded(ev) => {
                    self.event(*ev);
                    continue;
                }
            }
            if self.kill.is_cancelled() {
                tracker.set_killed();
            }
            match tracker.decide(std::time::Instant::now()) {
                Decision::Restart { delay, reason } => {
                    let mut ev = TaskEvent::new(
                        TaskEventType::Restarting,
                        format!("Task restarting in {}", crate::util::go_duration(delay)),
                    );
                    ev.start_delay = delay.as_nanos() as u64;
                    ev.details.insert("restart_reason".into(), reason);
                    let mut ev = Some(ev);
                    self.handler.update_task(&self.task.name, &mut |s| {
                        s.restarts += 1;
                        s.last_restart = crate::util::now_nanos();
                        s.state = TaskRunState::Pending;
                        if let Some(ev) = ev.take() {
                            s.push_event(ev);
                        }
                    });
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = self.kill.cancelled() => {
                            self.event(TaskEvent::new(TaskEventType::Killed, "Task killed while waiting to restart"));
                            return Box::pin(self.finish(false)).await;
                        }
                    }
                }
                Decision::NotRestarting { reason } => {
                    let mut ev = TaskEvent::new(TaskEventType::NotRestarting, reason.clone());
                    ev.fails_task = true;
                    ev.details.insert("restart_reason".into(), reason);
                    self.event(ev);
                    return Box::pin(self.finish(true)).await;
                }
                Decision::Terminated { .. } => return Box::pin(self.finish(!success)).await,
                Decision::Killed => return Box::pin(self.finish(false)).await,
            }
        }
    }

    /// The task is done for good: stop hooks, then it is dead.
    async fn finish(&self, failed: bool) {
        let a = self.handler.allocation();
        if let Some(group) = a.group() {
            self.stop_phase(self.view(&a, group)).await;
        }
        self.handler.update_task(&self.task.name, &mut |s| {
            s.state = TaskRunState::Dead;
            s.failed |= failed;
            s.finished_at = crate::util::now_nanos();
        });
    }

    fn view<'a>(&'a self, a: &'a Allocation, group: &'a crate::jobspec::TaskGroup) -> TaskView<'a> {
        TaskView {
            alloc: a,
            group,
            task: &self.task,
            node: &self.node,
        }
    }

    /// The allocation was updated in place: update hooks see the new allocation.
    pub async fn update(&self) {
        let a = self.handler.allocation();
        let Some(group) = a.group() else { return };
        self.update_phase(self.view(&a, group)).await;
    }

    fn kill_signal(&self) -> String {
        if self.task.kill_signal.is_empty() {
            "SIGINT".into()
        } else {
            self.task.kill_signal.clone()
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;

/// `ev` with every secret value in `secrets` replaced by `<redacted>`: a task event never
/// shows a secret, whatever message carried it (a command line a driver could not run, a
/// hook's or a driver's words).
pub(crate) fn redact(secrets: &std::sync::RwLock<Vec<String>>, mut ev: TaskEvent) -> TaskEvent {
    let values = secrets.read().unwrap();
    if values.is_empty() {
        return ev;
    }
    let scrub = |s: &mut String| {
        for v in values.iter().filter(|v| !v.is_empty()) {
            if s.contains(v.as_str()) {
                *s = s.replace(v.as_str(), "<redacted>");
            }
        }
    };
    for s in [
        &mut ev.message,
        &mut ev.display_message,
        &mut ev.driver_error,
        &mut ev.validation_error,
        &mut ev.setup_error,
        &mut ev.download_error,
        &mut ev.kill_reason,
        &mut ev.driver_message,
    ] {
        scrub(s);
    }
    for v in ev.details.values_mut() {
        scrub(v);
    }
    ev
}
