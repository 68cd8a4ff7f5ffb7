//! The layer that checks every request against its token when the ACL system is on.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::{AppState, Who, denied};
use crate::acl::check::{Need, NsFrom};
use crate::acl::{Acl, Level};
use crate::api::ApiError;

/// The secret a request carries: `X-Nomad-Token`, else `Authorization: Bearer`.
pub(crate) fn secret_of(h: &axum::http::HeaderMap) -> Option<&str> {
    h.get("X-Nomad-Token")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            h.get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
        })
        .filter(|s| !s.is_empty())
}

/// The layer: resolve the token, check what the endpoint needs, refuse with 403.
pub(crate) async fn enforce(
    agent: AppState,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let need = crate::acl::check::need(req.method().as_str(), req.uri().path());
    if need == Need::Open {
        // As in Nomad, these never look at the token.
        return next.run(req).await;
    }
    let store = agent.acl();
    let secret = secret_of(req.headers()).map(str::to_string);
    let Some(caller) = store.resolve(secret.as_deref()) else {
        let msg = if secret.as_deref().is_some_and(|s| store.expired(s)) {
            "ACL token expired"
        } else {
            "ACL token not found"
        };
        return ApiError(StatusCode::FORBIDDEN, msg.into()).into_response();
    };
    let acl = Arc::new(store.acl_of(&caller));
    let query: Vec<(String, String)> =
        axum::extract::Query::<Vec<(String, String)>>::try_from_uri(req.uri())
            .map(|q| q.0)
            .unwrap_or_default();
    let q_ns = query
        .iter()
        .find(|(k, _)| k == "namespace")
        .map(|(_, v)| v.clone())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "default".into());
    let mut req = req;
    let ok = match &need {
        Need::Open | Need::AclApi => true,
        Need::Management => acl.is_management(),
        Need::Node(l) => acl.allow_node(*l),
        Need::NodeAllocs => acl.allow_node(Level::Read) && acl.allow_ns("*", "read-job"),
        Need::Agent(l) => acl.allow_agent(*l),
        Need::Operator(l) => acl.allow_operator(*l),
        Need::Ns(caps, from) => {
            let ns = match from {
                NsFrom::Query => {
                    // A list without `?namespace=` shows every namespace here; for a token
                    // that may not see them all it shows `default`, Nomad's default.
                    if !query.iter().any(|(k, _)| k == "namespace")
                        && !caps.iter().any(|c| acl.allow_ns("*", c))
                    {
                        add_default_namespace(&mut req);
                    }
                    q_ns.clone()
                }
                NsFrom::Alloc(id) => alloc_namespace(&agent, id).unwrap_or_else(|| q_ns.clone()),
                NsFrom::Eval(id) => agent
                    .evals()
                    .get(id)
                    .map(|e| e.namespace)
                    .unwrap_or_else(|| q_ns.clone()),
                NsFrom::JobBody => match body_namespace(req).await {
                    Ok((r, ns)) => {
                        req = r;
                        ns.unwrap_or_else(|| q_ns.clone())
                    }
                    Err(e) => return e.into_response(),
                },
            };
            caps.iter().any(|c| acl.allow_ns(&ns, c))
        }
        Need::Variable(op, path) => {
            let path = if path.is_empty() {
                query
                    .iter()
                    .find(|(k, _)| k == "prefix")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            } else {
                path.clone()
            };
            // A write's body may name its namespace, which wins (as in Nomad).
            let ns = if *op == "write" {
                match body_namespace(req).await {
                    Ok((r, ns)) => {
                        req = r;
                        ns.unwrap_or_else(|| q_ns.clone())
                    }
                    Err(e) => return e.into_response(),
                }
            } else {
                q_ns.clone()
            };
            acl.allow_variable(&ns, &path, op)
        }
        Need::Events => events_allowed(&acl, &query, &q_ns),
    };
    if !ok {
        return denied().into_response();
    }
    req.extensions_mut().insert(Who {
        caller,
        secret,
        acl,
    });
    next.run(req).await
}

/// The namespace of the allocation `id` names, exactly or as a unique prefix (as the
/// allocation endpoints take it).
fn alloc_namespace(agent: &AppState, id: &str) -> Option<String> {
    agent
        .peek_allocation(id, |a| a.namespace.clone())
        .or_else(|| {
            let m = agent.visit_allocations(|a| a.id.starts_with(id).then(|| a.namespace.clone()));
            (m.len() == 1 && !id.is_empty()).then(|| m.into_iter().next().unwrap_or_default())
        })
}

/// Add `namespace=default` to the request's query.
fn add_default_namespace(req: &mut axum::extract::Request) {
    let uri = req.uri();
    let pq = match uri.query() {
        Some(q) if !q.is_empty() => format!("{}?{q}&namespace=default", uri.path()),
        _ => format!("{}?namespace=default", uri.path()),
    };
    if let Ok(pq) = pq.parse::<axum::http::uri::PathAndQuery>() {
        let mut parts = uri.clone().into_parts();
        parts.path_and_query = Some(pq);
        if let Ok(u) = axum::http::Uri::from_parts(parts) {
            *req.uri_mut() = u;
        }
    }
}

/// Read the request's body for the namespace it names ([`job_namespace`]); the request
/// comes back with the same body.
async fn body_namespace(
    req: axum::extract::Request,
) -> Result<(axum::extract::Request, Option<String>), ApiError> {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, crate::api::MAX_BODY)
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?;
    let ns = job_namespace(&bytes);
    Ok((
        axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes)),
        ns,
    ))
}

/// The namespace of the job a body holds (`{"Job": {...}}` or the job itself).
fn job_namespace(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let job = v.get("Job").unwrap_or(&v);
    job.get("Namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The event stream: each `?topic=Topic:filter` needs what reading that kind needs
/// (jobs, evaluations, allocations and deployments `read-job`; nodes `node:read`); every
/// topic (none given, or `*`) needs a management token, as in Nomad.
fn events_allowed(acl: &Acl, query: &[(String, String)], ns: &str) -> bool {
    let topics: Vec<&str> = query
        .iter()
        .filter(|(k, _)| k == "topic")
        .map(|(_, v)| v.split(':').next().unwrap_or(""))
        .collect();
    if topics.is_empty() {
        return acl.is_management();
    }
    topics.iter().all(|t| match *t {
        "Job" | "Evaluation" | "Allocation" | "Deployment" => acl.allow_ns(ns, "read-job"),
        "Node" => acl.allow_node(Level::Read),
        _ => acl.is_management(),
    })
}
