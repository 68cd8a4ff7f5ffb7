//! Deployments on the server's side, as Nomad's deployment watcher keeps them: the
//! planner ([`super::rollout`]) decides what a step replaces; this part stores each
//! deployment (state DB, `Deployment` event topic), counts its allocations' health as the
//! client judges it ([`crate::client::health`]) and moves it on:
//!
//! - an unhealthy allocation fails the deployment ("Failed due to unhealthy
//!   allocations"); no allocation turning healthy by `progress_deadline` fails it too;
//! - a failed deployment of a group with `auto_revert` registers the job's latest stable
//!   version again (a new version, with a deployment of its own);
//! - canaries all healthy are promoted when every group with canaries says
//!   `auto_promote`, else wait for `promote`;
//! - every group at its total of healthy allocations, canaries promoted: successful, and
//!   the job's version is marked stable;
//! - otherwise the job is evaluated again (`deployment-watcher`) for the next step.
//!
//! What operators do to a deployment is in [`super::deployment_ops`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Server;
use crate::evals::Trigger;
use crate::jobspec::Job;
use crate::structs::deployment::{self, desc};
use crate::structs::{Allocation, Deployment};

/// The deployments the server keeps, by id.
#[derive(Default)]
pub(super) struct DeploymentBook {
    by_id: Mutex<BTreeMap<String, Deployment>>,
}

/// What moving a deployment on asks of the server, decided under the book's lock and
/// carried out after it.
pub(super) enum Next {
    Nothing,
    Evaluate,
    Revert(u64),
}

/// What an operation on a deployment did (Nomad's `DeploymentUpdateResponse`).
#[derive(Debug, Clone, Default)]
pub struct DeploymentUpdate {
    /// The evaluation it made, if any.
    pub eval_id: String,
    pub index: u64,
    /// The version an auto-revert registered again.
    pub reverted_job_version: Option<u64>,
}

