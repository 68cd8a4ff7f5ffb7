//! `/v1/agent/self`, `/v1/agent/health`, `/v1/nodes` (`?resources`, `?os`),
//! `/v1/node/{id}` with its `allocations`, `drain`, `eligibility` and `evaluate`,
//! `/v1/status/leader`, `/v1/status/peers`, `/v1/regions`.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde_json::json;

use super::listing::{Key, ListQuery};
use super::routes::Routes;
use super::{ApiError, AppState, QueryOptions, with_index};
use crate::acl::Level;
use crate::acl::check::Need;
use crate::acl::routes::NeedFn;

pub(super) fn routes() -> Routes {
    let node_write: NeedFn = |_| Need::Node(Level::Write);
    Routes::new()
        .on("GET", "/v1/agent/self", agent_self, |_| {
            Need::Agent(Level::Read)
        })
        .on("GET", "/v1/agent/health", health, |_| Need::Open)
        .on("GET", "/v1/nodes", nodes, |_| Need::Node(Level::Read))
        .on("GET", "/v1/node/{id}", node, |_| Need::Node(Level::Read))
        // `node:read`, each allocation kept only with `read-job` in its namespace.
        .on("GET", "/v1/node/{id}/allocations", node_allocations, |_| {
            Need::NodeAllocs
        })
        .on("POST PUT", "/v1/node/{id}/drain", drain, node_write)
        .on(
            "POST PUT",
            "/v1/node/{id}/eligibility",
            eligibility,
            node_write,
        )
        .on("POST PUT", "/v1/node/{id}/evaluate", evaluate, node_write)
        .on("GET", "/v1/status/leader", leader, |_| Need::Open)
        .on("GET", "/v1/status/peers", peers, |_| Need::Open)
        .on("GET", "/v1/regions", regions, |_| Need::Open)
}

/// A single node is its own leader: the address it serves on, as Nomad answers `ip:port`.
async fn leader(State(agent): State<AppState>) -> Response {
    with_index(agent.index(), &"127.0.0.1:4647")
}

async fn peers(State(agent): State<AppState>) -> Response {
    with_index(agent.index(), &["127.0.0.1:4647"])
}

async fn regions(State(agent): State<AppState>) -> Response {
    with_index(agent.index(), &[agent.node().region])
}

async fn agent_self(State(agent): State<AppState>) -> Response {
    let n = agent.node();
    with_index(
        agent.index(),
        &json!({
            "config": { "Datacenter": n.datacenter, "Region": n.region, "NodeName": n.name, "DataDir": agent.data_dir(), "Version": { "Version": env!("CARGO_PKG_VERSION") } },
            "member": { "Name": n.name, "Status": "alive", "Tags": { "region": n.region, "dc": n.datacenter } },
            "stats": { "client": { "node_id": n.id, "known_servers": "", "num_allocations": agent.allocation_count().to_string() } },
        }),
    )
}

async fn health() -> Response {
    with_index(0, &json!({ "client": { "ok": true, "message": "ok" } }))
}

#[derive(Debug, Default, serde::Deserialize)]
struct NodeListQuery {
    /// Add `NodeResources` and `ReservedResources` to each stub.
    #[serde(default, deserialize_with = "super::go_bool")]
    resources: bool,
    /// Add `Attributes` (`os.name` only, as Nomad does) to each stub.
    #[serde(default, deserialize_with = "super::go_bool")]
    os: bool,
}

/// `GET /v1/nodes`: Nomad's `NodeListStub` of the one node.
async fn nodes(
    State(agent): State<AppState>,
    Query(q): Query<QueryOptions>,
    Query(fields): Query<NodeListQuery>,
    Query(lq): Query<ListQuery>,
) -> Result<Response, ApiError> {
    let lister = lq.lister()?;
    let index = q.block(&agent).await;
    let n = agent.node_view();
    if q.prefix.as_deref().is_some_and(|p| !n.id.starts_with(p)) {
        return Ok(with_index(index, &Vec::<()>::new()));
    }
    let mut stub = json!({
        "Address": n.attributes.get("unique.network.ip-address").cloned().unwrap_or_default(),
        "ID": n.id, "Name": n.name, "Datacenter": n.datacenter, "NodeClass": n.node_class,
        "NodePool": n.node_pool, "Version": env!("CARGO_PKG_VERSION"), "Drain": n.drain,
        "SchedulingEligibility": n.scheduling_eligibility, "Status": n.status,
        "StatusDescription": n.status_description, "Drivers": n.drivers,
        "LastDrain": n.last_drain,
        "CreateIndex": n.create_index, "ModifyIndex": n.modify_index,
    });
    // Nomad's stub omits the resources unless asked for them (`omitempty`).
    if fields.resources {
        stub["NodeResources"] = json!(n.node_resources);
        stub["ReservedResources"] = n.reserved_resources.clone();
    }
    if fields.os {
        let os = n.attributes.get("os.name").cloned().unwrap_or_default();
        stub["Attributes"] = json!({ "os.name": os });
    }
    // The filter reads the whole node, as Nomad's does.
    let full = serde_json::to_value(&n).unwrap_or_default();
    let page = lister.page(
        vec![stub],
        |s| Key::Text(s["ID"].as_str().unwrap_or_default().into()),
        |_| full.clone(),
    )?;
    Ok(page.with_token(with_index(index, &page.items)))
}

