//! What a plan is: the value [`super::plan`] computes from a job, the version before and a
//! client snapshot (what it keeps, replaces, stops, places, leaves for later, and the
//! deployment it rolls out under), what it does to each group (Nomad's `DesiredUpdates`),
//! and how `/v1/job/{id}/plan` shows it. The planner and the deployment step
//! ([`super::rollout`]) fill it in; the server applies it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::client::snapshot::LiveAlloc;
use crate::evals::Failed;
use crate::jobspec::Job;
use crate::structs::AllocatedResources;

/// A live allocation the plan keeps.
#[derive(Debug, Clone)]
pub struct Kept {
    pub alloc: LiveAlloc,
    /// The job changed in a way no task sees: the allocation moves to the new job in place.
    pub in_place: bool,
}

/// One allocation to place.
#[derive(Debug, Clone)]
pub struct Placement {
    pub group: String,
    pub index: u32,
    /// What it holds: every task's CPU and memory, its ports and devices.
    pub resources: AllocatedResources,
    /// The ended allocation it replaces, if it replaces one.
    pub replaces: Option<Replaces>,
    /// Placed as a canary beside the old version's allocation at its index.
    pub canary: bool,
}

/// An ended allocation a placement replaces: a failed one rescheduled, or one stopped to
/// be replaced (`alloc stop`).
#[derive(Debug, Clone, PartialEq)]
pub struct Replaces {
    pub alloc_id: String,
    /// The replacement's reschedule tracker: the replaced one's, with this reschedule
    /// added when it is one.
    pub tracker: Option<crate::structs::RescheduleTracker>,
}

/// A failed allocation whose replacement waits for its reschedule delay.
#[derive(Debug, Clone, PartialEq)]
pub struct Followup {
    pub alloc_id: String,
    /// Its group.
    pub group: String,
    /// When the delay is over, ns since the epoch.
    pub wait_until: u64,
}

/// What registering a job would do.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The job as registered (its state is filled in when the plan is applied).
    pub job: Job,
    /// The job registered before, if any.
    pub existing: Option<Job>,
    pub keep: Vec<Kept>,
    /// Replaced: stopped, and a new allocation placed at the same index.
    pub destructive: Vec<LiveAlloc>,
    /// Stopped and not replaced.
    pub stop: Vec<LiveAlloc>,
    pub place: Vec<Placement>,
    /// Allocations that cannot be placed, per group, and why (the node is not eligible,
    /// is filtered out, or is out of a resource). They wait in a blocked evaluation.
    pub blocked: BTreeMap<String, Failed>,
    /// When planning began (the placements' `AllocationTime` counts from it).
    pub started: std::time::Instant,
    /// Failed allocations to replace later, once their reschedule delay is over.
    pub followups: Vec<Followup>,
    /// Allocations of an older version the deployment replaces later (or never, when it
    /// failed): they keep running as they are.
    pub waiting: Vec<LiveAlloc>,
    /// Canaries to place: (group, index of the old allocation they stand beside).
    pub canary_at: Vec<(String, u32)>,
    /// The deployment the plan rolls out under (new, or the running one continued), with
    /// its groups as planned.
    pub deployment: Option<crate::structs::Deployment>,
    /// The deployment is new: stored when the plan is applied.
    pub new_deployment: bool,
}

/// What a plan would do (the body of Nomad's `JobPlanResponse`).
#[derive(Debug, Clone)]
pub struct JobPlan {
    /// The registered job's modify index (0 for a new job): pass it back with
    /// `EnforceIndex` to register exactly what was planned.
    pub job_modify_index: u64,
    /// How the job differs from the registered one, when asked.
    pub diff: Option<crate::jobdiff::JobDiff>,
    /// What happens to each group's allocations.
    pub desired_updates: BTreeMap<String, DesiredUpdates>,
    /// A periodic job's next launch, ns since the epoch (0: none).
    pub next_periodic_launch: u64,
    /// Groups with allocations that cannot be placed, how many and why.
    pub failed: BTreeMap<String, Failed>,
}

