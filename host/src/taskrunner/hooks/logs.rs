//! `logs`: where the task's stdout and stderr go (`alloc/logs/<task>.stdout|stderr`,
//! rotated per the task's `logs` block), registered with the host so that drivers' output
//! through `task-logs` reaches them. Each start registers its task id; the previous one is
//! released then, and the last at stop.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use crate::drivermanager::DriverManager;
use crate::runtime::bindings::v0_1_0::types::LogConfig;
use crate::taskrunner::interfaces::{
    HookResult, Invocation, LogPaths, PrestartRequest, PrestartResponse, StopRequest, TaskHook,
};

/// Sets up the task's log files.
pub struct LogsHook {
    drivers: Arc<DriverManager>,
    dir: PathBuf,
    registered: Mutex<Option<String>>,
}

impl LogsHook {
    /// The hook, writing under `dir`.
    pub fn new(drivers: Arc<DriverManager>, dir: PathBuf) -> Self {
        Self {
            drivers,
            dir,
            registered: Mutex::new(None),
        }
    }

    fn release(&self) {
        if let Some(id) = self.registered.lock().unwrap().take() {
            self.drivers.unregister_task_logs(&id);
        }
    }
}

impl TaskHook for LogsHook {
    fn name(&self) -> &str {
        "logs"
    }

    fn prestart<'a>(
        &'a self,
        req: &'a PrestartRequest<'a>,
        inv: &'a mut Invocation,
    ) -> BoxFuture<'a, HookResult<PrestartResponse>> {
        Box::pin(async move {
            self.release();
            let task = req.view.task;
            let paths = LogPaths {
                stdout: self.dir.join(format!("{}.stdout", task.name)),
                stderr: self.dir.join(format!("{}.stderr", task.name)),
            };
            self.drivers.register_task_logs(
                &inv.task_id,
                &task.driver,
                paths.stdout.clone(),
                paths.stderr.clone(),
                &LogConfig {
                    max_files: task.log_config.max_files,
                    max_file_size_mb: task.log_config.max_file_size_mb,
                },
            );
            *self.registered.lock().unwrap() = Some(inv.task_id.clone());
            inv.logs = Some(paths);
            Ok(PrestartResponse::default())
        })
    }

    fn stop<'a>(&'a self, _req: &'a StopRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async move {
            self.release();
            Ok(())
        })
    }
}
