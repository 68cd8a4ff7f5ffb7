//! The node: its persisted identity and the fingerprint of the host it runs on, with
//! Nomad's attribute names (`kernel.name`, `cpu.numcores`, `memory.totalbytes`, ...), so
//! `${attr.*}` interpolation and the node API see what Nomad users expect.

use std::collections::BTreeMap;
use std::path::Path;

use crate::state::{StateDb, StateError};
use crate::taskenv::NodeInfo;

/// Load the node's identity from the state DB, or create and store one.
pub fn identity(db: &dyn StateDb, name: Option<&str>) -> Result<(String, String), StateError> {
    let hostname = hostname();
    if let Some(id) = db.node_identity()?
        && let Some(node_id) = id.get("id")
    {
        let name = name
            .map(str::to_string)
            .or_else(|| id.get("name").cloned())
            .unwrap_or(hostname);
        return Ok((node_id.clone(), name));
    }
    let node_id = uuid::Uuid::new_v4().to_string();
    let name = name.map(str::to_string).unwrap_or(hostname);
    let mut m = BTreeMap::new();
    m.insert("id".to_string(), node_id.clone());
    m.insert("name".to_string(), name.clone());
    m.insert("secret".to_string(), uuid::Uuid::new_v4().to_string());
    db.put_node_identity(&m)?;
    Ok((node_id, name))
}

/// The host's name.
pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// Fingerprint the host into Nomad-named attributes; the storage ones describe the
/// filesystem of `alloc_dir`, as Nomad's do.
pub fn fingerprint(alloc_dir: &Path) -> BTreeMap<String, String> {
    let mut a = BTreeMap::new();
    let uts = rustix::system::uname();
    a.insert(
        "kernel.name".into(),
        uts.sysname().to_string_lossy().to_lowercase(),
    );
    a.insert(
        "kernel.version".into(),
        uts.release().to_string_lossy().into_owned(),
    );
    a.insert(
        "kernel.arch".into(),
        uts.machine().to_string_lossy().into_owned(),
    );
    a.insert("cpu.arch".into(), go_arch(std::env::consts::ARCH).into());
    a.insert(
        "os.name".into(),
        os_release("ID").unwrap_or_else(|| std::env::consts::OS.into()),
    );
    if let Some(v) = os_release("VERSION_ID") {
        a.insert("os.version".into(), v);
    }
    a.insert("unique.hostname".into(), hostname());
    if let Some(ip) = primary_ip() {
        a.insert("unique.network.ip-address".into(), ip);
    }
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    a.insert("cpu.numcores".into(), cores.to_string());
    let mhz = cpu_mhz().unwrap_or(1000);
    a.insert("cpu.frequency".into(), mhz.to_string());
    a.insert("cpu.totalcompute".into(), (mhz * cores as u64).to_string());
    if let Some(model) = cpuinfo_field("model name") {
        a.insert("cpu.modelname".into(), model);
    }
    if let Some(bytes) = meminfo_total() {
        a.insert("memory.totalbytes".into(), bytes.to_string());
    }
    if let Ok(st) = rustix::fs::statvfs(alloc_dir) {
        a.insert(
            "unique.storage.volume".into(),
            alloc_dir.display().to_string(),
        );
        a.insert(
            "unique.storage.bytestotal".into(),
            (st.f_blocks * st.f_frsize).to_string(),
        );
        a.insert(
            "unique.storage.bytesfree".into(),
            (st.f_bavail * st.f_frsize).to_string(),
        );
    }
    a.insert("nomad.version".into(), "1.9.0".into());
    a.insert("paddock.version".into(), env!("CARGO_PKG_VERSION").into());
    a
}

/// Build the node info for interpolation and the API.
pub fn node_info(
    id: String,
    name: String,
    datacenter: String,
    region: String,
    class: String,
    attributes: BTreeMap<String, String>,
    meta: BTreeMap<String, String>,
) -> NodeInfo {
    NodeInfo {
        id,
        name,
        datacenter,
        region,
        class,
        attributes,
        meta,
        host_volumes: BTreeMap::new(),
    }
}

fn go_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

fn os_release(key: &str) -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix(&format!("{key}="))
            .map(|v| v.trim_matches('"').to_string())
    })
}

fn cpuinfo_field(field: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == field).then(|| v.trim().to_string())
    })
}

fn cpu_mhz() -> Option<u64> {
    cpuinfo_field("cpu MHz")
        .and_then(|v| v.parse::<f64>().ok())
        .map(|v| v as u64)
}

fn meminfo_total() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines().find_map(|l| {
        let rest = l.strip_prefix("MemTotal:")?;
        rest.trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .ok()
            .map(|kb| kb * 1024)
    })
}

/// The address this host would use to reach other hosts (Nomad's `unique.network.ip-address`):
/// the local end of a UDP socket "connected" to a public address, which sends nothing.
/// `None` without a route.
fn primary_ip() -> Option<String> {
    let s = std::net::UdpSocket::bind(("0.0.0.0", 0)).ok()?;
    s.connect(("192.0.2.1", 9)).ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then(|| ip.to_string())
}

/// Host memory: total, available and free, bytes.
pub fn meminfo() -> (u64, u64, u64) {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let get = |k: &str| {
        text.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (get("MemTotal:"), get("MemAvailable:"), get("MemFree:"))
}

/// Host uptime, seconds.
pub fn uptime_secs() -> u64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

/// A node event (Nomad's NodeEvent), e.g. a driver's health changing.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NodeEvent {
    /// What happened.
    pub message: String,
    /// Subsystem: "Driver" or "Device".
    pub subsystem: String,
    /// Details, e.g. the driver's name.
    pub details: BTreeMap<String, String>,
    /// When, ns; RFC 3339 on the wire (Go's `time.Time`).
    #[serde(with = "crate::util::go_time_serde")]
    pub timestamp: u64,
}

/// Most node events kept (Nomad keeps 10).
const MAX_NODE_EVENTS: usize = 10;

/// The node's recent events, shared by the driver and device managers.
#[derive(Default)]
pub struct NodeEvents(std::sync::RwLock<Vec<NodeEvent>>);

impl NodeEvents {
    /// Add an event, dropping the oldest beyond the limit.
    pub fn push(&self, subsystem: &str, message: String, details: BTreeMap<String, String>) {
        let mut events = self.0.write().unwrap();
        events.push(NodeEvent {
            message,
            subsystem: subsystem.to_string(),
            details,
            timestamp: crate::util::now_nanos(),
        });
        if events.len() > MAX_NODE_EVENTS {
            let extra = events.len() - MAX_NODE_EVENTS;
            events.drain(..extra);
        }
    }

    /// Events, oldest first.
    pub fn list(&self) -> Vec<NodeEvent> {
        self.0.read().unwrap().clone()
    }
}
