//! Namespaces (`command/agent/namespace_endpoint.go`, `nomad/namespace_endpoint.go`):
//! `/v1/namespaces` (`?prefix=`), `/v1/namespace/{name}` read, create or update, delete,
//! and `/v1/namespace` to create with the name in the body.
//!
//! ACL as Nomad checks them: reading needs any capability in the namespace, the list keeps
//! the namespaces the token holds any in, writing and deleting need a management token.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;

use super::jobs::namespace_refused;
use super::routes::Routes;
use super::{ApiError, AppState, QueryOptions, with_index};
use crate::acl::check::Need;
use crate::structs::Namespace;

pub(super) fn routes() -> Routes {
    Routes::new()
        .on("GET", "/v1/namespaces", list, |_| Need::NamespaceList)
        .on("GET", "/v1/namespace/{name}", read, |a| {
            Need::Namespace(a.param("name"))
        })
        .on("POST PUT", "/v1/namespace/{name}", upsert, |_| {
            Need::Management
        })
        .on("POST PUT", "/v1/namespace", create, |_| Need::Management)
        .on("DELETE", "/v1/namespace/{name}", delete, |_| {
            Need::Management
        })
}

async fn list(State(agent): State<AppState>, Query(q): Query<QueryOptions>) -> Response {
    let index = q.block(&agent).await;
    let prefix = q.prefix.as_deref().unwrap_or("");
    let list: Vec<Namespace> = agent
        .server()
        .namespaces()
        .into_iter()
        .filter(|n| n.name.starts_with(prefix))
        .collect();
    with_index(index, &list)
}

async fn read(
    State(agent): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let index = q.block(&agent).await;
    let ns = agent
        .server()
        .namespace(&name)
        .ok_or_else(|| ApiError::not_found("Namespace not found"))?;
    Ok(with_index(index, &ns))
}

/// A namespace from a request body, or a 400 naming what is wrong with it.
fn body_namespace(body: &Bytes) -> Result<Namespace, ApiError> {
    let v = super::job_ops::body_json(body)?;
    serde_json::from_value(v).map_err(|e| ApiError::bad_request(format!("invalid namespace: {e}")))
}

async fn upsert(
    State(agent): State<AppState>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ns = body_namespace(&body)?;
    if ns.name != name {
        return Err(ApiError::bad_request(
            "Namespace name does not match request path",
        ));
    }
    write(&agent, ns)
}

async fn create(State(agent): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    write(&agent, body_namespace(&body)?)
}

fn write(agent: &AppState, ns: Namespace) -> Result<Response, ApiError> {
    let index = agent
        .server()
        .upsert_namespace(ns)
        .map_err(namespace_refused)?;
    Ok(with_index(index, &()))
}

async fn delete(
    State(agent): State<AppState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let index = agent
        .server()
        .delete_namespace(&name)
        .map_err(namespace_refused)?;
    Ok(with_index(index, &()))
}
