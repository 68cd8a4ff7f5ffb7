//! Calls into hook components: the hook world's plugin client, the only code of the hook
//! manager that sees a contract version's bindings. The task runner describes the task in a
//! host-owned [`HookTask`]; answers and failures come back as [`Prestart`] and
//! [`HookError`], each failure naming the hook.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::HookManager;
use crate::drivermanager::types::{ExitResult, TaskResources};
use crate::jobspec::Template;
use crate::runtime::bindings::v0_1::hook::exports::paddock::plugin::task_hook as wit;
use crate::runtime::bindings::v0_1::types as wit_types;
use crate::runtime::types::FieldError;
use crate::runtime::{CallError, LoadedComponent, TaskContext, World, bounds};

/// What a hook is told about the task.
#[derive(Debug, Clone, Default)]
pub struct HookTask {
    /// Allocation id.
    pub alloc_id: String,
    /// Job id.
    pub job_id: String,
    /// Group name.
    pub group_name: String,
    /// Task name.
    pub task_name: String,
    /// Driver name.
    pub driver: String,
    /// The task's `config` block, as JSON.
    pub driver_config: String,
    /// Job, group and task meta merged (task wins).
    pub meta: BTreeMap<String, String>,
    /// The task's directory, once built.
    pub task_dir: String,
    pub resources: TaskResources,
    /// The task's `template` blocks.
    pub templates: Vec<Template>,
}

/// A hook's prestart answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prestart {
    /// Env the hook sets.
    pub env: BTreeMap<String, String>,
    /// State the hook wants back on its next prestart and on stop.
    pub state: BTreeMap<String, String>,
    /// Prestart need not run again for this task.
    pub done: bool,
}

/// Why a hook call failed, naming the hook.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HookError {
    /// No hook of that name is loaded.
    #[error("hook {0:?} is not loaded (is it in the --hooks folder?)")]
    NotLoaded(String),
    /// The hook refused the task.
    #[error("hook {hook:?} refused the task: {message}")]
    Refused { hook: String, message: String },
    /// The hook's own config is invalid.
    #[error("hook {hook:?} has an invalid config: {}", fields.iter().map(|f| format!("{}: {}", f.field, f.message)).collect::<Vec<_>>().join("; "))]
    InvalidConfig {
        hook: String,
        /// The bad fields.
        fields: Vec<FieldError>,
    },
    /// The hook tried and failed.
    #[error("hook {hook:?} failed: {message}")]
    Failed {
        hook: String,
        /// What went wrong.
        message: String,
    },
    /// The hook's component failed (trap, memory, deadline).
    #[error("hook {hook:?}: {error}")]
    Component {
        hook: String,
        /// The call's failure.
        error: CallError,
    },
    /// The hook returned what the host does not let it (a loader variable in the task's
    /// environment without the grant, an answer past a bound).
    #[error("hook {hook:?} {message}")]
    Denied {
        hook: String,
        /// What it returned, and what would allow it.
        message: String,
    },
}

impl HookError {
    /// Whether trying again may help: only a hook's own plain failure. A refusal, a bad
    /// config or a broken component will not go away on a retry.
    pub fn recoverable(&self) -> bool {
        matches!(self, HookError::Failed { .. })
    }
}

impl HookManager {
    fn component(&self, name: &str) -> Result<Arc<LoadedComponent>, HookError> {
        self.runtime
            .registry
            .get(World::Hook, name)
            .ok_or_else(|| HookError::NotLoaded(name.to_string()))
    }

