//! `/v1/vars` and `/v1/var/{path}`: Nomad Variables, in Nomad's wire shape. A list shows
//! metadata only; a read, a write and a CAS conflict (409) answer with the whole variable;
//! a delete answers 204 with no body. `?namespace=` picks the namespace (`default` when
//! absent; `*` lists every namespace); a write's body may name its own `Namespace`, which
//! wins, as in Nomad.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::listing::{Key, ListQuery, Sees};
use super::routes::Routes;
use super::{ApiError, AppState, QueryOptions, with_index};
use crate::acl::check::Need;
use crate::agent::{InvalidVariable, Namespaces, VarError, VarWrite};

pub(super) fn routes() -> Routes {
    // `nomad/variables_endpoint.go`: the path's own capability in the namespace (a write:
    // the body's namespace, else the request's).
    Routes::new()
        .on("GET", "/v1/vars", list, |_| Need::VarList)
        .on("GET", "/v1/var/{*path}", read, |a| {
            Need::Variable("read", a.param("path"))
        })
        .on("PUT POST", "/v1/var/{*path}", write, |a| {
            Need::Variable("write", a.param("path"))
        })
        .on("DELETE", "/v1/var/{*path}", delete, |a| {
            Need::Variable("destroy", a.param("path"))
        })
        .on("GET PUT POST DELETE", "/v1/var/", no_path, |a| {
            Need::Variable(
                match a.method {
                    "GET" => "read",
                    "DELETE" => "destroy",
                    _ => "write",
                },
                String::new(),
            )
        })
}

/// `?namespace=` and `?cas=` of a write or delete.
#[derive(Debug, Default, Deserialize)]
struct WriteQuery {
    namespace: Option<String>,
    cas: Option<String>,
}

impl WriteQuery {
    /// `?cas=`, as Nomad parses it: absent or empty is no check.
    fn cas(&self) -> Result<Option<u64>, ApiError> {
        match self.cas.as_deref() {
            None | Some("") => Ok(None),
            Some(c) => c
                .parse()
                .map(Some)
                .map_err(|e| ApiError::bad_request(format!("can not parse cas: {c:?}: {e}"))),
        }
    }

    fn namespace(&self) -> String {
        self.namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into())
    }
}

/// A variable as a write's body gives it; other fields (indexes, times) are ignored, as
/// Nomad ignores them.
#[derive(Debug, Deserialize)]
struct VarBody {
    #[serde(rename = "Namespace", default)]
    namespace: Option<String>,
    #[serde(rename = "Path", default)]
    path: Option<String>,
    #[serde(rename = "Items", default)]
    items: Option<BTreeMap<String, String>>,
}

/// `GET /v1/vars?prefix=&namespace=`: metadata, ordered by namespace then path.
async fn list(
    State(agent): State<AppState>,
    Query(q): Query<QueryOptions>,
    Query(lq): Query<ListQuery>,
    w: Option<axum::Extension<super::acl::Who>>,
) -> Result<Response, ApiError> {
    let lister = lq.lister()?;
    let sees = Sees::of(w.as_ref().map(|w| w.acl()));
    let index = q.block(&agent).await;
    let ns = q.namespace();
    let which = if ns == "*" {
        Namespaces::All
    } else {
        Namespaces::One(&ns)
    };
    let prefix = q.prefix.clone().unwrap_or_default();
    // By `Namespace.Path`, filtered on the metadata listed, as Nomad's are.
    let visible: Vec<_> = agent
        .server()
        .variables(which, &prefix)
        .into_iter()
        .filter(|v| sees.variable(&v.namespace, &v.path))
        .collect();
    let page = lister.page(
        visible,
        |v| Key::namespaced(&v.namespace, &v.path),
        |v| serde_json::to_value(v).unwrap_or_default(),
    )?;
    Ok(page.with_token(with_index(index, &page.items)))
}

/// `/v1/var/` without a path (Nomad's 400).
async fn no_path() -> ApiError {
    ApiError::bad_request("missing variable path")
}

/// `GET /v1/var/{path}`: the variable, or 404 "variable not found".
async fn read(
    State(agent): State<AppState>,
    Path(path): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Response {
    let index = q.block(&agent).await;
    match agent.server().variable(&q.namespace(), &path) {
        Some(v) => with_index(index, &v),
        None => (
            StatusCode::NOT_FOUND,
            index_header(index),
            "variable not found",
        )
            .into_response(),
    }
}

/// `PUT /v1/var/{path}?cas=`: write the variable; answers it as stored.
async fn write(
    State(agent): State<AppState>,
    Path(path): Path<String>,
    Query(q): Query<WriteQuery>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let cas = q.cas()?;
    let body: VarBody = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid variable: {e}")))?;
    let items = body
        .items
        .filter(|i| !i.is_empty())
        .ok_or_else(|| ApiError::bad_request(InvalidVariable::NoItems.to_string()))?;
    if let Some(given) = body.path.filter(|p| !p.is_empty() && *p != path) {
        return Err(ApiError::bad_request(
            InvalidVariable::PathMismatch {
                body: given,
                url: path,
            }
            .to_string(),
        ));
    }
    let namespace = body
        .namespace
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| q.namespace());
    match agent.server().put_variable(VarWrite {
        namespace,
        path,
        items,
        cas,
    }) {
        Ok(v) => Ok(with_index(v.meta.modify_index, &v)),
        Err(e) => refused(e),
    }
}

/// `DELETE /v1/var/{path}?cas=`: 204 with the change index, as Nomad answers.
async fn delete(
    State(agent): State<AppState>,
    Path(path): Path<String>,
    Query(q): Query<WriteQuery>,
) -> Result<Response, ApiError> {
    let cas = q.cas()?;
    match agent.server().delete_variable(&q.namespace(), &path, cas) {
        Ok(index) => Ok((StatusCode::NO_CONTENT, index_header(index)).into_response()),
        Err(e) => refused(e),
    }
}

/// A write or delete that did not happen: a CAS conflict is Nomad's 409 with the variable
/// as it is (only its namespace and path when there is none) and its index; an invalid
/// request a 400 naming the problem.
fn refused(e: VarError) -> Result<Response, ApiError> {
    match e {
        VarError::Conflict {
            namespace,
            path,
            current,
            ..
        } => {
            let (index, body) = match current {
                Some(v) => (
                    v.meta.modify_index,
                    serde_json::to_value(&v).unwrap_or_default(),
                ),
                None => (
                    0,
                    json!({
                        "Namespace": namespace, "Path": path, "CreateIndex": 0, "CreateTime": 0,
                        "ModifyIndex": 0, "ModifyTime": 0, "Items": null,
                    }),
                ),
            };
            Ok((StatusCode::CONFLICT, index_header(index), axum::Json(body)).into_response())
        }
        VarError::Invalid(bad) => Err(ApiError::bad_request(bad.to_string())),
        e @ VarError::State(_) => Err(ApiError::internal(e)),
    }
}

fn index_header(index: u64) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("X-Nomad-Index", HeaderValue::from(index));
    h
}
