//! One invocation of the task: built with everything known up front (its id, driver,
//! directories, log paths and env builder), through the prestart hooks, then started (or,
//! after an agent restart, reattached through the driver's `recover`) and followed to its
//! exit.

use std::sync::Arc;

use super::interfaces::{Invocation, LogPaths, TaskView};
use super::{RunEnd, TaskRunner};
use crate::drivermanager::types::{DriverError, TaskConfig, TaskHandle};
use crate::drivermanager::{Driver, DriverCallError};
use crate::runtime::{TaskContext, TaskPaths};
use crate::state::StoredHandle;
use crate::structs::{TaskEvent, TaskEventType, TaskRunState};
use crate::taskenv::{EnvBuilder, EnvRequest};

impl TaskRunner {
    pub(super) async fn start_and_wait(
        &self,
        first: bool,
        restore: Option<StoredHandle>,
    ) -> RunEnd {
        match self.try_start_and_wait(first, restore).await {
            Ok(end) | Err(end) => end,
        }
    }

    /// A new invocation of the task: a fresh task id (or the restored one), its paths,
    /// and an env builder with the env persistent hooks set on earlier runs.
    fn invocation(&self, view: TaskView<'_>, first: bool, task_id: Option<String>) -> Invocation {
        let dirs = self.alloc_dir.task_dirs(&self.task.name);
        let logs_dir = self.alloc_dir.logs();
        let mut env = EnvBuilder::new(EnvRequest {
            job: &view.alloc.job,
            group: view.group,
            task: view.task,
            alloc_id: &view.alloc.id,
            alloc_index: view.alloc.index,
            dirs: &dirs,
            node: view.node,
            ports: &view.alloc.allocated_resources.shared.ports,
            cpu: view
                .alloc
                .allocated_resources
                .tasks
                .get(&view.task.name)
                .map(|t| &t.cpu),
        });
        env.set_hook_env(self.hook_env());
        Invocation {
            task_id: task_id.unwrap_or_else(|| {
                format!(
                    "{}/{}/{}",
                    self.alloc_id,
                    self.task.name,
                    &uuid::Uuid::new_v4().simple().to_string()[..8]
                )
            }),
            first,
            driver: self.drivers.driver(&self.task.driver),
            logs: LogPaths {
                stdout: logs_dir.join(format!("{}.stdout", self.task.name)),
                stderr: logs_dir.join(format!("{}.stderr", self.task.name)),
            },
            dirs,
            env,
            reservations: Vec::new(),
        }
    }

