//! The device manager's host types, in Nomad's API shapes: device groups and instances as
//! fingerprinted (`NodeDeviceResource`), what a plugin last reported, and device stats
//! (`DeviceGroupStats`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::constraint::attribute::DeviceAttribute;

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
    pub vendor: String,
    #[serde(rename = "Type")]
    pub device_type: String,
    /// Model name.
    pub name: String,
    pub instances: Vec<NodeDevice>,
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

/// One statistic (Nomad's `StatValue`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatValue {
    /// Numeric value.
    #[serde(rename = "FloatNumeratorVal")]
    pub number: Option<f64>,
    /// Text value.
    #[serde(rename = "StringVal")]
    pub text: Option<String>,
    #[serde(rename = "Unit")]
    pub unit: String,
    #[serde(rename = "Desc")]
    pub desc: String,
}

/// Named statistics (Nomad's `StatObject`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct StatObject {
    /// Statistics by name.
    pub attributes: BTreeMap<String, StatValue>,
}

/// Stats of one instance (Nomad's `DeviceStats`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeviceStats {
    /// The headline statistic.
    pub summary: StatValue,
    /// Every statistic.
    pub stats: StatObject,
    /// Sample time, ns; RFC 3339 on the wire (Go's `time.Time`).
    #[serde(with = "crate::util::go_time_serde")]
    pub timestamp: u64,
}

/// Stats of a device group's instances (Nomad's `DeviceGroupStats`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeviceGroupStats {
    pub vendor: String,
    #[serde(rename = "Type")]
    pub device_type: String,
    /// Model name.
    pub name: String,
    /// Stats by instance id.
    pub instance_stats: BTreeMap<String, DeviceStats>,
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
