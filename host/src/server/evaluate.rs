//! Evaluations of changes to jobs: recorded `pending` when the change is stored, ended
//! when its placement is done (`complete`, with blocked work, or `failed`), and told on the
//! event stream in Nomad's order (the job, then its evaluation).

use std::collections::BTreeMap;

use super::Server;
use crate::evals::Trigger;
use crate::jobspec::Job;

/// No allocations failed to place (what a new evaluation starts with).
static NO_FAILURES: BTreeMap<String, crate::evals::Failed> = BTreeMap::new();

/// The request that records an evaluation of a change to `job` on `node`, with a new id.
pub(super) fn eval_request<'a>(
    job: &'a Job,
    trigger: Trigger,
    index: u64,
    node: &'a crate::taskenv::NodeInfo,
) -> crate::evals::EvalRequest<'a> {
    crate::evals::EvalRequest {
        id: uuid::Uuid::new_v4().to_string(),
        namespace: &job.namespace,
        job_id: &job.id,
        job_type: job.job_type.as_str(),
        priority: job.priority.clamp(0, 100) as u32,
        groups: job.task_groups.iter().map(|g| g.name.clone()).collect(),
        triggered_by: trigger,
        index,
        // Nomad names the node only in the evaluations a node's change made.
        node_id: if trigger == Trigger::NodeUpdate {
            &node.id
        } else {
            ""
        },
        failed: &NO_FAILURES,
        datacenter: &node.datacenter,
    }
}

impl Server {
    /// Record the (complete) evaluation of a change to `job` that places nothing;
    /// returns its id.
    pub(super) fn evaluate(&self, job: &Job, trigger: Trigger, index: u64) -> String {
        let id = self.evaluate_pending(job, trigger, index);
        self.evaluate_done(job, trigger, &id, index, Ok(&BTreeMap::new()));
        id
    }

    /// Record the `pending` evaluation of a change to `job` (its placement is still to be
    /// made), and tell the event stream of the job and of it, in Nomad's order.
    pub(super) fn evaluate_pending(&self, job: &Job, trigger: Trigger, index: u64) -> String {
        let node = self.client.node();
        let eval = self
            .evals
            .record_pending(eval_request(job, trigger, index, &node));
        drop(node);
        let events = &self.changes.events;
        if events.wanted()
            && let Some(event_type) = trigger.job_event()
        {
            // The job as the API shows it, then its evaluation.
            let record = self
                .job(&job.namespace, &job.id)
                .map(|r| serde_json::to_value(r).unwrap_or_default())
                .unwrap_or_else(|| serde_json::to_value(job).unwrap_or_default());
            events.publish(|| crate::events::Event {
                topic: "Job",
                event_type,
                key: job.id.clone(),
                namespace: job.namespace.clone(),
                filter_keys: Vec::new(),
                index,
                payload: crate::events::Payload::Job(Box::new(record)),
                line: Default::default(),
            });
        }
        self.publish_evals(job, vec![eval.clone()], index);
        eval.id
    }

    /// End the evaluation `id` of a change to `job`: `complete`, with what could not be
    /// placed (`failed`) waiting in a blocked evaluation, or `failed` with the error. An
    /// evaluation that placed everything completes the job's earlier blocked ones
    /// (stopping one allocation places nothing: blocked work stays blocked then).
    pub(super) fn evaluate_done(
        &self,
        job: &Job,
        trigger: Trigger,
        id: &str,
        index: u64,
        failed: Result<&BTreeMap<String, crate::evals::Failed>, String>,
    ) {
        let mut changed = Vec::new();
        if trigger != Trigger::AllocStop && failed.is_ok() {
            let status = if job.stop { "canceled" } else { "complete" };
            changed = self.evals.unblock(&job.namespace, &job.id, status, index);
        }
        let datacenter = self.client.node().datacenter.clone();
        let ended = match failed {
            Ok(failed) => self.evals.complete(id, failed, &datacenter, index),
            Err(why) => self.evals.fail(id, &why, index),
        };
        changed.splice(0..0, ended);
        self.publish_evals(job, changed, index);
    }

    pub(super) fn publish_evals(
        &self,
        job: &Job,
        evals: Vec<crate::evals::Evaluation>,
        index: u64,
    ) {
        let events = &self.changes.events;
        if !events.wanted() {
            return;
        }
        for eval in evals {
            events.publish(|| crate::events::Event {
                topic: "Evaluation",
                event_type: "EvaluationUpdated",
                key: eval.id.clone(),
                namespace: job.namespace.clone(),
                filter_keys: vec![job.id.clone()],
                index,
                payload: crate::events::Payload::Evaluation(Box::new(eval)),
                line: Default::default(),
            });
        }
    }
}
