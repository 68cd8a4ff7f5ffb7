//! The hook manager: WASM hook components (the `hook` world) and which tasks they attach
//! to. The task runner's `wasm` hook calls a hook through it in every phase.
//!
//! Which hooks a task gets comes from the agent config (`hook "<name>" { all_tasks = true }`
//! or `drivers = [...]`) and from the job's meta (`paddock.hooks = "a,b"`); a task with
//! `artifact` blocks also gets the `artifact` hook, and one with `template` blocks the
//! `template` hook. They run after the built-in hooks, in `order`, then by name; hooks
//! without a matching `hook` block come last, by name, then `artifact`, then `template`.
//!
//! Files: this one (attachments), `client.rs` (the plugin client, the only code here that
//! sees the bindings, with the host types it converts to).

mod client;

pub use client::{HookError, HookTask, Prestart};

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::HookAttach;
use crate::jobspec::{Job, Task, TaskGroup};
use crate::runtime::Runtime;

/// Job meta key listing hooks a job asks for.
pub const JOB_META_KEY: &str = "paddock.hooks";

/// Attachments by run order: `order`, then name.
fn ordered(attach: &BTreeMap<String, HookAttach>) -> Vec<(String, HookAttach)> {
    let mut list: Vec<(String, HookAttach)> =
        attach.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    list.sort_by(|a, b| (a.1.order, &a.0).cmp(&(b.1.order, &b.0)));
    list
}

/// The hook that renders `template` blocks; attached to every task that has one.
pub const TEMPLATE_HOOK: &str = "template";

/// The hook that fetches `artifact` blocks; attached to every task that has one.
pub const ARTIFACT_HOOK: &str = crate::config::artifact::HOOK;

/// The host interface a hook that fetches artifacts imports: its prestart is told as
/// Nomad's artifact hook is (`Downloading Artifacts`, `Failed Artifact Download`).
const ARTIFACTS_INTERFACE: &str = "paddock:plugin/artifacts@";

/// The hook components and their configured attachments.
pub struct HookManager {
    runtime: Arc<Runtime>,
    /// By run order; replaced as a whole by a config reload.
    attach: std::sync::RwLock<Vec<(String, HookAttach)>>,
}

impl HookManager {
    /// Hooks of `runtime`, attached per the agent config.
    pub fn new(runtime: Arc<Runtime>, attach: &BTreeMap<String, HookAttach>) -> Arc<Self> {
        Arc::new(Self {
            runtime,
            attach: std::sync::RwLock::new(ordered(attach)),
        })
    }

    /// Replace the attachments (a config reload); tasks that start from now on get them.
    pub fn set_attachments(&self, attach: &BTreeMap<String, HookAttach>) {
        *self.attach.write().unwrap() = ordered(attach);
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
            .read()
            .unwrap()
            .iter()
            .filter(|(name, a)| {
                a.all_tasks || a.drivers.contains(&task.driver) || asked.contains(name)
            })
            .map(|(name, _)| name.clone())
            .collect();
        // Hooks a job asks for without a `hook` block run after the configured ones; so
        // does the template hook for a task with `template` blocks, as in Nomad.
        let mut asked = asked;
        asked.sort();
        // Artifacts before templates: a template may read a file an artifact brought.
        if !task.artifacts.is_empty() {
            asked.push(ARTIFACT_HOOK.to_string());
        }
        if !task.templates.is_empty() {
            asked.push(TEMPLATE_HOOK.to_string());
        }
        let mut extra: Vec<String> = Vec::new();
        for n in asked {
            if !out.contains(&n) && !extra.contains(&n) {
                extra.push(n);
            }
        }
        out.extend(extra);
        out
    }

    /// Whether the loaded hook `name` fetches artifacts (imports the `artifacts` interface).
    pub fn fetches_artifacts(&self, name: &str) -> bool {
        self.runtime
            .registry
            .get(crate::runtime::World::Hook, name)
            .is_some_and(|c| c.imports.iter().any(|i| i.starts_with(ARTIFACTS_INTERFACE)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(driver: &str, hooks: Option<&str>, template: bool) -> (Job, TaskGroup, Task) {
        let job = serde_json::json!({
            "ID": "j",
            "Meta": hooks.map(|h| serde_json::json!({ JOB_META_KEY: h })).unwrap_or_default(),
            "TaskGroups": [{"Name": "g", "Tasks": [{
                "Name": "t",
                "Driver": driver,
                "Templates": if template {
                    serde_json::json!([{"EmbeddedTmpl": "x", "DestPath": "local/x"}])
                } else {
                    serde_json::json!([])
                },
            }]}],
        });
        let job = crate::jobspec::parse_job_json(job.to_string().as_bytes()).unwrap();
        let group = job.task_groups[0].clone();
        let task = group.tasks[0].clone();
        (job, group, task)
    }

    #[test]
    fn configured_hooks_in_order_then_asked_ones_by_name_then_template() {
        let rt = crate::runtime::Runtime::new(Default::default()).unwrap();
        let attach: BTreeMap<String, HookAttach> = [
            (
                "b-all".to_string(),
                HookAttach {
                    order: 1,
                    all_tasks: true,
                    drivers: vec![],
                },
            ),
            (
                "a-all".to_string(),
                HookAttach {
                    order: 1,
                    all_tasks: true,
                    drivers: vec![],
                },
            ),
            (
                "first".to_string(),
                HookAttach {
                    order: 0,
                    all_tasks: false,
                    drivers: vec!["raw_exec".into()],
                },
            ),
            (
                "asked".to_string(),
                HookAttach {
                    order: -1,
                    all_tasks: false,
                    drivers: vec![],
                },
            ),
        ]
        .into();
        let hooks = HookManager::new(rt, &attach);
        let (j, g, t) = task("raw_exec", None, false);
        assert_eq!(hooks.for_task(&j, &g, &t), ["first", "a-all", "b-all"]);
        let (j, g, t) = task("mock", Some("zeta, asked,zeta"), true);
        assert_eq!(
            hooks.for_task(&j, &g, &t),
            ["asked", "a-all", "b-all", "zeta", "template"]
        );
    }
}
