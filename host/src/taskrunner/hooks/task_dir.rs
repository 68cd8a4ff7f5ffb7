//! `task_dir`: builds the task's directories (`local/`, `secrets/`, `tmp/`) under the
//! allocation dir, announcing it on the first start as Nomad does.

use futures::future::BoxFuture;

use crate::allocrunner::allocdir::AllocDir;
use crate::structs::{TaskEvent, event_type};
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
                    event_type::TASK_SETUP,
                    "Building Task Directory",
                ));
            }
            let dirs = self.dir.build_task(&req.view.task.name).map_err(|e| {
                HookFailure::setup(format!("failed to build task directory: {e}"), false)
            })?;
            inv.dirs = Some(dirs);
            Ok(PrestartResponse::default())
        })
    }
}
