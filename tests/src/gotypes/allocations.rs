//! `api/allocations.go`: allocations, their list stubs, placement metrics and
//! allocated resources, and the answers of the allocation endpoints.

use std::collections::BTreeMap;

use super::*;

go_struct! {
    /// Mirrors `Allocation` in api/allocations.go (GET /v1/allocation/{id},
    /// GET /v1/node/{id}/allocations). Nomad's scheduler sets `Job`, `Resources`,
    /// `TaskResources`, `AllocatedResources` and `Metrics` on every allocation it places;
    /// `nomad alloc status` dereferences `Job.Version`, `Metrics` (`-verbose`) and
    /// `Resources.DiskMB`, `nomad node status` `Resources.CPU`, `MemoryMB` and `DiskMB`.
    Allocation {
        ID: String,
        Namespace: String,
        EvalID: String,
        Name: String,
        NodeID: String,
        NodeName: String,
        JobID: String,
        Job: always Option<Job>,
        TaskGroup: String,
        Resources: always Option<Resources>,
        TaskResources: always BTreeMap<String, Option<Resources>>,
        AllocatedResources: always Option<AllocatedResources>,
        Services: BTreeMap<String, String>,
        Metrics: always Option<AllocationMetric>,
        DesiredStatus: String,
        DesiredDescription: String,
        DesiredTransition: DesiredTransition,
        ClientStatus: String,
        ClientDescription: String,
        TaskStates: BTreeMap<String, Option<TaskState>>,
        DeploymentID: String,
        DeploymentStatus: Option<AllocDeploymentStatus>,
        FollowupEvalID: String,
        PreviousAllocation: String,
        NextAllocation: String,
        RescheduleTracker: Option<RescheduleTracker>,
        NetworkStatus: Option<AllocNetworkStatus>,
        PreemptedAllocations: Vec<String>,
        PreemptedByAllocation: String,
        CreateIndex: u64,
        ModifyIndex: u64,
        AllocModifyIndex: u64,
        CreateTime: i64,
        ModifyTime: i64,
    }
}

go_struct! {
    /// Mirrors `AllocationMetric` in api/allocations.go.
    AllocationMetric {
        NodesEvaluated: i64,
        NodesFiltered: i64,
        NodesInPool: i64,
        NodePool: String,
        NodesAvailable: BTreeMap<String, i64>,
        ClassFiltered: BTreeMap<String, i64>,
        ConstraintFiltered: BTreeMap<String, i64>,
        NodesExhausted: i64,
        ClassExhausted: BTreeMap<String, i64>,
        DimensionExhausted: BTreeMap<String, i64>,
        QuotaExhausted: Vec<String>,
        ResourcesExhausted: BTreeMap<String, Option<Resources>>,
        Scores: BTreeMap<String, f64>,
        AllocationTime: i64,
        CoalescedFailures: i64,
        ScoreMetaData: Vec<Option<NodeScoreMeta>>,
    }
}

go_struct! {
    /// Mirrors `NodeScoreMeta` in api/allocations.go.
    NodeScoreMeta {
        NodeID: String,
        Scores: BTreeMap<String, f64>,
        NormScore: f64,
    }
}

go_struct! {
    /// Mirrors `AllocationListStub` in api/allocations.go (GET /v1/allocations,
    /// /v1/job/{id}/allocations, /v1/evaluation/{id}/allocations).
    AllocationListStub {
        ID: String,
        EvalID: String,
        Name: String,
        Namespace: String,
        NodeID: String,
        NodeName: String,
        JobID: String,
        JobType: String,
        JobVersion: u64,
        TaskGroup: String,
        AllocatedResources: Option<AllocatedResources>,
        DesiredStatus: String,
        DesiredDescription: String,
        ClientStatus: String,
        ClientDescription: String,
        TaskStates: BTreeMap<String, Option<TaskState>>,
        DeploymentStatus: Option<AllocDeploymentStatus>,
        FollowupEvalID: String,
        NextAllocation: String,
        RescheduleTracker: Option<RescheduleTracker>,
        PreemptedAllocations: Vec<String>,
        PreemptedByAllocation: String,
        CreateIndex: u64,
        ModifyIndex: u64,
        CreateTime: i64,
        ModifyTime: i64,
    }
}

go_struct! {
    /// Mirrors `AllocDeploymentStatus` in api/allocations.go.
    AllocDeploymentStatus {
        Healthy: Option<bool>,
        Timestamp: GoTime,
        Canary: bool,
        ModifyIndex: u64,
    }
}

