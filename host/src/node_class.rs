//! The node's computed class (Nomad's `Node.ComputeClass`, `nomad/structs/node_class.go`):
//! a hash of what makes nodes interchangeable to the scheduler, so nodes with the same
//! attributes, meta, class, datacenter, pool and device groups share it. Left out, as
//! Nomad leaves them out: everything else on the node, attribute and meta keys under
//! `unique.`, and of each device group its instances (ids, health), so two nodes with the
//! same kind of devices share a class whatever their ids.
//!
//! Nomad hashes its Go structs with `hashstructure` (v1, FNV-1 64) and prints `v1:<hash>`.
//! This walks the same fields in the same way: a struct is the hash of its type name XOR,
//! per included field, the ordered hash of (field name, value); a map XORs the ordered
//! hashes of its entries; a list chains them in order; a string is FNV-1 of its bytes, a
//! number of its little-endian bytes, a nil pointer of an `int64` 0. So a node whose
//! fields equal a Nomad node's gets the value Nomad would give it.

use std::collections::BTreeMap;

use crate::devicemanager::{DeviceAttribute, NodeDeviceResource};

/// What the class is computed from.
pub struct ClassInput<'a> {
    pub datacenter: &'a str,
    pub node_class: &'a str,
    pub node_pool: &'a str,
    pub attributes: &'a BTreeMap<String, String>,
    pub meta: &'a BTreeMap<String, String>,
    pub devices: &'a [NodeDeviceResource],
}

/// `v1:<hash>`, as Nomad formats `ComputedClass`.
pub fn computed_class(n: &ClassInput<'_>) -> String {
    let nr = structure("NodeResources", [("Devices", devices(n.devices))]);
    let node = structure(
        "Node",
        [
            ("Datacenter", text(n.datacenter)),
            ("Attributes", string_map(n.attributes)),
            ("Meta", string_map(n.meta)),
            ("NodeClass", text(n.node_class)),
            ("NodePool", text(n.node_pool)),
            ("NodeResources", nr),
        ],
    );
    format!("v1:{node}")
}

/// FNV-1, 64 bits (Go's `hash/fnv.New64`).
fn fnv1(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        h ^= u64::from(*b);
    }
    h
}

fn text(s: &str) -> u64 {
    fnv1(s.as_bytes())
}

/// Two hashes in order (hashstructure's `hashUpdateOrdered`).
fn ordered(a: u64, b: u64) -> u64 {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_le_bytes());
    bytes[8..].copy_from_slice(&b.to_le_bytes());
    fnv1(&bytes)
}

/// A struct: its type name, then each included field, in any order.
fn structure<const N: usize>(name: &str, fields: [(&str, u64); N]) -> u64 {
    fields
        .iter()
        .fold(text(name), |h, (f, v)| h ^ ordered(text(f), *v))
}

/// A map of strings without its `unique.` keys.
fn string_map(m: &BTreeMap<String, String>) -> u64 {
    m.iter()
        .filter(|(k, _)| !k.starts_with("unique."))
        .fold(0, |h, (k, v)| h ^ ordered(text(k), text(v)))
}

/// A nil pointer: hashstructure treats it as an `int` 0, written as an `int64`.
fn nil() -> u64 {
    fnv1(&0i64.to_le_bytes())
}

/// A device attribute (Nomad's `psstructs.Attribute`: pointers `Float`, `Int`, `String`,
/// `Bool`, and `Unit`).
fn attribute(a: &DeviceAttribute) -> u64 {
    structure(
        "Attribute",
        [
            (
                "Float",
                a.float.map_or_else(nil, |f| fnv1(&f.to_le_bytes())),
            ),
            ("Int", a.int.map_or_else(nil, |i| fnv1(&i.to_le_bytes()))),
            ("String", a.string.as_deref().map_or_else(nil, text)),
            ("Bool", a.boolean.map_or_else(nil, |b| fnv1(&[u8::from(b)]))),
            ("Unit", text(&a.unit)),
        ],
    )
}

