//! Constructors for the contract's device types (`PluginInfo::new` is `paddock_guest_core`'s).

use crate::{
    Attribute, ContainerReservation, DeviceGroup, DeviceInstance, InstanceStats, StatValue,
};

impl DeviceGroup {
    /// A group of identical devices, without attributes.
    pub fn new(
        vendor: impl Into<String>,
        device_type: impl Into<String>,
        name: impl Into<String>,
        devices: Vec<DeviceInstance>,
    ) -> Self {
        Self {
            vendor: vendor.into(),
            device_type: device_type.into(),
            name: name.into(),
            devices,
            attributes: Vec::new(),
        }
    }
    /// Adds a group attribute.
    pub fn with_attribute(mut self, key: impl Into<String>, value: Attribute) -> Self {
        self.attributes.push((key.into(), value));
        self
    }
}

impl DeviceInstance {
    /// A healthy instance, described as "healthy", without a PCI bus id.
    pub fn healthy(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            healthy: true,
            health_description: "healthy".into(),
            pci_bus_id: None,
        }
    }
    /// An unhealthy instance, for `reason`.
    pub fn unhealthy(id: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            healthy: false,
            health_description: reason.into(),
            pci_bus_id: None,
        }
    }
}

impl Default for ContainerReservation {
    /// Nothing: no env, no mounts, no device nodes.
    fn default() -> Self {
        Self {
            env: Vec::new(),
            mounts: Vec::new(),
            devices: Vec::new(),
        }
    }
}

impl StatValue {
    /// A numeric value in `unit`, measuring `desc`.
    pub fn number(value: f64, unit: impl Into<String>, desc: impl Into<String>) -> Self {
        Self {
            number: Some(value),
            text: None,
            unit: unit.into(),
            desc: desc.into(),
        }
    }
    /// A textual value, measuring `desc`.
    pub fn text(value: impl Into<String>, desc: impl Into<String>) -> Self {
        Self {
            number: None,
            text: Some(value.into()),
            unit: String::new(),
            desc: desc.into(),
        }
    }
}

impl InstanceStats {
    /// Stats of instance `id` at `timestamp` (ns since the Unix epoch), with only a summary.
    pub fn new(id: impl Into<String>, summary: StatValue, timestamp: u64) -> Self {
        Self {
            id: id.into(),
            summary,
            stats: Vec::new(),
            timestamp,
        }
    }
}
