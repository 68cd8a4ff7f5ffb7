//! The alloc runner: one allocation (an instance of a task group) and its task runners.
//!
//! It owns the allocation record ([`AllocShared`], `shared.rs`); task runners report
//! through it as their `TaskStateHandler`, and it keeps the client status derived
//! (failed > running > pending > complete), persists every change and wakes anyone waiting
//! for one. `lifecycle.rs` runs the tasks in Nomad's lifecycle order. `destroy` before
//! `run` returns at once and removes the allocation's state.

mod lifecycle;
mod shared;

pub use shared::AllocShared;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::allocdir::AllocDir;
use crate::changes::Changes;
use crate::state::StateDb;
use crate::structs::{Allocation, DesiredStatus, TaskEvent, TaskEventType, TaskRunState};
use crate::taskenv::NodeInfo;
use crate::taskrunner::TaskRunner;
use crate::taskrunner::interfaces::{Plugins, TaskRunnerConfig};

/// What every alloc runner is given (Nomad's alloc runner `Config`).
#[derive(Clone)]
pub struct AllocRunnerConfig {
    /// The state DB.
    pub db: Arc<dyn StateDb>,
    /// The agent's change index and event stream.
    pub changes: Arc<Changes>,
    /// Where allocation directories go (`<data_dir>/alloc`).
    pub alloc_root: std::path::PathBuf,
    /// The node, for the env builder (one copy shared by every task placed with it).
    pub node: Arc<NodeInfo>,
    /// Plugin managers.
    pub plugins: Plugins,
    /// Told (allocation id, live) when an allocation's client status turns terminal or
    /// back, so the agent's account of what live allocations hold stays current.
    pub on_live: Arc<dyn Fn(&str, bool) + Send + Sync>,
    /// Told each change of an allocation (under its lock: it must not reach back into
    /// the allocation), so its service registrations follow its state.
    pub on_change: Arc<dyn Fn(&crate::structs::Allocation) + Send + Sync>,
}

/// Runs one allocation.
pub struct AllocRunner {
    shared: Arc<AllocShared>,
    dir: AllocDir,
    tasks: Vec<Arc<TaskRunner>>,
    kill: CancellationToken,
    started: std::sync::atomic::AtomicBool,
    done: tokio::sync::watch::Sender<bool>,
}

/// Runners of newly placed allocations whose write is on its way to the state DB.
pub struct Placed {
    /// Not to be run before [`Placed::wait`] succeeds.
    pub runners: Vec<Arc<AllocRunner>>,
    durable: crate::state::Durable,
}

impl Placed {
    /// Wait until the allocations are durable, then announce them; returns the runners,
    /// ready to run.
    pub fn wait(self) -> Result<Vec<Arc<AllocRunner>>, crate::state::StateError> {
        self.durable.wait()?;
        for r in &self.runners {
            r.shared.announce_placed();
        }
        Ok(self.runners)
    }
}

impl AllocRunner {
    /// A runner for a newly placed `alloc`; persists it and emits `Received` for each task.
    pub fn new(alloc: Allocation, config: &AllocRunnerConfig) -> Arc<Self> {
        Self::build(alloc, config, true)
    }

    /// Runners for newly placed `allocs`, each task with its `Received` event, all stored in
    /// one transaction: a registration's thousands of allocations cost one durable write
    /// instead of two per task. The write is queued, not waited for: [`Placed::wait`] says
    /// when it is durable, and only then are the runners announced and may run.
    pub fn place_all(
        allocs: Vec<Allocation>,
        config: &AllocRunnerConfig,
    ) -> Result<Placed, crate::state::StateError> {
        let mut allocs = allocs;
        for a in &mut allocs {
            let tasks: Vec<String> = a
                .group()
                .map(|g| g.tasks.iter().map(|t| t.name.clone()).collect())
                .unwrap_or_default();
            for t in tasks {
                let ev = TaskEvent::new(TaskEventType::Received, "Task received by client");
                tracing::info!(alloc_id = %a.id, task = %t, event = %ev.event_type, message = %ev.message, "task event");
                a.task_states.entry(t).or_default().push_event(ev);
            }
        }
        let durable = config.db.queue_placed(&allocs)?;
        let runners = allocs
            .into_iter()
            .map(|a| Self::build(a, config, false))
            .collect();
        Ok(Placed { runners, durable })
    }

