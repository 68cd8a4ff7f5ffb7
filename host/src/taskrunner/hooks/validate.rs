//! `validate`: the task's driver is loaded. Without it nothing else is set up, and the task
//! fails with "Driver Failure" (a missing driver will not appear on a retry).

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::drivermanager::DriverManager;
use crate::structs::TaskEventType;
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
            if !inv.driver.is_loaded() {
                return Err(HookFailure {
                    message: format!(
                        "failed to find driver {:?}: no such driver is loaded (loaded: {})",
                        req.view.task.driver,
                        self.drivers.names().join(", ")
                    ),
                    recoverable: false,
                    kind: TaskEventType::DriverFailure,
                });
            }
            Ok(PrestartResponse::default())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::taskrunner::interfaces::TaskView;
    use crate::taskrunner::tests::{allocation, invocation, plugins};

    async fn run(driver: &str) -> HookResult<PrestartResponse> {
        let plugins = plugins().await;
        let dir = tempfile::tempdir().unwrap();
        let a = allocation(serde_json::json!({"Name": "t", "Driver": driver}));
        let alloc_dir = crate::allocdir::AllocDir::new(dir.path(), &a.id);
        let mut inv = invocation(&plugins, &alloc_dir, &a);
        let group = a.group().unwrap();
        let node = Default::default();
        let view = TaskView {
            alloc: &a,
            group,
            task: &group.tasks[0],
            node: &node,
        };
        let req = PrestartRequest {
            view,
            previous: &Default::default(),
            emit: &|_| {},
        };
        ValidateHook::new(plugins.drivers.clone())
            .prestart(&req, &mut inv)
            .await
    }

    #[tokio::test]
    async fn a_loaded_driver_passes_and_a_missing_one_is_a_driver_failure_naming_the_loaded() {
        assert!(run("mock").await.is_ok());
        let f = run("docker").await.unwrap_err();
        assert_eq!(f.kind, TaskEventType::DriverFailure);
        assert!(!f.recoverable);
        assert!(
            f.message.contains("\"docker\"") && f.message.contains("loaded: mock"),
            "{}",
            f.message
        );
    }
}
