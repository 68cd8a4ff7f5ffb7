//! The `constraint` and `affinity` blocks inside a task's `device` block (Nomad's
//! `RequestedDevice.Constraints` and `.Affinities`): rules over a device group's
//! `${device.vendor}`, `${device.type}`, `${device.model}`, `${device.ids}` and
//! `${device.attr.<name>}`. Placement applies them (`devicemanager::rules`); this file is
//! their wire shape and the checks a registration makes of them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Operators a device `constraint` takes (Nomad's, less `distinct_hosts` and
/// `distinct_property`, which `RequestedDevice.Validate` refuses).
pub const CONSTRAINT_OPERATORS: &[&str] = &[
    "=",
    "==",
    "is",
    "!=",
    "not",
    "<",
    "<=",
    ">",
    ">=",
    "regexp",
    "version",
    "semver",
    "set_contains",
    "set_contains_all",
    "set_contains_any",
    "is_set",
    "is_not_set",
];

/// Operators a device `affinity` takes (Nomad's `Affinity.Validate`): a constraint's but
/// `is_set` and `is_not_set`, the last two of [`CONSTRAINT_OPERATORS`].
pub const AFFINITY_OPERATORS: &[&str] = CONSTRAINT_OPERATORS
    .split_at(CONSTRAINT_OPERATORS.len() - 2)
    .0;

/// One device `constraint` (Nomad's `Constraint`: `attribute`, `operator`, `value`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceConstraint {
    #[serde(rename = "LTarget")]
    pub ltarget: String,
    #[serde(rename = "RTarget")]
    pub rtarget: String,
    #[serde(rename = "Operand")]
    pub operand: String,
}

impl DeviceConstraint {
    /// As Nomad prints a constraint: `${device.attr.memory} >= 4 GiB`.
    pub fn describe(&self) -> String {
        format!("{} {} {}", self.ltarget, self.operand, self.rtarget)
    }
}

/// One device `affinity` (Nomad's `Affinity`; `weight` in -100..=100, not 0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceAffinity {
    #[serde(rename = "LTarget")]
    pub ltarget: String,
    #[serde(rename = "RTarget")]
    pub rtarget: String,
    #[serde(rename = "Operand")]
    pub operand: String,
    #[serde(rename = "Weight")]
    pub weight: i8,
}

/// A list that Go sends as `null` when empty (a nil slice), read back from `null`, a
/// missing field or a list.
pub(crate) mod nil_slice {
    use super::*;

    pub fn serialize<S: Serializer, T: Serialize>(v: &[T], s: S) -> Result<S::Ok, S::Error> {
        if v.is_empty() {
            s.serialize_none()
        } else {
            v.serialize(s)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Vec<T>, D::Error> {
        Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobspec::DeviceRequest;

    #[test]
    fn a_request_reads_back_as_nomad_writes_it() {
        let bare = DeviceRequest {
            name: "gpu".into(),
            count: 1,
            constraints: Vec::new(),
            affinities: Vec::new(),
        };
        let v = serde_json::to_value(&bare).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"Name": "gpu", "Count": 1, "Constraints": null, "Affinities": null})
        );
        assert_eq!(serde_json::from_value::<DeviceRequest>(v).unwrap(), bare);
        // As an older agent stored it, without the lists.
        let old: DeviceRequest =
            serde_json::from_value(serde_json::json!({"Name": "gpu", "Count": 1})).unwrap();
        assert_eq!(old, bare);
        let full = DeviceRequest {
            constraints: vec![DeviceConstraint {
                ltarget: "${device.attr.memory}".into(),
                rtarget: "4 GiB".into(),
                operand: ">=".into(),
            }],
            affinities: vec![DeviceAffinity {
                ltarget: "${device.model}".into(),
                rtarget: "a100".into(),
                operand: "=".into(),
                weight: 50,
            }],
            ..bare
        };
        let v = serde_json::to_value(&full).unwrap();
        assert_eq!(v["Constraints"][0]["Operand"], ">=");
        assert_eq!(v["Affinities"][0]["Weight"], 50);
        assert_eq!(serde_json::from_value::<DeviceRequest>(v).unwrap(), full);
    }
}
