//! The deployment part of a plan (Nomad's reconciler, for one node): once
//! [`super::plan`] has sorted a service job's live allocations, each group with an
//! `update` strategy that deploys (`max_parallel > 0`) gets its old version replaced
//! in steps:
//!
//! - a new version starts a deployment; each group with something to change is in it;
//! - with `canary = N`, N new allocations are placed beside the old ones, which all keep
//!   running until the canaries are promoted; then each old allocation a canary stands
//!   beside stops, and the rest roll;
//! - rolling replaces at most `max_parallel` allocations at a time: as many as
//!   `max_parallel` less the deployment's allocations not yet healthy;
//! - a paused deployment replaces nothing more; a failed one neither, and its canaries
//!   that were never promoted are stopped; neither does one with an allocation that
//!   ended without turning healthy (the watcher is about to fail it).
//!
//! Pure, like the rest of the planner: it reads the plan and the snapshot's deployment.

use std::collections::BTreeSet;

use super::plan::{ClientSnapshot, LiveAlloc, Plan};
use crate::jobspec::JobType;
use crate::structs::deployment::{self, Deployment, DeploymentState};

/// Roll the plan's destructive updates out under a deployment. `spec_changed`: the job is
/// a new version (a new deployment); else the latest deployment of its version goes on.
pub(super) fn roll(plan: &mut Plan, snap: &ClientSnapshot, spec_changed: bool) {
    if plan.job.job_type != JobType::Service {
        return;
    }
    let version = plan.existing.as_ref().map(|e| e.state.version);
    let running = if spec_changed {
        None
    } else {
        snap.deployment
            .clone()
            .filter(|d| Some(d.job_version) == version)
    };
    // An unchanged job without a deployment of its version (it had nothing to roll out,
    // or it was registered before deployments) goes on without one.
    if !spec_changed && running.is_none() {
        return;
    }
    let fresh = running.is_none();
    let mut d = running.unwrap_or_else(|| Deployment {
        id: uuid::Uuid::new_v4().to_string(),
        namespace: plan.job.namespace.clone(),
        job_id: plan.job.id.clone(),
        status: deployment::RUNNING.into(),
        status_description: deployment::desc::RUNNING.into(),
        eval_priority: plan.job.priority,
        ..Default::default()
    });
    // After a stop, what still runs is on its way out: replaced at once, no canaries.
    let stopped_before = plan.existing.as_ref().is_none_or(|e| e.stop);
    let rolls = d.status == deployment::RUNNING;
    let failed = d.status == deployment::FAILED;
    let groups: Vec<_> = plan
        .job
        .task_groups
        .iter()
        .filter_map(|g| {
            let u = g.update.clone().filter(|u| u.deploys())?;
            Some((g.name.clone(), plan.job.placed_count(g), u))
        })
        .collect();
    for (name, count, u) in groups {
        let mut old: Vec<LiveAlloc> = Vec::new();
        plan.destructive.retain(|a| {
            if a.group == name {
                old.push(a.clone());
                false
            } else {
                true
            }
        });
        old.sort_by_key(|a| a.index);
        let replaced_at_once = if stopped_before {
            std::mem::take(&mut old)
        } else {
            Vec::new()
        };
        let in_group = |a: &&LiveAlloc| a.group == name;
        let current: Vec<LiveAlloc> = plan
            .keep
            .iter()
            .filter(|k| !k.in_place)
            .map(|k| &k.alloc)
            .filter(in_group)
            .cloned()
            .collect();
        let in_place = plan
            .keep
            .iter()
            .filter(|k| k.in_place && k.alloc.group == name)
            .count();
        let live = current.len() + in_place + old.len();
        let changes = !old.is_empty() || in_place > 0 || (live as u32) < count;
        plan.destructive.extend(replaced_at_once);
        let state = match d.task_groups.get_mut(&name) {
            Some(s) => s,
            None if fresh && changes => {
                let progress_by = if u.progress_deadline > 0 {
                    snap.now.saturating_add(u.progress_deadline)
                } else {
                    0
                };
                d.task_groups
                    .entry(name.clone())
                    .or_insert(DeploymentState {
                        auto_revert: u.auto_revert,
                        auto_promote: u.auto_promote,
                        progress_deadline: u.progress_deadline,
                        require_progress_by: progress_by,
                        desired_canaries: if old.is_empty() { 0 } else { u.canary },
                        desired_total: count,
                        ..Default::default()
                    })
            }
            // Not in the deployment: replaced at once, as without one.
            None => {
                plan.destructive.extend(old);
                continue;
            }
        };
        let canaries: BTreeSet<u32> = current
            .iter()
            .filter(|a| a.canary && a.deployment_id == d.id)
            .map(|a| a.index)
            .collect();
        if state.desired_canaries > 0 && !state.promoted {
            if failed {
                // A failed deployment's canaries go; the old version stays.
                let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut plan.keep)
                    .into_iter()
                    .partition(|k| k.alloc.group == name && k.alloc.canary);
                plan.keep = kept;
                plan.stop.extend(gone.into_iter().map(|k| k.alloc));
            }
            let want = if rolls {
                (state.desired_canaries as usize).saturating_sub(canaries.len())
            } else {
                0
            };
            plan.canary_at.extend(
                old.iter()
                    .filter(|o| !canaries.contains(&o.index))
                    .take(want)
                    .map(|o| (name.clone(), o.index)),
            );
            plan.waiting.extend(old);
            continue;
        }
        // Promoted canaries take the places of the old allocations they stood beside.
        let (replaced, rest): (Vec<_>, Vec<_>) =
            old.into_iter().partition(|o| canaries.contains(&o.index));
        plan.stop.extend(replaced);
        let in_flight = current
            .iter()
            .filter(|a| a.deployment_id == d.id && a.healthy != Some(true))
            .count();
        // An allocation of this deployment that ended without turning healthy stops the
        // roll-out, before the watcher has failed the deployment for it.
        let broken = snap
            .ended
            .iter()
            .any(|e| e.group == name && e.deployment_id == d.id && e.healthy != Some(true));
        let limit = if rolls && !broken {
            (u.max_parallel as usize).saturating_sub(in_flight)
        } else {
            0
        };
        let mut rest = rest.into_iter();
        plan.destructive.extend(rest.by_ref().take(limit));
        plan.waiting.extend(rest);
    }
    if !d.task_groups.is_empty() {
        plan.deployment = Some(d);
        plan.new_deployment = fresh;
    }
}
