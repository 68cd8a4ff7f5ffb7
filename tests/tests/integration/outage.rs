//! A state DB that cannot write (its disk made full at a chosen moment through
//! `PADDOCK_TEST_STATE_FULL_FILE`), then `kill -9`: what the API answered holds before and
//! after the restart, and nothing runs that no job shows. The real binary, a real redb file,
//! real processes under the task executor.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::AgentProcess;

/// An agent whose state DB commits fail as on a full disk while the returned file exists.
fn agent_with_full_switch(dir: &Path) -> (AgentProcess, PathBuf) {
    let full = dir.join("disk-full");
    let mut agent = AgentProcess::new(dir);
    agent.env.push((
        "PADDOCK_TEST_STATE_FULL_FILE".into(),
        full.display().to_string(),
    ));
    (agent, full)
}

fn sleeper(id: &str) -> Value {
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "1h" } }] }] })
}

fn running(a: &[Value]) -> bool {
    a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "running"
}

async fn delete(agent: &AgentProcess, path: &str) -> (u16, String) {
    let r = agent.http.delete(agent.url(path)).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// `GET /v1/job/{id}`: the status, and the job's `Stop` when it was found.
async fn job_stop(agent: &AgentProcess, id: &str) -> (u16, Option<bool>) {
    let r = agent
        .http
        .get(agent.url(&format!("/v1/job/{id}")))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap_or_default();
    (status, body["Stop"].as_bool())
}

/// Wait (20 s at most) until the state DB takes writes again.
async fn writable(agent: &AgentProcess) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let m = agent.get("/v1/metrics").await;
        let gauge = m["Gauges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["Name"] == "paddock.state.writable")
            .and_then(|g| g["Value"].as_f64());
        if gauge == Some(1.0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the state DB still refuses writes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A stop and a purge whose own write the state DB refuses are answered 503 and change
/// nothing: the job reads as it was and its allocation runs on, before and after `kill -9`.
/// (The job was taken out of the job table, or its allocations stopped, before the write
/// was known to fail: the soak saw a purge it was told had failed read 404, then the job
/// come back after `kill -9`, and services short of their Count.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_or_purge_refused_by_a_full_disk_changes_nothing_before_or_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let (mut agent, full) = agent_with_full_switch(dir.path());
    agent.start().await;
    for id in ["stop-me", "purge-me"] {
        agent.post_job(sleeper(id)).await;
        agent.wait_allocs(id, running).await;
    }
    // A purge follows a stop, as in the soak.
    assert_eq!(delete(&agent, "/v1/job/purge-me").await.0, 200);
    agent
        .wait_allocs("purge-me", |a| {
            a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "dead"
        })
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The disk fills; the stop is the write that finds it full.
    std::fs::write(&full, b"").unwrap();
    let (status, body) = delete(&agent, "/v1/job/stop-me").await;
    assert_eq!(status, 503, "{body}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(job_stop(&agent, "stop-me").await, (200, Some(false)));
    let allocs = agent.get("/v1/job/stop-me/allocations").await;
    let allocs = allocs.as_array().unwrap();
    assert!(running(allocs), "{allocs:#?}");
    assert_eq!(allocs[0]["DesiredStatus"], "run");

    // Another outage, where the purge is the write that finds the disk full.
    std::fs::remove_file(&full).unwrap();
    writable(&agent).await;
    std::fs::write(&full, b"").unwrap();
    let (status, body) = delete(&agent, "/v1/job/purge-me?purge=true").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(job_stop(&agent, "purge-me").await, (200, Some(true)));

    // A crash while the disk is full; the restart finds it back.
    agent.kill9();
    std::fs::remove_file(&full).unwrap();
    agent.start().await;
    assert_eq!(job_stop(&agent, "stop-me").await, (200, Some(false)));
    agent.wait_allocs("stop-me", running).await;
    assert_eq!(job_stop(&agent, "purge-me").await, (200, Some(true)));

    // Acknowledged, the purge holds across kill -9.
    assert_eq!(delete(&agent, "/v1/job/purge-me?purge=true").await.0, 200);
    assert_eq!(job_stop(&agent, "purge-me").await.0, 404);
    agent.kill9();
    agent.start().await;
    assert_eq!(job_stop(&agent, "purge-me").await.0, 404);
    agent.wait_allocs("stop-me", running).await;
}
