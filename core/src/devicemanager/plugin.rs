//! One device plugin, called through its component: the device-plugin world's plugin
//! client, the only code of the device manager that sees a contract version's bindings. It
//! converts the plugin's answers into the host's [`types`](super::types).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::types::{
    DeviceGroupStats, DeviceLocality, DeviceStats, NodeDevice, NodeDeviceResource, StatObject,
    StatValue,
};
use crate::runtime::bindings::v0_1::device::exports::paddock::plugin::device as wit;
use crate::runtime::types::Reservation;
use crate::runtime::{CallError, LoadedComponent, Runtime, World, bounds};

/// A device plugin call that did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PluginCallError {
    /// The plugin answered with an error.
    #[error("{0}")]
    Plugin(String),
    /// The component failed (trap, memory, deadline), or is no longer loaded.
    #[error(transparent)]
    Component(#[from] CallError),
}

/// A device plugin by name.
pub struct DevicePlugin {
    runtime: Arc<Runtime>,
    comp: Arc<LoadedComponent>,
}

impl DevicePlugin {
    /// The current version of plugin `name`, if one is loaded.
    pub fn get(runtime: &Arc<Runtime>, name: &str) -> Option<Self> {
        let comp = runtime.registry.get(World::DevicePlugin, name)?;
        Some(Self {
            runtime: runtime.clone(),
            comp,
        })
    }

    /// The device groups the plugin sees.
    pub async fn fingerprint(&self) -> Result<Vec<NodeDeviceResource>, PluginCallError> {
        let groups = self
            .runtime
            .call_device(&self.comp, "fingerprint", |d, s| {
                Box::pin(d.paddock_plugin_device().call_fingerprint(s))
            })
            .await?
            .map_err(describe)?;
        Ok(groups
            .into_iter()
            .take(bounds::ENTRIES)
            .map(group_of)
            .collect())
    }

    /// Reserve instances `ids` for a task.
    pub async fn reserve(&self, ids: Vec<String>) -> Result<Reservation, PluginCallError> {
        let r = self
            .runtime
            .call_device(&self.comp, "reserve", move |p, s| {
                Box::pin(async move { p.paddock_plugin_device().call_reserve(s, &ids).await })
            })
            .await?
            .map_err(describe)?;
        // The host makes these nodes in an isolated task's /dev and binds these mounts
        // into its chroot: only what the operator let the plugin see.
        let grants = self.comp.grants();
        let ungranted: Vec<String> = r
            .devices
            .iter()
            .map(|d| &d.host_path)
            .chain(r.mounts.iter().map(|m| &m.host_path))
            .filter(|p| !grants.reads(p))
            .cloned()
            .collect();
        Ok(Reservation {
            ungranted,
            env: bounds::pairs(r.env),
            mounts: r
                .mounts
                .into_iter()
                .take(bounds::ENTRIES)
                .map(Into::into)
                .collect(),
            devices: r
                .devices
                .into_iter()
                .take(bounds::ENTRIES)
                .map(Into::into)
                .collect(),
        })
    }

    /// Current stats of every instance.
    pub async fn stats(&self) -> Result<Vec<DeviceGroupStats>, PluginCallError> {
        let groups = self
            .runtime
            .call_device(&self.comp, "stats", |d, s| {
                Box::pin(d.paddock_plugin_device().call_stats(s))
            })
            .await?
            .map_err(describe)?;
        let key = |s: String| bounds::text(s, bounds::KEY);
        Ok(groups
            .into_iter()
            .take(bounds::ENTRIES)
            .map(|g| DeviceGroupStats {
                vendor: key(g.vendor),
                device_type: key(g.device_type),
                name: key(g.name),
                instance_stats: g
                    .instances
                    .into_iter()
                    .take(MAX_INSTANCES)
                    .map(|i| {
                        (
                            key(i.id),
                            DeviceStats {
                                summary: stat(i.summary),
                                stats: StatObject {
                                    attributes: i
                                        .stats
                                        .into_iter()
                                        .take(bounds::ENTRIES)
                                        .map(|(k, v)| (key(k), stat(v)))
                                        .collect::<BTreeMap<_, _>>(),
                                },
                                timestamp: i.timestamp,
                            },
                        )
                    })
                    .collect(),
            })
            .collect())
    }
}

/// Instances of one device group a plugin may report.
const MAX_INSTANCES: usize = 4096;

fn stat(v: wit::StatValue) -> StatValue {
    StatValue {
        number: v.number,
        text: v.text.map(|t| bounds::text(t, bounds::VALUE)),
        unit: bounds::text(v.unit, bounds::KEY),
        desc: bounds::text(v.desc, bounds::VALUE),
    }
}

/// A group the plugin reported, every string and list within [`bounds`].
fn group_of(g: wit::DeviceGroup) -> NodeDeviceResource {
    let key = |s: String| bounds::text(s, bounds::KEY);
    NodeDeviceResource {
        vendor: key(g.vendor),
        device_type: key(g.device_type),
        name: key(g.name),
        instances: g
            .devices
            .into_iter()
            .take(MAX_INSTANCES)
            .map(|d| NodeDevice {
                id: key(d.id),
                healthy: d.healthy,
                health_description: bounds::text(d.health_description, bounds::MESSAGE),
                locality: d.pci_bus_id.map(|pci_bus_id| DeviceLocality {
                    pci_bus_id: key(pci_bus_id),
                }),
            })
            .collect(),
        attributes: g
            .attributes
            .into_iter()
            .take(bounds::ENTRIES)
            .map(|(k, a)| {
                let a = bounds::attribute(crate::runtime::types::Attribute::from(a)).into();
                let a = super::attribute::with_unit_from_name(&k, a);
                (key(k), a)
            })
            .collect(),
    }
}

/// Human text of a device plugin's error.
fn describe(e: wit::DeviceError) -> PluginCallError {
    PluginCallError::Plugin(bounds::text(
        match e {
            wit::DeviceError::UnknownDevice(id) => {
                format!("unknown device {:?}", bounds::text(id, bounds::KEY))
            }
            wit::DeviceError::Disabled => "disabled by its configuration".into(),
            wit::DeviceError::Failed(m) => m,
        },
        bounds::MESSAGE,
    ))
}
