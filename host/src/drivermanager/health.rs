//! Driver health and the node events its changes raise. Shared by the manager and every
//! [`Driver`](super::Driver) it dispenses, so a failed call marks its driver unhealthy at
//! once, and the next successful fingerprint makes it healthy again.
//!
//! With a state DB, every change is stored (the driver manager's state, as Nomad's
//! PutDriverPluginState), and a restarted agent starts from what it last knew: a driver
//! whose health changed while the agent was down raises a node event at the first
//! fingerprint, and one that did not change raises none.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::DriverInfo;
use crate::node::NodeEvents;
use crate::state::StateDb;

/// The state DB manager name of driver state.
pub(super) const MANAGER: &str = "driver";

/// Driver infos by name, and the node events of their changes.
#[derive(Default)]
pub struct HealthBook {
    infos: RwLock<BTreeMap<String, DriverInfo>>,
    events: Arc<NodeEvents>,
    db: Option<Arc<dyn StateDb>>,
}

impl HealthBook {
    /// A book raising events into `events` and storing changes in `db`, seeded with what
    /// `db` holds from the last run.
    pub fn new(events: Arc<NodeEvents>, db: Option<Arc<dyn StateDb>>) -> Self {
        let infos = db
            .as_deref()
            .map(|db| crate::state::load_plugin_states(db, MANAGER))
            .unwrap_or_default();
        Self {
            infos: RwLock::new(infos),
            events,
            db,
        }
    }

    /// Record `info` for `name`; a change of health or description is a node event, and
    /// any change but the time is stored.
    pub fn record(&self, name: &str, info: DriverInfo) {
        let mut infos = self.infos.write().unwrap();
        let old = infos.get(name);
        let health_changed = old
            .map(|old| {
                old.healthy != info.healthy || old.health_description != info.health_description
            })
            .unwrap_or(true);
        let changed = health_changed
            || old.is_some_and(|old| {
                old.detected != info.detected || old.attributes != info.attributes
            });
        if health_changed {
            tracing::info!(driver = %name, healthy = info.healthy, description = %info.health_description, "driver health");
            self.events.push(
                "Driver",
                if info.healthy {
                    "Driver healthy".into()
                } else {
                    format!("Driver unhealthy: {}", info.health_description)
                },
                [("driver".to_string(), name.to_string())].into(),
            );
        }
        if changed && let Some(db) = &self.db {
            let value = serde_json::to_value(&info).expect("driver info serializes");
            if let Err(e) = db.put_plugin_state(MANAGER, name, &value) {
                tracing::warn!(driver = %name, error = %e, "storing driver state failed");
            }
        }
        infos.insert(name.to_string(), info);
    }

    /// Forget drivers that are no longer loaded (their stored state too).
    pub fn retain(&self, loaded: &[String]) {
        let mut infos = self.infos.write().unwrap();
        let gone: Vec<String> = infos
            .keys()
            .filter(|n| !loaded.contains(n))
            .cloned()
            .collect();
        for name in gone {
            infos.remove(&name);
            tracing::info!(driver = %name, "driver no longer loaded; its state is forgotten");
            if let Some(db) = &self.db
                && let Err(e) = db.delete_plugin_state(MANAGER, &name)
            {
                tracing::warn!(driver = %name, error = %e, "deleting driver state failed");
            }
        }
    }

    /// A call into the driver's component failed (trap, memory, deadline): it is
    /// unhealthy, with the reason, until a fingerprint succeeds again.
    pub fn call_failed(&self, name: &str, error: &crate::runtime::CallError) {
        let attributes = self
            .infos
            .read()
            .unwrap()
            .get(name)
            .map(|i| i.attributes.clone())
            .unwrap_or_default();
        self.record(
            name,
            DriverInfo {
                attributes,
                detected: true,
                healthy: false,
                health_description: error.to_string(),
                update_time: crate::util::now_nanos(),
            },
        );
    }

    /// Latest infos.
    pub fn infos(&self) -> BTreeMap<String, DriverInfo> {
        self.infos.read().unwrap().clone()
    }

    /// The node events this book raises into.
    pub fn events(&self) -> &Arc<NodeEvents> {
        &self.events
    }
}