impl Server {
    /// Deployments as the state DB had them at start; the running ones' progress
    /// deadlines armed again.
    pub fn restore_deployments(self: &Arc<Self>) {
        let list = match self.db.deployments() {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "reading deployments failed");
                return;
            }
        };
        let running: Vec<String> = list
            .iter()
            .filter(|d| d.active())
            .map(|d| d.id.clone())
            .collect();
        self.deployments
            .by_id
            .lock()
            .unwrap()
            .extend(list.into_iter().map(|d| (d.id.clone(), d)));
        for id in running {
            self.arm_progress_deadline(&id);
        }
    }

    /// Every deployment, by id.
    pub fn deployments(&self) -> Vec<Deployment> {
        self.deployments
            .by_id
            .lock()
            .unwrap()
            .values()
            .cloned()
            .collect()
    }

    /// One deployment.
    pub fn deployment(&self, id: &str) -> Option<Deployment> {
        self.deployments.by_id.lock().unwrap().get(id).cloned()
    }

    /// A job's deployments, newest first: those of the job as registered now, or with
    /// `all`, those of earlier jobs of the same id too.
    pub fn job_deployments(&self, namespace: &str, id: &str, all: bool) -> Vec<Deployment> {
        let create_index = self.job(namespace, id).map(|j| j.state.create_index);
        let mut out: Vec<Deployment> = self
            .deployments
            .by_id
            .lock()
            .unwrap()
            .values()
            .filter(|d| d.namespace == namespace && d.job_id == id)
            .filter(|d| all || create_index.is_none_or(|c| d.job_create_index == c))
            .cloned()
            .collect();
        out.sort_by_key(|d| std::cmp::Reverse(d.create_index));
        out
    }

    /// A job's latest deployment.
    pub fn latest_deployment(&self, namespace: &str, id: &str) -> Option<Deployment> {
        self.job_deployments(namespace, id, false)
            .into_iter()
            .next()
    }

    /// The allocations a deployment placed (or moved in place).
    pub fn deployment_allocations(&self, d: &Deployment) -> Vec<Allocation> {
        self.visit_job_allocations(&d.namespace, &d.job_id, true, |a| {
            (a.lineage.deployment_id == d.id).then(|| a.clone())
        })
    }

    /// Store a new deployment of `job` (registered at `index`), made by its plan; the
    /// job's other running deployments are cancelled.
    pub(super) fn start_deployment(self: &Arc<Self>, job: &Job, mut d: Deployment, index: u64) {
        self.cancel_deployments(job, desc::NEWER_JOB, index);
        let now = crate::util::now_nanos();
        d.job_version = job.state.version;
        d.job_modify_index = job.state.modify_index;
        d.job_spec_modify_index = job.state.job_modify_index;
        d.job_create_index = job.state.create_index;
        d.create_index = index;
        d.modify_index = index;
        d.create_time = now;
        d.modify_time = now;
        tracing::info!(job = %job.id, namespace = %job.namespace, deployment = %d.id, version = d.job_version, "deployment started");
        let id = d.id.clone();
        self.put_deployment(d, "DeploymentStatusUpdate");
        self.arm_progress_deadline(&id);
    }

    /// What an applied plan of `job` (stored at `index`) does to its deployments: a
    /// stopped job's are cancelled; a new one is started; the one the plan's placements
    /// join, if any.
    pub(super) fn plan_deployment(
        self: &Arc<Self>,
        job: &Job,
        planned: Option<Deployment>,
        new: bool,
        index: u64,
    ) -> Option<super::placing::Joined> {
        if job.stop {
            self.cancel_deployments(job, desc::STOPPED_JOB, index);
        }
        let d = planned?;
        let joined = super::placing::Joined {
            id: d.id.clone(),
            groups: d.task_groups.keys().cloned().collect(),
        };
        if new {
            self.start_deployment(job, d, index);
        }
        Some(joined)
    }

    /// Cancel the job's running deployments (a newer version, the job stopped).
    pub(super) fn cancel_deployments(&self, job: &Job, why: &str, index: u64) {
        let cancelled: Vec<Deployment> = {
            let mut book = self.deployments.by_id.lock().unwrap();
            book.values_mut()
                .filter(|d| d.namespace == job.namespace && d.job_id == job.id && d.active())
                .map(|d| {
                    d.status = deployment::CANCELLED.into();
                    d.status_description = why.into();
                    d.modify_index = index;
                    d.modify_time = crate::util::now_nanos();
                    d.clone()
                })
                .collect()
        };
        for d in cancelled {
            self.put_deployment(d, "DeploymentStatusUpdate");
        }
    }

    /// A purged job's deployments go with it.
    pub(super) fn forget_deployments(&self, namespace: &str, id: &str) {
        let gone: Vec<String> = {
            let mut book = self.deployments.by_id.lock().unwrap();
            let ids: Vec<String> = book
                .values()
                .filter(|d| d.namespace == namespace && d.job_id == id)
                .map(|d| d.id.clone())
                .collect();
            for i in &ids {
                book.remove(i);
            }
            ids
        };
        for id in gone {
            if let Err(e) = self.db.delete_deployment(&id) {
                crate::state::log_write_failed(&e, "deployment", &id);
            }
        }
    }

    /// The server's collection of deployments (Nomad's `deploymentGC`): each ended one
    /// whose last change is older than `threshold` is forgotten. Returns their ids.
    pub(super) fn collect_deployments(&self, now: u64, threshold: Duration) -> Vec<String> {
        let gone = {
            let mut book = self.deployments.by_id.lock().unwrap();
            let ids = ended_before(book.values(), now, threshold);
            for id in &ids {
                book.remove(id);
            }
            ids
        };
        for id in &gone {
            if let Err(e) = self.db.delete_deployment(id) {
                crate::state::log_write_failed(&e, "deployment", id);
            }
        }
        gone
    }

    /// Into the book with a new change index, then the state DB and the event stream.
    /// The index is taken while the book is locked: a blocking query it wakes reads the
    /// book after the deployment is in it (taken before, a reader could wake, read the old
    /// deployment, and wait for a change that had already happened).
    pub(super) fn put_deployment(&self, mut d: Deployment, event_type: &'static str) {
        {
            let mut book = self.deployments.by_id.lock().unwrap();
            d.modify_index = self.changes.bump();
            book.insert(d.id.clone(), d.clone());
        }
        if let Err(e) = self.db.put_deployment(&d) {
            crate::state::log_write_failed(&e, "deployment", &d.id);
        }
        self.changes.events.publish(|| crate::events::Event {
            topic: "Deployment",
            event_type,
            key: d.id.clone(),
            namespace: d.namespace.clone(),
            filter_keys: vec![d.job_id.clone()],
            index: d.modify_index,
            payload: crate::events::Payload::Deployment(Box::new(d.clone())),
            line: Default::default(),
        });
    }

    /// Count a deployment's allocations again: placed, canaries, healthy, unhealthy.
    pub(super) fn recount(&self, d: &mut Deployment) {
        let allocs = self.deployment_allocations(d);
        for (name, g) in d.task_groups.iter_mut() {
            let mine = || allocs.iter().filter(|a| &a.task_group == name);
            let status = |a: &&Allocation| a.lineage.deployment_status.clone().unwrap_or_default();
            g.placed_allocs = mine().count() as u32;
            g.placed_canaries = mine()
                .filter(|a| status(a).canary)
                .map(|a| a.id.clone())
                .collect();
            g.healthy_allocs = mine().filter(|a| status(a).healthy == Some(true)).count() as u32;
            g.unhealthy_allocs = mine().filter(|a| status(a).healthy == Some(false)).count() as u32;
        }
    }

    /// A placement's allocations `joined` deployment `id`: their health is tracked and
    /// the deployment counts them.
    pub(super) fn deployment_joined(self: &Arc<Self>, id: Option<&str>, joined: Vec<String>) {
        if let Some(id) = id {
            self.client.track_health(joined);
            self.deployment_placed(id);
        }
    }

    /// The allocations a plan placed or moved under deployment `id` are in: count them.
    fn deployment_placed(self: &Arc<Self>, id: &str) {
        let Some(mut d) = self.deployment(id) else {
            return;
        };
        self.recount(&mut d);
        d.status_description = if d.status == deployment::RUNNING {
            d.running_description().into()
        } else {
            d.status_description
        };
        d.modify_time = crate::util::now_nanos();
        self.put_deployment(d, "DeploymentStatusUpdate");
    }

    /// Read the ids of allocations whose health was judged and move their deployments on.
    pub fn spawn_deployment_watcher(self: &Arc<Self>) {
        let Some(mut judged) = self.client.take_health() else {
            return;
        };
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some(alloc_id) = judged.recv().await {
                let Some(server) = weak.upgrade() else { return };
                let Some(id) = server
                    .client
                    .peek_allocation(&alloc_id, |a| a.lineage.deployment_id.clone())
                else {
                    continue;
                };
                // Evaluating takes the plan lock: off the runtime's workers.
                tokio::task::spawn_blocking(move || server.advance(&id));
            }
        });
    }

    /// Move deployment `id` on after its allocations' health changed (see the module).
    fn advance(self: &Arc<Self>, id: &str) {
        let (d, next) = {
            let Some(mut d) = self.deployment(id).filter(Deployment::active) else {
                return;
            };
            let before = d.clone();
            self.recount(&mut d);
            let now = crate::util::now_nanos();
            for (name, g) in d.task_groups.iter_mut() {
                let was = before.task_groups.get(name).map_or(0, |b| b.healthy_allocs);
                if g.healthy_allocs > was && g.progress_deadline > 0 {
                    g.require_progress_by = now.saturating_add(g.progress_deadline);
                }
            }
            let next = if d.task_groups.values().any(|g| g.unhealthy_allocs > 0) {
                self.failing(&mut d, desc::FAILED_ALLOCATIONS)
            } else if d.complete() {
                d.status = deployment::SUCCESSFUL.into();
                d.status_description = desc::SUCCESSFUL.into();
                Next::Nothing
            } else if d.status == deployment::RUNNING {
                if d.requires_promotion() && d.auto_promotes() && d.canaries_healthy().is_ok() {
                    for g in d.task_groups.values_mut() {
                        g.promoted = true;
                    }
                }
                // Promoted canaries may be all a group needs (as many canaries as its
                // count): then no other allocation's health comes to finish it.
                if d.complete() {
                    d.status = deployment::SUCCESSFUL.into();
                    d.status_description = desc::SUCCESSFUL.into();
                } else {
                    d.status_description = d.running_description().into();
                }
                Next::Evaluate
            } else {
                Next::Nothing
            };
            if d == before {
                return;
            }
            d.modify_time = now;
            (d, next)
        };
        let successful = d.status == deployment::SUCCESSFUL;
        let (namespace, job_id, version) = (d.namespace.clone(), d.job_id.clone(), d.job_version);
        tracing::info!(job = %job_id, deployment = %d.id, status = %d.status, description = %d.status_description, "deployment moved on");
        // Stable before the deployment shows successful: whoever saw it succeed and
        // registers a new version finds the version to revert to.
        if successful && let Err(e) = self.set_job_stable(&namespace, &job_id, version, true) {
            tracing::warn!(job = %job_id, error = %e, "marking the deployed version stable failed");
        }
        self.put_deployment(d, "DeploymentAllocHealth");
        self.carry_out(&namespace, &job_id, next);
    }

    /// Mark `d` failed with `why`; with `auto_revert`, say which version to register again
    /// (the latest stable one of another spec) and put it in the description.
    pub(super) fn failing(&self, d: &mut Deployment, why: &str) -> Next {
        d.status = deployment::FAILED.into();
        d.status_description = why.into();
        if !d.auto_reverts() {
            return Next::Nothing;
        }
        let current = self.job(&d.namespace, &d.job_id);
        let stable = self
            .job_versions(&d.namespace, &d.job_id)
            .into_iter()
            .filter(|v| v.state.stable && v.state.version < d.job_version)
            .max_by_key(|v| v.state.version);
        match (stable, current) {
            (None, _) => {
                d.status_description = desc::no_rollback_target(why);
                Next::Nothing
            }
            (Some(v), Some(c)) if v.spec_eq(&c) => {
                d.status_description = desc::rollback_noop(why, v.state.version);
                Next::Nothing
            }
            (Some(v), _) => {
                d.status_description = desc::rollback(why, v.state.version);
                Next::Revert(v.state.version)
            }
        }
    }

    /// Evaluate the job, or register a stable version again, as moving on asked.
    pub(super) fn carry_out(
        self: &Arc<Self>,
        namespace: &str,
        job_id: &str,
        next: Next,
    ) -> DeploymentUpdate {
        let mut out = DeploymentUpdate {
            index: self.changes.index(),
            ..Default::default()
        };
        let r = match next {
            Next::Nothing => return out,
            Next::Evaluate => self.evaluate_job_with(namespace, job_id, Trigger::DeploymentWatcher),
            Next::Revert(v) => {
                out.reverted_job_version = Some(v);
                tracing::info!(job = %job_id, version = v, "deployment failed: reverting to the stable version");
                self.revert_job(namespace, job_id, v, None)
            }
        };
        match r {
            Ok(r) => {
                out.eval_id = r.eval_id;
                out.index = r.index;
            }
            Err(e) => {
                tracing::warn!(job = %job_id, error = %e, "moving a deployment on failed");
            }
        }
        out
    }

    /// Fail the deployment once a group's `RequireProgressBy` passes with the deployment
    /// still running; the timer follows the deadline as it moves, and ends when the
    /// deployment does or is paused (a resume arms it again).
    pub(super) fn arm_progress_deadline(self: &Arc<Self>, id: &str) {
        let weak = Arc::downgrade(self);
        let id = id.to_string();
        self.client.work().spawn(async move {
            loop {
                let Some(server) = weak.upgrade() else { return };
                let running = |d: &Deployment| d.status == deployment::RUNNING;
                let Some(d) = server.deployment(&id).filter(running) else {
                    return;
                };
                let now = crate::util::now_nanos();
                let by = d
                    .task_groups
                    .values()
                    .filter(|g| g.require_progress_by > 0 && g.healthy_allocs < g.desired_total)
                    .map(|g| g.require_progress_by)
                    .min();
                let Some(by) = by else { return };
                if now >= by {
                    tokio::task::spawn_blocking(move || server.progress_deadline_passed(&id));
                    return;
                }
                drop(server);
                let wait =
                    Duration::from_nanos(by.saturating_sub(now)).max(Duration::from_millis(100));
                tokio::time::sleep(wait.min(Duration::from_secs(60))).await;
            }
        });
    }

    fn progress_deadline_passed(self: &Arc<Self>, id: &str) {
        let (d, next) = {
            let Some(mut d) = self.deployment(id).filter(Deployment::active) else {
                return;
            };
            let next = self.failing(&mut d, desc::PROGRESS_DEADLINE);
            d.modify_time = crate::util::now_nanos();
            (d, next)
        };
        tracing::warn!(job = %d.job_id, deployment = %d.id, "deployment failed: progress deadline passed");
        let (namespace, job_id) = (d.namespace.clone(), d.job_id.clone());
        self.put_deployment(d, "DeploymentStatusUpdate");
        self.carry_out(&namespace, &job_id, next);
    }
}

