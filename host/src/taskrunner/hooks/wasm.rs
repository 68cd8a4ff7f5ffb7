//! `wasm`: one WASM hook component attached to the task, run through [`HookSet`] in every
//! phase the `task-hook` interface has (prestart, poststart, exited, stop, update). Its
//! prestart answer is persisted by the runner ([`TaskHook::persistent`]).

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::runtime::TaskContext;
use crate::runtime::bindings::v0_1_0::hook::exports::paddock::plugin::task_hook::{
    TaskInfo, Template,
};
use crate::runtime::bindings::v0_1_0::types::TaskResources;
use crate::taskrunner::interfaces::{
    ExitedRequest, HookResult, Invocation, PoststartRequest, PrestartRequest, PrestartResponse,
    StopRequest, TaskHook, TaskView, UpdateRequest,
};
use crate::taskrunner::wasm_hooks::HookSet;

/// A WASM hook, by component name.
pub struct WasmHook {
    name: String,
    set: Arc<HookSet>,
}

impl WasmHook {
    /// The hook named `name` (its component is looked up at each call, so a hot-swapped
    /// version serves the next phase).
    pub fn new(name: String, set: Arc<HookSet>) -> Self {
        Self { name, set }
    }
}

/// What a WASM hook is told about the task.
pub fn task_info(view: TaskView<'_>, inv: Option<&Invocation>) -> TaskInfo {
    let task = view.task;
    let mut meta = view.alloc.job.meta.clone();
    meta.extend(view.group.meta.clone());
    meta.extend(task.meta.clone());
    TaskInfo {
        alloc_id: view.alloc.id.clone(),
        job_id: view.alloc.job.id.clone(),
        group_name: view.group.name.clone(),
        task_name: task.name.clone(),
        driver: task.driver.clone(),
        driver_config: serde_json::Value::Object(task.config.clone()).to_string(),
        meta: meta.into_iter().collect(),
        task_dir: inv
            .and_then(|i| i.dirs.as_ref())
            .map(|d| d.task_dir.clone())
            .unwrap_or_default(),
        resources: TaskResources {
            cpu_mhz: task.resources.cpu,
            memory_mb: task.resources.memory_mb,
            memory_max_mb: task.resources.memory_max_mb,
        },
        templates: task
            .templates
            .iter()
            .map(|t| Template {
                source_path: t.source_path.clone(),
                dest_path: t.dest_path.clone(),
                embedded_tmpl: t.embedded_tmpl.clone(),
                change_mode: t.change_mode.clone(),
                change_signal: t.change_signal.clone(),
                perms: t.perms.clone(),
                left_delim: t.left_delim.clone(),
                right_delim: t.right_delim.clone(),
                envvars: t.envvars,
                err_missing_key: t.err_missing_key,
            })
            .collect(),
    }
}

fn context(inv: Option<&Invocation>) -> Option<Arc<TaskContext>> {
    let inv = inv?;
    Some(Arc::new(TaskContext {
        env: inv.env.clone()?,
        reservations: inv.reservations.clone(),
        dirs: inv.dirs.clone(),
    }))
}

impl TaskHook for WasmHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn persistent(&self) -> bool {
        true
    }

    fn prestart<'a>(
        &'a self,
        req: &'a PrestartRequest<'a>,
        inv: &'a mut Invocation,
    ) -> BoxFuture<'a, HookResult<PrestartResponse>> {
        Box::pin(async move {
            let info = task_info(req.view, Some(inv));
            self.set
                .prestart(&self.name, &info, context(Some(inv)), req.previous)
                .await
        })
    }

    fn poststart<'a>(&'a self, req: &'a PoststartRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async move {
            let info = task_info(req.view, Some(req.invocation));
            self.set
                .poststart(&self.name, info, context(Some(req.invocation)))
                .await
        })
    }

    fn exited<'a>(&'a self, req: &'a ExitedRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async move {
            let info = task_info(req.view, Some(req.invocation));
            self.set
                .exited(
                    &self.name,
                    info,
                    req.exit.clone(),
                    context(Some(req.invocation)),
                )
                .await
        })
    }

    fn stop<'a>(&'a self, req: &'a StopRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async move {
            let info = task_info(req.view, req.invocation);
            self.set
                .stop(&self.name, info, req.state, context(req.invocation))
                .await
        })
    }

    fn update<'a>(&'a self, req: &'a UpdateRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async move {
            let info = task_info(req.view, req.invocation);
            self.set
                .update(&self.name, info, context(req.invocation))
                .await
        })
    }
}