/// The node named by `id` (its id, a unique prefix of it, or `self`), or a 404.
fn this_node(agent: &AppState, id: &str) -> Result<(), ApiError> {
    let own = agent.node().id;
    if id == own || id == "self" || (id.len() >= 2 && own.starts_with(id)) {
        Ok(())
    } else {
        Err(ApiError::not_found("node not found"))
    }
}

async fn node(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    this_node(&agent, &id)?;
    let index = q.block(&agent).await;
    Ok(with_index(index, &agent.node_view()))
}

/// Nomad's `NodeUpdateDrainRequest`. `DrainSpec: null` cancels a drain.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DrainRequest {
    #[serde(rename = "NodeID", default)]
    node_id: String,
    #[serde(default)]
    drain_spec: Option<crate::agent::DrainSpec>,
    #[serde(default)]
    mark_eligible: bool,
    #[serde(default)]
    meta: Option<std::collections::BTreeMap<String, String>>,
}

/// A node update's answer (Nomad's `NodeDrainUpdateResponse` and
/// `NodeEligibilityUpdateResponse`).
fn node_update_response(u: crate::agent::NodeUpdate) -> Response {
    with_index(
        u.index,
        &json!({
            "EvalIDs": u.eval_ids, "EvalCreateIndex": if u.eval_ids.is_empty() { 0 } else { u.index },
            "NodeModifyIndex": u.index, "Index": u.index, "LastContact": 0, "KnownLeader": true,
        }),
    )
}

fn node_update_error(e: crate::agent::NodeUpdateError) -> ApiError {
    match e {
        crate::agent::NodeUpdateError::Invalid(m) => ApiError::bad_request(m),
        e => ApiError::internal(e),
    }
}

/// The body's `NodeID`, when given, must be the node of the path.
fn body_node(agent: &AppState, path_id: &str, body_id: &str) -> Result<(), ApiError> {
    this_node(agent, path_id)?;
    if !body_id.is_empty() && body_id != agent.node().id && body_id != path_id {
        return Err(ApiError::bad_request(format!(
            "NodeID: {body_id:?} is not the node of the path ({path_id:?})"
        )));
    }
    Ok(())
}

/// `POST /v1/node/{id}/drain`.
async fn drain(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: DrainRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid drain request: {e}")))?;
    body_node(&agent, &id, &req.node_id)?;
    let u = agent
        .server()
        .drain_node(req.drain_spec, req.mark_eligible, req.meta)
        .map_err(node_update_error)?;
    Ok(node_update_response(u))
}

/// `POST /v1/node/{id}/eligibility` with `{"Eligibility": "eligible"|"ineligible"}`.
async fn eligibility(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))?;
    body_node(&agent, &id, v["NodeID"].as_str().unwrap_or_default())?;
    let eligible = match v["Eligibility"].as_str() {
        Some("eligible") => true,
        Some("ineligible") => false,
        other => {
            return Err(ApiError::bad_request(format!(
                "Eligibility: {} is not eligible or ineligible",
                other
                    .map(|o| format!("{o:?}"))
                    .unwrap_or_else(|| "missing".into())
            )));
        }
    };
    let u = agent
        .server()
        .set_eligibility(eligible)
        .map_err(node_update_error)?;
    Ok(node_update_response(u))
}

/// `POST /v1/node/{id}/evaluate`: evaluate every job on the node again.
async fn evaluate(
    State(agent): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    this_node(&agent, &id)?;
    let eval_ids = agent.server().evaluate_node();
    let index = agent.index();
    Ok(with_index(
        index,
        &json!({
            "EvalIDs": eval_ids, "EvalCreateIndex": index, "NodeModifyIndex": index,
            "Index": index, "LastContact": 0, "KnownLeader": true,
        }),
    ))
}

/// Every allocation on this node (Nomad returns whole allocations here).
async fn node_allocations(
    State(agent): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    this_node(&agent, &id)?;
    Ok(with_index(agent.index(), &agent.allocations()))
}
