//! What a node offers allocations and what they hold of it, in Nomad's dimensions (CPU
//! MHz, memory and disk MB, reserved cores), and whether one more fits: the client counts
//! it, the planner places against it (Nomad's `AllocsFit`).

use std::collections::BTreeSet;

use super::AllocatedResources;
use crate::jobspec::TaskGroup;

/// CPU (MHz), memory and disk (MB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amounts {
    pub cpu: u64,
    pub memory_mb: u64,
    pub disk_mb: u64,
}

impl Amounts {
    /// What an allocation holds: its tasks' CPU and memory (not `memory_max`, which is
    /// oversubscription), its group's disk.
    pub fn of(r: &AllocatedResources) -> Self {
        Self {
            cpu: r.tasks.values().map(|t| t.cpu.cpu_shares).sum(),
            memory_mb: r.tasks.values().map(|t| t.memory.memory_mb).sum(),
            disk_mb: r.shared.disk_mb,
        }
    }

    pub fn add(&mut self, o: Amounts) {
        self.cpu += o.cpu;
        self.memory_mb += o.memory_mb;
        self.disk_mb += o.disk_mb;
    }

    pub fn sub(&mut self, o: Amounts) {
        self.cpu = self.cpu.saturating_sub(o.cpu);
        self.memory_mb = self.memory_mb.saturating_sub(o.memory_mb);
        self.disk_mb = self.disk_mb.saturating_sub(o.disk_mb);
    }
}

/// What the node offers to allocations: its fingerprint (or the config's overrides)
/// minus the config's `reserved` block, and what live allocations hold of it.
#[derive(Debug, Clone, Default)]
pub struct Capacity {
    /// What allocations may use in all.
    pub total: Amounts,
    /// What they use now.
    pub used: Amounts,
    /// Core ids that tasks may reserve.
    pub cores: Vec<u16>,
    /// MHz of one core.
    pub mhz_per_core: u64,
    /// Core ids reserved now.
    pub cores_used: BTreeSet<u16>,
}

impl Capacity {
    /// Hold `a` if it fits; otherwise the first dimension it exhausts, in Nomad's order.
    pub fn take(&mut self, a: Amounts) -> Result<(), &'static str> {
        let free = |total: u64, used: u64| total.saturating_sub(used);
        if a.cpu > free(self.total.cpu, self.used.cpu) {
            return Err("cpu");
        }
        if a.memory_mb > free(self.total.memory_mb, self.used.memory_mb) {
            return Err("memory");
        }
        if a.disk_mb > free(self.total.disk_mb, self.used.disk_mb) {
            return Err("disk");
        }
        self.used.add(a);
        Ok(())
    }

    /// Count what a live allocation holds, its reserved cores included.
    pub fn hold(&mut self, r: &AllocatedResources) {
        self.used.add(Amounts::of(r));
        self.cores_used.extend(
            r.tasks
                .values()
                .flat_map(|t| t.cpu.reserved_cores.iter().copied()),
        );
    }

    /// Place an allocation of `group` holding `r`: each task that asks for `cores` gets
    /// that many free cores, lowest ids first, and their MHz as its CPU; then all of it is
    /// held if it fits. Otherwise the first dimension it exhausts, and nothing is held.
    pub fn place(
        &mut self,
        group: &TaskGroup,
        r: &mut AllocatedResources,
    ) -> Result<(), &'static str> {
        let mut free = self
            .cores
            .iter()
            .copied()
            .filter(|c| !self.cores_used.contains(c));
        let mut picked = Vec::new();
        for task in &group.tasks {
            let n = task.resources.cores as usize;
            if n == 0 {
                continue;
            }
            let ids: Vec<u16> = free.by_ref().take(n).collect();
            if ids.len() < n {
                return Err("cores");
            }
            picked.push((task.name.as_str(), ids));
        }
        for (name, ids) in &picked {
            if let Some(t) = r.tasks.get_mut(*name) {
                t.cpu.cpu_shares = ids.len() as u64 * self.mhz_per_core;
                t.cpu.reserved_cores = ids.clone();
            }
        }
        self.take(Amounts::of(r))?;
        self.cores_used
            .extend(picked.into_iter().flat_map(|(_, ids)| ids));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_does_not_fit_names_the_dimension_and_holds_nothing() {
        let mut cap = Capacity {
            total: Amounts {
                cpu: 1000,
                memory_mb: 512,
                disk_mb: 1000,
            },
            ..Default::default()
        };
        let a = Amounts {
            cpu: 400,
            memory_mb: 256,
            disk_mb: 300,
        };
        assert_eq!(cap.take(a), Ok(()));
        assert_eq!(cap.take(a), Ok(()));
        assert_eq!(cap.take(a), Err("cpu"));
        assert_eq!(
            cap.take(Amounts {
                cpu: 100,
                memory_mb: 1,
                disk_mb: 0
            }),
            Err("memory")
        );
        assert_eq!(
            cap.take(Amounts {
                cpu: 0,
                memory_mb: 0,
                disk_mb: 401
            }),
            Err("disk")
        );
        assert_eq!(
            cap.used,
            Amounts {
                cpu: 800,
                memory_mb: 512,
                disk_mb: 600
            }
        );
    }

    #[test]
    fn cores_are_whole_free_ones_and_count_as_their_mhz() {
        let job = crate::jobspec::parse_job_json(
            br#"{"ID":"c","TaskGroups":[{"Name":"g","Tasks":[
                {"Name":"a","Driver":"mock","Resources":{"Cores":2,"MemoryMB":10}},
                {"Name":"b","Driver":"mock","Resources":{"CPU":100,"MemoryMB":10}}]}]}"#,
        )
        .unwrap();
        let group = &job.task_groups[0];
        let mut cap = Capacity {
            total: Amounts {
                cpu: 12_000,
                memory_mb: 1000,
                disk_mb: 1000,
            },
            cores: (0..4).collect(),
            mhz_per_core: 3000,
            ..Default::default()
        };
        let mut first = AllocatedResources::of(group, Vec::new());
        // Core 0 is held by a live allocation.
        first.tasks.get_mut("a").unwrap().cpu.reserved_cores = vec![0];
        cap.hold(&first);
        let mut r = AllocatedResources::of(group, Vec::new());
        assert_eq!(cap.place(group, &mut r), Ok(()));
        assert_eq!(r.tasks["a"].cpu.reserved_cores, vec![1, 2]);
        assert_eq!(r.tasks["a"].cpu.cpu_shares, 6000);
        assert!(r.tasks["b"].cpu.reserved_cores.is_empty());
        let mut again = AllocatedResources::of(group, Vec::new());
        assert_eq!(cap.place(group, &mut again), Err("cores"));
        assert_eq!(cap.cores_used, BTreeSet::from([0, 1, 2]));
    }
}
