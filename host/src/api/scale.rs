//! A job's scale (`GET|POST /v1/job/{id}/scale`, what `nomad job scale` uses).

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde_json::{Value, json};

use super::jobs::{register_refused, register_response};
use super::routes::Routes;
use super::{ApiError, AppState, QueryOptions, with_index};
use crate::acl::check::{Need, NsFrom};
use crate::agent::RegisterOptions;
use crate::server::scaling::ScalingEvent;
use crate::structs::ClientStatus;

pub(super) fn routes() -> Routes {
    Routes::new()
        .on("GET", "/v1/job/{id}/scale", status, |_| {
            Need::Ns(&["read-job-scaling", "read-job"], NsFrom::Query)
        })
        .on("POST PUT", "/v1/job/{id}/scale", scale, |_| {
            Need::Ns(&["scale-job", "submit-job"], NsFrom::Query)
        })
}

/// `GET /v1/job/{id}/scale`: Nomad's `JobScaleStatusResponse`.
async fn status(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let (index, ns, job) = q.job(&agent, &id).await?;
    let allocs = agent.server().job_allocations(&ns, &id, false);
    let events = agent.server().scaling_events(&ns, &id);
    let groups: serde_json::Map<String, Value> = job
        .task_groups
        .iter()
        .map(|g| {
            let mine = || allocs.iter().filter(|a| a.task_group == g.name);
            let placed = mine().filter(|a| !a.is_terminal()).count();
            let running = mine()
                .filter(|a| a.client_status == ClientStatus::Running)
                .count();
            (
                g.name.clone(),
                json!({
                    "Desired": job.placed_count(g), "Placed": placed, "Running": running,
                    "Healthy": running, "Unhealthy": 0,
                    "Events": events.get(&g.name),
                }),
            )
        })
        .collect();
    Ok(with_index(
        index,
        &json!({
            "JobID": job.id, "Namespace": job.namespace,
            "JobCreateIndex": job.state.create_index, "JobModifyIndex": job.state.job_modify_index,
            "JobStopped": job.stop, "TaskGroups": groups,
        }),
    ))
}

/// `POST /v1/job/{id}/scale`: Nomad's `ScalingRequest` (`Count`, `Target`, `Message`,
/// `Error`, `Meta`, `PolicyOverride`, `EnforceIndex`/`JobModifyIndex`), checked as Nomad's
/// `Job.Scale` checks it. With `Count`, a new version of the job with the group's count
/// changed, registered as any change is; with or without, a scaling event recorded for the
/// group.
async fn scale(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let v: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))?;
    let (group, count, error) = request(&v, &q.namespace(), &id)?;
    let (_, ns, job) = q.job(&agent, &id).await?;
    let previous = job
        .task_groups
        .iter()
        .find(|g| g.name == group)
        .map(|g| i64::from(g.count))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "task group {group:?} specified for scaling does not exist in job"
            ))
        })?;
    let mut answer = json!({ "EvalID": "", "EvalCreateIndex": 0,
        "JobModifyIndex": job.state.modify_index, "Warnings": "" });
    let mut eval_id = None;
    if let Some(count) = count {
        let r = scale_group(&agent, job, &group, count, &v)?;
        answer = register_response(&r);
        eval_id = Some(r.eval_id.clone()).filter(|e| !e.is_empty());
    }
    let event = ScalingEvent {
        time: i64::try_from(crate::util::now_nanos()).unwrap_or(i64::MAX),
        count,
        previous_count: previous,
        message: v["Message"].as_str().unwrap_or_default().to_string(),
        error,
        meta: v["Meta"].as_object().cloned(),
        eval_id,
        create_index: 0,
    };
    let index = agent
        .server()
        .record_scaling_event(&ns, &id, &group, event)
        .map_err(ApiError::internal)?;
    answer["Index"] = json!(index);
    Ok(with_index(index, &answer))
}

/// A scaling request's group, count and error flag, checked as Nomad's
/// `JobScaleRequest.Validate` checks them (`namespace` and `id`: the URL's).
fn request(v: &Value, namespace: &str, id: &str) -> Result<(String, Option<i64>, bool), ApiError> {
    let target = &v["Target"];
    if target["Namespace"]
        .as_str()
        .is_some_and(|n| !n.is_empty() && n != namespace)
    {
        return Err(ApiError::bad_request(
            "namespace in payload did not match header",
        ));
    }
    if target["Job"]
        .as_str()
        .is_some_and(|j| !j.is_empty() && j != id)
    {
        return Err(ApiError::bad_request("job ID in payload did not match URL"));
    }
    let group = target["Group"]
        .as_str()
        .filter(|g| !g.is_empty())
        .ok_or_else(|| ApiError::bad_request("missing task group name for scaling action"))?
        .to_string();
    let count = match &v["Count"] {
        Value::Null => None,
        c => Some(
            c.as_i64()
                .ok_or_else(|| ApiError::bad_request(format!("Count: {c} is not an integer")))?,
        ),
    };
    let error = v["Error"].as_bool().unwrap_or(false);
    if let Some(c) = count {
        if c < 0 {
            return Err(ApiError::bad_request(
                "scaling action count can't be negative",
            ));
        }
        if error {
            return Err(ApiError::bad_request(
                "scaling action should not contain count if error is true",
            ));
        }
    }
    Ok((group, count, error))
}

/// Change `group`'s count to `count` and register the job, as Nomad's `Job.Scale` does:
/// within the group's scaling policy, not while a deployment of this job runs.
fn scale_group(
    agent: &AppState,
    mut job: crate::jobspec::Job,
    group: &str,
    count: i64,
    v: &Value,
) -> Result<crate::agent::Registered, ApiError> {
    if job.is_parent() {
        return Err(ApiError::bad_request(
            "can't scale a periodic or parameterized job: scale its children",
        ));
    }
    if job.job_type == crate::jobspec::JobType::System && count > 1 {
        return Err(ApiError::bad_request(
            r#"jobs of type "system" can only be scaled between 0 and 1"#,
        ));
    }
    let g = job
        .task_groups
        .iter_mut()
        .find(|g| g.name == group)
        .expect("the group was found");
    if let Some(policy) = g.kept.get("Scaling").filter(|p| p.is_object()) {
        if let Some(min) = policy["Min"].as_i64().filter(|m| count < *m) {
            return Err(ApiError::bad_request(format!(
                "group count was less than scaling policy minimum: {count} < {min}"
            )));
        }
        if let Some(max) = policy["Max"].as_i64().filter(|m| count > *m) {
            return Err(ApiError::bad_request(format!(
                "group count was greater than scaling policy maximum: {count} > {max}"
            )));
        }
    }
    g.count = u32::try_from(count).map_err(|_| {
        ApiError::bad_request(format!("Count: {count} must be between 0 and {}", u32::MAX))
    })?;
    let running = agent
        .server()
        .latest_deployment(&job.namespace, &job.id)
        .is_some_and(|d| d.active() && d.job_create_index == job.state.create_index);
    if running {
        return Err(ApiError::bad_request(
            "job scaling blocked due to active deployment",
        ));
    }
    let enforce_index = match (&v["EnforceIndex"], &v["JobModifyIndex"]) {
        (Value::Bool(true), i) => Some(i.as_u64().unwrap_or(0)),
        _ => None,
    };
    agent
        .server()
        .register_job_with(
            job,
            RegisterOptions {
                enforce_index,
                ..Default::default()
            },
        )
        .map_err(register_refused)
}
