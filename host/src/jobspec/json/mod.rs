//! Nomad API JSON (`{"Job": {...}}`) into the typed model. A small reader walks the JSON so
//! every error carries the exact path of the field; `null` counts as absent, as Nomad's
//! own tools send nulls for unset fields.

use std::collections::BTreeSet;

use serde_json::Value;

use super::*;

mod group;
mod obj;
mod task;

use group::group_from_value;
use obj::Obj;

type R<T> = Result<T, JobspecError>;

/// Cluster-only or server-side fields accepted and ignored, per object kind.
const IGNORED_JOB: &[&str] = &[
    "Stop",
    "ParentID",
    "Dispatched",
    "DispatchIdempotencyToken",
    "Payload",
    "ConsulToken",
    "ConsulNamespace",
    "VaultToken",
    "VaultNamespace",
    "NomadTokenID",
    "Status",
    "StatusDescription",
    "Stable",
    "Version",
    "SubmitTime",
    "CreateIndex",
    "ModifyIndex",
    "JobModifyIndex",
    "AllAtOnce",
    "NodePool",
    "Constraints",
    "Affinities",
    "Spreads",
    "Update",
    "Multiregion",
    "Periodic",
    "ParameterizedJob",
    "Reschedule",
    "Migrate",
    "UI",
    "VersionTag",
];

/// Parse a register request body: `{"Job": {...}}` (plus Nomad's optional `EnforceIndex`,
/// `JobModifyIndex`, `PolicyOverride`, `PreserveCounts`, `EvalPriority`, `Submission`).
pub fn parse_register_request(body: &[u8]) -> R<Job> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| JobspecError::new("body", format!("invalid JSON: {e}")))?;
    let mut top = Obj::new("body".into(), &v)?;
    let job = top
        .get("Job")
        .ok_or_else(|| JobspecError::new("Job", "missing required field"))?;
    top.finish(&[
        "EnforceIndex",
        "JobModifyIndex",
        "PolicyOverride",
        "PreserveCounts",
        "EvalPriority",
        "Submission",
        "Namespace",
        "Region",
    ])?;
    job_from_value(job)
}

/// Parse a job file in JSON: either `{"Job": {...}}` or the bare job object.
pub fn parse_job_json(body: &[u8]) -> R<Job> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| JobspecError::new("file", format!("invalid JSON: {e}")))?;
    match v.get("Job") {
        Some(j) => job_from_value(j),
        None => job_from_value(&v),
    }
}

pub(super) fn job_from_value(v: &Value) -> R<Job> {
    let mut o = Obj::new("Job".into(), v)?;
    let id = o.required_string("ID")?;
    let name = o.string("Name")?.unwrap_or_else(|| id.clone());
    let job_type = match o.string("Type")?.as_deref() {
        None | Some("service") => JobType::Service,
        Some("batch") => JobType::Batch,
        Some("system") => JobType::System,
        Some("sysbatch") => JobType::Sysbatch,
        Some(other) => {
            return Err(JobspecError::new(
                "Job.Type",
                format!(
                    "unsupported job type {other:?} (expected \"service\", \"batch\", \"system\" or \"sysbatch\")"
                ),
            ));
        }
    };
    let priority = o.uint("Priority", 100)?.unwrap_or(50) as i32;
    if priority < 1 {
        return Err(JobspecError::new(
            "Job.Priority",
            "must be between 1 and 100",
        ));
    }
    let namespace = o.string("Namespace")?.unwrap_or_else(|| "default".into());
    let region = o.string("Region")?.unwrap_or_else(|| "global".into());
    let datacenters = o
        .array("Datacenters")?
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            d.as_str().map(str::to_string).ok_or_else(|| {
                JobspecError::new(format!("Job.Datacenters[{i}]"), "expected a string")
            })
        })
        .collect::<R<Vec<_>>>()?;
    let meta = o.string_map("Meta")?;
    let groups_v = o.array("TaskGroups")?;
    if groups_v.is_empty() {
        return Err(JobspecError::new(
            "Job.TaskGroups",
            "a job needs at least one task group",
        ));
    }
    o.finish(IGNORED_JOB)?;
    let mut task_groups = Vec::new();
    let mut names = BTreeSet::new();
    for (i, g) in groups_v.into_iter().enumerate() {
        let group = group_from_value(&format!("Job.TaskGroups[{i}]"), g, job_type)?;
        if !names.insert(group.name.clone()) {
            return Err(JobspecError::new(
                format!("Job.TaskGroups[{i}].Name"),
                format!("duplicate group name {:?}", group.name),
            ));
        }
        task_groups.push(group);
    }
    Ok(Job {
        id,
        name,
        job_type,
        priority,
        namespace,
        region,
        datacenters,
        meta,
        task_groups,
    })
}

#[cfg(test)]
mod tests;
