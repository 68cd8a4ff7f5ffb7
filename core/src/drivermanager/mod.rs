//! The driver manager: drivers are components of the `driver` world. It resolves a driver
//! name to its current version for every call (so a swapped-in version serves new calls),
//! fingerprints drivers into node attributes, routes the task events drivers emit to the
//! handler each task runner registers, and owns the host services drivers' calls reach
//! through the runtime ([`DriverServices`]: processes, task log files, task events).
//!
//! Files: `driver.rs` (the plugin client, the only one here that sees the bindings),
//! `bindings.rs` (running tasks bound to driver versions, and their handoff on a swap),
//! `types.rs` (the driver contract in host types), `native.rs` (a driver in host
//! Rust behind the same path, for measuring the sandbox), `health.rs` (health in the shared
//! plugin book), `events.rs` (task event routing).

mod bindings;
mod driver;
mod events;
pub mod health;
pub mod native;
pub mod starts;
pub mod types;

pub use bindings::{Bindings, Handoff, PersistHandle, TaskBinding};
pub use driver::{Driver, DriverCallError};
pub use events::{EventHandler, EventRouter};
use health::DriverHealth;
pub use health::DriverInfo;
pub use starts::{StartLimits, StartQueue};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::executor::processes::ProcessTable;
use crate::logmon::TaskLogs;
use crate::node::{NodeEvent, NodeEvents};
use crate::runtime::{HostServices, Runtime, World};
use types::{ExitResult, Health, LogConfig, WakeOn};

/// The host services drivers reach through the runtime's `process`, `task-logs` and
/// `events` interfaces. Build them first, give [`DriverServices::host_services`] to the
/// runtime, and the same services to the [`DriverManager`].
#[derive(Default)]
pub struct DriverServices {
    /// Host processes (through the task executor in the agent).
    pub processes: Arc<ProcessTable>,
    /// Log files drivers write for their tasks.
    pub task_logs: Arc<TaskLogs>,
    /// Task events drivers emit, by task.
    pub events: Arc<EventRouter>,
}

impl DriverServices {
    /// Fresh services: processes as children of this process until an executor is set.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Start host processes through the task executor of `data_dir` (started from
    /// `program`, or found running from an earlier life), recording them in `db`, and take
    /// back the processes `db` recorded: tasks outlive this process and are found again.
    pub async fn use_executor(
        &self,
        program: PathBuf,
        data_dir: &std::path::Path,
        db: Arc<dyn crate::state::StateDb>,
    ) -> Result<(), crate::state::StateError> {
        self.processes.use_executor(
            crate::executor::client::ExecutorConfig {
                program,
                socket: crate::executor::client::socket_for(data_dir),
                dir: data_dir.join("executor"),
            },
            Arc::new(crate::state::DbProcessStore(db.clone())),
        );
        self.processes.restore(db.processes()?).await;
        Ok(())
    }

    /// The runtime's view of these services (variables and services are the agent's to
    /// add).
    pub fn host_services(&self) -> HostServices {
        HostServices {
            processes: Some(self.processes.clone()),
            task_logs: Some(self.task_logs.clone()),
            events: Some(self.events.clone()),
            variables: None,
            services: None,
        }
    }
}

/// The driver manager.
pub struct DriverManager {
    runtime: Arc<Runtime>,
    services: Arc<DriverServices>,
    health: Arc<DriverHealth>,
    /// Task starts wait their turn here.
    starts: Arc<StartQueue>,
    /// Running tasks and their driver versions.
    bindings: Bindings,
}

/// The shortest timer a driver's `wait` may ask to be called again after.
pub const MIN_WAKE: Duration = Duration::from_millis(10);

impl DriverManager {
    /// A manager over the runtime's registry, keeping its state in memory only. `services`
    /// are the ones the runtime was built with.
    pub fn new(runtime: Arc<Runtime>, services: Arc<DriverServices>) -> Arc<Self> {
        Self::with_state(
            runtime,
            services,
            Arc::default(),
            None,
            StartLimits::default(),
        )
    }

    /// A manager that raises node events into `events` and keeps its state in `db`,
    /// starting from what `db` stored last run, with a start queue of `limits`.
    pub fn with_state(
        runtime: Arc<Runtime>,
        services: Arc<DriverServices>,
        events: Arc<NodeEvents>,
        db: Option<Arc<dyn crate::state::StateDb>>,
        limits: StartLimits,
    ) -> Arc<Self> {
        Arc::new(Self {
            runtime,
            services,
            health: Arc::new(DriverHealth::new(events, db)),
            starts: Arc::new(StartQueue::new(limits)),
            bindings: Bindings::default(),
        })
    }

    /// Where task starts wait their turn.
    pub fn start_queue(&self) -> &Arc<StartQueue> {
        &self.starts
    }

    /// Running tasks and the driver versions they are bound to.
    pub fn bindings(&self) -> &Bindings {
        &self.bindings
    }

    /// The driver called `name`, if one is loaded.
    pub fn dispense(&self, name: &str) -> Option<Driver> {
        let driver = self.driver(name);
        driver.is_loaded().then_some(driver)
    }

    /// The driver called `name`, loaded or not: its calls fail while it is not.
    pub fn driver(&self, name: &str) -> Driver {
        Driver::new(
            self.runtime.clone(),
            name.to_string(),
            self.health.clone(),
            self.starts.clone(),
        )
    }