/// The device groups in order, each by vendor, type, name and non-unique attributes.
fn devices(groups: &[NodeDeviceResource]) -> u64 {
    groups.iter().fold(0, |h, g| {
        let attrs = g
            .attributes
            .iter()
            .filter(|(k, _)| !k.starts_with("unique."))
            .fold(0, |h, (k, v)| h ^ ordered(text(k), attribute(v)));
        let group = structure(
            "NodeDeviceResource",
            [
                ("Vendor", text(&g.vendor)),
                ("Type", text(&g.device_type)),
                ("Name", text(&g.name)),
                ("Attributes", attrs),
            ],
        );
        ordered(h, group)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devicemanager::NodeDevice;

    fn group(ids: &[&str], memory: i64) -> NodeDeviceResource {
        NodeDeviceResource {
            vendor: "acme".into(),
            device_type: "gpu".into(),
            name: "a100".into(),
            instances: ids
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
                    "memory".to_string(),
                    DeviceAttribute {
                        int: Some(memory),
                        unit: "MiB".into(),
                        ..Default::default()
                    },
                ),
                (
                    "unique.serial".to_string(),
                    crate::devicemanager::attribute::string(ids.join(",")),
                ),
            ]),
        }
    }

    fn class(host: &str, ids: &[&str], memory: i64, dc: &str) -> String {
        let attributes = BTreeMap::from([
            ("kernel.name".to_string(), "linux".to_string()),
            ("unique.hostname".to_string(), host.to_string()),
        ]);
        let meta = BTreeMap::from([("rack".to_string(), "r1".to_string())]);
        let devices = [group(ids, memory)];
        computed_class(&ClassInput {
            datacenter: dc,
            node_class: "",
            node_pool: "default",
            attributes: &attributes,
            meta: &meta,
            devices: &devices,
        })
    }

    #[test]
    fn nodes_alike_but_for_ids_and_unique_keys_share_a_class() {
        let a = class("host-a", &["g0", "g1"], 40960, "dc1");
        assert!(a.starts_with("v1:") && a[3..].parse::<u64>().is_ok(), "{a}");
        assert_eq!(a, class("host-b", &["x7", "x9"], 40960, "dc1"));
        assert_ne!(
            a,
            class("host-a", &["g0", "g1"], 81920, "dc1"),
            "device attr"
        );
        // Instances do not count, the group does.
        assert_eq!(a, class("host-a", &[], 40960, "dc1"));
        let (attributes, meta) = (BTreeMap::new(), BTreeMap::new());
        let bare = |devices: &[NodeDeviceResource]| {
            computed_class(&ClassInput {
                datacenter: "dc1",
                node_class: "",
                node_pool: "default",
                attributes: &attributes,
                meta: &meta,
                devices,
            })
        };
        assert_ne!(bare(&[]), bare(&[group(&["g0"], 1)]), "a device group");
        assert_ne!(
            a,
            class("host-a", &["g0", "g1"], 40960, "dc2"),
            "datacenter"
        );
    }

    #[test]
    fn the_class_is_the_one_nomad_computes_for_the_same_node() {
        // Computed with hashstructure v1's walk over Nomad's struct shapes (Node,
        // NodeResources, NodeDeviceResource, Attribute) and the same values.
        let attr = |f: fn(&mut DeviceAttribute)| {
            let mut a = DeviceAttribute::default();
            f(&mut a);
            a
        };
        let mut g = group(&["g0"], 40960);
        g.attributes.extend([
            (
                "model".to_string(),
                attr(|a| a.string = Some("A100".into())),
            ),
            (
                "clock".to_string(),
                attr(|a| {
                    a.float = Some(1.5);
                    a.unit = "GHz".into();
                }),
            ),
            ("mig".to_string(), attr(|a| a.boolean = Some(true))),
        ]);
        let attributes = BTreeMap::from([
            ("kernel.name".to_string(), "linux".to_string()),
            ("unique.hostname".to_string(), "h".to_string()),
        ]);
        let meta = BTreeMap::from([("rack".to_string(), "r1".to_string())]);
        let class = computed_class(&ClassInput {
            datacenter: "dc1",
            node_class: "",
            node_pool: "default",
            attributes: &attributes,
            meta: &meta,
            devices: &[g],
        });
        assert_eq!(class, "v1:14670729828956564624");
    }

    #[test]
    fn the_hash_is_hashstructures() {
        // FNV-1 64 of "a" (Go: fnv.New64().Write([]byte("a"))).
        assert_eq!(fnv1(b"a"), 0xaf63_bd4c_8601_b7be);
        assert_eq!(fnv1(b""), 0xcbf2_9ce4_8422_2325);
        // Map and struct fields combine without order.
        let m1 = BTreeMap::from([("a".to_string(), "1".into()), ("b".into(), "2".into())]);
        let m2 = BTreeMap::from([("a".to_string(), "2".into()), ("b".into(), "1".into())]);
        assert_ne!(string_map(&m1), string_map(&m2));
        assert_eq!(
            structure("S", [("A", 1), ("B", 2)]),
            structure("S", [("B", 2), ("A", 1)])
        );
    }
}
