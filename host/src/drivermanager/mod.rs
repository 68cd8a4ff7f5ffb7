//! The driver manager: drivers are components of the `driver` world. It resolves a driver
//! name to its current version for every call (so a swapped-in version serves new calls),
//! fingerprints drivers into node attributes, and routes the task events drivers emit to
//! the handler each task runner registers.

mod driver;
mod health;

pub use crate::node::NodeEvent;
pub use driver::{Driver, DriverCallError};
use health::HealthBook;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::runtime::bindings::v0_1_0::driver::exports::paddock::plugin::task_driver::Health;
use crate::runtime::bindings::v0_1_0::types::Attribute;
use crate::runtime::host_api::events::EventHandler;
use crate::runtime::{Runtime, World};

/// A driver's health and attributes as last fingerprinted (Nomad's DriverInfo).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DriverInfo {
    /// Attributes, keyed `driver.<name>.<attr>`.
    pub attributes: BTreeMap<String, String>,
    /// The driver is present.
    pub detected: bool,
    /// The driver is healthy.
    pub healthy: bool,
    /// Why.
    pub health_description: String,
    /// When, ns.
    pub update_time: u64,
}

/// The driver manager.
pub struct DriverManager {
    runtime: Arc<Runtime>,
    health: Arc<HealthBook>,
}

impl DriverManager {
    /// A manager over the runtime's registry, keeping its state in memory only.
    pub fn new(runtime: Arc<Runtime>) -> Arc<Self> {
        Self::with_state(runtime, Arc::default(), None)
    }

    /// A manager that raises node events into `events` and keeps its state in `db`,
    /// starting from what `db` stored last run.
    pub fn with_state(
        runtime: Arc<Runtime>,
        events: Arc<crate::node::NodeEvents>,
        db: Option<Arc<dyn crate::state::StateDb>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            runtime,
            health: Arc::new(HealthBook::new(events, db)),
        })
    }

    /// The driver called `name`, if one is loaded.
    pub fn dispense(&self, name: &str) -> Option<Driver> {
        self.runtime
            .registry
            .get(World::Driver, name)
            .map(|_| Driver::new(self.runtime.clone(), name.to_string(), self.health.clone()))
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
    pub fn register_event_handler(&self, alloc_id: &str, task: &str, handler: EventHandler) {
        self.runtime
            .services()
            .events
            .register(alloc_id, task, handler);
    }

    /// How many tasks have an event handler registered (one per running task).
    pub fn event_handlers(&self) -> usize {
        self.runtime.services().events.len()
    }

    /// Remove a task's event handler.
    pub fn unregister_event_handler(&self, alloc_id: &str, task: &str) {
        self.runtime.services().events.unregister(alloc_id, task);
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
        for (name, info) in self.health.infos().iter() {
            if info.detected {
                out.insert(format!("driver.{name}"), "1".to_string());
            }
            out.extend(info.attributes.clone());
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
                        .map(|(k, v)| (format!("driver.{name}.{k}"), attribute_string(&v)))
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

/// Render a typed attribute as Nomad's string form.
pub fn attribute_string(a: &Attribute) -> String {
    match a {
        Attribute::Str(s) => s.clone(),
        Attribute::Int(i) => i.to_string(),
        Attribute::Float(f) => f.to_string(),
        Attribute::Boolean(b) => b.to_string(),
    }
}

impl DriverManager {
    /// A watch that changes when host process `id` (spawned by a driver) exits.
    pub fn process_exit_watch(
        &self,
        id: u64,
    ) -> Option<
        tokio::sync::watch::Receiver<Option<crate::runtime::bindings::v0_1_0::types::ExitResult>>,
    > {
        self.runtime.services().processes.exit_watch(id)
    }
}

impl DriverManager {
    /// Let `driver` write the rotated logs of task invocation `task_id` (`task-logs`).
    pub fn register_task_logs(
        &self,
        task_id: &str,
        driver: &str,
        stdout: std::path::PathBuf,
        stderr: std::path::PathBuf,
        logs: &crate::runtime::bindings::v0_1_0::types::LogConfig,
    ) {
        self.runtime
            .services()
            .task_logs
            .register(task_id, driver, stdout, stderr, logs);
    }

    /// The invocation is over: its driver may no longer write its logs.
    pub fn unregister_task_logs(&self, task_id: &str) {
        self.runtime.services().task_logs.unregister(task_id);
    }
}
