//! The allocation record an alloc runner owns, and the one path by which it changes: every
//! change goes through [`AllocShared::mutate`], which applies it, re-derives the client
//! status, bumps the change index, persists what changed and publishes the allocation on
//! the event stream. Task runners reach it as their [`TaskStateHandler`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::changes::Changes;
use crate::state::StateDb;
use crate::structs::{Allocation, DesiredStatus, TaskEvent, TaskState, derive_client_status};
use crate::taskrunner::interfaces::TaskStateHandler;

/// What a change to the allocation wrote, so that exactly that is persisted.
enum Wrote {
    /// One task's state (and the allocation, if its client status changed).
    Task(String),
    /// The allocation record itself.
    Alloc,
}

/// The allocation record of one alloc runner, shared with its task runners.
pub struct AllocShared {
    id: String,
    alloc: Mutex<Allocation>,
    db: Arc<dyn StateDb>,
    changes: Arc<Changes>,
    /// This allocation's own change index: what waits on this allocation alone (its
    /// coordinator) is woken by its changes, not by every change on the node.
    own: tokio::sync::watch::Sender<u64>,
    /// Told when the client status turns terminal (false) or back (true).
    on_live: Arc<dyn Fn(&str, bool) + Send + Sync>,
    /// Told each change, the allocation as it is after it.
    on_change: Arc<dyn Fn(&Allocation) + Send + Sync>,
    /// A write of this allocation's state failed (the state DB refused it): the state file
    /// holds an older state until [`AllocShared::resync`] writes it all again.
    unsynced: AtomicBool,
    /// Its state was removed ([`AllocShared::forget`]): nothing is written again.
    gone: AtomicBool,
}

impl AllocShared {
    pub(super) fn new(
        alloc: Allocation,
        db: Arc<dyn StateDb>,
        changes: Arc<Changes>,
        on_live: Arc<dyn Fn(&str, bool) + Send + Sync>,
        on_change: Arc<dyn Fn(&Allocation) + Send + Sync>,
    ) -> Self {
        Self {
            id: alloc.id.clone(),
            alloc: Mutex::new(alloc),
            db,
            changes,
            own: tokio::sync::watch::Sender::new(0),
            on_live,
            on_change,
            unsynced: AtomicBool::new(false),
            gone: AtomicBool::new(false),
        }
    }

