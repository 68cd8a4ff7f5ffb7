//! Planning a job: the client's snapshot, with what the server knows (eligibility,
//! completed allocations), into the planner ([`crate::server::plan`]).

use std::sync::Arc;

use super::Server;
use crate::allocrunner::AllocRunner;
use crate::jobspec::bounds;
use crate::jobspec::{Job, JobspecError};
use crate::server::plan::{self, ClientSnapshot, EndedAlloc, JobPlan, Plan};

impl Server {
    /// The live (not terminal) allocations of the job `(namespace, id)` as registered now.
    pub(super) fn live_runners(&self, namespace: &str, id: &str) -> Vec<Arc<AllocRunner>> {
        self.client
            .live_runners(&(namespace.to_string(), id.to_string()))
    }

    /// Plan `job` against what runs now (see [`plan::plan`]).
    pub(super) fn plan(&self, job: Job) -> Result<Plan, JobspecError> {
        self.plan_with(job, false)
    }

    /// [`Server::plan`]; with `reevaluate`, an unchanged job's missing allocations are
    /// placed again.
    pub(super) fn plan_with(&self, job: Job, reevaluate: bool) -> Result<Plan, JobspecError> {
        let key = (job.namespace.clone(), job.id.clone());
        let existing = self.jobs.read().unwrap().get(&key).cloned();
        let snapshot = self.client_snapshot(&key);
        plan::plan(job, existing, &snapshot, reevaluate)
    }

    /// What the planner reads of the client for a plan of job `key`, with the node's
    /// eligibility and the job's ended allocations nothing replaced yet.
    pub(super) fn client_snapshot(&self, key: &(String, String)) -> ClientSnapshot {
        let mut snap = self.client.snapshot(key);
        snap.eligible = self.eligible();
        snap.deployment = self.latest_deployment(&key.0, &key.1);
        snap.ended = self.visit_job_allocations(&key.0, &key.1, false, |a| {
            (a.is_terminal() && a.lineage.next_allocation.is_empty()).then(|| EndedAlloc::of(a))
        });
        snap
    }

    /// What registering `job` would do, without doing it (`/v1/job/{id}/plan`).
    pub fn plan_job(&self, job: Job, want_diff: bool) -> Result<JobPlan, JobspecError> {
        bounds::check(&job)?;
        Ok(self.plan(job)?.job_plan(want_diff))
    }
}
