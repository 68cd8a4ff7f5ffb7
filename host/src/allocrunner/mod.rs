//! The alloc runner: one allocation (an instance of a task group) and its task runners.
//!
//! It owns the allocation record; task runners report through [`AllocShared::update_task`],
//! which keeps the client status derived (failed > running > pending > complete), persists
//! the task state and wakes anyone waiting for a change. `destroy` before `run` returns at
//! once and removes the allocation's state.

pub mod allocdir;
mod lifecycle;

pub use allocdir::AllocDir;

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::devicemanager::DeviceManager;
use crate::drivermanager::DriverManager;
use crate::state::StateDb;
use crate::structs::{Allocation, TaskEvent, TaskState, derive_client_status, event_type};
use crate::taskenv::NodeInfo;
use crate::taskrunner::TaskRunner;

/// Agent-wide change counter: every state change bumps it, which is what `X-Nomad-Index`
/// reports and what blocking queries wait on; and the event stream of what changed.
#[derive(Debug)]
pub struct Changes {
    tx: tokio::sync::watch::Sender<u64>,
    /// What changed, for `/v1/event/stream`.
    pub events: crate::events::EventBroker,
}

impl Default for Changes {
    fn default() -> Self {
        Self {
            tx: tokio::sync::watch::channel(1).0,
            events: Default::default(),
        }
    }
}

impl Changes {
    /// Record a change; returns the new index.
    pub fn bump(&self) -> u64 {
        let mut next = 0;
        self.tx.send_modify(|i| {
            *i += 1;
            next = *i;
        });
        next
    }

    /// Current index.
    pub fn index(&self) -> u64 {
        *self.tx.borrow()
    }

    /// A receiver that sees every change.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tx.subscribe()
    }
}

/// What an alloc runner and its task runners share.
pub struct AllocShared {
    alloc: Mutex<Allocation>,
    /// State DB.
    pub db: Arc<dyn StateDb>,
    /// Change counter.
    pub changes: Arc<Changes>,
    /// Directory tree.
    pub dir: AllocDir,
    /// The node, for the env builder.
    pub node: NodeInfo,
}

impl AllocShared {
    /// A snapshot of the allocation.
    pub fn snapshot(&self) -> Allocation {
        self.alloc.lock().unwrap().clone()
    }

    /// Look at the allocation without copying it.
    pub fn peek<R>(&self, f: impl FnOnce(&Allocation) -> R) -> R {
        f(&self.alloc.lock().unwrap())
    }

    /// Allocation id.
    pub fn id(&self) -> String {
        self.alloc.lock().unwrap().id.clone()
    }

    /// Change one task's state, re-derive the client status, persist, and notify.
    pub fn update_task(&self, task: &str, f: impl FnOnce(&mut TaskState)) {
        let mut a = self.alloc.lock().unwrap();
        let state = a.task_states.entry(task.to_string()).or_default();
        f(state);
        let state = state.clone();
        let status = derive_client_status(a.task_states.values()).to_string();
        let status_changed = status != a.client_status;
        a.client_status = status;
        let index = self.changes.bump();
        a.modify_index = index;
        a.modify_time = crate::util::now_nanos();
        if let Err(e) = self.db.put_task_state(&a.id, task, &state) {
            tracing::error!(alloc_id = %a.id, task, error = %e, "persisting task state failed");
        }
        if status_changed && let Err(e) = self.db.put_alloc(&a) {
            tracing::error!(alloc_id = %a.id, error = %e, "persisting allocation failed");
        }
        self.changes
            .events
            .allocation("AllocationUpdated", index, &a);
    }

    /// Append an event to a task.
    pub fn event(&self, task: &str, ev: TaskEvent) {
        tracing::info!(alloc_id = %self.id(), task, event = %ev.event_type, message = %ev.message, "task event");
        self.update_task(task, |s| s.push_event(ev));
    }

    fn set_desired(&self, status: &str, description: &str) {
        let mut a = self.alloc.lock().unwrap();
        a.desired_status = status.into();
        a.desired_description = description.into();
        a.modify_index = self.changes.bump();
        if let Err(e) = self.db.put_alloc(&a) {
            tracing::error!(alloc_id = %a.id, error = %e, "persisting allocation failed");
        }
        self.changes
            .events
            .allocation("AllocationUpdateDesiredStatus", a.modify_index, &a);
    }
}

/// The plugin managers every runner uses.
#[derive(Clone)]
pub struct Plugins {
    /// Drivers.
    pub drivers: Arc<DriverManager>,
    /// Device plugins.
    pub devices: Arc<DeviceManager>,
    /// WASM hooks and the tasks they attach to.
    pub hooks: Arc<crate::taskrunner::HookSet>,
}

/// Runs one allocation.
pub struct AllocRunner {
    shared: Arc<AllocShared>,
    tasks: Vec<Arc<TaskRunner>>,
    kill: CancellationToken,
    started: std::sync::atomic::AtomicBool,
    done: tokio::sync::watch::Sender<bool>,
}

impl AllocRunner {
    /// A runner for `alloc`; persists it and emits `Received` for each task.
    pub fn new(
        alloc: Allocation,
        db: Arc<dyn StateDb>,
        changes: Arc<Changes>,
        alloc_root: &std::path::Path,
        node: NodeInfo,
        plugins: Plugins,
    ) -> Arc<Self> {
        Self::build(alloc, db, changes, alloc_root, node, plugins, true)
    }

