//! What the agent shows of its node and its plugins: drivers with their health, devices,
//! node events, and every loaded component with its grants, limits and load figures.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Agent;
use crate::devicemanager::NodeDeviceResource;
use crate::drivermanager::DriverInfo;
use crate::node::NodeEvent;
use crate::server::drain::{DrainMetadata, DrainStrategy};

/// The node as the API shows it (Nomad's `Node`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NodeView {
    #[serde(rename = "ID")]
    pub id: String,
    pub name: String,
    pub datacenter: String,
    pub node_class: String,
    /// A hash of what the scheduler sees of the node ([`crate::node_class`]).
    pub computed_class: String,
    pub node_pool: &'static str,
    pub attributes: BTreeMap<String, String>,
    pub meta: BTreeMap<String, String>,
    pub drivers: BTreeMap<String, DriverInfo>,
    pub events: Vec<NodeEvent>,
    /// Always `ready`: the node is this agent.
    pub status: &'static str,
    pub status_description: &'static str,
    /// `eligible` or `ineligible`.
    pub scheduling_eligibility: &'static str,
    /// A drain is in progress.
    pub drain: bool,
    pub drain_strategy: Option<DrainStrategy>,
    pub last_drain: Option<DrainMetadata>,
    /// The address the HTTP API serves on (`ip:port`).
    #[serde(rename = "HTTPAddr")]
    pub http_addr: String,
    pub node_resources: NodeResourcesView,
    /// The same totals in Nomad's older `Resources` shape (which older `nomad node
    /// status` reads).
    pub resources: serde_json::Value,
    /// What the config reserves, in the older shape (`Node.Reserved`).
    pub reserved: serde_json::Value,
    pub reserved_resources: serde_json::Value,
    /// When the node's status last changed (it became ready at start), unix seconds.
    pub status_updated_at: u64,
    /// Host volumes and host networks the node offers: none yet.
    pub host_volumes: BTreeMap<String, serde_json::Value>,
    pub host_networks: BTreeMap<String, serde_json::Value>,
    pub create_index: u64,
    pub modify_index: u64,
}

/// Nomad's `NodeResources`: CPU and memory of the host, the data dir's free disk (as
/// Nomad's storage fingerprint counts it), devices, and the dynamic port range.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NodeResourcesView {
    pub cpu: serde_json::Value,
    pub memory: serde_json::Value,
    pub disk: serde_json::Value,
    pub devices: Vec<NodeDeviceResource>,
    pub min_dynamic_port: u16,
    pub max_dynamic_port: u16,
}

/// What the config's `client { reserved { ... } }` block keeps back, in Nomad's
/// `ReservedResources` shape.
fn reserved_resources(r: &crate::config::Reserved) -> serde_json::Value {
    serde_json::json!({
        "Cpu": { "CpuShares": r.cpu.unwrap_or(0) },
        "Memory": { "MemoryMB": r.memory.unwrap_or(0) },
        "Disk": { "DiskMB": r.disk.unwrap_or(0) },
        "Networks": { "ReservedHostPorts": "" },
    })
}

