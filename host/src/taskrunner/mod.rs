//! The task runner: one task of an allocation, from setup through its driver to exit.
//!
//! Run loop: Task Setup (dirs, env) → validate the driver config → start (the handle is
//! persisted before `Started` is emitted) → wait → Terminated → destroy. Waiting is the
//! host's job: the driver's non-blocking `wait` says either "exited" or what to wake on
//! (process exits, a timer), and the runner sleeps on those host events, not in a guest.
//! A kill (cancellation) sends the driver's `stop` and keeps waiting, bounded by the
//! kill timeout, so a misbehaving driver cannot hold the runner forever.
//!
//! Files: this one (the run loop, start, reattach, prestart), `wait.rs` (waiting for the
//! exit and killing), `local.rs` (the persisted local state: handle, hook state, hook env),
//! `interfaces.rs` and `hooks/` (the hook phases and built-in hooks), `wasm_hooks.rs`
//! (WASM hook attachments), `restarts.rs` (the restart policy).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::allocrunner::AllocShared;
use crate::drivermanager::{Driver, DriverCallError, DriverManager};
use crate::jobspec::Task;
use crate::runtime::TaskContext;
use crate::runtime::bindings::v0_1_0::driver::exports::paddock::plugin::task_driver::DriverError;
use crate::runtime::bindings::v0_1_0::types::{LogConfig, TaskConfig, TaskHandle, TaskResources};
use crate::state::{HookState, LocalTaskState, StoredHandle};
use crate::structs::{Allocation, TaskEvent, event_type, task_state};

pub mod hooks;
pub mod interfaces;
mod local;
mod restarts;
mod wait;
mod wasm_hooks;
use interfaces::{
    ExitedRequest, HookFailure, Invocation, PoststartRequest, PrestartRequest, StopRequest,
    TaskHook, TaskView, UpdateRequest,
};
pub use restarts::{Decision, RestartTracker};
pub use wasm_hooks::{HookSet, JOB_META_KEY};

/// Extra time after the kill timeout before the runner gives up on a driver that never
/// reports the task's exit.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// Runs one task.
pub struct TaskRunner {
    alloc: Arc<AllocShared>,
    task: Task,
    drivers: Arc<DriverManager>,
    /// Built-in then WASM hooks, in run order ([`hooks::for_task`]).
    hooks: Vec<Arc<dyn TaskHook>>,
    kill: CancellationToken,
    /// The latest start, for the poststart, exited, update and stop phases.
    last: std::sync::Mutex<Option<Arc<Invocation>>>,
    /// A restart was asked for (`Restart Signaled`): the running invocation is stopped and
    /// the task starts again at once, not counted against its restart policy.
    restart_requested: std::sync::atomic::AtomicBool,
    restart_signal: tokio::sync::Notify,
    /// This task's local state (driver handle, hook state); this runner is its only writer.
    local: std::sync::Mutex<LocalTaskState>,
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
}