    /// A receiver woken by each change of this allocation.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.own.subscribe()
    }

    /// A snapshot of the allocation.
    pub fn snapshot(&self) -> Allocation {
        self.lock().clone()
    }

    /// Look at the allocation without copying it.
    pub fn peek<R>(&self, f: impl FnOnce(&Allocation) -> R) -> R {
        f(&self.lock())
    }

    /// Allocation id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The change index and event stream this allocation reports to.
    pub fn changes(&self) -> &Arc<Changes> {
        &self.changes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Allocation> {
        self.alloc.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Apply `change`, then: re-derive the client status, bump the change index, persist
    /// what the change wrote, and publish the allocation as `event` (`AllocationUpdated`,
    /// `AllocationUpdateDesiredStatus`).
    fn mutate(&self, event: &'static str, change: impl FnOnce(&mut Allocation) -> Wrote) {
        self.mutate_as(event, false, change);
    }

    /// [`Self::mutate`]; `by_server` when the change is the server's (it moves the
    /// allocation's `AllocModifyIndex` too).
    fn mutate_as(
        &self,
        event: &'static str,
        by_server: bool,
        change: impl FnOnce(&mut Allocation) -> Wrote,
    ) {
        let (index, written) = {
            let mut a = self.lock();
            let wrote = change(&mut a);
            let status = derive_client_status(a.task_states.values());
            let status_changed = status != a.client_status;
            let was_terminal = a.is_terminal();
            a.client_status = status;
            if a.is_terminal() != was_terminal {
                (self.on_live)(&a.id, !a.is_terminal());
            }
            a.modify_index = self.changes.bump();
            a.modify_time = crate::util::now_nanos();
            if by_server {
                a.lineage.alloc_modify_index = a.modify_index;
            }
            // Queued under the lock, so this allocation's writes keep their order; waited
            // for after it, so readers (the API, placement's capacity) never wait on an fsync.
            let written = match &wrote {
                Wrote::Task(task) => {
                    let state = a.task_states.get(task).cloned().unwrap_or_default();
                    let record = status_changed.then_some(&*a);
                    self.db.queue_task_state(&a.id, task, &state, record)
                }
                Wrote::Alloc => self.db.queue_alloc(&a),
            };
            self.changes.events.allocation(event, a.modify_index, &a);
            (self.on_change)(&a);
            (a.modify_index, written)
        };
        self.own.send_replace(index);
        if let Err(e) = written.and_then(crate::state::Durable::wait) {
            self.unsynced.store(true, Ordering::SeqCst);
            crate::state::log_write_failed(&e, "allocation state", &self.id);
        }
    }

    /// Whether its state was removed.
    pub(super) fn gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }

    /// Whether a write of this allocation's state failed since it was last written whole.
    pub fn unsynced(&self) -> bool {
        self.unsynced.load(Ordering::SeqCst)
    }

    /// When a write of this allocation's state failed: write its record and every task's
    /// state again (once the state DB writes after an outage), so that a crash later finds
    /// the allocation as it is, not as it was before the outage (a stop lost, a task dead
    /// and started again). `Ok(true)` when something was written, `Ok(false)` when nothing
    /// needed it; on an error it stays to be written again.
    pub fn resync(&self) -> Result<bool, crate::state::StateError> {
        if !self.unsynced.swap(false, Ordering::SeqCst) {
            return Ok(false);
        }
        // Queued under the lock, after and before this allocation's other writes.
        let queued = {
            let a = self.lock();
            if self.gone.load(Ordering::SeqCst) {
                return Ok(false);
            }
            let mut queued = vec![self.db.queue_alloc(&a)];
            for (task, state) in &a.task_states {
                queued.push(self.db.queue_task_state(&a.id, task, state, None));
            }
            queued
        };
        let mut result = Ok(true);
        for w in queued {
            if let Err(e) = w.and_then(crate::state::Durable::wait) {
                result = Err(e);
            }
        }
        if result.is_err() {
            self.unsynced.store(true, Ordering::SeqCst);
        }
        result
    }

    /// The allocation was placed: store it and announce it with its plan's result.
    pub(super) fn placed(&self) {
        let written = self.db.queue_alloc(&self.lock());
        if let Err(e) = written.and_then(crate::state::Durable::wait) {
            self.unsynced.store(true, Ordering::SeqCst);
            tracing::error!(alloc_id = %self.id, error = %e, "persisting allocation failed");
        }
        self.announce_placed();
    }

    /// The allocation was placed and stored by [`super::AllocRunner::place_all`]: announce
    /// it with its plan's result.
    pub(super) fn announce_placed(&self) {
        let a = self.lock();
        self.changes
            .events
            .allocation("PlanResult", a.create_index, &a);
    }

    /// What the scheduler wants of the allocation changed.
    pub(super) fn set_desired(&self, status: DesiredStatus, description: &str) {
        self.mutate_as("AllocationUpdateDesiredStatus", true, |a| {
            a.desired_status = status;
            a.desired_description = description.into();
            Wrote::Alloc
        });
    }

    /// Its place among the allocations that replace one another changed (it was
    /// replaced, a follow-up evaluation was made for it, `alloc stop` asked to replace it).
    pub fn update_lineage(&self, f: impl FnOnce(&mut crate::structs::Lineage)) {
        self.mutate_as("AllocationUpdated", true, |a| {
            f(&mut a.lineage);
            Wrote::Alloc
        });
    }

    /// The allocation moves to a new version of its job, from evaluation `eval_id`.
    pub(super) fn update_job(&self, job: crate::jobspec::Job, eval_id: &str) {
        self.mutate("AllocationUpdated", |a| {
            a.job = Arc::new(job);
            a.eval_id = eval_id.to_string();
            Wrote::Alloc
        });
    }

    /// The allocation is gone: remove its state (its task and local states with it). A
    /// removal the state DB refuses leaves it as it was, its writes going on.
    pub(super) fn forget(&self) -> Result<(), crate::state::StateError> {
        // Under the lock: a rewrite queued before this sees it, one after it writes nothing.
        {
            let _a = self.lock();
            self.gone.store(true, Ordering::SeqCst);
        }
        if let Err(e) = self.db.delete_alloc(&self.id) {
            self.gone.store(false, Ordering::SeqCst);
            return Err(e);
        }
        self.changes.bump();
        Ok(())
    }

    /// The allocation ended and the client lets its runner go (its garbage collection):
    /// no more writes, its local state (task handles) removed, its record and task states
    /// kept. Returns the final record; `None` while a refused write is still to be made
    /// again (the stored record is older than this one), so it is kept for now.
    pub(super) fn retire(&self) -> Option<Allocation> {
        let record = {
            let a = self.lock();
            if self.unsynced.load(Ordering::SeqCst) {
                return None;
            }
            self.gone.store(true, Ordering::SeqCst);
            a.clone()
        };
        if let Err(e) = self.db.delete_local_states(&self.id) {
            // Harmless if left: an ended allocation's local state is never read again, and
            // the record's removal takes it with it.
            tracing::debug!(alloc_id = %self.id, error = %e, "removing a collected allocation's local state failed");
        }
        Some(record)
    }

    /// Change one task's state.
    pub fn update_task(&self, task: &str, f: impl FnOnce(&mut TaskState)) {
        self.mutate("AllocationUpdated", |a| {
            f(a.task_states.entry(task.to_string()).or_default());
            Wrote::Task(task.to_string())
        });
    }

    /// Append an event to a task.
    pub fn event(&self, task: &str, ev: TaskEvent) {
        tracing::info!(alloc_id = %self.id, task, event = %ev.event_type, message = %ev.message, "task event");
        self.update_task(task, |s| s.push_event(ev));
    }
}

impl TaskStateHandler for AllocShared {
    fn allocation(&self) -> Allocation {
        self.snapshot()
    }

    fn allocation_for_hooks(&self) -> Allocation {
        // The task states are set aside while the rest is copied: never copied at all.
        let mut a = self.lock();
        let states = std::mem::take(&mut a.task_states);
        let copy = a.clone();
        a.task_states = states;
        copy
    }

    fn job_type(&self) -> crate::jobspec::JobType {
        self.peek(|a| a.job.job_type)
    }

    fn task_state(&self, task: &str) -> Option<TaskState> {
        self.peek(|a| a.task_states.get(task).cloned())
    }

    fn update_task(&self, task: &str, change: &mut dyn FnMut(&mut TaskState)) {
        AllocShared::update_task(self, task, change);
    }

    fn event(&self, task: &str, ev: TaskEvent) {
        AllocShared::event(self, task, ev);
    }
}
