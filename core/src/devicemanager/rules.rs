//! A `device` request's `constraint`s and `affinity`s against a device group, as Nomad's
//! scheduler applies them (`scheduler/feasible.go` `nodeDeviceMatches`,
//! `resolveDeviceTarget`, `checkAttributeConstraint`; `scheduler/device.go`): targets
//! resolve on the group (`${device.vendor}`, `${device.type}`, `${device.model}`,
//! `${device.ids}` (its instance ids joined by commas), `${device.attr.<name>}`), anything
//! else is a literal read as [`attribute::parse`] reads it. A constraint that names
//! `${device.ids}` also narrows which instances may be assigned.

use super::types::{DeviceAttribute, NodeDeviceResource};
use crate::constraint::attribute;
pub use crate::constraint::device::{check, known_target};
use crate::jobspec::{DeviceAffinity, DeviceConstraint, DeviceRequest};

/// A target's value on `g`: `None` when it names something the group does not have.
pub fn resolve(target: &str, g: &NodeDeviceResource) -> Option<DeviceAttribute> {
    let Some(inner) = target.strip_prefix("${").and_then(|t| t.strip_suffix('}')) else {
        return Some(attribute::parse(target));
    };
    match inner {
        "device.ids" => Some(attribute::string(
            g.instances
                .iter()
                .map(|d| d.id.as_str())
                .collect::<Vec<_>>()
                .join(","),
        )),
        "device.model" => Some(attribute::string(&g.name)),
        "device.vendor" => Some(attribute::string(&g.vendor)),
        "device.type" => Some(attribute::string(&g.device_type)),
        other => {
            let name = other.strip_prefix("device.attr.")?;
            g.attributes.get(name).cloned().or_else(|| {
                // `${device.attr.memory}` finds `memory_mib`: the unit its name carries.
                g.attributes
                    .iter()
                    .find(|(k, _)| attribute::name_without_unit(k) == Some(name))
                    .map(|(_, v)| v.clone())
            })
        }
    }
}

/// Whether `c` holds on group `g`.
pub fn constraint_holds(c: &DeviceConstraint, g: &NodeDeviceResource) -> bool {
    check(
        &c.operand,
        resolve(&c.ltarget, g).as_ref(),
        resolve(&c.rtarget, g).as_ref(),
    )
}

/// The first of `req`'s constraints that group `g` fails, if any.
pub fn failed_constraint<'r>(
    req: &'r DeviceRequest,
    g: &NodeDeviceResource,
) -> Option<&'r DeviceConstraint> {
    req.constraints.iter().find(|c| !constraint_holds(c, g))
}

/// Whether instance `id` of `g` may be assigned: every constraint on `${device.ids}`
/// holds with the other side against this one id (Nomad's `deviceIDMatchesConstraint`).
pub fn instance_allowed(id: &str, req: &DeviceRequest, g: &NodeDeviceResource) -> bool {
    let this = attribute::string(id);
    req.constraints.iter().all(|c| {
        let other = if c.ltarget == "${device.ids}" {
            &c.rtarget
        } else if c.rtarget == "${device.ids}" {
            &c.ltarget
        } else {
            return true;
        };
        check(&c.operand, resolve(other, g).as_ref(), Some(&this))
    })
}

