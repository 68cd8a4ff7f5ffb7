//! `api/tasks.go` and `api/task_sched.go`: task groups, tasks and what they hold, task
//! states and events, and resource usage (`/v1/client/allocation/{id}/stats`).

use serde_json::Value;
use std::collections::BTreeMap;

use super::*;

go_struct! {
    /// Mirrors `TaskGroup` in api/tasks.go.
    TaskGroup {
        // `Job.LookupTaskGroup` dereferences every group's name.
        Name: always Option<String>,
        Count: always Option<i64>,
        Constraints: Vec<Option<Constraint>>,
        Affinities: Vec<Option<Affinity>>,
        Tasks: Vec<Option<Task>>,
        Spreads: Vec<Option<Spread>>,
        Volumes: BTreeMap<String, Option<VolumeRequest>>,
        RestartPolicy: Option<RestartPolicy>,
        Disconnect: Option<DisconnectStrategy>,
        ReschedulePolicy: Option<ReschedulePolicy>,
        EphemeralDisk: Option<EphemeralDisk>,
        Update: Option<UpdateStrategy>,
        Migrate: Option<MigrateStrategy>,
        Networks: Vec<Option<NetworkResource>>,
        Meta: BTreeMap<String, String>,
        Services: Vec<Option<Service>>,
        ShutdownDelay: Option<i64>,
        MaxRunDuration: Option<i64>,
        StopAfterClientDisconnect: Option<i64>,
        MaxClientDisconnect: Option<i64>,
        Scaling: Option<ScalingPolicy>,
        Consul: Option<Consul>,
        PreventRescheduleOnLost: Option<bool>,
    }
}

go_struct! {
    /// Mirrors `Task` in api/tasks.go.
    Task {
        Name: String,
        Driver: String,
        User: String,
        Lifecycle: Option<TaskLifecycle>,
        Config: BTreeMap<String, Value>,
        Constraints: Vec<Option<Constraint>>,
        Affinities: Vec<Option<Affinity>>,
        Env: BTreeMap<String, String>,
        Services: Vec<Option<Service>>,
        Resources: Option<Resources>,
        RestartPolicy: Option<RestartPolicy>,
        Meta: BTreeMap<String, String>,
        KillTimeout: Option<i64>,
        LogConfig: Option<LogConfig>,
        Artifacts: Vec<Option<TaskArtifact>>,
        Vault: Option<Vault>,
        Consul: Option<Consul>,
        Templates: Vec<Option<Template>>,
        DispatchPayload: Option<DispatchPayloadConfig>,
        VolumeMounts: Vec<Option<VolumeMount>>,
        CSIPluginConfig: Option<TaskCSIPluginConfig>,
        Leader: bool,
        ShutdownDelay: i64,
        KillSignal: String,
        Kind: String,
        ScalingPolicies: Vec<Option<ScalingPolicy>>,
        Secrets: Vec<Option<Secret>>,
        Identity: Option<WorkloadIdentity>,
        Identities: Vec<Option<WorkloadIdentity>>,
        Actions: Vec<Option<Action>>,
        Schedule: Option<TaskSchedule>,
    }
}

go_struct! {
    /// Mirrors `TaskLifecycle` in api/tasks.go.
    TaskLifecycle {
        Hook: String,
        Sidecar: bool,
    }
}

go_struct! {
    /// Mirrors `RestartPolicy` in api/tasks.go.
    RestartPolicy {
        Interval: Option<i64>,
        Attempts: Option<i64>,
        Delay: Option<i64>,
        Mode: Option<String>,
        RenderTemplates: Option<bool>,
    }
}

go_struct! {
    /// Mirrors `DisconnectStrategy` in api/tasks.go (`Reconcile` is `*ReconcileOption`, a string).
    DisconnectStrategy {
        LostAfter: Option<i64>,
        StopOnClientAfter: Option<i64>,
        Replace: Option<bool>,
        Reconcile: Option<String>,
    }
}

go_struct! {
    /// Mirrors `ReschedulePolicy` in api/tasks.go.
    ReschedulePolicy {
        Attempts: Option<i64>,
        Interval: Option<i64>,
        Delay: Option<i64>,
        DelayFunction: Option<String>,
        MaxDelay: Option<i64>,
        Unlimited: Option<bool>,
    }
}

