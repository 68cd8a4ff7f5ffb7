//! The task runner's local state (Nomad's LocalState): the driver handle and each hook's
//! state, persisted on every change by this runner, its only writer.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::drivermanager::types::TaskHandle;
use crate::drivermanager::{Driver, PersistHandle, TaskBinding};
use crate::hookmanager::TEMPLATE_HOOK;
use crate::state::{HookState, LocalTaskState, StoredHandle};

use super::TaskRunner;

impl TaskRunner {
    /// Nothing of this task is left to reattach: it had no stored handle, or its runner
    /// has taken the task back (bound it to its driver) or given it up (cleared the handle).
    pub fn reattach_settled(&self) -> bool {
        self.local.lock().unwrap().handle.is_none() || self.binding.lock().unwrap().is_some()
    }

    /// The invocation is over: its handle is no longer needed.
    pub(super) fn clear_handle(&self) {
        self.update_local(|l| l.handle = None);
    }

    /// Change the local state and persist it (this runner is its only writer).
    pub(super) fn update_local(&self, f: impl FnOnce(&mut LocalTaskState)) {
        let mut local = self.local.lock().unwrap();
        f(&mut local);
        if let Err(e) = self
            .db
            .put_local_state(&self.alloc_id, &self.task.name, &local)
        {
            self.local_unsynced.store(true, Ordering::SeqCst);
            crate::state::log_write_failed(&e, "task local state", &self.task.name);
        }
    }

    /// When a write of the local state failed: write it again (once the state DB writes
    /// after an outage), so that a crash later finds the running task's handle. `Ok(true)`
    /// when it was written; on an error it stays to be written again.
    pub fn resync_local(&self) -> Result<bool, crate::state::StateError> {
        if !self.local_unsynced.swap(false, Ordering::SeqCst) {
            return Ok(false);
        }
        let local = self.local.lock().unwrap();
        self.db
            .put_local_state(&self.alloc_id, &self.task.name, &local)
            .map(|()| true)
            .inspect_err(|_| self.local_unsynced.store(true, Ordering::SeqCst))
    }

    /// A hook's stored state.
    pub(super) fn hook_state(&self, name: &str) -> Option<HookState> {
        self.local
            .lock()
            .unwrap()
            .hooks
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, h)| h.clone())
    }

    /// Store a hook's state; nothing is written when it did not change.
    pub(super) fn set_hook_state(&self, name: &str, state: HookState) {
        if self.hook_state(name).as_ref() == Some(&state) {
            return;
        }
        self.update_local(|l| match l.hooks.iter_mut().find(|(n, _)| n == name) {
            Some((_, old)) => *old = state,
            None => l.hooks.push((name.to_string(), state)),
        });
    }

    /// Env set by hooks, in their first-run order: the last writer wins. As in Nomad, the
    /// env of `template { env = true }` blocks comes after every other hook's.
    pub(super) fn hook_env(&self) -> Vec<(String, String)> {
        let local = self.local.lock().unwrap();
        let (template, others): (Vec<_>, Vec<_>) = local
            .hooks
            .iter()
            .partition(|(name, _)| name == TEMPLATE_HOOK);
        others
            .into_iter()
            .chain(template)
            .flat_map(|(_, h)| h.env.clone())
            .collect()
    }

    /// What persists a running task's handle whenever it changes (its binding calls it):
    /// the handle with the sha256 of the driver version that made it, in this runner's
    /// local state.
    pub(super) fn handle_persister(&self) -> PersistHandle {
        let (local, db, unsynced) = (
            self.local.clone(),
            self.db.clone(),
            self.local_unsynced.clone(),
        );
        let (alloc_id, task, driver) = (
            self.alloc_id.clone(),
            self.task.name.clone(),
            self.task.driver.clone(),
        );
        Box::new(move |sha256: &str, handle: &TaskHandle| {
            let mut l = local.lock().unwrap();
            l.handle = Some(StoredHandle {
                driver: driver.clone(),
                driver_sha256: sha256.to_string(),
                version: handle.version,
                task_id: handle.task_id.clone(),
                driver_state: handle.driver_state.clone(),
            });
            if let Err(e) = db.put_local_state(&alloc_id, &task, &l) {
                unsynced.store(true, Ordering::SeqCst);
                crate::state::log_write_failed(&e, "task local state", &task);
            }
        })
    }

    /// Bind the started (or recovered) task to the driver version that made `handle`; its
    /// calls go there until a swap moves it (see [`crate::drivermanager::Bindings`]).
    pub(super) fn bind(&self, driver: &Driver, handle: TaskHandle) -> Option<Arc<TaskBinding>> {
        let version = driver.version()?;
        let b =
            self.drivers
                .bindings()
                .bind(driver.clone(), version, handle, self.handle_persister());
        *self.binding.lock().unwrap() = Some(b.clone());
        Some(b)
    }
}
