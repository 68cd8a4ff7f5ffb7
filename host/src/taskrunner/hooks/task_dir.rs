//! `task_dir`: builds the task's directories (`local/`, `secrets/`, `tmp/`) under the
//! allocation dir, announcing it on the first start as Nomad does.

use futures::future::BoxFuture;

use crate::allocdir::AllocDir;
use crate::structs::{TaskEvent, TaskEventType};
use crate::taskrunner::interfaces::{
    HookFailure, HookResult, Invocation, PrestartRequest, PrestartResponse, TaskHook,
};

/// Builds the task dir.
pub struct TaskDirHook {
    dir: AllocDir,
}

impl TaskDirHook {
    /// The hook for an allocation's tree.
    pub fn new(dir: AllocDir) -> Self {
        Self { dir }
    }
}

impl TaskHook for TaskDirHook {
    fn name(&self) -> &str {
        "task_dir"
    }

    fn prestart<'a>(
        &'a self,
        req: &'a PrestartRequest<'a>,
        inv: &'a mut Invocation,
    ) -> BoxFuture<'a, HookResult<PrestartResponse>> {
        Box::pin(async move {
            if inv.first {
                (req.emit)(TaskEvent::new(
                    TaskEventType::TaskSetup,
                    "Building Task Directory",
                ));
            }
            inv.dirs = self.dir.build_task(&req.view.task.name).map_err(|e| {
                HookFailure::setup(format!("failed to build task directory: {e}"), false)
            })?;
            Ok(PrestartResponse::default())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::taskrunner::interfaces::TaskView;
    use crate::taskrunner::tests::{allocation, invocation, plugins};

    #[tokio::test]
    async fn builds_the_task_dirs_and_announces_only_the_first_start() {
        let plugins = plugins().await;
        let dir = tempfile::tempdir().unwrap();
        let a = allocation(serde_json::json!({"Name": "t", "Driver": "mock"}));
        let alloc_dir = AllocDir::new(dir.path(), &a.id);
        let group = a.group().unwrap();
        let node = Default::default();
        let view = TaskView {
            alloc: &a,
            group,
            task: &group.tasks[0],
            node: &node,
        };
        let hook = TaskDirHook::new(alloc_dir.clone());
        for first in [true, false] {
            let events = std::sync::Mutex::new(Vec::new());
            let emit = |e: TaskEvent| events.lock().unwrap().push(e.event_type);
            let req = PrestartRequest {
                view,
                previous: &Default::default(),
                emit: &emit,
            };
            let mut inv = invocation(&plugins, &alloc_dir, &a);
            inv.first = first;
            hook.prestart(&req, &mut inv).await.unwrap();
            let want: &[TaskEventType] = if first {
                &[TaskEventType::TaskSetup]
            } else {
                &[]
            };
            assert_eq!(*events.lock().unwrap(), want);
            for d in [&inv.dirs.local_dir, &inv.dirs.secrets_dir] {
                assert!(std::path::Path::new(d).is_dir(), "{d}");
            }
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&inv.dirs.secrets_dir)
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700, "secrets are the task's alone");
        }
    }
}
