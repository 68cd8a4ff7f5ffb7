//! Blocked evaluations are retried when what stopped them changes, as Nomad's blocked-evals
//! tracker unblocks them: an allocation ends and frees resources, a driver becomes healthy
//! (a component providing it is loaded, or its fingerprint recovers), the node becomes
//! eligible, its attributes change or a reload changes its host volumes. What the node looked like when placement last
//! failed is kept as a [`Snapshot`]; a watcher compares it with the node now and
//! evaluates the blocked jobs again (`queued-allocs`) only when it differs, so a job that
//! still does not fit makes no new evaluations.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::Server;
use crate::evals::Trigger;
use crate::structs::Amounts;

/// How often the watcher looks.
const TICK: Duration = Duration::from_millis(200);

/// What placement depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Snapshot {
    used: Amounts,
    total: Amounts,
    healthy_drivers: Vec<String>,
    eligible: bool,
    keys: BTreeMap<String, String>,
    host_volumes: BTreeMap<String, crate::taskenv::HostVolume>,
}

impl Server {
    /// The node as placement sees it now.
    pub(super) fn placement_snapshot(&self) -> Snapshot {
        Snapshot {
            used: self.client.capacity(&(String::new(), String::new())).used,
            total: self.client.allocatable(),
            healthy_drivers: self.client.healthy_drivers(),
            eligible: self.eligible(),
            keys: self.client.node().keys(),
            host_volumes: self.client.node().host_volumes,
        }
    }

    /// Placement of some job just failed: remember the node as it was when that job was
    /// planned (`seen`, taken before planning). Not the node now: a driver that became
    /// healthy while the plan ran would be in a snapshot taken now, and the unblocker would
    /// never see the change the blocked job waits for.
    pub(super) fn placement_failed(&self, seen: Snapshot) {
        *self.blocked_at.lock().unwrap() = Some(seen);
    }

    /// Watch for changes that may let blocked jobs place, and evaluate them again.
    pub fn spawn_unblocker(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(TICK).await;
                let Some(a) = weak.upgrade() else { return };
                let Some(then) = a.blocked_at.lock().unwrap().clone() else {
                    continue;
                };
                let jobs = a.evals.blocked_jobs();
                if jobs.is_empty() {
                    *a.blocked_at.lock().unwrap() = None;
                    continue;
                }
                if a.placement_snapshot() == then {
                    continue;
                }
                // Cleared first: an evaluation that fails again records the node anew.
                *a.blocked_at.lock().unwrap() = None;
                for (namespace, id) in jobs {
                    if let Err(e) = a.evaluate_job_with(&namespace, &id, Trigger::QueuedAllocs) {
                        tracing::warn!(job = %id, error = %e, "evaluating a blocked job again failed");
                    }
                }
            }
        });
    }
}
