//! The device manager (Nomad's `devicemanager`): device plugins are components of the
//! `device-plugin` world. It fingerprints them into the node's device resources, assigns
//! device instances to a task's `device` requests when an allocation is placed, and
//! reserves them through the owning plugin when the task starts (the `devices` prestart
//! hook).
//!
//! Its state (each plugin's last fingerprint) is stored in the state DB, so a restarted
//! agent knows the devices it had: an instance that turned unhealthy or disappeared while
//! the agent was down raises a node event at the first fingerprint, and a plugin that
//! fails to fingerprint leaves its last known devices listed as unhealthy rather than gone.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::jobspec::{JobspecError, Task};
use crate::node::NodeEvents;
use crate::runtime::bindings::v0_1_0::device::exports::paddock::plugin::device::{
    DeviceError, DeviceGroup,
};
use crate::runtime::host_api::devices::Reservation;
use crate::runtime::{Runtime, World};
use crate::state::StateDb;
use crate::structs::AllocatedDeviceResource;

/// The state DB manager name of device state.
const MANAGER: &str = "device";

/// A typed attribute as Nomad's API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceAttribute {
    /// Float value.
    #[serde(rename = "Float", skip_serializing_if = "Option::is_none", default)]
    pub float: Option<f64>,
    /// Integer value.
    #[serde(rename = "Int", skip_serializing_if = "Option::is_none", default)]
    pub int: Option<i64>,
    /// String value.
    #[serde(rename = "String", skip_serializing_if = "Option::is_none", default)]
    pub string: Option<String>,
    /// Boolean value.
    #[serde(rename = "Bool", skip_serializing_if = "Option::is_none", default)]
    pub boolean: Option<bool>,
    /// Unit.
    #[serde(rename = "Unit", default)]
    pub unit: String,
}

/// Where an instance sits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceLocality {
    /// PCI bus id.
    #[serde(rename = "PciBusID")]
    pub pci_bus_id: String,
}

/// One device instance (Nomad's NodeDevice).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NodeDevice {
    /// Instance id.
    #[serde(rename = "ID")]
    pub id: String,
    /// Usable.
    pub healthy: bool,
    /// Why (un)healthy.
    pub health_description: String,
    /// Locality, if known.
    pub locality: Option<DeviceLocality>,
}

/// A group of identical devices on the node (Nomad's NodeDeviceResource).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NodeDeviceResource {
    /// Vendor.
    pub vendor: String,
    /// Type.
    #[serde(rename = "Type")]
    pub device_type: String,
    /// Model name.
    pub name: String,
    /// Instances.
    pub instances: Vec<NodeDevice>,
    /// Attributes.
    pub attributes: BTreeMap<String, DeviceAttribute>,
}

impl NodeDeviceResource {
    /// `<vendor>/<type>/<name>`.
    pub fn id(&self) -> String {
        format!("{}/{}/{}", self.vendor, self.device_type, self.name)
    }

    /// Whether a request name (`<type>`, `<vendor>/<type>` or `<vendor>/<type>/<name>`,
    /// as Nomad's `device` block takes) matches this group.
    pub fn matches(&self, request: &str) -> bool {
        let parts: Vec<&str> = request.split('/').collect();
        match parts.as_slice() {
            [t] => *t == self.device_type,
            [v, t] => *v == self.vendor && *t == self.device_type,
            [v, t, n] => *v == self.vendor && *t == self.device_type && *n == self.name,
            _ => false,
        }
    }

    fn from_wit(g: DeviceGroup) -> Self {
        use crate::runtime::bindings::v0_1_0::types::Attribute;
        Self {
            vendor: g.vendor,
            device_type: g.device_type,
            name: g.name,
            instances: g
                .devices
                .into_iter()
                .map(|d| NodeDevice {
                    id: d.id,
                    healthy: d.healthy,
                    health_description: d.health_description,
                    locality: d.pci_bus_id.map(|pci_bus_id| DeviceLocality { pci_bus_id }),
                })
                .collect(),
            attributes: g
                .attributes
                .into_iter()
                .map(|(k, a)| {
                    let mut v = DeviceAttribute {
                        float: None,
                        int: None,
                        string: None,
                        boolean: None,
                        unit: String::new(),
                    };
                    match a {
                        Attribute::Str(s) => v.string = Some(s),
                        Attribute::Int(i) => v.int = Some(i),
                        Attribute::Float(f) => v.float = Some(f),
                        Attribute::Boolean(b) => v.boolean = Some(b),
                    }
                    (k, v)
                })
                .collect(),
        }
    }
}

