//! Nomad API JSON (`{"Job": {...}}`) into the typed model. A small reader walks the JSON so
//! every error carries the exact path of the field; `null` counts as absent, as Nomad's
//! own tools send nulls for unset fields.

use std::collections::BTreeSet;

use serde_json::Value;

use super::*;

mod device;
pub(crate) mod group;
mod obj;
mod stored;
mod submission;
mod task;

use group::group_from_value;
use obj::Obj;

type R<T> = Result<T, JobspecError>;

/// Server-set fields of a job: accepted and ignored (the agent sets its own).
const IGNORED_JOB: &[&str] = &[
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
    "VersionTag",
];

/// A job's cluster-only blocks: nothing on one node acts on them, but they are part of
/// the job, so they are kept as given and come back when the job is read.
const KEPT_JOB: &[&str] = &[
    "AllAtOnce",
    "NodePool",
    "Constraints",
    "Affinities",
    "Spreads",
    "Update",
    "Multiregion",
    "Reschedule",
    "Migrate",
    "UI",
];

/// A register request (`PUT /v1/jobs`, Nomad's `JobRegisterRequest`): the job and the
/// options that apply on one node.
#[derive(Debug, Clone)]
pub struct RegisterRequest {
    /// The job.
    pub job: Job,
    /// `EnforceIndex` with its `JobModifyIndex`: register only if the job's modify index is
    /// this one (0: only if the job does not exist).
    pub enforce_index: Option<u64>,
    /// `PreserveCounts`: keep the registered job's group counts.
    pub preserve_counts: bool,
    /// `Submission`: the job file's source and variables, kept with the job's version.
    pub submission: Option<crate::jobspec::submission::JobSubmission>,
}

/// Parse a register request body: `{"Job": {...}}` with Nomad's `EnforceIndex`,
/// `JobModifyIndex`, `PreserveCounts` and `Submission`. Its other fields are accepted and
/// do not apply on one node: `PolicyOverride` (Sentinel), `EvalPriority` (evaluations are
/// immediate), and the write request's `Namespace`, `Region`, `SecretID` (the token
/// travels in a header) and `IdempotencyToken`.
pub fn parse_register_request(body: &[u8]) -> R<RegisterRequest> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| JobspecError::new("body", format!("invalid JSON: {e}")))?;
    let mut top = Obj::new("body".into(), &v)?;
    let job = top
        .get("Job")
        .filter(|j| !j.is_null())
        .ok_or_else(|| JobspecError::new("Job", "missing required field"))?;
    let enforce = top.boolean("EnforceIndex")?.unwrap_or(false);
    let modify_index = top.uint("JobModifyIndex", u64::MAX)?.unwrap_or(0);
    let preserve_counts = top.boolean("PreserveCounts")?.unwrap_or(false);
    let submission = submission::submission_from_value(top.get("Submission"))?;
    top.finish(&[
        "PolicyOverride",
        "EvalPriority",
        "Namespace",
        "Region",
        "SecretID",
        "IdempotencyToken",
    ])?;
    Ok(RegisterRequest {
        job: job_from_value(job)?,
        enforce_index: enforce.then_some(modify_index),
        preserve_counts,
        submission,
    })
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
    names::job_id(&id).map_err(|m| JobspecError::new("Job.ID", m))?;
    let name = o
        .string("Name")?
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| id.clone());
    names::job_name(&name).map_err(|m| JobspecError::new("Job.Name", m))?;
    let job_type = job_type_from(o.string("Type")?.as_deref())?;
    let priority = o.uint("Priority", 100)?.unwrap_or(50) as i32;
    if priority < 1 {
        return Err(JobspecError::new(
            "Job.Priority",
            "must be between 1 and 100",
        ));
    }
    // An empty namespace is the default one, as Nomad's Canonicalize makes it.
    let namespace = o
        .string("Namespace")?
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into());
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
    let stop = o.boolean("Stop")?.unwrap_or(false);
    let periodic = periodic_from(o.object("Periodic")?)?;
    let parameterized_job = parameterized_from(o.object("ParameterizedJob")?)?;
    launch_kinds_allowed(job_type, periodic.is_some(), parameterized_job.is_some())?;
    let groups_v = o.array("TaskGroups")?;
    if groups_v.is_empty() {
        return Err(JobspecError::new(
            "Job.TaskGroups",
            "a job needs at least one task group",
        ));
    }
    let mut kept = o.kept(KEPT_JOB);
    o.finish(IGNORED_JOB)?;
    let task_groups = groups_from(groups_v, job_type, &kept)?;
    stored::always_sent(job_type, &mut kept);
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
        periodic,
        parameterized_job,
        stop,
        parent_id: String::new(),
        dispatched: false,
        dispatch_idempotency_token: String::new(),
        payload: Vec::new(),
        state: JobState::default(),
        kept,
    })
}

