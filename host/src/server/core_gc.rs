//! Nomad's server-side garbage collection (its core scheduler's `evalGC` and `jobGC`), on
//! its own schedule: ended allocations' records, evaluations and dead jobs are forgotten
//! once they have been so for longer than their threshold, so an agent with job churn does
//! not grow without bound. `PUT /v1/system/gc` ([`Server::system_gc`]) still collects
//! everything at once, ignoring the thresholds.
//!
//! Nomad runs its evaluation collection every 5 minutes and its job collection every
//! `job_gc_interval`; here one pass does both, every `job_gc_interval` (default 5 m):
//!
//! - An allocation goes when it is terminal (complete, failed or lost) for longer than
//!   `eval_gc_threshold` (`batch_eval_gc_threshold` when a batch job placed it), its
//!   evaluation (when still kept) being terminal and as old. A batch job's allocations go
//!   that way only once the job is gone, or stopped and dead; while it is not, only those of
//!   a version older than the current one do (the scheduler would run the others again).
//!   A failed allocation of a live job that a reschedule policy would replace, and a lost
//!   one of a group that prevents rescheduling on loss, stay.
//! - An evaluation goes when it is terminal, as old, and none of its allocations is left.
//! - A job goes, with its versions, submissions, evaluations and allocations, when it is
//!   dead and collectible as by [`Server::system_gc`] (not the parent of a live child, a
//!   periodic or parameterized parent only when stopped), and besides stopped or batch
//!   (a dead service or system job stays until it is stopped, as in Nomad), has no version
//!   tag, and it, its evaluations and every allocation have been so for longer than
//!   `job_gc_threshold`.
//!
//! A removal the state DB refuses (an outage) leaves the object in place: the next pass
//! tries again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use super::Server;
use crate::client::AllocActionError;
pub use crate::config::gc::ServerGcConfig;
use crate::evals::Evaluation;
use crate::jobspec::{Job, JobType};
use crate::state::StateError;
use crate::structs::{Allocation, ClientStatus, DesiredStatus};

/// What the rules read of an allocation (a pass does not copy the allocations).
#[derive(Debug, Clone)]
pub(super) struct AllocFacts {
    pub id: String,
    pub eval_id: String,
    pub namespace: String,
    pub job_id: String,
    pub group: String,
    /// Placed by a batch job (its evaluation was a batch one).
    pub batch: bool,
    pub client_status: ClientStatus,
    pub desired_status: DesiredStatus,
    pub create_index: u64,
    /// Last change, ns.
    pub modify_time: u64,
}

impl AllocFacts {
    fn of(a: &Allocation) -> Self {
        Self {
            id: a.id.clone(),
            eval_id: a.eval_id.clone(),
            namespace: a.namespace.clone(),
            job_id: a.job_id.clone(),
            group: a.task_group.clone(),
            batch: a.job.job_type == JobType::Batch,
            client_status: a.client_status,
            desired_status: a.desired_status,
            create_index: a.create_index,
            modify_time: a.modify_time,
        }
    }

    /// Done on the client: complete, failed or lost.
    fn terminal(&self) -> bool {
        matches!(
            self.client_status,
            ClientStatus::Complete | ClientStatus::Failed | ClientStatus::Lost
        )
    }
}

/// Whether `time` (ns) is more than `age` before `now`.
fn older(time: u64, age: Duration, now: u64) -> bool {
    now.saturating_sub(time) as u128 > age.as_nanos()
}

fn eval_terminal(e: &Evaluation) -> bool {
    matches!(e.status.as_str(), "complete" | "failed" | "canceled")
}

fn dead(job: &Job) -> bool {
    job.state.status == "dead"
}

/// Whether a failed allocation of `group` would be replaced by its reschedule policy
/// (none for system jobs).
fn reschedules(_job: &Job, group: &crate::jobspec::TaskGroup) -> bool {
    group
        .reschedule_policy
        .as_ref()
        .is_some_and(|p| p.enabled())
}