    /// One invocation: prestart hooks, validate the driver config, start, wait. Failures
    /// come back as `Err(RunEnd)`.
    async fn try_start_and_wait(
        &self,
        first: bool,
        restore: Option<StoredHandle>,
    ) -> Result<RunEnd, RunEnd> {
        if self.kill.is_cancelled() && restore.is_none() {
            return Err(RunEnd::KilledBeforeStart);
        }
        // Held for the invocation's life (hooks see it): without the task states, which
        // the hooks do not read and which grow with every event.
        let a = self.handler.allocation_for_hooks();
        let group = a.group().expect("the alloc's group exists");
        let view = self.view(&a, group);
        let mut inv = self.invocation(view, first, restore.as_ref().map(|h| h.task_id.clone()));
        if let Some(stored) = restore {
            return self.reattach(view, inv, stored).await;
        }
        self.wait_until_writable().await?;
        // The phases before and after the wait run boxed: their futures are large and
        // short-lived, and inline they would size the future every task holds for its life.
        Box::pin(self.prestart(view, &mut inv)).await?;

        // A config the driver refuses and a component that traps will not change on a
        // retry: unrecoverable, as plain errors are in Nomad. A missed deadline is the agent
        // being busy, not the task being wrong: recoverable, the restart policy applies.
        let fail = |kind: TaskEventType, message: String| {
            RunEnd::Failed(Box::new(Self::failure(kind, message)), false)
        };
        let env = inv.env.build();
        let config = env
            .interpolate_json(&serde_json::Value::Object(self.task.config.clone()))
            .to_string();
        match Box::pin(inv.driver.validate_config(&config)).await {
            Ok(()) => {}
            Err(
                e @ DriverCallError::Driver(
                    DriverError::InvalidConfig(_) | DriverError::NotSupported(_),
                ),
            ) => {
                return Err(fail(
                    TaskEventType::FailedValidation,
                    format!("failed to validate driver config: {e}"),
                ));
            }
            Err(e) => {
                let recoverable = e.recoverable();
                return Err(RunEnd::Failed(
                    Box::new(Self::failure(TaskEventType::DriverFailure, e.to_string())),
                    recoverable,
                ));
            }
        }

        // The task's host volumes, as the node has them now (a reload may have taken one).
        let volumes = crate::volumes::mounts(
            view.group,
            view.task,
            &view.node.host_volumes,
            view.alloc.index,
        )
        .map_err(|m| {
            fail(
                TaskEventType::SetupFailure,
                format!("failed to mount host volumes: {m}"),
            )
        })?;
        let mut cfg = self.task_config(view, &inv, &env, config);
        cfg.mounts.extend(volumes.iter().cloned());
        // What the host binds and makes for an isolated process: the volumes, and what the
        // reservations hold inside their plugins' grants.
        let binds: Vec<_> = volumes
            .into_iter()
            .chain(
                inv.reservations
                    .iter()
                    .flat_map(|r| r.granted_mounts().cloned()),
            )
            .collect();
        let nodes: Vec<_> = inv
            .reservations
            .iter()
            .flat_map(|r| r.granted_devices().cloned())
            .collect();
        self.register_driver_events();
        let ctx = Arc::new(TaskContext {
            env,
            reservations: inv.reservations.clone(),
            // Drivers reach the task's files through the paths in the task config and the
            // host's process capability, not preopens: their stores stay reusable.
            files: None,
            // Drivers do not import `variables`.
            workload: None,
            // Where the task's processes run and write: checked on every `process` call.
            paths: Some(TaskPaths {
                alloc_root: inv.dirs.alloc_root().display().to_string(),
                task_dir: inv.dirs.task_dir.clone(),
                alloc_dir: inv.dirs.alloc_dir.clone(),
                stdout: inv.logs.stdout.display().to_string(),
                stderr: inv.logs.stderr.display().to_string(),
                // What the host binds into an isolated process of the task: its volumes
                // and its reservations' mounts and device nodes.
                mounts: binds,
                devices: nodes,
            }),
            // Drivers do not import `artifacts`.
            artifacts: Vec::new(),
        });
        let inv = Arc::new(inv);
        *self.last.lock().unwrap() = Some(inv.clone());
        self.run_invocation(cfg, ctx, view, &inv).await
    }

