//! Planning a job on this node, as Nomad's scheduler would for one node: which live
//! allocations keep running (unchanged, or updated in place when nothing a task sees
//! changed), which are replaced (a destructive update) or stopped (count lowered, group
//! removed, job stopped), and what is placed new, with its ports and devices.
//!
//! A plan is a value: [`plan`] computes it from the job, the version registered before
//! and a [`ClientSnapshot`] (what the client runs and holds, what the node offers), with
//! no agent, no runner and no lock; the agent applies it (registration) or only shows it
//! (`/v1/job/{id}/plan`). Reschedules are decided here; deployments in
//! [`super::rollout`]; the value itself is [`super::planned`].

use std::collections::BTreeMap;

use super::feasible;
use super::fit::{Left, left_for, place_one};
pub use super::planned::{DesiredUpdates, Followup, JobPlan, Kept, Placement, Plan, Replaces};
pub use crate::client::snapshot::{ClientSnapshot, EndedAlloc, LiveAlloc};
use crate::evals::{Failed, Unplaced};
use crate::jobspec::bounds;
use crate::jobspec::{Job, JobspecError, TaskGroup};

/// Nomad's window: a reschedule due within a second of now is made now.
const RESCHEDULE_WINDOW: u64 = 1_000_000_000;

/// Plan `job` against what the client runs now (`snap`), `existing` being the version
/// registered before. A static port or a device another job holds is an error naming the
/// field, and nothing is changed. With `reevaluate` (`/v1/job/{id}/evaluate`), an unchanged
/// job gets its missing allocations placed again: a service or system job's every index
/// without a live allocation, a batch job's every index that has not completed.
pub fn plan(
    job: Job,
    existing: Option<Job>,
    snap: &ClientSnapshot,
    reevaluate: bool,
) -> Result<Plan, JobspecError> {
    bounds::check_node(&job, snap.others_live, snap.max_live_allocs)?;
    let mut plan = Plan {
        job,
        existing,
        keep: Vec::new(),
        destructive: Vec::new(),
        stop: Vec::new(),
        place: Vec::new(),
        blocked: BTreeMap::new(),
        started: std::time::Instant::now(),
        followups: Vec::new(),
        waiting: Vec::new(),
        canary_at: Vec::new(),
        deployment: None,
        new_deployment: false,
    };
    let live = snap.live.clone();
    // A stopped job, or one whose children do the work, runs nothing of its own.
    if plan.job.stop || plan.job.is_parent() {
        plan.stop = live;
        return Ok(plan);
    }
    let previous = plan.existing.as_ref().filter(|e| !e.stop).cloned();
    // The same spec again while it runs changes nothing (a job whose allocations all
    // finished is placed again).
    let unchanged = previous.as_ref().is_some_and(|old| old.spec_eq(&plan.job));
    // Allocations still on an older version: a deployment is replacing them.
    let outdated = live.iter().any(|a| !a.job.spec_eq(&plan.job));
    if unchanged && !live.is_empty() && !reevaluate && !outdated {
        plan.keep = live
            .into_iter()
            .map(|alloc| Kept {
                alloc,
                in_place: false,
            })
            .collect();
        return Ok(plan);
    }
    sort_live(&mut plan, live, previous.is_some());
    super::rollout::roll(&mut plan, snap, !unchanged);
    // What ended under the same spec decides whether its place is filled again; a new
    // spec starts afresh (Nomad ignores an older version's terminal allocations).
    let ended: &[EndedAlloc] = if unchanged { &snap.ended } else { &[] };
    place_missing(&mut plan, snap, ended);
    Ok(plan)
}

/// What becomes of an index whose last allocation ended and was not replaced.
#[derive(Debug, PartialEq)]
enum AfterEnd {
    /// Placed again, replacing it (or afresh).
    Place(Option<Replaces>),
    /// Left empty: a batch allocation that completed, or one out of reschedule attempts.
    Leave,
    /// Placed once its reschedule delay is over, at this time.
    Later(u64),
}

/// Nomad's rules for an ended allocation `e` of `group`, at `now`.
fn after_end(job: &Job, group: &TaskGroup, e: &EndedAlloc, now: u64) -> AfterEnd {
    use crate::structs::ClientStatus;
    use crate::structs::reschedule::{Reschedule, next};
    if e.migrate {
        return AfterEnd::Place(Some(Replaces {
            alloc_id: e.id.clone(),
            tracker: e.tracker.clone(),
        }));
    }
    if e.stopped {
        return AfterEnd::Place(None);
    }
    match e.status {
        ClientStatus::Complete if job.job_type.runs_to_completion() => AfterEnd::Leave,
        ClientStatus::Failed => {
            match next(
                group.reschedule_policy.as_ref(),
                e.tracker.as_ref(),
                e.fail_time,
            ) {
                Reschedule::Never => AfterEnd::Leave,
                Reschedule::At { time, .. } if time > now.saturating_add(RESCHEDULE_WINDOW) => {
                    AfterEnd::Later(time)
                }
                Reschedule::At { delay, .. } => {
                    let mut tracker = e.tracker.clone().unwrap_or_default();
                    tracker.events.push(crate::structs::RescheduleEvent {
                        reschedule_time: now,
                        prev_alloc_id: e.id.clone(),
                        prev_node_id: e.node_id.clone(),
                        delay,
                    });
                    tracker.last_reschedule = "ok".into();
                    AfterEnd::Place(Some(Replaces {
                        alloc_id: e.id.clone(),
                        tracker: Some(tracker),
                    }))
                }
            }
        }
        _ => AfterEnd::Place(None),
    }
}