/// Nomad's `allocGCEligible`: a terminal allocation older than `threshold` may go unless
/// its live job still needs it (to replace a failed one, or a lost one it will not).
fn alloc_eligible(a: &AllocFacts, job: Option<&Job>, now: u64, threshold: Duration) -> bool {
    if !a.terminal() || !older(a.modify_time, threshold, now) {
        return false;
    }
    let Some(job) = job else { return true };
    let Some(group) = job.group(&a.group) else {
        return true;
    };
    let prevents_on_lost = group.kept.get("PreventRescheduleOnLost") == Some(&true.into());
    if !job.stop && prevents_on_lost && a.client_status == ClientStatus::Lost {
        return false;
    }
    if job.stop || dead(job) || a.desired_status == DesiredStatus::Stop {
        return true;
    }
    a.client_status != ClientStatus::Failed || !reschedules(job, group)
}

/// Nomad's `gcEval` for one allocation of the evaluation collection: whether its record
/// goes (its evaluation, if still kept, being terminal and old enough).
fn eval_gc_alloc(a: &AllocFacts, job: Option<&Job>, now: u64, c: &ServerGcConfig) -> bool {
    if !a.batch {
        return alloc_eligible(a, job, now, c.eval_threshold);
    }
    let t = c.batch_eval_threshold;
    match job {
        // `olderVersionTerminalAllocs`: a live batch job keeps its current allocations.
        Some(j) if !(dead(j) && j.stop) => {
            a.create_index < j.state.job_modify_index
                && a.terminal()
                && older(a.modify_time, t, now)
        }
        _ => alloc_eligible(a, job, now, t),
    }
}

/// Dead jobs [`Server::system_gc`] collects: not the parent of a live child, and a periodic
/// or parameterized parent only once stopped. `jobs` carry their status.
pub(super) fn dead_jobs(jobs: &[Job]) -> Vec<&Job> {
    let live_parents: BTreeSet<(&str, &str)> = jobs
        .iter()
        .filter(|c| !c.parent_id.is_empty() && !dead(c))
        .map(|c| (c.namespace.as_str(), c.parent_id.as_str()))
        .collect();
    jobs.iter()
        .filter(|j| dead(j) && !live_parents.contains(&(j.namespace.as_str(), j.id.as_str())))
        .filter(|j| !j.is_parent() || j.stop)
        .collect()
}

/// What one pass removes.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Pass {
    pub allocs: Vec<String>,
    pub evals: Vec<String>,
    /// (namespace, id, modify index seen).
    pub jobs: Vec<(String, String, u64)>,
}

/// What is collectible at `now`, of `jobs` (with their status), `allocs` and `evals`.
pub(super) fn plan(
    now: u64,
    c: &ServerGcConfig,
    jobs: &[Job],
    allocs: &[AllocFacts],
    evals: &[Evaluation],
) -> Pass {
    let mut gone: BTreeSet<&str> = BTreeSet::new();
    let mut evals_gone: BTreeSet<&str> = BTreeSet::new();
    let jobs_gone = job_gc(now, c, jobs, allocs, evals, &mut gone, &mut evals_gone);
    eval_gc(now, c, jobs, allocs, evals, &mut gone, &mut evals_gone);
    Pass {
        jobs: jobs_gone,
        // In the order found, which is the allocation list's.
        allocs: allocs
            .iter()
            .filter(|a| gone.contains(a.id.as_str()))
            .map(|a| a.id.clone())
            .collect(),
        evals: evals_gone.into_iter().map(str::to_string).collect(),
    }
}

