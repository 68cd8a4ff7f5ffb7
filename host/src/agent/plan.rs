//! Planning a job on this node, as Nomad's scheduler would for one node: which live
//! allocations keep running (unchanged, or updated in place when nothing a task sees
//! changed), which are replaced (a destructive update) or stopped (count lowered, group
//! removed, job stopped), and what is placed new, with its ports and devices. Registration
//! applies a plan; `/v1/job/{id}/plan` only shows it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::Agent;
use super::feasible::{self, Amounts};
use super::usage::{Holdings, device_keys};
use crate::allocrunner::AllocRunner;
use crate::devicemanager::DeviceShortage;
use crate::evals::{Failed, Unplaced};
use crate::jobspec::{Job, JobspecError, TaskGroup};
use crate::structs::{AllocatedResources, Allocation};

/// A live allocation the plan keeps.
pub(super) struct Kept {
    pub group: String,
    pub index: u32,
    pub runner: Arc<AllocRunner>,
    /// The job changed in a way no task sees: the allocation moves to the new job in place.
    pub in_place: bool,
}

/// One allocation to place.
pub(super) struct Placement {
    pub group: String,
    pub index: u32,
    /// What it holds: every task's CPU and memory, its ports and devices.
    pub resources: AllocatedResources,
}

/// What registering a job would do.
pub(super) struct Plan {
    /// The job as registered (its state is filled in when the plan is applied).
    pub job: Job,
    /// The job registered before, if any.
    pub existing: Option<Job>,
    pub keep: Vec<Kept>,
    /// Replaced: stopped, and a new allocation placed at the same index.
    pub destructive: Vec<Arc<AllocRunner>>,
    /// Stopped and not replaced.
    pub stop: Vec<Arc<AllocRunner>>,
    pub place: Vec<Placement>,
    /// Allocations that cannot be placed, per group, and why (the node is not eligible,
    /// is filtered out, or is out of a resource). They wait in a blocked evaluation.
    pub blocked: BTreeMap<String, Failed>,
    /// When planning began (the placements' `AllocationTime` counts from it).
    pub started: std::time::Instant,
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
        let group_of = |r: &Arc<AllocRunner>| r.shared().peek(|a| a.task_group.clone());
        for k in &self.keep {
            let u = out.entry(k.group.clone()).or_default();
            if k.in_place {
                u.in_place_update += 1;
            } else {
                u.ignore += 1;
            }
        }
        for r in &self.destructive {
            out.entry(group_of(r)).or_default().destructive_update += 1;
        }
        for r in &self.stop {
            out.entry(group_of(r)).or_default().stop += 1;
        }
        for (g, n) in &self.blocked {
            out.entry(g.clone()).or_default().place += n.count;
        }
        // A destructive update re-places at the same index: count it once.
        for p in &self.place {
            let replaced = self.destructive.iter().any(|r| {
                r.shared()
                    .peek(|a| a.task_group == p.group && a.index == p.index)
            });
            if !replaced {
                out.entry(p.group.clone()).or_default().place += 1;
            }
        }
        out
    }
}

impl Agent {
    /// The live (not terminal) allocations of the job `(namespace, id)` as registered now.
    pub(super) fn live_runners(&self, namespace: &str, id: &str) -> Vec<Arc<AllocRunner>> {
        self.usage
            .runners_of(&(namespace.to_string(), id.to_string()))
            .into_iter()
            .filter(|r| !r.shared().peek(Allocation::is_terminal))
            .collect()
    }

    /// Plan `job` against what runs now. A static port or a device another job holds is
    /// an error naming the field, and nothing is changed.
    pub(super) fn plan(&self, job: Job) -> Result<Plan, JobspecError> {
        self.plan_with(job, false)
    }

