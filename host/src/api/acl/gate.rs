//! The layer that checks every request against its token when the ACL system is on.
//! What each route needs, read from Nomad's source, is declared where it is routed and
//! read from [`crate::acl::routes::RouteTable`];
//! lists across namespaces, a node's allocations and the variables list are then cut to
//! what the token may see, as Nomad filters them.

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
    table: &crate::acl::routes::RouteTable,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let target = req
        .uri()
        .path_and_query()
        .map_or(req.uri().path(), |pq| pq.as_str());
    let need = table.need(req.method().as_str(), target);
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
    let (ok, mut req, keep) = match decide(&agent, &acl, &need, req).await {
        Ok(d) => d,
        Err(refusal) => return refusal,
    };
    if !ok {
        return denied().into_response();
    }
    req.extensions_mut().insert(Who {
        caller,
        secret,
        acl: acl.clone(),
    });
    let resp = next.run(req).await;
    match keep {
        Some(keep) if !acl.is_management() => keep_visible(resp, keep, &acl).await,
        _ => resp,
    }
}

/// Whether the token's `acl` holds what `need` asks of `req` (reading its body when the
/// need depends on it: the request is handed back whole), and which part of a list's
/// answer it may see. `Err` is an answer to give at once (a body that cannot be read, a
/// list across namespaces none of which grants the capability).
async fn decide(
    agent: &AppState,
    acl: &Acl,
    need: &Need,
    mut req: axum::extract::Request,
) -> Result<(bool, axum::extract::Request, Option<Keep>), Response> {
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
    // What of a list's answer the token may see, when it may not see all of it.
    let mut keep = None;
    let ok = match need {
        Need::Open | Need::AclApi => true,
        Need::Management => acl.is_management(),
        Need::Node(l) => acl.allow_node(*l),
        Need::NodeAllocs => {
            keep = Some(Keep::Ns(&["read-job"]));
            acl.allow_node(Level::Read)
        }
        Need::Agent(l) => acl.allow_agent(*l),
        Need::Operator(l) => acl.allow_operator(*l),
        Need::Ns(caps, from) => {
            let (ok, r) = ns_allowed(agent, acl, caps, from, &query, &q_ns, req, &mut keep).await?;
            req = r;
            ok
        }
        Need::Variable(op, path) => {
            // A write's body may name its namespace, which wins (as in Nomad).
            let ns = if *op == "write" {
                match body_json(req).await {
                    Ok((r, body)) => {
                        req = r;
                        job_namespace(body.as_ref()).unwrap_or_else(|| q_ns.clone())
                    }
                    Err(e) => return Err(e.into_response()),
                }
            } else {
                q_ns.clone()
            };
            acl.allow_variable(&ns, path, op)
        }
        Need::VarList => {
            // Nomad checks nothing up front: it lists the variables the token may list.
            keep = Some(Keep::Variables);
            true
        }
        Need::Search { fuzzy } => match body_json(req).await {
            Ok((r, body)) => {
                req = r;
                let body = body.unwrap_or_default();
                let context = body["Context"].as_str().filter(|c| !c.is_empty());
                let ns = body["Namespace"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .unwrap_or(&q_ns);
                search_allowed(acl, ns, context.unwrap_or("all"), *fuzzy)
            }
            Err(e) => return Err(e.into_response()),
        },
        Need::Events => events_allowed(acl, &query, &q_ns),
        Need::Namespace(name) => acl.allow_ns_any(name),
        Need::NamespaceList => {
            keep = Some(Keep::Namespaces);
            true
        }
    };
    Ok((ok, req, keep))
}

/// A namespace capability `caps`, in the namespace `from` names; for a list, which of its
/// objects the token sees (`keep`).
#[allow(clippy::too_many_arguments)]
async fn ns_allowed(
    agent: &AppState,
    acl: &Acl,
    caps: &'static [&'static str],
    from: &NsFrom,
    query: &[(String, String)],
    q_ns: &str,
    mut req: axum::extract::Request,
    keep: &mut Option<Keep>,
) -> Result<(bool, axum::extract::Request), Response> {
    let holds = |ns: &str| caps.iter().any(|c| acl.allow_ns_spec(ns, c));
    let ns = match from {
        NsFrom::List => {
            let asked = query.iter().any(|(k, v)| k == "namespace" && !v.is_empty());
            // A list without `?namespace=` shows every namespace here; for a token
            // whose rules do not cover them all it shows `default`, Nomad's default.
            if !asked && !holds("*") {
                add_default_namespace(&mut req);
            } else if q_ns == "*" || !asked {
                *keep = Some(Keep::Ns(caps));
            }
            if asked && q_ns == "*" {
                // Nomad's `AllowNsOp("*", op)`: some namespace grants it; the
                // answer is filtered to those that do.
                if !caps.iter().any(|c| acl.allow_spec_somewhere(c)) {
                    return Err(denied().into_response());
                }
                None
            } else {
                Some(q_ns.to_string())
            }
        }
        NsFrom::Query => Some(q_ns.to_string()),
        NsFrom::Alloc(id) => Some(alloc_namespace(agent, id).unwrap_or_else(|| q_ns.to_string())),
        NsFrom::Eval(id) => Some(
            agent
                .evals()
                .get(id)
                .map(|e| e.namespace)
                .unwrap_or_else(|| q_ns.to_string()),
        ),
        NsFrom::JobBody => match body_json(req).await {
            Ok((r, body)) => {
                req = r;
                Some(job_namespace(body.as_ref()).unwrap_or_else(|| q_ns.to_string()))
            }
            Err(e) => return Err(e.into_response()),
        },
    };
    Ok((ns.is_none_or(|ns| holds(&ns)), req))
}

