//! Driver health and the node events its changes raise. Shared by the manager and every
//! [`Driver`](super::Driver) it dispenses, so a failed call marks its driver unhealthy at
//! once, and the next successful fingerprint makes it healthy again.

use std::collections::BTreeMap;
use std::sync::RwLock;

use serde::Serialize;

use super::DriverInfo;

/// A node event (Nomad's NodeEvent), e.g. a driver's health changing.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NodeEvent {
    /// What happened.
    pub message: String,
    /// Subsystem, e.g. "Driver".
    pub subsystem: String,
    /// Details, e.g. the driver's name.
    pub details: BTreeMap<String, String>,
    /// When, ns.
    pub timestamp: u64,
}

/// Most node events kept.
const MAX_NODE_EVENTS: usize = 10;

/// Driver infos by name, and the node events of their changes.
#[derive(Default)]
pub struct HealthBook {
    infos: RwLock<BTreeMap<String, DriverInfo>>,
    events: RwLock<Vec<NodeEvent>>,
}

impl HealthBook {
    /// Record `info` for `name`; a change of health or description is a node event.
    pub fn record(&self, name: &str, info: DriverInfo) {
        let mut infos = self.infos.write().unwrap();
        let changed = infos
            .get(name)
            .map(|old| {
                old.healthy != info.healthy || old.health_description != info.health_description
            })
            .unwrap_or(true);
        if changed {
            tracing::info!(driver = %name, healthy = info.healthy, description = %info.health_description, "driver health");
            let mut events = self.events.write().unwrap();
            events.push(NodeEvent {
                message: if info.healthy {
                    "Driver healthy".into()
                } else {
                    format!("Driver unhealthy: {}", info.health_description)
                },
                subsystem: "Driver".into(),
                details: [("driver".to_string(), name.to_string())].into(),
                timestamp: info.update_time,
            });
            if events.len() > MAX_NODE_EVENTS {
                let extra = events.len() - MAX_NODE_EVENTS;
                events.drain(..extra);
            }
        }
        infos.insert(name.to_string(), info);
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

    /// Node events, oldest first.
    pub fn events(&self) -> Vec<NodeEvent> {
        self.events.read().unwrap().clone()
    }
}