go_struct! {
    /// Mirrors `Affinity` in api/tasks.go.
    Affinity {
        LTarget: String,
        RTarget: String,
        Operand: String,
        Weight: Option<i8>,
    }
}

go_struct! {
    /// Mirrors `Spread` in api/tasks.go.
    Spread {
        Attribute: String,
        Weight: Option<i8>,
        SpreadTarget: Vec<Option<SpreadTarget>>,
    }
}

go_struct! {
    /// Mirrors `SpreadTarget` in api/tasks.go.
    SpreadTarget {
        Value: String,
        Percent: u8,
    }
}

go_struct! {
    /// Mirrors `EphemeralDisk` in api/tasks.go.
    EphemeralDisk {
        Sticky: Option<bool>,
        Migrate: Option<bool>,
        SizeMB: Option<i64>,
    }
}

go_struct! {
    /// Mirrors `MigrateStrategy` in api/tasks.go.
    MigrateStrategy {
        MaxParallel: Option<i64>,
        HealthCheck: Option<String>,
        MinHealthyTime: Option<i64>,
        HealthyDeadline: Option<i64>,
    }
}

go_struct! {
    /// Mirrors `VolumeRequest` in api/tasks.go (`ExtraKeysHCL` is `json:"-"`).
    VolumeRequest {
        Name: String,
        Type: String,
        Source: String,
        ReadOnly: bool,
        Sticky: bool,
        AccessMode: String,
        AttachmentMode: String,
        MountOptions: Option<CSIMountOptions>,
        PerAlloc: bool,
    }
}

go_struct! {
    /// Mirrors `VolumeMount` in api/tasks.go.
    VolumeMount {
        Volume: Option<String>,
        Destination: Option<String>,
        ReadOnly: Option<bool>,
        PropagationMode: Option<String>,
        SELinuxLabel: Option<String>,
    }
}

go_struct! {
    /// Mirrors `LogConfig` in api/tasks.go.
    LogConfig {
        MaxFiles: Option<i64>,
        MaxFileSizeMB: Option<i64>,
        Enabled: Option<bool>,
        Disabled: Option<bool>,
    }
}

go_struct! {
    /// Mirrors `DispatchPayloadConfig` in api/tasks.go.
    DispatchPayloadConfig {
        File: String,
    }
}

go_struct! {
    /// Mirrors `TaskArtifact` in api/tasks.go.
    TaskArtifact {
        GetterSource: Option<String>,
        GetterOptions: BTreeMap<String, String>,
        GetterHeaders: BTreeMap<String, String>,
        GetterMode: Option<String>,
        GetterInsecure: Option<bool>,
        RelativeDest: Option<String>,
        Chown: bool,
    }
}

go_struct! {
    /// Mirrors `WaitConfig` in api/tasks.go.
    WaitConfig {
        Min: Option<i64>,
        Max: Option<i64>,
    }
}

go_struct! {
    /// Mirrors `ChangeScript` in api/tasks.go.
    ChangeScript {
        Command: Option<String>,
        Args: Vec<String>,
        Timeout: Option<i64>,
        FailOnError: Option<bool>,
        RunOnFirstRender: Option<bool>,
    }
}

go_struct! {
    /// Mirrors `Template` in api/tasks.go.
    Template {
        SourcePath: Option<String>,
        DestPath: Option<String>,
        EmbeddedTmpl: Option<String>,
        ChangeMode: Option<String>,
        ChangeScript: Option<ChangeScript>,
        ChangeSignal: Option<String>,
        Once: Option<bool>,
        Splay: Option<i64>,
        Perms: Option<String>,
        Uid: Option<i64>,
        Gid: Option<i64>,
        LeftDelim: Option<String>,
        RightDelim: Option<String>,
        Envvars: Option<bool>,
        VaultGrace: Option<i64>,
        Wait: Option<WaitConfig>,
        ErrMissingKey: Option<bool>,
    }
}

go_struct! {
    /// Mirrors `Vault` in api/tasks.go.
    Vault {
        Policies: Vec<String>,
        Role: String,
        Namespace: Option<String>,
        Cluster: String,
        Env: Option<bool>,
        DisableFile: Option<bool>,
        ChangeMode: Option<String>,
        ChangeSignal: Option<String>,
        AllowTokenExpiration: Option<bool>,
    }
}

