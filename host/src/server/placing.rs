//! The second half of applying a plan: the allocations it places, made durable in one
//! write, given runners, and the evaluation ended. Registration over the API answers once
//! the job is stored and its evaluation is `pending`, and runs this after the answer, as
//! Nomad's scheduler follows a registration; the agent's own callers run it at once.
//!
//! One plan at a time ([`PlanLock`]): a plan reads the node's free capacity, ports and
//! devices, and the next plan must see what this one placed, so the lock is held from
//! planning until the placements are in the allocation table. A registration that comes
//! in meanwhile waits for it; requests that only read do not.
//!
//! A placement a crash or a state DB outage cut short is made again
//! ([`Server::place_interrupted`]): its job was stored with a mark that only a stored
//! placement clears.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};

use super::Server;
use crate::allocrunner::AllocRunner;
use crate::evals::{Failed, Trigger};
use crate::jobspec::Job;
use crate::server::plan::{Kept, Placement};
use crate::state::StateError;
use crate::structs::{AllocMetric, Allocation, ClientStatus, DesiredStatus};

/// One planner at a time; its guard can move to the thread that places.
#[derive(Default)]
pub(super) struct PlanLock {
    busy: Mutex<bool>,
    free: Condvar,
}

/// Held while a plan is made and applied.
pub(super) struct PlanGuard(Arc<PlanLock>);

impl PlanLock {
    /// Wait until no other plan is being made or placed (not holding a runtime worker).
    pub(super) fn acquire(self: &Arc<Self>) -> PlanGuard {
        crate::util::wait_blocking(|| {
            let mut busy = self.busy.lock().unwrap();
            while *busy {
                busy = self.free.wait(busy).unwrap();
            }
            *busy = true;
        });
        PlanGuard(self.clone())
    }
}

impl Drop for PlanGuard {
    fn drop(&mut self) {
        *self.0.busy.lock().unwrap() = false;
        self.0.free.notify_one();
    }
}

/// The deployment a plan's allocations join, and its groups.
pub(super) struct Joined {
    pub id: String,
    pub groups: std::collections::BTreeSet<String>,
}

impl Joined {
    /// The new allocations of the deployment's groups join it; their ids.
    fn join(&self, allocs: &mut [Allocation]) -> Vec<String> {
        let mut ids = Vec::new();
        for a in allocs
            .iter_mut()
            .filter(|a| self.groups.contains(&a.task_group))
        {
            a.lineage.deployment_id = self.id.clone();
            let status = a.lineage.deployment_status.get_or_insert_default();
            status.timestamp = a.create_time;
            ids.push(a.id.clone());
        }
        ids
    }
}

/// Move the kept allocations to the new version of `job`; those of a deployed group join
/// its deployment, to be judged again. The ids of those that joined.
fn move_kept(
    agent: &Server,
    job: &Job,
    eval_id: &str,
    update: &[Kept],
    deployment: Option<&Joined>,
) -> Vec<String> {
    let mut joined = Vec::new();
    for k in update {
        let Some(r) = agent.client.runner(&k.alloc.id) else {
            continue;
        };
        r.update(job.clone(), eval_id);
        if let Some(d) = deployment.filter(|d| d.groups.contains(&k.alloc.group)) {
            let now = crate::util::now_nanos();
            r.shared().update_lineage(|l| {
                l.deployment_id = d.id.clone();
                l.deployment_status = Some(crate::structs::AllocDeploymentStatus {
                    timestamp: now,
                    ..Default::default()
                });
            });
            joined.push(k.alloc.id.clone());
        }
    }
    joined
}

/// What is left of a plan once its job is stored and its evaluation recorded.
pub(super) struct Placing {
    pub job: Job,
    pub trigger: Trigger,
    pub eval_id: String,
    pub index: u64,
    /// Kept allocations that move to the new job (updated in place, or a new version
    /// of a job whose tasks see no change).
    pub update: Vec<Kept>,
    pub place: Vec<Placement>,
    pub blocked: BTreeMap<String, Failed>,
    /// When planning began (the placements' `AllocationTime` counts from it).
    pub started: std::time::Instant,
    /// Kept and stopped, for the log.
    pub kept: usize,
    pub stopped: usize,
    /// The deployment its placements and in-place updates of deployed groups join.
    pub deployment: Option<Joined>,
    /// Told once the placed allocations are in the client's table (the API's answer to a
    /// registration waits for it).
    pub in_table: Option<std::sync::mpsc::Sender<()>>,
    /// The node as placement saw it before planning: what a blocked placement waits to
    /// see change.
    pub seen: super::blocked::Snapshot,
    pub _guard: PlanGuard,
}

