//! `api/agent.go` (members, servers, join), `api/operator.go` (Raft and scheduler
//! configuration), `api/scaling.go` and `api/jobs.go`'s scale status, `api/deployments.go`,
//! `api/search.go`'s fuzzy search, `api/nodes.go`'s drain, eligibility and evaluate
//! answers, and `api/variables.go`: what a cluster of one answers to Nomad's cluster-level
//! endpoints.

use std::collections::BTreeMap;

use serde_json::Value;

use super::*;

go_struct! {
    /// Mirrors `ServerMembers` in api/agent.go (GET /v1/agent/members).
    ServerMembers {
        ServerName: String,
        ServerRegion: String,
        ServerDC: String,
        Members: Vec<Option<AgentMember>>,
    }
}

/// GET /v1/agent/servers: `Agent().Servers()` decodes a Go `[]string`.
pub type AgentServers = Vec<String>;

go_struct! {
    /// Mirrors `joinResponse` in api/agent.go (PUT /v1/agent/join; JSON names from tags).
    JoinResponse {
        num_joined: i64,
        error: String,
    }
}

go_struct! {
    /// Mirrors `RaftConfiguration` in api/operator.go.
    RaftConfiguration {
        Servers: Vec<Option<RaftServer>>,
        Index: u64,
    }
}

go_struct! {
    /// Mirrors `RaftServer` in api/operator.go.
    RaftServer {
        ID: String,
        Node: String,
        Address: String,
        Leader: bool,
        Voter: bool,
        RaftProtocol: String,
    }
}

go_struct! {
    /// Mirrors `SchedulerConfigurationResponse` in api/operator.go; embeds `QueryMeta`.
    SchedulerConfigurationResponse {
        SchedulerConfig: always Option<SchedulerConfiguration>,
        LastIndex: u64,
        LastContact: i64,
        KnownLeader: bool,
        RequestTime: i64,
        NextToken: String,
    }
}

go_struct! {
    /// Mirrors `SchedulerConfiguration` in api/operator.go.
    SchedulerConfiguration {
        SchedulerAlgorithm: String,
        PreemptionConfig: PreemptionConfig,
        MemoryOversubscriptionEnabled: bool,
        RejectJobRegistration: bool,
        PauseEvalBroker: bool,
        CreateIndex: u64,
        ModifyIndex: u64,
    }
}

go_struct! {
    /// Mirrors `PreemptionConfig` in api/operator.go.
    PreemptionConfig {
        SystemSchedulerEnabled: bool,
        SysBatchSchedulerEnabled: bool,
        BatchSchedulerEnabled: bool,
        ServiceSchedulerEnabled: bool,
    }
}

go_struct! {
    /// Mirrors `ScalingPolicyListStub` in api/scaling.go.
    ScalingPolicyListStub {
        ID: String,
        Enabled: bool,
        Type: String,
        Target: BTreeMap<String, String>,
        CreateIndex: u64,
        ModifyIndex: u64,
    }
}

go_struct! {
    /// Mirrors `JobScaleStatusResponse` in api/jobs.go (GET /v1/job/{id}/scale).
    JobScaleStatusResponse {
        JobID: String,
        Namespace: String,
        JobCreateIndex: u64,
        JobModifyIndex: u64,
        JobStopped: bool,
        TaskGroups: BTreeMap<String, TaskGroupScaleStatus>,
    }
}

go_struct! {
    /// Mirrors `TaskGroupScaleStatus` in api/jobs.go.
    TaskGroupScaleStatus {
        Desired: i64,
        Placed: i64,
        Running: i64,
        Healthy: i64,
        Unhealthy: i64,
        Events: Vec<Option<ScalingEvent>>,
    }
}

go_struct! {
    /// Mirrors `ScalingEvent` in api/scaling.go.
    ScalingEvent {
        Count: Option<i64>,
        PreviousCount: i64,
        Error: bool,
        Message: String,
        Meta: Option<serde_json::Map<String, Value>>,
        EvalID: Option<String>,
        Time: u64,
        CreateIndex: u64,
    }
}

go_struct! {
    /// Mirrors `Deployment` in api/deployments.go.
    Deployment {
        ID: always String,
        Namespace: String,
        JobID: always String,
        JobVersion: always u64,
        JobModifyIndex: u64,
        JobSpecModifyIndex: always u64,
        JobCreateIndex: always u64,
        IsMultiregion: bool,
        TaskGroups: always BTreeMap<String, Option<DeploymentState>>,
        Status: always String,
        StatusDescription: always String,
        CreateIndex: always u64,
        ModifyIndex: always u64,
        CreateTime: i64,
        ModifyTime: i64,
    }
}

go_struct! {
    /// Mirrors `DeploymentState` in api/deployments.go.
    DeploymentState {
        PlacedCanaries: Vec<String>,
        AutoRevert: always bool,
        ProgressDeadline: always i64,
        RequireProgressBy: always GoTime,
        Promoted: always bool,
        DesiredCanaries: always i64,
        DesiredTotal: always i64,
        PlacedAllocs: always i64,
        HealthyAllocs: always i64,
        UnhealthyAllocs: always i64,
    }
}

go_struct! {
    /// Mirrors `DeploymentUpdateResponse` in api/deployments.go; embeds `WriteMeta`.
    DeploymentUpdateResponse {
        EvalID: always String,
        EvalCreateIndex: always u64,
        DeploymentModifyIndex: always u64,
        RevertedJobVersion: Option<u64>,
    }
}

go_struct! {
    /// Mirrors `FuzzySearchResponse` in api/search.go (POST /v1/search/fuzzy); embeds
    /// `QueryMeta`.
    FuzzySearchResponse {
        Matches: BTreeMap<String, Vec<FuzzyMatch>>,
        Truncations: BTreeMap<String, bool>,
        LastIndex: u64,
        LastContact: i64,
        KnownLeader: bool,
    }
}

go_struct! {
    /// Mirrors `FuzzyMatch` in api/search.go.
    FuzzyMatch {
        ID: String,
        Scope: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `NodeDrainUpdateResponse` in api/nodes.go; embeds `WriteMeta`.
    NodeDrainUpdateResponse {
        NodeModifyIndex: u64,
        EvalIDs: Vec<String>,
        EvalCreateIndex: u64,
        LastIndex: u64,
        RequestTime: i64,
    }
}

go_struct! {
    /// Mirrors `NodeEligibilityUpdateResponse` in api/nodes.go; embeds `WriteMeta`.
    NodeEligibilityUpdateResponse {
        NodeModifyIndex: u64,
        EvalIDs: Vec<String>,
        EvalCreateIndex: u64,
        LastIndex: u64,
        RequestTime: i64,
    }
}

go_struct! {
    /// Mirrors `nodeEvalResponse` in api/nodes.go (`Nodes().ForceEvaluate`).
    NodeEvalResponse {
        EvalID: String,
    }
}

go_struct! {
    /// Mirrors `Variable` in api/variables.go (`CreateTime`/`ModifyTime` are `int64`).
    Variable {
        Namespace: String,
        Path: always String,
        CreateIndex: u64,
        ModifyIndex: u64,
        CreateTime: i64,
        ModifyTime: i64,
        Items: BTreeMap<String, String>,
        Lock: Option<Value>,
    }
}

go_struct! {
    /// Mirrors `VariableMetadata` in api/variables.go (GET /v1/vars).
    VariableMetadata {
        Namespace: String,
        Path: always String,
        CreateIndex: u64,
        ModifyIndex: u64,
        CreateTime: i64,
        ModifyTime: i64,
        Lock: Option<Value>,
    }
}