go_struct! {
    /// Mirrors `AllocNetworkStatus` in api/allocations.go.
    AllocNetworkStatus {
        InterfaceName: String,
        Address: String,
        AddressIPv6: String,
        DNS: Option<DNSConfig>,
    }
}

go_struct! {
    /// Mirrors `AllocatedResources` in api/allocations.go.
    AllocatedResources {
        Tasks: BTreeMap<String, Option<AllocatedTaskResources>>,
        Shared: always AllocatedSharedResources,
    }
}

go_struct! {
    /// Mirrors `AllocatedTaskResources` in api/allocations.go.
    /// Nomad sends every task's CPU and memory (Go structs, never nil; a missing one is
    /// a task Paddock did not account for).
    AllocatedTaskResources {
        Cpu: always AllocatedCpuResources,
        Memory: always AllocatedMemoryResources,
        Networks: Vec<Option<NetworkResource>>,
        Devices: Vec<Option<AllocatedDeviceResource>>,
    }
}

go_struct! {
    /// Mirrors `AllocatedSharedResources` in api/allocations.go.
    AllocatedSharedResources {
        DiskMB: always i64,
        Networks: Vec<Option<NetworkResource>>,
        Ports: Vec<PortMapping>,
    }
}

go_struct! {
    /// Mirrors `PortMapping` in api/allocations.go.
    PortMapping {
        Label: String,
        Value: i64,
        To: i64,
        HostIP: String,
    }
}

go_struct! {
    /// Mirrors `AllocatedCpuResources` in api/allocations.go.
    AllocatedCpuResources {
        CpuShares: i64,
    }
}

go_struct! {
    /// Mirrors `AllocatedMemoryResources` in api/allocations.go.
    AllocatedMemoryResources {
        MemoryMB: i64,
        MemoryMaxMB: i64,
    }
}

go_struct! {
    /// Mirrors `AllocatedDeviceResource` in api/allocations.go.
    AllocatedDeviceResource {
        Vendor: String,
        Type: String,
        Name: String,
        DeviceIDs: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `AllocStopResponse` in api/allocations.go (POST /v1/allocation/{id}/stop);
    /// embeds `WriteMeta` (api/api.go).
    AllocStopResponse {
        EvalID: String,
        // WriteMeta (embedded)
        LastIndex: u64,
        RequestTime: i64,
    }
}

go_struct! {
    /// Mirrors `structs.GenericResponse` (nomad/structs), which `Allocations().Signal`
    /// decodes (POST /v1/client/allocation/{id}/signal): a `WriteMeta`.
    GenericResponse {
        Index: u64,
    }
}

go_struct! {
    /// The `struct{}` that `Allocations().Restart` and `.GC` and `Nodes().GC` decode
    /// (POST /v1/client/allocation/{id}/restart, GET .../gc, /v1/client/gc): any object.
    EmptyResponse {}
}

go_struct! {
    /// Mirrors `RescheduleTracker` in api/allocations.go.
    RescheduleTracker {
        Events: Vec<Option<RescheduleEvent>>,
        LastReschedule: String,
    }
}

go_struct! {
    /// Mirrors `RescheduleEvent` in api/allocations.go.
    RescheduleEvent {
        RescheduleTime: i64,
        PrevAllocID: String,
        PrevNodeID: String,
    }
}

go_struct! {
    /// Mirrors `DesiredTransition` in api/allocations.go.
    DesiredTransition {
        Migrate: Option<bool>,
        Reschedule: Option<bool>,
        ForceReschedule: Option<bool>,
        NoShutdownDelay: Option<bool>,
        MigrateDisablePlacement: Option<bool>,
    }
}

go_struct! {
    /// Mirrors `ExecStreamingIOOperation` in api/allocations.go (JSON names from its tags).
    #[allow(non_snake_case)]
    ExecStreamingIOOperation {
        data: GoBytes,
        close: bool,
    }
}

go_struct! {
    /// Mirrors `ExecStreamingExitResult` in api/allocations.go.
    ExecStreamingExitResult {
        exit_code: i64,
    }
}

go_struct! {
    /// Mirrors `ExecStreamingOutput` in api/allocations.go: one frame `alloc exec` reads
    /// from `/v1/client/allocation/{id}/exec`.
    ExecStreamingOutput {
        stdout: Option<ExecStreamingIOOperation>,
        stderr: Option<ExecStreamingIOOperation>,
        exited: bool,
        result: Option<ExecStreamingExitResult>,
    }
}
