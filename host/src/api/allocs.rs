//! `/v1/allocations` and `/v1/allocation/{id}`.

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
        "JobVersion": a.job.state.version, "TaskGroup": a.task_group, "DesiredStatus": a.desired_status,
        "DesiredDescription": a.desired_description, "ClientStatus": a.client_status,
        "ClientDescription": a.client_description, "TaskStates": a.task_states,
        "CreateIndex": a.create_index, "ModifyIndex": a.modify_index,
        "CreateTime": a.create_time, "ModifyTime": a.modify_time,
    })
}

async fn list(State(agent): State<AppState>, Query(q): Query<QueryOptions>) -> Response {
    let index = q.block(&agent).await;
    let stubs: Vec<_> = agent
        .allocations()
        .iter()
        .filter(|a| q.prefix.as_deref().is_none_or(|p| a.id.starts_with(p)))
        .filter(|a| q.in_namespace(&a.namespace))
        .map(stub)
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