    /// A runner for an allocation restored from the state DB (with its task states): its
    /// tasks' runners reattach to what still runs and leave finished tasks as they are.
    pub fn restore(alloc: Allocation, config: &AllocRunnerConfig) -> Arc<Self> {
        Self::build(alloc, config, false)
    }

    fn build(alloc: Allocation, config: &AllocRunnerConfig, fresh: bool) -> Arc<Self> {
        let dir = AllocDir::new(&config.alloc_root, &alloc.id);
        let group = alloc
            .group()
            .cloned()
            .expect("allocations are built from one of their job's groups");
        let shared = Arc::new(AllocShared::new(
            alloc,
            config.db.clone(),
            config.changes.clone(),
            config.on_live.clone(),
            config.on_change.clone(),
        ));
        if fresh {
            shared.placed();
        }
        let tasks = group
            .tasks
            .iter()
            .map(|t| {
                TaskRunner::new(TaskRunnerConfig {
                    alloc_id: shared.id().to_string(),
                    task: t.clone(),
                    handler: shared.clone(),
                    db: config.db.clone(),
                    alloc_dir: dir.clone(),
                    node: config.node.clone(),
                    plugins: config.plugins.clone(),
                    kill: CancellationToken::new(),
                })
            })
            .collect::<Vec<_>>();
        if fresh {
            for t in &group.tasks {
                shared.event(
                    &t.name,
                    TaskEvent::new(TaskEventType::Received, "Task received by client"),
                );
            }
        }
        Arc::new(Self {
            shared,
            dir,
            tasks,
            kill: CancellationToken::new(),
            started: std::sync::atomic::AtomicBool::new(false),
            done: tokio::sync::watch::channel(false).0,
        })
    }

    /// The allocation record.
    pub fn shared(&self) -> &Arc<AllocShared> {
        &self.shared
    }

    /// Run every task to completion in lifecycle order (see [`lifecycle`]). Returns at once
    /// when the allocation was stopped before it ran.
    pub async fn run(self: Arc<Self>) {
        if self.started.swap(true, std::sync::atomic::Ordering::SeqCst) {
            self.done.send_replace(true);
            return;
        }
        if self.kill.is_cancelled() {
            self.killed_before_start();
            // A restored task that was running goes on below: its runner reattaches, sees
            // the kill and stops it (left alone, its process would run on untracked).
            if self.all_tasks_dead() {
                self.done.send_replace(true);
                return;
            }
        }
        if let Err(e) = self.dir.build() {
            for t in &self.tasks {
                let mut ev = TaskEvent::new(
                    TaskEventType::SetupFailure,
                    format!("failed to build alloc dir: {e}"),
                );
                ev.fails_task = true;
                ev.setup_error = e.to_string();
                self.shared.event(t.name(), ev);
                self.shared
                    .update_task(t.name(), |s| s.state = TaskRunState::Dead);
            }
            self.done.send_replace(true);
            return;
        }
        self.run_lifecycle().await;
        self.done.send_replace(true);
    }

    /// Stopped before it ran (a user's `alloc stop`, a new version of its job): the tasks
    /// that never started end here, dead, so the allocation is terminal and what waits for
    /// that (its replacement, the job's status) goes on. A task that was running (a
    /// restored one) is left to its runner.
    fn killed_before_start(&self) {
        for t in &self.tasks {
            let never_started = self.shared.peek(|a| {
                a.task_states
                    .get(t.name())
                    .is_none_or(|s| s.state == TaskRunState::Pending)
            });
            if !never_started {
                continue;
            }
            self.shared.event(
                t.name(),
                TaskEvent::new(TaskEventType::Killed, "Task killed before it started"),
            );
            self.shared.update_task(t.name(), |s| {
                s.state = TaskRunState::Dead;
                s.finished_at = crate::util::now_nanos();
            });
        }
    }

