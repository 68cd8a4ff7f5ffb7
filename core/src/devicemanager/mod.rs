//! The device manager (Nomad's `devicemanager`): device plugins are components of the
//! `device-plugin` world. It fingerprints them into the node's device resources, assigns
//! device instances to a task's `device` requests when an allocation is placed
//! (`assign.rs`), and reserves them through the owning plugin when the task starts (the
//! `devices` prestart hook).
//!
//! Its state (each plugin's last fingerprint) is kept in the shared plugin book, stored in
//! the state DB, so a restarted agent knows the devices it had: an instance that turned
//! unhealthy or disappeared while the agent was down raises a node event at the first
//! fingerprint, and a plugin that fails to fingerprint leaves its last known devices
//! listed as unhealthy rather than gone.
//!
//! Files: `plugin.rs` (the plugin client, the only one here that sees the bindings),
//! `types.rs` (Nomad's device shapes), `assign.rs` (placement), `rules.rs` (a request's
//! `constraint`s and `affinity`s against a group), `attribute.rs` (attribute values with
//! units, compared as Nomad compares them).

mod assign;
/// Typed device attributes ([`crate::constraint::attribute`]).
pub use crate::constraint::attribute;
mod plugin;
pub mod rules;
pub mod types;

pub use assign::{DeviceShortage, assign};
pub use plugin::{DevicePlugin, PluginCallError};
pub use types::{
    DeviceAttribute, DeviceGroupStats, DeviceLocality, NodeDevice, NodeDeviceResource,
    PluginDevices, ReserveError,
};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::node::NodeEvents;
use crate::pluginbook::{Change, PluginBook};
use crate::runtime::types::Reservation;
use crate::runtime::{Runtime, World};
use crate::state::StateDb;
use crate::structs::AllocatedDeviceResource;

/// The device manager.
pub struct DeviceManager {
    runtime: Arc<Runtime>,
    book: PluginBook<PluginDevices>,
}

