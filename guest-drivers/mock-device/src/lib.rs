//! The `mock-device` device plugin: fake devices for testing device fingerprinting,
//! scheduling and reservation without hardware.
//!
//! Without configuration it reports one group, vendor `paddock`, type `mock`, name
//! `mock-device`, with healthy instances `mock-0` and `mock-1` and the attribute
//! `memory_mib = 1024`. The plugin config can list other groups instead:
//!
//! ```json
//! {"devices": [{"vendor": "acme", "type": "gpu", "name": "a100", "ids": ["g0", "g1"],
//!               "attributes": {"memory_mib": 40960, "model": "A100", "mig": true}}]}
//! ```
//!
//! A configured group's `attributes` (optional) become its attributes: a JSON integer an
//! `int`, another number a `float`, a string a `str`, a boolean a `boolean`.
//!
//! Reserving ids gives the task `MOCK_DEVICE_IDS=<ids joined by ",">` and, per id, the device
//! node `/dev/null` as `/dev/mock-<id>` with permissions `rw`.

use paddock_device_sdk::host::{config, timer};
use paddock_device_sdk::{
    Attribute, ContainerReservation, DeviceError, DeviceGroup, DeviceInstance, DeviceNode,
    DevicePlugin, GroupStats, InstanceStats, PluginInfo, StatValue,
};
use serde::Deserialize;

/// The plugin config.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginConfig {
    /// Device groups to report instead of the default one.
    devices: Option<Vec<GroupConfig>>,
}

/// One configured device group.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupConfig {
    vendor: String,
    #[serde(rename = "type")]
    device_type: String,
    name: String,
    ids: Vec<String>,
    /// The group's attributes.
    #[serde(default)]
    attributes: std::collections::BTreeMap<String, serde_json::Value>,
}

/// A configured attribute value as the contract's attribute.
fn attribute(name: &str, v: serde_json::Value) -> Result<Attribute, DeviceError> {
    use serde_json::Value;
    Ok(match v {
        Value::Bool(b) => Attribute::Boolean(b),
        Value::String(s) => Attribute::Str(s),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Attribute::Int(i),
            None => Attribute::Float(n.as_f64().unwrap_or_default()),
        },
        other => {
            return Err(DeviceError::Failed(format!(
                "invalid plugin config: attribute {name:?} must be a number, string or boolean, found {other}"
            )));
        }
    })
}

/// The device groups a plugin config (JSON; blank means `{}`) describes.
fn groups(json: &str) -> Result<Vec<DeviceGroup>, DeviceError> {
    let config: PluginConfig = config::parse(json)
        .map_err(|e| DeviceError::Failed(format!("invalid plugin config: {e}")))?;
    let Some(groups) = config.devices else {
        let instances = vec![
            DeviceInstance::healthy("mock-0"),
            DeviceInstance::healthy("mock-1"),
        ];
        let group = DeviceGroup::new("paddock", "mock", "mock-device", instances)
            .with_attribute("memory_mib", Attribute::Int(1024));
        return Ok(vec![group]);
    };
    groups
        .into_iter()
        .map(|g| {
            let instances = g.ids.into_iter().map(DeviceInstance::healthy).collect();
            let mut group = DeviceGroup::new(g.vendor, g.device_type, g.name, instances);
            for (name, v) in g.attributes {
                let a = attribute(&name, v)?;
                group = group.with_attribute(name, a);
            }
            Ok(group)
        })
        .collect()
}

/// What reserving `ids` among `groups` gives a task.
fn reservation(
    groups: &[DeviceGroup],
    ids: &[String],
) -> Result<ContainerReservation, DeviceError> {
    let known = |id: &String| groups.iter().flat_map(|g| &g.devices).any(|d| &d.id == id);
    if let Some(unknown) = ids.iter().find(|id| !known(id)) {
        return Err(DeviceError::UnknownDevice(unknown.clone()));
    }
    Ok(ContainerReservation {
        env: vec![("MOCK_DEVICE_IDS".to_string(), ids.join(","))],
        mounts: Vec::new(),
        devices: ids
            .iter()
            .map(|id| DeviceNode {
                task_path: format!("/dev/mock-{id}"),
                host_path: "/dev/null".to_string(),
                permissions: "rw".to_string(),
            })
            .collect(),
    })
}