/// `Job.Type`: service (the default), batch, system or sysbatch.
fn job_type_from(t: Option<&str>) -> R<JobType> {
    Ok(match t {
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
    })
}

/// Only batch and sysbatch jobs are periodic or parameterized, and not both.
fn launch_kinds_allowed(job_type: JobType, periodic: bool, parameterized: bool) -> R<()> {
    if periodic || parameterized {
        let what = if periodic {
            "Periodic"
        } else {
            "ParameterizedJob"
        };
        if !job_type.runs_to_completion() {
            return Err(JobspecError::new(
                format!("Job.{what}"),
                format!(
                    "only batch and sysbatch jobs can be {}, this one is {}",
                    if periodic {
                        "periodic"
                    } else {
                        "parameterized"
                    },
                    job_type.as_str()
                ),
            ));
        }
        if periodic && parameterized {
            return Err(JobspecError::new(
                "Job.Periodic",
                "a job cannot be both periodic and parameterized",
            ));
        }
    }
    Ok(())
}

/// `Job.TaskGroups`, each with a name of its own.
fn groups_from(groups: Vec<&Value>, job_type: JobType, job_kept: &Kept) -> R<Vec<TaskGroup>> {
    let mut task_groups = Vec::new();
    let mut names = BTreeSet::new();
    for (i, g) in groups.into_iter().enumerate() {
        let group = group_from_value(&format!("Job.TaskGroups[{i}]"), g, job_type, job_kept)?;
        if !names.insert(group.name.clone()) {
            return Err(JobspecError::new(
                format!("Job.TaskGroups[{i}].Name"),
                format!("duplicate group name {:?}", group.name),
            ));
        }
        task_groups.push(group);
    }
    Ok(task_groups)
}

/// A `Periodic` object: its expressions (`Spec`, a string or a list, and `Specs`) parse in
/// its time zone.
fn periodic_from(o: Option<Obj<'_>>) -> R<Option<PeriodicConfig>> {
    let Some(mut o) = o else { return Ok(None) };
    let path = o.path.clone();
    let enabled = o.boolean("Enabled")?.unwrap_or(true);
    let mut specs = Vec::new();
    match o.get("Spec") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.is_empty() => {}
        Some(Value::String(s)) => specs.push(s.clone()),
        Some(Value::Array(a)) => {
            for (i, v) in a.iter().enumerate() {
                specs.push(v.as_str().map(str::to_string).ok_or_else(|| {
                    JobspecError::new(format!("{path}.Spec[{i}]"), "expected a string")
                })?);
            }
        }
        Some(_) => {
            return Err(JobspecError::new(
                format!("{path}.Spec"),
                "expected a cron expression or a list of them",
            ));
        }
    }
    for (i, v) in o.array("Specs")?.into_iter().enumerate() {
        let s = v
            .as_str()
            .ok_or_else(|| JobspecError::new(format!("{path}.Specs[{i}]"), "expected a string"))?;
        if !specs.iter().any(|x| x == s) {
            specs.push(s.to_string());
        }
    }
    if let Some(t) = o.string("SpecType")?
        && t != "cron"
    {
        return Err(JobspecError::new(
            format!("{path}.SpecType"),
            format!("{t:?} is not a spec type (only \"cron\")"),
        ));
    }
    let prohibit_overlap = o.boolean("ProhibitOverlap")?.unwrap_or(false);
    let time_zone = o
        .string("TimeZone")?
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "UTC".into());
    o.finish(&[])?;
    crate::cron::Schedule::parse(&specs, &time_zone).map_err(|e| {
        let field = match e {
            crate::cron::CronError::TimeZone(_) => "TimeZone",
            _ => "Spec",
        };
        JobspecError::new(format!("{path}.{field}"), e.to_string())
    })?;
    Ok(Some(PeriodicConfig {
        enabled,
        specs,
        prohibit_overlap,
        time_zone,
    }))
}

/// A `ParameterizedJob` object.
fn parameterized_from(o: Option<Obj<'_>>) -> R<Option<ParameterizedJobConfig>> {
    let Some(mut o) = o else { return Ok(None) };
    let path = o.path.clone();
    let payload = o.string("Payload")?.unwrap_or_else(|| "optional".into());
    if !matches!(payload.as_str(), "optional" | "required" | "forbidden") {
        return Err(JobspecError::new(
            format!("{path}.Payload"),
            format!("{payload:?} is not one of optional, required, forbidden"),
        ));
    }
    let mut keys = |field: &'static str| -> R<Vec<String>> {
        o.array(field)?
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str().map(str::to_string).ok_or_else(|| {
                    JobspecError::new(format!("{path}.{field}[{i}]"), "expected a string")
                })
            })
            .collect()
    };
    let meta_required = keys("MetaRequired")?;
    let meta_optional = keys("MetaOptional")?;
    o.finish(&[])?;
    Ok(Some(ParameterizedJobConfig {
        payload,
        meta_required,
        meta_optional,
    }))
}

#[cfg(test)]
mod tests;