    /// [`Agent::plan`]; with `reevaluate` (`/v1/job/{id}/evaluate`), an unchanged job gets
    /// its missing allocations placed again: a service or system job's every index without
    /// a live allocation, a batch job's every index that has not completed.
    pub(super) fn plan_with(&self, job: Job, reevaluate: bool) -> Result<Plan, JobspecError> {
        let key = (job.namespace.clone(), job.id.clone());
        let existing = self.jobs.read().unwrap().get(&key).cloned();
        let Holdings {
            live,
            mut capacity,
            ports: mut held,
            devices: mut held_devices,
            others_live,
        } = self.holdings(&key);
        let limit = self
            .resources
            .max_live_allocs
            .unwrap_or(super::register::bounds::MAX_NODE_LIVE_ALLOCS);
        super::register::bounds::check_node(&job, others_live, limit)?;
        let mut plan = Plan {
            job,
            existing,
            keep: Vec::new(),
            destructive: Vec::new(),
            stop: Vec::new(),
            place: Vec::new(),
            blocked: BTreeMap::new(),
            started: std::time::Instant::now(),
        };
        // A stopped job, or one whose children do the work, runs nothing of its own.
        if plan.job.stop || plan.job.is_parent() {
            plan.stop = live;
            return Ok(plan);
        }
        let previous = plan.existing.as_ref().filter(|e| !e.stop).cloned();
        // The same spec again while it runs changes nothing (a job whose allocations all
        // finished is placed again).
        let unchanged = previous.as_ref().is_some_and(|old| old.spec_eq(&plan.job));
        if unchanged && !live.is_empty() && !reevaluate {
            for r in live {
                let (group, index) = r.shared().peek(|a| (a.task_group.clone(), a.index));
                plan.keep.push(Kept {
                    group,
                    index,
                    runner: r,
                    in_place: false,
                });
            }
            return Ok(plan);
        }
        for r in live {
            let (group, index) = r.shared().peek(|a| (a.task_group.clone(), a.index));
            let wanted = plan
                .job
                .group(&group)
                .is_some_and(|g| index < plan.job.placed_count(g));
            if !wanted {
                plan.stop.push(r);
                continue;
            }
            match &previous {
                Some(old) if old.spec_eq(&plan.job) => plan.keep.push(Kept {
                    group,
                    index,
                    runner: r,
                    in_place: false,
                }),
                Some(old) if updatable_in_place(old, &plan.job, &group) => plan.keep.push(Kept {
                    group,
                    index,
                    runner: r,
                    in_place: true,
                }),
                _ => plan.destructive.push(r),
            }
        }
        // Ports: those other jobs hold, and those of the allocations kept.
        for k in &plan.keep {
            k.runner.shared().peek(|a| {
                let holder = format!("allocation {} of this job", &a.id[..8]);
                for p in &a.allocated_resources.shared.ports {
                    held.insert(p.value, holder.clone());
                }
                hold_devices(a, &holder, &mut held_devices);
            });
        }
        let completed: Vec<(String, u32)> = if reevaluate && plan.job.job_type.runs_to_completion()
        {
            self.job_allocations(&key.0, &key.1, false)
                .iter()
                .filter(|a| a.client_status == crate::structs::ClientStatus::Complete)
                .map(|a| (a.task_group.clone(), a.index))
                .collect()
        } else {
            Vec::new()
        };
        let eligible = self.eligible();
        // What the node has left: every live allocation counts but those this plan stops.
        for k in &plan.keep {
            k.runner
                .shared()
                .peek(|a| capacity.hold(&a.allocated_resources));
        }
        let node = self.node();
        let healthy = self.healthy_drivers();
        for (gi, group) in plan.job.task_groups.iter().enumerate() {
            let filtered = feasible::filter(&plan.job, group, &node, &healthy);
            for i in 0..plan.job.placed_count(group) {
                if plan
                    .keep
                    .iter()
                    .any(|k| k.group == group.name && k.index == i)
                    || completed.iter().any(|(g, x)| *g == group.name && *x == i)
                {
                    continue;
                }
                let why = if !eligible {
                    Some(Unplaced::Ineligible)
                } else {
                    filtered.clone()
                };
                if let Some(why) = why {
                    plan.blocked
                        .entry(group.name.clone())
                        .or_insert(Failed { count: 0, why })
                        .count += 1;
                    continue;
                }
                let path = format!("Job.TaskGroups[{gi}]");
                // What this allocation takes is given back when it cannot be placed after all.
                let (ports_before, devices_before) = (held.clone(), held_devices.clone());
                let placed = crate::ports::assign(&path, group, &self.host_ip, &mut held)
                    .map_err(|e| Unplaced::Exhausted(format!("network: {}", e.message)))
                    .and_then(|ports| {
                        let mut resources = AllocatedResources::of(group, ports);
                        self.assign_devices(&path, group, &mut resources, &mut held_devices)
                            .map_err(|e| match e {
                                DeviceShortage::Missing(_) => {
                                    Unplaced::Filtered("missing devices".into())
                                }
                                // Nomad's `missing devices`, saying which constraint
                                // each group fails.
                                DeviceShortage::Refused(e) => {
                                    Unplaced::Filtered(format!("missing devices: {}", e.message))
                                }
                                DeviceShortage::Busy(e) => Unplaced::Exhausted(format!(
                                    "devices: no devices match request ({})",
                                    e.message
                                )),
                            })?;
                        capacity
                            .place(group, &mut resources)
                            .map_err(|d| Unplaced::Exhausted(d.into()))?;
                        Ok(resources)
                    });
                let resources = match placed {
                    Ok(r) => r,
                    Err(why) => {
                        // A count that fits in part places what fits.
                        (held, held_devices) = (ports_before, devices_before);
                        plan.blocked
                            .entry(group.name.clone())
                            .or_insert(Failed { count: 0, why })
                            .count += 1;
                        continue;
                    }
                };
                plan.place.push(Placement {
                    group: group.name.clone(),
                    index: i,
                    resources,
                });
            }
        }
        Ok(plan)
    }

