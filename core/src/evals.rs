//! Evaluations. A registration made over the API answers with a `pending` evaluation and
//! its placement follows at once on the agent ([`EvalBook::complete`] ends it); one made
//! inside the agent is complete when it returns. They are kept (in memory, the newest
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
    /// `pending` from registration until placement is done, then `complete` (or
    /// `failed` when the placement could not be stored); `blocked` for the evaluation
    /// unplaced allocations wait in, until it is `complete` or `canceled`.
    pub status: String,
    pub status_description: String,
    /// Groups that could not be placed (the node is not eligible, filtered out, or out of a
    /// resource), with Nomad's
    /// `AllocMetric` of the failure; `null` when everything was placed.
    #[serde(rename = "FailedTGAllocs")]
    pub failed_tg_allocs: Option<BTreeMap<String, serde_json::Value>>,
    /// Allocations still queued per group.
    pub queued_allocations: BTreeMap<String, u64>,
    /// The evaluation the unplaced allocations wait in.
    pub blocked_eval: String,
    /// The evaluation this one follows (a blocked one's).
    pub previous_eval: String,
    /// The evaluation that follows this one (none here).
    pub next_eval: String,
    /// A follow-up evaluation is not processed before this time (Go's zero time: at once).
    #[serde(serialize_with = "crate::util::go_time_serde::serialize")]
    pub wait_until: u64,
    /// The deployment it was made for (none: an evaluation is of a job, here).
    #[serde(rename = "DeploymentID")]
    pub deployment_id: String,
    /// Evaluations related to this one: Nomad fills them in only for `?related=true`,
    /// and sends `null` otherwise, as here.
    #[serde(skip_deserializing, serialize_with = "null")]
    pub related_evals: (),
    /// Index at creation.
    pub create_index: u64,
    /// Index of the last change.
    pub modify_index: u64,
    /// Creation time, ns.
    pub create_time: u64,
    /// Last change, ns.
    pub modify_time: u64,
}

fn null<S: serde::Serializer>(_: &(), s: S) -> Result<S::Ok, S::Error> {
    s.serialize_none()
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
    /// What blocked a job's allocations changed: they are tried again.
    QueuedAllocs,
    /// An allocation failed (or ended asking to be replaced, as `alloc stop` asks).
    AllocFailure,
    /// A failed allocation's reschedule delay is over (a follow-up evaluation).
    AllocReschedule,
    /// A deployment moved on (an allocation turned healthy, a promotion, a resume).
    DeploymentWatcher,
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
            Trigger::QueuedAllocs => "queued-allocs",
            Trigger::AllocFailure => "alloc-failure",
            Trigger::AllocReschedule => "alloc-reschedule",
            Trigger::DeploymentWatcher => "deployment-watcher",
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
            | Trigger::NodeUpdate
            | Trigger::QueuedAllocs
            | Trigger::AllocFailure
            | Trigger::AllocReschedule
            | Trigger::DeploymentWatcher => None,
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
    /// Allocations that could not be placed, per group.
    pub failed: &'a BTreeMap<String, Failed>,
    /// The node's datacenter (what a failure's metric names).
    pub datacenter: &'a str,
}

/// Why allocations of a group were not placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unplaced {
    /// The node is not eligible for scheduling (drain, or marked ineligible).
    Ineligible,
    /// The node was filtered out: a missing driver (`missing drivers`) or a constraint
    /// that does not hold (as Nomad names it, `${attr.kernel.name} = windows`).
    Filtered(String),
    /// The node has too little left of a resource (`cpu`, `memory`, `disk`).
    Exhausted(String),
    /// The node is in none of the job's datacenters (the job's patterns).
    Datacenters(Vec<String>),
}

/// A group's allocations that could not be placed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub count: u64,
    pub why: Unplaced,
}