    /// A driver named `name` served by `native` on the same path as a component's (the
    /// start queue, health), for measuring the sandbox and for tests; see [`native`].
    pub fn native_driver(&self, name: &str, native: Arc<dyn native::NativeDriver>) -> Driver {
        self.driver(name).with_native(native)
    }

    /// Names of loaded drivers.
    pub fn names(&self) -> Vec<String> {
        self.runtime
            .registry
            .of_world(World::Driver)
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }

    /// Register the handler for driver events about one task.
    pub fn register_event_handler(
        &self,
        alloc_id: &str,
        task: &str,
        driver: &str,
        handler: EventHandler,
    ) {
        self.services
            .events
            .register(alloc_id, task, driver, handler);
    }

    /// How many tasks have an event handler registered (one per running task).
    pub fn event_handlers(&self) -> usize {
        self.services.events.len()
    }

    /// Remove a task's event handler.
    pub fn unregister_event_handler(&self, alloc_id: &str, task: &str) {
        self.services.events.unregister(alloc_id, task);
    }

    /// Let `driver` write the rotated logs of task invocation `task_id` (`task-logs`):
    /// `stdout` and `stderr` beneath the allocation dir `alloc_root`.
    pub fn register_task_logs(
        &self,
        task_id: &str,
        driver: &str,
        alloc_root: PathBuf,
        (stdout, stderr): (PathBuf, PathBuf),
        logs: &LogConfig,
    ) {
        self.services
            .task_logs
            .register(task_id, driver, alloc_root, (stdout, stderr), logs);
    }

    /// The invocation is over: its driver may no longer write its logs.
    pub fn unregister_task_logs(&self, task_id: &str) {
        self.services.task_logs.unregister(task_id);
    }

    /// The host services drivers' calls reach.
    pub fn services(&self) -> &Arc<DriverServices> {
        &self.services
    }

    /// A watch that changes when host process `id` (spawned by a driver) exits.
    pub fn process_exit_watch(&self, id: u64) -> Option<watch::Receiver<Option<ExitResult>>> {
        self.services.processes.exit_watch(id)
    }

    /// Sleep until what a driver's `wait` said to wake on: one of the listed processes
    /// exits, or its timer fires (one minute when it set none), or `until` passes.
    pub async fn sleep_until_wake(&self, wake: &WakeOn, until: Option<tokio::time::Instant>) {
        // A driver asking to be called again at once would have its task's runner call it
        // in a loop (20 such tasks kept most of a core busy): its timer is at least
        // MIN_WAKE.
        let timer = wake
            .after_ns
            .map(Duration::from_nanos)
            .unwrap_or(Duration::from_secs(60))
            .max(MIN_WAKE);
        let mut sleep_until = tokio::time::Instant::now() + timer;
        if let Some(d) = until {
            sleep_until = sleep_until.min(d);
        }
        let procs = self.processes_exit(&wake.processes);
        tokio::select! {
            _ = tokio::time::sleep_until(sleep_until) => {}
            _ = procs => {}
        }
    }

    /// Resolves when one of these host processes has exited; never, for none.
    fn processes_exit(&self, ids: &[u64]) -> futures::future::BoxFuture<'static, ()> {
        let watches: Vec<_> = ids
            .iter()
            .filter_map(|id| self.process_exit_watch(*id))
            .collect();
        if watches.is_empty() {
            return Box::pin(std::future::pending());
        }
        Box::pin(async move {
            let futs = watches.into_iter().map(|mut w| {
                Box::pin(async move {
                    let _ = w.wait_for(|e| e.is_some()).await;
                })
            });
            futures::future::select_all(futs).await;
        })
    }

    /// Latest driver infos.
    pub fn infos(&self) -> BTreeMap<String, DriverInfo> {
        self.health.infos()
    }

    /// Node events raised by driver health changes, oldest first.
    pub fn node_events(&self) -> Vec<NodeEvent> {
        self.health.events().list()
    }

    /// Node attributes contributed by drivers: `driver.<name> = 1` while detected, plus
    /// each driver's own attributes.
    pub fn node_attributes(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (name, info) in self.health.infos() {
            if info.detected {
                out.insert(format!("driver.{name}"), "1".to_string());
            }
            out.extend(info.attributes);
        }
        out
    }

    /// Fingerprint every driver once; a change of health is logged as a node event.
    pub async fn fingerprint_all(&self) {
        let names = self.names();
        self.health.retain(&names);
        for name in names {
            let Some(driver) = self.dispense(&name) else {
                continue;
            };
            let info = match driver.fingerprint().await {
                Ok(fp) => DriverInfo {
                    attributes: fp
                        .attributes
                        .into_iter()
                        .map(|(k, v)| (format!("driver.{name}.{k}"), v.to_string()))
                        .collect(),
                    detected: fp.health != Health::Undetected,
                    healthy: fp.health == Health::Healthy,
                    health_description: fp.health_description,
                    update_time: crate::util::now_nanos(),
                },
                Err(e) => DriverInfo {
                    attributes: BTreeMap::new(),
                    detected: true,
                    healthy: false,
                    health_description: format!("failed to fingerprint driver: {e}"),
                    update_time: crate::util::now_nanos(),
                },
            };
            self.health.record(&name, info);
        }
    }

    /// Fingerprint every `interval` until the manager is dropped.
    pub fn spawn_fingerprinter(self: &Arc<Self>, interval: Duration) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let Some(dm) = weak.upgrade() else { break };
                dm.fingerprint_all().await;
            }
        });
    }
}