impl Agent {
    /// The node as the API and the `Node` event topic show it.
    pub fn node_view(&self) -> NodeView {
        let n = self.node();
        let s = self.server.scheduling();
        let attr = |k: &str| {
            n.attributes
                .get(k)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // The node's totals: the fingerprint, or the config's overrides.
        let c = &self.client.resources();
        let cpu = c
            .cpu_total_compute
            .unwrap_or_else(|| attr("cpu.totalcompute"));
        let memory_mb = c
            .memory_total_mb
            .unwrap_or_else(|| attr("memory.totalbytes") >> 20);
        let disk_mb = c
            .disk_total_mb
            .unwrap_or_else(|| attr("unique.storage.bytesfree") >> 20);
        let r = &c.reserved;
        let devices = self.node_devices();
        let computed_class = crate::node_class::computed_class(&crate::node_class::ClassInput {
            datacenter: &n.datacenter,
            node_class: &n.class,
            node_pool: "default",
            attributes: &n.attributes,
            meta: &n.meta,
            devices: &devices,
        });
        NodeView {
            http_addr: self.http_addr(),
            node_resources: NodeResourcesView {
                cpu: serde_json::json!({
                    "CpuShares": cpu,
                    "TotalCpuCores": attr("cpu.numcores"),
                }),
                memory: serde_json::json!({ "MemoryMB": memory_mb }),
                disk: serde_json::json!({ "DiskMB": disk_mb }),
                devices,
                min_dynamic_port: crate::ports::MIN_DYNAMIC,
                max_dynamic_port: crate::ports::MAX_DYNAMIC,
            },
            resources: serde_json::json!({
                "CPU": cpu, "Cores": 0, "MemoryMB": memory_mb, "MemoryMaxMB": 0, "DiskMB": disk_mb,
            }),
            reserved: serde_json::json!({
                "CPU": r.cpu.unwrap_or(0), "Cores": 0, "MemoryMB": r.memory.unwrap_or(0),
                "MemoryMaxMB": 0, "DiskMB": r.disk.unwrap_or(0),
            }),
            reserved_resources: reserved_resources(r),
            id: n.id,
            name: n.name,
            datacenter: n.datacenter,
            node_class: n.class,
            computed_class,
            node_pool: "default",
            attributes: n.attributes,
            meta: n.meta,
            drivers: self.driver_infos(),
            status_updated_at: self
                .node_events()
                .first()
                .map_or(0, |e| e.timestamp / 1_000_000_000),
            host_volumes: n
                .host_volumes
                .iter()
                .map(|(name, v)| {
                    let mut j = serde_json::to_value(v).unwrap_or_default();
                    j["Name"] = name.clone().into();
                    (name.clone(), j)
                })
                .collect(),
            host_networks: BTreeMap::new(),
            events: self.node_events(),
            status: "ready",
            status_description: "",
            scheduling_eligibility: s.eligibility(),
            drain: s.drain.is_some(),
            drain_strategy: s.drain,
            last_drain: s.last_drain,
            create_index: 1,
            modify_index: s.modify_index.max(1),
        }
    }

    /// Record the address the HTTP API serves on (the first one given is kept).
    pub fn set_http_addr(&self, addr: std::net::SocketAddr) {
        let _ = self.http_addr.set(addr);
    }

    /// The HTTP API's connection limits (the config's `limits` block).
    pub fn http_limits(&self) -> crate::config::HttpLimits {
        self.http_limits
    }

    /// The address the HTTP API serves on, `ip:port` (Nomad's `Node.HTTPAddr`); empty
    /// while it serves nowhere.
    pub fn http_addr(&self) -> String {
        self.http_addr
            .get()
            .map(|a| a.to_string())
            .unwrap_or_default()
    }

    /// Every component version (active, draining) and refused file.
    pub fn components(&self) -> Vec<crate::swap::ComponentStatus> {
        self.swapper.status()
    }

    /// The recent history of components no longer loaded.
    pub fn unloaded_components(&self) -> Vec<crate::swap::ComponentHistory> {
        self.swapper.unloaded()
    }

    /// Hot-swap counters.
    pub fn swap_metrics(&self) -> &crate::swap::SwapMetrics {
        &self.swapper.metrics
    }

    /// Watch the components folders from now on: each complete change is applied while
    /// the agent runs (`agent run` starts this; tests may not).
    pub fn watch_components(&self) -> anyhow::Result<()> {
        let w = crate::swap::watch::start(&self.swapper)?;
        *self.watch.lock().unwrap() = Some(w);
        Ok(())
    }

    /// Look at the components folders now (`POST /v1/components/reload`).
    pub async fn rescan_components(&self) -> Vec<(std::path::PathBuf, crate::swap::Applied)> {
        self.swapper.rescan().await
    }

    /// Pull the plugin block `name`'s source now (`POST /v1/components/pull`).
    pub async fn pull_component(&self, name: &str) -> Result<crate::swap::Applied, String> {
        self.swapper.pull(name, "pulled on request").await
    }

    /// Install the version of `name` held for approval (`POST /v1/components/approve`).
    pub async fn approve_component(&self, name: &str) -> Result<crate::swap::Applied, String> {
        self.swapper.approve(name).await
    }

    /// Re-read the config file and apply its `plugin` and `hook` blocks (SIGHUP, `POST
    /// /v1/agent/reload`); a config that does not parse changes nothing.
    pub async fn reload_config(
        &self,
    ) -> Result<Vec<(String, crate::swap::Applied)>, crate::config::ConfigError> {
        let path = std::path::Path::new(&self.config_file);
        let config = if self.config_file == "<none>" || self.config_file.is_empty() {
            crate::config::AgentConfig::default()
        } else {
            crate::config::AgentConfig::load(path)?
        };
        // Checked before anything changes: a bad volume leaves the old config in place.
        let volumes = config.client.host_volumes(&self.config_file)?;
        let applied = self
            .swapper
            .reload_config(&config, &self.config_file)
            .await?;
        // Blocked jobs that wait for a volume place once the unblocker sees it.
        self.client.set_host_volumes(volumes);
        Ok(applied)
    }

    /// Each driver's health and attributes, by name.
    pub fn driver_infos(&self) -> std::collections::BTreeMap<String, DriverInfo> {
        self.client.plugins().drivers.infos()
    }

    /// The node's recent events (driver and device changes, drain and eligibility),
    /// oldest first.
    pub fn node_events(&self) -> Vec<NodeEvent> {
        self.node_events.list()
    }

    /// Task invocations whose driver events reach their runner: one per task running or
    /// reattached on this node.
    pub fn attached_tasks(&self) -> usize {
        self.client.plugins().drivers.event_handlers()
    }

    /// The node's devices.
    pub fn node_devices(&self) -> Vec<NodeDeviceResource> {
        self.client.plugins().devices.node_devices()
    }
}
