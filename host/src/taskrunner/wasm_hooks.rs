//! The one adapter through which WASM hook components run for tasks.
//!
//! Which hooks a task gets comes from the agent config (`hook "<name>" { all_tasks = true }`
//! or `drivers = [...]`) and from the job's meta (`paddock.hooks = "a,b"`); they run after
//! the built-in hooks, in `order`, then by name. A hook's state (done flag, data, env) is
//! persisted only when it changes; a done hook is skipped but its env is still applied.
//! Hook env merges in each hook's first-run order and the last writer wins.

use std::collections::BTreeMap;
use std::sync::Arc;

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

/// The configured hook attachments.
pub struct HookSet {
    runtime: Arc<Runtime>,
    attach: Vec<(String, HookAttach)>,
}

/// Why prestart hooks stopped the task.
pub struct HookFailure {
    /// Message for the "Setup Failure" event; names the hook.
    pub message: String,
    /// Whether trying again may help.
    pub recoverable: bool,
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
        // Hooks a job asks for without a `hook` block run after the configured ones.
        let mut extra: Vec<String> = asked.into_iter().filter(|n| !out.contains(n)).collect();
        extra.sort();
        extra.dedup();
        out.extend(extra);
        out
    }

    /// Run one hook's prestart. `Ok(None)` means the stored state is unchanged.
    pub async fn prestart(
        &self,
        name: &str,
        info: &TaskInfo,
        ctx: Arc<TaskContext>,
        previous: &HookState,
    ) -> Result<HookState, HookFailure> {
        let Some(comp) = self.runtime.registry.get(World::Hook, name) else {
            return Err(HookFailure {
                message: format!("hook {name:?} is not loaded (is it in the --hooks folder?)"),
                recoverable: false,
            });
        };
        let req = PrestartRequest {
            task: info.clone(),
            previous_state: previous.data.clone().into_iter().collect(),
        };
        let answer = self
            .runtime
            .call_hook(&comp, Some(ctx), "prestart", move |h, s| {
                Box::pin(async move { h.paddock_plugin_task_hook().call_prestart(s, &req).await })
            })
            .await;
        match answer {
            Ok(Ok(resp)) => Ok(HookState {
                prestart_done: resp.done,
                data: resp.state.into_iter().collect(),
                env: resp.env.into_iter().collect(),
            }),
            Ok(Err(HookError::Refused(m))) => Err(HookFailure {
                message: format!("hook {name:?} refused the task: {m}"),
                recoverable: false,
            }),
            Ok(Err(HookError::InvalidConfig(fields))) => Err(HookFailure {
                message: format!(
                    "hook {name:?} has an invalid config: {}",
                    fields
                        .iter()
                        .map(|f| format!("{}: {}", f.field, f.message))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                recoverable: false,
            }),
            Ok(Err(HookError::Failed(m))) => Err(HookFailure {
                message: format!("hook {name:?} failed: {m}"),
                recoverable: true,
            }),
            Err(e) => Err(HookFailure {
                message: format!("hook {name:?}: {e}"),
                recoverable: false,
            }),
        }
    }

    /// Tell hooks the task exited; failures are logged, as Nomad does for exited hooks.
    pub async fn exited(&self, names: &[String], info: &TaskInfo, exit: &ExitResult) {
        for name in names {
            let Some(comp) = self.runtime.registry.get(World::Hook, name) else {
                continue;
            };
            let (info, exit) = (info.clone(), exit.clone());
            let r = self
                .runtime
                .call_hook(&comp, None, "exited", move |h, s| {
                    Box::pin(async move {
                        h.paddock_plugin_task_hook()
                            .call_exited(s, &info, &exit)
                            .await
                    })
                })
                .await;
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(hook = %name, error = ?e, "exited hook failed"),
                Err(e) => tracing::warn!(hook = %name, error = %e, "exited hook failed"),
            }
        }
    }
}
