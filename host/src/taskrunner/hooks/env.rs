//! `env`: the task's environment (`NOMAD_*`, node attributes and meta, the task's `env`
//! block, then hook env in order; see [`crate::taskenv`]), rebuilt by the runner whenever a
//! later hook adds env, so each hook sees what the ones before it set.

use futures::future::BoxFuture;

use crate::taskenv::TaskEnv;
use crate::taskrunner::interfaces::{
    HookFailure, HookResult, Invocation, PrestartRequest, PrestartResponse, TaskHook, TaskView,
};

/// Builds the task's environment.
pub struct EnvHook;

/// The environment for `view` with the task dir built, then the device reservations' env
/// (the `devices` hook's env, which runs before any WASM hook), then `hook_env`.
pub fn build(
    view: TaskView<'_>,
    inv: &Invocation,
    hook_env: &[(String, String)],
) -> Option<TaskEnv> {
    let dirs = inv.dirs.as_ref()?;
    let device_env: Vec<(String, String)>;
    let hook_env = if inv.reservations.is_empty() {
        hook_env
    } else {
        device_env = inv
            .reservations
            .iter()
            .flat_map(|r| r.env.iter().cloned())
            .chain(hook_env.iter().cloned())
            .collect();
        &device_env
    };
    Some(crate::taskenv::build(crate::taskenv::EnvRequest {
        job: &view.alloc.job,
        group: view.group,
        task: view.task,
        alloc_id: &view.alloc.id,
        alloc_index: view.alloc.index,
        dirs,
        node: view.node,
        hook_env,
        ports: &view.alloc.allocated_resources.shared.ports,
    }))
}

impl TaskHook for EnvHook {
    fn name(&self) -> &str {
        "env"
    }

    fn prestart<'a>(
        &'a self,
        req: &'a PrestartRequest<'a>,
        inv: &'a mut Invocation,
    ) -> BoxFuture<'a, HookResult<PrestartResponse>> {
        Box::pin(async move {
            let env = build(req.view, inv, req.hook_env).ok_or_else(|| {
                HookFailure::setup("the env hook ran before the task dir was built", false)
            })?;
            inv.env = Some(env);
            Ok(PrestartResponse::default())
        })
    }
}
