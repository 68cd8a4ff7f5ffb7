//! Evaluations: `/v1/evaluations`, `/v1/evaluation/{id}`, its allocations, and
//! `/v1/job/{id}/evaluations` — what `nomad job run`'s monitor and python-nomad follow.

use axum::extract::{Path, Query, State};
use axum::response::Response;

use super::routes::Routes;
use super::{ApiError, AppState, QueryOptions, with_index};
use crate::acl::check::{Need, NsFrom, READ_JOB};

pub(super) fn routes() -> Routes {
    Routes::new()
        // `Eval.List`: `read-job`, across namespaces filtered per evaluation.
        .on("GET", "/v1/evaluations", list, |_| {
            Need::Ns(READ_JOB, NsFrom::List)
        })
        // `Eval.Count`: `read-job`, across namespaces filtered per evaluation.
        .on("GET", "/v1/evaluations/count", count, |_| {
            Need::Ns(READ_JOB, NsFrom::List)
        })
        // `Eval.GetEval`, `Eval.Allocations`: `read-job` in the evaluation's namespace.
        .on("GET", "/v1/evaluation/{id}", read, |a| {
            Need::Ns(READ_JOB, NsFrom::Eval(a.param("id")))
        })
        .on("GET", "/v1/evaluation/{id}/allocations", allocations, |a| {
            Need::Ns(READ_JOB, NsFrom::Eval(a.param("id")))
        })
        .on("GET", "/v1/job/{id}/evaluations", of_job, |_| {
            Need::Ns(READ_JOB, NsFrom::Query)
        })
}

async fn list(State(agent): State<AppState>, Query(q): Query<QueryOptions>) -> Response {
    let index = q.block(&agent).await;
    let evals: Vec<_> = agent
        .evals()
        .list(q.prefix.as_deref().unwrap_or(""))
        .into_iter()
        .filter(|e| q.in_namespace(&e.namespace))
        .collect();
    with_index(index, &evals)
}

/// `GET /v1/evaluations/count`: Nomad's `EvalCountResponse` (`Count`, with the query
/// meta in the body as Nomad's struct carries it).
async fn count(State(agent): State<AppState>, Query(q): Query<QueryOptions>) -> Response {
    let index = q.block(&agent).await;
    let n = agent
        .evals()
        .list(q.prefix.as_deref().unwrap_or(""))
        .iter()
        .filter(|e| q.in_namespace(&e.namespace))
        .count();
    with_index(
        index,
        &serde_json::json!({
            "Count": n, "Index": index, "LastContact": 0, "KnownLeader": true, "NextToken": "",
        }),
    )
}

async fn read(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let index = q.block(&agent).await;
    let eval = agent
        .evals()
        .get(&id)
        .ok_or_else(|| ApiError::not_found("eval not found"))?;
    Ok(with_index(index, &eval))
}

async fn allocations(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let index = q.block(&agent).await;
    if agent.evals().get(&id).is_none() {
        return Err(ApiError::not_found("eval not found"));
    }
    let stubs = agent.visit_allocations(|a| (a.eval_id == id).then(|| super::allocs::stub(a)));
    Ok(with_index(index, &stubs))
}

async fn of_job(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let (index, ns, _) = q.job(&agent, &id).await?;
    Ok(with_index(index, &agent.evals().of_job(&ns, &id)))
}
