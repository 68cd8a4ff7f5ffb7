//! What a cluster of one answers to Nomad's cluster endpoints: the agent is its only
//! member and server (`/v1/agent/members`, `/v1/agent/servers`), joins nothing
//! (`/v1/agent/join` answers `num_joined: 0` with the reason, as a Nomad server that could
//! not reach the address does), forgets no one (`/v1/agent/force-leave`), is its own Raft
//! configuration and runs with Nomad's default scheduler configuration. `/v1/system/gc`
//! collects every finished allocation and dead job; `/v1/scaling/policies` lists none (no autoscaler
//! policies are kept).

use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde_json::json;

use super::routes::Routes;
use super::{ApiError, AppState, with_index};
use crate::acl::Level;
use crate::acl::check::{Need, NsFrom};

/// The address the agent names as its server RPC address (Nomad's default port).
const SERVER_ADDR: &str = "127.0.0.1:4647";

pub(super) fn routes() -> Routes {
    Routes::new()
        .on("GET", "/v1/agent/members", members, |_| {
            Need::Node(Level::Read)
        })
        .on("GET", "/v1/agent/servers", servers, |_| {
            Need::Agent(Level::Read)
        })
        .on("POST PUT", "/v1/agent/servers", set_servers, |_| {
            Need::Agent(Level::Write)
        })
        .on("POST PUT", "/v1/agent/join", join, |_| {
            Need::Agent(Level::Write)
        })
        .on("POST PUT", "/v1/agent/force-leave", force_leave, |_| {
            Need::Agent(Level::Write)
        })
        .on(
            "GET",
            "/v1/operator/raft/configuration",
            raft_configuration,
            |_| Need::Operator(Level::Read),
        )
        .on(
            "GET",
            "/v1/operator/scheduler/configuration",
            scheduler_configuration,
            |_| Need::Operator(Level::Read),
        )
        .on("POST PUT", "/v1/system/gc", system_gc, |_| Need::Management)
        .on(
            "POST PUT",
            "/v1/system/reconcile/summaries",
            reconcile_summaries,
            |_| Need::Management,
        )
        // `Scaling.ListPolicies`: `list-scaling-policies`, or `list-jobs` and `read-job`.
        .on("GET", "/v1/scaling/policies", scaling_policies, |_| {
            Need::Ns(
                &["list-scaling-policies", "list-jobs+read-job"],
                NsFrom::List,
            )
        })
        .on("GET", "/v1/scaling/policy/{id}", scaling_policy, |_| {
            Need::Ns(
                &["read-scaling-policy", "list-jobs+read-job"],
                NsFrom::Query,
            )
        })
}

/// `GET /v1/agent/members`: Nomad's `ServerMembers` with this agent as the one member.
async fn members(State(agent): State<AppState>) -> Response {
    let n = agent.node();
    with_index(
        agent.index(),
        &json!({
            "ServerName": n.name, "ServerRegion": n.region, "ServerDC": n.datacenter,
            "Members": [{
                "Name": format!("{}.{}", n.name, n.region), "Addr": "127.0.0.1", "Port": 4648,
                "Tags": {
                    "role": "nomad", "region": n.region, "dc": n.datacenter, "build": env!("CARGO_PKG_VERSION"),
                    "port": "4647", "bootstrap": "1", "expect": "1", "raft_vsn": "3", "id": n.id,
                },
                "Status": "alive", "ProtocolMin": 1, "ProtocolMax": 5, "ProtocolCur": 2,
                "DelegateMin": 2, "DelegateMax": 5, "DelegateCur": 4,
            }],
        }),
    )
}

/// `GET /v1/agent/servers`: the servers the client talks to, itself.
async fn servers(State(agent): State<AppState>) -> Response {
    with_index(agent.index(), &[SERVER_ADDR])
}