/// Per group, what a plan does (Nomad's `DesiredUpdates`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct DesiredUpdates {
    /// Left as they are.
    pub ignore: u64,
    /// Placed new.
    pub place: u64,
    /// Migrated (never, on one node).
    pub migrate: u64,
    /// Stopped.
    pub stop: u64,
    /// Updated in place.
    pub in_place_update: u64,
    /// Replaced.
    pub destructive_update: u64,
    /// Canaries (no deployments on one node).
    pub canary: u64,
    /// Preempted (none).
    pub preemptions: u64,
    /// Failed allocations replaced now by their reschedule policy.
    pub reschedule_now: u64,
    /// Failed allocations to be replaced once their reschedule delay is over.
    pub reschedule_later: u64,
}

impl Plan {
    /// Whether the job's spec differs from the one registered (or none was).
    pub fn spec_changed(&self) -> bool {
        self.existing.as_ref().is_none_or(|e| !e.spec_eq(&self.job))
    }

    /// What the plan does to each group, by group name.
    pub fn desired_updates(&self) -> BTreeMap<String, DesiredUpdates> {
        let mut out: BTreeMap<String, DesiredUpdates> = self
            .job
            .task_groups
            .iter()
            .map(|g| (g.name.clone(), DesiredUpdates::default()))
            .collect();
        for k in &self.keep {
            let u = out.entry(k.alloc.group.clone()).or_default();
            if k.in_place {
                u.in_place_update += 1;
            } else {
                u.ignore += 1;
            }
        }
        for a in self.destructive.iter() {
            out.entry(a.group.clone()).or_default().destructive_update += 1;
        }
        for a in &self.waiting {
            out.entry(a.group.clone()).or_default().ignore += 1;
        }
        for a in &self.stop {
            out.entry(a.group.clone()).or_default().stop += 1;
        }
        for (g, n) in &self.blocked {
            out.entry(g.clone()).or_default().place += n.count;
        }
        for f in &self.followups {
            out.entry(f.group.clone()).or_default().reschedule_later += 1;
        }
        // A destructive update re-places at the same index: count it once.
        for p in &self.place {
            if p.replaces.as_ref().is_some_and(|r| {
                r.tracker
                    .as_ref()
                    .and_then(|t| t.events.last())
                    .is_some_and(|e| e.prev_alloc_id == r.alloc_id)
            }) {
                out.entry(p.group.clone()).or_default().reschedule_now += 1;
            }
            let replaced = self
                .destructive
                .iter()
                .any(|a| a.group == p.group && a.index == p.index);
            if p.canary {
                out.entry(p.group.clone()).or_default().canary += 1;
            } else if !replaced {
                out.entry(p.group.clone()).or_default().place += 1;
            }
        }
        out
    }
}

impl Plan {
    /// What the plan would do, as `/v1/job/{id}/plan` answers it; with `want_diff`, how the
    /// job differs from the registered one, with each group's counts of what happens.
    pub fn job_plan(&self, want_diff: bool) -> JobPlan {
        let diff = want_diff.then(|| {
            let mut d = crate::jobdiff::diff(self.existing.as_ref(), &self.job);
            for (g, u) in self.desired_updates() {
                if let Some(tg) = d.task_groups.iter_mut().find(|t| t.name == g) {
                    for (k, v) in [
                        ("create", u.place),
                        ("destroy", u.stop),
                        ("in-place update", u.in_place_update),
                        ("create/destroy update", u.destructive_update),
                        ("ignore", u.ignore),
                    ] {
                        if v > 0 {
                            tg.updates.insert(k.to_string(), v);
                        }
                    }
                }
            }
            d
        });
        let next_periodic_launch = self
            .job
            .periodic
            .as_ref()
            .filter(|p| p.enabled && !self.job.stop)
            .and_then(|p| crate::cron::Schedule::parse(&p.specs, &p.time_zone).ok())
            .and_then(|s| s.next_after(jiff::Timestamp::now()))
            .and_then(|t| u64::try_from(t.as_nanosecond()).ok())
            .unwrap_or(0);
        JobPlan {
            job_modify_index: self
                .existing
                .as_ref()
                .map(|e| e.state.job_modify_index)
                .unwrap_or(0),
            diff,
            desired_updates: if self.job.is_parent() {
                BTreeMap::new()
            } else {
                self.desired_updates()
            },
            next_periodic_launch,
            failed: self.blocked.clone(),
        }
    }
}
