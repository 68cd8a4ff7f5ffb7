//! `/v1/jobs`, `/v1/job/{id}` and friends.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use super::{ApiError, AppState, QueryOptions, with_index};
use crate::agent::RegisterError;
use crate::structs::Allocation;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/jobs", get(list).post(register).put(register))
        .route(
            "/v1/job/{id}",
            get(read)
                .post(register_id)
                .put(register_id)
                .delete(deregister),
        )
        .route("/v1/job/{id}/allocations", get(allocations))
        .route("/v1/job/{id}/summary", get(job_summary))
        .route("/v1/validate/job", post(validate))
        .route("/v1/jobs/parse", post(parse))
}

async fn register(State(agent): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let job = crate::jobspec::parse_register_request(&body)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    do_register(agent, job)
}

async fn register_id(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let job = crate::jobspec::parse_register_request(&body)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    if job.id != id {
        return Err(ApiError::bad_request(format!(
            "Job.ID: {:?} does not match the job in the URL ({id:?})",
            job.id
        )));
    }
    do_register(agent, job)
}

fn do_register(agent: AppState, job: crate::jobspec::Job) -> Result<Response, ApiError> {
    let r = agent.register_job(job).map_err(|e| match e {
        RegisterError::Invalid(bad) => ApiError::bad_request(bad.to_string()),
        RegisterError::State(e) => ApiError::internal(e),
    })?;
    Ok(with_index(
        r.index,
        &json!({
            "EvalID": r.eval_id,
            "EvalCreateIndex": r.index,
            "JobModifyIndex": r.index,
            "Warnings": "",
            "Index": r.index,
            "LastContact": 0,
            "KnownLeader": true,
        }),
    ))
}

/// `POST /v1/validate/job`: the job's structure, then each task's driver: loaded, and its
/// config accepted by the driver's `validate-config` (configs holding `${...}` are checked
/// at start, once interpolated).
async fn validate(State(agent): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    serde_json::from_slice::<serde_json::Value>(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))?;
    let (errors, driver_checked) = match crate::jobspec::parse_register_request(&body) {
        Err(e) => (vec![e.to_string()], true),
        Ok(job) => {
            let v = agent.validate_job(&job).await;
            (v.errors, v.driver_checked)
        }
    };
    let error = errors.join("; ");
    Ok(with_index(
        0,
        &json!({ "DriverConfigValidated": driver_checked && errors.is_empty(), "ValidationErrors": errors, "Error": error, "Warnings": "" }),
    ))
}

async fn list(State(agent): State<AppState>, Query(q): Query<QueryOptions>) -> Response {
    let index = q.block(&agent).await;
    let stubs: Vec<_> = agent
        .jobs()
        .into_iter()
        .filter(|j| q.in_namespace(&j.job.namespace))
        .filter(|j| q.prefix.as_deref().is_none_or(|p| j.job.id.starts_with(p)))
        .map(|j| {
            let allocs = agent.job_allocations(&j.job.namespace, &j.job.id);
            json!({
                "ID": j.job.id, "ParentID": "", "Name": j.job.name, "Namespace": j.job.namespace,
                "Datacenters": j.job.datacenters, "Type": j.job.job_type, "Priority": j.job.priority,
                "Periodic": false, "ParameterizedJob": false, "Stop": j.stop, "Status": j.status,
                "StatusDescription": "", "JobSummary": summary(&j.job, &allocs),
                "CreateIndex": j.create_index, "ModifyIndex": j.modify_index, "JobModifyIndex": j.job_modify_index,
                "SubmitTime": j.submit_time,
            })
        })
        .collect();
    with_index(index, &stubs)
}

/// Nomad's JobSummary: per group, allocations by client status.
fn summary(job: &crate::jobspec::Job, allocs: &[Allocation]) -> serde_json::Value {
    let mut groups = serde_json::Map::new();
    for g in &job.task_groups {
        let count = |s: &str| {
            allocs
                .iter()
                .filter(|a| a.task_group == g.name && a.client_status == s)
                .count()
        };
        groups.insert(
            g.name.clone(),
            json!({
                "Queued": 0, "Complete": count("complete"), "Failed": count("failed"), "Running": count("running"),
                "Starting": count("pending"), "Lost": count("lost"), "Unknown": 0,
            }),
        );
    }
    json!({ "JobID": job.id, "Namespace": job.namespace, "Summary": groups })
}

async fn read(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let (index, _, rec) = q.job(&agent, &id).await?;
    Ok(with_index(index, &rec))
}

#[derive(Deserialize)]
struct DeregisterQuery {
    namespace: Option<String>,
    #[serde(default, deserialize_with = "super::go_bool_opt")]
    purge: Option<bool>,
}

async fn deregister(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<DeregisterQuery>,
) -> Result<Response, ApiError> {
    let ns = q.namespace.unwrap_or_else(|| "default".into());
    let r = agent
        .deregister_job(&ns, &id, q.purge.unwrap_or(false))
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::not_found("job not found"))?;
    Ok(with_index(
        r.index,
        &json!({ "EvalID": r.eval_id, "EvalCreateIndex": r.index, "JobModifyIndex": r.index, "Index": r.index }),
    ))
}

async fn allocations(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let (index, ns, _) = q.job(&agent, &id).await?;
    let stubs: Vec<_> = agent
        .job_allocations(&ns, &id)
        .iter()
        .map(super::allocs::stub)
        .collect();
    Ok(with_index(index, &stubs))
}

/// `GET /v1/job/{id}/summary`.
async fn job_summary(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let (index, ns, record) = q.job(&agent, &id).await?;
    let mut body = summary(&record.job, &agent.job_allocations(&ns, &id));
    body["Children"] = json!({ "Pending": 0, "Running": 0, "Dead": 0 });
    body["CreateIndex"] = json!(record.create_index);
    body["ModifyIndex"] = json!(record.modify_index);
    Ok(with_index(index, &body))
}

/// `POST /v1/jobs/parse`: `{"JobHCL": "...", "Canonicalize": true}` → the job as API JSON.
async fn parse(body: Bytes) -> Result<Response, ApiError> {
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))?;
    let hcl = v
        .get("JobHCL")
        .and_then(|h| h.as_str())
        .ok_or_else(|| ApiError::bad_request("JobHCL: missing required field"))?;
    // `Variables` is HCL text of `name = value` lines, as `nomad job run -var-file` sends.
    let mut vars = std::collections::BTreeMap::new();
    if let Some(text) = v.get("Variables").and_then(|x| x.as_str()) {
        let body = hcl::edit::parser::parse_body(text)
            .map_err(|e| ApiError::bad_request(format!("Variables: invalid HCL: {e}")))?;
        for a in body.iter().filter_map(|s| s.as_attribute()) {
            let span = hcl::edit::Span::span(&a.value).unwrap_or(0..0);
            vars.insert(a.key.as_str().to_string(), text[span].trim().to_string());
        }
    }
    let job = crate::jobspec::parse_job_hcl_with_vars(hcl, &vars)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(with_index(0, &job))
}
