//! `/v1/agent/self`, `/v1/agent/health`, `/v1/nodes`, `/v1/node/{id}`, `/v1/status/leader`,
//! `/v1/status/peers`, `/v1/regions`, and Paddock's own
//! `/v1/components` (each component's world, version hash, grants and load time).

use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::get;
use serde_json::json;

use super::{ApiError, AppState, with_index};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/agent/self", get(agent_self))
        .route("/v1/agent/health", get(health))
        .route("/v1/nodes", get(nodes))
        .route("/v1/node/{id}", get(node))
        .route("/v1/node/{id}/allocations", get(node_allocations))
        .route("/v1/components", get(components))
        .route("/v1/status/leader", get(leader))
        .route("/v1/status/peers", get(peers))
        .route("/v1/regions", get(regions))
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
            "stats": { "client": { "node_id": n.id, "known_servers": "", "num_allocations": agent.allocations().len().to_string() } },
        }),
    )
}

async fn health() -> Response {
    with_index(0, &json!({ "client": { "ok": true, "message": "ok" } }))
}

fn node_json(agent: &AppState) -> serde_json::Value {
    let n = agent.node();
    let drivers = agent.driver_infos();
    json!({
        "ID": n.id, "Name": n.name, "Datacenter": n.datacenter, "NodeClass": n.class, "NodePool": "default",
        "Attributes": n.attributes, "Meta": n.meta, "Drivers": drivers, "Events": agent.node_events(), "Status": "ready",
        "SchedulingEligibility": "eligible", "Drain": false,
        "NodeResources": {
            "Cpu": { "CpuShares": n.attributes.get("cpu.totalcompute").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) },
            "Memory": { "MemoryMB": n.attributes.get("memory.totalbytes").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) >> 20 },
            "Devices": agent.node_devices(),
        },
    })
}

async fn nodes(State(agent): State<AppState>) -> Response {
    let n = node_json(&agent);
    let stub = json!({
        "ID": n["ID"], "Name": n["Name"], "Datacenter": n["Datacenter"], "NodeClass": n["NodeClass"],
        "NodePool": "default", "Drivers": n["Drivers"], "Status": "ready", "SchedulingEligibility": "eligible",
        "Drain": false, "Version": env!("CARGO_PKG_VERSION"),
    });
    with_index(agent.index(), &vec![stub])
}

async fn node(State(agent): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    if id != agent.node().id && id != "self" {
        return Err(ApiError::not_found("node not found"));
    }
    Ok(with_index(agent.index(), &node_json(&agent)))
}

/// Every allocation on this node (Nomad returns whole allocations here).
async fn node_allocations(
    State(agent): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if id != agent.node().id && id != "self" {
        return Err(ApiError::not_found("node not found"));
    }
    Ok(with_index(agent.index(), &agent.allocations()))
}

async fn components(State(agent): State<AppState>) -> Response {
    with_index(
        agent.index(),
        &json!({ "Components": agent.components(), "Refused": agent.refusals() }),
    )
}