    fn all_tasks_dead(&self) -> bool {
        self.shared.peek(|a| {
            self.tasks.iter().all(|t| {
                a.task_states
                    .get(t.name())
                    .is_some_and(|s| s.state == TaskRunState::Dead)
            })
        })
    }

    /// Update the allocation in place to a new version of its job (one whose group and
    /// tasks did not change, see [`crate::agent`]): the tasks keep running and each task
    /// runner's update hooks see the new allocation.
    pub fn update(&self, job: crate::jobspec::Job, eval_id: &str) {
        self.shared.update_job(job, eval_id);
        for t in &self.tasks {
            let t = t.clone();
            tokio::spawn(async move { t.update().await });
        }
    }

    /// After a state DB outage: write again what of this allocation a refused write left
    /// older in the state file (its record and task states, its tasks' local states with
    /// their handles). `Ok(true)` when something was written.
    pub fn resync(&self) -> Result<bool, crate::state::StateError> {
        let mut wrote = self.shared.resync()?;
        if self.shared.gone() {
            return Ok(wrote);
        }
        for t in &self.tasks {
            wrote |= t.resync_local()?;
        }
        Ok(wrote)
    }

    /// The task runners.
    pub fn tasks(&self) -> &[Arc<TaskRunner>] {
        &self.tasks
    }

    /// Ask every task to stop; returns at once.
    pub fn stop(&self, reason: &str) {
        self.shared.set_desired(DesiredStatus::Stop, reason);
        self.kill.cancel();
    }

    /// Wait until `run` has finished (or was never going to run).
    pub async fn wait(&self) {
        let mut rx = self.done.subscribe();
        if !self.started.load(std::sync::atomic::Ordering::SeqCst) && self.kill.is_cancelled() {
            return;
        }
        let _ = rx.wait_for(|d| *d).await;
    }

    /// The client's garbage collection of an ended allocation: wait for `run` to finish,
    /// remove the directory and the local state, and hand back the final record (kept, as
    /// a Nomad server keeps it after its client collected the allocation). `None`, and
    /// nothing removed, while a refused state write is still to be made again.
    pub async fn retire(&self) -> Option<crate::structs::Allocation> {
        if self.started.load(std::sync::atomic::Ordering::SeqCst) {
            self.wait().await;
        }
        let record = self.shared.retire()?;
        if let Err(e) = self.dir.destroy() {
            tracing::warn!(alloc_id = %self.shared.id(), error = %e, "removing allocation dir failed");
        }
        Some(record)
    }

