//! `/v1/allocations` (`?resources`, `?task_states`) and `/v1/allocation/{id}`.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::json;

use super::{ApiError, AppState, QueryOptions, with_index};
use crate::structs::Allocation;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/allocations", get(list))
        .route("/v1/allocation/{id}", get(read))
        .route("/v1/allocation/{id}/stop", post(stop).put(stop))
}

/// Nomad's AllocListStub.
pub(super) fn stub(a: &Allocation) -> serde_json::Value {
    json!({
        "ID": a.id, "EvalID": a.eval_id, "Name": a.name, "Namespace": a.namespace,
        "NodeID": a.node_id, "NodeName": a.node_name, "JobID": a.job_id, "JobType": a.job.job_type,
        "JobVersion": a.job.state.version, "TaskGroup": a.task_group, "AllocatedResources": null, "DesiredStatus": a.desired_status,
        "DesiredDescription": a.desired_description, "ClientStatus": a.client_status,
        "ClientDescription": a.client_description, "TaskStates": a.task_states,
        "CreateIndex": a.create_index, "ModifyIndex": a.modify_index,
        "CreateTime": a.create_time, "ModifyTime": a.modify_time,
    })
}

/// What `/v1/allocations` adds to or leaves out of its stubs (Nomad's `AllocStubFields`).
#[derive(Debug, serde::Deserialize)]
struct StubFields {
    /// Add each allocation's `AllocatedResources`.
    #[serde(default, deserialize_with = "super::go_bool")]
    resources: bool,
    /// Keep `TaskStates` (default true).
    #[serde(default = "yes", deserialize_with = "super::go_bool")]
    task_states: bool,
}

fn yes() -> bool {
    true
}

async fn list(
    State(agent): State<AppState>,
    Query(q): Query<QueryOptions>,
    Query(fields): Query<StubFields>,
) -> Response {
    let index = q.block(&agent).await;
    let stubs: Vec<_> = agent
        .allocations()
        .iter()
        .filter(|a| q.prefix.as_deref().is_none_or(|p| a.id.starts_with(p)))
        .filter(|a| q.in_namespace(&a.namespace))
        .map(|a| {
            let mut s = stub(a);
            if fields.resources {
                s["AllocatedResources"] = json!(a.allocated_resources);
            }
            if !fields.task_states {
                s["TaskStates"] = serde_json::Value::Null;
            }
            s
        })
        .collect();
    with_index(index, &stubs)
}

async fn read(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let index = q.block(&agent).await;
    let alloc = agent
        .allocation(&id)
        .ok_or_else(|| ApiError::not_found("alloc not found"))?;
    Ok(with_index(index, &alloc))
}

async fn stop(State(agent): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let (eval, index) = agent
        .stop_allocation(&id)
        .ok_or_else(|| ApiError::not_found("alloc not found"))?;
    Ok(with_index(
        index,
        &json!({ "EvalID": eval, "Index": index }),
    ))
}
