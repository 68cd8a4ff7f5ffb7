//! The client's operations on allocations, with typed errors: validate a job against the
//! loaded drivers, restart and signal an allocation's tasks, their resource usage, the
//! node's, and collecting finished allocations. The API and CLI call these and render.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Client;
use crate::allocrunner::AllocRunner;
use crate::devicemanager::{DeviceGroupStats, DeviceManager};
use crate::drivermanager::DriverCallError;
use crate::drivermanager::types::{DriverError, ResourceUsage};
use crate::jobspec::Job;
use crate::state::StateError;
use crate::structs::Allocation;
use crate::taskrunner::TaskActionError;

/// Why an operation on an allocation was refused.
#[derive(Debug, thiserror::Error)]
pub enum AllocActionError {
    /// No allocation has that id.
    #[error("alloc {0:?} not found")]
    NotFound(String),
    /// The allocation exists but does not run any more.
    #[error("allocation {0} is not running")]
    NotRunning(String),
    /// The allocation still runs (it must be stopped first).
    #[error("allocation {0} is still running: stop it first")]
    StillRunning(String),
    /// The allocation has no task of that name.
    #[error("task {task:?} is not in allocation {alloc}")]
    NoSuchTask {
        /// Allocation id.
        alloc: String,
        /// Task asked for.
        task: String,
    },
    /// No task of the allocation could take the operation.
    #[error("allocation {alloc} has no running task to {action}")]
    NoRunningTask {
        /// Allocation id.
        alloc: String,
        /// `restart` or `signal`.
        action: &'static str,
    },
    /// The one task named refused.
    #[error(transparent)]
    Task(#[from] TaskActionError),
    /// The signal is not one the agent knows.
    #[error("Signal: invalid signal {0:?}: unknown signal name")]
    UnknownSignal(String),
    /// The state DB failed.
    #[error(transparent)]
    State(#[from] StateError),
}

/// What checking a job against this node found.
#[derive(Debug, Default)]
pub struct Validation {
    /// Each problem, naming its field (`Job.TaskGroups[0].Tasks[1].Config.command: ...`).
    pub errors: Vec<String>,
    /// Every task's driver config was checked by its driver (configs holding `${...}` are
    /// checked at start, once interpolated).
    pub driver_checked: bool,
}

/// One task's usage and its devices' stats.
#[derive(Debug, Clone)]
pub struct TaskUsage {
    /// CPU and memory.
    pub usage: ResourceUsage,
    /// Stats of the device instances assigned to the task.
    pub devices: Vec<DeviceGroupStats>,
}

/// An allocation's resource usage: each running task's, and their sum.
#[derive(Debug, Clone)]
pub struct AllocStats {
    /// By task name.
    pub tasks: BTreeMap<String, TaskUsage>,
    /// The tasks' usage summed, and all their devices.
    pub total: TaskUsage,
}

/// Per-core CPU use between `/v1/client/stats` calls (one sampler for the process).
static CPU: std::sync::LazyLock<crate::hoststats::CpuSampler> =
    std::sync::LazyLock::new(Default::default);

/// The node's own usage.
#[derive(Debug, Clone)]
pub struct ClientStats {
    /// Host memory: total, available, free, bytes.
    pub memory: (u64, u64, u64),
    /// Host uptime, seconds.
    pub uptime_secs: u64,
    /// The allocation dir's filesystem: size and available bytes.
    pub disk: (u64, u64),
    /// Every device's stats.
    pub devices: Vec<DeviceGroupStats>,
    /// Each core's use since the last reading.
    pub cpu: Vec<crate::hoststats::CpuPercent>,
    /// The host's mounted disks.
    pub disks: Vec<crate::hoststats::DiskUsage>,
}

impl Client {
    /// Check `job` against this node: each task's driver is loaded, and its config is
    /// accepted by the driver's `validate-config`.
    pub async fn validate_job(&self, job: &Job) -> Validation {
        let mut v = Validation {
            driver_checked: true,
            ..Default::default()
        };
        if let Err(e) = crate::jobspec::bounds::check(job) {
            v.errors.push(e.to_string());
            return v;
        }
        for (gi, g) in job.task_groups.iter().enumerate() {
            for (ti, t) in g.tasks.iter().enumerate() {
                let path = format!("Job.TaskGroups[{gi}].Tasks[{ti}]");
                // An API caller's validation does not feed the driver's circuit breaker.
                let Some(driver) = self
                    .plugins()
                    .drivers
                    .dispense(&t.driver)
                    .map(|d| d.uncounted())
                else {
                    v.errors.push(format!(
                        "{path}.Driver: driver {:?} is not loaded (loaded: {})",
                        t.driver,
                        self.plugins().drivers.names().join(", ")
                    ));
                    continue;
                };
                let config = serde_json::Value::Object(t.config.clone()).to_string();
                if config.contains("${") {
                    v.driver_checked = false;
                    continue;
                }
                match driver.validate_config(&config).await {
                    Ok(()) => {}
                    Err(DriverCallError::Driver(DriverError::InvalidConfig(fields))) => {
                        v.errors.extend(
                            fields
                                .iter()
                                .map(|f| format!("{path}.Config.{}: {}", f.field, f.message)),
                        )
                    }
                    Err(e) => v.errors.push(format!("{path}.Config: {e}")),
                }
            }
        }
        v.driver_checked &= v.errors.is_empty();
        v
    }

    /// The runner of a live allocation, or why there is none.
    fn live_runner(&self, id: &str) -> Result<Arc<AllocRunner>, AllocActionError> {
        self.runner(id).ok_or_else(|| {
            if self.peek_allocation(id, |_| ()).is_some() {
                AllocActionError::NotRunning(id.to_string())
            } else {
                AllocActionError::NotFound(id.to_string())
            }
        })
    }

    /// The running task `task` of live allocation `id`, for `alloc exec` (Nomad's client
    /// checks: the task must be in the allocation, then running).
    pub fn exec_task(
        &self,
        id: &str,
        task: &str,
    ) -> Result<Arc<crate::taskrunner::TaskRunner>, AllocActionError> {
        let r = self.live_runner(id)?;
        r.tasks()
            .iter()
            .find(|t| t.name() == task)
            .cloned()
            .ok_or_else(|| AllocActionError::NoSuchTask {
                alloc: id.to_string(),
                task: task.to_string(),
            })
    }

    /// Restart one task of a live allocation, or (`task` none) every running task. With a
    /// task named, its own refusal comes back; without, tasks not running are skipped.
    pub fn restart_alloc(&self, id: &str, task: Option<&str>) -> Result<(), AllocActionError> {
        let r = self.live_runner(id)?;
        let mut restarted = 0;
        for t in r.tasks() {
            if task.is_some_and(|n| n != t.name()) {
                continue;
            }
            match t.restart("User requested restart") {
                Ok(()) => restarted += 1,
                Err(e) if task.is_some() => return Err(e.into()),
                Err(_) => {}
            }
        }
        if restarted > 0 {
            return Ok(());
        }
        Err(match task {
            Some(n) => AllocActionError::NoSuchTask {
                alloc: id.to_string(),
                task: n.to_string(),
            },
            None => AllocActionError::NoRunningTask {
                alloc: id.to_string(),
                action: "restart",
            },
        })
    }

    /// Send `signal` to one task of a live allocation, or (`task` none) to every task.
    pub async fn signal_alloc(
        &self,
        id: &str,
        task: Option<&str>,
        signal: &str,
    ) -> Result<(), AllocActionError> {
        let r = self.live_runner(id)?;
        if crate::util::signal_number(signal).is_none() {
            return Err(AllocActionError::UnknownSignal(signal.to_string()));
        }
        let mut sent = 0;
        // With no task named, a task whose driver refused is skipped, but when none took
        // the signal the first driver's own answer ("not supported", …) is what is said.
        let mut refused = None;
        for t in r.tasks() {
            if task.is_some_and(|n| n != t.name()) {
                continue;
            }
            match t.signal(signal).await {
                Ok(()) => sent += 1,
                Err(e) if task.is_some() => return Err(e.into()),
                Err(e @ crate::taskrunner::TaskActionError::Signal { .. }) => {
                    refused.get_or_insert(e);
                }
                Err(_) => {}
            }
        }
        if sent > 0 {
            return Ok(());
        }
        if let Some(e) = refused {
            return Err(e.into());
        }
        Err(match task {
            Some(n) => AllocActionError::NoSuchTask {
                alloc: id.to_string(),
                task: n.to_string(),
            },
            None => AllocActionError::NoRunningTask {
                alloc: id.to_string(),
                action: "signal",
            },
        })
    }

    /// Resource usage of a live allocation's running tasks, from their drivers, with the
    /// stats of the device instances each holds.
    pub async fn alloc_stats(&self, id: &str) -> Result<AllocStats, AllocActionError> {
        let r = self.live_runner(id)?;
        let assigned = r.shared().peek(|a| a.allocated_resources.tasks.clone());
        let device_stats = if assigned.values().any(|t| !t.devices.is_empty()) {
            self.plugins().devices.stats().await
        } else {
            Vec::new()
        };
        let mut tasks = BTreeMap::new();
        let mut total = TaskUsage {
            usage: ResourceUsage::default(),
            devices: Vec::new(),
        };
        for t in r.tasks() {
            let Some(u) = t.stats().await else { continue };
            total.usage.rss_bytes += u.rss_bytes;
            total.usage.cpu_user_ns += u.cpu_user_ns;
            total.usage.cpu_system_ns += u.cpu_system_ns;
            // A task asking twice for one group sees it once too.
            let mut devices = Vec::new();
            if let Some(a) = assigned.get(t.name()) {
                let of = DeviceManager::stats_of(&device_stats, &a.devices);
                DeviceManager::merge_stats(&mut devices, &of);
            }
            DeviceManager::merge_stats(&mut total.devices, &devices);
            tasks.insert(t.name().to_string(), TaskUsage { usage: u, devices });
        }
        total.usage.timestamp = crate::util::now_nanos();
        Ok(AllocStats { tasks, total })
    }

    /// The node's memory, uptime, allocation dir filesystem and devices.
    pub async fn client_stats(&self) -> ClientStats {
        let disk = rustix::fs::statvfs(self.alloc_root())
            .ok()
            .map(|d| (d.f_blocks * d.f_frsize, d.f_bavail * d.f_frsize))
            .unwrap_or((0, 0));
        ClientStats {
            memory: crate::node::meminfo(),
            uptime_secs: crate::node::uptime_secs(),
            disk,
            devices: self.plugins().devices.stats().await,
            cpu: CPU.read(),
            disks: crate::hoststats::disks(),
        }
    }

    /// A page of the allocation list in Nomad's order (create index, then ID): the keys
    /// from `from` on in namespaces `keep` accepts, at most `limit`, and the next key.
    pub fn allocation_page(
        &self,
        from: Option<&(u64, String)>,
        keep: impl Fn(&str) -> bool,
        limit: Option<usize>,
    ) -> (Vec<(u64, String)>, Option<(u64, String)>) {
        self.order.page(from, keep, limit)
    }

    /// Collect a finished allocation now, as the client's collection would: its runner,
    /// directory and local state go, its record stays (Nomad's server keeps it until its
    /// own collection; a batch job whose allocation completed is not run again for it).
    /// `Ok(false)` when no allocation has that id; refused while it still runs.
    pub async fn gc_allocation(&self, id: &str) -> Result<bool, AllocActionError> {
        if let Some(r) = self.runner(id) {
            if !r.shared().peek(Allocation::is_terminal) {
                return Err(AllocActionError::StillRunning(id.to_string()));
            }
            self.gc.forget(id);
            self.collect_ended(id.to_string(), true, "forced collection")
                .await;
            if self.runner(id).is_some() {
                // Its record could not be written: it stays, as a refused removal did.
                return Err(crate::state::StateError::Unwritable {
                    reason: "the allocation's record could not be written".into(),
                }
                .into());
            }
        } else if self.restored_create_index(id).is_some() {
            self.gc.forget(id);
            self.collect_ended(id.to_string(), false, "forced collection")
                .await;
        } else {
            return Ok(false);
        }
        self.changes.bump();
        Ok(true)
    }

    /// Forget a finished allocation altogether (the server's collection): its state, its
    /// record and its directory. `Ok(false)` when no allocation has that id; refused while
    /// it still runs. Forgotten only once the state DB forgot it: a refused removal leaves
    /// the allocation shown (and back after a restart it would be anyway).
    pub async fn purge_allocation(&self, id: &str) -> Result<bool, AllocActionError> {
        if let Some(r) = self.runner(id) {
            if !r.shared().peek(Allocation::is_terminal) {
                return Err(AllocActionError::StillRunning(id.to_string()));
            }
            r.destroy().await?;
            self.forget(id);
            return Ok(true);
        }
        if self.restored_create_index(id).is_none() {
            return Ok(false);
        }
        self.db.delete_alloc(id)?;
        self.forget(id);
        let _ = std::fs::remove_dir_all(self.alloc_root().join(id));
        self.changes.bump();
        Ok(true)
    }

    /// Collect every finished allocation.
    pub async fn gc_all(&self) -> Result<(), AllocActionError> {
        let done: Vec<String> = self.visit_allocations(|a| a.is_terminal().then(|| a.id.clone()));
        for id in &done {
            self.gc_allocation(id).await?;
        }
        Ok(())
    }

    /// Write again the allocation state whose writes an outage refused (see
    /// [`crate::allocrunner::AllocRunner::resync`]): a crash after the outage then finds it as it is.
    pub fn resync_allocations(&self) {
        let runners = self.runners();
        let mut written = 0;
        for r in runners {
            match r.resync() {
                Ok(true) => written += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "writing allocation state again failed; retried after the next outage");
                    return;
                }
            }
        }
        if written > 0 {
            tracing::info!(
                allocations = written,
                "allocation state the outage refused written again"
            );
        }
    }
}
