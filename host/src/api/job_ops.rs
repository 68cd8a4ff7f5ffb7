//! What else Nomad's tools do to a job: its versions (`/versions`, `/revert`, `/stable`),
//! a dry run (`/plan`), another evaluation (`/evaluate`), a periodic job's forced launch
//! (`/periodic/force`) and a parameterized job's dispatch (`/dispatch`).

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use super::jobs::{register_refused, register_response, same_job_id};
use super::routes::Routes;
use super::{ApiError, AppState, QueryOptions, with_index};
use crate::acl::check::{Need, NsFrom, READ_JOB};
use crate::agent::{DispatchError, DispatchRequest, PeriodicError};

pub(super) fn routes() -> Routes {
    // `nomad/job_endpoint.go`, in the request's namespace (a plan: the job's own).
    Routes::new()
        .on("GET", "/v1/job/{id}/versions", versions, |_| {
            Need::Ns(READ_JOB, NsFrom::Query)
        })
        .on("POST PUT", "/v1/job/{id}/revert", revert, |_| {
            Need::Ns(&["submit-job", "revert-job"], NsFrom::Query)
        })
        .on("POST PUT", "/v1/job/{id}/stable", stable, |_| {
            Need::Ns(&["submit-job", "stable-job"], NsFrom::Query)
        })
        .on("POST PUT", "/v1/job/{id}/plan", plan, |_| {
            Need::Ns(&["submit-job", "plan-job"], NsFrom::JobBody)
        })
        .on("POST PUT", "/v1/job/{id}/evaluate", evaluate, |_| {
            Need::Ns(&["submit-job", "evaluate-job"], NsFrom::Query)
        })
        .on("POST PUT", "/v1/job/{id}/periodic/force", force, |_| {
            Need::Ns(
                &["dispatch-job", "submit-job", "force-periodic-job"],
                NsFrom::Query,
            )
        })
        .on("POST PUT", "/v1/job/{id}/dispatch", dispatch, |_| {
            Need::Ns(&["dispatch-job"], NsFrom::Query)
        })
}

/// A JSON body, `{}` when empty.
pub(super) fn body_json(body: &Bytes) -> Result<Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))
}

/// A body's unsigned integer field, or a 400 naming it.
fn uint(v: &Value, field: &str) -> Result<Option<u64>, ApiError> {
    match &v[field] {
        Value::Null => Ok(None),
        x => x
            .as_u64()
            .map(Some)
            .ok_or_else(|| ApiError::bad_request(format!("{field}: expected an unsigned integer"))),
    }
}

#[derive(Deserialize)]
struct DiffsFlag {
    #[serde(default, deserialize_with = "super::go_bool_opt")]
    diffs: Option<bool>,
}

/// `GET /v1/job/{id}/versions[?diffs=true]`: the kept versions, newest first, and each
/// one's difference from the one before it.
async fn versions(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    Query(d): Query<DiffsFlag>,
) -> Result<Response, ApiError> {
    let (index, ns, _) = q.job(&agent, &id).await?;
    let versions = agent.server().job_versions(&ns, &id);
    let diffs: Vec<_> = if d.diffs == Some(true) {
        versions
            .windows(2)
            .map(|w| crate::jobdiff::diff(Some(&w[1]), &w[0]))
            .collect()
    } else {
        Vec::new()
    };
    Ok(with_index(
        index,
        &json!({ "Versions": versions, "Diffs": if diffs.is_empty() { Value::Null } else { json!(diffs) }, "Index": index }),
    ))
}

/// `POST /v1/job/{id}/revert`: `{"JobID", "JobVersion", "EnforcePriorVersion"}`.
async fn revert(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let v = body_json(&body)?;
    let version =
        uint(&v, "JobVersion")?.ok_or_else(|| ApiError::bad_request("JobVersion: missing"))?;
    let prior = uint(&v, "EnforcePriorVersion")?;
    let r = agent
        .server()
        .revert_job(&q.namespace(), &id, version, prior)
        .map_err(register_refused)?;
    Ok(with_index(r.index, &register_response(&r)))
}

/// `POST /v1/job/{id}/stable`: `{"JobID", "JobVersion", "Stable"}`.
async fn stable(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let v = body_json(&body)?;
    let version =
        uint(&v, "JobVersion")?.ok_or_else(|| ApiError::bad_request("JobVersion: missing"))?;
    let stable = match &v["Stable"] {
        Value::Bool(b) => *b,
        Value::Null => false,
        _ => return Err(ApiError::bad_request("Stable: expected a boolean")),
    };
    let index = agent
        .server()
        .set_job_stable(&q.namespace(), &id, version, stable)
        .map_err(register_refused)?;
    Ok(with_index(index, &json!({ "Index": index })))
}