    /// Run one hook's prestart, with the state it stored last time.
    pub async fn prestart(
        &self,
        name: &str,
        task: &HookTask,
        ctx: Option<Arc<TaskContext>>,
        previous: &BTreeMap<String, String>,
    ) -> Result<Prestart, HookError> {
        let comp = self.component(name)?;
        let req = wit::PrestartRequest {
            task: task_info(task),
            previous_state: previous.clone().into_iter().collect(),
        };
        let answer = self
            .runtime
            .call_hook(&comp, ctx, "prestart", move |h, s| {
                Box::pin(async move {
                    // Denials of an earlier call on this store are not this one's.
                    s.data().take_network_denials();
                    let answer = h
                        .paddock_plugin_task_hook()
                        .call_prestart(&mut *s, &req)
                        .await?;
                    Ok((answer, s.data().take_network_denials()))
                })
            })
            .await;
        // A hook that failed after the host refused it a connection or a request fails
        // with the host's words (which name the grant), not only its own.
        let (answer, denials) = match answer {
            Ok((a, d)) => (Ok(a), d),
            Err(e) => (Err(e), Vec::new()),
        };
        let resp = match (answer_of(name, answer), denials.last()) {
            (Err(e @ (HookError::Failed { .. } | HookError::Refused { .. })), Some(denial)) => {
                return Err(HookError::Denied {
                    hook: name.to_string(),
                    message: format!("was refused by the host: {denial} ({e})"),
                });
            }
            (r, _) => r?,
        };
        let denied = |message: String| HookError::Denied {
            hook: name.to_string(),
            message,
        };
        // A hook's env reaches every process of the task: a loader variable there would
        // run the hook's code in them (`LD_PRELOAD` of a file it wrote in the task dir).
        if let Some((k, _)) = resp.env.iter().find(|(k, _)| !comp.grants().allows_env(k)) {
            return Err(denied(format!(
                "may not set {k} in a task's environment: loader and interpreter variables run code of their own and need plugin {name:?} {{ grant {{ loader_env = [{k:?}] }} }}"
            )));
        }
        if resp.env.len() > bounds::HOOK_ENV_ENTRIES
            || resp
                .env
                .iter()
                .any(|(k, v)| k.len() > bounds::KEY || v.len() > bounds::HOOK_ENV_VALUE)
        {
            return Err(denied(format!(
                "returned an env of {} variables, over the limits of {} variables, names of {} bytes and values of {} bytes",
                resp.env.len(),
                bounds::HOOK_ENV_ENTRIES,
                bounds::KEY,
                bounds::HOOK_ENV_VALUE
            )));
        }
        let state_bytes: usize = resp.state.iter().map(|(k, v)| k.len() + v.len()).sum();
        if state_bytes > bounds::HOOK_STATE {
            return Err(denied(format!(
                "returned {state_bytes} bytes of state, over the limit of {} bytes",
                bounds::HOOK_STATE
            )));
        }
        Ok(Prestart {
            env: resp.env.into_iter().collect(),
            state: resp.state.into_iter().collect(),
            done: resp.done,
        })
    }

    /// Run one hook's poststart.
    pub async fn poststart(
        &self,
        name: &str,
        task: &HookTask,
        ctx: Option<Arc<TaskContext>>,
    ) -> Result<(), HookError> {
        let comp = self.component(name)?;
        let info = task_info(task);
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
        task: &HookTask,
        exit: &ExitResult,
        ctx: Option<Arc<TaskContext>>,
    ) -> Result<(), HookError> {
        let comp = self.component(name)?;
        let info = task_info(task);
        let exit = wit_types::ExitResult::from(exit.clone());
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
        task: &HookTask,
        state: &BTreeMap<String, String>,
        ctx: Option<Arc<TaskContext>>,
    ) -> Result<(), HookError> {
        let comp = self.component(name)?;
        let info = task_info(task);
        let data: Vec<(String, String)> = state.clone().into_iter().collect();
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
        task: &HookTask,
        ctx: Option<Arc<TaskContext>>,
    ) -> Result<(), HookError> {
        let comp = self.component(name)?;
        let info = task_info(task);
        let r = self
            .runtime
            .call_hook(&comp, ctx, "update", move |h, s| {
                Box::pin(async move { h.paddock_plugin_task_hook().call_update(s, &info).await })
            })
            .await;
        answer_of(name, r)
    }
}

fn task_info(t: &HookTask) -> wit::TaskInfo {
    wit::TaskInfo {
        alloc_id: t.alloc_id.clone(),
        job_id: t.job_id.clone(),
        group_name: t.group_name.clone(),
        task_name: t.task_name.clone(),
        driver: t.driver.clone(),
        driver_config: t.driver_config.clone(),
        meta: t.meta.clone().into_iter().collect(),
        task_dir: t.task_dir.clone(),
        resources: wit_types::TaskResources {
            cpu_mhz: t.resources.cpu_mhz,
            memory_mb: t.resources.memory_mb,
            memory_max_mb: t.resources.memory_max_mb,
        },
        templates: t
            .templates
            .iter()
            .map(|t| wit::Template {
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

/// A hook's answer, or why it failed, naming the hook.
fn answer_of<T>(
    name: &str,
    answer: Result<Result<T, wit::HookError>, CallError>,
) -> Result<T, HookError> {
    let hook = name.to_string();
    let m = |s: String| bounds::text(s, bounds::MESSAGE);
    match answer {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(wit::HookError::Refused(message))) => Err(HookError::Refused {
            hook,
            message: m(message),
        }),
        Ok(Err(wit::HookError::InvalidConfig(fields))) => Err(HookError::InvalidConfig {
            hook,
            fields: fields
                .into_iter()
                .take(bounds::ENTRIES)
                .map(|f| FieldError {
                    field: bounds::text(f.field, bounds::KEY),
                    message: m(f.message),
                })
                .collect(),
        }),
        Ok(Err(wit::HookError::Failed(message))) => Err(HookError::Failed {
            hook,
            message: m(message),
        }),
        Err(error) => Err(HookError::Component { hook, error }),
    }
}
