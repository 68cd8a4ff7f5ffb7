//! A job's scale (`GET|POST /v1/job/{id}/scale`, what `nomad job scale` uses) and the
//! deployments endpoints. A single node runs no deployment watcher: registering a job
//! replaces its allocations at once (see `server/plan.rs`), so there is never a deployment,
//! and these endpoints say so as Nomad does for a job without one: an empty list, `null`
//! for a job's latest deployment, 404 for a deployment id (and no allocations for one).

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde_json::{Value, json};

use super::jobs::{register_refused, register_response};
use super::routes::Routes;
use super::{ApiError, AppState, QueryOptions, with_index};
use crate::acl::check::{Need, NsFrom, READ_JOB};
use crate::acl::routes::NeedFn;
use crate::agent::RegisterOptions;
use crate::structs::ClientStatus;

pub(super) fn routes() -> Routes {
    let read_job: NeedFn = |_| Need::Ns(READ_JOB, NsFrom::Query);
    Routes::new()
        .on("GET", "/v1/job/{id}/scale", status, |_| {
            Need::Ns(&["read-job-scaling", "read-job"], NsFrom::Query)
        })
        .on("POST PUT", "/v1/job/{id}/scale", scale, |_| {
            Need::Ns(&["scale-job", "submit-job"], NsFrom::Query)
        })
        .on("GET", "/v1/deployments", deployments, |_| {
            Need::Ns(READ_JOB, NsFrom::List)
        })
        .on("GET", "/v1/job/{id}/deployments", job_deployments, read_job)
        .on("GET", "/v1/job/{id}/deployment", job_deployment, read_job)
        .on("GET", "/v1/deployment/{id}", deployment, read_job)
        .on(
            "GET",
            "/v1/deployment/allocations/{id}",
            deployment_allocations,
            read_job,
        )
        // `nomad/deployment_endpoint.go`: each operation `submit-job | <op>-deployment`
        // (Nomad has no `run-deployment`). There are no deployments on one node yet: each
        // answers that the deployment is not found, once the token may ask.
        .on(
            "POST PUT",
            "/v1/deployment/fail/{id}",
            deployment_op,
            |_| Need::Ns(&["submit-job", "fail-deployment"], NsFrom::Query),
        )
        .on(
            "POST PUT",
            "/v1/deployment/pause/{id}",
            deployment_op,
            |_| Need::Ns(&["submit-job", "pause-deployment"], NsFrom::Query),
        )
        .on(
            "POST PUT",
            "/v1/deployment/promote/{id}",
            deployment_op,
            |_| Need::Ns(&["submit-job", "promote-deployment"], NsFrom::Query),
        )
        .on(
            "POST PUT",
            "/v1/deployment/unblock/{id}",
            deployment_op,
            |_| Need::Ns(&["submit-job", "unblock-deployment"], NsFrom::Query),
        )
        .on(
            "POST PUT",
            "/v1/deployment/cancel/{id}",
            deployment_op,
            |_| Need::Ns(&["submit-job", "cancel-deployment"], NsFrom::Query),
        )
        .on("POST PUT", "/v1/deployment/run/{id}", deployment_op, |_| {
            Need::Ns(&["submit-job"], NsFrom::Query)
        })
        .on(
            "POST PUT",
            "/v1/deployment/allocation-health/{id}",
            deployment_op,
            |_| {
                Need::Ns(
                    &["submit-job", "set-alloc-health-deployment"],
                    NsFrom::Query,
                )
            },
        )
}

/// An operation on a deployment: none exists here.
async fn deployment_op(Path(id): Path<String>) -> ApiError {
    ApiError::not_found(format!("deployment {id:?} not found"))
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

/// `GET /v1/deployments`: none.
async fn deployments(State(agent): State<AppState>, Query(q): Query<QueryOptions>) -> Response {
    let index = q.block(&agent).await;
    with_index(index, &Vec::<()>::new())
}

/// `GET /v1/job/{id}/deployments`: none (404 for an unknown job).
async fn job_deployments(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let (index, _, _) = q.job(&agent, &id).await?;
    Ok(with_index(index, &Vec::<()>::new()))
}

/// `GET /v1/job/{id}/deployment`: the latest deployment, `null` (as Nomad answers for a
/// job without one).
async fn job_deployment(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let (index, _, _) = q.job(&agent, &id).await?;
    Ok(with_index(index, &Value::Null))
}

/// `GET /v1/deployment/allocations/{id}`: the allocations of a deployment, none (Nomad
/// answers an empty list for a deployment id it does not know).
async fn deployment_allocations(State(agent): State<AppState>) -> Response {
    with_index(agent.index(), &Vec::<()>::new())
}

/// `GET /v1/deployment/{id}`: there are none to find.
async fn deployment(Path(id): Path<String>) -> ApiError {
    ApiError::not_found(format!("deployment {id:?} not found"))
}
