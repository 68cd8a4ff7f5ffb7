//! Evaluations. A single node schedules a job the moment it is registered, so every
//! evaluation is complete when it is created; they are kept (in memory, the newest
//! [`MAX_EVALS`]) so that tools that follow one — `nomad job run`'s monitor, python-nomad —
//! find it, with the allocations it placed.

use std::collections::{BTreeMap, VecDeque};
use std::sync::RwLock;

use serde::Serialize;

/// Most evaluations kept.
pub const MAX_EVALS: usize = 1000;

/// An evaluation (Nomad's `Evaluation`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Evaluation {
    #[serde(rename = "ID")]
    pub id: String,
    pub namespace: String,
    /// The job's priority.
    pub priority: u32,
    /// The job's type (service, batch, system, sysbatch).
    #[serde(rename = "Type")]
    pub eval_type: String,
    /// job-register, job-deregister or alloc-stop.
    pub triggered_by: String,
    #[serde(rename = "JobID")]
    pub job_id: String,
    /// The job's modify index when it was evaluated.
    pub job_modify_index: u64,
    /// The node a node-update evaluation is about; empty for the others (Nomad sets it
    /// on those alone).
    #[serde(rename = "NodeID")]
    pub node_id: String,
    /// Always complete: placement is immediate.
    pub status: String,
    pub status_description: String,
    /// Groups that could not be placed (none: a refused job is a 400 and no evaluation).
    #[serde(rename = "FailedTGAllocs")]
    pub failed_tg_allocs: Option<BTreeMap<String, serde_json::Value>>,
    /// Allocations still queued per group (always 0).
    pub queued_allocations: BTreeMap<String, u64>,
    /// No deployments on a single node.
    #[serde(rename = "DeploymentID")]
    pub deployment_id: String,
    /// Index at creation.
    pub create_index: u64,
    /// Index of the last change.
    pub modify_index: u64,
    /// Creation time, ns.
    pub create_time: u64,
    /// Last change, ns.
    pub modify_time: u64,
}

/// What triggered an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A job was registered.
    JobRegister,
    /// A job was deregistered.
    JobDeregister,
    /// One allocation was stopped.
    AllocStop,
    /// A periodic job launched a child.
    PeriodicJob,
    /// A job was evaluated again on request.
    JobEvaluate,
    /// The node changed (drain, eligibility, an evaluation of its jobs on request).
    NodeUpdate,
}

impl Trigger {
    /// Nomad's `TriggeredBy` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::JobRegister => "job-register",
            Trigger::JobDeregister => "job-deregister",
            Trigger::AllocStop => "alloc-stop",
            Trigger::PeriodicJob => "periodic-job",
            Trigger::JobEvaluate => "job-register",
            Trigger::NodeUpdate => "node-update",
        }
    }

    /// The `Job` event this change of the job is, if it changes the job.
    pub fn job_event(self) -> Option<&'static str> {
        match self {
            Trigger::JobRegister => Some("JobRegistered"),
            Trigger::JobDeregister => Some("JobDeregistered"),
            Trigger::AllocStop
            | Trigger::PeriodicJob
            | Trigger::JobEvaluate
            | Trigger::NodeUpdate => None,
        }
    }
}

/// What an evaluation is about.
pub struct EvalRequest<'a> {
    /// Id to give it.
    pub id: String,
    pub namespace: &'a str,
    pub job_id: &'a str,
    /// The job's type.
    pub job_type: &'a str,
    pub priority: u32,
    /// Groups of the job.
    pub groups: Vec<String>,
    /// What triggered it.
    pub triggered_by: Trigger,
    /// The change index.
    pub index: u64,
    /// This node (kept only by a node-update evaluation).
    pub node_id: &'a str,
}

/// The newest evaluations, oldest first.
#[derive(Default)]
pub struct EvalBook(RwLock<VecDeque<Evaluation>>);

impl EvalBook {
    /// Record a completed evaluation; returns it.
    pub fn record(&self, r: EvalRequest<'_>) -> Evaluation {
        let now = crate::util::now_nanos();
        let eval = Evaluation {
            id: r.id.clone(),
            namespace: r.namespace.to_string(),
            priority: r.priority,
            eval_type: r.job_type.to_string(),
            triggered_by: r.triggered_by.as_str().to_string(),
            job_id: r.job_id.to_string(),
            job_modify_index: r.index,
            node_id: match r.triggered_by {
                Trigger::NodeUpdate => r.node_id.to_string(),
                _ => String::new(),
            },
            status: "complete".into(),
            status_description: String::new(),
            failed_tg_allocs: None,
            queued_allocations: r.groups.into_iter().map(|g| (g, 0)).collect(),
            deployment_id: String::new(),
            create_index: r.index,
            modify_index: r.index,
            create_time: now,
            modify_time: now,
        };
        let mut evals = self.0.write().unwrap();
        evals.push_back(eval.clone());
        while evals.len() > MAX_EVALS {
            evals.pop_front();
        }
        eval
    }

    /// One evaluation.
    pub fn get(&self, id: &str) -> Option<Evaluation> {
        self.0.read().unwrap().iter().find(|e| e.id == id).cloned()
    }

    /// Evaluations whose id starts with `prefix`, newest first.
    pub fn list(&self, prefix: &str) -> Vec<Evaluation> {
        self.0
            .read()
            .unwrap()
            .iter()
            .rev()
            .filter(|e| e.id.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// A job's evaluations, newest first.
    pub fn of_job(&self, namespace: &str, job: &str) -> Vec<Evaluation> {
        self.0
            .read()
            .unwrap()
            .iter()
            .rev()
            .filter(|e| e.namespace == namespace && e.job_id == job)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: &str, job: &str) -> EvalRequest<'static> {
        EvalRequest {
            id: id.into(),
            namespace: "default",
            job_id: Box::leak(job.to_string().into_boxed_str()),
            job_type: "batch",
            priority: 50,
            groups: vec!["g".into()],
            triggered_by: Trigger::JobRegister,
            index: 7,
            node_id: "n",
        }
    }

    #[test]
    fn keeps_the_newest_and_finds_by_id_prefix_and_job() {
        let book = EvalBook::default();
        for i in 0..MAX_EVALS + 5 {
            book.record(req(&format!("e{i:05}"), if i % 2 == 0 { "a" } else { "b" }));
        }
        assert!(book.get("e00000").is_none(), "the oldest are dropped");
        let newest = book.get(&format!("e{:05}", MAX_EVALS + 4)).unwrap();
        assert_eq!(newest.status, "complete");
        assert_eq!(newest.queued_allocations["g"], 0);
        assert_eq!(book.list("e0100").len(), 5);
        assert!(book.of_job("default", "a").iter().all(|e| e.job_id == "a"));
        assert_eq!(book.of_job("other", "a").len(), 0);
    }

    #[test]
    fn only_a_node_update_evaluation_names_the_node() {
        let book = EvalBook::default();
        assert_eq!(book.record(req("a", "j")).node_id, "");
        let mut r = req("b", "j");
        r.triggered_by = Trigger::NodeUpdate;
        assert_eq!(book.record(r).node_id, "n");
    }
}