impl DeviceManager {
    /// A manager over the runtime's device plugins, raising node events into `events` and
    /// keeping its state in `db`, starting from what `db` stored last run.
    pub fn new(
        runtime: Arc<Runtime>,
        events: Arc<NodeEvents>,
        db: Option<Arc<dyn StateDb>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            runtime,
            book: PluginBook::open("device", "Device", "plugin", events, db),
        })
    }

    /// Names of loaded device plugins.
    pub fn names(&self) -> Vec<String> {
        self.runtime
            .registry
            .of_world(World::DevicePlugin)
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }

    /// Fingerprint every device plugin once.
    pub async fn fingerprint_all(&self) {
        let names = self.names();
        self.book.retain(&names);
        for name in names {
            let Some(plugin) = DevicePlugin::get(&self.runtime, &name) else {
                continue;
            };
            let fresh = match plugin.fingerprint().await {
                Ok(groups) => PluginDevices {
                    groups,
                    error: None,
                },
                Err(e) => self.failed(&name, e.to_string()),
            };
            self.book.record(&name, fresh, compare);
        }
    }

    /// The plugin's last known devices, all unhealthy because its fingerprint failed.
    fn failed(&self, name: &str, error: String) -> PluginDevices {
        let mut groups = self
            .book
            .read(|p| p.get(name).map(|p| p.groups.clone()))
            .unwrap_or_default();
        for d in groups.iter_mut().flat_map(|g| g.instances.iter_mut()) {
            d.healthy = false;
            d.health_description = format!("device plugin failed: {error}");
        }
        PluginDevices {
            groups,
            error: Some(error),
        }
    }

    /// The node's devices, every plugin's groups.
    pub fn node_devices(&self) -> Vec<NodeDeviceResource> {
        self.book
            .read(|p| p.values().flat_map(|p| p.groups.iter().cloned()).collect())
    }

    /// Every plugin's view, by plugin name.
    pub fn plugins(&self) -> BTreeMap<String, PluginDevices> {
        self.book.all()
    }

    /// Reserve assigned devices through the plugins that report them (Nomad's
    /// `devicemanager.Reserve`).
    pub async fn reserve(
        &self,
        devices: &[AllocatedDeviceResource],
    ) -> Result<Vec<Reservation>, ReserveError> {
        let mut out = Vec::new();
        for d in devices {
            let gid = format!("{}/{}/{}", d.vendor, d.device_type, d.name);
            let name = self
                .book
                .read(|p| {
                    p.iter()
                        .find(|(_, p)| p.groups.iter().any(|g| g.id() == gid))
                        .map(|(n, _)| n.clone())
                })
                .ok_or_else(|| ReserveError::NoPlugin(gid.clone()))?;
            let plugin = DevicePlugin::get(&self.runtime, &name)
                .ok_or_else(|| ReserveError::NoPlugin(gid.clone()))?;
            let r = plugin
                .reserve(d.device_ids.clone())
                .await
                .map_err(|e| match e {
                    PluginCallError::Plugin(message) => ReserveError::Refused {
                        plugin: name.clone(),
                        ids: d.device_ids.clone(),
                        message,
                    },
                    PluginCallError::Component(e) => ReserveError::Component(e),
                })?;
            out.push(r);
        }
        Ok(out)
    }

    /// Current stats of every device. A plugin whose `stats` fails is logged and left out.
    pub async fn stats(&self) -> Vec<DeviceGroupStats> {
        let mut out = Vec::new();
        for name in self.names() {
            let Some(plugin) = DevicePlugin::get(&self.runtime, &name) else {
                continue;
            };
            match plugin.stats().await {
                Ok(groups) => out.extend(groups),
                Err(e) => tracing::warn!(plugin = %name, error = %e, "device stats failed"),
            }
        }
        out
    }

    /// [`DeviceManager::stats`] narrowed to the instances `devices` names (one task's).
    pub fn stats_of(
        all: &[DeviceGroupStats],
        devices: &[AllocatedDeviceResource],
    ) -> Vec<DeviceGroupStats> {
        devices
            .iter()
            .filter_map(|d| {
                let g = all.iter().find(|g| {
                    g.vendor == d.vendor && g.device_type == d.device_type && g.name == d.name
                })?;
                let mut g = g.clone();
                g.instance_stats.retain(|id, _| d.device_ids.contains(id));
                Some(g)
            })
            .collect()
    }

    /// `stats` merged into `into` by device group (vendor, type, name): a group several
    /// tasks of one allocation use appears once, with all their instances.
    pub fn merge_stats(into: &mut Vec<DeviceGroupStats>, stats: &[DeviceGroupStats]) {
        for s in stats {
            match into.iter_mut().find(|g| {
                g.vendor == s.vendor && g.device_type == s.device_type && g.name == s.name
            }) {
                Some(g) => g.instance_stats.extend(
                    s.instance_stats
                        .iter()
                        .map(|(id, st)| (id.clone(), st.clone())),
                ),
                None => into.push(s.clone()),
            }
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

/// A plugin's new view against its last: its differences are node events (none for a
/// plugin seen for the first time), and any difference is stored.
fn compare(last: Option<&PluginDevices>, fresh: &PluginDevices) -> Change {
    match last {
        None => Change {
            events: Vec::new(),
            store: true,
        },
        Some(old) if old == fresh => Change::default(),
        Some(old) => Change {
            events: differences(old, fresh),
            store: true,
        },
    }
}

/// Node event messages for what changed between two views of a plugin.
fn differences(old: &PluginDevices, new: &PluginDevices) -> Vec<String> {
    let mut out = Vec::new();
    match (&old.error, &new.error) {
        (None, Some(e)) => out.push(format!("Device plugin failed: {e}")),
        (Some(_), None) => out.push("Device plugin recovered".to_string()),
        _ => {}
    }
    let index = |p: &PluginDevices| -> BTreeMap<(String, String), NodeDevice> {
        p.groups
            .iter()
            .flat_map(|g| {
                g.instances
                    .iter()
                    .map(move |d| ((g.id(), d.id.clone()), d.clone()))
            })
            .collect()
    };
    let (before, after) = (index(old), index(new));
    for ((gid, id), d) in &after {
        match before.get(&(gid.clone(), id.clone())) {
            None => out.push(format!("Device added: {gid} {id}")),
            Some(prev) if prev.healthy && !d.healthy && new.error.is_none() => out.push(format!(
                "Device unhealthy: {gid} {id}: {}",
                d.health_description
            )),
            Some(prev) if !prev.healthy && d.healthy && old.error.is_none() => {
                out.push(format!("Device healthy: {gid} {id}"))
            }
            _ => {}
        }
    }
    for (gid, id) in before.keys() {
        if !after.contains_key(&(gid.clone(), id.clone())) {
            out.push(format!("Device removed: {gid} {id}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(ids: &[(&str, bool)]) -> NodeDeviceResource {
        NodeDeviceResource {
            vendor: "acme".into(),
            device_type: "gpu".into(),
            name: "a100".into(),
            instances: ids
                .iter()
                .map(|(id, healthy)| NodeDevice {
                    id: id.to_string(),
                    healthy: *healthy,
                    health_description: if *healthy { "" } else { "hot" }.into(),
                    locality: None,
                })
                .collect(),
            attributes: BTreeMap::new(),
        }
    }

    fn view(ids: &[(&str, bool)], error: Option<&str>) -> PluginDevices {
        PluginDevices {
            groups: vec![group(ids)],
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn request_names_match_type_vendor_type_and_full_id() {
        let g = group(&[]);
        for yes in ["gpu", "acme/gpu", "acme/gpu/a100"] {
            assert!(g.matches(yes), "{yes}");
        }
        for no in ["fpga", "nvidia/gpu", "acme/gpu/h100", "acme/gpu/a100/x", ""] {
            assert!(!g.matches(no), "{no}");
        }
    }

    #[test]
    fn stats_merge_by_group_with_every_instance() {
        let stat = |ids: &[&str], name: &str| DeviceGroupStats {
            vendor: "acme".into(),
            device_type: "gpu".into(),
            name: name.into(),
            instance_stats: ids
                .iter()
                .map(|id| {
                    let v = types::StatValue {
                        number: Some(1.0),
                        text: None,
                        unit: "%".into(),
                        desc: "Utilization".into(),
                    };
                    let s = types::DeviceStats {
                        summary: v,
                        stats: types::StatObject {
                            attributes: BTreeMap::new(),
                        },
                        timestamp: 1,
                    };
                    (id.to_string(), s)
                })
                .collect(),
        };
        let mut total = Vec::new();
        DeviceManager::merge_stats(&mut total, &[stat(&["g0"], "a100")]);
        DeviceManager::merge_stats(&mut total, &[stat(&["g1"], "a100"), stat(&["t0"], "t4")]);
        assert_eq!(total.len(), 2);
        assert_eq!(
            total[0].instance_stats.keys().collect::<Vec<_>>(),
            ["g0", "g1"]
        );
        assert_eq!(total[1].name, "t4");
    }

    #[test]
    fn differences_name_each_instance_change() {
        let old = view(&[("g0", true), ("g1", true), ("g2", false)], None);
        let new = view(&[("g0", false), ("g2", true), ("g3", true)], None);
        assert_eq!(
            differences(&old, &new),
            [
                "Device unhealthy: acme/gpu/a100 g0: hot",
                "Device healthy: acme/gpu/a100 g2",
                "Device added: acme/gpu/a100 g3",
                "Device removed: acme/gpu/a100 g1",
            ]
        );
        assert!(differences(&old, &old).is_empty());
    }

    #[test]
    fn a_failing_plugin_is_one_event_not_one_per_instance() {
        let ok = view(&[("g0", true), ("g1", true)], None);
        let failed = view(&[("g0", false), ("g1", false)], Some("trap"));
        assert_eq!(differences(&ok, &failed), ["Device plugin failed: trap"]);
        assert_eq!(differences(&failed, &ok), ["Device plugin recovered"]);
    }
}
