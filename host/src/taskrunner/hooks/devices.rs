//! `devices`: reserves the device instances assigned to the task through the plugins that
//! own them (Nomad's `device_hook`). The reservations' env joins the task's environment as
//! this hook's env; their device nodes and mounts go to the driver in the task config and
//! through the `devices` host interface.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::devicemanager::DeviceManager;
use crate::taskrunner::interfaces::{
    HookFailure, HookResult, Invocation, PrestartRequest, PrestartResponse, TaskHook,
};

/// Reserves the task's devices.
pub struct DevicesHook {
    devices: Arc<DeviceManager>,
}

impl DevicesHook {
    /// The hook.
    pub fn new(devices: Arc<DeviceManager>) -> Self {
        Self { devices }
    }
}

impl TaskHook for DevicesHook {
    fn name(&self) -> &str {
        "devices"
    }

    fn prestart<'a>(
        &'a self,
        req: &'a PrestartRequest<'a>,
        inv: &'a mut Invocation,
    ) -> BoxFuture<'a, HookResult<PrestartResponse>> {
        Box::pin(async move {
            let Some(assigned) = req
                .view
                .alloc
                .allocated_resources
                .tasks
                .get(&req.view.task.name)
                .filter(|t| !t.devices.is_empty())
            else {
                return Ok(PrestartResponse::default());
            };
            let reservations =
                self.devices.reserve(&assigned.devices).await.map_err(|e| {
                    HookFailure::setup(format!("failed to reserve devices: {e}"), true)
                })?;
            inv.reservations = reservations;
            inv.env = super::env::build(req.view, inv, req.hook_env);
            Ok(PrestartResponse::default())
        })
    }
}