go_struct! {
    /// Mirrors `Secret` in api/tasks.go.
    Secret {
        Name: String,
        Provider: String,
        Path: String,
        Config: BTreeMap<String, Value>,
        Env: BTreeMap<String, String>,
    }
}

go_struct! {
    /// Mirrors `TaskCSIPluginConfig` in api/tasks.go (`Type` is `CSIPluginType`, a string).
    TaskCSIPluginConfig {
        ID: String,
        Type: String,
        MountDir: String,
        StagePublishBaseDir: String,
        HealthTimeout: i64,
    }
}

go_struct! {
    /// Mirrors `WorkloadIdentity` in api/tasks.go.
    WorkloadIdentity {
        Name: String,
        Audience: Vec<String>,
        ChangeMode: String,
        ChangeSignal: String,
        Env: bool,
        File: bool,
        Filepath: String,
        ServiceName: String,
        TTL: i64,
        ExtraClaims: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `Action` in api/tasks.go.
    Action {
        Name: String,
        Command: String,
        Args: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `TaskSchedule` in api/task_sched.go.
    TaskSchedule {
        Cron: Option<TaskScheduleCron>,
    }
}

go_struct! {
    /// Mirrors `TaskScheduleCron` in api/task_sched.go.
    TaskScheduleCron {
        Start: String,
        End: String,
        Timezone: String,
    }
}

go_struct! {
    /// Mirrors `TaskState` in api/tasks.go. (Some releases also carried an
    /// experimental `TaskHandle *TaskHandle`; the current one does not.)
    TaskState {
        State: String,
        Failed: bool,
        Restarts: u64,
        LastRestart: GoTime,
        StartedAt: GoTime,
        FinishedAt: GoTime,
        Events: Vec<Option<TaskEvent>>,
    }
}

go_struct! {
    /// Mirrors `TaskEvent` in api/tasks.go.
    TaskEvent {
        Type: String,
        Time: i64,
        DisplayMessage: String,
        Details: BTreeMap<String, String>,
        Message: String,
        FailsTask: bool,
        RestartReason: String,
        SetupError: String,
        DriverError: String,
        DriverMessage: String,
        ExitCode: i64,
        Signal: i64,
        KillReason: String,
        KillTimeout: i64,
        KillError: String,
        StartDelay: i64,
        DownloadError: String,
        ValidationError: String,
        DiskLimit: i64,
        DiskSize: i64,
        FailedSibling: String,
        VaultError: String,
        TaskSignalReason: String,
        TaskSignal: String,
        GenericSource: String,
    }
}

go_struct! {
    /// Mirrors `MemoryStats` in api/tasks.go.
    MemoryStats {
        RSS: u64,
        Cache: u64,
        Swap: u64,
        Usage: u64,
        MaxUsage: u64,
        KernelUsage: u64,
        KernelMaxUsage: u64,
        Measured: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `CpuStats` in api/tasks.go.
    CpuStats {
        SystemMode: f64,
        UserMode: f64,
        TotalTicks: f64,
        ThrottledPeriods: u64,
        ThrottledTime: u64,
        Percent: f64,
        Measured: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `ResourceUsage` in api/tasks.go.
    ResourceUsage {
        MemoryStats: Option<MemoryStats>,
        CpuStats: Option<CpuStats>,
        DeviceStats: Vec<Option<DeviceGroupStats>>,
    }
}

go_struct! {
    /// Mirrors `TaskResourceUsage` in api/tasks.go.
    TaskResourceUsage {
        ResourceUsage: Option<ResourceUsage>,
        Timestamp: i64,
        Pids: BTreeMap<String, Option<ResourceUsage>>,
    }
}

go_struct! {
    /// Mirrors `AllocResourceUsage` in api/tasks.go (GET /v1/client/allocation/{id}/stats).
    AllocResourceUsage {
        ResourceUsage: Option<ResourceUsage>,
        Tasks: BTreeMap<String, Option<TaskResourceUsage>>,
        Timestamp: i64,
    }
}

go_struct! {
    /// Mirrors `AllocCheckStatus` in api/tasks.go (`AllocCheckStatuses` is a map of them).
    AllocCheckStatus {
        ID: always String,
        Check: String,
        Group: String,
        Mode: String,
        Output: String,
        Service: String,
        Task: String,
        Status: always String,
        StatusCode: i64,
        Timestamp: i64,
    }
}
