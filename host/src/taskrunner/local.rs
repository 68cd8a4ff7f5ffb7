//! The task runner's local state (Nomad's LocalState): the driver handle and each hook's
//! state, persisted on every change by this runner, its only writer.

use crate::drivermanager::Driver;
use crate::drivermanager::types::TaskHandle;
use crate::hookmanager::TEMPLATE_HOOK;
use crate::state::{HookState, LocalTaskState, StoredHandle};

use super::TaskRunner;

/// The handle to give back to the driver.
impl From<StoredHandle> for TaskHandle {
    fn from(s: StoredHandle) -> Self {
        TaskHandle {
            version: s.version,
            task_id: s.task_id,
            driver_state: s.driver_state,
        }
    }
}

impl TaskRunner {
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
            tracing::error!(task = %self.task.name, error = %e, "persisting task local state failed");
        }
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

    pub(super) fn persist_handle(&self, driver: &Driver, handle: &TaskHandle) {
        let stored = StoredHandle {
            driver: driver.name().to_string(),
            driver_sha256: driver.current_sha256().unwrap_or_default(),
            version: handle.version,
            task_id: handle.task_id.clone(),
            driver_state: handle.driver_state.clone(),
        };
        self.update_local(|l| l.handle = Some(stored));
    }
}
