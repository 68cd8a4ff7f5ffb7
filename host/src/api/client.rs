//! `/v1/client/allocation/{id}/{restart,signal,stats,gc}` and `/v1/client/stats`: acting on
//! a running allocation's tasks, and the node's own usage.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Response;
use serde_json::{Value, json};

use super::routes::Routes;
use super::{ApiError, AppState, with_index};
use crate::acl::Level;
use crate::acl::check::{Need, NsFrom, READ_JOB};
use crate::acl::routes::NeedFn;
use crate::agent::{AllocActionError, DeviceGroupStats, ResourceUsage};

pub(super) fn routes() -> Routes {
    let lifecycle: NeedFn = |a| Need::Ns(&["alloc-lifecycle"], NsFrom::Alloc(a.param("id")));
    Routes::new()
        // `client/alloc_endpoint.go`: restart and signal need `alloc-lifecycle`, stats
        // `read-job`, gc `submit-job | gc-allocation`, in the allocation's namespace.
        .on(
            "POST PUT",
            "/v1/client/allocation/{id}/restart",
            restart,
            lifecycle,
        )
        .on(
            "POST PUT",
            "/v1/client/allocation/{id}/signal",
            signal,
            lifecycle,
        )
        .on(
            "GET",
            "/v1/client/allocation/{id}/stats",
            alloc_stats,
            |a| Need::Ns(READ_JOB, NsFrom::Alloc(a.param("id"))),
        )
        .on(
            "GET",
            "/v1/client/allocation/{id}/checks",
            alloc_checks,
            |a| Need::Ns(READ_JOB, NsFrom::Alloc(a.param("id"))),
        )
        .on("GET POST PUT", "/v1/client/allocation/{id}/gc", gc, |a| {
            Need::Ns(
                &["submit-job", "gc-allocation"],
                NsFrom::Alloc(a.param("id")),
            )
        })
        .on("GET", "/v1/client/stats", client_stats, |_| {
            Need::Node(Level::Read)
        })
}

/// `GET /v1/client/allocation/{id}/checks`: the allocation's Nomad-native service checks'
/// latest results by check id (`{}` when it has none running), a 404 for an unknown one.
async fn alloc_checks(
    State(agent): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if agent.allocation(&id).is_none() {
        return Err(ApiError::not_found("alloc not found"));
    }
    Ok(with_index(
        agent.index(),
        &agent.client().check_results(&id),
    ))
}

/// An allocation operation's refusal as Nomad's status codes: an unknown allocation or
/// task is a 404, anything else the caller asked wrongly is a 400.
fn refused(e: AllocActionError) -> ApiError {
    match e {
        AllocActionError::NotFound(_) | AllocActionError::NoSuchTask { .. } => {
            ApiError::not_found(e.to_string())
        }
        AllocActionError::State(_) => ApiError::internal(e),
        _ => ApiError::bad_request(e.to_string()),
    }
}

fn body_json(body: &Bytes) -> Result<Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))
}

/// `{"TaskName": "t", "AllTasks": false}`: one task, or every running task.
async fn restart(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let v = body_json(&body)?;
    let task = v["TaskName"].as_str().filter(|t| !t.is_empty());
    agent.client().restart_alloc(&id, task).map_err(refused)?;
    Ok(with_index(agent.index(), &json!({})))
}

/// `{"Task": "t", "Signal": "SIGHUP"}`: one task, or every task.
async fn signal(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let v = body_json(&body)?;
    let sig = v["Signal"].as_str().unwrap_or("SIGKILL");
    let task = v["Task"].as_str().filter(|t| !t.is_empty());
    agent
        .client()
        .signal_alloc(&id, task, sig)
        .await
        .map_err(refused)?;
    Ok(with_index(agent.index(), &json!({})))
}

fn usage_json(u: &ResourceUsage, devices: &[DeviceGroupStats]) -> Value {
    json!({
        "MemoryStats": { "RSS": u.rss_bytes, "Measured": ["RSS"] },
        "CpuStats": {
            "UserMode": u.cpu_user_ns as f64 / 1e9,
            "SystemMode": u.cpu_system_ns as f64 / 1e9,
            "TotalTicks": (u.cpu_user_ns + u.cpu_system_ns) as f64 / 1e6,
            "Percent": u.cpu_percent,
            "Measured": ["User Mode", "System Mode", "Total Ticks", "Percent"],
        },
        "DeviceStats": devices,
    })
}

async fn alloc_stats(
    State(agent): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let stats = agent.client().alloc_stats(&id).await.map_err(refused)?;
    let tasks: serde_json::Map<String, Value> = stats
        .tasks
        .iter()
        .map(|(name, t)| {
            (
                name.clone(),
                json!({ "ResourceUsage": usage_json(&t.usage, &t.devices), "Timestamp": t.usage.timestamp, "Pids": null }),
            )
        })
        .collect();
    Ok(with_index(
        agent.index(),
        &json!({
            "ResourceUsage": usage_json(&stats.total.usage, &stats.total.devices),
            "Tasks": tasks,
            "Timestamp": stats.total.usage.timestamp,
        }),
    ))
}

async fn gc(State(agent): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    match agent.client().gc_allocation(&id).await {
        // As Nomad's handler, which returns no object: no body at all.
        Ok(true) => Ok(super::empty_with_index(agent.index())),
        Ok(false) => Err(ApiError::not_found(format!("alloc {id:?} not found"))),
        Err(e) => Err(refused(e)),
    }
}

async fn client_stats(State(agent): State<AppState>) -> Response {
    let stats = agent.client().client_stats().await;
    let (total, available, free) = stats.memory;
    let (size, avail) = stats.disk;
    with_index(
        agent.index(),
        &json!({
            "Memory": { "Total": total, "Available": available, "Used": total.saturating_sub(available), "Free": free },
            "Uptime": stats.uptime_secs,
            "AllocDirStats": {
                "Device": "", "Mountpoint": agent.data_dir(), "Size": size, "Used": size.saturating_sub(avail),
                "Available": avail, "UsedPercent": if size > 0 { (size - avail) as f64 * 100.0 / size as f64 } else { 0.0 },
            },
            "DeviceStats": stats.devices,
            "CPU": stats.cpu,
            "DiskStats": stats.disks,
            "Timestamp": crate::util::now_nanos(),
        }),
    )
}
