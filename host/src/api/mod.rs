//! The HTTP API, shaped like Nomad's for a single node: PascalCase fields, durations and
//! times in ns, `X-Nomad-Index` on every read, errors as plain text with Nomad's status
//! codes. Existing Nomad tooling (the `nomad` CLI, python-nomad) talks to it unchanged.

mod acl;
mod allocs;
mod client;
mod cluster;
mod components;
mod content_type;
mod deployments;
mod evals;
mod events;
mod exec;
pub(crate) mod fs;
mod fs_stream;
mod job_ops;
mod jobs;
mod listen;
mod listing;
mod metrics;
mod namespaces;
mod node;
mod routes;
mod scale;
mod search;
mod services;
mod state_gate;
mod vars;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::agent::Agent;

/// Shared handler state.
pub type AppState = Arc<Agent>;

/// Every route the API serves, with the ACL need each declares.
fn routes() -> routes::Routes {
    routes::Routes::new()
        .merge(acl::routes())
        .merge(jobs::routes())
        .merge(job_ops::routes())
        .merge(allocs::routes())
        .merge(fs::routes())
        .merge(fs_stream::routes())
        .merge(client::routes())
        .merge(exec::routes())
        .merge(node::routes())
        .merge(metrics::routes())
        .merge(deployments::routes())
        .merge(evals::routes())
        .merge(search::routes())
        .merge(events::routes())
        .merge(cluster::routes())
        .merge(components::routes())
        .merge(scale::routes())
        .merge(vars::routes())
        .merge(namespaces::routes())
        .merge(services::routes())
}

/// The table of what each route the API serves needs of a token (for tools and tests
/// that list the routes).
pub fn route_table() -> crate::acl::routes::RouteTable {
    routes().into_parts().1
}

/// The router for all endpoints.
pub fn router(agent: Arc<Agent>) -> Router {
    let (api, table) = routes().into_parts();
    let table = Arc::new(table);
    api.fallback(unknown_path)
        .method_not_allowed_fallback(wrong_method)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(
            agent.clone(),
            state_gate::refuse_writes_while_unwritable,
        ))
        .layer(axum::middleware::from_fn(refuse_announced_oversize))
        .layer(axum::middleware::from_fn(refuse_bad_wait))
        .layer(axum::middleware::from_fn_with_state(
            (agent.clone(), table.clone()),
            require_token,
        ))
        .merge(crate::ui::routes(agent.clone(), table))
        .with_state(agent)
}

/// A blocking query's `wait` that is not a duration is refused, as Nomad's `parseWait`
/// refuses it (400 `Invalid wait time`), instead of waiting for the default.
async fn refuse_bad_wait(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let bad = req.uri().query().is_some_and(|q| {
        q.split('&')
            .filter_map(|kv| kv.split_once('='))
            .filter(|(k, _)| *k == "wait")
            .any(|(_, v)| {
                let v = percent_decode(v);
                crate::util::parse_duration(&v).is_none()
            })
    });
    if bad {
        return ApiError(StatusCode::BAD_REQUEST, "Invalid wait time".into()).into_response();
    }
    next.run(req).await
}

/// A query value with its `%XX` escapes and `+` decoded.
fn percent_decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(x) => {
                        out.push(x);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Largest request body taken.
pub const MAX_BODY: usize = 4 << 20;

/// A body whose `Content-Length` is over [`MAX_BODY`] is refused before any of it is read,
/// so the client gets its 413 instead of a reset connection halfway through sending.
/// (Bodies without a length are cut off at the limit by `DefaultBodyLimit`.)
async fn refuse_announced_oversize(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let announced = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = announced
        && n > MAX_BODY as u64
    {
        return ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body of {n} bytes is over the length limit of {MAX_BODY} bytes"),
        )
        .into_response();
    }
    next.run(req).await
}

/// A path no endpoint serves (Nomad: 404 "Invalid URL path").
async fn unknown_path(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!(
        "Invalid URL path {:?}: no such endpoint",
        uri.path()
    ))
}

/// A known path with a method it does not take (Nomad: 405 "Invalid method").
async fn wrong_method(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("Invalid method: {method} is not allowed on {}", uri.path()),
    )
}

