//! `wasm`: one WASM hook component attached to the task, run through the
//! [`HookManager`] in every phase the `task-hook` interface has (prestart, poststart,
//! exited, stop, update). Its prestart answer is persisted by the runner
//! ([`TaskHook::persistent`]). A hook's failure names it; in prestart only its own plain
//! failure may be retried, except a hook that fetches artifacts (it imports `artifacts`),
//! whose every failure is Nomad's recoverable `Failed Artifact Download`.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::drivermanager::types::TaskResources;
use crate::hookmanager::{HookError, HookManager, HookTask};
use crate::runtime::types::{Artifact, TaskEnv};
use crate::runtime::{TaskContext, TaskFiles, WorkloadIdentity};
use crate::structs::{TaskEvent, TaskEventType};
use crate::taskrunner::interfaces::{
    ExitedRequest, HookFailure, HookResult, Invocation, PoststartRequest, PrestartRequest,
    PrestartResponse, StopRequest, TaskHook, TaskView, UpdateRequest,
};

/// A WASM hook, by component name.
pub struct WasmHook {
    name: String,
    hooks: Arc<HookManager>,
}

impl WasmHook {
    /// The hook named `name` (its component is looked up at each call, so a hot-swapped
    /// version serves the next phase).
    pub fn new(name: String, hooks: Arc<HookManager>) -> Self {
        Self { name, hooks }
    }
}

/// What a WASM hook is told about the task.
pub fn hook_task(view: TaskView<'_>, inv: Option<&Invocation>) -> HookTask {
    let task = view.task;
    let mut meta = view.alloc.job.meta.clone();
    meta.extend(view.group.meta.clone());
    meta.extend(task.meta.clone());
    HookTask {
        alloc_id: view.alloc.id.clone(),
        job_id: view.alloc.job.id.clone(),
        group_name: view.group.name.clone(),
        task_name: task.name.clone(),
        driver: task.driver.clone(),
        driver_config: serde_json::Value::Object(task.config.clone()).to_string(),
        meta,
        task_dir: inv.map(|i| i.dirs.task_dir.clone()).unwrap_or_default(),
        resources: TaskResources {
            cpu_mhz: task.resources.cpu,
            memory_mb: task.resources.memory_mb,
            memory_max_mb: task.resources.memory_max_mb,
        },
        templates: task.templates.clone(),
    }
}

/// The task's artifacts as a hook is handed them: every string interpolated in the task's
/// environment (as Nomad's artifact hook does), maps sorted by key.
fn artifacts(task: &crate::jobspec::Task, env: &TaskEnv) -> Vec<Artifact> {
    let map = |m: &std::collections::BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| (k.clone(), env.interpolate(v)))
            .collect()
    };
    task.artifacts
        .iter()
        .map(|a| Artifact {
            source: env.interpolate(&a.getter_source),
            destination: env.interpolate(&a.relative_dest),
            mode: a.getter_mode.clone(),
            options: map(&a.getter_options),
            headers: map(&a.getter_headers),
        })
        .collect()
}

/// What the hook's host calls see of the task: its environment so far, its devices, its
/// directories (preopened with the `task_dir` grant), its workload identity (which
/// variables it may read) and its artifacts.
pub(crate) fn context(view: TaskView<'_>, inv: Option<&Invocation>) -> Option<Arc<TaskContext>> {
    let inv = inv?;
    let job = &view.alloc.job;
    let env = inv.env.build();
    Some(Arc::new(TaskContext {
        artifacts: artifacts(view.task, &env),
        env,
        reservations: inv.reservations.clone(),
        files: Some(TaskFiles {
            task_dir: inv.dirs.task_dir.clone(),
            alloc_dir: inv.dirs.alloc_dir.clone(),
        }),
        workload: Some(WorkloadIdentity {
            namespace: job.namespace.clone(),
            job_id: job.id_for_workload_identity().to_string(),
            group: view.group.name.clone(),
            task: view.task.name.clone(),
        }),
        // Hooks do not import `process`.
        paths: None,
    }))
}

fn failure(e: HookError) -> HookFailure {
    HookFailure::setup(e.to_string(), e.recoverable())
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
            let task = hook_task(req.view, Some(inv));
            // A hook that fetches artifacts is told as Nomad's artifact hook: an event as it
            // begins, and its failure is `Failed Artifact Download`, always recoverable.
            let fetching =
                !req.view.task.artifacts.is_empty() && self.hooks.fetches_artifacts(&self.name);
            if fetching {
                (req.emit)(TaskEvent::new(
                    TaskEventType::DownloadingArtifacts,
                    "Client is downloading artifacts",
                ));
            }
            let answer = self
                .hooks
                .prestart(
                    &self.name,
                    &task,
                    context(req.view, Some(inv)),
                    &req.previous.data,
                )
                .await
                .map_err(|e| match fetching {
                    true => HookFailure {
                        message: e.to_string(),
                        recoverable: true,
                        kind: TaskEventType::ArtifactDownloadFailed,
                    },
                    false => failure(e),
                })?;
            Ok(PrestartResponse {
                env: answer.env,
                state: answer.state,
                done: answer.done,
            })
        })
    }

    fn poststart<'a>(&'a self, req: &'a PoststartRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async move {
            let task = hook_task(req.view, Some(req.invocation));
            self.hooks
                .poststart(&self.name, &task, context(req.view, Some(req.invocation)))
                .await
                .map_err(failure)
        })
    }

    fn exited<'a>(&'a self, req: &'a ExitedRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async move {
            let task = hook_task(req.view, Some(req.invocation));
            self.hooks
                .exited(
                    &self.name,
                    &task,
                    req.exit,
                    context(req.view, Some(req.invocation)),
                )
                .await
                .map_err(failure)
        })
    }

    fn stop<'a>(&'a self, req: &'a StopRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async move {
            let task = hook_task(req.view, req.invocation);
            self.hooks
                .stop(
                    &self.name,
                    &task,
                    &req.state.data,
                    context(req.view, req.invocation),
                )
                .await
                .map_err(failure)
        })
    }

    fn update<'a>(&'a self, req: &'a UpdateRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async move {
            let task = hook_task(req.view, req.invocation);
            self.hooks
                .update(&self.name, &task, context(req.view, req.invocation))
                .await
                .map_err(failure)
        })
    }
}
