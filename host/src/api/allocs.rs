//! `/v1/allocations` (`?resources`, `?task_states`, Nomad's paging `?per_page` and
//! `?next_token`) and `/v1/allocation/{id}`.

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

/// Nomad's paging of list endpoints: at most `per_page` items, starting at `next_token`;
/// the token of the next page comes back in `X-Nomad-NextToken`.
#[derive(Debug, serde::Deserialize)]
struct Paging {
    #[serde(default)]
    per_page: Option<usize>,
    #[serde(default)]
    next_token: Option<String>,
}

/// An allocation's place in the list as Nomad's paginator orders it: by ID under a
/// `prefix` (token `ID`), else by create index then ID (token `CreateIndex.ID`).
fn page_key(create_index: u64, id: &str, by_id: bool) -> (u64, String) {
    if by_id {
        (0, id.to_string())
    } else {
        (create_index, id.to_string())
    }
}

fn token_key(token: &str, by_id: bool) -> (u64, String) {
    if by_id {
        return (0, token.to_string());
    }
    match token.split_once('.') {
        Some((index, id)) if index.parse::<u64>().is_ok() => {
            (index.parse().unwrap_or(0), id.to_string())
        }
        _ => (0, token.to_string()),
    }
}

async fn list(
    State(agent): State<AppState>,
    Query(q): Query<QueryOptions>,
    Query(fields): Query<StubFields>,
    Query(paging): Query<Paging>,
) -> Response {
    let index = q.block(&agent).await;
    let by_id = q.prefix.is_some();
    let mut stubs: Vec<((u64, String), serde_json::Value)> = agent.visit_allocations(|a| {
        if !q.prefix.as_deref().is_none_or(|p| a.id.starts_with(p)) || !q.in_namespace(&a.namespace)
        {
            return None;
        }
        let mut s = stub(a);
        if fields.resources {
            s["AllocatedResources"] = json!(a.allocated_resources);
        }
        if !fields.task_states {
            s["TaskStates"] = serde_json::Value::Null;
        }
        Some((page_key(a.create_index, &a.id, by_id), s))
    });
    if by_id {
        stubs.sort_by(|a, b| a.0.cmp(&b.0));
    }
    if let Some(token) = paging.next_token.as_deref().filter(|t| !t.is_empty()) {
        let from = token_key(token, by_id);
        stubs.retain(|(k, _)| *k >= from);
    }
    let mut next = None;
    if let Some(n) = paging.per_page.filter(|n| *n > 0)
        && stubs.len() > n
    {
        let (k, _) = &stubs[n];
        next = Some(if by_id {
            k.1.clone()
        } else {
            format!("{}.{}", k.0, k.1)
        });
        stubs.truncate(n);
    }
    let page: Vec<serde_json::Value> = stubs.into_iter().map(|(_, s)| s).collect();
    let mut r = with_index(index, &page);
    if let Some(t) = next
        && let Ok(v) = axum::http::HeaderValue::from_str(&t)
    {
        r.headers_mut().insert("X-Nomad-NextToken", v);
    }
    r
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