impl Placing {
    /// Place: the allocations stored in one write (durable before anything runs), their
    /// runners started, the evaluation ended; returns the allocations' ids. When they
    /// cannot be stored, the evaluation ends `failed` with the error. The plan lock is let
    /// go once the allocations are in the table, before their write is durable.
    pub(super) fn run(self, agent: &Arc<Server>) -> Result<Vec<String>, StateError> {
        let Placing {
            job,
            trigger,
            eval_id,
            index,
            update,
            place,
            blocked,
            started,
            kept,
            stopped,
            deployment,
            in_table,
            seen,
            _guard,
        } = self;
        let mut joined = move_kept(agent, &job, &eval_id, &update, deployment.as_ref());
        // The placement is a change of its own, after the registration's: what follows it
        // (a blocking query on the job's allocations) sees it at a new index.
        let index = if place.is_empty() {
            index
        } else {
            agent.changes.bump()
        };
        let config = agent.client.runner_config();
        let mut allocs = new_allocations(&job, &eval_id, index, started, &config.node, place);
        if let Some(d) = &deployment {
            joined.extend(d.join(&mut allocs));
        }
        let replaced = replaced_by(&allocs);
        let fail = |e: crate::state::StateError| {
            tracing::error!(job = %job.id, namespace = %job.namespace, error = %e, "placing the job's allocations failed");
            let why = format!("storing the placed allocations: {e}");
            let index = agent.changes.bump();
            agent.evaluate_done(&job, trigger, &eval_id, index, Err(why));
            e
        };
        link(agent, &replaced);
        let placed = AllocRunner::place_all(allocs, &config).map_err(|e| {
            unlink(agent, &replaced);
            fail(e)
        })?;
        let ids: Vec<String> = placed
            .runners
            .iter()
            .map(|r| r.shared().id().to_string())
            .collect();
        // In the table before the plan lock is let go, so the next plan counts what they
        // hold; their write is on its way, and the next registrations' writes join its
        // commit instead of waiting behind it.
        agent.client.add(&placed.runners);
        if let Some(t) = in_table {
            let _ = t.send(());
        }
        drop(_guard);
        let runners = match placed.wait() {
            Ok(r) => {
                clear_mark(agent, &eval_id);
                r
            }
            Err(e) => {
                agent.client.remove_unwritten(&ids);
                unlink(agent, &replaced);
                return Err(fail(e));
            }
        };
        // Ended at an index after the allocations are in the table, so whoever waits on
        // the evaluation finds them.
        let index = agent.changes.bump();
        agent.evaluate_done(&job, trigger, &eval_id, index, Ok(&blocked));
        agent.deployment_joined(deployment.as_ref().map(|d| d.id.as_str()), joined);
        if !blocked.is_empty() {
            agent.placement_failed(seen);
        }
        start(agent, runners);
        tracing::info!(job = %job.id, namespace = %job.namespace, version = job.state.version, placed = ids.len(), kept, stopped, "job registered");
        Ok(ids)
    }
}

/// The placement's allocations are stored: its mark in the state DB goes. Losing this
/// write only costs a restart an evaluation that finds nothing to place.
fn clear_mark(agent: &Server, eval_id: &str) {
    if let Err(e) = agent.db.queue_placing_done(eval_id) {
        tracing::warn!(error = %e, "clearing a placement's mark failed");
    }
}

/// The allocations the new ones replace, with their replacement: (replaced, new). Each is
/// told so once the new ones are stored.
fn replaced_by(allocs: &[Allocation]) -> Vec<(String, String)> {
    allocs
        .iter()
        .filter(|a| !a.lineage.previous_allocation.is_empty())
        .map(|a| (a.lineage.previous_allocation.clone(), a.id.clone()))
        .collect()
}

/// The allocations replaced learn of their replacement before it shows, so no reader sees
/// the new one without the link ([`unlink`]ed if the new ones cannot be stored).
fn link(agent: &Server, replaced: &[(String, String)]) {
    for (previous, next) in replaced {
        let next = next.clone();
        agent
            .client
            .update_lineage(previous, |l| l.next_allocation = next);
    }
}

