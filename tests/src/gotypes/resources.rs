//! `api/resources.go` (resources, networks, devices), with `api/constraint.go`,
//! `api/csi.go` and `api/scaling.go`, whose small types jobs and nodes embed.

use serde_json::Value;
use std::collections::BTreeMap;

use super::*;

go_struct! {
    /// Mirrors `Resources` in api/resources.go.
    /// Nomad's `Resources` has no pointers, so it sends every field; `nomad alloc status`
    /// and `nomad node status` dereference CPU, MemoryMB and DiskMB of an allocation's
    /// `Resources` and `TaskResources` and of a node's `Resources`.
    Resources {
        CPU: always Option<i64>,
        Cores: Option<i64>,
        MemoryMB: always Option<i64>,
        MemoryMaxMB: Option<i64>,
        DiskMB: always Option<i64>,
        Networks: Vec<Option<NetworkResource>>,
        Devices: Vec<Option<RequestedDevice>>,
        NUMA: Option<NUMAResource>,
        SecretsMB: Option<i64>,
        IOPS: Option<i64>,
    }
}

go_struct! {
    /// Mirrors `NUMAResource` in api/resources.go.
    NUMAResource {
        Affinity: String,
        Devices: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `Port` in api/resources.go.
    Port {
        Label: String,
        Value: i64,
        To: i64,
        HostNetwork: String,
        IgnoreCollision: bool,
    }
}

go_struct! {
    /// Mirrors `DNSConfig` in api/resources.go.
    DNSConfig {
        Servers: Vec<String>,
        Searches: Vec<String>,
        Options: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `CNIConfig` in api/resources.go.
    CNIConfig {
        Args: BTreeMap<String, String>,
    }
}

go_struct! {
    /// Mirrors `NetworkResource` in api/resources.go.
    NetworkResource {
        Mode: String,
        Device: String,
        CIDR: String,
        IP: String,
        DNS: Option<DNSConfig>,
        ReservedPorts: Vec<Port>,
        DynamicPorts: Vec<Port>,
        Hostname: String,
        MBits: Option<i64>,
        CNI: Option<CNIConfig>,
    }
}

go_struct! {
    /// Mirrors `NodeDeviceResource` in api/resources.go (Node.NodeResources.Devices).
    NodeDeviceResource {
        Vendor: String,
        Type: String,
        Name: String,
        Instances: Vec<Option<NodeDevice>>,
        Attributes: BTreeMap<String, Option<Attribute>>,
    }
}

go_struct! {
    /// Mirrors `NodeDevice` in api/resources.go.
    NodeDevice {
        ID: String,
        Healthy: bool,
        HealthDescription: String,
        Locality: Option<NodeDeviceLocality>,
    }
}

go_struct! {
    /// Mirrors `Attribute` in api/resources.go (JSON names from its tags).
    Attribute {
        #[serde(rename = "Float")]
        FloatVal: Option<f64>,
        #[serde(rename = "Int")]
        IntVal: Option<i64>,
        #[serde(rename = "String")]
        StringVal: Option<String>,
        #[serde(rename = "Bool")]
        BoolVal: Option<bool>,
        Unit: String,
    }
}

go_struct! {
    /// Mirrors `NodeDeviceLocality` in api/resources.go.
    NodeDeviceLocality {
        PciBusID: String,
    }
}

go_struct! {
    /// Mirrors `RequestedDevice` in api/resources.go.
    RequestedDevice {
        Name: String,
        Count: Option<u64>,
        Constraints: Vec<Option<Constraint>>,
        Affinities: Vec<Option<Affinity>>,
    }
}

go_struct! {
    /// Mirrors `Constraint` in api/constraint.go.
    Constraint {
        LTarget: String,
        RTarget: String,
        Operand: String,
    }
}

go_struct! {
    /// Mirrors `CSIMountOptions` in api/csi.go (`ExtraKeysHCL` is `json:"-"`).
    CSIMountOptions {
        FSType: String,
        MountFlags: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `ScalingPolicy` in api/scaling.go.
    ScalingPolicy {
        Min: Option<i64>,
        Max: Option<i64>,
        Policy: BTreeMap<String, Value>,
        Enabled: Option<bool>,
        Type: String,
        ID: String,
        Namespace: String,
        Target: BTreeMap<String, String>,
        CreateIndex: u64,
        ModifyIndex: u64,
    }
}
