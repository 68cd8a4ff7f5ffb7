//! Evaluations: `/v1/evaluations`, `/v1/evaluation/{id}`, its allocations, and
//! `/v1/job/{id}/evaluations` — what `nomad job run`'s monitor and python-nomad follow.

use axum::extract::{Path, Query, State};
use axum::response::Response;

use super::listing::{Key, ListQuery, Sees};
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

/// Nomad's older filters of the evaluation list, which `filter` may not be combined with.
#[derive(Debug, Default, serde::Deserialize)]
struct EvalFilters {
    /// Only this job's evaluations.
    #[serde(default)]
    job: Option<String>,
    /// Only evaluations with this status.
    #[serde(default)]
    status: Option<String>,
}

impl EvalFilters {
    fn check(&self, list: &ListQuery) -> Result<(), ApiError> {
        let legacy = self.job.as_deref().is_some_and(|j| !j.is_empty())
            || self.status.as_deref().is_some_and(|s| !s.is_empty());
        if legacy && list.has_filter() {
            return Err(ApiError::bad_request(
                "Filter expression cannot be used with other filter parameters",
            ));
        }
        Ok(())
    }

    fn keeps(&self, e: &crate::evals::Evaluation) -> bool {
        self.job
            .as_deref()
            .is_none_or(|j| j.is_empty() || e.job_id == j)
            && self
                .status
                .as_deref()
                .is_none_or(|s| s.is_empty() || e.status == s)
    }
}

/// The evaluations a list or count covers: the query's namespace and prefix, the older
/// filters.
fn listed(
    agent: &AppState,
    q: &QueryOptions,
    f: &EvalFilters,
    sees: &Sees,
) -> Vec<crate::evals::Evaluation> {
    agent
        .evals()
        .list(q.prefix.as_deref().unwrap_or(""))
        .into_iter()
        .filter(|e| {
            q.in_namespace(&e.namespace) && sees.namespace(&e.namespace, READ_JOB) && f.keeps(e)
        })
        .collect()
}

async fn list(
    State(agent): State<AppState>,
    Query(q): Query<QueryOptions>,
    Query(f): Query<EvalFilters>,
    Query(lq): Query<ListQuery>,
    w: Option<axum::Extension<super::acl::Who>>,
) -> Result<Response, ApiError> {
    f.check(&lq)?;
    let lister = lq.lister()?;
    let index = q.block(&agent).await;
    let sees = Sees::of(w.as_ref().map(|w| w.acl()));
    // By create index then ID (by ID under a prefix), as Nomad's paginator orders them.
    let by_id = q.prefix.is_some();
    let page = lister.page(
        listed(&agent, &q, &f, &sees),
        |e| {
            if by_id {
                Key::Text(e.id.clone())
            } else {
                Key::IndexId(e.create_index, e.id.clone())
            }
        },
        |e| serde_json::to_value(e).unwrap_or_default(),
    )?;
    Ok(page.with_token(with_index(index, &page.items)))
}

/// `GET /v1/evaluations/count`: Nomad's `EvalCountResponse` (`Count`, with the query
/// meta in the body as Nomad's struct carries it); `filter` applies, paging does not.
async fn count(
    State(agent): State<AppState>,
    Query(q): Query<QueryOptions>,
    Query(f): Query<EvalFilters>,
    Query(lq): Query<ListQuery>,
    w: Option<axum::Extension<super::acl::Who>>,
) -> Result<Response, ApiError> {
    f.check(&lq)?;
    let lister = lq.lister()?;
    let index = q.block(&agent).await;
    let mut n = 0;
    for e in listed(&agent, &q, &f, &Sees::of(w.as_ref().map(|w| w.acl()))) {
        if lister.keeps(&serde_json::to_value(&e).unwrap_or_default())? {
            n += 1;
        }
    }
    Ok(with_index(
        index,
        &serde_json::json!({
            "Count": n, "Index": index, "LastContact": 0, "KnownLeader": true, "NextToken": "",
        }),
    ))
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