/// Nomad's `AllocMetric` of a group's failed placements on the one node.
pub fn failure_metric(datacenter: &str, f: &Failed) -> serde_json::Value {
    let (evaluated, filtered, exhausted, available) = match &f.why {
        Unplaced::Ineligible | Unplaced::Datacenters(_) => (0, 0, 0, 0),
        Unplaced::Filtered(_) => (1, 1, 0, 1),
        Unplaced::Exhausted(_) => (1, 0, 1, 1),
    };
    // No node in the job's datacenters: each of them has none available (what `nomad job
    // run` prints as "No nodes are available in datacenter …").
    let available = match &f.why {
        Unplaced::Datacenters(dcs) => dcs.iter().map(|d| (d.clone(), 0.into())).collect(),
        _ => serde_json::Map::from_iter([(datacenter.to_string(), available.into())]),
    };
    let one = |k: &str| serde_json::json!({ k: 1 });
    serde_json::json!({
        "NodesEvaluated": evaluated, "NodesFiltered": filtered, "NodesInPool": 1,
        "NodesAvailable": available,
        "ClassFiltered": null,
        "ConstraintFiltered": match &f.why { Unplaced::Filtered(c) => one(c), _ => serde_json::Value::Null },
        "NodesExhausted": exhausted,
        "ClassExhausted": null,
        "DimensionExhausted": match &f.why { Unplaced::Exhausted(d) => one(d), _ => serde_json::Value::Null },
        "QuotaExhausted": null, "ResourcesExhausted": null, "Scores": null, "ScoreMetaData": null,
        "AllocationTime": 0, "CoalescedFailures": f.count.saturating_sub(1),
    })
}

/// The newest evaluations, oldest first.
#[derive(Default)]
pub struct EvalBook(RwLock<VecDeque<Evaluation>>);

impl EvalBook {
    /// Record a completed evaluation; returns it. With allocations it could not place, a
    /// blocked evaluation is recorded too, which [`EvalBook::unblock`] completes.
    pub fn record(&self, r: EvalRequest<'_>) -> Evaluation {
        let (failed, datacenter, index) = (r.failed, r.datacenter, r.index);
        let id = self.record_pending(r).id;
        let mut done = self.complete(&id, failed, datacenter, index);
        done.swap_remove(0)
    }

    /// Record an evaluation as `pending`: the job is stored, its placement not yet made
    /// (registration answers with it; [`EvalBook::complete`] ends it). `r.failed` is not
    /// read: what could not be placed is told when it completes.
    pub fn record_pending(&self, r: EvalRequest<'_>) -> Evaluation {
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
            status: "pending".into(),
            status_description: String::new(),
            failed_tg_allocs: None,
            queued_allocations: r.groups.into_iter().map(|g| (g, 0)).collect(),
            blocked_eval: String::new(),
            previous_eval: String::new(),
            next_eval: String::new(),
            wait_until: 0,
            deployment_id: String::new(),
            related_evals: (),
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

    /// Record a follow-up evaluation: `pending` until `wait_until` (ns since the epoch),
    /// when a failed allocation's reschedule delay is over (Nomad's "created for delayed
    /// rescheduling").
    pub fn record_followup(&self, r: EvalRequest<'_>, wait_until: u64) -> Evaluation {
        let mut eval = self.record_pending(r);
        let mut evals = self.0.write().unwrap();
        if let Some(e) = evals.iter_mut().rev().find(|e| e.id == eval.id) {
            e.wait_until = wait_until;
            e.status_description = "created for delayed rescheduling".into();
            eval = e.clone();
        }
        eval
    }

    /// Whether evaluation `id` is kept and still `pending`.
    pub fn is_pending(&self, id: &str) -> bool {
        self.0
            .read()
            .unwrap()
            .iter()
            .rev()
            .any(|e| e.id == id && e.status == "pending")
    }

    /// End a pending evaluation: `complete`, and with allocations it could not place
    /// (`failed`, per group) a blocked evaluation recorded after it. Returns what changed:
    /// the evaluation, then its blocked one (none when the evaluation is gone).
    pub fn complete(
        &self,
        id: &str,
        failed: &BTreeMap<String, Failed>,
        datacenter: &str,
        index: u64,
    ) -> Vec<Evaluation> {
        self.end(id, index, |eval| {
            eval.status = "complete".into();
            if failed.is_empty() {
                return None;
            }
            for (g, f) in failed {
                eval.queued_allocations.insert(g.clone(), f.count);
            }
            eval.failed_tg_allocs = Some(
                failed
                    .iter()
                    .map(|(g, f)| (g.clone(), failure_metric(datacenter, f)))
                    .collect(),
            );
            let blocked = Evaluation {
                id: uuid::Uuid::new_v4().to_string(),
                status: "blocked".into(),
                status_description: "created to place remaining allocations".into(),
                triggered_by: "queued-allocs".into(),
                previous_eval: eval.id.clone(),
                failed_tg_allocs: None,
                ..eval.clone()
            };
            eval.blocked_eval = blocked.id.clone();
            Some(blocked)
        })
    }

    /// End a pending evaluation as `failed`, saying why (the placement it made could not
    /// be stored).
    pub fn fail(&self, id: &str, why: &str, index: u64) -> Vec<Evaluation> {
        self.end(id, index, |eval| {
            eval.status = "failed".into();
            eval.status_description = why.to_string();
            None
        })
    }

    fn end(
        &self,
        id: &str,
        index: u64,
        f: impl FnOnce(&mut Evaluation) -> Option<Evaluation>,
    ) -> Vec<Evaluation> {
        let now = crate::util::now_nanos();
        let mut evals = self.0.write().unwrap();
        let Some(eval) = evals.iter_mut().rev().find(|e| e.id == id) else {
            return Vec::new();
        };
        eval.modify_index = index.max(eval.modify_index);
        eval.modify_time = now;
        let blocked = f(eval);
        let mut out = vec![eval.clone()];
        if let Some(b) = blocked {
            out.push(b.clone());
            evals.push_back(b);
            while evals.len() > MAX_EVALS {
                evals.pop_front();
            }
        }
        out
    }

    /// End the blocked evaluations of a job with `status`: `complete` once its
    /// allocations were placed after all, `canceled` when the job was stopped. Returns
    /// them as they are now.
    pub fn unblock(&self, namespace: &str, job: &str, status: &str, index: u64) -> Vec<Evaluation> {
        let now = crate::util::now_nanos();
        let mut out = Vec::new();
        for e in self.0.write().unwrap().iter_mut() {
            if e.status == "blocked" && e.namespace == namespace && e.job_id == job {
                e.status = status.into();
                e.status_description = String::new();
                e.modify_index = index;
                e.modify_time = now;
                out.push(e.clone());
            }
        }
        out
    }

    /// Allocations of a job waiting in blocked evaluations, per group.
    pub fn queued(&self, namespace: &str, job: &str) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for e in self.0.read().unwrap().iter() {
            if e.status == "blocked" && e.namespace == namespace && e.job_id == job {
                for (g, n) in &e.queued_allocations {
                    *out.entry(g.clone()).or_default() += n;
                }
            }
        }
        out
    }

