//! What an allocation holds and how it was placed, in Nomad's shapes: `AllocatedResources`
//! (every task's CPU, memory and devices, the group's disk and ports), the older
//! `Resources` / `TaskResources` view of the same numbers that Nomad still sends and its
//! CLI reads, and the placement's `AllocMetric`. All are set once, at placement.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::jobspec::{Resources as TaskResources, TaskGroup};

/// What an allocation holds on this node (Nomad's `AllocatedResources`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AllocatedResources {
    /// Resources shared by the group's tasks.
    pub shared: AllocatedSharedResources,
    /// Per-task resources, by task name: every task of the group.
    #[serde(default)]
    pub tasks: BTreeMap<String, AllocatedTaskResources>,
}

/// What one task holds (Nomad's `AllocatedTaskResources`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AllocatedTaskResources {
    /// CPU, MHz.
    #[serde(default)]
    pub cpu: AllocatedCpuResources,
    /// Memory, MB.
    #[serde(default)]
    pub memory: AllocatedMemoryResources,
    /// Device instances assigned to the task.
    #[serde(default)]
    pub devices: Vec<AllocatedDeviceResource>,
}

impl AllocatedTaskResources {
    /// What a task asking for `r` holds, before devices are assigned.
    pub fn of(r: &TaskResources) -> Self {
        Self {
            cpu: AllocatedCpuResources {
                cpu_shares: u64::from(r.cpu),
                reserved_cores: Vec::new(),
            },
            memory: AllocatedMemoryResources {
                memory_mb: u64::from(r.memory_mb),
                memory_max_mb: u64::from(r.memory_max_mb),
            },
            devices: Vec::new(),
        }
    }
}

/// A task's CPU (Nomad's `AllocatedCpuResources`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AllocatedCpuResources {
    /// MHz: the task's `cpu`, or its reserved cores times the MHz of one.
    pub cpu_shares: u64,
    /// Core ids reserved for the task alone (its `cores`); empty when it asked for MHz.
    #[serde(default)]
    pub reserved_cores: Vec<u16>,
}

/// A task's memory (Nomad's `AllocatedMemoryResources`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatedMemoryResources {
    #[serde(rename = "MemoryMB")]
    pub memory_mb: u64,
    /// The ceiling, MB; 0 = none.
    #[serde(rename = "MemoryMaxMB")]
    pub memory_max_mb: u64,
}

/// Device instances of one group assigned to a task (Nomad's `AllocatedDeviceResource`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AllocatedDeviceResource {
    pub vendor: String,
    #[serde(rename = "Type")]
    pub device_type: String,
    /// Model name.
    pub name: String,
    /// Instance ids.
    #[serde(rename = "DeviceIDs")]
    pub device_ids: Vec<String>,
}

/// Group-level resources (Nomad's `AllocatedSharedResources`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AllocatedSharedResources {
    /// The group's ephemeral disk, MB.
    #[serde(rename = "DiskMB", default)]
    pub disk_mb: u64,
    /// The group's ports, static and dynamic.
    pub ports: Vec<AllocatedPort>,
}

/// A port reserved for an allocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AllocatedPort {
    /// The port's label.
    pub label: String,
    /// Host port.
    pub value: u16,
    /// Port inside the task, when it differs; 0 = same.
    pub to: i32,
    /// Host IP the port is on.
    #[serde(rename = "HostIP")]
    pub host_ip: String,
}

/// Nomad's older `Resources` view of an allocation (`Resources`, and each task's in
/// `TaskResources`): Nomad's scheduler still fills it, and `nomad alloc status` and
/// `nomad node status` read CPU, MemoryMB and DiskMB from it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegacyResources {
    #[serde(rename = "CPU")]
    pub cpu: u64,
    /// Reserved cores, how many.
    #[serde(rename = "Cores")]
    pub cores: u64,
    #[serde(rename = "MemoryMB")]
    pub memory_mb: u64,
    #[serde(rename = "MemoryMaxMB")]
    pub memory_max_mb: u64,
    /// A task's is 0 (its disk is the group's); the allocation's is the group's.
    #[serde(rename = "DiskMB")]
    pub disk_mb: u64,
}

