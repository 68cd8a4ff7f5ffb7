//! Paddock's own component endpoints: `GET /v1/components` (every component version, active
//! or draining, and every refused file, with its identity, source, grants, limits, calls,
//! errors and the tasks it serves; the version each current one replaced and the recent
//! history of swaps, refusals, reverts and removals; and, as `Unloaded`, the history of
//! components no longer loaded), `POST /v1/components/reload` (look at the components
//! folders now, for setups where file events are not delivered) and `POST
//! /v1/agent/reload` (re-read the config file's `plugin` and `hook` blocks, as SIGHUP
//! does), `POST /v1/components/pull` (pull a plugin block's source now: `{"Name": …}`) and
//! `POST /v1/components/approve` (let in the version held for approval: `{"Name": …}`).

use axum::extract::State;
use axum::response::Response;
use serde_json::json;

use super::routes::Routes;
use super::{ApiError, AppState, with_index};
use crate::acl::Level;
use crate::acl::check::Need;
use crate::swap::Applied;

pub(super) fn routes() -> Routes {
    // Paddock's own routes (Nomad has none): reading is `agent:read`, acting `agent:write`.
    Routes::new()
        .on("GET", "/v1/components", components, |_| {
            Need::Agent(Level::Read)
        })
        .on("POST PUT", "/v1/components/reload", rescan, |_| {
            Need::Agent(Level::Write)
        })
        .on("POST PUT", "/v1/agent/reload", reload, |_| {
            Need::Agent(Level::Write)
        })
        .on("POST PUT", "/v1/components/pull", pull, |_| {
            Need::Agent(Level::Write)
        })
        .on("POST PUT", "/v1/components/approve", approve, |_| {
            Need::Agent(Level::Write)
        })
}

/// The body of `pull` and `approve`.
#[derive(serde::Deserialize)]
struct NameBody {
    #[serde(rename = "Name")]
    name: String,
}

fn name_of(body: &[u8]) -> Result<String, ApiError> {
    let b: NameBody = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body must be {{\"Name\": \"<plugin block>\"}}: {e}"
        ))
    })?;
    if b.name.is_empty() {
        return Err(ApiError::bad_request("Name: empty"));
    }
    Ok(b.name)
}

/// `POST /v1/components/pull`: pull the plugin block's source now and apply it.
async fn pull(
    State(agent): State<AppState>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let name = name_of(&body)?;
    let a = agent
        .pull_component(&name)
        .await
        .map_err(ApiError::not_found)?;
    Ok(with_index(agent.index(), &applied(name, a)))
}

/// `POST /v1/components/approve`: install the version held for approval.
async fn approve(
    State(agent): State<AppState>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let name = name_of(&body)?;
    let a = agent
        .approve_component(&name)
        .await
        .map_err(ApiError::not_found)?;
    Ok(with_index(agent.index(), &applied(name, a)))
}

async fn components(State(agent): State<AppState>) -> Response {
    with_index(
        agent.index(),
        &json!({
            "Components": agent.components(),
            "Refused": agent.refusals(),
            "Unloaded": agent.unloaded_components(),
        }),
    )
}

/// What a change did, as JSON.
fn applied(what: String, a: Applied) -> serde_json::Value {
    let (outcome, detail) = match a {
        Applied::Unchanged => ("unchanged", String::new()),
        Applied::Loaded(n) => ("loaded", n),
        Applied::Replaced {
            name,
            moved,
            pinned,
        } => (
            "replaced",
            format!("{name}: {moved} task(s) moved, {pinned} left on the old version"),
        ),
        Applied::Refused(r) => ("refused", r),
        Applied::Pending(n) => (
            "pending-approval",
            format!(
                "{n}: it declares more grants than the running version; see `agent component status {n}`, then `agent component approve {n}`"
            ),
        ),
        Applied::Removed(n) => ("unloaded", n.unwrap_or_default()),
    };
    json!({ "Target": what, "Outcome": outcome, "Detail": detail })
}

/// `POST /v1/components/reload`: rescan the folders; answers what changed.
async fn rescan(State(agent): State<AppState>) -> Response {
    let changes: Vec<_> = agent
        .rescan_components()
        .await
        .into_iter()
        .map(|(p, a)| applied(p.display().to_string(), a))
        .collect();
    with_index(agent.index(), &json!({ "Changes": changes }))
}

/// `POST /v1/agent/reload`: re-read the config; a config that does not parse is a 400 and
/// changes nothing.
async fn reload(State(agent): State<AppState>) -> Result<Response, ApiError> {
    let changes: Vec<_> = agent
        .reload_config()
        .await
        .map_err(|e| ApiError::bad_request(format!("config not reloaded: {e}")))?
        .into_iter()
        .map(|(n, a)| applied(n, a))
        .collect();
    Ok(with_index(agent.index(), &json!({ "Changes": changes })))
}
