//! The node's scheduling state, as Nomad's servers keep it for a node: eligibility and
//! drain. An ineligible node places nothing new (a registration's missing allocations wait
//! in a blocked evaluation until it is eligible again). A drain makes the node ineligible
//! and stops its allocations as Nomad's drainer does, with nowhere else to migrate them:
//! service allocations at once, batch allocations when they finish or at the deadline,
//! system allocations last (or never, with `IgnoreSystemJobs`); a negative deadline stops
//! everything now. When nothing is left to stop the drain is complete and the node stays
//! ineligible until marked eligible. The state survives restarts (kept beside the node's
//! identity in the state DB).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Server;
use crate::jobspec::JobType;
use crate::state::StateError;

/// Key of the scheduling state in the node identity record.
const STATE_KEY: &str = "scheduling";

/// How often a drain looks again when nothing changed (for its deadline).
const DRAIN_TICK: Duration = Duration::from_millis(500);

/// Nomad's `DrainSpec`: how to drain. Unknown fields are ignored, as Go's decoder does.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct DrainSpec {
    /// Nanoseconds until remaining allocations are stopped; 0 waits for batch work to
    /// finish, negative stops everything now.
    pub deadline: i64,
    /// Leave system jobs' allocations running.
    pub ignore_system_jobs: bool,
}

/// Nomad's `DrainStrategy`: a drain in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DrainStrategy {
    /// As requested, ns.
    pub deadline: i64,
    /// Leave system jobs' allocations running.
    pub ignore_system_jobs: bool,
    /// When remaining allocations are stopped (zero time without a deadline).
    #[serde(with = "crate::util::go_time_serde")]
    pub force_deadline: u64,
    /// When the drain started.
    #[serde(with = "crate::util::go_time_serde")]
    pub started_at: u64,
}

/// Nomad's `DrainMetadata`: the last drain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DrainMetadata {
    #[serde(with = "crate::util::go_time_serde")]
    pub started_at: u64,
    #[serde(with = "crate::util::go_time_serde")]
    pub updated_at: u64,
    /// `draining`, `complete` or `canceled`.
    pub status: String,
    #[serde(rename = "AccessorID")]
    pub accessor_id: String,
    pub meta: Option<BTreeMap<String, String>>,
}

/// The node's scheduling state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeScheduling {
    /// New allocations may be placed.
    pub eligible: bool,
    /// The drain in progress.
    pub drain: Option<DrainStrategy>,
    /// The last drain, if any.
    pub last_drain: Option<DrainMetadata>,
    /// Index of the last change.
    pub modify_index: u64,
}

impl Default for NodeScheduling {
    fn default() -> Self {
        Self {
            eligible: true,
            drain: None,
            last_drain: None,
            modify_index: 0,
        }
    }
}

impl NodeScheduling {
    /// Nomad's `SchedulingEligibility`.
    pub fn eligibility(&self) -> &'static str {
        if self.eligible {
            "eligible"
        } else {
            "ineligible"
        }
    }
}

/// What a node update answers (Nomad's `NodeDrainUpdateResponse`,
/// `NodeEligibilityUpdateResponse`).
#[derive(Debug, Clone)]
pub struct NodeUpdate {
    /// Evaluations made (jobs placed again when the node became eligible).
    pub eval_ids: Vec<String>,
    /// Index of the change.
    pub index: u64,
}

/// A node update that was refused.
#[derive(Debug, thiserror::Error)]
pub enum NodeUpdateError {
    /// The request is wrong (names the field).
    #[error("{0}")]
    Invalid(String),
    /// The state DB failed.
    #[error(transparent)]
    State(#[from] StateError),
}

impl Server {
    /// The node's scheduling state.
    pub fn scheduling(&self) -> NodeScheduling {
        self.scheduling.read().unwrap().clone()
    }

    /// Whether new allocations may be placed here.
    pub(super) fn eligible(&self) -> bool {
        self.scheduling.read().unwrap().eligible
    }

