//! `/v1/client/allocation/{id}/{restart,signal,stats,gc}` and `/v1/client/stats`: acting on
//! a running allocation's tasks, and the node's own usage.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::{ApiError, AppState, with_index};
use crate::allocrunner::AllocRunner;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/client/allocation/{id}/restart",
            post(restart).put(restart),
        )
        .route(
            "/v1/client/allocation/{id}/signal",
            post(signal).put(signal),
        )
        .route("/v1/client/allocation/{id}/stats", get(alloc_stats))
        .route("/v1/client/allocation/{id}/gc", get(gc).post(gc).put(gc))
        .route("/v1/client/stats", get(client_stats))
}

fn runner(agent: &AppState, id: &str) -> Result<std::sync::Arc<AllocRunner>, ApiError> {
    agent.alloc_runner(id).ok_or_else(|| {
        if agent.allocation(id).is_some() {
            ApiError::bad_request(format!("allocation {id} is not running"))
        } else {
            ApiError::not_found(format!("alloc {id:?} not found"))
        }
    })
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
    let r = runner(&agent, &id)?;
    let v = body_json(&body)?;
    let task = v["TaskName"].as_str().filter(|t| !t.is_empty());
    let mut restarted = 0;
    for t in r.tasks() {
        if task.is_some_and(|n| n != t.name()) {
            continue;
        }
        match t.restart("User requested restart") {
            Ok(()) => restarted += 1,
            Err(e) if task.is_some() => return Err(ApiError::bad_request(e)),
            Err(_) => {}
        }
    }
    if restarted == 0 {
        return Err(match task {
            Some(n) => ApiError::not_found(format!("task {n:?} is not in allocation {id}")),
            None => {
                ApiError::bad_request(format!("allocation {id} has no running task to restart"))
            }
        });
    }
    Ok(with_index(agent.changes.index(), &json!({})))
}

/// `{"Task": "t", "Signal": "SIGHUP"}`: one task, or every task.
async fn signal(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let r = runner(&agent, &id)?;
    let v = body_json(&body)?;
    let sig = v["Signal"].as_str().unwrap_or("SIGKILL");
    if crate::util::signal_number(sig).is_none() {
        return Err(ApiError::bad_request(format!(
            "Signal: unknown signal {sig:?}"
        )));
    }
    let task = v["Task"].as_str().filter(|t| !t.is_empty());
    let mut sent = 0;
    for t in r.tasks() {
        if task.is_some_and(|n| n != t.name()) {
            continue;
        }
        match t.signal(sig).await {
            Ok(()) => sent += 1,
            Err(e) if task.is_some() => return Err(ApiError::bad_request(e)),
            Err(_) => {}
        }
    }
    if sent == 0 {
        return Err(match task {
            Some(n) => ApiError::not_found(format!("task {n:?} is not in allocation {id}")),
            None => ApiError::bad_request(format!("allocation {id} has no running task to signal")),
        });
    }
    Ok(with_index(agent.changes.index(), &json!({})))
}

fn usage_json(u: &crate::runtime::bindings::v0_1_0::types::ResourceUsage) -> Value {
    json!({
        "MemoryStats": { "RSS": u.rss_bytes, "Measured": ["RSS"] },
        "CpuStats": {
            "UserMode": u.cpu_user_ns as f64 / 1e9,
            "SystemMode": u.cpu_system_ns as f64 / 1e9,
            "TotalTicks": (u.cpu_user_ns + u.cpu_system_ns) as f64 / 1e6,
            "Percent": u.cpu_percent,
            "Measured": ["User Mode", "System Mode", "Total Ticks", "Percent"],
        },
    })
}

async fn alloc_stats(
    State(agent): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let r = runner(&agent, &id)?;
    let now = crate::util::now_nanos();
    let assigned = r.shared().peek(|a| a.allocated_resources.tasks.clone());
    let device_stats = if assigned.values().any(|t| !t.devices.is_empty()) {
        agent.devices.stats().await
    } else {
        Vec::new()
    };
    let mut all_devices = Vec::new();
    let mut tasks = serde_json::Map::new();
    let (mut rss, mut user, mut system) = (0u64, 0u64, 0u64);
    for t in r.tasks() {
        if let Some(u) = t.stats().await {
            rss += u.rss_bytes;
            user += u.cpu_user_ns;
            system += u.cpu_system_ns;
            let mut usage = usage_json(&u);
            let devices = assigned
                .get(t.name())
                .map(|a| crate::devicemanager::DeviceManager::stats_of(&device_stats, &a.devices))
                .unwrap_or_default();
            all_devices.extend(devices.iter().cloned());
            usage["DeviceStats"] = json!(devices);
            tasks.insert(
                t.name().to_string(),
                json!({ "ResourceUsage": usage, "Timestamp": u.timestamp, "Pids": null }),
            );
        }
    }
    let total = crate::runtime::bindings::v0_1_0::types::ResourceUsage {
        rss_bytes: rss,
        cpu_user_ns: user,
        cpu_system_ns: system,
        cpu_percent: 0.0,
        timestamp: now,
    };
    let mut usage = usage_json(&total);
    usage["DeviceStats"] = json!(all_devices);
    Ok(with_index(
        agent.changes.index(),
        &json!({ "ResourceUsage": usage, "Tasks": tasks, "Timestamp": now }),
    ))
}

async fn gc(State(agent): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    match agent.gc_allocation(&id).await {
        Ok(true) => Ok(with_index(agent.changes.index(), &json!({}))),
        Ok(false) => Err(ApiError::not_found(format!("alloc {id:?} not found"))),
        Err(e) => Err(ApiError::bad_request(e)),
    }
}

/// Host memory: total, available and free, bytes.
pub(super) fn meminfo() -> (u64, u64, u64) {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let get = |k: &str| {
        text.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (get("MemTotal:"), get("MemAvailable:"), get("MemFree:"))
}

/// Host uptime, seconds.
pub(super) fn uptime_secs() -> u64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

async fn client_stats(State(agent): State<AppState>) -> Response {
    let (total, available, free) = meminfo();
    let uptime = uptime_secs();
    let disk = rustix::fs::statvfs(&agent.data_dir).ok();
    let (size, avail) = disk
        .map(|d| (d.f_blocks * d.f_frsize, d.f_bavail * d.f_frsize))
        .unwrap_or((0, 0));
    with_index(
        agent.changes.index(),
        &json!({
            "Memory": { "Total": total, "Available": available, "Used": total.saturating_sub(available), "Free": free },
            "Uptime": uptime,
            "AllocDirStats": {
                "Device": "", "Mountpoint": agent.data_dir, "Size": size, "Used": size.saturating_sub(avail),
                "Available": avail, "UsedPercent": if size > 0 { (size - avail) as f64 * 100.0 / size as f64 } else { 0.0 },
            },
            "DeviceStats": agent.devices.stats().await,
            "Timestamp": crate::util::now_nanos(),
        }),
    )
}
