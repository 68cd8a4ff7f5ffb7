//! Which WASM hook components a task gets, and the calls into them (the task-runner side
//! of each is [`super::hooks::wasm::WasmHook`]).
//!
//! Which hooks a task gets comes from the agent config (`hook "<name>" { all_tasks = true }`
//! or `drivers = [...]`) and from the job's meta (`paddock.hooks = "a,b"`); a task with
//! `template` blocks also gets the `template` hook. They run after the built-in hooks, in
//! `order`, then by name; hooks without a matching `hook` block come last. A hook's state (done flag, data, env) is
//! persisted only when it changes; a done hook is skipped but its env is still applied.
//! Hook env merges in each hook's first-run order and the last writer wins.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::interfaces::{HookFailure, HookResult, PrestartResponse};
use crate::config::HookAttach;
use crate::jobspec::{Job, Task, TaskGroup};
use crate::runtime::bindings::v0_1_0::hook::exports::paddock::plugin::task_hook::{
    HookError, PrestartRequest, TaskInfo,
};
use crate::runtime::bindings::v0_1_0::types::ExitResult;
use crate::runtime::{Runtime, TaskContext, World};
use crate::state::HookState;

/// Job meta key listing hooks a job asks for.
pub const JOB_META_KEY: &str = "paddock.hooks";

/// The hook that renders `template` blocks; attached to every task that has one.
pub const TEMPLATE_HOOK: &str = "template";

/// The configured hook attachments.
pub struct HookSet {
    runtime: Arc<Runtime>,
    attach: Vec<(String, HookAttach)>,
}

impl HookSet {
    /// Attachments from the agent config.
    pub fn new(runtime: Arc<Runtime>, attach: &BTreeMap<String, HookAttach>) -> Arc<Self> {
        let mut list: Vec<(String, HookAttach)> =
            attach.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        list.sort_by(|a, b| (a.1.order, &a.0).cmp(&(b.1.order, &b.0)));
        Arc::new(Self {
            runtime,
            attach: list,
        })
    }

    /// The hooks for a task, in run order.
    pub fn for_task(&self, job: &Job, group: &TaskGroup, task: &Task) -> Vec<String> {
        let mut meta = job.meta.clone();
        meta.extend(group.meta.clone());
        meta.extend(task.meta.clone());
        let asked: Vec<String> = meta
            .get(JOB_META_KEY)
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let mut out: Vec<String> = self
            .attach
            .iter()
            .filter(|(name, a)| {
                a.all_tasks || a.drivers.contains(&task.driver) || asked.contains(name)
            })
            .map(|(name, _)| name.clone())
            .collect();
        // Hooks a job asks for without a `hook` block run after the configured ones; so
        // does the template hook for a task with `template` blocks, as in Nomad.
        let mut asked = asked;
        if !task.templates.is_empty() {
            asked.push(TEMPLATE_HOOK.to_string());
        }
        let mut extra: Vec<String> = asked.into_iter().filter(|n| !out.contains(n)).collect();
        extra.sort();
        extra.dedup();
        out.extend(extra);
        out
    }

    fn component(&self, name: &str) -> HookResult<Arc<crate::runtime::LoadedComponent>> {
        self.runtime.registry.get(World::Hook, name).ok_or_else(|| {
            HookFailure::setup(
                format!("hook {name:?} is not loaded (is it in the --hooks folder?)"),
                false,
            )
        })
    }

    /// Run one hook's prestart.
    pub async fn prestart(
        &self,
        name: &str,
        info: &TaskInfo,
        ctx: Option<Arc<TaskContext>>,
        previous: &HookState,
    ) -> HookResult<PrestartResponse> {
        let comp = self.component(name)?;
        let req = PrestartRequest {
            task: info.clone(),
            previous_state: previous.data.clone().into_iter().collect(),
        };
        let answer = self
            .runtime
            .call_hook(&comp, ctx, "prestart", move |h, s| {
                Box::pin(async move { h.paddock_plugin_task_hook().call_prestart(s, &req).await })
            })
            .await;
        let resp = answer_of(name, answer)?;
        Ok(PrestartResponse {
            env: resp.env.into_iter().collect(),
            state: resp.state.into_iter().collect(),
            done: resp.done,
        })
    }

    /// Run one hook's poststart.
    pub async fn poststart(
        &self,
        name: &str,
        info: TaskInfo,
        ctx: Option<Arc<TaskContext>>,
    ) -> HookResult {
        let comp = self.component(name)?;
        let r = self
            .runtime
            .call_hook(&comp, ctx, "poststart", move |h, s| {
                Box::pin(async move { h.paddock_plugin_task_hook().call_poststart(s, &info).await })
            })
            .await;
        answer_of(name, r)
    }

    /// Tell one hook the task exited.
    pub async fn exited(
        &self,
        name: &str,
        info: TaskInfo,
        exit: ExitResult,
        ctx: Option<Arc<TaskContext>>,
    ) -> HookResult {
        let comp = self.component(name)?;
        let r = self
            .runtime
            .call_hook(&comp, ctx, "exited", move |h, s| {
                Box::pin(async move {
                    h.paddock_plugin_task_hook()
                        .call_exited(s, &info, &exit)
                        .await
                })
            })
            .await;
        answer_of(name, r)
    }

    /// Tell one hook the task is done for good, with the state it stored.
    pub async fn stop(
        &self,
        name: &str,
        info: TaskInfo,
        state: &HookState,
        ctx: Option<Arc<TaskContext>>,
    ) -> HookResult {
        let comp = self.component(name)?;
        let data: Vec<(String, String)> = state.data.clone().into_iter().collect();
        let r = self
            .runtime
            .call_hook(&comp, ctx, "stop", move |h, s| {
                Box::pin(async move {
                    h.paddock_plugin_task_hook()
                        .call_stop(s, &info, &data)
                        .await
                })
            })
            .await;
        answer_of(name, r)
    }

    /// Tell one hook the allocation was updated in place.
    pub async fn update(
        &self,
        name: &str,
        info: TaskInfo,
        ctx: Option<Arc<TaskContext>>,
    ) -> HookResult {
        let comp = self.component(name)?;
        let r = self
            .runtime
            .call_hook(&comp, ctx, "update", move |h, s| {
                Box::pin(async move { h.paddock_plugin_task_hook().call_update(s, &info).await })
            })
            .await;
        answer_of(name, r)
    }
}

/// A hook's answer, or why it failed, naming the hook. A refusal or a bad config will not
/// go away on a retry; a plain failure may.
fn answer_of<T>(
    name: &str,
    answer: Result<Result<T, HookError>, crate::runtime::CallError>,
) -> HookResult<T> {
    match answer {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(HookError::Refused(m))) => Err(HookFailure::setup(
            format!("hook {name:?} refused the task: {m}"),
            false,
        )),
        Ok(Err(HookError::InvalidConfig(fields))) => Err(HookFailure::setup(
            format!(
                "hook {name:?} has an invalid config: {}",
                fields
                    .iter()
                    .map(|f| format!("{}: {}", f.field, f.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            false,
        )),
        Ok(Err(HookError::Failed(m))) => Err(HookFailure::setup(
            format!("hook {name:?} failed: {m}"),
            true,
        )),
        Err(e) => Err(HookFailure::setup(format!("hook {name:?}: {e}"), false)),
    }
}