impl TaskRunner {
    /// A runner for `task` of the shared allocation.
    pub fn new(
        alloc: Arc<AllocShared>,
        task: Task,
        plugins: &crate::allocrunner::Plugins,
        kill: CancellationToken,
    ) -> Arc<Self> {
        let local = alloc
            .db
            .local_state(&alloc.id(), &task.name)
            .ok()
            .flatten()
            .unwrap_or_default();
        let deps = hooks::HookDeps {
            drivers: plugins.drivers.clone(),
            devices: plugins.devices.clone(),
            alloc_dir: alloc.dir.clone(),
            wasm: plugins.hooks.clone(),
        };
        let a = alloc.snapshot();
        let hooks = match a.group() {
            Some(group) => hooks::for_task(
                &deps,
                TaskView {
                    alloc: &a,
                    group,
                    task: &task,
                    node: &alloc.node,
                },
            ),
            None => Vec::new(),
        };
        Arc::new(Self {
            alloc,
            task,
            drivers: plugins.drivers.clone(),
            hooks,
            kill,
            last: std::sync::Mutex::new(None),
            restart_requested: std::sync::atomic::AtomicBool::new(false),
            restart_signal: tokio::sync::Notify::new(),
            local: std::sync::Mutex::new(local),
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

    /// Restart the running task: `Restart Signaled`, its kill signal (SIGKILL after its
    /// kill timeout), and a new start at once that does not count against its restart
    /// policy. Refused when the task is not running.
    pub fn restart(&self, reason: &str) -> Result<(), String> {
        let running = self.alloc.peek(|a| {
            a.task_states
                .get(&self.task.name)
                .is_some_and(|s| s.state == task_state::RUNNING)
        });
        if !running || self.kill.is_cancelled() {
            return Err(format!("task {:?} is not running", self.task.name));
        }
        self.event(
            TaskEvent::new(event_type::RESTART_SIGNALED, reason.to_string())
                .detail("restart_reason", reason),
        );
        self.restart_requested
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.restart_signal.notify_one();
        Ok(())
    }

    /// Send `signal` to the running task through its driver.
    pub async fn signal(&self, signal: &str) -> Result<(), String> {
        let Some(stored) = self.local.lock().unwrap().handle.clone() else {
            return Err(format!("task {:?} is not running", self.task.name));
        };
        let driver = self
            .drivers
            .dispense(&self.task.driver)
            .ok_or_else(|| format!("driver {:?} is not loaded", self.task.driver))?;
        self.event(
            TaskEvent::new(event_type::SIGNALING, "Task being sent a signal")
                .detail("signal", signal),
        );
        let updated = driver
            .signal(stored.into_handle(), signal.to_string())
            .await
            .map_err(|e| format!("signalling task {:?}: {e}", self.task.name))?;
        self.persist_handle(&driver, &updated);
        Ok(())
    }

    /// Resource usage of the running task, from its driver.
    pub async fn stats(&self) -> Option<crate::runtime::bindings::v0_1_0::types::ResourceUsage> {
        let stored = self.local.lock().unwrap().handle.clone()?;
        let driver = self.drivers.dispense(&self.task.driver)?;
        driver.stats(stored.into_handle()).await.ok()
    }

    /// Ask the task to stop (its kill signal, then SIGKILL after its kill timeout).
    pub fn kill(&self) {
        self.kill.cancel();
    }

    fn event(&self, ev: TaskEvent) {
        self.alloc.event(&self.task.name, ev);
    }

    fn failure(kind: &str, message: String) -> TaskEvent {
        let mut ev = TaskEvent::new(kind, message.clone());
        match kind {
            event_type::FAILED_VALIDATION => ev.validation_error = message,
            event_type::SETUP_FAILURE => ev.setup_error = message,
            _ => ev.driver_error = message,
        }
        ev
    }

    /// Run the task until it exits for good: each run is one invocation with a fresh task
    /// id; the restart tracker decides whether and when another run follows.
    pub async fn run(self: Arc<Self>) {
        let alloc_id = self.alloc.id();
        let a = self.alloc.snapshot();
        let ephemeral = self
            .task
            .lifecycle
            .as_ref()
            .is_some_and(|l| l.hook == "prestart" && !l.sidecar);
        let seed = uuid::Uuid::new_v4().as_u64_pair().0;
        let mut tracker = RestartTracker::new(
            self.task.restart_policy.clone(),
            a.job.job_type,
            ephemeral,
            std::time::Instant::now(),
            seed,
        );
        // A restored task that had finished for good stays as it was.
        if self
            .alloc
            .peek(|a| a.task_states.get(&self.task.name).map(|s| s.state.clone()))
            .as_deref()
            == Some(task_state::DEAD)
        {
            return;
        }
        // A restored task with a stored handle is reattached, not started again.
        let mut restore = self.local.lock().unwrap().handle.clone();
        let mut first = restore.is_none()
            && self.alloc.peek(|a| {
                a.task_states.get(&self.task.name).is_none_or(|s| {
                    s.events
                        .iter()
                        .all(|e| e.event_type != event_type::TASK_SETUP)
                })
            });
        loop {
            let end = self.start_and_wait(&alloc_id, first, restore.take()).await;
            first = false;
            self.drivers
                .unregister_event_handler(&alloc_id, &self.task.name);
            let mut success = false;
            match end {
                RunEnd::KilledBeforeStart => {
                    self.event(TaskEvent::new(
                        event_type::KILLED,
                        "Task killed before it started",
                    ));
                    return self.finish(false).await;
                }
                RunEnd::Exited {
                    success: ok,
                    killed,
                } => {
                    success = ok;
                    let restart = self
                        .restart_requested
                        .swap(false, std::sync::atomic::Ordering::SeqCst);
                    if restart && !self.kill.is_cancelled() {
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
            }
            if self.kill.is_cancelled() {
                tracker.set_killed();
            }
            match tracker.decide(std::time::Instant::now()) {
                Decision::Restart { delay, reason } => {
                    let mut ev = TaskEvent::new(
                        event_type::RESTARTING,
                        format!("Task restarting in {delay:?}"),
                    );
                    ev.start_delay = delay.as_nanos() as u64;
                    ev.details.insert("restart_reason".into(), reason);
                    self.alloc.update_task(&self.task.name, |s| {
                        s.restarts += 1;
                        s.last_restart = crate::util::now_nanos();
                        s.state = task_state::PENDING.into();
                        s.push_event(ev);
                    });
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = self.kill.cancelled() => {
                            self.event(TaskEvent::new(event_type::KILLED, "Task killed while waiting to restart"));
                            return self.finish(false).await;
                        }
                    }
                }
                Decision::NotRestarting { reason } => {
                    let mut ev = TaskEvent::new(event_type::NOT_RESTARTING, reason.clone());
                    ev.fails_task = true;
                    ev.details.insert("restart_reason".into(), reason);
                    self.event(ev);
                    return self.finish(true).await;
                }
                Decision::Terminated { .. } => return self.finish(!success).await,
                Decision::Killed => return self.finish(false).await,
            }
        }
    }

    /// The task is done for good: stop hooks, then it is dead.
    async fn finish(&self, failed: bool) {
        let a = self.alloc.snapshot();
        if let Some(group) = a.group() {
            let view = self.view(&a, group);
            let last = self.last.lock().unwrap().clone();
            for hook in &self.hooks {
                let state = self.hook_state(hook.name()).unwrap_or_default();
                let req = StopRequest {
                    view,
                    invocation: last.as_deref(),
                    state: &state,
                };
                if let Err(f) = hook.stop(&req).await {
                    self.hook_failed(hook.name(), "stop", f);
                }
            }
        }
        self.alloc.update_task(&self.task.name, |s| {
            s.state = task_state::DEAD.into();
            s.failed |= failed;
            s.finished_at = crate::util::now_nanos();
        });
    }

    fn view<'a>(&'a self, a: &'a Allocation, group: &'a crate::jobspec::TaskGroup) -> TaskView<'a> {
        TaskView {
            alloc: a,
            group,
            task: &self.task,
            node: &self.alloc.node,
        }
    }

    /// A hook failed in a phase where the task goes on: an event names it.
    fn hook_failed(&self, hook: &str, phase: &str, f: HookFailure) {
        tracing::warn!(task = %self.task.name, hook, phase, error = %f.message, "task hook failed");
        self.event(TaskEvent::new(
            event_type::HOOK_FAILED,
            format!("{phase} hook {hook:?} failed: {}", f.message),
        ));
    }

    /// The allocation was updated in place: update hooks see the new allocation.
    pub async fn update(&self) {
        let a = self.alloc.snapshot();
        let Some(group) = a.group() else { return };
        let view = self.view(&a, group);
        let last = self.last.lock().unwrap().clone();
        for hook in &self.hooks {
            let req = UpdateRequest {
                view,
                invocation: last.as_deref(),
            };
            if let Err(f) = hook.update(&req).await {
                self.hook_failed(hook.name(), "update", f);
            }
        }
    }

    async fn start_and_wait(
        &self,
        alloc_id: &str,
        first: bool,
        restore: Option<StoredHandle>,
    ) -> RunEnd {
        match self.try_start_and_wait(alloc_id, first, restore).await {
            Ok(end) | Err(end) => end,
        }
    }

    /// One invocation: prestart hooks, validate the driver config, start, wait. Failures
    /// come back as `Err(RunEnd)`.
    async fn try_start_and_wait(
        &self,
        alloc_id: &str,
        first: bool,
        restore: Option<StoredHandle>,
    ) -> Result<RunEnd, RunEnd> {
        if self.kill.is_cancelled() && restore.is_none() {
            return Err(RunEnd::KilledBeforeStart);
        }
        let a = self.alloc.snapshot();
        let group = a.group().cloned().expect("the alloc's group exists");
        let view = self.view(&a, &group);
        let mut inv = Invocation {
            task_id: match &restore {
                Some(h) => h.task_id.clone(),
                None => format!(
                    "{}/{}/{}",
                    alloc_id,
                    self.task.name,
                    &uuid::Uuid::new_v4().simple().to_string()[..8]
                ),
            },
            first,
            ..Default::default()
        };
        if let Some(stored) = restore {
            return self.reattach(alloc_id, view, inv, stored).await;
        }
        self.prestart(view, &mut inv).await?;
        let (Some(driver), Some(env), Some(dirs), Some(logs)) = (
            inv.driver.clone(),
            inv.env.clone(),
            inv.dirs.clone(),
            inv.logs.clone(),
        ) else {
            unreachable!("the built-in prestart hooks set the driver, env, dirs and logs")
        };

        // Failures of validation and of the driver component itself will not go away on a
        // retry: they are unrecoverable, as plain errors are in Nomad.
        let fail = |kind: &str, message: String| {
            RunEnd::Failed(Box::new(Self::failure(kind, message)), false)
        };
        let config = env
            .interpolate_json(&serde_json::Value::Object(self.task.config.clone()))
            .to_string();
        match driver.validate_config(&config).await {
            Ok(()) => {}
            Err(DriverCallError::Driver(
                e @ (DriverError::InvalidConfig(_) | DriverError::NotSupported(_)),
            )) => {
                return Err(fail(
                    event_type::FAILED_VALIDATION,
                    format!(
                        "failed to validate driver config: {}",
                        DriverCallError::Driver(e)
                    ),
                ));
            }
            Err(e) => return Err(fail(event_type::DRIVER_FAILURE, e.to_string())),
        }

        let cfg = TaskConfig {
            id: inv.task_id.clone(),
            name: self.task.name.clone(),
            alloc_id: alloc_id.to_string(),
            job_id: a.job.id.clone(),
            job_name: a.job.name.clone(),
            group_name: group.name.clone(),
            namespace: a.job.namespace.clone(),
            node_id: self.alloc.node.id.clone(),
            node_name: self.alloc.node.name.clone(),
            env: env.sorted_pairs(),
            device_env: inv
                .reservations
                .iter()
                .flat_map(|r| r.env.iter().cloned())
                .collect(),
            user: self.task.user.clone(),
            resources: TaskResources {
                cpu_mhz: self.task.resources.cpu,
                memory_mb: self.task.resources.memory_mb,
                memory_max_mb: self.task.resources.memory_max_mb,
            },
            driver_config: config,
            alloc_dir: dirs.alloc_dir.clone(),
            task_dir: dirs.task_dir.clone(),
            stdout_path: logs.stdout.display().to_string(),
            stderr_path: logs.stderr.display().to_string(),
            logs: LogConfig {
                max_files: self.task.log_config.max_files,
                max_file_size_mb: self.task.log_config.max_file_size_mb,
            },
            kill_signal: self.kill_signal(),
            kill_timeout_ns: self.task.kill_timeout,
            mounts: inv
                .reservations
                .iter()
                .flat_map(|r| r.mounts.iter().cloned())
                .collect(),
            devices: inv
                .reservations
                .iter()
                .flat_map(|r| r.devices.iter().cloned())
                .collect(),
        };

        self.register_driver_events(alloc_id);
        let inv = Arc::new(inv);
        *self.last.lock().unwrap() = Some(inv.clone());
        self.run_invocation(&driver, cfg, env, alloc_id, view, &inv)
            .await
    }

    /// Take back a task that ran when the agent stopped: prestart hooks again (done ones
    /// are skipped, their env re-applied), then the driver's `recover` with the stored
    /// handle, and wait for it as if it had just started, with no new `Started` event. A
    /// task that exited meanwhile reports its real exit at once.
    async fn reattach(
        &self,
        alloc_id: &str,
        view: TaskView<'_>,
        mut inv: Invocation,
        stored: StoredHandle,
    ) -> Result<RunEnd, RunEnd> {
        let failed = |message: String| {
            let mut ev = TaskEvent::new(event_type::FAILED_RESTORING, message.clone());
            ev.driver_error = message;
            RunEnd::Failed(Box::new(ev), true)
        };
        if let Err(e) = self.prestart(view, &mut inv).await {
            tracing::warn!(task = %self.task.name, "prestart hooks failed while reattaching; the task runs on");
            if let RunEnd::Failed(ev, _) = e {
                self.event(*ev);
            }
        }
        let Some(driver) = inv.driver.clone() else {
            self.clear_handle(alloc_id);
            return Err(failed(format!(
                "driver {:?} is not loaded: the task cannot be recovered",
                self.task.driver
            )));
        };
        let handle = match driver.recover(stored.into_handle()).await {
            Ok(h) => h,
            Err(e) => {
                self.clear_handle(alloc_id);
                return Err(failed(format!("failed to recover task: {e}")));
            }
        };
        self.persist_handle(&driver, &handle);
        tracing::info!(task = %self.task.name, task_id = %handle.task_id, "task reattached");
        self.register_driver_events(alloc_id);
        let inv = Arc::new(inv);
        *self.last.lock().unwrap() = Some(inv.clone());
        self.follow(&driver, handle, alloc_id, view, &inv).await
    }

    fn register_driver_events(&self, alloc_id: &str) {
        let alloc = self.alloc.clone();
        let task_name = self.task.name.clone();
        self.drivers.register_event_handler(
            alloc_id,
            &self.task.name,
            Arc::new(move |ev| {
                let mut te = TaskEvent::new(event_type::DRIVER, ev.message.clone());
                te.driver_message = ev.message;
                te.details = ev.details.into_iter().collect();
                alloc.event(&task_name, te);
            }),
        );
    }

    /// Prestart hooks in order. A persistent (WASM) hook that said it is done is skipped,
    /// but its stored env still applies; its answer is stored only when it changed. The
    /// env is rebuilt after every hook, so each sees what the ones before it set.
    async fn prestart(&self, view: TaskView<'_>, inv: &mut Invocation) -> Result<(), RunEnd> {
        let emit = |ev: TaskEvent| self.event(ev);
        for hook in &self.hooks {
            let name = hook.name();
            let previous = if hook.persistent() {
                self.hook_state(name).unwrap_or_default()
            } else {
                HookState::default()
            };
            if previous.prestart_done {
                continue;
            }
            let hook_env = self.hook_env();
            let req = PrestartRequest {
                view,
                previous: &previous,
                hook_env: &hook_env,
                emit: &emit,
            };
            let resp = hook.prestart(&req, inv).await.map_err(|f| {
                RunEnd::Failed(Box::new(Self::failure(f.kind, f.message)), f.recoverable)
            })?;
            if hook.persistent() {
                self.set_hook_state(
                    name,
                    HookState {
                        prestart_done: resp.done,
                        data: resp.state,
                        env: resp.env,
                    },
                );
                inv.env = hooks::env::build(view, inv, &self.hook_env());
            }
        }
        Ok(())
    }

    /// Start one invocation and wait for it: the handle is persisted before `Started`.
    async fn run_invocation(
        &self,
        driver: &Driver,
        cfg: TaskConfig,
        env: crate::taskenv::TaskEnv,
        alloc_id: &str,
        view: TaskView<'_>,
        inv: &Invocation,
    ) -> Result<RunEnd, RunEnd> {
        let task_id = cfg.id.clone();
        // Drivers reach the task's files through the paths in the task config and the
        // host's process capability, not preopens: their stores stay reusable.
        let ctx = Arc::new(TaskContext {
            env,
            reservations: inv.reservations.clone(),
            dirs: None,
        });
        let handle = tokio::select! {
            r = driver.start(cfg, Some(ctx)) => r,
            _ = self.kill.cancelled() => return Err(RunEnd::KilledBeforeStart),
        };
        let handle = handle.map_err(|e| {
            let recoverable = e.recoverable();
            RunEnd::Failed(
                Box::new(Self::failure(
                    event_type::DRIVER_FAILURE,
                    format!("failed to start task: {e}"),
                )),
                recoverable,
            )
        })?;

        // Persist the handle before announcing the start: after an agent crash the task
        // can be recovered only if its handle was stored.
        self.persist_handle(driver, &handle);
        // The state and its event in one write: a crash cannot leave a running task
        // without its `Started` event.
        let started = TaskEvent::new(event_type::STARTED, "Task started by client")
            .detail("task_id", &task_id);
        tracing::info!(alloc_id = %alloc_id, task = %self.task.name, event = %started.event_type, message = %started.message, "task event");
        self.alloc.update_task(&self.task.name, |s| {
            s.state = task_state::RUNNING.into();
            s.started_at = crate::util::now_nanos();
            s.push_event(started);
        });
        for hook in &self.hooks {
            let req = PoststartRequest {
                view,
                invocation: inv,
            };
            if let Err(f) = hook.poststart(&req).await {
                self.hook_failed(hook.name(), "poststart", f);
            }
        }
        self.follow(driver, handle, alloc_id, view, inv).await
    }

    /// Wait for a started (or reattached) invocation to exit: `Terminated`, exited hooks,
    /// and the handle cleared.
    async fn follow(
        &self,
        driver: &Driver,
        handle: TaskHandle,
        alloc_id: &str,
        view: TaskView<'_>,
        inv: &Invocation,
    ) -> Result<RunEnd, RunEnd> {
        let (exit, killed) = match self.wait_exit(driver, handle.clone(), view).await {
            Ok(r) => r,
            Err(e) => {
                // The driver cannot tell us about the task any more: release what it holds.
                let _ = driver.destroy(handle, true).await;
                self.clear_handle(alloc_id);
                return Err(RunEnd::Failed(
                    Box::new(Self::failure(
                        event_type::DRIVER_FAILURE,
                        format!("failed to wait for task: {e}"),
                    )),
                    true,
                ));
            }
        };
        let success = exit.exit_code == 0 && exit.signal == 0 && exit.err.is_none();
        let mut ev = TaskEvent::new(
            event_type::TERMINATED,
            match &exit.err {
                Some(err) => format!("Exit Code: {}, Exit Message: {err:?}", exit.exit_code),
                None => format!("Exit Code: {}", exit.exit_code),
            },
        )
        .detail("exit_code", exit.exit_code.to_string())
        .detail("signal", exit.signal.to_string())
        .detail("oom_killed", exit.oom_killed.to_string());
        ev.exit_code = exit.exit_code;
        ev.signal = exit.signal;
        self.event(ev);
        for hook in &self.hooks {
            let req = ExitedRequest {
                view,
                invocation: inv,
                exit: &exit,
            };
            if let Err(f) = hook.exited(&req).await {
                self.hook_failed(hook.name(), "exited", f);
            }
        }
        if killed {
            self.event(TaskEvent::new(
                event_type::KILLED,
                "Task successfully killed",
            ));
        }
        self.clear_handle(alloc_id);
        Ok(RunEnd::Exited { success, killed })
    }

    fn kill_signal(&self) -> String {
        if self.task.kill_signal.is_empty() {
            "SIGINT".into()
        } else {
            self.task.kill_signal.clone()
        }
    }
}
