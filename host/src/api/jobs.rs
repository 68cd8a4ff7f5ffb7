//! `/v1/jobs`, `/v1/job/{id}` and friends.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use super::listing::{Key, ListQuery, Sees};
use super::routes::Routes;
use super::{ApiError, AppState, QueryOptions, with_index};
use crate::acl::check::{Need, NsFrom, READ_JOB};
use crate::acl::routes::NeedFn;
use crate::agent::{RegisterError, RegisterOptions};

pub(super) fn routes() -> Routes {
    let register_job: NeedFn = |_| Need::Ns(&["submit-job", "register-job"], NsFrom::JobBody);
    let read_job: NeedFn = |_| Need::Ns(READ_JOB, NsFrom::Query);
    Routes::new()
        // `Job.List`: `list-jobs`, across namespaces filtered per job.
        .on("GET", "/v1/jobs", list, |_| {
            Need::Ns(&["list-jobs"], NsFrom::List)
        })
        .on("POST PUT", "/v1/jobs", register, register_job)
        .on("GET", "/v1/job/{id}", read, read_job)
        .on("POST PUT", "/v1/job/{id}", register_id, register_job)
        // `Job.Deregister`: `deregister-job`, or `purge-job` with `?purge=true`.
        .on("DELETE", "/v1/job/{id}", deregister, |a| {
            if a.query_has("purge", "true") {
                Need::Ns(&["submit-job", "purge-job"], NsFrom::Query)
            } else {
                Need::Ns(&["submit-job", "deregister-job"], NsFrom::Query)
            }
        })
        .on("GET", "/v1/job/{id}/allocations", allocations, read_job)
        .on("GET", "/v1/job/{id}/summary", job_summary, read_job)
        .on("GET", "/v1/job/{id}/submission", submission, read_job)
        // `command/agent/job_endpoint.go`: validation needs `read-job` in the job's
        // namespace, parsing `parse-job | submit-job`.
        .on("POST PUT", "/v1/validate/job", validate, |_| {
            Need::Ns(READ_JOB, NsFrom::JobBody)
        })
        .on("POST PUT", "/v1/jobs/parse", parse, |_| {
            Need::Ns(&["parse-job", "submit-job"], NsFrom::Query)
        })
}

async fn register(State(agent): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let req = crate::jobspec::parse_register_request(&body)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    do_register(agent, req)
}

async fn register_id(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req = crate::jobspec::parse_register_request(&body)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    same_job_id(&req.job.id, &id)?;
    do_register(agent, req)
}

/// A body's job sent to `/v1/job/{id}/...` must be the job the URL names: a 400 otherwise.
pub(super) fn same_job_id(job_id: &str, url_id: &str) -> Result<(), ApiError> {
    if job_id != url_id {
        return Err(ApiError::bad_request(format!(
            "Job.ID: {job_id:?} does not match the job in the URL ({url_id:?})"
        )));
    }
    Ok(())
}

/// A registration's refusal as Nomad answers it: a job that cannot be placed as written
/// is a 400 naming the field; a failed `EnforceIndex` is Nomad's 500 with its message.
pub(super) fn register_refused(e: RegisterError) -> ApiError {
    match e {
        RegisterError::Invalid(bad) => ApiError::bad_request(bad.to_string()),
        RegisterError::NotFound(m) => ApiError::not_found(m),
        e @ RegisterError::Unacted(_) => ApiError::bad_request(e.to_string()),
        RegisterError::Namespace(e) => namespace_refused(e),
        e @ (RegisterError::IndexConflict { .. } | RegisterError::State(_)) => {
            ApiError::internal(e)
        }
    }
}

/// A namespace's refusal: 400 with its reason (Nomad answers these with a 500, as errors
/// of its RPC layer; they are the request's fault, so the client is told so); a state DB
/// failure is a 500.
pub(super) fn namespace_refused(e: crate::server::NamespaceError) -> ApiError {
    match e {
        crate::server::NamespaceError::Invalid(m) => ApiError::bad_request(m),
        e @ crate::server::NamespaceError::State(_) => ApiError::internal(e),
    }
}

