//! `api/nodes.go`: the node, its list stub, resources, drivers and events, and the
//! host's stats (`/v1/client/stats`) with its devices'.

use std::collections::BTreeMap;

use super::*;

go_struct! {
    /// Mirrors `Node` in api/nodes.go (GET /v1/node/{id}).
    /// A Nomad client sets `HTTPAddr`, `Resources` (Nomad 1.6's `nomad node status`
    /// dereferences its CPU, MemoryMB and DiskMB), `NodeResources` and `ReservedResources`
    /// (later releases' `nomad node status` dereferences both) on every node.
    Node {
        ID: String,
        Datacenter: String,
        Name: String,
        HTTPAddr: always String,
        TLSEnabled: bool,
        Attributes: BTreeMap<String, String>,
        Resources: always Option<Resources>,
        Reserved: Option<Resources>,
        NodeResources: always Option<NodeResources>,
        ReservedResources: always Option<NodeReservedResources>,
        Links: BTreeMap<String, String>,
        Meta: BTreeMap<String, String>,
        NodeClass: String,
        NodePool: String,
        CgroupParent: String,
        Drain: bool,
        DrainStrategy: Option<DrainStrategy>,
        SchedulingEligibility: String,
        Status: String,
        StatusDescription: String,
        StatusUpdatedAt: i64,
        Events: Vec<Option<NodeEvent>>,
        Drivers: BTreeMap<String, Option<DriverInfo>>,
        HostVolumes: BTreeMap<String, Option<HostVolumeInfo>>,
        GCVolumesOnNodeGC: bool,
        HostNetworks: BTreeMap<String, Option<HostNetworkInfo>>,
        CSIControllerPlugins: BTreeMap<String, Option<CSIInfo>>,
        CSINodePlugins: BTreeMap<String, Option<CSIInfo>>,
        LastDrain: Option<DrainMetadata>,
        CreateIndex: u64,
        ModifyIndex: u64,
        NodeMaxAllocs: i64,
    }
}

go_struct! {
    /// Mirrors `NodeListStub` in api/nodes.go (GET /v1/nodes).
    NodeListStub {
        Address: String,
        ID: String,
        Attributes: BTreeMap<String, String>,
        Datacenter: String,
        Name: String,
        NodeClass: String,
        NodePool: String,
        Version: String,
        Drain: bool,
        SchedulingEligibility: String,
        Status: String,
        StatusDescription: String,
        Drivers: BTreeMap<String, Option<DriverInfo>>,
        NodeResources: Option<NodeResources>,
        ReservedResources: Option<NodeReservedResources>,
        LastDrain: Option<DrainMetadata>,
        CreateIndex: u64,
        ModifyIndex: u64,
    }
}

go_struct! {
    /// Mirrors `DriverInfo` in api/nodes.go.
    DriverInfo {
        Attributes: BTreeMap<String, String>,
        Detected: bool,
        Healthy: bool,
        HealthDescription: String,
        UpdateTime: GoTime,
    }
}

go_struct! {
    /// Mirrors `HostVolumeInfo` in api/nodes.go.
    HostVolumeInfo {
        Path: String,
        ReadOnly: bool,
        ID: String,
    }
}

go_struct! {
    /// Mirrors `HostNetworkInfo` in api/nodes.go.
    HostNetworkInfo {
        Name: String,
        CIDR: String,
        Interface: String,
        ReservedPorts: String,
    }
}

go_struct! {
    /// Mirrors `DrainMetadata` in api/nodes.go (`Status` is `DrainStatus`, a string).
    DrainMetadata {
        StartedAt: GoTime,
        UpdatedAt: GoTime,
        Status: String,
        AccessorID: String,
        Meta: BTreeMap<String, String>,
    }
}

go_struct! {
    /// Mirrors `NodeResources` in api/nodes.go.
    /// Nomad sends its CPU, memory and disk (Go structs, never nil).
    NodeResources {
        Cpu: always NodeCpuResources,
        Memory: always NodeMemoryResources,
        Disk: always NodeDiskResources,
        Networks: Vec<Option<NetworkResource>>,
        Devices: Vec<Option<NodeDeviceResource>>,
        MinDynamicPort: i64,
        MaxDynamicPort: i64,
    }
}

go_struct! {
    /// Mirrors `NodeCpuResources` in api/nodes.go.
    NodeCpuResources {
        CpuShares: i64,
        TotalCpuCores: u16,
        ReservableCpuCores: Vec<u16>,
    }
}

go_struct! {
    /// Mirrors `NodeMemoryResources` in api/nodes.go.
    NodeMemoryResources {
        MemoryMB: i64,
    }
}

go_struct! {
    /// Mirrors `NodeDiskResources` in api/nodes.go.
    NodeDiskResources {
        DiskMB: i64,
    }
}

go_struct! {
    /// Mirrors `NodeReservedResources` in api/nodes.go.
    NodeReservedResources {
        Cpu: NodeReservedCpuResources,
        Memory: NodeReservedMemoryResources,
        Disk: NodeReservedDiskResources,
        Networks: NodeReservedNetworkResources,
    }
}

go_struct! {
    /// Mirrors `NodeReservedCpuResources` in api/nodes.go.
    NodeReservedCpuResources {
        CpuShares: u64,
    }
}