    /// Nothing is started that the state DB could not record (the task's process, its
    /// handle): while it cannot write (a full or failing disk, retried by the agent), a
    /// start waits for it instead of failing, which would count against the task's restart
    /// policy and fail the allocation for a disk's sake. A kill ends the wait.
    async fn wait_until_writable(&self) -> Result<(), RunEnd> {
        let mut told = false;
        while let Some(reason) = self.db.unwritable() {
            if !told {
                tracing::info!(alloc_id = %self.alloc_id, task = %self.task.name, reason, "the state DB cannot write: the task's start waits until it can");
                told = true;
            }
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
                _ = self.kill.cancelled() => return Err(RunEnd::KilledBeforeStart),
            }
        }
        Ok(())
    }

    /// Take back a task that ran when the agent stopped: prestart hooks again (done ones
    /// are skipped, their env re-applied), then the driver's `recover` with the stored
    /// handle, and wait for it as if it had just started, with no new `Started` event. A
    /// task that exited meanwhile reports its real exit at once.
    async fn reattach(
        &self,
        view: TaskView<'_>,
        mut inv: Invocation,
        stored: StoredHandle,
    ) -> Result<RunEnd, RunEnd> {
        let failed = |message: String| {
            let mut ev = TaskEvent::new(TaskEventType::FailedRestoring, message.clone());
            ev.driver_error = message;
            RunEnd::Failed(Box::new(ev), true)
        };
        if let Err(e) = Box::pin(self.prestart(view, &mut inv)).await {
            tracing::warn!(task = %self.task.name, "prestart hooks failed while reattaching; the task runs on");
            if let RunEnd::Failed(ev, _) = e {
                self.event(*ev);
            }
        }
        if !inv.driver.is_loaded() {
            self.clear_handle();
            return Err(failed(format!(
                "driver {:?} is not loaded: the task cannot be recovered",
                self.task.driver
            )));
        }
        let driver = inv.driver.clone();
        let current = driver.current_sha256().unwrap_or_default();
        let gone = (!stored.driver_sha256.is_empty() && stored.driver_sha256 != current)
            .then(|| stored.driver_sha256.clone());
        if let Some(gone) = &gone {
            let message = format!(
                "driver {:?} version {} that started this task is no longer loaded; its handle (format {}) is offered to version {}",
                self.task.driver,
                short(gone),
                stored.version,
                short(&current)
            );
            tracing::info!(task = %self.task.name, "{message}");
            let mut ev = TaskEvent::new(TaskEventType::Driver, message.clone())
                .detail("previous_sha256", gone)
                .detail("sha256", &current);
            ev.driver_message = message;
            self.event(ev);
        }
        let format = stored.version;
        let started_at = self
            .handler
            .task_state(&self.task.name)
            .map(|s| s.started_at)
            .unwrap_or_default();
        let handle = match Box::pin(driver.recover(stored.into())).await {
            Ok(h) => h,
            // No loaded version can read the handle: the task may still run, but nothing
            // can reach it. It is reported lost with what was last known, and not started
            // again (a second copy could run beside the first).
            Err(DriverCallError::Driver(DriverError::NotSupported(why))) => {
                self.clear_handle();
                let message = format!(
                    "task lost: no loaded version of driver {:?} can read its handle (format {format}): {why}; last known state: running since {}",
                    self.task.driver,
                    crate::util::rfc3339(
                        std::time::UNIX_EPOCH + std::time::Duration::from_nanos(started_at)
                    )
                );
                tracing::error!(task = %self.task.name, "{message}");
                let mut ev = TaskEvent::new(TaskEventType::FailedRestoring, message.clone())
                    .detail("lost", "true");
                if let Some(g) = &gone {
                    ev = ev.detail("previous_sha256", g);
                }
                ev.driver_error = message;
                return Err(RunEnd::Failed(Box::new(ev), false));
            }
            Err(e) => {
                self.clear_handle();
                return Err(failed(format!("failed to recover task: {e}")));
            }
        };
        tracing::info!(task = %self.task.name, task_id = %handle.task_id, "task reattached");
        self.mark_started_if_unrecorded(&handle.task_id);
        self.register_driver_events();
        let inv = Arc::new(inv);
        *self.last.lock().unwrap() = Some(inv.clone());
        let binding = self.bind_or_fail(&driver, handle)?;
        self.follow(binding, view, &inv).await
    }

    /// The handle is stored before the task's `running` state, which is written after it
    /// (and seen by the API before it is durable): a crash between the two leaves a handle
    /// whose task the state DB still calls pending. The task did start, so reattaching
    /// records what the crash cut off instead of leaving the task pending for its life.
    fn mark_started_if_unrecorded(&self, task_id: &str) {
        let recorded = self
            .handler
            .task_state(&self.task.name)
            .is_some_and(|s| s.state == TaskRunState::Running);
        if !recorded {
            tracing::info!(alloc_id = %self.alloc_id, task = %self.task.name, "a reattached task's start was not recorded before the agent stopped; recording it now");
            self.record_started(task_id, true);
        }
    }

    /// The state and its `Started` event in one write: a crash cannot leave a running task
    /// without its event. At a reattach the first start time is kept when it was stored.
    fn record_started(&self, task_id: &str, at_reattach: bool) {
        let mut started = TaskEvent::new(TaskEventType::Started, "Task started by client")
            .detail("task_id", task_id);
        if at_reattach {
            started = started.detail("recorded_at_reattach", "true");
        }
        tracing::info!(alloc_id = %self.alloc_id, task = %self.task.name, event = %started.event_type, message = %started.message, "task event");
        let mut started = Some(started);
        self.handler.update_task(&self.task.name, &mut |s| {
            s.state = TaskRunState::Running;
            if !at_reattach || s.started_at == 0 {
                s.started_at = crate::util::now_nanos();
            }
            if let Some(ev) = started.take() {
                s.push_event(ev);
            }
        });
    }

    /// Driver events about this task become its "Driver" events.
    fn register_driver_events(&self) {
        let handler = self.handler.clone();
        let task_name = self.task.name.clone();
        let secrets = self.secret_values.clone();
        self.drivers.register_event_handler(
            &self.alloc_id,
            &self.task.name,
            &self.task.driver,
            Arc::new(move |ev| {
                let mut te = TaskEvent::new(TaskEventType::Driver, ev.message.clone());
                te.driver_message = ev.message;
                te.details = ev.details.into_iter().collect();
                handler.event(&task_name, super::redact(&secrets, te));
            }),
        );
    }

    /// Start one invocation and wait for it: the handle is persisted before `Started`.
    async fn run_invocation(
        &self,
        cfg: TaskConfig,
        ctx: Arc<TaskContext>,
        view: TaskView<'_>,
        inv: &Invocation,
    ) -> Result<RunEnd, RunEnd> {
        let task_id = cfg.id.clone();
        let driver = &inv.driver;
        let processes = self.drivers.services().processes.clone();
        let refused = processes.records_refused();
        let mut start = Box::pin(driver.start(cfg, Some(ctx)));
        let handle = tokio::select! {
            r = &mut start => r,
            _ = self.kill.cancelled() => {
                // Killed while starting: the driver may have made the task already (a
                // process spawned), so the start is let end and what it made is released;
                // dropped halfway, its task would run on with nothing tracking it.
                if let Ok(h) = start.await {
                    let _ = Box::pin(driver.destroy(h, true)).await;
                }
                return Err(RunEnd::KilledBeforeStart);
            }
        };
        let handle = handle.map_err(|e| {
            // A process the driver spawned that the state DB refused to record was killed:
            // the disk failed, not the task (the driver cannot tell them apart).
            if processes.records_refused() != refused {
                tracing::warn!(alloc_id = %self.alloc_id, task = %self.task.name, error = %e, "the state DB refused to record the task's process: starting it again once it writes");
                return RunEnd::NotRecorded(Box::new(Self::failure(
                    TaskEventType::DriverFailure,
                    format!("failed to start task: {e}; started again once the state DB writes"),
                )));
            }
            let recoverable = e.recoverable();
            RunEnd::Failed(
                Box::new(Self::failure(
                    TaskEventType::DriverFailure,
                    format!("failed to start task: {e}"),
                )),
                recoverable,
            )
        })?;

        // Bind the task (which persists its handle) before announcing the start: after an
        // agent crash the task can be recovered only if its handle was stored.
        let binding = self.bind_or_fail(driver, handle)?;
        self.record_started(&task_id, false);
        Box::pin(self.poststart(view, inv)).await;
        self.follow(binding, view, inv).await
    }

    /// Bind a started (or reattached) task to the driver version that made `handle`,
    /// persisting the handle; a driver no longer loaded is a recoverable failure.
    fn bind_or_fail(
        &self,
        driver: &Driver,
        handle: TaskHandle,
    ) -> Result<Arc<crate::drivermanager::TaskBinding>, RunEnd> {
        self.bind(driver, handle).ok_or_else(|| {
            RunEnd::Failed(
                Box::new(Self::failure(
                    TaskEventType::DriverFailure,
                    format!("driver {:?} is no longer loaded", self.task.driver),
                )),
                true,
            )
        })
    }

    /// Wait for a started (or reattached) invocation, bound to its driver version, to
    /// exit: `Terminated`, exited hooks, and the handle cleared.
    async fn follow(
        &self,
        binding: Arc<crate::drivermanager::TaskBinding>,
        view: TaskView<'_>,
        inv: &Invocation,
    ) -> Result<RunEnd, RunEnd> {
        let waited = self.wait_exit(&binding, view).await;
        *self.binding.lock().unwrap() = None;
        let (exit, killed) = match waited {
            Ok(r) => r,
            Err(e) => {
                // The driver cannot tell us about the task any more: release what it holds.
                let _ = Box::pin(
                    binding.call(|d, h| async move { Ok((d.destroy(h, true).await?, None)) }),
                )
                .await;
                self.clear_handle();
                return Err(RunEnd::Failed(
                    Box::new(Self::failure(
                        TaskEventType::DriverFailure,
                        format!("failed to wait for task: {e}"),
                    )),
                    true,
                ));
            }
        };
        let mut ev = TaskEvent::new(
            TaskEventType::Terminated,
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
        Box::pin(self.exited(view, inv, &exit)).await;
        if killed {
            self.event(TaskEvent::new(
                TaskEventType::Killed,
                "Task successfully killed",
            ));
        }
        self.clear_handle();
        Ok(RunEnd::Exited {
            success: exit.successful(),
            killed,
        })
    }
}

/// The first 12 characters of a sha256, for messages.
fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}
