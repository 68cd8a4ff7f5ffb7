//! What the agent shows of its node and its plugins: drivers with their health, devices,
//! node events, and every loaded component with its grants, limits and load figures.

use serde::Serialize;

use super::Agent;
use crate::devicemanager::NodeDeviceResource;
use crate::drivermanager::DriverInfo;
use crate::node::NodeEvent;
use crate::runtime::inspect::grants_used;

/// A loaded component as the API shows it (`/v1/components`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ComponentView {
    /// Name from its `info()`.
    pub name: String,
    /// World: driver, hook or device-plugin.
    pub world: String,
    /// Contract version it was built against.
    pub contract_version: String,
    /// The plugin's own version.
    pub plugin_version: String,
    /// sha256 of its bytes.
    #[serde(rename = "SHA256")]
    pub sha256: String,
    /// Where it came from.
    pub source: String,
    /// When it was loaded, ns.
    pub loaded_at: u64,
    /// `Hit` or `Miss`.
    pub compile_cache: crate::runtime::CacheOutcome,
    /// Time to compile or deserialize and pre-link, ms.
    pub load_millis: f64,
    /// Granted capabilities.
    pub grants: Vec<String>,
    /// Memory cap, MiB.
    #[serde(rename = "MemoryMB")]
    pub memory_mb: usize,
    /// Call deadline, ms.
    pub call_timeout_millis: u64,
    /// Calls per warm instance.
    pub instance_reuse: u32,
    /// Idle warm instances.
    pub warm_idle: usize,
    /// What it imports.
    pub imports: Vec<String>,
    /// The grants those imports can use.
    pub grants_used: Vec<&'static str>,
}

impl Agent {
    /// Record the address the HTTP API serves on (the first one given is kept).
    pub fn set_http_addr(&self, addr: std::net::SocketAddr) {
        let _ = self.http_addr.set(addr);
    }

    /// The address the HTTP API serves on, `ip:port` (Nomad's `Node.HTTPAddr`); empty
    /// while it serves nowhere.
    pub fn http_addr(&self) -> String {
        self.http_addr
            .get()
            .map(|a| a.to_string())
            .unwrap_or_default()
    }

    /// Every loaded component, by world and name.
    pub fn components(&self) -> Vec<ComponentView> {
        self.runtime
            .registry
            .list()
            .iter()
            .map(|c| ComponentView {
                name: c.name.clone(),
                world: c.world.to_string(),
                contract_version: c.contract_version.clone(),
                plugin_version: c.plugin_version.clone(),
                sha256: c.sha256.clone(),
                source: c.source.to_string(),
                loaded_at: c.loaded_at,
                compile_cache: c.cache,
                load_millis: c.load_time.as_secs_f64() * 1e3,
                grants: c.grants().summary(),
                memory_mb: c.limits().memory_bytes >> 20,
                call_timeout_millis: c.limits().call_timeout.as_millis() as u64,
                instance_reuse: c.limits().instance_reuse,
                warm_idle: c.warm_idle(),
                imports: c.imports.clone(),
                grants_used: grants_used(&c.imports),
            })
            .collect()
    }

    /// Each driver's health and attributes, by name.
    pub fn driver_infos(&self) -> std::collections::BTreeMap<String, DriverInfo> {
        self.drivers.infos()
    }

    /// The node's recent events (driver and device changes), oldest first.
    pub fn node_events(&self) -> Vec<NodeEvent> {
        self.drivers.node_events()
    }

    /// Task invocations whose driver events reach their runner: one per task running or
    /// reattached on this node.
    pub fn attached_tasks(&self) -> usize {
        self.drivers.event_handlers()
    }

    /// The node's devices.
    pub fn node_devices(&self) -> Vec<NodeDeviceResource> {
        self.devices.node_devices()
    }
}
