//! Replacing allocations that ended and should not have: Nomad's reschedule and
//! `alloc stop`. The planner decides ([`super::plan`]: replace now, later, or never);
//! this part makes it happen when it should:
//!
//! - an allocation that ends failed, or that `alloc stop` asked to replace, evaluates its
//!   job (`alloc-failure`), as a Nomad client's update of a failed allocation does;
//! - a replacement due later gets a follow-up evaluation, `pending` with its `WaitUntil`
//!   and named on the failed allocation (`FollowupEvalID`), run when the delay is over;
//! - at start, every job with a failed or replaced-on-stop allocation nothing replaced yet
//!   is evaluated again: the delays count from the failure time kept in the state DB, so
//!   they survive a restart (even `kill -9`).

use std::sync::Arc;
use std::time::Duration;

use super::Server;
use crate::evals::Trigger;
use crate::jobspec::Job;
use crate::server::plan::Followup;
use crate::structs::{Allocation, ClientStatus, DesiredStatus};

/// Whether the ended allocation `a` asks its job to be evaluated again.
fn wants_replacement(a: &Allocation) -> bool {
    a.lineage.next_allocation.is_empty()
        && (a.lineage.desired_transition.migrate == Some(true)
            || (a.client_status == ClientStatus::Failed && a.desired_status == DesiredStatus::Run))
}

impl Server {
    /// Stop one allocation (`alloc stop`). Returns the evaluation's id and the change
    /// index, or `None` if the allocation is unknown.
    pub fn stop_allocation(&self, id: &str) -> Option<(String, u64)> {
        let r = self.client.runner(id)?;
        // As Nomad's `alloc stop`: stopped, and replaced once it has stopped.
        r.shared()
            .update_lineage(|l| l.desired_transition.migrate = Some(true));
        r.stop("alloc is being migrated");
        let job = r.shared().peek(|a| a.job.clone());
        let index = self.changes.bump();
        let eval = self.evaluate(&job, crate::evals::Trigger::AllocStop, index);
        Some((eval, index))
    }

    /// Evaluate the job of each allocation that ends failed or asked to be replaced.
    pub fn spawn_rescheduler(self: &Arc<Self>) {
        let Some(mut ended) = self.client.take_ended() else {
            return;
        };
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some(id) = ended.recv().await {
                let Some(server) = weak.upgrade() else { return };
                let job = server.client.peek_allocation(&id, |a| {
                    wants_replacement(a).then(|| (a.namespace.clone(), a.job_id.clone()))
                });
                if let Some(Some((namespace, job))) = job {
                    // Planning takes the plan lock: off the runtime's workers.
                    let s = server.clone();
                    tokio::task::spawn_blocking(move || {
                        s.evaluate_for_reschedule(&namespace, &job, Trigger::AllocFailure)
                    });
                }
            }
        });
    }

    /// At start: evaluate every job with an allocation that ended failed (or was stopped
    /// to be replaced) and that nothing replaced, so its replacement is placed now or
    /// when its delay is over.
    pub fn reschedule_restored(self: &Arc<Self>) {
        let mut jobs = self.client.visit_allocations(|a| {
            (a.is_terminal() && wants_replacement(a))
                .then(|| (a.namespace.clone(), a.job_id.clone()))
        });
        jobs.sort();
        jobs.dedup();
        for (namespace, id) in jobs {
            self.evaluate_for_reschedule(&namespace, &id, Trigger::AllocFailure);
        }
    }

    fn evaluate_for_reschedule(self: &Arc<Self>, namespace: &str, id: &str, trigger: Trigger) {
        let Some(job) = self.job(namespace, id) else {
            return;
        };
        if job.stop || job.is_parent() {
            return;
        }
        if let Err(e) = self.evaluate_job_with(namespace, id, trigger) {
            tracing::warn!(job = %id, namespace = %namespace, error = %e, "evaluating a job for its failed allocation failed");
        }
    }

    /// Record the follow-up evaluations a plan asks for (one per failed allocation that
    /// has none pending yet), name each on its allocation, and run each when its delay is
    /// over.
    pub(super) fn follow_up(self: &Arc<Self>, job: &Job, followups: &[Followup], index: u64) {
        for f in followups {
            let pending = self
                .client
                .peek_allocation(&f.alloc_id, |a| a.lineage.followup_eval_id.clone())
                .filter(|id| !id.is_empty() && self.evals.is_pending(id));
            if pending.is_some() {
                continue;
            }
            let node = self.client.node();
            let eval = self.evals.record_followup(
                super::evaluate::eval_request(job, Trigger::AllocReschedule, index, &node),
                f.wait_until,
            );
            drop(node);
            let eval_id = eval.id.clone();
            self.client.update_lineage(&f.alloc_id, |l| {
                l.followup_eval_id = eval_id.clone();
            });
            tracing::info!(job = %job.id, alloc = %f.alloc_id, eval = %eval_id, wait_until = %crate::util::go_time(f.wait_until), "failed allocation to be replaced after its reschedule delay");
            let wait = Duration::from_nanos(f.wait_until.saturating_sub(crate::util::now_nanos()));
            let weak = Arc::downgrade(self);
            let (namespace, id) = (job.namespace.clone(), job.id.clone());
            self.client.work().spawn(async move {
                tokio::time::sleep(wait).await;
                let Some(server) = weak.upgrade() else { return };
                tokio::task::spawn_blocking(move || {
                    server.evaluate_for_reschedule(&namespace, &id, Trigger::AllocReschedule);
                    let index = server.changes.bump();
                    let dc = server.client.node().datacenter.clone();
                    let done = server
                        .evals
                        .complete(&eval_id, &Default::default(), &dc, index);
                    if let Some(job) = server.job(&namespace, &id) {
                        server.publish_evals(&job, done, index);
                    }
                });
            });
        }
    }
}