/// What the manager knows of one plugin: its devices as last fingerprinted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PluginDevices {
    /// Device groups.
    pub groups: Vec<NodeDeviceResource>,
    /// Why the last fingerprint failed, if it did.
    pub error: Option<String>,
}

/// One statistic, as Nomad's `StatValue`.
fn stat_json(
    v: &crate::runtime::bindings::v0_1_0::device::exports::paddock::plugin::device::StatValue,
) -> serde_json::Value {
    serde_json::json!({
        "FloatNumeratorVal": v.number, "StringVal": v.text, "Unit": v.unit, "Desc": v.desc,
    })
}

/// Reserving a task's devices failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReserveError {
    /// No loaded plugin reports the group any more.
    #[error("no device plugin reports {0}")]
    NoPlugin(String),
    /// The plugin refused.
    #[error("device plugin {plugin:?} refused to reserve {ids:?}: {message}")]
    Refused {
        /// Plugin.
        plugin: String,
        /// Instance ids.
        ids: Vec<String>,
        /// What it said.
        message: String,
    },
    /// The plugin's component failed.
    #[error(transparent)]
    Component(#[from] crate::runtime::CallError),
}

/// The device manager.
pub struct DeviceManager {
    runtime: Arc<Runtime>,
    events: Arc<NodeEvents>,
    db: Option<Arc<dyn StateDb>>,
    plugins: RwLock<BTreeMap<String, PluginDevices>>,
}