    /// Take up the scheduling state an earlier run stored; a drain it did not finish goes
    /// on.
    pub fn resume_scheduling(self: &Arc<Self>) {
        let scheduling = self.load_scheduling();
        let draining = scheduling.drain.is_some();
        *self.scheduling.write().unwrap() = scheduling;
        if draining {
            let generation = self.drain_generation.fetch_add(1, Ordering::SeqCst) + 1;
            let s = self.clone();
            tokio::spawn(async move { s.run_drain(generation).await });
        }
    }

    /// The scheduling state stored by an earlier run.
    fn load_scheduling(&self) -> NodeScheduling {
        self.db
            .node_identity()
            .ok()
            .flatten()
            .and_then(|m| m.get(STATE_KEY).cloned())
            .and_then(|s| match serde_json::from_str(&s) {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::warn!(error = %e, "stored node scheduling state unreadable; node eligible");
                    None
                }
            })
            .unwrap_or_default()
    }

    /// Change the scheduling state: store it, tell the node event and the event stream.
    fn update_scheduling(
        &self,
        event_type: &'static str,
        message: Option<&str>,
        change: impl FnOnce(&mut NodeScheduling),
    ) -> Result<u64, StateError> {
        let index = self.changes.bump();
        let now = {
            let mut s = self.scheduling.write().unwrap();
            change(&mut s);
            s.modify_index = index;
            // The node event is told under the same lock, so a reader sees the new
            // state with its event.
            if let Some(m) = message {
                let subsystem = if event_type == "NodeDrain" {
                    "Drain"
                } else {
                    "Cluster"
                };
                self.node_events
                    .push(subsystem, m.to_string(), BTreeMap::new());
            }
            s.clone()
        };
        let mut identity = self.db.node_identity()?.unwrap_or_default();
        identity.insert(
            STATE_KEY.into(),
            serde_json::to_string(&now).expect("plain data serializes"),
        );
        self.db.put_node_identity(&identity)?;
        let events = &self.changes.events;
        if events.wanted() {
            let node = self.node_view.get().map(|view| view()).unwrap_or_default();
            events.publish(|| crate::events::Event {
                topic: "Node",
                event_type,
                key: self.client.node().id,
                namespace: String::new(),
                filter_keys: Vec::new(),
                index,
                payload: crate::events::Payload::Node(Box::new(node)),
                line: Default::default(),
            });
        }
        Ok(index)
    }

    /// `/v1/node/{id}/eligibility`. Marking a draining node eligible is refused, as Nomad
    /// does; a node made eligible places what its jobs are missing.
    pub fn set_eligibility(
        self: &Arc<Self>,
        eligible: bool,
    ) -> Result<NodeUpdate, NodeUpdateError> {
        let current = self.scheduling();
        if eligible && current.drain.is_some() {
            return Err(NodeUpdateError::Invalid(
                "can not set node's scheduling eligibility to eligible while it is draining".into(),
            ));
        }
        let message = (current.eligible != eligible).then_some(if eligible {
            "Node marked as eligible for scheduling"
        } else {
            "Node marked as ineligible for scheduling"
        });
        let index =
            self.update_scheduling("NodeEligibility", message, |s| s.eligible = eligible)?;
        let eval_ids = if eligible && !current.eligible {
            self.evaluate_node()
        } else {
            Vec::new()
        };
        Ok(NodeUpdate { eval_ids, index })
    }

