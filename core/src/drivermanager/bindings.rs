//! Running tasks and the driver version each one is bound to. A task is bound to the
//! version that started (or recovered) it, and every call about it — wait, stop, signal,
//! stats, destroy — goes to that version with the task's latest handle. When a new version
//! of the driver is installed, [`Bindings::handoff`] offers each task's handle to it
//! (`recover`): a task whose handle the new version accepts moves to it; one whose handle
//! it refuses stays bound to its version, which stays loaded (`draining`) until its last
//! task ends. Nothing here ever drops a task: a binding lives as long as its invocation.
//!
//! A task's calls and its handoff take the binding's lock in turn, so a handle a call
//! returns never overwrites the one a handoff just made, and the other way round.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use super::Driver;
use super::driver::DriverCallError;
use super::types::TaskHandle;
use crate::runtime::LoadedComponent;

/// Called with the driver version's sha256 and the handle whenever a task's handle
/// changes, so that it is persisted (the task runner's local state).
pub type PersistHandle = Box<dyn Fn(&str, &TaskHandle) + Send + Sync>;

/// One running task's driver version and handle.
pub struct TaskBinding {
    /// The task invocation id.
    pub task_id: String,
    /// The driver's name.
    pub driver_name: String,
    driver: Driver,
    state: Mutex<(Arc<LoadedComponent>, TaskHandle)>,
    /// Held across a call and its handle update, and across a handoff.
    op: tokio::sync::Mutex<()>,
    persist: PersistHandle,
    table: Weak<Table>,
}

impl TaskBinding {
    /// The version the task is bound to.
    pub fn version(&self) -> Arc<LoadedComponent> {
        self.state.lock().unwrap().0.clone()
    }

    /// The task's latest handle.
    pub fn handle(&self) -> TaskHandle {
        self.state.lock().unwrap().1.clone()
    }

    /// Call the task's driver version with its latest handle; a handle the call returns
    /// becomes the latest (and is persisted).
    pub async fn call<T, F, Fut>(&self, f: F) -> Result<T, DriverCallError>
    where
        F: FnOnce(Driver, TaskHandle) -> Fut,
        Fut: std::future::Future<Output = Result<(T, Option<TaskHandle>), DriverCallError>>,
    {
        let _op = self.op.lock().await;
        let (version, handle) = self.state.lock().unwrap().clone();
        let (out, updated) = f(self.driver.at(version.clone()), handle).await?;
        if let Some(h) = updated {
            self.set(version, h);
        }
        Ok(out)
    }

    fn set(&self, version: Arc<LoadedComponent>, handle: TaskHandle) {
        (self.persist)(&version.sha256, &handle);
        *self.state.lock().unwrap() = (version, handle);
    }
}

impl Drop for TaskBinding {
    fn drop(&mut self) {
        if let Some(t) = self.table.upgrade() {
            t.tasks.lock().unwrap().remove(&self.task_id);
            t.ended.notify_waiters();
        }
    }
}

#[derive(Default)]
struct Table {
    tasks: Mutex<HashMap<String, Weak<TaskBinding>>>,
    ended: tokio::sync::Notify,
}

/// What a handoff did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// Tasks now on the new version.
    pub moved: Vec<String>,
    /// Tasks whose handle the new version refused, with its reason: they stay on theirs.
    pub pinned: Vec<(String, String)>,
}

/// The running tasks of every driver.
#[derive(Default, Clone)]
pub struct Bindings(Arc<Table>);

impl Bindings {
    /// Bind a task to `version` of `driver` with its first handle (persisted at once).
    pub fn bind(
        &self,
        driver: Driver,
        version: Arc<LoadedComponent>,
        handle: TaskHandle,
        persist: PersistHandle,
    ) -> Arc<TaskBinding> {
        let b = Arc::new(TaskBinding {
            task_id: handle.task_id.clone(),
            driver_name: driver.name().to_string(),
            driver,
            state: Mutex::new((version.clone(), handle.clone())),
            op: tokio::sync::Mutex::new(()),
            persist,
            table: Arc::downgrade(&self.0),
        });
        (b.persist)(&version.sha256, &handle);
        self.0
            .tasks
            .lock()
            .unwrap()
            .insert(b.task_id.clone(), Arc::downgrade(&b));
        b
    }

    /// Every live binding.
    pub fn all(&self) -> Vec<Arc<TaskBinding>> {
        self.0
            .tasks
            .lock()
            .unwrap()
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// The live bindings of driver `name`.
    pub fn of_driver(&self, name: &str) -> Vec<Arc<TaskBinding>> {
        self.0
            .tasks
            .lock()
            .unwrap()
            .values()
            .filter_map(Weak::upgrade)
            .filter(|b| b.driver_name == name)
            .collect()
    }

    /// Running tasks by the sha256 of the driver version they are bound to.
    pub fn versions_in_use(&self, name: &str) -> HashMap<String, usize> {
        let mut out = HashMap::new();
        for b in self.of_driver(name) {
            *out.entry(b.version().sha256.clone()).or_default() += 1;
        }
        out
    }

    /// Wait until some task's binding ends.
    pub async fn ended(&self) {
        self.0.ended.notified().await
    }

    /// Offer every task of driver `new.name` not on `new` to it: each one whose handle
    /// `new`'s `recover` accepts moves to it; the others stay where they are.
    pub async fn handoff(&self, new: &Arc<LoadedComponent>) -> Handoff {
        let mut report = Handoff::default();
        for b in self.of_driver(&new.name) {
            let _op = b.op.lock().await;
            let (version, handle) = b.state.lock().unwrap().clone();
            if Arc::ptr_eq(&version, new) {
                continue;
            }
            match b.driver.at(new.clone()).recover(handle).await {
                Ok(h) => {
                    b.set(new.clone(), h);
                    report.moved.push(b.task_id.clone());
                }
                Err(e) => {
                    tracing::warn!(task_id = %b.task_id, driver = %new.name, from = %&version.sha256[..12], to = %&new.sha256[..12], error = %e, "the new driver version refused the task's handle: the task stays on its version");
                    report.pinned.push((b.task_id.clone(), e.to_string()));
                }
            }
        }
        report
    }
}
