//! `api/jobs.go`: jobs, their summaries and list stubs, and the answers of the job
//! endpoints (register, deregister, validate, plan, versions, dispatch, ...).

use std::collections::BTreeMap;

use super::*;

go_struct! {
    /// Mirrors `Job` in api/jobs.go (GET /v1/job/{id}, POST /v1/jobs/parse, Allocation.Job).
    /// Nomad's server canonicalizes a job, so its scalars are never nil; `nomad job status`
    /// dereferences ID, Name, SubmitTime, Type, Priority, Namespace, Status and Stop,
    /// `nomad alloc status` Version.
    Job {
        Region: always Option<String>,
        Namespace: always Option<String>,
        ID: always Option<String>,
        Name: always Option<String>,
        Type: always Option<String>,
        Priority: always Option<i64>,
        AllAtOnce: Option<bool>,
        Datacenters: Vec<String>,
        NodePool: Option<String>,
        Constraints: Vec<Option<Constraint>>,
        Affinities: Vec<Option<Affinity>>,
        TaskGroups: Vec<Option<TaskGroup>>,
        Update: Option<UpdateStrategy>,
        Multiregion: Option<Multiregion>,
        Spreads: Vec<Option<Spread>>,
        Periodic: Option<PeriodicConfig>,
        ParameterizedJob: Option<ParameterizedJobConfig>,
        Reschedule: Option<ReschedulePolicy>,
        Migrate: Option<MigrateStrategy>,
        Meta: BTreeMap<String, String>,
        UI: Option<JobUIConfig>,
        Stop: always Option<bool>,
        ParentID: Option<String>,
        Dispatched: bool,
        DispatchIdempotencyToken: Option<String>,
        Payload: GoBytes,
        ConsulNamespace: Option<String>,
        VaultNamespace: Option<String>,
        NomadTokenID: Option<String>,
        Status: always Option<String>,
        StatusDescription: Option<String>,
        Stable: Option<bool>,
        Version: always Option<u64>,
        SubmitTime: always Option<i64>,
        CreateIndex: always Option<u64>,
        ModifyIndex: always Option<u64>,
        JobModifyIndex: always Option<u64>,
        VersionTag: Option<JobVersionTag>,
    }
}

go_struct! {
    /// Mirrors `UpdateStrategy` in api/jobs.go.
    UpdateStrategy {
        Stagger: Option<i64>,
        MaxParallel: Option<i64>,
        HealthCheck: Option<String>,
        MinHealthyTime: Option<i64>,
        HealthyDeadline: Option<i64>,
        ProgressDeadline: Option<i64>,
        Canary: Option<i64>,
        AutoRevert: Option<bool>,
        AutoPromote: Option<bool>,
    }
}

go_struct! {
    /// Mirrors `Multiregion` in api/jobs.go.
    Multiregion {
        Strategy: Option<MultiregionStrategy>,
        Regions: Vec<Option<MultiregionRegion>>,
    }
}

go_struct! {
    /// Mirrors `MultiregionStrategy` in api/jobs.go.
    MultiregionStrategy {
        MaxParallel: Option<i64>,
        OnFailure: Option<String>,
    }
}

go_struct! {
    /// Mirrors `MultiregionRegion` in api/jobs.go.
    MultiregionRegion {
        Name: String,
        Count: Option<i64>,
        Datacenters: Vec<String>,
        NodePool: String,
        Meta: BTreeMap<String, String>,
    }
}

go_struct! {
    /// Mirrors `PeriodicConfig` in api/jobs.go (current form: `Spec *string`,
    /// `Specs []string`; older releases had `Spec interface{}`).
    PeriodicConfig {
        Enabled: Option<bool>,
        Spec: Option<String>,
        Specs: Vec<String>,
        // `PeriodicConfig.Next` dereferences it.
        SpecType: always Option<String>,
        ProhibitOverlap: Option<bool>,
        TimeZone: Option<String>,
    }
}

