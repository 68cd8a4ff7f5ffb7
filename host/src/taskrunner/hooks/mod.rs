//! The built-in task-runner hooks, one per file, and the one place that orders them.
//!
//! Order: `validate` (the driver exists) → `task_dir` (directories) → `env` (the task's
//! environment) → `devices` (reserve assigned devices) → `logs` (where stdout and stderr
//! go) → `shutdown_delay` (kill phase) → the WASM hooks attached to the task, in their
//! configured order.

use std::sync::Arc;

use super::interfaces::{TaskHook, TaskView};
use super::wasm_hooks::HookSet;
use crate::allocrunner::allocdir::AllocDir;
use crate::devicemanager::DeviceManager;
use crate::drivermanager::DriverManager;

pub mod devices;
pub mod env;
pub mod logs;
pub mod shutdown_delay;
pub mod task_dir;
pub mod validate;
pub mod wasm;

/// What the built-in hooks need from the agent.
pub struct HookDeps {
    /// Drivers.
    pub drivers: Arc<DriverManager>,
    /// Devices.
    pub devices: Arc<DeviceManager>,
    /// The allocation's directory tree.
    pub alloc_dir: AllocDir,
    /// WASM hook attachments.
    pub wasm: Arc<HookSet>,
}

/// The hooks of one task, in run order.
pub fn for_task(deps: &HookDeps, view: TaskView<'_>) -> Vec<Arc<dyn TaskHook>> {
    let mut hooks: Vec<Arc<dyn TaskHook>> = vec![
        Arc::new(validate::ValidateHook::new(deps.drivers.clone())),
        Arc::new(task_dir::TaskDirHook::new(deps.alloc_dir.clone())),
        Arc::new(env::EnvHook),
        Arc::new(devices::DevicesHook::new(deps.devices.clone())),
        Arc::new(logs::LogsHook::new(
            deps.drivers.clone(),
            deps.alloc_dir.logs(),
        )),
        Arc::new(shutdown_delay::ShutdownDelayHook),
    ];
    for name in deps.wasm.for_task(&view.alloc.job, view.group, view.task) {
        hooks.push(Arc::new(wasm::WasmHook::new(name, deps.wasm.clone())));
    }
    hooks
}
