//! `logs`: opens the task's log files (`alloc/logs/<task>.stdout|stderr`, rotated per the
//! task's `logs` block) to its driver, so that the driver's output through the runtime's
//! `task-logs` interface reaches them. Each start registers its task id; the previous one is
//! released then, and the last at stop.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use crate::drivermanager::DriverManager;
use crate::drivermanager::types::LogConfig;
use crate::taskrunner::interfaces::{
    HookResult, Invocation, PrestartRequest, PrestartResponse, StopRequest, TaskHook,
};

/// Sets up the task's log files.
pub struct LogsHook {
    drivers: Arc<DriverManager>,
    registered: Mutex<Option<String>>,
}

impl LogsHook {
    /// The hook.
    pub fn new(drivers: Arc<DriverManager>) -> Self {
        Self {
            drivers,
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
            self.drivers.register_task_logs(
                &inv.task_id,
                &task.driver,
                inv.dirs.alloc_root(),
                (inv.logs.stdout.clone(), inv.logs.stderr.clone()),
                &LogConfig {
                    max_files: task.log_config.max_files,
                    max_file_size_mb: task.log_config.max_file_size_mb,
                },
            );
            *self.registered.lock().unwrap() = Some(inv.task_id.clone());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::host_api::task_logs::TaskLogHost;
    use crate::runtime::types::LogStream;
    use crate::taskrunner::interfaces::TaskView;
    use crate::taskrunner::tests::{allocation, invocation, plugins};

    #[tokio::test]
    async fn each_start_opens_its_logs_to_the_driver_and_closes_the_previous_start() {
        let plugins = plugins().await;
        let dir = tempfile::tempdir().unwrap();
        let a = allocation(serde_json::json!({"Name": "t", "Driver": "mock"}));
        let alloc_dir = crate::allocdir::AllocDir::new(dir.path(), &a.id);
        alloc_dir.build().unwrap();
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
        let hook = LogsHook::new(plugins.drivers.clone());
        let logs = DriverServicesProbe(plugins.drivers.clone());
        let mut first = invocation(&plugins, &alloc_dir, &a);
        hook.prestart(&req, &mut first).await.unwrap();
        logs.append("mock", &first.task_id, b"one\n").unwrap();
        let mut second = invocation(&plugins, &alloc_dir, &a);
        second.task_id.push('2');
        hook.prestart(&req, &mut second).await.unwrap();
        assert!(
            logs.append("mock", &first.task_id, b"late\n").is_err(),
            "the previous start's logs are closed"
        );
        logs.append("mock", &second.task_id, b"two\n").unwrap();
        assert!(
            logs.append("raw_exec", &second.task_id, b"x").is_err(),
            "only the task's own driver writes"
        );
        let stop = StopRequest {
            view,
            invocation: None,
            state: &Default::default(),
        };
        hook.stop(&stop).await.unwrap();
        assert!(logs.append("mock", &second.task_id, b"x").is_err());
        let out = std::fs::read_to_string(alloc_dir.logs().join("t.stdout.0")).unwrap();
        assert_eq!(out, "one\ntwo\n");
    }

    /// Writes as a driver would, through the manager's task logs.
    struct DriverServicesProbe(Arc<DriverManager>);

    impl DriverServicesProbe {
        fn append(
            &self,
            writer: &str,
            task_id: &str,
            data: &[u8],
        ) -> Result<(), crate::runtime::types::HostError> {
            self.0
                .services()
                .task_logs
                .append(writer, task_id, LogStream::Stdout, data)
        }
    }
}
