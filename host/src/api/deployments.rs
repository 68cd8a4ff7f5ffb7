//! Deployments (`nomad/deployment_endpoint.go`, `command/agent/deployment_endpoint.go`):
//! `/v1/deployments`, `/v1/deployment/{id}`, its allocations, the operations
//! (`promote`, `fail`, `pause`, `allocation-health`; `unblock`, `cancel` and `run` are
//! multiregion's and refused here), and `/v1/job/{id}/deployment(s)`.
//!
//! As on Nomad, an operation on an ended deployment is a 500 with Nomad's words (`can't
//! promote terminal deployment`), one on an unknown id a 500 `deployment not found`, and
//! reading an unknown id a 404.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::listing::{Key, ListQuery, Sees};
use super::routes::Routes;
use super::{ApiError, AppState, QueryOptions, with_index};
use crate::acl::check::{Need, NsFrom, READ_JOB};
use crate::acl::routes::NeedFn;
use crate::server::{DeploymentError, DeploymentUpdate};
use crate::structs::Deployment;

pub(super) fn routes() -> Routes {
    let read_job: NeedFn = |_| Need::Ns(READ_JOB, NsFrom::Query);
    Routes::new()
        .on("GET", "/v1/deployments", list, |_| {
            Need::Ns(READ_JOB, NsFrom::List)
        })
        .on("GET", "/v1/job/{id}/deployments", of_job, read_job)
        .on("GET", "/v1/job/{id}/deployment", latest_of_job, read_job)
        .on("GET", "/v1/deployment/{id}", read, read_job)
        .on(
            "GET",
            "/v1/deployment/allocations/{id}",
            allocations,
            read_job,
        )
        // Each operation `submit-job | <op>-deployment` (Nomad has no `run-deployment`).
        .on("POST PUT", "/v1/deployment/fail/{id}", fail, |_| {
            Need::Ns(&["submit-job", "fail-deployment"], NsFrom::Query)
        })
        .on("POST PUT", "/v1/deployment/pause/{id}", pause, |_| {
            Need::Ns(&["submit-job", "pause-deployment"], NsFrom::Query)
        })
        .on("POST PUT", "/v1/deployment/promote/{id}", promote, |_| {
            Need::Ns(&["submit-job", "promote-deployment"], NsFrom::Query)
        })
        .on(
            "POST PUT",
            "/v1/deployment/unblock/{id}",
            multiregion,
            |_| Need::Ns(&["submit-job", "unblock-deployment"], NsFrom::Query),
        )
        .on(
            "POST PUT",
            "/v1/deployment/cancel/{id}",
            multiregion,
            |_| Need::Ns(&["submit-job", "cancel-deployment"], NsFrom::Query),
        )
        .on("POST PUT", "/v1/deployment/run/{id}", multiregion, |_| {
            Need::Ns(&["submit-job"], NsFrom::Query)
        })
        .on(
            "POST PUT",
            "/v1/deployment/allocation-health/{id}",
            allocation_health,
            |_| {
                Need::Ns(
                    &["submit-job", "set-alloc-health-deployment"],
                    NsFrom::Query,
                )
            },
        )
}

/// `GET /v1/deployments[?prefix=]`: in creation order (Nomad's), in the query's namespace,
/// with Nomad's list query.
async fn list(
    State(agent): State<AppState>,
    Query(q): Query<QueryOptions>,
    Query(lq): Query<ListQuery>,
    w: Option<axum::Extension<super::acl::Who>>,
) -> Result<Response, ApiError> {
    let lister = lq.lister()?;
    let index = q.block(&agent).await;
    let sees = Sees::of(w.as_ref().map(|w| w.acl()));
    let prefix = q.prefix.clone().unwrap_or_default();
    let all: Vec<Deployment> = agent
        .server()
        .deployments()
        .into_iter()
        .filter(|d| {
            d.id.starts_with(&prefix)
                && q.in_namespace(&d.namespace)
                && sees.namespace(&d.namespace, READ_JOB)
        })
        .collect();
    // By create index then ID (by ID under a prefix), as Nomad's paginator orders them.
    let by_id = q.prefix.is_some();
    let page = lister.page(
        all,
        |d| {
            if by_id {
                Key::Text(d.id.clone())
            } else {
                Key::IndexId(d.create_index, d.id.clone())
            }
        },
        |d| serde_json::to_value(d).unwrap_or_default(),
    )?;
    Ok(page.with_token(with_index(index, &page.items)))
}

/// A deployment of the query's namespace by id, or a 404.
fn find(agent: &AppState, q: &QueryOptions, id: &str) -> Result<Deployment, ApiError> {
    agent
        .server()
        .deployment(id)
        .filter(|d| d.namespace == q.namespace())
        .ok_or_else(|| ApiError::not_found("deployment not found"))
}

async fn read(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let index = q.block(&agent).await;
    Ok(with_index(index, &find(&agent, &q, &id)?))
}