/// Which objects of a list's answer a token sees.
#[derive(Clone, Copy)]
enum Keep {
    /// Those in a namespace granting one of these capabilities (`a+b`: both).
    Ns(&'static [&'static str]),
    /// Variables whose path grants `list`.
    Variables,
    /// Namespaces where the token holds any capability.
    Namespaces,
}

/// Drop from a list's JSON answer the objects the token may not see (Nomad filters
/// lists the same way, per object, by its namespace).
async fn keep_visible(resp: Response, keep: Keep, acl: &Acl) -> Response {
    if resp.status() != StatusCode::OK {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return ApiError::internal("reading a list to filter it").into_response();
    };
    let Ok(Value::Array(items)) = serde_json::from_slice::<Value>(&bytes) else {
        // Not a list: nothing of it names a namespace to check.
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    };
    let visible: Vec<Value> = items
        .into_iter()
        .filter(|o| {
            if let Keep::Namespaces = keep {
                return o["Name"].as_str().is_some_and(|n| acl.allow_ns_any(n));
            }
            let ns = o
                .get("Namespace")
                .or_else(|| o.pointer("/Target/Namespace"))
                .and_then(Value::as_str);
            let Some(ns) = ns else { return false };
            match keep {
                Keep::Ns(caps) => caps.iter().any(|c| acl.allow_ns_spec(ns, c)),
                Keep::Variables => o["Path"]
                    .as_str()
                    .is_some_and(|p| acl.allow_variable(ns, p, "list")),
                Keep::Namespaces => false,
            }
        })
        .collect();
    let body = serde_json::to_vec(&visible).unwrap_or_default();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// Nomad's `sufficientSearchPerms`: a search of one context needs what reading that
/// context needs (the answer is then filtered per object); `all`, and a fuzzy search of
/// every namespace, need nothing up front.
fn search_allowed(acl: &Acl, ns: &str, context: &str, fuzzy: bool) -> bool {
    if fuzzy && ns == "*" {
        return true;
    }
    let read_job = || {
        if ns == "*" {
            acl.allow_spec_somewhere("read-job")
        } else {
            acl.allow_ns(ns, "read-job")
        }
    };
    match context {
        "nodes" => acl.allow_node(Level::Read),
        "namespaces" => acl.allow_ns_any(ns),
        "allocs" | "deployment" | "evals" | "jobs" | "scaling_policy" => read_job(),
        _ => true,
    }
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

/// Read the request's body as JSON (none when it is not); the request comes back with
/// the same body.
async fn body_json(
    req: axum::extract::Request,
) -> Result<(axum::extract::Request, Option<Value>), ApiError> {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, crate::api::MAX_BODY)
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?;
    let v = serde_json::from_slice(&bytes).ok();
    Ok((
        axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes)),
        v,
    ))
}

/// The namespace a body names: a job's (`{"Job": {...}}` or the job itself), a
/// variable's or a search's `Namespace`.
fn job_namespace(body: Option<&Value>) -> Option<String> {
    let v = body?;
    let job = v.get("Job").unwrap_or(v);
    job.get("Namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The event stream: each `?topic=Topic:filter` needs what reading that kind needs
/// (jobs, evaluations, allocations, deployments and services `read-job`; nodes
/// `node:read`); any other topic, and every topic (none given, or `*`), needs a
/// management token, as Nomad's `aclAllowsSubscription` (nomad/stream/event_broker.go).
/// `?namespace=*` needs `read-job` in some namespace (Nomad's `AllowNsOp("*", ...)`): the
/// stream then shows only the events of namespaces granting it.
pub(crate) fn events_allowed(acl: &Acl, query: &[(String, String)], ns: &str) -> bool {
    let topics: Vec<&str> = query
        .iter()
        .filter(|(k, _)| k == "topic")
        .map(|(_, v)| v.split(':').next().unwrap_or(""))
        .collect();
    if topics.is_empty() {
        return acl.is_management();
    }
    topics.iter().all(|t| match *t {
        "Job" | "Evaluation" | "Allocation" | "Deployment" | "Service" if ns == "*" => {
            acl.allow_spec_somewhere("read-job")
        }
        "Job" | "Evaluation" | "Allocation" | "Deployment" | "Service" => {
            acl.allow_ns(ns, "read-job")
        }
        "Node" => acl.allow_node(Level::Read),
        _ => acl.is_management(),
    })
}