go_struct! {
    /// Mirrors `ParameterizedJobConfig` in api/jobs.go.
    ParameterizedJobConfig {
        Payload: String,
        MetaRequired: Vec<String>,
        MetaOptional: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `JobUIConfig` in api/jobs.go.
    JobUIConfig {
        Description: String,
        Links: Vec<Option<JobUILink>>,
    }
}

go_struct! {
    /// Mirrors `JobUILink` in api/jobs.go.
    JobUILink {
        Label: String,
        URL: String,
    }
}

go_struct! {
    /// Mirrors `JobVersionTag` in api/jobs.go.
    JobVersionTag {
        Name: String,
        Description: String,
        TaggedTime: i64,
    }
}

go_struct! {
    /// Mirrors `JobSummary` in api/jobs.go (GET /v1/job/{id}/summary, JobListStub.JobSummary).
    JobSummary {
        JobID: String,
        Namespace: String,
        Summary: BTreeMap<String, TaskGroupSummary>,
        Children: Option<JobChildrenSummary>,
        CreateIndex: u64,
        ModifyIndex: u64,
    }
}

go_struct! {
    /// Mirrors `JobChildrenSummary` in api/jobs.go.
    JobChildrenSummary {
        Pending: i64,
        Running: i64,
        Dead: i64,
    }
}

go_struct! {
    /// Mirrors `TaskGroupSummary` in api/jobs.go.
    TaskGroupSummary {
        Queued: i64,
        Complete: i64,
        Failed: i64,
        Running: i64,
        Starting: i64,
        Lost: i64,
        Unknown: i64,
    }
}

go_struct! {
    /// Mirrors `JobListStub` in api/jobs.go (GET /v1/jobs).
    JobListStub {
        ID: String,
        ParentID: String,
        Name: String,
        Namespace: String,
        Datacenters: Vec<String>,
        Type: String,
        Priority: i64,
        Periodic: bool,
        ParameterizedJob: bool,
        Stop: bool,
        Status: String,
        StatusDescription: String,
        JobSummary: Option<JobSummary>,
        CreateIndex: u64,
        ModifyIndex: u64,
        JobModifyIndex: u64,
        SubmitTime: i64,
        Meta: BTreeMap<String, String>,
    }
}

go_struct! {
    /// Mirrors `JobRegisterResponse` in api/jobs.go (POST/PUT /v1/jobs and
    /// /v1/job/{id}); embeds `QueryMeta` (api/api.go), whose fields follow.
    JobRegisterResponse {
        EvalID: String,
        EvalCreateIndex: u64,
        JobModifyIndex: u64,
        Warnings: String,
        // QueryMeta (embedded)
        LastIndex: u64,
        LastContact: i64,
        KnownLeader: bool,
        RequestTime: i64,
        NextToken: String,
    }
}

go_struct! {
    /// Mirrors `JobDeregisterResponse` in api/jobs.go (DELETE /v1/job/{id});
    /// embeds `QueryMeta` (api/api.go).
    JobDeregisterResponse {
        EvalID: String,
        EvalCreateIndex: u64,
        JobModifyIndex: u64,
        // QueryMeta (embedded)
        LastIndex: u64,
        LastContact: i64,
        KnownLeader: bool,
        RequestTime: i64,
        NextToken: String,
    }
}

go_struct! {
    /// Mirrors `JobValidateResponse` in api/jobs.go (POST /v1/validate/job).
    JobValidateResponse {
        DriverConfigValidated: bool,
        ValidationErrors: Vec<String>,
        Error: String,
        Warnings: String,
    }
}

go_struct! {
    /// Mirrors `PlanAnnotations` in api/jobs.go (Evaluation.PlanAnnotations).
    PlanAnnotations {
        DesiredTGUpdates: BTreeMap<String, Option<DesiredUpdates>>,
        PreemptedAllocs: Vec<Option<AllocationListStub>>,
    }
}

go_struct! {
    /// Mirrors `DesiredUpdates` in api/jobs.go.
    DesiredUpdates {
        Ignore: u64,
        Place: u64,
        Migrate: u64,
        Stop: u64,
        InPlaceUpdate: u64,
        DestructiveUpdate: u64,
        Canary: u64,
        Preemptions: u64,
    }
}

go_struct! {
    /// Mirrors `JobVersionsResponse` in api/jobs.go (GET /v1/job/{id}/versions);
    /// embeds `QueryMeta`.
    JobVersionsResponse {
        Versions: Vec<Option<Job>>,
        Diffs: Vec<Option<JobDiff>>,
        // QueryMeta (embedded)
        LastIndex: u64,
        LastContact: i64,
        KnownLeader: bool,
        RequestTime: i64,
        NextToken: String,
    }
}

go_struct! {
    /// Mirrors `JobPlanResponse` in api/jobs.go (PUT /v1/job/{id}/plan).
    JobPlanResponse {
        JobModifyIndex: u64,
        CreatedEvals: Vec<Option<Evaluation>>,
        Diff: Option<JobDiff>,
        Annotations: Option<PlanAnnotations>,
        FailedTGAllocs: BTreeMap<String, Option<AllocationMetric>>,
        NextPeriodicLaunch: GoTime,
        Warnings: String,
    }
}

go_struct! {
    /// Mirrors `JobDiff` in api/jobs.go.
    JobDiff {
        Type: String,
        ID: String,
        Fields: Vec<Option<FieldDiff>>,
        Objects: Vec<Option<ObjectDiff>>,
        TaskGroups: Vec<Option<TaskGroupDiff>>,
    }
}

go_struct! {
    /// Mirrors `TaskGroupDiff` in api/jobs.go.
    TaskGroupDiff {
        Type: String,
        Name: String,
        Fields: Vec<Option<FieldDiff>>,
        Objects: Vec<Option<ObjectDiff>>,
        Tasks: Vec<Option<TaskDiff>>,
        Updates: BTreeMap<String, u64>,
    }
}

go_struct! {
    /// Mirrors `TaskDiff` in api/jobs.go.
    TaskDiff {
        Type: String,
        Name: String,
        Fields: Vec<Option<FieldDiff>>,
        Objects: Vec<Option<ObjectDiff>>,
        Annotations: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `FieldDiff` in api/jobs.go.
    FieldDiff {
        Type: String,
        Name: String,
        Old: String,
        New: String,
        Annotations: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `ObjectDiff` in api/jobs.go.
    ObjectDiff {
        Type: String,
        Name: String,
        Fields: Vec<Option<FieldDiff>>,
        Objects: Vec<Option<ObjectDiff>>,
    }
}

go_struct! {
    /// Mirrors `JobDispatchResponse` in api/jobs.go (PUT /v1/job/{id}/dispatch); embeds
    /// `WriteMeta`.
    JobDispatchResponse {
        DispatchedJobID: String,
        EvalID: String,
        EvalCreateIndex: u64,
        JobCreateIndex: u64,
        // WriteMeta (embedded)
        LastIndex: u64,
        RequestTime: i64,
    }
}

go_struct! {
    /// Mirrors `JobStabilityResponse` in api/jobs.go (PUT /v1/job/{id}/stable); embeds
    /// `WriteMeta`.
    JobStabilityResponse {
        JobModifyIndex: u64,
        // WriteMeta (embedded)
        LastIndex: u64,
        RequestTime: i64,
    }
}

go_struct! {
    /// Mirrors `periodicForceResponse` in api/jobs.go (PUT /v1/job/{id}/periodic/force).
    PeriodicForceResponse {
        EvalID: String,
    }
}

go_struct! {
    /// Mirrors `JobSubmission` in api/jobs.go (GET /v1/job/{id}/submission, which
    /// `Jobs.Submission` decodes into; the server's Namespace, JobID, Version and
    /// JobModifyIndex are not in it).
    JobSubmission {
        Source: String,
        Format: String,
        VariableFlags: BTreeMap<String, String>,
        Variables: String,
    }
}
