//! What the server's planner reads of the client: the node's capacity with what live
//! allocations hold, the job's own live allocations, the node's devices, drivers and
//! eligibility, taken as one [`ClientSnapshot`] value; and the plan made from it
//! ([`crate::server::plan`]).

use std::sync::Arc;

use super::Agent;
use crate::allocrunner::AllocRunner;
use crate::client::Holdings;
use crate::jobspec::{Job, JobspecError};
use crate::server::bounds;
use crate::server::feasible::{self, Amounts};
use crate::server::plan::{self, ClientSnapshot, JobPlan, LiveAlloc, Plan};
use crate::structs::ClientStatus;

impl Agent {
    /// The live (not terminal) allocations of the job `(namespace, id)` as registered now.
    pub(super) fn live_runners(&self, namespace: &str, id: &str) -> Vec<Arc<AllocRunner>> {
        self.client
            .live_runners(&(namespace.to_string(), id.to_string()))
    }

    /// Plan `job` against what runs now (see [`plan::plan`]).
    pub(super) fn plan(&self, job: Job) -> Result<Plan, JobspecError> {
        self.plan_with(job, false)
    }

    /// [`Agent::plan`]; with `reevaluate`, an unchanged job's missing allocations are
    /// placed again.
    pub(super) fn plan_with(&self, job: Job, reevaluate: bool) -> Result<Plan, JobspecError> {
        let key = (job.namespace.clone(), job.id.clone());
        let existing = self.jobs.read().unwrap().get(&key).cloned();
        let completed = reevaluate && job.job_type.runs_to_completion();
        let snapshot = self.client_snapshot(&key, completed);
        plan::plan(job, existing, &snapshot, reevaluate)
    }

    /// What the planner reads of the client for a plan of job `key`; with `completed`, the
    /// job's completed allocations too.
    pub(super) fn client_snapshot(
        &self,
        key: &(String, String),
        completed: bool,
    ) -> ClientSnapshot {
        let Holdings {
            live,
            capacity,
            ports,
            devices,
            others_live,
        } = self.holdings(key);
        let completed = if completed {
            self.job_allocations(&key.0, &key.1, false)
                .iter()
                .filter(|a| a.client_status == ClientStatus::Complete)
                .map(|a| (a.task_group.clone(), a.index))
                .collect()
        } else {
            Vec::new()
        };
        ClientSnapshot {
            node: self.node(),
            eligible: self.eligible(),
            healthy_drivers: self.healthy_drivers(),
            devices: self.devices.node_devices(),
            host_ip: self.host_ip.clone(),
            max_live_allocs: self
                .resources
                .max_live_allocs
                .unwrap_or(bounds::MAX_NODE_LIVE_ALLOCS),
            live: live
                .iter()
                .map(|r| r.shared().peek(LiveAlloc::of))
                .collect(),
            completed,
            capacity,
            ports,
            held_devices: devices,
            others_live,
        }
    }

    /// What registering `job` would do, without doing it (`/v1/job/{id}/plan`).
    pub fn plan_job(&self, job: Job, want_diff: bool) -> Result<JobPlan, JobspecError> {
        bounds::check(&job)?;
        Ok(self.plan(job)?.job_plan(want_diff))
    }

    /// A node attribute as a number; 0 when absent or not a number.
    fn numeric_attribute(&self, key: &str) -> u64 {
        self.node()
            .attributes
            .get(key)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    }

    /// What the node offers allocations, and what live allocations other than those of
    /// job `except` (which a registration replaces) hold of it.
    pub(super) fn capacity(&self, except: &(String, String)) -> feasible::Capacity {
        self.holdings(except).capacity
    }

    /// The node's capacity with nothing held.
    fn empty_capacity(&self) -> feasible::Capacity {
        let cores = self
            .numeric_attribute("cpu.numcores")
            .clamp(1, u64::from(u16::MAX));
        let compute = self
            .resources
            .cpu_total_compute
            .unwrap_or_else(|| self.numeric_attribute("cpu.totalcompute"));
        feasible::Capacity {
            total: self.allocatable(),
            cores: (0..cores as u16).collect(),
            mhz_per_core: compute / cores,
            ..Default::default()
        }
    }

    /// What allocations may use of the node: its fingerprint, or the config's
    /// `cpu_total_compute` and `memory_total_mb`, minus the config's `reserved` block.
    pub fn allocatable(&self) -> Amounts {
        let attr = |k: &str| self.numeric_attribute(k);
        let r = &self.resources;
        Amounts {
            cpu: r
                .cpu_total_compute
                .unwrap_or_else(|| attr("cpu.totalcompute"))
                .saturating_sub(r.reserved.cpu.unwrap_or(0)),
            memory_mb: r
                .memory_total_mb
                .unwrap_or_else(|| attr("memory.totalbytes") >> 20)
                .saturating_sub(r.reserved.memory.unwrap_or(0)),
            disk_mb: r
                .disk_total_mb
                .unwrap_or_else(|| attr("unique.storage.bytesfree") >> 20)
                .saturating_sub(r.reserved.disk.unwrap_or(0)),
        }
    }

    /// A warning at start when the node offers less disk than one group asks by default
    /// (Nomad's 300 MB of ephemeral disk): every such job would wait, blocked on `disk`.
    pub(super) fn warn_if_little_disk(&self) {
        let disk = self.allocatable().disk_mb;
        if disk < 300 {
            tracing::warn!(
                disk_mb = disk,
                alloc_dir = %self.client.alloc_root().display(),
                "the node offers {disk} MB of disk (the allocation dir's free space, less `reserved`) \
                 and a group asks 300 MB by default: such jobs will not be placed; free space \
                 or set `client {{ disk_total_mb = N }}`"
            );
        }
    }

    /// Drivers detected and healthy now.
    pub(super) fn healthy_drivers(&self) -> Vec<String> {
        self.driver_infos()
            .into_iter()
            .filter(|(_, i)| i.detected && i.healthy)
            .map(|(n, _)| n)
            .collect()
    }

    /// What the live allocations of every job but `except` hold, and `except`'s own live
    /// allocations (kept up to date by [`crate::client::usage::NodeUsage`]).
    fn holdings(&self, except: &(String, String)) -> Holdings {
        self.client.holdings(except, self.empty_capacity())
    }
}