/// Job collection (Nomad's `jobGC`): a dead job goes with everything of it, all older than
/// its threshold; its allocations and evaluations go into `gone` and `evals_gone`.
/// Returns the jobs, with the modify index each is collected at.
fn job_gc<'a>(
    now: u64,
    c: &ServerGcConfig,
    jobs: &[Job],
    allocs: &'a [AllocFacts],
    evals: &'a [Evaluation],
    gone: &mut BTreeSet<&'a str>,
    evals_gone: &mut BTreeSet<&'a str>,
) -> Vec<(String, String, u64)> {
    let mut allocs_of: HashMap<(&str, &str), Vec<&AllocFacts>> = HashMap::new();
    for a in allocs {
        allocs_of
            .entry((&a.namespace, &a.job_id))
            .or_default()
            .push(a);
    }
    let mut evals_of: HashMap<(&str, &str), Vec<&Evaluation>> = HashMap::new();
    for e in evals {
        evals_of
            .entry((&e.namespace, &e.job_id))
            .or_default()
            .push(e);
    }
    let t = c.job_threshold;
    let mut out = Vec::new();
    for job in dead_jobs(jobs) {
        let kind_ok = job.stop || matches!(job.job_type, JobType::Batch | JobType::Sysbatch);
        let tagged = job.kept.get("VersionTag").is_some_and(|v| !v.is_null());
        if !kind_ok || tagged || !older(job.state.submit_time.max(0) as u64, t, now) {
            continue;
        }
        let key = (job.namespace.as_str(), job.id.as_str());
        let its_evals = evals_of.get(&key).map_or(&[][..], Vec::as_slice);
        if !its_evals
            .iter()
            .all(|e| eval_terminal(e) && older(e.modify_time, t, now))
        {
            continue;
        }
        let its_allocs = allocs_of.get(&key).map_or(&[][..], Vec::as_slice);
        if !its_allocs
            .iter()
            .all(|a| alloc_eligible(a, Some(job), now, t))
        {
            continue;
        }
        gone.extend(its_allocs.iter().map(|a| a.id.as_str()));
        evals_gone.extend(its_evals.iter().map(|e| e.id.as_str()));
        out.push((
            job.namespace.clone(),
            job.id.clone(),
            job.state.modify_index,
        ));
    }
    out
}

/// Evaluation collection (Nomad's `evalGC`): allocations whose evaluation is terminal and
/// old, then evaluations no allocation is left of, into `gone` and `evals_gone`.
fn eval_gc<'a>(
    now: u64,
    c: &ServerGcConfig,
    jobs: &[Job],
    allocs: &'a [AllocFacts],
    evals: &'a [Evaluation],
    gone: &mut BTreeSet<&'a str>,
    evals_gone: &mut BTreeSet<&'a str>,
) {
    let jobs_by_key: BTreeMap<(&str, &str), &Job> = jobs
        .iter()
        .map(|j| ((j.namespace.as_str(), j.id.as_str()), j))
        .collect();
    let evals_by_id: HashMap<&str, &Evaluation> =
        evals.iter().map(|e| (e.id.as_str(), e)).collect();
    let threshold = |batch: bool| {
        if batch {
            c.batch_eval_threshold
        } else {
            c.eval_threshold
        }
    };
    let by_evals: Vec<&str> = allocs
        .iter()
        .filter(|a| !gone.contains(a.id.as_str()))
        .filter(|a| {
            evals_by_id
                .get(a.eval_id.as_str())
                .is_none_or(|e| eval_terminal(e) && older(e.modify_time, threshold(a.batch), now))
        })
        .filter(|a| {
            let job = jobs_by_key.get(&(a.namespace.as_str(), a.job_id.as_str()));
            eval_gc_alloc(a, job.copied(), now, c)
        })
        .map(|a| a.id.as_str())
        .collect();
    gone.extend(by_evals);
    let mut left: HashMap<&str, usize> = HashMap::new();
    for a in allocs.iter().filter(|a| !gone.contains(a.id.as_str())) {
        *left.entry(a.eval_id.as_str()).or_default() += 1;
    }
    for e in evals {
        if !evals_gone.contains(e.id.as_str())
            && eval_terminal(e)
            && older(e.modify_time, threshold(e.eval_type == "batch"), now)
            && !left.contains_key(e.id.as_str())
        {
            evals_gone.insert(&e.id);
        }
    }
}

impl Server {
    /// Nomad's forced garbage collection (`nomad system gc`): every finished allocation,
    /// then every dead job (stopped, or with all its work finished) that is not the
    /// parent of a live child, with its versions. Returns the jobs collected.
    pub async fn system_gc(self: &Arc<Self>) -> Result<Vec<String>, AllocActionError> {
        self.client.gc_all().await?;
        let jobs = self.jobs();
        let dead: Vec<(String, String)> = dead_jobs(&jobs)
            .into_iter()
            .map(|j| (j.namespace.clone(), j.id.clone()))
            .collect();
        let mut collected = Vec::new();
        for (ns, id) in dead {
            if self.purge_job(&ns, &id, None)? {
                collected.push(id);
            }
        }
        if !collected.is_empty() {
            self.changes.bump();
            tracing::info!(jobs = ?collected, "garbage collection purged dead jobs");
        }
        // Forced, as Nomad's: every ended deployment, whatever its age.
        let now = crate::util::now_nanos();
        if !self.collect_deployments(now, Duration::ZERO).is_empty() {
            self.changes.bump();
        }
        Ok(collected)
    }