/// Which of the job's live allocations the new version keeps (as they are, or updated in
/// place), replaces, or stops (an index past its group's count, a group removed), each
/// judged by the version of the job it runs. Without a `running` version registered (the
/// job was stopped), every one is replaced: what still runs is on its way out.
fn sort_live(plan: &mut Plan, live: Vec<LiveAlloc>, running: bool) {
    for alloc in live {
        let wanted = plan
            .job
            .group(&alloc.group)
            .is_some_and(|g| alloc.index < plan.job.placed_count(g));
        if !wanted {
            plan.stop.push(alloc);
            continue;
        }
        if !running {
            plan.destructive.push(alloc);
        } else if alloc.job.spec_eq(&plan.job) {
            plan.keep.push(Kept {
                alloc,
                in_place: false,
            });
        } else if updatable_in_place(&alloc.job, &plan.job, &alloc.group) {
            plan.keep.push(Kept {
                alloc,
                in_place: true,
            });
        } else {
            plan.destructive.push(alloc);
        }
    }
}

/// Place every index of every group that no kept allocation holds, unless what ended
/// there says otherwise ([`after_end`]), or say why it waits.
fn place_missing(plan: &mut Plan, snap: &ClientSnapshot, ended: &[EndedAlloc]) {
    let mut left = left_for(
        plan.keep.iter().map(|k| &k.alloc).chain(&plan.waiting),
        snap,
    );
    let (mut place, mut blocked) = (Vec::new(), BTreeMap::new());
    let mut followups = Vec::new();
    let mut block = |group: &str, why: Unplaced| {
        blocked
            .entry(group.to_string())
            .or_insert(Failed { count: 0, why })
            .count += 1;
    };
    for (gi, group) in plan.job.task_groups.iter().enumerate() {
        let filtered = feasible::filter(&plan.job, group, &snap.node, &snap.healthy_drivers);
        for i in 0..plan.job.placed_count(group) {
            let held = |g: &str, x: u32| g == group.name && x == i;
            if plan
                .keep
                .iter()
                .map(|k| &k.alloc)
                .chain(&plan.waiting)
                .any(|a| held(&a.group, a.index))
            {
                continue;
            }
            // The newest ended allocation at this index decides.
            let last = ended
                .iter()
                .filter(|e| held(&e.group, e.index))
                .max_by_key(|e| e.fail_time);
            let replaces = match last.map(|e| (e, after_end(&plan.job, group, e, snap.now))) {
                None => None,
                Some((_, AfterEnd::Place(r))) => r,
                Some((_, AfterEnd::Leave)) => continue,
                Some((e, AfterEnd::Later(wait_until))) => {
                    followups.push(Followup {
                        alloc_id: e.id.clone(),
                        group: group.name.clone(),
                        wait_until,
                    });
                    continue;
                }
            };
            let why = if !snap.eligible {
                Some(Unplaced::Ineligible)
            } else {
                filtered
                    .clone()
                    .or_else(|| feasible::volumes(group, &snap.node, i))
            };
            if let Some(why) = why {
                block(&group.name, why);
                continue;
            }
            match place_one(&format!("Job.TaskGroups[{gi}]"), group, snap, &mut left) {
                Ok(resources) => place.push(Placement {
                    group: group.name.clone(),
                    index: i,
                    resources,
                    replaces,
                    canary: false,
                }),
                // A count that fits in part places what fits.
                Err(why) => block(&group.name, why),
            }
        }
    }
    place_canaries(plan, snap, &mut left, &mut place, &mut block);
    plan.place = place;
    plan.blocked = blocked;
    plan.followups = followups;
}

/// The plan's canaries, each beside the allocation it stands in for, or why it waits.
fn place_canaries(
    plan: &Plan,
    snap: &ClientSnapshot,
    left: &mut Left,
    place: &mut Vec<Placement>,
    block: &mut impl FnMut(&str, Unplaced),
) {
    for (group_name, i) in &plan.canary_at {
        let Some((gi, group)) = plan
            .job
            .task_groups
            .iter()
            .enumerate()
            .find(|(_, g)| &g.name == group_name)
        else {
            continue;
        };
        if !snap.eligible {
            block(group_name, Unplaced::Ineligible);
            continue;
        }
        if let Some(why) = feasible::volumes(group, &snap.node, *i) {
            block(group_name, why);
            continue;
        }
        match place_one(&format!("Job.TaskGroups[{gi}]"), group, snap, left) {
            Ok(resources) => place.push(Placement {
                group: group_name.clone(),
                index: *i,
                resources,
                replaces: None,
                canary: true,
            }),
            Err(why) => block(group_name, why),
        }
    }
}

/// Whether allocations of `group` can move from `old` to `new` in place: nothing a task
/// sees changed (the group apart from its count, and the job's name, type and meta, which
/// reach the tasks' environment), as Nomad's `tasksUpdated` decides.
fn updatable_in_place(old: &Job, new: &Job, group: &str) -> bool {
    let (Some(a), Some(b)) = (old.group(group), new.group(group)) else {
        return false;
    };
    let mut a = a.clone();
    a.count = b.count;
    a == *b && old.name == new.name && old.job_type == new.job_type && old.meta == new.meta
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
