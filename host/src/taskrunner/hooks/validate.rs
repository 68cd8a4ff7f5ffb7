//! `validate`: the task's driver is loaded, and the invocation gets it.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::drivermanager::DriverManager;
use crate::structs::event_type;
use crate::taskrunner::interfaces::{
    HookFailure, HookResult, Invocation, PrestartRequest, PrestartResponse, TaskHook,
};

/// Checks what must hold before anything is set up for the task.
pub struct ValidateHook {
    drivers: Arc<DriverManager>,
}

impl ValidateHook {
    /// The hook.
    pub fn new(drivers: Arc<DriverManager>) -> Self {
        Self { drivers }
    }
}

impl TaskHook for ValidateHook {
    fn name(&self) -> &str {
        "validate"
    }

    fn prestart<'a>(
        &'a self,
        req: &'a PrestartRequest<'a>,
        inv: &'a mut Invocation,
    ) -> BoxFuture<'a, HookResult<PrestartResponse>> {
        Box::pin(async move {
            let task = req.view.task;
            let driver = self
                .drivers
                .dispense(&task.driver)
                .ok_or_else(|| HookFailure {
                    message: format!(
                        "failed to find driver {:?}: no such driver is loaded (loaded: {})",
                        task.driver,
                        self.drivers.names().join(", ")
                    ),
                    recoverable: false,
                    kind: event_type::DRIVER_FAILURE,
                })?;
            inv.driver = Some(driver);
            Ok(PrestartResponse::default())
        })
    }
}