/// How well `g` meets `req`'s affinities: the weights of those that hold over the sum of
/// all weights' magnitudes, in -1..=1 (0 without affinities), as Nomad scores a device.
pub fn affinity_score(affinities: &[DeviceAffinity], g: &NodeDeviceResource) -> f64 {
    let total: f64 = affinities.iter().map(|a| f64::from(a.weight).abs()).sum();
    if total == 0.0 {
        return 0.0;
    }
    let met: f64 = affinities
        .iter()
        .filter(|a| {
            check(
                &a.operand,
                resolve(&a.ltarget, g).as_ref(),
                resolve(&a.rtarget, g).as_ref(),
            )
        })
        .map(|a| f64::from(a.weight))
        .sum();
    met / total
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::devicemanager::NodeDevice;

    fn group(name: &str, memory_mib: i64) -> NodeDeviceResource {
        NodeDeviceResource {
            vendor: "acme".into(),
            device_type: "gpu".into(),
            name: name.into(),
            instances: ["g0", "g1"]
                .iter()
                .map(|id| NodeDevice {
                    id: id.to_string(),
                    healthy: true,
                    health_description: String::new(),
                    locality: None,
                })
                .collect(),
            attributes: BTreeMap::from([
                (
                    "memory_mib".to_string(),
                    attribute::with_unit_from_name(
                        "memory_mib",
                        DeviceAttribute {
                            int: Some(memory_mib),
                            ..Default::default()
                        },
                    ),
                ),
                (
                    "driver_version".to_string(),
                    attribute::string("535.104.05"),
                ),
                ("cuda".to_string(), attribute::string("sm80,sm86")),
            ]),
        }
    }

    fn holds(l: &str, op: &str, r: &str, g: &NodeDeviceResource) -> bool {
        constraint_holds(
            &DeviceConstraint {
                ltarget: l.into(),
                rtarget: r.into(),
                operand: op.into(),
            },
            g,
        )
    }

    #[test]
    fn constraints_hold_as_nomads_device_checks_say() {
        let g = group("a100", 8192);
        assert!(holds("${device.attr.memory_mib}", ">=", "4 GiB", &g));
        assert!(holds("${device.attr.memory}", ">=", "4 GiB", &g), "alias");
        assert!(!holds("${device.attr.memory}", ">", "8 GiB", &g));
        assert!(holds("${device.attr.memory}", "=", "8192 MiB", &g));
        assert!(
            !holds("${device.attr.memory}", ">=", "4", &g),
            "no unit: no compare"
        );
        assert!(holds("${device.model}", "=", "a100", &g));
        assert!(holds("${device.model}", "!=", "t4", &g));
        assert!(holds("${device.vendor}", "regexp", "^ac", &g));
        assert!(holds("${device.type}", "==", "gpu", &g));
        assert!(holds("${device.attr.cuda}", "set_contains", "sm86", &g));
        assert!(!holds(
            "${device.attr.cuda}",
            "set_contains_all",
            "sm86,sm90",
            &g
        ));
        assert!(holds(
            "${device.attr.cuda}",
            "set_contains_any",
            "sm86,sm90",
            &g
        ));
        assert!(holds(
            "${device.attr.driver_version}",
            "version",
            ">= 535.0",
            &g
        ));
        assert!(!holds(
            "${device.attr.driver_version}",
            "version",
            "< 500",
            &g
        ));
        assert!(holds("${device.attr.memory}", "is_set", "", &g));
        assert!(holds("${device.attr.nope}", "is_not_set", "", &g));
        assert!(!holds("${device.attr.nope}", "=", "x", &g));
        assert!(holds("${device.attr.nope}", "!=", "x", &g));
        assert!(!holds(
            "${device.attr.nope}",
            "!=",
            "${device.attr.none}",
            &g
        ));
        assert!(holds("${device.ids}", "set_contains", "g1", &g));
        assert!(!holds("${device.model}", "bogus", "a100", &g));
    }

    #[test]
    fn id_constraints_narrow_the_instances() {
        let g = group("a100", 8192);
        let req = DeviceRequest {
            name: "gpu".into(),
            count: 1,
            constraints: vec![DeviceConstraint {
                ltarget: "${device.ids}".into(),
                rtarget: "g1".into(),
                operand: "set_contains_any".into(),
            }],
            affinities: Vec::new(),
        };
        assert!(failed_constraint(&req, &g).is_none());
        assert!(!instance_allowed("g0", &req, &g));
        assert!(instance_allowed("g1", &req, &g));
    }

    #[test]
    fn affinities_score_by_weight() {
        let a = |l: &str, r: &str, w: i8| DeviceAffinity {
            ltarget: l.into(),
            rtarget: r.into(),
            operand: "=".into(),
            weight: w,
        };
        let (a100, t4) = (group("a100", 40960), group("t4", 16384));
        let affs = [
            a("${device.model}", "a100", 50),
            a("${device.model}", "t4", -50),
        ];
        assert_eq!(affinity_score(&affs, &a100), 0.5);
        assert_eq!(affinity_score(&affs, &t4), -0.5);
        assert_eq!(affinity_score(&[], &t4), 0.0);
    }

    #[test]
    fn targets_are_device_ones_or_literals() {
        for ok in [
            "${device.model}",
            "${device.ids}",
            "${device.attr.memory}",
            "4 GiB",
        ] {
            assert!(known_target(ok), "{ok}");
        }
        for bad in ["${attr.kernel.name}", "${device.attr.}", "${device.modle}"] {
            assert!(!known_target(bad), "{bad}");
        }
    }
}