/// `POST /v1/job/{id}/plan`: `{"Job", "Diff", "PolicyOverride"}` → Nomad's
/// `JobPlanResponse`, without changing anything.
async fn plan(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let v = body_json(&body)?;
    if v.get("Job").is_none_or(Value::is_null) {
        return Err(ApiError::bad_request("Job must be specified"));
    }
    let want_diff = v["Diff"].as_bool().unwrap_or(false);
    let mut job = crate::jobspec::parse_job_json(v["Job"].to_string().as_bytes())
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    same_job_id(&job.id, &id)?;
    // Planned as it would be registered: into its namespace, or refused as it would be.
    agent
        .server()
        .admit_into_namespace(&mut job)
        .map_err(super::jobs::namespace_refused)?;
    let warnings = agent
        .server()
        .unacted(&job)
        .map_err(super::jobs::register_refused)?;
    let p = agent
        .server()
        .plan_job(job, want_diff)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    // Groups that would not be placed (the node is not eligible), as the evaluation
    // would record them; `null` when everything would be.
    let datacenter = agent.node().datacenter;
    let failed = (!p.failed.is_empty()).then(|| {
        p.failed
            .iter()
            .map(|(g, f)| (g.clone(), crate::evals::failure_metric(&datacenter, f)))
            .collect::<BTreeMap<_, _>>()
    });
    Ok(with_index(
        agent.index(),
        &json!({
            "JobModifyIndex": p.job_modify_index,
            "CreatedEvals": [],
            "Diff": p.diff,
            "Annotations": { "DesiredTGUpdates": p.desired_updates, "PreemptedAllocs": [] },
            "FailedTGAllocs": failed,
            "NextPeriodicLaunch": crate::util::go_time(p.next_periodic_launch),
            "Warnings": crate::jobspec::warnings_text(&warnings),
            "Index": agent.index(),
        }),
    ))
}

/// `POST /v1/job/{id}/evaluate`: place the allocations the job is missing.
async fn evaluate(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    body: Bytes,
) -> Result<Response, ApiError> {
    body_json(&body)?;
    let r = agent
        .server()
        .evaluate_job(&q.namespace(), &id)
        .map_err(register_refused)?;
    Ok(with_index(r.index, &register_response(&r)))
}

/// `POST /v1/job/{id}/periodic/force`: launch a periodic job's child now.
async fn force(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let r = agent
        .server()
        .force_periodic(&q.namespace(), &id)
        .map_err(|e| match e {
            PeriodicError::NotFound => ApiError::not_found("job not found"),
            PeriodicError::NotPeriodic(_) => ApiError::bad_request(e.to_string()),
            PeriodicError::Register(e) => register_refused(e),
        })?;
    Ok(with_index(
        r.index,
        &json!({ "EvalID": r.eval_id, "EvalCreateIndex": r.index, "Index": r.index }),
    ))
}

/// `POST /v1/job/{id}/dispatch`: `{"Payload": base64, "Meta": {...}, "IdempotencyToken",
/// "IdPrefixTemplate"}` → Nomad's `JobDispatchResponse`.
async fn dispatch(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let v = body_json(&body)?;
    let string = |field: &str| -> Result<String, ApiError> {
        match &v[field] {
            Value::Null => Ok(String::new()),
            Value::String(s) => Ok(s.clone()),
            _ => Err(ApiError::bad_request(format!("{field}: expected a string"))),
        }
    };
    let payload = match string("Payload")? {
        p if p.is_empty() => Vec::new(),
        p => base64::engine::general_purpose::STANDARD
            .decode(p)
            .map_err(|e| ApiError::bad_request(format!("Payload: not base64: {e}")))?,
    };
    let meta: BTreeMap<String, String> = match &v["Meta"] {
        Value::Null => BTreeMap::new(),
        m => serde_json::from_value(m.clone())
            .map_err(|_| ApiError::bad_request("Meta: expected an object of strings"))?,
    };
    let req = DispatchRequest {
        meta,
        payload,
        idempotency_token: string("IdempotencyToken")?,
        id_prefix_template: string("IdPrefixTemplate")?,
    };
    let d = agent
        .server()
        .dispatch_job(&q.namespace(), &id, req)
        .map_err(|e| match e {
            DispatchError::NotFound => ApiError::not_found("job not found"),
            DispatchError::Register(e) => register_refused(e),
            other => ApiError::bad_request(other.to_string()),
        })?;
    Ok(with_index(
        d.index,
        &json!({
            "DispatchedJobID": d.job_id, "EvalID": d.eval_id,
            "EvalCreateIndex": if d.eval_id.is_empty() { 0 } else { d.index },
            "JobCreateIndex": d.job_create_index, "Index": d.index,
        }),
    ))
}
