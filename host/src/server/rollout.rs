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

use super::planned::Plan;
use crate::client::snapshot::{ClientSnapshot, LiveAlloc};
use crate::jobspec::{JobType, UpdateStrategy};
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
    let d = running.unwrap_or_else(|| Deployment {
        id: uuid::Uuid::new_v4().to_string(),
        namespace: plan.job.namespace.clone(),
        job_id: plan.job.id.clone(),
        status: deployment::RUNNING.into(),
        status_description: deployment::desc::RUNNING.into(),
        eval_priority: plan.job.priority,
        ..Default::default()
    });
    let mut step = Step {
        // After a stop, what still runs is on its way out: replaced at once, no canaries.
        stopped_before: plan.existing.as_ref().is_none_or(|e| e.stop),
        rolls: d.status == deployment::RUNNING,
        failed: d.status == deployment::FAILED,
        fresh,
        now: snap.now,
        d,
    };
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
        step.group(plan, snap, &name, count, &u);
    }
    if !step.d.task_groups.is_empty() {
        plan.deployment = Some(step.d);
        plan.new_deployment = fresh;
    }
}

/// One plan's step of a deployment, group by group.
struct Step {
    /// The deployment (new, or the running one), its groups as planned.
    d: Deployment,
    fresh: bool,
    /// It is running: it may place canaries and replace allocations.
    rolls: bool,
    failed: bool,
    /// The job was stopped before this version.
    stopped_before: bool,
    now: u64,
}

impl Step {
    /// Sort group `name`'s old allocations: replaced now, left for later, stopped for a
    /// promoted canary; canaries to place.
    fn group(
        &mut self,
        plan: &mut Plan,
        snap: &ClientSnapshot,
        name: &str,
        count: u32,
        u: &UpdateStrategy,
    ) {
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
        if self.stopped_before {
            plan.destructive.append(&mut old);
        }
        let current: Vec<LiveAlloc> = plan
            .keep
            .iter()
            .filter(|k| !k.in_place && k.alloc.group == name)
            .map(|k| k.alloc.clone())
            .collect();
        let in_place = plan
            .keep
            .iter()
            .filter(|k| k.in_place && k.alloc.group == name)
            .count();
        let live = current.len() + in_place + old.len();
        let changes = !old.is_empty() || in_place > 0 || (live as u32) < count;
        if !self.d.task_groups.contains_key(name) {
            if !(self.fresh && changes) {
                // Not in the deployment: replaced at once, as without one.
                plan.destructive.extend(old);
                return;
            }
            let state = self.new_state(u, count, !old.is_empty());
            self.d.task_groups.insert(name.to_string(), state);
        }
        let id = self.d.id.clone();
        let canaries: BTreeSet<u32> = current
            .iter()
            .filter(|a| a.canary && a.deployment_id == id)
            .map(|a| a.index)
            .collect();
        let state = &self.d.task_groups[name];
        if state.desired_canaries > 0 && !state.promoted {
            let desired = state.desired_canaries as usize;
            self.canaries(plan, name, old, &canaries, desired);
        } else {
            let limit = u.max_parallel as usize;
            self.rolling(plan, snap, name, old, &current, &canaries, limit);
        }
    }

    /// Before the promotion: the canaries still missing are placed beside the old
    /// allocations, which all wait (a failed deployment's canaries stop).
    fn canaries(
        &self,
        plan: &mut Plan,
        name: &str,
        old: Vec<LiveAlloc>,
        canaries: &BTreeSet<u32>,
        desired: usize,
    ) {
        let want = if self.rolls {
            desired.saturating_sub(canaries.len())
        } else {
            0
        };
        if self.failed {
            let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut plan.keep)
                .into_iter()
                .partition(|k| k.alloc.group == name && k.alloc.canary);
            plan.keep = kept;
            plan.stop.extend(gone.into_iter().map(|k| k.alloc));
        }
        plan.canary_at.extend(
            old.iter()
                .filter(|o| !canaries.contains(&o.index))
                .take(want)
                .map(|o| (name.to_string(), o.index)),
        );
        plan.waiting.extend(old);
    }

    /// Promoted, or without canaries: each promoted canary takes its old allocation's
    /// place; of the rest, as many are replaced as `max_parallel` less the deployment's
    /// allocations not yet healthy, and none once one ended unhealthy.
    #[allow(clippy::too_many_arguments)]
    fn rolling(
        &self,
        plan: &mut Plan,
        snap: &ClientSnapshot,
        name: &str,
        old: Vec<LiveAlloc>,
        current: &[LiveAlloc],
        canaries: &BTreeSet<u32>,
        max_parallel: usize,
    ) {
        let id = &self.d.id;
        let (replaced, rest): (Vec<_>, Vec<_>) =
            old.into_iter().partition(|o| canaries.contains(&o.index));
        plan.stop.extend(replaced);
        let in_flight = current
            .iter()
            .filter(|a| &a.deployment_id == id && a.healthy != Some(true))
            .count();
        // An allocation of this deployment that ended without turning healthy stops the
        // roll-out, before the watcher has failed the deployment for it.
        let broken = snap
            .ended
            .iter()
            .any(|e| e.group == name && &e.deployment_id == id && e.healthy != Some(true));
        let limit = if self.rolls && !broken {
            max_parallel.saturating_sub(in_flight)
        } else {
            0
        };
        let mut rest = rest.into_iter();
        plan.destructive.extend(rest.by_ref().take(limit));
        plan.waiting.extend(rest);
    }

    /// A group's state in a new deployment: its total, its canaries when it replaces
    /// something, its progress deadline from now.
    fn new_state(&self, u: &UpdateStrategy, count: u32, replaces: bool) -> DeploymentState {
        DeploymentState {
            auto_revert: u.auto_revert,
            auto_promote: u.auto_promote,
            progress_deadline: u.progress_deadline,
            require_progress_by: if u.progress_deadline > 0 {
                self.now.saturating_add(u.progress_deadline)
            } else {
                0
            },
            desired_canaries: if replaces { u.canary } else { 0 },
            desired_total: count,
            ..Default::default()
        }
    }
}
