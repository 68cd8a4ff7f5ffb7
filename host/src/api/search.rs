//! `POST|PUT /v1/search` (prefix search, which the `nomad` CLI uses to expand short ids)
//! and `/v1/client/gc` (collect every finished allocation).

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::{ApiError, AppState, with_index};

/// Most matches returned per context (Nomad's truncation limit).
const MAX_MATCHES: usize = 20;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/search", post(search).put(search))
        .route("/v1/client/gc", get(gc_all).post(gc_all).put(gc_all))
}

/// `{"Prefix": "ab", "Context": "allocs"|"jobs"|"nodes"|"evals"|"all"}` →
/// `{"Matches": {context: [ids]}, "Truncations": {context: bool}}`.
async fn search(State(agent): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let v: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))?;
    let prefix = v["Prefix"].as_str().unwrap_or_default();
    let context = v["Context"].as_str().unwrap_or("all");
    let contexts: &[&str] = match context {
        "all" => &["allocs", "evals", "jobs", "nodes"],
        "allocs" => &["allocs"],
        "evals" => &["evals"],
        "jobs" => &["jobs"],
        "nodes" => &["nodes"],
        other => {
            return Err(ApiError::bad_request(format!(
                "Context: {other:?} is not one of all, allocs, evals, jobs, nodes"
            )));
        }
    };
    let (mut matches, mut truncations) = (serde_json::Map::new(), serde_json::Map::new());
    for ctx in contexts {
        let mut ids: Vec<String> = match *ctx {
            "allocs" => agent.allocations().into_iter().map(|a| a.id).collect(),
            "evals" => agent.evals().list("").into_iter().map(|e| e.id).collect(),
            "jobs" => agent.jobs().into_iter().map(|j| j.id).collect(),
            _ => vec![agent.node().id],
        };
        ids.retain(|i| i.starts_with(prefix));
        ids.sort();
        ids.dedup();
        truncations.insert(ctx.to_string(), json!(ids.len() > MAX_MATCHES));
        ids.truncate(MAX_MATCHES);
        matches.insert(ctx.to_string(), json!(ids));
    }
    Ok(with_index(
        agent.index(),
        &json!({ "Matches": matches, "Truncations": truncations }),
    ))
}

/// Collect every finished allocation (Nomad's `nomad system gc` on a client).
async fn gc_all(State(agent): State<AppState>) -> Result<Response, ApiError> {
    agent.gc_all().await.map_err(ApiError::internal)?;
    Ok(with_index(agent.index(), &json!({})))
}
