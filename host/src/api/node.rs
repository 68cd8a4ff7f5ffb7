//! `/v1/agent/self`, `/v1/agent/health`, `/v1/nodes`, `/v1/node/{id}`, `/v1/status/leader`,
//! `/v1/status/peers`, `/v1/regions`, and Paddock's own
//! `/v1/components` (each component's world, version hash, grants and load time).

use std::collections::BTreeMap;

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
        "HTTPAddr": agent.http_addr(),
        "NodeResources": node_resources(agent, &n.attributes),
        "Resources": legacy_resources(&n.attributes), "Reserved": legacy_reserved(),
        "ReservedResources": reserved_resources(),
    })
}

/// A fingerprinted attribute as a number (0 if missing).
fn attr(attributes: &BTreeMap<String, String>, key: &str) -> u64 {
    attributes
        .get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Nomad's `NodeResources`: CPU and memory of the host, the data dir's free disk (as
/// Nomad's storage fingerprint counts it), devices, and the dynamic port range.
fn node_resources(agent: &AppState, attributes: &BTreeMap<String, String>) -> serde_json::Value {
    json!({
        "Cpu": {
            "CpuShares": attr(attributes, "cpu.totalcompute"),
            "TotalCpuCores": attr(attributes, "cpu.numcores"),
        },
        "Memory": { "MemoryMB": attr(attributes, "memory.totalbytes") >> 20 },
        "Disk": { "DiskMB": attr(attributes, "unique.storage.bytesfree") >> 20 },
        "Devices": agent.node_devices(),
        "MinDynamicPort": crate::ports::MIN_DYNAMIC,
        "MaxDynamicPort": crate::ports::MAX_DYNAMIC,
    })
}

/// The same totals in Nomad's older `Resources` (which Nomad clients still set, and
/// older `nomad node status` reads).
fn legacy_resources(attributes: &BTreeMap<String, String>) -> serde_json::Value {
    json!({
        "CPU": attr(attributes, "cpu.totalcompute"), "Cores": 0,
        "MemoryMB": attr(attributes, "memory.totalbytes") >> 20, "MemoryMaxMB": 0,
        "DiskMB": attr(attributes, "unique.storage.bytesfree") >> 20,
    })
}

/// Nothing is reserved for the host: the agent config has no `reserved` block.
fn reserved_resources() -> serde_json::Value {
    json!({
        "Cpu": { "CpuShares": 0 }, "Memory": { "MemoryMB": 0 }, "Disk": { "DiskMB": 0 },
        "Networks": { "ReservedHostPorts": "" },
    })
}

/// [`reserved_resources`] in Nomad's older `Resources` shape (`Node.Reserved`).
fn legacy_reserved() -> serde_json::Value {
    json!({ "CPU": 0, "Cores": 0, "MemoryMB": 0, "MemoryMaxMB": 0, "DiskMB": 0 })
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