impl LegacyResources {
    /// Nomad's `Resources.Add`: a missing memory ceiling counts as the memory asked.
    fn add(&mut self, o: &LegacyResources) {
        self.cpu += o.cpu;
        self.cores += o.cores;
        self.memory_mb += o.memory_mb;
        self.memory_max_mb += if o.memory_max_mb > 0 {
            o.memory_max_mb
        } else {
            o.memory_mb
        };
        self.disk_mb += o.disk_mb;
    }
}

impl AllocatedResources {
    /// The device instances held, keyed `<vendor>/<type>/<name>/<id>`.
    pub fn device_keys(&self) -> impl Iterator<Item = String> + '_ {
        self.tasks.values().flat_map(|t| &t.devices).flat_map(|d| {
            d.device_ids
                .iter()
                .map(move |id| format!("{}/{}/{}/{id}", d.vendor, d.device_type, d.name))
        })
    }

    /// What an allocation of `group` holds, before devices are assigned.
    pub fn of(group: &TaskGroup, ports: Vec<AllocatedPort>) -> Self {
        Self {
            shared: AllocatedSharedResources {
                disk_mb: u64::from(group.ephemeral_disk.size_mb),
                ports,
            },
            tasks: group
                .tasks
                .iter()
                .map(|t| (t.name.clone(), AllocatedTaskResources::of(&t.resources)))
                .collect(),
        }
    }

    /// The same resources as Nomad's older view: each task's (`TaskResources`, Nomad's
    /// `OldTaskResources`), and their sum with the group's disk (`Resources`).
    pub fn legacy(&self) -> (LegacyResources, BTreeMap<String, LegacyResources>) {
        let tasks: BTreeMap<String, LegacyResources> = self
            .tasks
            .iter()
            .map(|(name, t)| {
                let r = LegacyResources {
                    cpu: t.cpu.cpu_shares,
                    cores: t.cpu.reserved_cores.len() as u64,
                    memory_mb: t.memory.memory_mb,
                    memory_max_mb: t.memory.memory_max_mb,
                    ..Default::default()
                };
                (name.clone(), r)
            })
            .collect();
        let mut total = LegacyResources::default();
        for t in tasks.values() {
            total.add(t);
        }
        total.add(&LegacyResources {
            disk_mb: self.shared.disk_mb,
            ..Default::default()
        });
        (total, tasks)
    }
}

/// How an allocation was placed (Nomad's `AllocMetric`): on one node, the only node was
/// evaluated and chosen, nothing filtered or exhausted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AllocMetric {
    pub nodes_evaluated: u64,
    pub nodes_filtered: u64,
    pub nodes_in_pool: u64,
    pub node_pool: String,
    /// Nodes available per datacenter.
    pub nodes_available: BTreeMap<String, u64>,
    pub nodes_exhausted: u64,
    /// Time placement took, ns.
    pub allocation_time: u64,
    pub coalesced_failures: u64,
}

impl AllocMetric {
    /// Placed on this node, in datacenter `dc`, in `took` ns.
    pub fn single_node(dc: &str, took: u64) -> Self {
        Self {
            nodes_evaluated: 1,
            nodes_in_pool: 1,
            node_pool: "default".into(),
            nodes_available: BTreeMap::from([(dc.to_string(), 1)]),
            allocation_time: took,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_view_sums_tasks_and_adds_the_groups_disk() {
        let task = |cpu, mem, max| AllocatedTaskResources {
            cpu: AllocatedCpuResources {
                cpu_shares: cpu,
                reserved_cores: Vec::new(),
            },
            memory: AllocatedMemoryResources {
                memory_mb: mem,
                memory_max_mb: max,
            },
            devices: Vec::new(),
        };
        let a = AllocatedResources {
            shared: AllocatedSharedResources {
                disk_mb: 300,
                ports: Vec::new(),
            },
            tasks: BTreeMap::from([
                ("a".to_string(), task(100, 64, 0)),
                ("b".to_string(), task(200, 128, 256)),
            ]),
        };
        let (total, tasks) = a.legacy();
        assert_eq!(tasks["a"].cpu, 100);
        assert_eq!(tasks["b"].memory_max_mb, 256);
        assert_eq!(tasks["b"].disk_mb, 0);
        assert_eq!(
            (
                total.cpu,
                total.memory_mb,
                total.memory_max_mb,
                total.disk_mb
            ),
            (300, 192, 320, 300)
        );
    }
}
