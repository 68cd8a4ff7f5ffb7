//! Driver health and the node events its changes raise, kept in the shared
//! [`PluginBook`]. Shared by the manager and every [`Driver`](super::Driver) it dispenses.
//! Health comes from fingerprints, and from calls only through a circuit breaker: after
//! [`TRIP_AFTER`] consecutive failed calls (trap, memory cap, deadline) the driver is marked
//! unhealthy, so one task's bad luck is not every task's outage (an unhealthy driver is
//! not placed on); a successful call resets the count, and the next successful fingerprint
//! makes it healthy again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Consecutive failed calls that mark a driver unhealthy.
pub const TRIP_AFTER: u32 = 5;

use serde::{Deserialize, Serialize};

use crate::node::NodeEvents;
use crate::pluginbook::{Change, PluginBook};
use crate::runtime::CallError;
use crate::state::StateDb;

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
    pub health_description: String,
    /// When, ns; RFC 3339 on the wire (Go's `time.Time`).
    #[serde(with = "crate::util::go_time_serde")]
    pub update_time: u64,
}

/// Driver infos by name.
pub struct DriverHealth {
    book: PluginBook<DriverInfo>,
    /// Consecutive failed calls, by driver.
    failures: Mutex<BTreeMap<String, u32>>,
}

impl DriverHealth {
    /// Health raising events into `events`, stored in `db` and seeded from it.
    pub fn new(events: Arc<NodeEvents>, db: Option<Arc<dyn StateDb>>) -> Self {
        Self {
            book: PluginBook::open("driver", "Driver", "driver", events, db),
            failures: Mutex::default(),
        }
    }

    /// Record `info` for `name`: a change of health or description is a node event, and
    /// any change but the time is stored.
    pub fn record(&self, name: &str, info: DriverInfo) {
        self.book.record(name, info, compare);
    }

    /// Forget drivers that are no longer loaded.
    pub fn retain(&self, loaded: &[String]) {
        self.book.retain(loaded);
    }

    /// A call into the driver succeeded: the breaker's count starts again.
    pub fn call_succeeded(&self, name: &str) {
        let mut f = self.failures.lock().unwrap();
        if f.get(name).is_some_and(|n| *n > 0) {
            f.remove(name);
        }
    }

    /// A call into the driver's component failed (trap, memory, deadline): after
    /// [`TRIP_AFTER`] in a row it is unhealthy, with the reason, until a fingerprint
    /// succeeds again.
    pub fn call_failed(&self, name: &str, error: &CallError) {
        // The agent's own load (its guest memory budget in use, a shutdown) is no
        // failure of the driver's.
        if matches!(
            error.kind,
            crate::runtime::CallFailure::Busy | crate::runtime::CallFailure::Closed
        ) {
            return;
        }
        {
            let mut f = self.failures.lock().unwrap();
            let n = f.entry(name.to_string()).or_default();
            *n += 1;
            if *n < TRIP_AFTER {
                return;
            }
            *n = 0;
        }
        let attributes = self
            .book
            .read(|s| s.get(name).map(|i| i.attributes.clone()))
            .unwrap_or_default();
        self.record(
            name,
            DriverInfo {
                attributes,
                detected: true,
                healthy: false,
                health_description: format!(
                    "{TRIP_AFTER} calls in a row failed, the last: {error}"
                ),
                update_time: crate::util::now_nanos(),
            },
        );
    }

    /// Latest infos.
    pub fn infos(&self) -> BTreeMap<String, DriverInfo> {
        self.book.all()
    }

    /// The node events this book raises into.
    pub fn events(&self) -> &Arc<NodeEvents> {
        self.book.events()
    }
}

fn compare(last: Option<&DriverInfo>, info: &DriverInfo) -> Change {
    let health_changed = last.is_none_or(|old| {
        old.healthy != info.healthy || old.health_description != info.health_description
    });
    let store = health_changed
        || last
            .is_some_and(|old| old.detected != info.detected || old.attributes != info.attributes);
    let events = if health_changed {
        tracing::info!(healthy = info.healthy, description = %info.health_description, "driver health");
        vec![if info.healthy {
            "Driver healthy".to_string()
        } else {
            format!("Driver unhealthy: {}", info.health_description)
        }]
    } else {
        Vec::new()
    };
    Change { events, store }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(healthy: bool, description: &str, time: u64) -> DriverInfo {
        DriverInfo {
            attributes: BTreeMap::new(),
            detected: true,
            healthy,
            health_description: description.into(),
            update_time: time,
        }
    }

    #[test]
    fn health_changes_are_events_and_a_new_time_alone_is_not_stored() {
        let first = compare(None, &info(true, "Healthy", 1));
        assert_eq!(first.events, ["Driver healthy"]);
        assert!(first.store);
        let same = compare(Some(&info(true, "Healthy", 1)), &info(true, "Healthy", 2));
        assert_eq!(same, Change::default());
        let worse = compare(Some(&info(true, "Healthy", 1)), &info(false, "trapped", 3));
        assert_eq!(worse.events, ["Driver unhealthy: trapped"]);
        assert!(worse.store);
    }
}
