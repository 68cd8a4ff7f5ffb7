//! What the server's planner reads of the client: the job's own live allocations, what
//! the other jobs' live allocations hold, and what the node offers (its capacity,
//! drivers, devices, address), taken as one [`ClientSnapshot`] value.

use std::collections::BTreeMap;

use super::{Client, JobKey};
use crate::devicemanager::NodeDeviceResource;
use crate::structs::{AllocatedResources, Allocation, Amounts, Capacity};
use crate::taskenv::NodeInfo;

/// A live allocation of the job being planned, as the client reports it.
#[derive(Debug, Clone)]
pub struct LiveAlloc {
    pub id: String,
    pub group: String,
    pub index: u32,
    /// What it holds.
    pub resources: AllocatedResources,
    /// The version of the job it runs.
    pub job: std::sync::Arc<crate::jobspec::Job>,
    /// The deployment that placed it (or moved it in place), if any.
    pub deployment_id: String,
    /// Placed as a canary.
    pub canary: bool,
    /// Its health in that deployment, once judged.
    pub healthy: Option<bool>,
}

impl LiveAlloc {
    /// The parts of `a` a plan reads.
    pub fn of(a: &Allocation) -> Self {
        let status = a.lineage.deployment_status.as_ref();
        Self {
            id: a.id.clone(),
            group: a.task_group.clone(),
            index: a.index,
            resources: a.allocated_resources.clone(),
            job: a.job.clone(),
            deployment_id: a.lineage.deployment_id.clone(),
            canary: status.is_some_and(|s| s.canary),
            healthy: status.and_then(|s| s.healthy),
        }
    }
}

/// An ended allocation of the job being planned that nothing replaced yet: what decides
/// whether its place is filled again (Nomad's reschedule and migrate rules).
#[derive(Debug, Clone)]
pub struct EndedAlloc {
    pub id: String,
    pub group: String,
    pub index: u32,
    pub status: crate::structs::ClientStatus,
    /// The server stopped it (`desired_status` stop).
    pub stopped: bool,
    /// It was stopped to be replaced (`alloc stop`).
    pub migrate: bool,
    /// When it ended: its tasks' last finish, else its last change; ns.
    pub fail_time: u64,
    /// The reschedules that led to it.
    pub tracker: Option<crate::structs::RescheduleTracker>,
    /// The follow-up evaluation already made for it, if any.
    pub followup_eval_id: String,
    /// The node it ran on.
    pub node_id: String,
    /// The deployment that placed it, and its health there.
    pub deployment_id: String,
    pub healthy: Option<bool>,
}

impl EndedAlloc {
    /// The parts of the ended allocation `a` a plan reads.
    pub fn of(a: &Allocation) -> Self {
        let finished = a
            .task_states
            .values()
            .map(|s| s.finished_at)
            .max()
            .unwrap_or(0);
        Self {
            id: a.id.clone(),
            group: a.task_group.clone(),
            index: a.index,
            status: a.client_status,
            stopped: a.desired_status == crate::structs::DesiredStatus::Stop,
            migrate: a.lineage.desired_transition.migrate == Some(true),
            fail_time: if finished > 0 {
                finished
            } else {
                a.modify_time
            },
            tracker: a.lineage.reschedule_tracker.clone(),
            followup_eval_id: a.lineage.followup_eval_id.clone(),
            node_id: a.node_id.clone(),
            deployment_id: a.lineage.deployment_id.clone(),
            healthy: a.lineage.deployment_status.as_ref().and_then(|s| s.healthy),
        }
    }
}

/// What the client runs and the node offers, as a plan of one job needs it: taken under
/// the plan lock, so the next plan sees what this one placed. The server fills in what it
/// knows itself (eligibility, completed allocations).
#[derive(Debug, Clone, Default)]
pub struct ClientSnapshot {
    /// The node, with its current attributes.
    pub node: NodeInfo,
    /// Whether the node takes new allocations (eligible and not draining).
    pub eligible: bool,
    /// Drivers detected and healthy.
    pub healthy_drivers: Vec<String>,
    /// The node's device groups and their instances.
    pub devices: Vec<NodeDeviceResource>,
    /// The IP group ports are reserved on.
    pub host_ip: String,
    /// Live allocations the node may hold, all jobs together.
    pub max_live_allocs: usize,
    /// The job's own live (not terminal) allocations.
    pub live: Vec<LiveAlloc>,
    /// The job's ended allocations that nothing replaced yet (filled in by the server).
    pub ended: Vec<EndedAlloc>,
    /// Now, ns since the epoch: when reschedule delays are measured from.
    pub now: u64,
    /// The job's latest deployment (filled in by the server).
    pub deployment: Option<crate::structs::Deployment>,
    /// What the node offers, with what the other jobs' live allocations hold of it.
    pub capacity: Capacity,
    /// Ports the other jobs hold, and by whom.
    pub ports: BTreeMap<u16, String>,
    /// Device instances the other jobs hold (`<vendor>/<type>/<name>/<id>`), and by whom.
    pub held_devices: BTreeMap<String, String>,
    /// How many live allocations the other jobs have.
    pub others_live: usize,
}

impl Client {
    /// What the planner reads of the client for a plan of job `key`: the job's live
    /// allocations, what the others hold, what the node offers. Eligibility and completed
    /// allocations are the server's to fill in.
    pub fn snapshot(&self, key: &JobKey) -> ClientSnapshot {
        let super::Holdings {
            live,
            capacity,
            ports,
            devices,
            others_live,
        } = self.holdings(key, self.empty_capacity());
        ClientSnapshot {
            node: self.node(),
            eligible: true,
            healthy_drivers: self.healthy_drivers(),
            devices: self.plugins.devices.node_devices(),
            host_ip: self.host_ip.clone(),
            max_live_allocs: self
                .resources
                .max_live_allocs
                .unwrap_or(crate::jobspec::bounds::MAX_NODE_LIVE_ALLOCS),
            live: live
                .iter()
                .map(|r| r.shared().peek(LiveAlloc::of))
                .collect(),
            ended: Vec::new(),
            now: crate::util::now_nanos(),
            deployment: None,
            capacity,
            ports,
            held_devices: devices,
            others_live,
        }
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
    pub fn capacity(&self, except: &(String, String)) -> Capacity {
        self.holdings(except, self.empty_capacity()).capacity
    }

    /// The node's capacity with nothing held.
    fn empty_capacity(&self) -> Capacity {
        let cores = self
            .numeric_attribute("cpu.numcores")
            .clamp(1, u64::from(u16::MAX));
        let compute = self
            .resources
            .cpu_total_compute
            .unwrap_or_else(|| self.numeric_attribute("cpu.totalcompute"));
        Capacity {
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
    pub fn warn_if_little_disk(&self) {
        let disk = self.allocatable().disk_mb;
        if disk < 300 {
            tracing::warn!(
                disk_mb = disk,
                alloc_dir = %self.alloc_root.display(),
                "the node offers {disk} MB of disk (the allocation dir's free space, less `reserved`) \
                 and a group asks 300 MB by default: such jobs will not be placed; free space \
                 or set `client {{ disk_total_mb = N }}`"
            );
        }
    }

    /// Drivers detected and healthy now.
    pub fn healthy_drivers(&self) -> Vec<String> {
        self.plugins
            .drivers
            .infos()
            .into_iter()
            .filter(|(_, i)| i.detected && i.healthy)
            .map(|(n, _)| n)
            .collect()
    }
}