    /// Stop, wait for the tasks, then remove the allocation's state and directory.
    /// Before `run` was ever called this returns at once. A removal of its state the state
    /// DB refuses is the error, the directory kept: the allocation is still there.
    pub async fn destroy(&self) -> Result<(), crate::state::StateError> {
        self.stop("alloc destroyed");
        if self.started.load(std::sync::atomic::Ordering::SeqCst) {
            self.wait().await;
        }
        self.shared.forget()?;
        if let Err(e) = self.dir.destroy() {
            tracing::warn!(alloc_id = %self.shared.id(), error = %e, "removing allocation dir failed");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structs::ClientStatus;

    #[tokio::test]
    async fn an_allocation_stopped_before_it_ran_ends_terminal_with_its_tasks_killed() {
        let dir = tempfile::tempdir().unwrap();
        let live = Arc::new(std::sync::Mutex::new(Vec::new()));
        let told = live.clone();
        let config = AllocRunnerConfig {
            db: Arc::new(crate::state::MemState::new()),
            changes: Arc::new(Changes::new(16)),
            alloc_root: dir.path().to_path_buf(),
            node: Default::default(),
            plugins: crate::taskrunner::tests::plugins().await,
            on_live: Arc::new(move |id: &str, up: bool| {
                told.lock().unwrap().push((id.to_string(), up));
            }),
            on_change: Arc::new(|_: &crate::structs::Allocation| {}),
        };
        let a = crate::taskrunner::tests::allocation(
            serde_json::json!({"Name": "t", "Driver": "mock", "Config": {"run_for": "1h"}}),
        );
        let r = AllocRunner::new(a, &config);
        r.stop("alloc stopped by user");
        r.clone().run().await;
        let (status, state) = r
            .shared()
            .peek(|a| (a.client_status, a.task_states["t"].clone()));
        assert_eq!(status, ClientStatus::Complete);
        assert_eq!(state.state, TaskRunState::Dead);
        assert!(
            state
                .events
                .iter()
                .any(|e| e.event_type == TaskEventType::Killed),
            "{:?}",
            state.events
        );
        assert!(live.lock().unwrap().iter().any(|(_, up)| !up));
        // A second run does nothing.
        r.clone().run().await;
    }

    /// Writes a full disk refused are written again once the state DB writes: the state
    /// file then holds the allocation as it is (a stop, a task's state), not as it was
    /// before the outage, which a crash would bring back.
    #[test]
    fn allocation_state_refused_in_an_outage_is_written_again_when_the_disk_is_back() {
        use crate::state::{CommitOptions, FaultyBackend, KvState, MemBackend};
        use crate::structs::DesiredStatus;

        let db = Arc::new(KvState::with_backend(
            FaultyBackend::new(MemBackend::default()),
            CommitOptions::default(),
        ));
        let stored = |db: &KvState<FaultyBackend<MemBackend>>| {
            let mut a = db.allocs().unwrap();
            assert_eq!(a.len(), 1);
            a.remove(0)
        };
        let a = crate::taskrunner::tests::allocation(
            serde_json::json!({"Name": "t", "Driver": "mock", "Config": {"run_for": "1h"}}),
        );
        let shared = AllocShared::new(
            a,
            db.clone(),
            Arc::new(Changes::new(16)),
            Arc::new(|_: &str, _: bool| {}),
            Arc::new(|_: &crate::structs::Allocation| {}),
        );
        shared.placed();
        assert!(!shared.unsynced());
        assert!(!shared.resync().unwrap(), "nothing to write");

        db.backend().io.set_disk_full(true);
        shared.set_desired(DesiredStatus::Stop, "job stopped");
        shared.update_task("t", |s| s.state = TaskRunState::Dead);
        assert!(shared.unsynced());
        assert_eq!(stored(&db).desired_status, DesiredStatus::Run);
        // Still refused: kept to be written again.
        assert!(shared.resync().is_err());
        assert!(shared.unsynced());

        db.backend().io.set_disk_full(false);
        let t = std::time::Instant::now();
        while db.unwritable().is_some() {
            assert!(t.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(shared.resync().unwrap());
        assert!(!shared.unsynced());
        let a = stored(&db);
        assert_eq!(a.desired_status, DesiredStatus::Stop);
        assert_eq!(a.desired_description, "job stopped");
        assert_eq!(a.task_states["t"].state, TaskRunState::Dead);

        // A removal the disk refuses leaves the allocation as it was (not gone from memory
        // while its record stays in the file, to come back after a restart).
        let wait_writable = || {
            while db.unwritable().is_some() {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        };
        db.backend().io.set_disk_full(true);
        assert!(shared.forget().is_err());
        db.backend().io.set_disk_full(false);
        wait_writable();
        assert_eq!(stored(&db).id, shared.id());

        // Once its state is removed, nothing of it is written again.
        db.backend().io.set_disk_full(true);
        shared.update_task("t", |s| s.restarts += 1);
        db.backend().io.set_disk_full(false);
        wait_writable();
        shared.forget().unwrap();
        assert!(!shared.resync().unwrap());
        assert!(db.allocs().unwrap().is_empty());
    }
}