    /// Jobs with a blocked evaluation, as (namespace, id).
    pub fn blocked_jobs(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .0
            .read()
            .unwrap()
            .iter()
            .filter(|e| e.status == "blocked")
            .map(|e| (e.namespace.clone(), e.job_id.clone()))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Forget the evaluations `ids` names (garbage collection); returns those it held.
    pub fn remove(&self, ids: &std::collections::BTreeSet<String>) -> Vec<String> {
        let mut removed = Vec::new();
        self.0.write().unwrap().retain(|e| {
            let gone = ids.contains(&e.id);
            if gone {
                removed.push(e.id.clone());
            }
            !gone
        });
        removed
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
            failed: Box::leak(Box::default()),
            datacenter: "dc1",
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
    fn unplaced_allocations_wait_in_a_blocked_evaluation_until_unblocked() {
        let book = EvalBook::default();
        let failed = BTreeMap::from([(
            "g".to_string(),
            Failed {
                count: 3,
                why: Unplaced::Ineligible,
            },
        )]);
        let e = book.record(EvalRequest {
            failed: &failed,
            ..req("e1", "a")
        });
        assert_eq!(e.queued_allocations["g"], 3);
        let metric = &e.failed_tg_allocs.as_ref().unwrap()["g"];
        assert_eq!(metric["CoalescedFailures"], 2);
        assert_eq!(metric["NodesAvailable"]["dc1"], 0);
        let exhausted = failure_metric(
            "dc1",
            &Failed {
                count: 1,
                why: Unplaced::Exhausted("memory".into()),
            },
        );
        assert_eq!(exhausted["DimensionExhausted"]["memory"], 1);
        assert_eq!(exhausted["NodesExhausted"], 1);
        let filtered = failure_metric(
            "dc1",
            &Failed {
                count: 2,
                why: Unplaced::Filtered("missing drivers".into()),
            },
        );
        assert_eq!(filtered["ConstraintFiltered"]["missing drivers"], 1);
        assert_eq!(filtered["NodesFiltered"], 1);
        let blocked = book.get(&e.blocked_eval).unwrap();
        assert_eq!(blocked.status, "blocked");
        assert_eq!(blocked.previous_eval, "e1");
        assert_eq!(book.queued("default", "a")["g"], 3);
        let done = book.unblock("default", "a", "complete", 9);
        assert_eq!(done.len(), 1);
        assert_eq!(book.get(&e.blocked_eval).unwrap().status, "complete");
        assert!(book.unblock("default", "a", "complete", 10).is_empty());
        assert!(book.queued("default", "a").is_empty());
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
