//! One driver, called through its component. Each call resolves the driver's current
//! version, so a hot-swapped version serves every call that starts after the swap.

use std::sync::Arc;

use crate::runtime::bindings::v0_1_0::driver::exports::paddock::plugin::task_driver::{
    DriverCapabilities, DriverError, DriverFingerprint, TaskStatus, WaitStatus,
};
use crate::runtime::bindings::v0_1_0::types::{ResourceUsage, TaskConfig, TaskHandle};
use crate::runtime::{CallError, CallFailure, Runtime, TaskContext, World};

/// A driver call that did not succeed: either the driver said no (a WIT error), or the
/// component failed (trap, memory, deadline).
#[derive(Debug, Clone, thiserror::Error)]
pub enum DriverCallError {
    /// The driver returned an error.
    #[error("{}", describe(.0))]
    Driver(DriverError),
    /// The component failed.
    #[error(transparent)]
    Component(#[from] CallError),
}

impl DriverCallError {
    /// Whether trying again may help (a recoverable driver failure).
    pub fn recoverable(&self) -> bool {
        matches!(self, DriverCallError::Driver(DriverError::Failed(f)) if f.recoverable)
    }
}

/// Human text of a driver error.
pub fn describe(e: &DriverError) -> String {
    match e {
        DriverError::InvalidConfig(fields) => fields
            .iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect::<Vec<_>>()
            .join("; "),
        DriverError::NotSupported(m) => format!("not supported: {m}"),
        DriverError::TaskNotFound(m) => format!("task not found: {m}"),
        DriverError::Denied(m) => format!("denied: {m}"),
        DriverError::Failed(f) => f.message.clone(),
    }
}

/// A driver by name.
#[derive(Clone)]
pub struct Driver {
    runtime: Arc<Runtime>,
    name: String,
    health: Arc<super::HealthBook>,
}

macro_rules! driver_call {
    ($self:ident, $task:expr, $op:literal, |$d:ident, $s:ident| $call:expr) => {{
        let comp = $self
            .runtime
            .registry
            .get(World::Driver, &$self.name)
            .ok_or_else(|| CallError {
                component: $self.name.clone(),
                op: $op,
                kind: CallFailure::Closed,
                detail: "driver is no longer loaded".into(),
            })?;
        let r = $self
            .runtime
            .call_driver(&comp, $task, $op, move |$d, $s| {
                Box::pin(async move { $call.await })
            })
            .await;
        if let Err(e) = &r {
            $self.health.call_failed(&$self.name, e);
        }
        r
    }};
}

impl Driver {
    pub(super) fn new(runtime: Arc<Runtime>, name: String, health: Arc<super::HealthBook>) -> Self {
        Self {
            runtime,
            name,
            health,
        }
    }

    /// Driver name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// sha256 of the version currently serving calls.
    pub fn current_sha256(&self) -> Option<String> {
        self.runtime
            .registry
            .get(World::Driver, &self.name)
            .map(|c| c.sha256.clone())
    }

    /// Capabilities.
    pub async fn capabilities(&self) -> Result<DriverCapabilities, DriverCallError> {
        Ok(driver_call!(self, None, "capabilities", |d, s| d
            .paddock_plugin_task_driver()
            .call_capabilities(s))?)
    }

    /// Health and attributes.
    pub async fn fingerprint(&self) -> Result<DriverFingerprint, DriverCallError> {
        Ok(driver_call!(self, None, "fingerprint", |d, s| d
            .paddock_plugin_task_driver()
            .call_fingerprint(s))?)
    }

    /// Validate a task's config (JSON).
    pub async fn validate_config(&self, config: &str) -> Result<(), DriverCallError> {
        let config = config.to_string();
        driver_call!(self, None, "validate-config", |d, s| d
            .paddock_plugin_task_driver()
            .call_validate_config(s, &config))?
        .map_err(DriverCallError::Driver)
    }

    /// Start a task invocation.
    pub async fn start(
        &self,
        cfg: TaskConfig,
        task: Option<Arc<TaskContext>>,
    ) -> Result<TaskHandle, DriverCallError> {
        driver_call!(self, task, "start", |d, s| d
            .paddock_plugin_task_driver()
            .call_start(s, &cfg))?
        .map_err(DriverCallError::Driver)
    }

    /// Reattach to a task.
    pub async fn recover(&self, handle: TaskHandle) -> Result<TaskHandle, DriverCallError> {
        driver_call!(self, None, "recover", |d, s| d
            .paddock_plugin_task_driver()
            .call_recover(s, &handle))?
        .map_err(DriverCallError::Driver)
    }

    /// Non-blocking wait.
    pub async fn wait(&self, handle: TaskHandle) -> Result<WaitStatus, DriverCallError> {
        driver_call!(self, None, "wait", |d, s| d
            .paddock_plugin_task_driver()
            .call_wait(s, &handle))?
        .map_err(DriverCallError::Driver)
    }

    /// Stop: signal, then kill after the timeout. Returns the updated handle.
    pub async fn stop(
        &self,
        handle: TaskHandle,
        timeout_ns: u64,
        signal: String,
    ) -> Result<TaskHandle, DriverCallError> {
        driver_call!(self, None, "stop", |d, s| d
            .paddock_plugin_task_driver()
            .call_stop(s, &handle, timeout_ns, &signal))?
        .map_err(DriverCallError::Driver)
    }

    /// Release a task.
    pub async fn destroy(&self, handle: TaskHandle, force: bool) -> Result<(), DriverCallError> {
        driver_call!(self, None, "destroy", |d, s| d
            .paddock_plugin_task_driver()
            .call_destroy(s, &handle, force))?
        .map_err(DriverCallError::Driver)
    }

    /// Describe a task.
    pub async fn inspect(&self, handle: TaskHandle) -> Result<TaskStatus, DriverCallError> {
        driver_call!(self, None, "inspect", |d, s| d
            .paddock_plugin_task_driver()
            .call_inspect(s, &handle))?
        .map_err(DriverCallError::Driver)
    }

    /// Signal a task. Returns the updated handle.
    pub async fn signal(
        &self,
        handle: TaskHandle,
        signal: String,
    ) -> Result<TaskHandle, DriverCallError> {
        driver_call!(self, None, "signal", |d, s| d
            .paddock_plugin_task_driver()
            .call_signal(s, &handle, &signal))?
        .map_err(DriverCallError::Driver)
    }

    /// Resource usage of a task.
    pub async fn stats(&self, handle: TaskHandle) -> Result<ResourceUsage, DriverCallError> {
        driver_call!(self, None, "stats", |d, s| d
            .paddock_plugin_task_driver()
            .call_stats(s, &handle))?
        .map_err(DriverCallError::Driver)
    }
}
