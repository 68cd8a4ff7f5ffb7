//! The `host-devices` device plugin: real device nodes of this host, found through sysfs,
//! as Nomad device groups. By default it reports the `misc` devices `kvm`, `fuse` and `tun`
//! (group `linux/<name>/<name>`) and every DRM render node (`<vendor>/gpu/<driver>-<device
//! id>`, with the PCI ids, the driver and `memory_mib` where the driver tells it); the
//! plugin config adds classes and patterns:
//!
//! ```json
//! {"classes": [{"class": "tty", "pattern": "ttyUSB*", "vendor": "usb", "type": "serial", "name": "tty"}]}
//! ```
//!
//! It needs the `read_paths` grant for sysfs (`/sys`; with `/dev` too it also checks that
//! each node exists, else the instance is unhealthy). Reserving instances gives the task
//! their nodes (read-write) and, per type, `HOST_DEVICES_<TYPE>` = their paths joined by
//! `,` (e.g. `HOST_DEVICES_KVM=/dev/kvm`).

mod scan;

use paddock_device_sdk::host::{config, timer};
use paddock_device_sdk::{
    ContainerReservation, DeviceError, DeviceGroup, DeviceInstance, DeviceNode, DevicePlugin,
    GroupStats, InstanceStats, PluginInfo, StatValue,
};
use scan::{Config, Found};

fn found() -> Result<Vec<Found>, DeviceError> {
    let config: Config = config::parse(&config::raw())
        .map_err(|e| DeviceError::Failed(format!("invalid plugin config: {e}")))?;
    if let Err(e) = std::fs::read_dir(&config.sysfs) {
        return Err(DeviceError::Failed(format!(
            "cannot read sysfs at {}: {e}; grant it with `read_paths = [\"{}\"]`",
            config.sysfs, config.sysfs
        )));
    }
    Ok(scan::scan(&config))
}

/// The found devices as groups, in the order their first instance was found.
fn groups(found: &[Found]) -> Vec<DeviceGroup> {
    let mut groups: Vec<DeviceGroup> = Vec::new();
    for f in found {
        let instance = DeviceInstance {
            pci_bus_id: f.pci_bus_id.clone(),
            ..match &f.unhealthy {
                None => DeviceInstance::healthy(&f.id),
                Some(reason) => DeviceInstance::unhealthy(&f.id, reason),
            }
        };
        let same = |g: &&mut DeviceGroup| {
            (g.vendor.as_str(), g.device_type.as_str(), g.name.as_str())
                == (f.vendor.as_str(), f.device_type.as_str(), f.name.as_str())
        };
        match groups.iter_mut().find(same) {
            Some(g) => g.devices.push(instance),
            None => {
                let mut g = DeviceGroup::new(&f.vendor, &f.device_type, &f.name, vec![instance]);
                g.attributes = f.attributes.clone();
                groups.push(g);
            }
        }
    }
    groups
}

/// What reserving `ids` gives a task.
fn reservation(found: &[Found], ids: &[String]) -> Result<ContainerReservation, DeviceError> {
    let mut picked = Vec::new();
    for id in ids {
        let f = found.iter().find(|f| &f.id == id);
        picked.push(f.ok_or_else(|| DeviceError::UnknownDevice(id.clone()))?);
    }
    let mut env: Vec<(String, String)> = Vec::new();
    for f in &picked {
        let key: String = f
            .device_type
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        let key = format!("HOST_DEVICES_{key}");
        match env.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push_str(&format!(",{}", f.task_path)),
            None => env.push((key, f.task_path.clone())),
        }
    }
    Ok(ContainerReservation {
        env,
        mounts: Vec::new(),
        devices: picked
            .iter()
            .map(|f| DeviceNode {
                task_path: f.task_path.clone(),
                host_path: f.host_path.clone(),
                permissions: "rw".into(),
            })
            .collect(),
    })
}

/// Per instance: busy % where the kernel tells it, else whether it is usable.
fn stats(found: &[Found], now: u64) -> Vec<GroupStats> {
    groups(found)
        .into_iter()
        .map(|g| GroupStats {
            instances: g
                .devices
                .iter()
                .map(|d| {
                    let f = found.iter().find(|f| f.id == d.id);
                    let summary = match f.and_then(|f| f.busy_percent) {
                        Some(p) => StatValue::number(p, "%", "Busy"),
                        None if d.healthy => StatValue::text("available", "State"),
                        None => StatValue::text("unhealthy", "State"),
                    };
                    InstanceStats::new(&d.id, summary, now)
                })
                .collect(),
            vendor: g.vendor,
            device_type: g.device_type,
            name: g.name,
        })
        .collect()
}

/// The plugin.
pub struct HostDevices;

impl DevicePlugin for HostDevices {
    fn info() -> PluginInfo {
        PluginInfo::new("host-devices", env!("CARGO_PKG_VERSION"))
    }

    fn fingerprint() -> Result<Vec<DeviceGroup>, DeviceError> {
        Ok(groups(&found()?))
    }

    fn reserve(ids: Vec<String>) -> Result<ContainerReservation, DeviceError> {
        reservation(&found()?, &ids)
    }

    fn stats() -> Result<Vec<GroupStats>, DeviceError> {
        Ok(stats(&found()?, timer::now()))
    }
}

paddock_device_sdk::export_device_plugin!(HostDevices);

#[cfg(test)]
mod tests;
