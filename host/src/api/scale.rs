//! A job's scale (`GET|POST /v1/job/{id}/scale`, what `nomad job scale` uses).

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde_json::{Value, json};

use super::jobs::{register_refused, register_response};
use super::routes::Routes;
use super::{ApiError, AppState, QueryOptions, with_index};
use crate::acl::check::{Need, NsFrom};
use crate::agent::RegisterOptions;
use crate::structs::ClientStatus;

pub(super) fn routes() -> Routes {
    Routes::new()
        .on("GET", "/v1/job/{id}/scale", status, |_| {
            Need::Ns(&["read-job-scaling", "read-job"], NsFrom::Query)
        })
        .on("POST PUT", "/v1/job/{id}/scale", scale, |_| {
            Need::Ns(&["scale-job", "submit-job"], NsFrom::Query)
        })
}

/// `GET /v1/job/{id}/scale`: Nomad's `JobScaleStatusResponse`.
async fn status(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let (index, ns, job) = q.job(&agent, &id).await?;
    let allocs = agent.server().job_allocations(&ns, &id, false);
    let groups: serde_json::Map<String, Value> = job
        .task_groups
        .iter()
        .map(|g| {
            let mine = || allocs.iter().filter(|a| a.task_group == g.name);
            let placed = mine().filter(|a| !a.is_terminal()).count();
            let running = mine()
                .filter(|a| a.client_status == ClientStatus::Running)
                .count();
            (
                g.name.clone(),
                json!({
                    "Desired": job.placed_count(g), "Placed": placed, "Running": running,
                    "Healthy": running, "Unhealthy": 0, "Events": null,
                }),
            )
        })
        .collect();
    Ok(with_index(
        index,
        &json!({
            "JobID": job.id, "Namespace": job.namespace,
            "JobCreateIndex": job.state.create_index, "JobModifyIndex": job.state.job_modify_index,
            "JobStopped": job.stop, "TaskGroups": groups,
        }),
    ))
}

/// `POST /v1/job/{id}/scale`: Nomad's `ScalingRequest` (`Count`, `Target.Group`,
/// `Message`, `Meta`, `PolicyOverride`, `EnforceIndex`/`JobModifyIndex`): a new version of
/// the job with the group's count changed, registered as any change is. Without `Count`
/// only a scaling event would be recorded, which this agent does not keep: nothing changes
/// and no evaluation is made.
async fn scale(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let v: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))?;
    let (_, _, mut job) = q.job(&agent, &id).await?;
    let group = v["Target"]["Group"]
        .as_str()
        .filter(|g| !g.is_empty())
        .ok_or_else(|| ApiError::bad_request("Target.Group: missing (the task group to scale)"))?
        .to_string();
    let count = match &v["Count"] {
        Value::Null => None,
        c => Some(
            c.as_i64()
                .ok_or_else(|| ApiError::bad_request(format!("Count: {c} is not an integer")))?,
        ),
    };
    let Some(count) = count else {
        return Ok(with_index(
            agent.index(),
            &json!({ "EvalID": "", "EvalCreateIndex": 0, "JobModifyIndex": job.state.job_modify_index, "Warnings": "", "Index": agent.index() }),
        ));
    };
    let count = u32::try_from(count).map_err(|_| {
        ApiError::bad_request(format!("Count: {count} must be between 0 and {}", u32::MAX))
    })?;
    if job.is_parent() {
        return Err(ApiError::bad_request(
            "can't scale a periodic or parameterized job: scale its children",
        ));
    }
    let g = job
        .task_groups
        .iter_mut()
        .find(|g| g.name == group)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "Target.Group: task group {group:?} not found in job {id:?}"
            ))
        })?;
    g.count = count;
    let enforce_index = match (&v["EnforceIndex"], &v["JobModifyIndex"]) {
        (Value::Bool(true), i) => Some(i.as_u64().unwrap_or(0)),
        _ => None,
    };
    let r = agent
        .server()
        .register_job_with(
            job,
            RegisterOptions {
                enforce_index,
                ..Default::default()
            },
        )
        .map_err(register_refused)?;
    Ok(with_index(r.index, &register_response(&r)))
}