/// `GET /v1/deployment/allocations/{id}`: its allocations' stubs (none for an unknown id,
/// as Nomad answers).
async fn allocations(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Response {
    let index = q.block(&agent).await;
    let stubs: Vec<Value> = match find(&agent, &q, &id) {
        Ok(d) => agent
            .server()
            .deployment_allocations(&d)
            .iter()
            .map(super::allocs::stub)
            .collect(),
        Err(_) => Vec::new(),
    };
    with_index(index, &stubs)
}

#[derive(Debug, Default, Deserialize)]
struct AllFlag {
    #[serde(default, deserialize_with = "super::go_bool")]
    all: bool,
}

/// `GET /v1/job/{id}/deployments[?all=true]`: newest first.
async fn of_job(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    Query(a): Query<AllFlag>,
) -> Result<Response, ApiError> {
    let (index, ns, _) = q.job(&agent, &id).await?;
    Ok(with_index(
        index,
        &agent.server().job_deployments(&ns, &id, a.all),
    ))
}

/// `GET /v1/job/{id}/deployment`: the latest, or `null`.
async fn latest_of_job(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let (index, ns, _) = q.job(&agent, &id).await?;
    Ok(with_index(
        index,
        &agent.server().latest_deployment(&ns, &id),
    ))
}

/// The body of an operation: a JSON object (an empty body is `{}`).
fn body_object(body: &Bytes) -> Result<Value, ApiError> {
    match super::job_ops::body_json(body)? {
        v @ Value::Object(_) => Ok(v),
        _ => Err(ApiError::bad_request("expected a JSON object")),
    }
}

/// A list of ids under `key` (absent or `null`: none).
fn ids(v: &Value, key: &str) -> Result<Vec<String>, ApiError> {
    match &v[key] {
        Value::Null => Ok(Vec::new()),
        Value::Array(a) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ApiError::bad_request(format!("{key}: expected strings")))
            })
            .collect(),
        _ => Err(ApiError::bad_request(format!("{key}: expected a list"))),
    }
}

/// Run an operation off the runtime's workers (it may evaluate the job), in the
/// deployment's namespace; Nomad's `DeploymentUpdateResponse`.
async fn operate(
    agent: AppState,
    q: &QueryOptions,
    id: String,
    op: impl FnOnce(
        &std::sync::Arc<crate::server::Server>,
        &str,
    ) -> Result<DeploymentUpdate, DeploymentError>
    + Send
    + 'static,
) -> Result<Response, ApiError> {
    if agent
        .server()
        .deployment(&id)
        .is_some_and(|d| d.namespace != q.namespace())
    {
        return Err(ApiError::internal("deployment not found"));
    }
    let server = agent.server().clone();
    let r = tokio::task::spawn_blocking(move || op(&server, &id))
        .await
        .map_err(ApiError::internal)?
        .map_err(refused)?;
    let d_index = r.index;
    Ok(with_index(
        r.index,
        &json!({
            "EvalID": r.eval_id,
            "EvalCreateIndex": if r.eval_id.is_empty() { 0 } else { d_index },
            "DeploymentModifyIndex": d_index,
            "RevertedJobVersion": r.reverted_job_version,
            "Index": d_index,
        }),
    ))
}

fn refused(e: DeploymentError) -> ApiError {
    match e {
        // Nomad answers these as plain RPC errors: a 500 with the text.
        DeploymentError::NotFound(m) => ApiError::internal(m),
        DeploymentError::Terminal(m) => ApiError::internal(m),
        DeploymentError::Invalid(m) => ApiError::bad_request(m),
        DeploymentError::Register(e) => super::jobs::register_refused(e),
    }
}

async fn promote(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let v = body_object(&body)?;
    let all = v["All"].as_bool().unwrap_or(false);
    let groups = ids(&v, "Groups")?;
    let groups = (!all && !groups.is_empty()).then_some(groups);
    operate(agent, &q, id, move |s, id| {
        s.promote_deployment(id, groups.as_deref())
    })
    .await
}

async fn fail(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    operate(agent, &q, id, |s, id| s.fail_deployment(id)).await
}

async fn pause(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let v = body_object(&body)?;
    let pause = match &v["Pause"] {
        Value::Bool(b) => *b,
        Value::Null => false,
        _ => return Err(ApiError::bad_request("Pause: expected a boolean")),
    };
    operate(agent, &q, id, move |s, id| s.pause_deployment(id, pause)).await
}

async fn allocation_health(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let v = body_object(&body)?;
    let healthy = ids(&v, "HealthyAllocationIDs")?;
    let unhealthy = ids(&v, "UnhealthyAllocationIDs")?;
    operate(agent, &q, id, move |s, id| {
        s.set_deployment_alloc_health(id, &healthy, &unhealthy)
    })
    .await
}

/// `unblock`, `cancel`, `run`: multiregion deployments' operations. This agent is one
/// region: refused, after Nomad's checks of the id and of a terminal deployment.
async fn multiregion(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let op = uri
        .path()
        .trim_start_matches("/v1/deployment/")
        .split('/')
        .next()
        .unwrap_or("")
        .to_string();
    let d = agent
        .server()
        .deployment(&id)
        .filter(|d| d.namespace == q.namespace())
        .ok_or_else(|| ApiError::internal("deployment not found"))?;
    if !d.active() {
        return Err(ApiError::internal(format!(
            "can't {op} terminal deployment"
        )));
    }
    Err(ApiError::bad_request(format!(
        "can't {op} deployment {id}: it is not a multiregion deployment (this agent is one region)"
    )))
}