fn do_register(
    agent: AppState,
    req: crate::jobspec::RegisterRequest,
) -> Result<Response, ApiError> {
    // As Nomad's server does: a source over the limit is dropped, the job registered, and
    // the answer's `Warnings` says so.
    let (submission, warning) =
        crate::structs::admit_submission(req.submission, crate::structs::MAX_SOURCE_SIZE);
    let r = agent
        .server()
        .submit_job_with(
            req.job,
            RegisterOptions {
                enforce_index: req.enforce_index,
                preserve_counts: req.preserve_counts,
                submission,
            },
        )
        .map_err(register_refused)?;
    let mut body = register_response(&r);
    if let Some(w) = warning {
        let mut all = r.warnings.clone();
        all.push(w);
        body["Warnings"] = json!(crate::jobspec::warnings_text(&all));
    }
    Ok(with_index(r.index, &body))
}

/// Nomad's `JobRegisterResponse`.
pub(super) fn register_response(r: &crate::agent::Registered) -> serde_json::Value {
    json!({
        "EvalID": r.eval_id,
        "EvalCreateIndex": if r.eval_id.is_empty() { 0 } else { r.index },
        "JobModifyIndex": r.job_modify_index,
        "Warnings": crate::jobspec::warnings_text(&r.warnings),
        "Index": r.index,
        "LastContact": 0,
        "KnownLeader": true,
    })
}

/// `POST /v1/validate/job`: the job's structure, then each task's driver: loaded, and its
/// config accepted by the driver's `validate-config` (configs holding `${...}` are checked
/// at start, once interpolated). A body with no job is a 400, as Nomad answers; a job that
/// does not parse is a 200 listing what is wrong.
async fn validate(State(agent): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))?;
    if v.get("Job").is_none_or(serde_json::Value::is_null) {
        return Err(ApiError::bad_request("Job must be specified"));
    }
    let (mut errors, mut driver_checked, mut warnings) = (Vec::new(), true, Vec::new());
    match crate::jobspec::parse_register_request(&body) {
        Err(e) => errors.push(e.to_string()),
        Ok(req) => {
            let v = agent.client().validate_job(&req.job).await;
            (errors, driver_checked) = (v.errors, v.driver_checked);
            // Refused in `error` mode: one validation error naming every field.
            match agent.server().unacted(&req.job) {
                Ok(w) => warnings = w,
                Err(e) => errors.push(e.to_string()),
            }
        }
    }
    let error = errors.join("; ");
    Ok(with_index(
        0,
        &json!({ "DriverConfigValidated": driver_checked && errors.is_empty(), "ValidationErrors": errors, "Error": error, "Warnings": crate::jobspec::warnings_text(&warnings) }),
    ))
}

/// `?meta=true`: include each job's meta in the list.
#[derive(Deserialize, Default)]
struct MetaFlag {
    #[serde(default, deserialize_with = "super::go_bool_opt")]
    meta: Option<bool>,
}

async fn list(
    State(agent): State<AppState>,
    Query(q): Query<QueryOptions>,
    Query(lq): Query<MetaFlag>,
    Query(list): Query<ListQuery>,
    w: Option<axum::Extension<super::acl::Who>>,
) -> Result<Response, ApiError> {
    let lister = list.lister()?;
    let sees = Sees::of(w.as_ref().map(|w| w.acl()));
    let index = q.block(&agent).await;
    let jobs: Vec<_> = agent
        .server()
        .jobs()
        .into_iter()
        .filter(|j| q.in_namespace(&j.namespace) && sees.namespace(&j.namespace, &["list-jobs"]))
        .filter(|j| q.prefix.as_deref().is_none_or(|p| j.id.starts_with(p)))
        .collect();
    // Ordered and paged by `Namespace.ID`, filtered on the whole job, as Nomad's are.
    let page = lister.page(
        jobs,
        |j| Key::namespaced(&j.namespace, &j.id),
        |j| serde_json::to_value(j).unwrap_or_default(),
    )?;
    let stubs: Vec<_> = page
        .items
        .iter()
        .map(|j| {
            let mut stub = json!({
                "ID": j.id, "ParentID": j.parent_id, "Name": j.name, "Namespace": j.namespace,
                "Datacenters": j.datacenters,
                "NodePool": j.kept.get("NodePool").and_then(|p| p.as_str()).unwrap_or("default"),
                "Type": j.job_type,
                "Priority": j.priority, "Periodic": j.is_periodic(),
                "ParameterizedJob": j.is_parameterized(), "Stop": j.stop, "Status": j.state.status,
                "StatusDescription": j.state.status_description, "JobSummary": agent.server().job_summary(j),
                "CreateIndex": j.state.create_index, "ModifyIndex": j.state.modify_index,
                "JobModifyIndex": j.state.job_modify_index, "SubmitTime": j.state.submit_time,
                "Version": j.state.version,
            });
            if lq.meta == Some(true) {
                stub["Meta"] = json!(j.meta);
            }
            stub
        })
        .collect();
    Ok(page.with_token(with_index(index, &stubs)))
}