    /// A runner for an allocation restored from the state DB (with its task states): its
    /// tasks' runners reattach to what still runs and leave finished tasks as they are.
    pub fn restore(
        alloc: Allocation,
        db: Arc<dyn StateDb>,
        changes: Arc<Changes>,
        alloc_root: &std::path::Path,
        node: NodeInfo,
        plugins: Plugins,
    ) -> Arc<Self> {
        Self::build(alloc, db, changes, alloc_root, node, plugins, false)
    }

    fn build(
        alloc: Allocation,
        db: Arc<dyn StateDb>,
        changes: Arc<Changes>,
        alloc_root: &std::path::Path,
        node: NodeInfo,
        plugins: Plugins,
        fresh: bool,
    ) -> Arc<Self> {
        let dir = AllocDir::new(alloc_root, &alloc.id);
        let group = alloc
            .group()
            .cloned()
            .expect("allocations are built from one of their job's groups");
        let kill = CancellationToken::new();
        let shared = Arc::new(AllocShared {
            alloc: Mutex::new(alloc),
            db,
            changes,
            dir,
            node,
        });
        if fresh {
            let a = shared.snapshot();
            if let Err(e) = shared.db.put_alloc(&a) {
                tracing::error!(alloc_id = %a.id, error = %e, "persisting allocation failed");
            }
            // Placed: Nomad announces a new allocation with its plan's result.
            shared
                .changes
                .events
                .allocation("PlanResult", a.create_index, &a);
        }
        let tasks = group
            .tasks
            .iter()
            .map(|t| {
                TaskRunner::new(
                    shared.clone(),
                    t.clone(),
                    &plugins,
                    CancellationToken::new(),
                )
            })
            .collect::<Vec<_>>();
        if fresh {
            for t in &group.tasks {
                shared.event(
                    &t.name,
                    TaskEvent::new(event_type::RECEIVED, "Task received by client"),
                );
            }
        }
        Arc::new(Self {
            shared,
            tasks,
            kill,
            started: std::sync::atomic::AtomicBool::new(false),
            done: tokio::sync::watch::channel(false).0,
        })
    }

    /// Shared state (allocation snapshot and more).
    pub fn shared(&self) -> &Arc<AllocShared> {
        &self.shared
    }

    /// Run every task to completion in lifecycle order (see [`lifecycle`]). Returns at once
    /// when the allocation was stopped before it ran.
    pub async fn run(self: Arc<Self>) {
        if self.started.swap(true, std::sync::atomic::Ordering::SeqCst) || self.kill.is_cancelled()
        {
            self.done.send_replace(true);
            return;
        }
        if let Err(e) = self.shared.dir.build() {
            for t in &self.tasks {
                let mut ev = TaskEvent::new(
                    event_type::SETUP_FAILURE,
                    format!("failed to build alloc dir: {e}"),
                );
                ev.fails_task = true;
                ev.setup_error = e.to_string();
                self.shared.event(t.name(), ev);
                self.shared.update_task(t.name(), |s| {
                    s.state = crate::structs::task_state::DEAD.into()
                });
            }
            self.done.send_replace(true);
            return;
        }
        self.run_lifecycle().await;
        self.done.send_replace(true);
    }

    /// Update the allocation in place to a new version of its job (one whose group and
    /// tasks did not change, see [`crate::agent`]): the tasks keep running and each task
    /// runner's update hooks see the new allocation.
    pub fn update(&self, job: crate::jobspec::Job, eval_id: &str) {
        {
            let mut a = self.shared.alloc.lock().unwrap();
            a.job = job;
            a.eval_id = eval_id.to_string();
            a.modify_index = self.shared.changes.bump();
            a.modify_time = crate::util::now_nanos();
            if let Err(e) = self.shared.db.put_alloc(&a) {
                tracing::error!(alloc_id = %a.id, error = %e, "persisting allocation failed");
            }
            self.shared
                .changes
                .events
                .allocation("AllocationUpdated", a.modify_index, &a);
        }
        for t in &self.tasks {
            let t = t.clone();
            tokio::spawn(async move { t.update().await });
        }
    }

    /// The task runners.
    pub fn tasks(&self) -> &[Arc<TaskRunner>] {
        &self.tasks
    }

    /// Ask every task to stop; returns at once.
    pub fn stop(&self, reason: &str) {
        self.shared.set_desired("stop", reason);
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

    /// Stop, wait for the tasks, then remove the allocation's state and directory.
    /// Before `run` was ever called this returns at once.
    pub async fn destroy(&self) {
        self.stop("alloc destroyed");
        if self.started.load(std::sync::atomic::Ordering::SeqCst) {
            self.wait().await;
        }
        let id = self.shared.id();
        if let Err(e) = self.shared.db.delete_alloc(&id) {
            tracing::error!(alloc_id = %id, error = %e, "removing allocation state failed");
        }
        if let Err(e) = self.shared.dir.destroy() {
            tracing::warn!(alloc_id = %id, error = %e, "removing allocation dir failed");
        }
        self.shared.changes.bump();
    }
}