    /// What registering `job` would do, without doing it (`/v1/job/{id}/plan`).
    pub fn plan_job(&self, job: Job, want_diff: bool) -> Result<JobPlan, JobspecError> {
        super::register::bounds::check(&job)?;
        let plan = self.plan(job)?;
        let diff = want_diff.then(|| {
            let mut d = crate::jobdiff::diff(plan.existing.as_ref(), &plan.job);
            for (g, u) in plan.desired_updates() {
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
        let next_periodic_launch = plan
            .job
            .periodic
            .as_ref()
            .filter(|p| p.enabled && !plan.job.stop)
            .and_then(|p| crate::cron::Schedule::parse(&p.specs, &p.time_zone).ok())
            .and_then(|s| s.next_after(jiff::Timestamp::now()))
            .and_then(|t| u64::try_from(t.as_nanosecond()).ok())
            .unwrap_or(0);
        Ok(JobPlan {
            job_modify_index: plan
                .existing
                .as_ref()
                .map(|e| e.state.job_modify_index)
                .unwrap_or(0),
            diff,
            desired_updates: if plan.job.is_parent() {
                BTreeMap::new()
            } else {
                plan.desired_updates()
            },
            next_periodic_launch,
            failed: plan.blocked.clone(),
        })
    }

    /// Assign each task of `group` the device instances it asks for, into `resources`.
    fn assign_devices(
        &self,
        path: &str,
        group: &TaskGroup,
        resources: &mut AllocatedResources,
        held: &mut BTreeMap<String, String>,
    ) -> Result<(), DeviceShortage> {
        for (ti, task) in group.tasks.iter().enumerate() {
            let devices = self
                .devices
                .assign(&format!("{path}.Tasks[{ti}]"), task, held)?;
            if let Some(t) = resources.tasks.get_mut(&task.name) {
                t.devices = devices;
            }
        }
        Ok(())
    }

    /// A node attribute as a number; 0 when absent or not a number.
    fn numeric_attribute(&self, key: &str) -> u64 {
        self.node()
            .attributes
            .get(key)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    }

    /// What the node offers allocations, and what live allocations other than those of
    /// job `except` (which a registration replaces) hold of it.
    pub(super) fn capacity(&self, except: &(String, String)) -> feasible::Capacity {
        self.holdings(except).capacity
    }

    /// The node's capacity with nothing held.
    fn empty_capacity(&self) -> feasible::Capacity {
        let cores = self
            .numeric_attribute("cpu.numcores")
            .clamp(1, u64::from(u16::MAX));
        let compute = self
            .resources
            .cpu_total_compute
            .unwrap_or_else(|| self.numeric_attribute("cpu.totalcompute"));
        feasible::Capacity {
            total: self.allocatable(),
            cores: (0..cores as u16).collect(),
            mhz_per_core: compute / cores,
            ..Default::default()
        }
    }

    /// What allocations may use of the node: its fingerprint, or the config's
    /// `cpu_total_compute` and `memory_total_mb`, minus the config's `reserved` block.
    pub fn allocatable(&self) -> Amounts {
        let attr = |k: &str| self.numeric_attribute(k);
        let r = &self.resources;
        Amounts {
            cpu: r
                .cpu_total_compute
                .unwrap_or_else(|| attr("cpu.totalcompute"))
                .saturating_sub(r.reserved.cpu.unwrap_or(0)),
            memory_mb: r
                .memory_total_mb
                .unwrap_or_else(|| attr("memory.totalbytes") >> 20)
                .saturating_sub(r.reserved.memory.unwrap_or(0)),
            disk_mb: r
                .disk_total_mb
                .unwrap_or_else(|| attr("unique.storage.bytesfree") >> 20)
                .saturating_sub(r.reserved.disk.unwrap_or(0)),
        }
    }

    /// A warning at start when the node offers less disk than one group asks by default
    /// (Nomad's 300 MB of ephemeral disk): every such job would wait, blocked on `disk`.
    pub(super) fn warn_if_little_disk(&self) {
        let disk = self.allocatable().disk_mb;
        if disk < 300 {
            tracing::warn!(
                disk_mb = disk,
                alloc_dir = %self.alloc_root.display(),
                "the node offers {disk} MB of disk (the allocation dir's free space, less `reserved`) \
                 and a group asks 300 MB by default: such jobs will not be placed; free space \
                 or set `client {{ disk_total_mb = N }}`"
            );
        }
    }

    /// Drivers detected and healthy now.
    pub(super) fn healthy_drivers(&self) -> Vec<String> {
        self.driver_infos()
            .into_iter()
            .filter(|(_, i)| i.detected && i.healthy)
            .map(|(n, _)| n)
            .collect()
    }

    /// What the live allocations of every job but `except` hold, and `except`'s own live
    /// allocations (kept up to date by [`super::usage::NodeUsage`]).
    fn holdings(&self, except: &(String, String)) -> Holdings {
        self.usage.holdings(except, self.empty_capacity())
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

/// Add the device instances `a` holds to `held` (keyed `<vendor>/<type>/<name>/<id>`).
fn hold_devices(a: &Allocation, holder: &str, held: &mut BTreeMap<String, String>) {
    for key in device_keys(&a.allocated_resources) {
        held.insert(key, holder.to_string());
    }
}
