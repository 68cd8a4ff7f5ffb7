//! A state DB that cannot write (its disk made full at a chosen moment through
//! `PADDOCK_TEST_STATE_FULL_FILE`), then `kill -9`: what the API answered holds before and
//! after the restart, and nothing runs that no job shows. The real binary, a real redb file,
//! real processes under the task executor.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{AgentProcess, alive, pid_in};

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

fn raw_sleeper(id: &str) -> Value {
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sh", "args": ["-c", "echo $$ > local/pid; exec sleep 600"] } }] }] })
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

/// Processes recorded before a `kill -9` that no restored task takes back are killed: a
/// task whose handle never reached the state file (the state DB refused it) is started
/// again, and its first process would run on beside the second; a process whose
/// allocation's rows are gone would run for an allocation no job shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_no_restored_task_takes_back_are_killed_after_a_restart() {
    use paddock::state::{LocalTaskState, RedbState, StateDb};

    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    let pid_file = |alloc: &str| {
        dir.path()
            .join("data/alloc")
            .join(alloc)
            .join("t/local/pid")
    };
    let mut allocs = Vec::new();
    let mut pids = Vec::new();
    for id in ["lost-handle", "lost-alloc", "kept"] {
        agent.post_job(raw_sleeper(id)).await;
        let a = agent.wait_allocs(id, running).await;
        let alloc = a[0]["ID"].as_str().unwrap().to_string();
        pids.push(pid_in(&pid_file(&alloc)).await);
        allocs.push(alloc);
    }
    agent.kill9();
    {
        let db = RedbState::open(&dir.path().join("data/state.redb")).unwrap();
        // What a refused write leaves: the task's handle never stored, and an allocation
        // whose rows are gone; their processes are recorded.
        db.put_local_state(&allocs[0], "t", &LocalTaskState::default())
            .unwrap();
        db.delete_alloc(&allocs[1]).unwrap();
        assert_eq!(db.processes().unwrap().len(), 3);
    }
    agent.start().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pids[0]) || alive(pids[1]) {
        assert!(
            Instant::now() < deadline,
            "left running: the first {}, the second {}\n{}",
            alive(pids[0]),
            alive(pids[1]),
            agent.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The task without a handle runs again, once, as a new process.
    agent.wait_allocs("lost-handle", running).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let new_pid = loop {
        let p = pid_in(&pid_file(&allocs[0])).await;
        if p != pids[0] {
            break p;
        }
        assert!(Instant::now() < deadline, "the task was not started again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(alive(new_pid));
    // The task that was taken back runs on, untouched.
    let kept = agent.wait_allocs("kept", running).await;
    assert_eq!(kept[0]["TaskStates"]["t"]["Restarts"], 0);
    assert!(alive(pids[2]));
    // The reaper says so once it has killed them; on a busy machine the line may land a
    // moment after the processes are seen gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !agent
        .log()
        .contains("killed processes recorded before the restart")
    {
        assert!(Instant::now() < deadline, "{}", agent.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A task restarted while the state DB cannot write waits for it and starts once it
/// writes: its start used to fail (the executor could not record the new process), the
/// driver called that unrecoverable, and the service's allocation failed for the disk's
/// sake (the soak's services short of their Count).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_restarted_while_the_state_db_cannot_write_starts_once_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let (mut agent, full) = agent_with_full_switch(dir.path());
    agent.start().await;
    agent.post_job(raw_sleeper("restarted")).await;
    let allocs = agent.wait_allocs("restarted", running).await;
    let alloc = allocs[0]["ID"].as_str().unwrap().to_string();
    let pid_file = dir
        .path()
        .join("data/alloc")
        .join(&alloc)
        .join("t/local/pid");
    let first = pid_in(&pid_file).await;

    std::fs::write(&full, b"").unwrap();
    let r = agent
        .http
        .post(agent.url(&format!("/v1/client/allocation/{alloc}/restart")))
        .json(&json!({ "TaskName": "t" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    while alive(first) {
        assert!(
            Instant::now() < deadline,
            "the restart did not stop the task"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Waiting, not failed, while the disk is full.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let a = agent.alloc(&alloc).await;
    assert_ne!(a["ClientStatus"], "failed", "{a:#}");
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        first.to_string()
    );

    std::fs::remove_file(&full).unwrap();
    let allocs = agent.wait_allocs("restarted", running).await;
    assert_eq!(allocs[0]["ClientStatus"], "running");
    let deadline = Instant::now() + Duration::from_secs(20);
    let second = loop {
        let p = pid_in(&pid_file).await;
        if p != first {
            break p;
        }
        assert!(Instant::now() < deadline, "the task was not started again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(alive(second));
    let a = agent.alloc(&alloc).await;
    let events: Vec<&str> = a["TaskStates"]["t"]["Events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["Type"].as_str().unwrap())
        .collect();
    assert!(!events.contains(&"Not Restarting"), "{events:?}");
}