    /// `/v1/node/{id}/drain`: start a drain (`spec`), or with none cancel the one in
    /// progress; `mark_eligible` with a cancel makes the node eligible again.
    pub fn drain_node(
        self: &Arc<Self>,
        spec: Option<DrainSpec>,
        mark_eligible: bool,
        meta: Option<BTreeMap<String, String>>,
    ) -> Result<NodeUpdate, NodeUpdateError> {
        let now = crate::util::now_nanos();
        let generation = self.drain_generation.fetch_add(1, Ordering::SeqCst) + 1;
        let Some(spec) = spec else {
            let was = self.scheduling();
            let index = self.update_scheduling(
                "NodeDrain",
                was.drain
                    .is_some()
                    .then_some("Node drain strategy cancelled"),
                |s| {
                    if s.drain.take().is_some()
                        && let Some(m) = s.last_drain.as_mut()
                    {
                        m.status = "canceled".into();
                        m.updated_at = now;
                    }
                    if mark_eligible {
                        s.eligible = true;
                    }
                },
            )?;
            let eval_ids = if mark_eligible && !was.eligible {
                self.evaluate_node()
            } else {
                Vec::new()
            };
            return Ok(NodeUpdate { eval_ids, index });
        };
        let strategy = DrainStrategy {
            deadline: spec.deadline,
            ignore_system_jobs: spec.ignore_system_jobs,
            force_deadline: if spec.deadline > 0 {
                now.saturating_add(spec.deadline as u64)
            } else {
                0
            },
            started_at: now,
        };
        let index = self.update_scheduling("NodeDrain", Some("Node drain strategy set"), |s| {
            s.eligible = false;
            let started = s.drain.as_ref().map(|d| d.started_at).unwrap_or(now);
            s.drain = Some(DrainStrategy {
                started_at: started,
                ..strategy.clone()
            });
            s.last_drain = Some(DrainMetadata {
                started_at: started,
                updated_at: now,
                status: "draining".into(),
                accessor_id: String::new(),
                meta,
            });
        })?;
        let agent = self.clone();
        tokio::spawn(async move { agent.run_drain(generation).await });
        Ok(NodeUpdate {
            eval_ids: Vec::new(),
            index,
        })
    }

    /// Carry out the drain of `generation` until it is complete or superseded.
    pub(super) async fn run_drain(self: Arc<Self>, generation: u64) {
        let mut changes = self.changes.subscribe();
        loop {
            if self.drain_generation.load(Ordering::SeqCst) != generation {
                return;
            }
            let Some(strategy) = self.scheduling().drain else {
                return;
            };
            if self.drain_step(&strategy) {
                let now = crate::util::now_nanos();
                let done = self.update_scheduling("NodeDrain", Some("Node drain complete"), |s| {
                    s.drain = None;
                    if let Some(m) = s.last_drain.as_mut() {
                        m.status = "complete".into();
                        m.updated_at = now;
                    }
                });
                match done {
                    Ok(_) => tracing::info!("node drain complete"),
                    Err(e) => tracing::error!(error = %e, "recording the node drain's end failed"),
                }
                return;
            }
            let _ = tokio::time::timeout(DRAIN_TICK, changes.changed()).await;
        }
    }

    /// Stop what the drain stops now; whether nothing it waits for is left.
    fn drain_step(&self, strategy: &DrainStrategy) -> bool {
        let forced = strategy.deadline < 0
            || (strategy.force_deadline > 0 && crate::util::now_nanos() >= strategy.force_deadline);
        let live: Vec<(Arc<crate::allocrunner::AllocRunner>, JobType)> = self
            .client
            .runners()
            .into_iter()
            .filter_map(|r| {
                r.shared()
                    .peek(|a| (!a.is_terminal()).then_some(a.job.job_type))
                    .map(|t| (r.clone(), t))
            })
            .collect();
        let is_system = |t: JobType| matches!(t, JobType::System | JobType::Sysbatch);
        let others_left = live.iter().any(|(_, t)| !is_system(*t));
        let mut waiting = false;
        for (r, t) in &live {
            let stop = if is_system(*t) {
                if strategy.ignore_system_jobs {
                    continue;
                }
                forced || !others_left
            } else if t.runs_to_completion() {
                forced
            } else {
                true
            };
            if stop
                && r.shared()
                    .peek(|a| a.desired_status != crate::structs::DesiredStatus::Stop)
            {
                r.stop("alloc is being migrated: node drain");
            }
            waiting = true;
        }
        !waiting
    }
}
