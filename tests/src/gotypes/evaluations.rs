//! `api/evaluations.go`: evaluations and their stubs.

use std::collections::BTreeMap;

use super::*;

go_struct! {
    /// Mirrors `Evaluation` in api/evaluations.go (GET /v1/evaluations,
    /// /v1/evaluation/{id}, /v1/job/{id}/evaluations).
    Evaluation {
        ID: String,
        Priority: i64,
        Type: String,
        TriggeredBy: String,
        Namespace: String,
        JobID: String,
        JobModifyIndex: u64,
        NodeID: String,
        NodeModifyIndex: u64,
        DeploymentID: String,
        Status: String,
        StatusDescription: String,
        Wait: i64,
        WaitUntil: GoTime,
        NextEval: String,
        PreviousEval: String,
        BlockedEval: String,
        RelatedEvals: Vec<Option<EvaluationStub>>,
        FailedTGAllocs: BTreeMap<String, Option<AllocationMetric>>,
        PlanAnnotations: Option<PlanAnnotations>,
        ClassEligibility: BTreeMap<String, bool>,
        EscapedComputedClass: bool,
        QuotaLimitReached: String,
        AnnotatePlan: bool,
        QueuedAllocations: BTreeMap<String, i64>,
        SnapshotIndex: u64,
        CreateIndex: u64,
        ModifyIndex: u64,
        CreateTime: i64,
        ModifyTime: i64,
    }
}

go_struct! {
    /// Mirrors `EvaluationStub` in api/evaluations.go.
    EvaluationStub {
        ID: String,
        Priority: i64,
        Type: String,
        TriggeredBy: String,
        Namespace: String,
        JobID: String,
        NodeID: String,
        DeploymentID: String,
        Status: String,
        StatusDescription: String,
        WaitUntil: GoTime,
        NextEval: String,
        PreviousEval: String,
        BlockedEval: String,
        CreateIndex: u64,
        ModifyIndex: u64,
        CreateTime: i64,
        ModifyTime: i64,
    }
}

go_struct! {
    /// Mirrors `EvalCountResponse` in api/evaluations.go (GET /v1/evaluations/count);
    /// embeds `QueryMeta`.
    EvalCountResponse {
        Count: always i64,
        LastIndex: u64,
        LastContact: i64,
        KnownLeader: bool,
    }
}