    /// Run [`Server::collect_garbage`] every `c.interval` until the agent is dropped.
    pub fn spawn_core_gc(self: &Arc<Self>, c: ServerGcConfig) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(c.interval).await;
                let Some(a) = weak.upgrade() else { return };
                a.collect_garbage(&c).await;
            }
        });
    }

    /// One pass of the collection: returns what it removed.
    pub(super) async fn collect_garbage(self: &Arc<Self>, c: &ServerGcConfig) -> Pass {
        let mut done = Pass::default();
        if let Some(reason) = self.db.unwritable() {
            tracing::debug!(%reason, "garbage collection skipped: the state DB refuses writes");
            return done;
        }
        let jobs = self.jobs();
        let allocs = self.client.visit_allocations(|a| Some(AllocFacts::of(a)));
        let evals = self.evals.list("");
        let pass = plan(crate::util::now_nanos(), c, &jobs, &allocs, &evals);
        // A record the state DB would not forget stays; its evaluation and job with it.
        let mut refused = false;
        for id in pass.allocs {
            if self.db.unwritable().is_some() {
                refused = true;
                break;
            }
            match self.client.purge_allocation(&id).await {
                Ok(true) => done.allocs.push(id),
                Ok(false) => {}
                Err(e) => {
                    tracing::debug!(alloc_id = %id, error = %e, "garbage collection kept an allocation; tried again next pass");
                    refused = true;
                }
            }
        }
        if !refused {
            let ids: BTreeSet<String> = pass.evals.into_iter().collect();
            done.evals = self.evals.remove(&ids);
            for (ns, id, index) in pass.jobs {
                match self.purge_job(&ns, &id, Some(index)) {
                    Ok(true) => done.jobs.push((ns, id, index)),
                    Ok(false) => {}
                    Err(e) => {
                        tracing::debug!(job = %id, namespace = %ns, error = %e, "garbage collection kept a job; tried again next pass");
                        break;
                    }
                }
            }
        }
        let deployments =
            self.collect_deployments(crate::util::now_nanos(), super::deployments::GC_THRESHOLD);
        if !done.jobs.is_empty() || !deployments.is_empty() {
            self.changes.bump();
        }
        if !deployments.is_empty() {
            tracing::info!(
                deployments = deployments.len(),
                "garbage collection removed ended deployments"
            );
        }
        if done != Pass::default() {
            tracing::info!(
                allocations = done.allocs.len(),
                evaluations = done.evals.len(),
                jobs = done.jobs.len(),
                "garbage collection removed what ended before its threshold"
            );
            tracing::debug!(allocations = ?done.allocs, evaluations = ?done.evals,
                jobs = ?done.jobs.iter().map(|j| format!("{}/{}", j.0, j.1)).collect::<Vec<_>>(),
                "garbage collection removed");
        }
        done
    }

    /// Forget a dead job with its versions and submissions, once the state DB forgot it
    /// (a refused delete leaves the job shown). With `modify_index`, only if the job is
    /// still at that index. `Ok(false)` when there is no such dead job.
    pub(super) fn purge_job(
        self: &Arc<Self>,
        namespace: &str,
        id: &str,
        modify_index: Option<u64>,
    ) -> Result<bool, StateError> {
        let guard = self.plan_lock.acquire();
        let Some(job) = self.job(namespace, id) else {
            return Ok(false);
        };
        if !dead(&job) || modify_index.is_some_and(|i| i != job.state.modify_index) {
            return Ok(false);
        }
        self.db.delete_job(namespace, id)?;
        self.jobs
            .write()
            .unwrap()
            .remove(&(namespace.to_string(), id.to_string()));
        drop(guard);
        self.forget_scaling_events(namespace, id);
        let mut stopped = job;
        stopped.stop = true;
        self.periodic_job_changed(&stopped);
        Ok(true)
    }
}

#[cfg(test)]
#[path = "core_gc_tests.rs"]
mod tests;
