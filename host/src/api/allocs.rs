//! `/v1/allocations` (`?resources`, `?task_states`, Nomad's list query: `filter`,
//! `per_page`, `next_token`, `reverse`) and `/v1/allocation/{id}`.

use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde_json::json;

use super::listing::{Key, ListQuery, Page, Sees};
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

/// An allocation's place in the list as Nomad's paginator orders it: by ID under a
/// `prefix` (token `ID`), else by create index then ID (token `CreateIndex.ID`).
fn page_key(create_index: u64, id: &str, by_id: bool) -> Key {
    if by_id {
        Key::Text(id.to_string())
    } else {
        Key::IndexId(create_index, id.to_string())
    }
}

fn token_key(token: &str) -> (u64, String) {
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
    Query(lq): Query<ListQuery>,
    w: Option<axum::Extension<super::acl::Who>>,
) -> Result<Response, ApiError> {
    let lister = lq.lister()?;
    let sees = Sees::of(w.as_ref().map(|w| w.acl()));
    let visible = |ns: &str| q.in_namespace(ns) && sees.namespace(ns, READ_JOB);
    let index = q.block(&agent).await;
    let by_id = q.prefix.is_some();
    // The page is chosen from the keys alone; only its allocations are serialized.
    let page = if by_id || !lister.is_plain() {
        let keys: Vec<Key> = agent.visit_allocations(|a| {
            (q.prefix.as_deref().is_none_or(|p| a.id.starts_with(p)) && visible(&a.namespace))
                .then(|| page_key(a.create_index, &a.id, by_id))
        });
        // The filter reads the whole allocation, as Nomad's does.
        let view = |k: &Key| {
            let id = match k {
                Key::Text(id) | Key::IndexId(_, id) => id,
            };
            agent
                .peek_allocation(id, |a| serde_json::to_value(a).unwrap_or_default())
                .unwrap_or_default()
        };
        lister.page(keys, Clone::clone, view)?
    } else {
        // Without a prefix or a filter the agent's list index gives the page as a range.
        let from = Some(lister.next_token())
            .filter(|t| !t.is_empty())
            .map(token_key);
        let (keys, next) =
            agent
                .client()
                .allocation_page(from.as_ref(), visible, lister.per_page());
        Page {
            items: keys
                .into_iter()
                .map(|(i, id)| Key::IndexId(i, id))
                .collect(),
            next: next.map(|(index, id)| format!("{index}.{id}")),
        }
    };
    let mut body = Vec::with_capacity(page.items.len() * 512 + 2);
    body.push(b'[');
    for k in &page.items {
        let (Key::Text(id) | Key::IndexId(_, id)) = k;
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
    Ok(page.with_token(r))
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
