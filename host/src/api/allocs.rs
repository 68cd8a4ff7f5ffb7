//! `/v1/allocations` (`?resources`, `?task_states`, Nomad's paging `?per_page` and
//! `?next_token`) and `/v1/allocation/{id}`.

use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde_json::json;

use super::routes::Routes;
use super::{ApiError, AppState, QueryOptions, with_index};
use crate::acl::check::{Need, NsFrom, READ_JOB};
use crate::structs::Allocation;

pub(super) fn routes() -> Routes {
    Routes::new()
        // Nomad's `Alloc.List`: `read-job`, across namespaces filtered per allocation.
        .on("GET", "/v1/allocations", list, |_| {
            Need::Ns(READ_JOB, NsFrom::List)
        })
        // `Alloc.GetAlloc`: `read-job` in the allocation's namespace.
        .on("GET", "/v1/allocation/{id}", read, |a| {
            Need::Ns(READ_JOB, NsFrom::Alloc(a.param("id")))
        })
        // `Alloc.Stop`: `alloc-lifecycle`.
        .on("POST PUT", "/v1/allocation/{id}/stop", stop, |a| {
            Need::Ns(&["alloc-lifecycle"], NsFrom::Alloc(a.param("id")))
        })
}

/// Nomad's AllocListStub, borrowed from the allocation: serialized as it is read, with
/// no tree of JSON values in between.
#[derive(serde::Serialize)]
#[serde(rename_all = "PascalCase")]
struct Stub<'a> {
    #[serde(rename = "ID")]
    id: &'a str,
    #[serde(rename = "EvalID")]
    eval_id: &'a str,
    name: &'a str,
    namespace: &'a str,
    #[serde(rename = "NodeID")]
    node_id: &'a str,
    node_name: &'a str,
    #[serde(rename = "JobID")]
    job_id: &'a str,
    job_type: &'a crate::jobspec::JobType,
    job_version: u64,
    task_group: &'a str,
    /// Left out unless asked for (`?resources=true`), as Nomad's `omitempty` leaves it.
    #[serde(skip_serializing_if = "Option::is_none")]
    allocated_resources: Option<&'a crate::structs::AllocatedResources>,
    desired_status: &'a crate::structs::DesiredStatus,
    desired_description: &'a str,
    client_status: &'a crate::structs::ClientStatus,
    client_description: &'a str,
    task_states: Option<&'a std::collections::BTreeMap<String, crate::structs::TaskState>>,
    desired_transition: &'a crate::structs::DesiredTransition,
    #[serde(rename = "FollowupEvalID")]
    followup_eval_id: &'a str,
    next_allocation: &'a str,
    reschedule_tracker: Option<&'a crate::structs::RescheduleTracker>,
    deployment_status: Option<&'a crate::structs::AllocDeploymentStatus>,
    create_index: u64,
    modify_index: u64,
    create_time: u64,
    modify_time: u64,
}

impl<'a> Stub<'a> {
    fn of(a: &'a Allocation, fields: &StubFields) -> Self {
        Self {
            id: &a.id,
            eval_id: &a.eval_id,
            name: &a.name,
            namespace: &a.namespace,
            node_id: &a.node_id,
            node_name: &a.node_name,
            job_id: &a.job_id,
            job_type: &a.job.job_type,
            job_version: a.job.state.version,
            task_group: &a.task_group,
            allocated_resources: fields.resources.then_some(&a.allocated_resources),
            desired_status: &a.desired_status,
            desired_description: &a.desired_description,
            client_status: &a.client_status,
            client_description: &a.client_description,
            task_states: fields.task_states.then_some(&a.task_states),
            desired_transition: &a.lineage.desired_transition,
            followup_eval_id: &a.lineage.followup_eval_id,
            next_allocation: &a.lineage.next_allocation,
            reschedule_tracker: a.lineage.reschedule_tracker.as_ref(),
            deployment_status: a.lineage.deployment_status.as_ref(),
            create_index: a.create_index,
            modify_index: a.modify_index,
            create_time: a.create_time,
            modify_time: a.modify_time,
        }
    }
}

/// Nomad's AllocListStub.
pub(super) fn stub(a: &Allocation) -> serde_json::Value {
    serde_json::to_value(Stub::of(
        a,
        &StubFields {
            resources: false,
            task_states: true,
        },
    ))
    .expect("stubs serialize")
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
    let from = paging
        .next_token
        .as_deref()
        .filter(|t| !t.is_empty())
        .map(|t| token_key(t, by_id));
    let per_page = paging.per_page.filter(|n| *n > 0);
    // The page is chosen from the keys alone; only its allocations are serialized.
    let (stubs, next) = if by_id {
        let mut stubs: Vec<(u64, String)> = agent.visit_allocations(|a| {
            (q.prefix.as_deref().is_none_or(|p| a.id.starts_with(p))
                && q.in_namespace(&a.namespace))
            .then(|| page_key(a.create_index, &a.id, by_id))
        });
        stubs.sort();
        if let Some(from) = &from {
            stubs.retain(|k| k >= from);
        }
        let next = per_page
            .filter(|n| stubs.len() > *n)
            .map(|n| stubs.split_off(n).swap_remove(0).1);
        (stubs, next)
    } else {
        // Without a prefix the agent's list index gives the page as a range.
        let (stubs, next) =
            agent
                .client()
                .allocation_page(from.as_ref(), |ns| q.in_namespace(ns), per_page);
        (stubs, next.map(|(index, id)| format!("{index}.{id}")))
    };
    let mut body = Vec::with_capacity(stubs.len() * 512 + 2);
    body.push(b'[');
    for (_, id) in &stubs {
        // One that was garbage-collected since its key was read is left out.
        agent.peek_allocation(id, |a| {
            if body.len() > 1 {
                body.push(b',');
            }
            serde_json::to_writer(&mut body, &Stub::of(a, &fields)).expect("stubs serialize");
        });
    }
    body.push(b']');
    let mut r = with_index(index, &());
    *r.body_mut() = axum::body::Body::from(body);
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
        .server()
        .stop_allocation(&id)
        .ok_or_else(|| ApiError::not_found("alloc not found"))?;
    Ok(with_index(
        index,
        &json!({ "EvalID": eval, "Index": index }),
    ))
}