impl DeviceManager {
    /// A manager over the runtime's device plugins, raising node events into `events` and
    /// keeping its state in `db`, starting from what `db` stored last run.
    pub fn new(
        runtime: Arc<Runtime>,
        events: Arc<NodeEvents>,
        db: Option<Arc<dyn StateDb>>,
    ) -> Arc<Self> {
        let plugins = db
            .as_deref()
            .map(|db| crate::state::load_plugin_states(db, MANAGER))
            .unwrap_or_default();
        Arc::new(Self {
            runtime,
            events,
            db,
            plugins: RwLock::new(plugins),
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
        let stale: Vec<String> = self
            .plugins
            .read()
            .unwrap()
            .keys()
            .filter(|n| !names.contains(n))
            .cloned()
            .collect();
        for name in stale {
            tracing::info!(plugin = %name, "device plugin no longer loaded; its devices are gone");
            self.plugins.write().unwrap().remove(&name);
            self.persist_delete(&name);
        }
        for name in names {
            let Some(comp) = self.runtime.registry.get(World::DevicePlugin, &name) else {
                continue;
            };
            let r = self
                .runtime
                .call_device(&comp, "fingerprint", |d, s| {
                    Box::pin(d.paddock_plugin_device().call_fingerprint(s))
                })
                .await;
            let fresh = match r {
                Ok(Ok(groups)) => PluginDevices {
                    groups: groups
                        .into_iter()
                        .map(NodeDeviceResource::from_wit)
                        .collect(),
                    error: None,
                },
                Ok(Err(e)) => self.failed(&name, describe(&e)),
                Err(e) => self.failed(&name, e.to_string()),
            };
            self.record(&name, fresh);
        }
    }

    /// The plugin's last known devices, all unhealthy because its fingerprint failed.
    fn failed(&self, name: &str, error: String) -> PluginDevices {
        let mut groups = self
            .plugins
            .read()
            .unwrap()
            .get(name)
            .map(|p| p.groups.clone())
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

    /// Store a plugin's new view; its differences from the previous one are node events.
    /// A plugin seen for the first time raises none.
    fn record(&self, name: &str, fresh: PluginDevices) {
        let mut plugins = self.plugins.write().unwrap();
        if let Some(old) = plugins.get(name) {
            if *old == fresh {
                return;
            }
            for message in differences(old, &fresh) {
                tracing::info!(plugin = %name, "{message}");
                self.events.push(
                    "Device",
                    message,
                    [("plugin".to_string(), name.to_string())].into(),
                );
            }
        }
        if let Some(db) = &self.db {
            let value = serde_json::to_value(&fresh).expect("device state serializes");
            if let Err(e) = db.put_plugin_state(MANAGER, name, &value) {
                tracing::warn!(plugin = %name, error = %e, "storing device state failed");
            }
        }
        plugins.insert(name.to_string(), fresh);
    }

    fn persist_delete(&self, name: &str) {
        if let Some(db) = &self.db
            && let Err(e) = db.delete_plugin_state(MANAGER, name)
        {
            tracing::warn!(plugin = %name, error = %e, "deleting device state failed");
        }
    }

    /// The node's devices, every plugin's groups.
    pub fn node_devices(&self) -> Vec<NodeDeviceResource> {
        self.plugins
            .read()
            .unwrap()
            .values()
            .flat_map(|p| p.groups.iter().cloned())
            .collect()
    }

    /// Every plugin's view, by plugin name.
    pub fn plugins(&self) -> BTreeMap<String, PluginDevices> {
        self.plugins.read().unwrap().clone()
    }

    /// Choose instances for each of `task`'s device requests: healthy, not in `held`
    /// (instance key `<vendor>/<type>/<name>/<id>` → who holds it), all from one group, as
    /// Nomad's scheduler does. The chosen ones are added to `held`. An error names the
    /// request's field under `path` (the task's path).
    pub fn assign(
        &self,
        path: &str,
        task: &Task,
        held: &mut BTreeMap<String, String>,
    ) -> Result<Vec<AllocatedDeviceResource>, JobspecError> {
        let groups = self.node_devices();
        let mut out = Vec::new();
        for (i, req) in task.resources.devices.iter().enumerate() {
            let field = format!("{path}.Resources.Devices[{i}]");
            let matching: Vec<&NodeDeviceResource> =
                groups.iter().filter(|g| g.matches(&req.name)).collect();
            if matching.is_empty() {
                let known: Vec<String> = groups.iter().map(NodeDeviceResource::id).collect();
                return Err(JobspecError::new(
                    field,
                    format!(
                        "no device on this node matches {:?} (devices here: {})",
                        req.name,
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            }
            let mut why = Vec::new();
            let mut chosen = None;
            for g in &matching {
                let gid = g.id();
                let free: Vec<&NodeDevice> = g
                    .instances
                    .iter()
                    .filter(|d| d.healthy && !held.contains_key(&format!("{gid}/{}", d.id)))
                    .collect();
                if free.len() >= req.count as usize {
                    chosen = Some((*g, free[..req.count as usize].to_vec()));
                    break;
                }
                let busy: Vec<String> = g
                    .instances
                    .iter()
                    .filter_map(|d| {
                        let key = format!("{gid}/{}", d.id);
                        if let Some(holder) = held.get(&key) {
                            Some(format!("{} held by {holder}", d.id))
                        } else if !d.healthy {
                            Some(format!("{} unhealthy ({})", d.id, d.health_description))
                        } else {
                            None
                        }
                    })
                    .collect();
                why.push(format!(
                    "{gid} has {} free of {} ({})",
                    free.len(),
                    g.instances.len(),
                    busy.join("; ")
                ));
            }
            let Some((g, free)) = chosen else {
                return Err(JobspecError::new(
                    field,
                    format!(
                        "{} instance(s) of {:?} requested, not available: {}",
                        req.count,
                        req.name,
                        why.join("; ")
                    ),
                ));
            };
            let gid = g.id();
            let ids: Vec<String> = free.iter().map(|d| d.id.clone()).collect();
            for id in &ids {
                held.insert(format!("{gid}/{id}"), format!("task {:?}", task.name));
            }
            out.push(AllocatedDeviceResource {
                vendor: g.vendor.clone(),
                device_type: g.device_type.clone(),
                name: g.name.clone(),
                device_ids: ids,
            });
        }
        Ok(out)
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
            let plugin = self
                .plugins
                .read()
                .unwrap()
                .iter()
                .find(|(_, p)| p.groups.iter().any(|g| g.id() == gid))
                .map(|(n, _)| n.clone())
                .ok_or_else(|| ReserveError::NoPlugin(gid.clone()))?;
            let comp = self
                .runtime
                .registry
                .get(World::DevicePlugin, &plugin)
                .ok_or_else(|| ReserveError::NoPlugin(gid.clone()))?;
            let ids = d.device_ids.clone();
            let r = self
                .runtime
                .call_device(&comp, "reserve", move |p, s| {
                    Box::pin(async move { p.paddock_plugin_device().call_reserve(s, &ids).await })
                })
                .await?
                .map_err(|e| ReserveError::Refused {
                    plugin: plugin.clone(),
                    ids: d.device_ids.clone(),
                    message: describe(&e),
                })?;
            out.push(Reservation {
                env: r.env,
                mounts: r.mounts,
                devices: r.devices,
            });
        }
        Ok(out)
    }

    /// Current stats of every device, as Nomad's `DeviceGroupStats` (`Vendor`, `Type`,
    /// `Name`, `InstanceStats` by id). A plugin whose `stats` fails is logged and left out.
    pub async fn stats(&self) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        for name in self.names() {
            let Some(comp) = self.runtime.registry.get(World::DevicePlugin, &name) else {
                continue;
            };
            let groups = match self
                .runtime
                .call_device(&comp, "stats", |d, s| {
                    Box::pin(d.paddock_plugin_device().call_stats(s))
                })
                .await
            {
                Ok(Ok(g)) => g,
                Ok(Err(e)) => {
                    tracing::warn!(plugin = %name, error = %describe(&e), "device stats failed");
                    continue;
                }
                Err(e) => {
                    tracing::warn!(plugin = %name, error = %e, "device stats failed");
                    continue;
                }
            };
            for g in groups {
                let instances: serde_json::Map<String, serde_json::Value> = g
                    .instances
                    .iter()
                    .map(|i| {
                        let stats: serde_json::Map<String, serde_json::Value> = i
                            .stats
                            .iter()
                            .map(|(k, v)| (k.clone(), stat_json(v)))
                            .collect();
                        (
                            i.id.clone(),
                            serde_json::json!({
                                "Summary": stat_json(&i.summary),
                                "Stats": { "Attributes": stats },
                                "Timestamp": i.timestamp,
                            }),
                        )
                    })
                    .collect();
                out.push(serde_json::json!({
                    "Vendor": g.vendor, "Type": g.device_type, "Name": g.name,
                    "InstanceStats": instances,
                }));
            }
        }
        out
    }

    /// [`DeviceManager::stats`] narrowed to the instances `devices` names (one task's).
    pub fn stats_of(
        all: &[serde_json::Value],
        devices: &[AllocatedDeviceResource],
    ) -> Vec<serde_json::Value> {
        devices
            .iter()
            .filter_map(|d| {
                let g = all.iter().find(|g| {
                    g["Vendor"] == d.vendor.as_str()
                        && g["Type"] == d.device_type.as_str()
                        && g["Name"] == d.name.as_str()
                })?;
                let mut g = g.clone();
                if let Some(inst) = g["InstanceStats"].as_object_mut() {
                    inst.retain(|id, _| d.device_ids.contains(id));
                }
                Some(g)
            })
            .collect()
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

/// Human text of a device plugin's error.
fn describe(e: &DeviceError) -> String {
    match e {
        DeviceError::UnknownDevice(id) => format!("unknown device {id:?}"),
        DeviceError::Disabled => "disabled by its configuration".into(),
        DeviceError::Failed(m) => m.clone(),
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