/// Stats of every instance of `groups` at `timestamp`: a utilization of 0 %.
fn stats(groups: Vec<DeviceGroup>, timestamp: u64) -> Vec<GroupStats> {
    groups
        .into_iter()
        .map(|g| GroupStats {
            instances: g
                .devices
                .iter()
                .map(|d| {
                    InstanceStats::new(&d.id, StatValue::number(0.0, "%", "Utilization"), timestamp)
                })
                .collect(),
            vendor: g.vendor,
            device_type: g.device_type,
            name: g.name,
        })
        .collect()
}

/// The mock device plugin.
pub struct MockDevice;

impl DevicePlugin for MockDevice {
    fn info() -> PluginInfo {
        PluginInfo::new("mock-device", env!("CARGO_PKG_VERSION"))
    }

    fn fingerprint() -> Result<Vec<DeviceGroup>, DeviceError> {
        groups(&config::raw())
    }

    fn reserve(ids: Vec<String>) -> Result<ContainerReservation, DeviceError> {
        reservation(&groups(&config::raw())?, &ids)
    }

    fn stats() -> Result<Vec<GroupStats>, DeviceError> {
        Ok(stats(groups(&config::raw())?, timer::now()))
    }
}

paddock_device_sdk::export_device_plugin!(MockDevice);

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn default_group() {
        let groups = groups("{}").unwrap();
        assert_eq!(groups.len(), 1);
        let g = &groups[0];
        assert_eq!(
            (g.vendor.as_str(), g.device_type.as_str(), g.name.as_str()),
            ("paddock", "mock", "mock-device")
        );
        assert_eq!(
            g.devices.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
            ["mock-0", "mock-1"]
        );
        assert!(g.devices.iter().all(|d| d.healthy));
        assert_eq!(
            g.attributes,
            vec![("memory_mib".to_string(), Attribute::Int(1024))]
        );
    }

    #[test]
    fn configured_groups() {
        let json =
            r#"{"devices": [{"vendor": "acme", "type": "gpu", "name": "a100", "ids": ["g0"]}]}"#;
        let groups = groups(json).unwrap();
        assert_eq!(groups[0].device_type, "gpu");
        assert_eq!(groups[0].devices[0].id, "g0");
        assert!(groups[0].attributes.is_empty());
        assert!(
            matches!(super::groups(r#"{"devices": 1}"#), Err(DeviceError::Failed(m)) if m.starts_with("invalid plugin config"))
        );
        assert!(super::groups(r#"{"bogus": 1}"#).is_err());
        let json = r#"{"devices": [{"vendor": "acme", "type": "gpu", "name": "a100", "ids": ["g0"],
            "attributes": {"memory_mib": 40960, "model": "A100", "mig": true, "tflops": 19.5}}]}"#;
        let attrs = &super::groups(json).unwrap()[0].attributes;
        assert!(attrs.contains(&("memory_mib".to_string(), Attribute::Int(40960))));
        assert!(attrs.contains(&("model".to_string(), Attribute::Str("A100".into()))));
        assert!(attrs.contains(&("mig".to_string(), Attribute::Boolean(true))));
        assert!(attrs.contains(&("tflops".to_string(), Attribute::Float(19.5))));
        let bad = json.replace("true", "[1]");
        assert!(super::groups(&bad).is_err());
    }

    #[test]
    fn reserves_known_ids() {
        let groups = groups("").unwrap();
        let r = reservation(&groups, &ids(&["mock-1", "mock-0"])).unwrap();
        assert_eq!(
            r.env,
            vec![("MOCK_DEVICE_IDS".to_string(), "mock-1,mock-0".to_string())]
        );
        assert_eq!(r.devices.len(), 2);
        assert_eq!(r.devices[0].task_path, "/dev/mock-mock-1");
        assert_eq!(
            (
                r.devices[0].host_path.as_str(),
                r.devices[0].permissions.as_str()
            ),
            ("/dev/null", "rw")
        );
        assert_eq!(
            reservation(&groups, &ids(&["mock-0", "nope"])),
            Err(DeviceError::UnknownDevice("nope".into()))
        );
    }

    #[test]
    fn stats_per_instance() {
        let stats = stats(groups("").unwrap(), 7);
        assert_eq!(stats[0].instances.len(), 2);
        assert_eq!(stats[0].instances[1].id, "mock-1");
        assert_eq!(stats[0].instances[1].summary.number, Some(0.0));
        assert_eq!(stats[0].instances[1].timestamp, 7);
    }
}