/// `PUT /v1/agent/servers?address=`: a single node's client has only itself to talk to.
async fn set_servers() -> ApiError {
    ApiError::bad_request(
        "this agent is its own server: it takes no other server addresses (address)",
    )
}

/// `POST /v1/agent/join?address=`: Nomad's `joinResult`. A single node forms no cluster:
/// nothing is joined, and the error says so.
async fn join(Query(q): Query<Vec<(String, String)>>) -> Result<Response, ApiError> {
    let addrs: Vec<String> = q
        .into_iter()
        .filter(|(k, _)| k == "address")
        .map(|(_, v)| v)
        .collect();
    if addrs.is_empty() {
        return Err(ApiError::bad_request(
            "address: missing (the servers to join)",
        ));
    }
    Ok(with_index(
        0,
        &json!({
            "num_joined": 0,
            "error": format!(
                "{} error(s) occurred: this agent runs as a single node and joins no cluster ({})",
                addrs.len(),
                addrs.join(", ")
            ),
        }),
    ))
}

/// `POST /v1/agent/force-leave?node=`: there is no other member to remove; Nomad answers
/// 200 with an empty body for a name it does not know, and so does this agent.
async fn force_leave(State(agent): State<AppState>) -> Response {
    empty(agent.index())
}

/// 200 with no body and the write meta header Go's client parses (`X-Nomad-Index`), as
/// Nomad answers a write that returns nothing.
fn empty(index: u64) -> Response {
    let mut r = axum::response::IntoResponse::into_response(());
    r.headers_mut()
        .insert("X-Nomad-Index", axum::http::HeaderValue::from(index));
    r
}

/// `GET /v1/operator/raft/configuration`: Nomad's `RaftConfiguration`, this agent the one
/// voter and leader.
async fn raft_configuration(State(agent): State<AppState>) -> Response {
    let n = agent.node();
    let index = agent.index();
    with_index(
        index,
        &json!({
            "Servers": [{
                "ID": n.id, "Node": format!("{}.{}", n.name, n.region), "Address": SERVER_ADDR,
                "Leader": true, "Voter": true, "RaftProtocol": "3",
            }],
            "Index": index,
        }),
    )
}

/// `GET /v1/operator/scheduler/configuration`: Nomad's defaults, which this agent's
/// placement follows (binpack, no preemption of service or batch jobs, no memory
/// oversubscription).
async fn scheduler_configuration(State(agent): State<AppState>) -> Response {
    let index = agent.index();
    with_index(
        index,
        &json!({
            "SchedulerConfig": {
                "SchedulerAlgorithm": "binpack",
                "PreemptionConfig": {
                    "SystemSchedulerEnabled": true, "SysBatchSchedulerEnabled": false,
                    "BatchSchedulerEnabled": false, "ServiceSchedulerEnabled": false,
                },
                "MemoryOversubscriptionEnabled": false, "RejectJobRegistration": false,
                "PauseEvalBroker": false, "CreateIndex": 1, "ModifyIndex": 1,
            },
            "Index": index, "LastContact": 0, "KnownLeader": true,
        }),
    )
}

/// `PUT /v1/system/gc`: collect every finished allocation and dead job now.
async fn system_gc(State(agent): State<AppState>) -> Result<Response, ApiError> {
    agent
        .server()
        .system_gc()
        .await
        .map_err(ApiError::internal)?;
    Ok(empty(agent.index()))
}

/// `PUT /v1/system/reconcile/summaries`: job summaries are computed from the allocations
/// on every read, so there is nothing to reconcile.
async fn reconcile_summaries(State(agent): State<AppState>) -> Response {
    empty(agent.index())
}

/// `GET /v1/scaling/policies`: none are kept.
async fn scaling_policies(State(agent): State<AppState>) -> Response {
    with_index(agent.index(), &Vec::<()>::new())
}

async fn scaling_policy(Path(id): Path<String>) -> ApiError {
    ApiError::not_found(format!("scaling policy {id:?} not found"))
}