/// Whether `given` is the configured token `want` (compared in constant time: a secret).
pub(crate) fn token_matches(given: &str, want: &str) -> bool {
    given.len() == want.len()
        && given
            .bytes()
            .zip(want.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// With the ACL system on, each request is checked against its token ([`acl::enforce`]);
/// else, with an ACL token configured, a request without it is refused (403, as Nomad does).
async fn require_token(
    axum::extract::State((agent, table)): axum::extract::State<(
        AppState,
        Arc<crate::acl::routes::RouteTable>,
    )>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if agent.acl().enabled() {
        return acl::enforce(agent, &table, req, next).await;
    }
    if let Some(want) = agent.acl_token() {
        let h = req.headers();
        let given = h
            .get("X-Nomad-Token")
            .and_then(|v| v.to_str().ok())
            .or_else(|| {
                h.get(axum::http::header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
            });
        let ok = given.is_some_and(|g| token_matches(g, want));
        // A browser's `alloc exec` sends its token after the upgrade, which its handler
        // checks (`exec::handshake_request`).
        if !ok && !exec::handshake_request(&req) {
            let msg = if given.is_none() {
                "Permission denied: this agent requires an ACL token (X-Nomad-Token)"
            } else {
                "Permission denied: the ACL token is not valid"
            };
            return ApiError(StatusCode::FORBIDDEN, msg.into()).into_response();
        }
    }
    next.run(req).await
}

/// Serve the API on `listener` until `shutdown` resolves, within the config's `limits`
/// (connections per client, the time a request's headers may take).
pub async fn serve(
    agent: Arc<Agent>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    agent.set_http_addr(listener.local_addr()?);
    let limits = agent.http_limits();
    listen::serve(listener, router(agent), limits, shutdown).await
}

/// An API error: status code and a plain message naming what is wrong.
#[derive(Debug)]
pub struct ApiError(pub StatusCode, pub String);

impl ApiError {
    pub(crate) fn bad_request(m: impl Into<String>) -> Self {
        Self(StatusCode::BAD_REQUEST, m.into())
    }
    pub(crate) fn not_found(m: impl Into<String>) -> Self {
        Self(StatusCode::NOT_FOUND, m.into())
    }
    pub(crate) fn internal(m: impl std::fmt::Display) -> Self {
        Self(StatusCode::INTERNAL_SERVER_ERROR, m.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, self.1).into_response()
    }
}

/// A query-string boolean as Go's `strconv.ParseBool` reads it (Nomad's parser): `1`, `t`,
/// `T`, `TRUE`, `true`, `True` and their false forms; clients such as python-nomad send
/// `True`. Anything else is a 400 naming the value.
pub(crate) fn go_bool<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let s = String::deserialize(d)?;
    match s.as_str() {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" | "" => Ok(false),
        other => Err(serde::de::Error::custom(format!(
            "{other:?} is not a boolean (use true or false)"
        ))),
    }
}

/// [`go_bool`] for an optional parameter.
pub(crate) fn go_bool_opt<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<bool>, D::Error> {
    go_bool(d).map(Some)
}

/// Common query parameters.
#[derive(Debug, Default, Deserialize)]
pub struct QueryOptions {
    /// Namespace (default "default").
    pub namespace: Option<String>,
    /// Blocking query: wait for an index above this.
    pub index: Option<u64>,
    /// Blocking query: longest wait, e.g. "5m" (default 5 minutes).
    pub wait: Option<String>,
    /// Filter by id prefix.
    pub prefix: Option<String>,
}

impl QueryOptions {
    /// Whether an object in `namespace` passes the `?namespace=` filter of a list
    /// (none given, or `*`: every namespace).
    pub(crate) fn in_namespace(&self, namespace: &str) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|n| n == "*" || n == namespace)
    }

    pub(crate) fn namespace(&self) -> String {
        self.namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into())
    }

    /// Block per `?index=&wait=`, then find job `id` in the query's namespace: the index
    /// to answer with, the namespace and the job, or a 404.
    pub(crate) async fn job(
        &self,
        agent: &Agent,
        id: &str,
    ) -> Result<(u64, String, crate::jobspec::Job), ApiError> {
        let index = self.block(agent).await;
        let ns = self.namespace();
        let job = agent
            .server()
            .job(&ns, id)
            .ok_or_else(|| ApiError::not_found("job not found"))?;
        Ok((index, ns, job))
    }

    /// Honour `?index=&wait=`: block until the agent's index passes `index`.
    pub(crate) async fn block(&self, agent: &Agent) -> u64 {
        match self.index {
            Some(i) if i > 0 => {
                let wait = self
                    .wait
                    .as_deref()
                    .and_then(crate::util::parse_duration)
                    .unwrap_or(std::time::Duration::from_secs(300))
                    .min(std::time::Duration::from_secs(600));
                agent.wait_for_change(i, wait).await
            }
            _ => agent.index(),
        }
    }
}

/// No body, with Nomad's query-meta headers: what Nomad writes for a handler that returns
/// no object.
pub(crate) fn empty_with_index(index: u64) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert("X-Nomad-Index", HeaderValue::from(index));
    headers.insert("X-Nomad-LastContact", HeaderValue::from_static("0"));
    headers.insert("X-Nomad-KnownLeader", HeaderValue::from_static("true"));
    (headers, "").into_response()
}

/// A JSON body with Nomad's query-meta headers.
pub(crate) fn with_index<T: serde::Serialize>(index: u64, body: &T) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert("X-Nomad-Index", HeaderValue::from(index));
    headers.insert("X-Nomad-LastContact", HeaderValue::from_static("0"));
    headers.insert("X-Nomad-KnownLeader", HeaderValue::from_static("true"));
    (headers, axum::Json(body)).into_response()
}
