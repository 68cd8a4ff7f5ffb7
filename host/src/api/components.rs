//! Paddock's own component endpoints: `GET /v1/components` (every component version, active
//! or draining, and every refused file, with its identity, source, grants, limits, calls,
//! errors and the tasks it serves; the version each current one replaced and the recent
//! history of swaps, refusals, reverts and removals; and, as `Unloaded`, the history of
//! components no longer loaded), `POST /v1/components/reload` (look at the components
//! folders now, for setups where file events are not delivered) and `POST
//! /v1/agent/reload` (re-read the config file's `plugin` and `hook` blocks, as SIGHUP
//! does).

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
