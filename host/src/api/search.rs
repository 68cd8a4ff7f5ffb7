//! `POST|PUT /v1/search` (prefix search, which the `nomad` CLI uses to expand short ids),
//! `POST|PUT /v1/search/fuzzy` (substring search over names, which Nomad's web UI and
//! `nomad` use) and `/v1/client/gc` (collect every finished allocation).

use axum::body::Bytes;
use axum::extract::{FromRequest, Query, Request, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::acl::Who;
use super::routes::Routes;
use super::{ApiError, AppState, with_index};
use crate::acl::Level;
use crate::acl::check::Need;

/// What of the agent a search shows its caller: with the ACL system on, only objects in
/// namespaces where the token holds `read-job`, and the node only with `node:read` (as
/// Nomad's search filters its results per object).
struct Sees(Option<Who>);

impl Sees {
    fn job_ns(&self, ns: &str) -> bool {
        self.0
            .as_ref()
            .is_none_or(|w| w.acl().allow_ns(ns, "read-job"))
    }
    fn node(&self) -> bool {
        self.0
            .as_ref()
            .is_none_or(|w| w.acl().allow_node(Level::Read))
    }
    fn namespace(&self, ns: &str) -> bool {
        self.0.as_ref().is_none_or(|w| w.acl().allow_ns_any(ns))
    }
}

/// Most matches returned per context (Nomad's truncation limit).
const MAX_MATCHES: usize = 20;

/// Shortest fuzzy search text (Nomad's `min_term_length` default).
const MIN_TERM_LENGTH: usize = 2;

/// Most fuzzy matches returned per context (Nomad's `limit_results` default).
const MAX_FUZZY_MATCHES: usize = 100;

pub(super) fn routes() -> Routes {
    Routes::new()
        // Per the body's `Context`, matches filtered per object.
        .on("POST PUT", "/v1/search", search, |_| Need::Search {
            fuzzy: false,
        })
        .on("POST PUT", "/v1/search/fuzzy", fuzzy, |_| Need::Search {
            fuzzy: true,
        })
        .on("GET POST PUT", "/v1/client/gc", gc_all, |_| {
            Need::Node(Level::Write)
        })
}

/// The namespace a search looks in: the body's `Namespace`, else `?namespace=`, else
/// `default` (Nomad's `RequestNamespace`); `*` is every namespace (the token's view of
/// them, per object).
fn request_namespace(body: &Value, query: &[(String, String)]) -> String {
    body["Namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
        .or_else(|| {
            query
                .iter()
                .find(|(k, v)| k == "namespace" && !v.is_empty())
                .map(|(_, v)| v.as_str())
        })
        .unwrap_or("default")
        .to_string()
}

/// What both searches start with: what the caller sees, the JSON body, and the namespace
/// the search looks in. A query string or body axum refuses is its own answer, as for
/// its `Query` and `Bytes` extractors.
struct SearchRequest {
    sees: Sees,
    body: Value,
    namespace: String,
}

impl<S: Send + Sync> FromRequest<S> for SearchRequest {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let who = req.extensions().get::<Who>().cloned();
        let Query(query) = Query::<Vec<(String, String)>>::try_from_uri(req.uri())
            .map_err(IntoResponse::into_response)?;
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let body: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")).into_response())?;
        let namespace = request_namespace(&body, &query);
        Ok(SearchRequest {
            sees: Sees(who),
            body,
            namespace,
        })
    }
}

/// `{"Prefix": "ab", "Context": "allocs"|"jobs"|"nodes"|"evals"|"all", "Namespace": "ns"}`
/// → `{"Matches": {context: [ids]}, "Truncations": {context: bool}}`. Jobs, allocations
/// and evaluations are looked for in the request's namespace only (all of them for `*`),
/// as in Nomad.
async fn search(State(agent): State<AppState>, r: SearchRequest) -> Result<Response, ApiError> {
    let (sees, v, namespace) = (r.sees, r.body, r.namespace);
    let seen = |ns: &str| (namespace == "*" || ns == namespace) && sees.job_ns(ns);
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
        if *ctx == "nodes" && !sees.node() {
            // Nomad leaves out a context the token may not read.
            continue;
        }
        let mut ids: Vec<String> = match *ctx {
            "allocs" => agent.visit_allocations(|a| seen(&a.namespace).then(|| a.id.clone())),
            "evals" => agent
                .evals()
                .list("")
                .into_iter()
                .filter(|e| seen(&e.namespace))
                .map(|e| e.id)
                .collect(),
            "jobs" => agent
                .server()
                .jobs()
                .into_iter()
                .filter(|j| seen(&j.namespace))
                .map(|j| j.id)
                .collect(),
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

/// `{"Text": "exa", "Context": "all"|"jobs"|"groups"|"tasks"|"nodes"|"allocs"|
/// "namespaces", "Namespace": "default"}` → `{"Matches": {context: [{"ID", "Scope"}]},
/// "Truncations": {context: bool}}`: every name that contains the text (case does not
/// matter), each with its scope as Nomad gives it (a group's is its namespace and job, a
/// task's adds its group, an allocation's is its namespace and id, a node's its id).
async fn fuzzy(State(agent): State<AppState>, r: SearchRequest) -> Result<Response, ApiError> {
    let (sees, v, namespace) = (r.sees, r.body, r.namespace);
    let text = v["Text"].as_str().unwrap_or_default().to_lowercase();
    if text.chars().count() < MIN_TERM_LENGTH {
        return Err(ApiError::bad_request(format!(
            "Text: fuzzy search query must be at least {MIN_TERM_LENGTH} characters, got {}",
            text.chars().count()
        )));
    }
    let context = v["Context"]
        .as_str()
        .filter(|c| !c.is_empty())
        .unwrap_or("all");
    const CONTEXTS: &[&str] = &["allocs", "groups", "jobs", "namespaces", "nodes", "tasks"];
    let contexts: Vec<&str> = match context {
        "all" => CONTEXTS.to_vec(),
        c if CONTEXTS.contains(&c) => vec![c],
        other => {
            return Err(ApiError::bad_request(format!(
                "Context: {other:?} is not one of all, {}",
                CONTEXTS.join(", ")
            )));
        }
    };
    let in_ns = |ns: &str| namespace == "*" || ns == namespace;
    let hit = |name: &str| name.to_lowercase().contains(&text);
    let jobs: Vec<_> = agent
        .server()
        .jobs()
        .into_iter()
        .filter(|j| in_ns(&j.namespace) && sees.job_ns(&j.namespace))
        .collect();
    let (mut matches, mut truncations) = (serde_json::Map::new(), serde_json::Map::new());
    for ctx in contexts {
        let mut found = fuzzy_matches(&agent, ctx, &jobs, &hit, &in_ns, &sees);
        found.sort();
        found.dedup();
        truncations.insert(ctx.to_string(), json!(found.len() > MAX_FUZZY_MATCHES));
        found.truncate(MAX_FUZZY_MATCHES);
        let list: Vec<Value> = found
            .into_iter()
            .map(|(id, scope)| json!({ "ID": id, "Scope": scope }))
            .collect();
        matches.insert(ctx.to_string(), json!(list));
    }
    Ok(with_index(
        agent.index(),
        &json!({ "Matches": matches, "Truncations": truncations }),
    ))
}

/// What of context `ctx` a fuzzy search finds: each hit's name and scope, among `jobs`
/// (those the token sees in the namespace asked), the allocations, the node and the
/// namespaces `sees` lets the token see.
fn fuzzy_matches(
    agent: &crate::agent::Agent,
    ctx: &str,
    jobs: &[crate::jobspec::Job],
    hit: &dyn Fn(&str) -> bool,
    in_ns: &dyn Fn(&str) -> bool,
    sees: &Sees,
) -> Vec<(String, Vec<String>)> {
    let mut found: Vec<(String, Vec<String>)> = Vec::new();
    match ctx {
        "jobs" => {
            for j in jobs.iter().filter(|j| hit(&j.id)) {
                found.push((j.id.clone(), vec![j.namespace.clone()]));
            }
        }
        "groups" => {
            for j in jobs {
                for g in j.task_groups.iter().filter(|g| hit(&g.name)) {
                    found.push((g.name.clone(), vec![j.namespace.clone(), j.id.clone()]));
                }
            }
        }
        "tasks" => {
            for j in jobs {
                for g in &j.task_groups {
                    for t in g.tasks.iter().filter(|t| hit(&t.name)) {
                        found.push((
                            t.name.clone(),
                            vec![j.namespace.clone(), j.id.clone(), g.name.clone()],
                        ));
                    }
                }
            }
        }
        "allocs" => {
            found.extend(agent.visit_allocations(|a| {
                (in_ns(&a.namespace) && sees.job_ns(&a.namespace) && hit(&a.name))
                    .then(|| (a.name.clone(), vec![a.namespace.clone(), a.id.clone()]))
            }));
        }
        "nodes" => {
            let n = agent.node();
            if sees.node() && hit(&n.name) {
                found.push((n.name, vec![n.id]));
            }
        }
        _ => {
            // Namespaces are not in a namespace: every one the token may see.
            let namespaces = agent.server().namespaces().into_iter().map(|n| n.name);
            for ns in namespaces
                .into_iter()
                .filter(|n| hit(n) && sees.namespace(n))
            {
                found.push((ns, Vec::new()));
            }
        }
    }
    found
}

/// Collect every finished allocation (Nomad's `nomad system gc` on a client).
async fn gc_all(State(agent): State<AppState>) -> Result<Response, ApiError> {
    agent.client().gc_all().await.map_err(ApiError::internal)?;
    // As Nomad's handler, which returns no object: no body at all.
    Ok(super::empty_with_index(agent.index()))
}