/// The replaced allocations' links to replacements that could not be stored, undone.
fn unlink(agent: &Server, replaced: &[(String, String)]) {
    for (previous, _) in replaced {
        agent
            .client
            .update_lineage(previous, |l| l.next_allocation.clear());
    }
}

/// Start the placed allocations' runners. Backpressure: past the start queue's bound,
/// the rest wait here, stored and pending, until starts leave the queue.
fn start(agent: &Server, runners: Vec<Arc<AllocRunner>>) {
    let queue = agent.client.plugins().drivers.start_queue();
    for r in runners {
        queue.wait_for_room();
        agent.client.work().spawn(r.run());
    }
}

/// The allocations a plan places, as they are first stored: pending, at `index`, placed
/// on `node` by evaluation `eval_id`, sharing one copy of `job`.
fn new_allocations(
    job: &Job,
    eval_id: &str,
    index: u64,
    started: std::time::Instant,
    node: &crate::taskenv::NodeInfo,
    place: Vec<Placement>,
) -> Vec<Allocation> {
    let metrics = AllocMetric::single_node(
        &node.datacenter,
        u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX),
    );
    let now = crate::util::now_nanos();
    let shared_job = Arc::new(job.clone());
    place
        .into_iter()
        .map(|p| {
            let (resources, task_resources) = p.resources.legacy();
            Allocation {
                id: uuid::Uuid::new_v4().to_string(),
                namespace: job.namespace.clone(),
                eval_id: eval_id.to_string(),
                name: format!("{}.{}[{}]", job.id, p.group, p.index),
                node_id: node.id.clone(),
                node_name: node.name.clone(),
                job_id: job.id.clone(),
                job: shared_job.clone(),
                task_group: p.group,
                index: p.index,
                desired_status: DesiredStatus::Run,
                desired_description: String::new(),
                client_status: ClientStatus::Pending,
                client_description: String::new(),
                task_states: BTreeMap::new(),
                resources,
                task_resources,
                allocated_resources: p.resources,
                metrics: metrics.clone(),
                create_index: index,
                modify_index: index,
                create_time: now,
                modify_time: now,
                lineage: crate::structs::Lineage {
                    alloc_modify_index: index,
                    deployment_status: p.canary.then(|| crate::structs::AllocDeploymentStatus {
                        canary: true,
                        ..Default::default()
                    }),
                    ..match p.replaces {
                        Some(r) => crate::structs::Lineage {
                            previous_allocation: r.alloc_id,
                            reschedule_tracker: r.tracker,
                            ..Default::default()
                        },
                        None => Default::default(),
                    }
                },
            }
        })
        .collect()
}

impl Server {
    /// Jobs whose registration was answered but whose placement a crash cut short (their
    /// mark is still in the state DB) are evaluated again: what they are missing is placed.
    pub fn place_interrupted(self: &Arc<Self>) {
        let marked = match self.db.interrupted_placements() {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(error = %e, "reading interrupted placements failed");
                return;
            }
        };
        let mut jobs: Vec<(String, String)> = marked.iter().map(|(_, j)| j.clone()).collect();
        jobs.sort();
        jobs.dedup();
        // A job whose placement fails again (the state DB still cannot write) keeps its
        // marks, for the next try.
        let mut failed = std::collections::BTreeSet::new();
        for (namespace, id) in jobs {
            let Some(job) = self.job(&namespace, &id) else {
                continue;
            };
            if job.stop || job.is_parent() {
                continue;
            }
            tracing::info!(job = %id, namespace = %namespace, "placing a job whose placement was interrupted");
            if let Err(e) =
                self.evaluate_job_with(&namespace, &id, crate::evals::Trigger::JobRegister)
            {
                tracing::warn!(job = %id, error = %e, "placing an interrupted job failed");
                failed.insert((namespace, id));
            }
        }
        // Handled (placed again above, or no longer wanted): the marks go.
        for (eval, _) in marked.iter().filter(|(_, j)| !failed.contains(j)) {
            if let Err(e) = self.db.queue_placing_done(eval) {
                tracing::warn!(error = %e, "clearing a placement's mark failed");
            }
        }
    }
}
