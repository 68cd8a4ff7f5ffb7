//! The built-in task-runner hooks, one per file, and the one place that orders them.
//!
//! Order: `validate` (the driver is loaded) → `task_dir` (directories) →
//! `dispatch_payload` (a dispatched job's payload into `local/`) → `devices` (reserve
//! assigned devices, their env) → `secrets` (the `secret` blocks, through their provider
//! components) → `logs` (where stdout and stderr go) →
//! `shutdown_delay` (kill phase) → the WASM hooks attached to the task, in their
//! configured order. The task's environment is not a hook: each invocation carries one
//! env builder that these hooks add to (Nomad's task runner owns its env builder too).

use std::sync::Arc;

use super::interfaces::{Plugins, TaskHook, TaskView};
use crate::allocdir::AllocDir;

pub mod devices;
pub mod dispatch_payload;
pub mod logs;
pub mod secrets;
pub mod shutdown_delay;
pub mod task_dir;
pub mod validate;
pub mod wasm;

/// The hooks of one task, in run order.
pub fn for_task(plugins: &Plugins, dir: &AllocDir, view: TaskView<'_>) -> Vec<Arc<dyn TaskHook>> {
    let mut hooks: Vec<Arc<dyn TaskHook>> = vec![
        Arc::new(validate::ValidateHook::new(plugins.drivers.clone())),
        Arc::new(task_dir::TaskDirHook::new(dir.clone())),
        Arc::new(dispatch_payload::DispatchPayloadHook),
        Arc::new(devices::DevicesHook::new(plugins.devices.clone())),
        Arc::new(secrets::SecretsHook::new(plugins.secrets.clone())),
        Arc::new(logs::LogsHook::new(plugins.drivers.clone())),
        Arc::new(shutdown_delay::ShutdownDelayHook),
    ];
    for name in plugins
        .hooks
        .for_task(&view.alloc.job, view.group, view.task)
    {
        hooks.push(Arc::new(wasm::WasmHook::new(name, plugins.hooks.clone())));
    }
    hooks
}