go_struct! {
    /// Mirrors `NodeReservedMemoryResources` in api/nodes.go.
    NodeReservedMemoryResources {
        MemoryMB: u64,
    }
}

go_struct! {
    /// Mirrors `NodeReservedDiskResources` in api/nodes.go.
    NodeReservedDiskResources {
        DiskMB: u64,
    }
}

go_struct! {
    /// Mirrors `NodeReservedNetworkResources` in api/nodes.go.
    NodeReservedNetworkResources {
        ReservedHostPorts: String,
    }
}

go_struct! {
    /// Mirrors `CSITopology` in api/nodes.go.
    CSITopology {
        Segments: BTreeMap<String, String>,
    }
}

go_struct! {
    /// Mirrors `CSINodeInfo` in api/nodes.go.
    CSINodeInfo {
        ID: String,
        MaxVolumes: i64,
        AccessibleTopology: Option<CSITopology>,
        RequiresNodeStageVolume: bool,
        SupportsStats: bool,
        SupportsExpand: bool,
        SupportsCondition: bool,
    }
}

go_struct! {
    /// Mirrors `CSIControllerInfo` in api/nodes.go.
    CSIControllerInfo {
        SupportsCreateDelete: bool,
        SupportsAttachDetach: bool,
        SupportsListVolumes: bool,
        SupportsGetCapacity: bool,
        SupportsCreateDeleteSnapshot: bool,
        SupportsListSnapshots: bool,
        SupportsClone: bool,
        SupportsReadOnlyAttach: bool,
        SupportsExpand: bool,
        SupportsListVolumesAttachedNodes: bool,
        SupportsCondition: bool,
        SupportsGet: bool,
    }
}

go_struct! {
    /// Mirrors `CSIInfo` in api/nodes.go.
    CSIInfo {
        PluginID: String,
        AllocID: String,
        Healthy: bool,
        HealthDescription: String,
        UpdateTime: GoTime,
        RequiresControllerPlugin: bool,
        RequiresTopologies: bool,
        ControllerInfo: Option<CSIControllerInfo>,
        NodeInfo: Option<CSINodeInfo>,
    }
}

go_struct! {
    /// Mirrors `DrainStrategy` in api/nodes.go; embeds `DrainSpec`
    /// (`Deadline time.Duration`, `IgnoreSystemJobs bool`), promoted here.
    DrainStrategy {
        // DrainSpec (embedded)
        Deadline: i64,
        IgnoreSystemJobs: bool,
        ForceDeadline: GoTime,
        StartedAt: GoTime,
    }
}

go_struct! {
    /// Mirrors `NodeEvent` in api/nodes.go.
    NodeEvent {
        Message: String,
        Subsystem: String,
        Details: BTreeMap<String, String>,
        Timestamp: GoTime,
        CreateIndex: u64,
    }
}

go_struct! {
    /// Mirrors `HostStats` in api/nodes.go (GET /v1/client/stats).
    HostStats {
        Memory: Option<HostMemoryStats>,
        CPU: Vec<Option<HostCPUStats>>,
        DiskStats: Vec<Option<HostDiskStats>>,
        AllocDirStats: Option<HostDiskStats>,
        DeviceStats: Vec<Option<DeviceGroupStats>>,
        Uptime: u64,
        CPUTicksConsumed: f64,
    }
}

go_struct! {
    /// Mirrors `HostMemoryStats` in api/nodes.go.
    HostMemoryStats {
        Total: u64,
        Available: u64,
        Used: u64,
        Free: u64,
    }
}

go_struct! {
    /// Mirrors `HostCPUStats` in api/nodes.go.
    HostCPUStats {
        CPU: String,
        User: f64,
        System: f64,
        Idle: f64,
    }
}

go_struct! {
    /// Mirrors `HostDiskStats` in api/nodes.go.
    HostDiskStats {
        Device: String,
        Mountpoint: String,
        Size: u64,
        Used: u64,
        Available: u64,
        UsedPercent: f64,
        InodesUsedPercent: f64,
    }
}

go_struct! {
    /// Mirrors `DeviceGroupStats` in api/nodes.go.
    DeviceGroupStats {
        Vendor: String,
        Type: String,
        Name: String,
        InstanceStats: BTreeMap<String, Option<DeviceStats>>,
    }
}

go_struct! {
    /// Mirrors `DeviceStats` in api/nodes.go.
    DeviceStats {
        Summary: Option<StatValue>,
        Stats: Option<StatObject>,
        Timestamp: GoTime,
    }
}

go_struct! {
    /// Mirrors `StatObject` in api/nodes.go.
    StatObject {
        Nested: BTreeMap<String, Option<StatObject>>,
        Attributes: BTreeMap<String, Option<StatValue>>,
    }
}

go_struct! {
    /// Mirrors `StatValue` in api/nodes.go.
    StatValue {
        FloatNumeratorVal: Option<f64>,
        FloatDenominatorVal: Option<f64>,
        IntNumeratorVal: Option<i64>,
        IntDenominatorVal: Option<i64>,
        StringVal: Option<String>,
        BoolVal: Option<bool>,
        Unit: String,
        Desc: String,
    }
}
