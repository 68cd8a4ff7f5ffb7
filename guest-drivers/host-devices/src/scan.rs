//! What the host has, read from sysfs (and `devfs`, when readable, for the nodes' health):
//! plain `std::fs` over folders the `read_paths` grant preopens, so the same code runs on
//! a fake tree in the unit tests.

use std::path::{Path, PathBuf};

use paddock_device_sdk::Attribute;
use serde::Deserialize;

/// The plugin config.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where sysfs is.
    pub sysfs: String,
    /// Where device nodes are.
    pub devfs: String,
    /// Devices of sysfs class `misc` to report, by name.
    pub misc: Vec<String>,
    /// Report DRM render nodes (`class/drm/renderD*`).
    pub drm: bool,
    /// Further devices: entries of a sysfs class whose names match a pattern.
    pub classes: Vec<ClassRule>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            sysfs: "/sys".into(),
            devfs: "/dev".into(),
            misc: vec!["kvm".into(), "fuse".into(), "tun".into()],
            drm: true,
            classes: Vec::new(),
        }
    }
}

/// Entries of sysfs class `class` whose names match `pattern` (`*` and `?`), reported as
/// group `vendor`/`type`/`name`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassRule {
    /// The sysfs class, e.g. `tty`.
    pub class: String,
    /// Entry names, e.g. `ttyUSB*`.
    pub pattern: String,
    /// The group's vendor.
    pub vendor: String,
    /// The group's type.
    #[serde(rename = "type")]
    pub device_type: String,
    /// The group's name.
    pub name: String,
}

/// One device found.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Instance id: the sysfs entry's name (`kvm`, `renderD128`).
    pub id: String,
    /// Group vendor.
    pub vendor: String,
    /// Group type.
    pub device_type: String,
    /// Group name.
    pub name: String,
    /// The node on the host (`devfs` + the kernel's `DEVNAME`).
    pub host_path: String,
    /// The node as a task sees it (`/dev/` + `DEVNAME`).
    pub task_path: String,
    /// Group attributes.
    pub attributes: Vec<(String, Attribute)>,
    /// PCI bus id, for PCI devices.
    pub pci_bus_id: Option<String>,
    /// Why it cannot be used, if it cannot.
    pub unhealthy: Option<String>,
    /// Busy %, where the kernel tells it (amdgpu's `gpu_busy_percent`).
    pub busy_percent: Option<f64>,
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// `KEY=value` lines of a `uevent` file.
fn uevent(dir: &Path, key: &str) -> Option<String> {
    read(&dir.join("uevent"))?
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('=').map(str::to_string))
}

/// Whether `name` matches `pattern`, where `*` is any run and `?` any one character.
pub fn matches(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some(('*', rest)) => (0..=n.len()).any(|i| go(rest, &n[i..])),
            Some(('?', rest)) => !n.is_empty() && go(rest, &n[1..]),
            Some((c, rest)) => n.first() == Some(c) && go(rest, &n[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}

/// A device of sysfs entry `dir` named `id`, in group `vendor`/`device_type`/`name`.
fn found(config: &Config, dir: &Path, id: &str, group: [&str; 3]) -> Found {
    let devname = uevent(dir, "DEVNAME").unwrap_or_else(|| id.to_string());
    // Group attributes are the same for every instance: the major number is (a class's
    // driver), the minor is not.
    let mut attributes = Vec::new();
    if let Some(n) = uevent(dir, "MAJOR").and_then(|v| v.parse::<i64>().ok()) {
        attributes.push(("major".to_string(), Attribute::Int(n)));
    }
    let host_path = format!("{}/{devname}", config.devfs.trim_end_matches('/'));
    // The node is checked only where devfs can be read; sysfs alone says it exists.
    let unhealthy = match std::fs::metadata(&config.devfs) {
        Ok(_) if std::fs::metadata(&host_path).is_err() => {
            Some(format!("no device node {host_path}"))
        }
        _ => None,
    };
    Found {
        id: id.to_string(),
        vendor: group[0].to_string(),
        device_type: group[1].to_string(),
        name: group[2].to_string(),
        host_path,
        task_path: format!("/dev/{devname}"),
        attributes,
        pci_bus_id: None,
        unhealthy,
        busy_percent: None,
    }
}

/// Sorted entry names of a folder.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The vendor name of a PCI vendor id.
fn pci_vendor(id: &str) -> String {
    match id {
        "0x8086" => "intel".into(),
        "0x1002" => "amd".into(),
        "0x10de" => "nvidia".into(),
        "0x1af4" => "virtio".into(),
        "0x1234" => "qemu".into(),
        other => format!("pci-{}", other.trim_start_matches("0x")),
    }
}

/// A DRM render node: vendor and model from its PCI device, memory where the driver tells.
fn render_node(config: &Config, dir: &Path, id: &str) -> Found {
    let device = dir.join("device");
    let vendor_id = read(&device.join("vendor")).unwrap_or_default();
    let device_id = read(&device.join("device")).unwrap_or_default();
    let link_name = |p: PathBuf| {
        std::fs::read_link(p)
            .ok()
            .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
    };
    let driver = link_name(device.join("driver")).unwrap_or_else(|| "drm".into());
    let model = format!("{driver}-{}", device_id.trim_start_matches("0x"));
    let vendor = pci_vendor(&vendor_id);
    let mut f = found(config, dir, id, [&vendor, "gpu", &model]);
    f.attributes.push(("driver".into(), Attribute::Str(driver)));
    f.attributes
        .push(("pci_device_id".into(), Attribute::Str(device_id)));
    f.attributes
        .push(("pci_vendor_id".into(), Attribute::Str(vendor_id)));
    let vram = read(&device.join("mem_info_vram_total")).and_then(|v| v.parse::<i64>().ok());
    if let Some(bytes) = vram {
        f.attributes
            .push(("memory_mib".into(), Attribute::Int(bytes >> 20)));
    }
    f.pci_bus_id = link_name(device);
    f.busy_percent = read(&dir.join("device/gpu_busy_percent")).and_then(|v| v.parse().ok());
    f
}

/// Every device the config asks for that the host has.
pub fn scan(config: &Config) -> Vec<Found> {
    let sys = Path::new(&config.sysfs);
    let mut out = Vec::new();
    for name in &config.misc {
        let dir = sys.join("class/misc").join(name);
        if dir.exists() {
            out.push(found(config, &dir, name, ["linux", name, name]));
        }
    }
    if config.drm {
        let drm = sys.join("class/drm");
        for id in entries(&drm)
            .into_iter()
            .filter(|n| n.starts_with("renderD"))
        {
            out.push(render_node(config, &drm.join(&id), &id));
        }
    }
    for rule in &config.classes {
        let class = sys.join("class").join(&rule.class);
        for id in entries(&class)
            .into_iter()
            .filter(|n| matches(&rule.pattern, n))
        {
            let group = [rule.vendor.as_str(), &rule.device_type, &rule.name];
            out.push(found(config, &class.join(&id), &id, group));
        }
    }
    out
}