async fn read(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let (index, _, job) = q.job(&agent, &id).await?;
    Ok(with_index(index, &job))
}

#[derive(Deserialize)]
struct DeregisterQuery {
    namespace: Option<String>,
    #[serde(default, deserialize_with = "super::go_bool_opt")]
    purge: Option<bool>,
    /// Multiregion jobs only.
    #[serde(default, deserialize_with = "super::go_bool_opt")]
    #[allow(dead_code)]
    global: Option<bool>,
    /// Evaluations are immediate here.
    #[allow(dead_code)]
    eval_priority: Option<i64>,
    #[serde(default, deserialize_with = "super::go_bool_opt")]
    #[allow(dead_code)]
    no_shutdown_delay: Option<bool>,
}

/// `DELETE /v1/job/{id}`: stop (or with `purge`, forget) a job. Deregistering a job that
/// does not exist is not an error in Nomad: it answers with no evaluation.
async fn deregister(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<DeregisterQuery>,
) -> Result<Response, ApiError> {
    let ns = q
        .namespace
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into());
    let r = agent
        .server()
        .deregister_job(&ns, &id, q.purge.unwrap_or(false))
        .map_err(ApiError::internal)?;
    let index = r.index.max(agent.index());
    Ok(with_index(
        index,
        &json!({
            "EvalID": r.eval_id, "EvalCreateIndex": if r.eval_id.is_empty() { 0 } else { r.index },
            "JobModifyIndex": r.job_modify_index, "VolumeEvalID": "", "VolumeEvalIndex": 0,
            "Index": index, "LastContact": 0, "KnownLeader": true,
        }),
    ))
}

/// `?all=true`: allocations of earlier jobs of the same id too (purged, then registered
/// again).
#[derive(Deserialize)]
struct AllFlag {
    #[serde(default, deserialize_with = "super::go_bool_opt")]
    all: Option<bool>,
}

async fn allocations(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    Query(aq): Query<AllFlag>,
) -> Result<Response, ApiError> {
    let (index, ns, _) = q.job(&agent, &id).await?;
    let stubs: Vec<_> = agent
        .server()
        .job_allocations(&ns, &id, aq.all.unwrap_or(false))
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
    let (index, _, job) = q.job(&agent, &id).await?;
    Ok(with_index(index, &agent.server().job_summary(&job)))
}

/// `?version=N` of `GET /v1/job/{id}/submission` (required).
#[derive(Deserialize)]
struct VersionQuery {
    version: Option<String>,
}

/// `GET /v1/job/{id}/submission?version=N`: the source that version of the job was
/// submitted as. No version (or not a number) is Nomad's 400, no source for it Nomad's 404.
async fn submission(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    Query(vq): Query<VersionQuery>,
) -> Result<Response, ApiError> {
    let version = vq
        .version
        .as_deref()
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| ApiError::bad_request("Unable to parse job submission version parameter"))?;
    let index = q.block(&agent).await;
    let sub = agent
        .server()
        .job_submission(&q.namespace(), &id, version)
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::not_found("job source not found"))?;
    Ok(with_index(index, &sub))
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