/// Nomad's default `deployment_gc_threshold`: how long an ended deployment is kept.
pub(super) const GC_THRESHOLD: Duration = Duration::from_secs(3600);

/// The ids of the deployments in `all` that ended and last changed more than `threshold`
/// before `now` (ns).
fn ended_before<'a>(
    all: impl Iterator<Item = &'a Deployment>,
    now: u64,
    threshold: Duration,
) -> Vec<String> {
    let cutoff = now.saturating_sub(u64::try_from(threshold.as_nanos()).unwrap_or(u64::MAX));
    all.filter(|d| !d.active() && d.modify_time < cutoff)
        .map(|d| d.id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ended_deployments_older_than_the_threshold_are_collected() {
        const S: u64 = 1_000_000_000;
        let d = |id: &str, status: &str, modify_time: u64| Deployment {
            id: id.into(),
            status: status.into(),
            modify_time,
            ..Default::default()
        };
        let all = [
            d("old-ok", deployment::SUCCESSFUL, 100 * S),
            d("old-failed", deployment::FAILED, 100 * S),
            d("old-running", deployment::RUNNING, 100 * S),
            d("old-paused", deployment::PAUSED, 100 * S),
            d("new-cancelled", deployment::CANCELLED, 4000 * S),
        ];
        let gone = ended_before(all.iter(), 4100 * S, GC_THRESHOLD);
        assert_eq!(gone, ["old-ok", "old-failed"]);
    }
}
