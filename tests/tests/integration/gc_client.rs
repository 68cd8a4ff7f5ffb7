//! Nomad's client garbage collection of ended allocations (`client { gc_* }`), on the real
//! agent process with its redb file and allocation directories: past `gc_max_allocs` the
//! oldest ended allocations lose their directory and runner while their records stay;
//! running allocations are never collected; over `gc_disk_usage_threshold` every ended
//! allocation goes; a restart keeps what was collected collected and counts what was not.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{AgentProcess, NODE_DISK_MB, all_terminal};

/// An agent with `client { <gc> }` besides the harness's disk.
async fn agent(dir: &Path, gc: &str) -> AgentProcess {
    let config = format!("client {{\n  disk_total_mb = {NODE_DISK_MB}\n{gc}\n}}\n");
    AgentProcess::with_config(dir, &config).await
}

/// A batch job whose one task prints a line and ends.
fn batch(id: &str) -> Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0 },
        "Tasks": [{ "Name": "t", "Driver": "mock",
            "Config": { "run_for": "10ms", "stdout_string": format!("hello from {id}\n") } }] }] })
}

/// Register `id` and return its allocation's id once it ended.
async fn run_batch(a: &AgentProcess, id: &str) -> String {
    a.post_job(batch(id)).await;
    let allocs = a.wait_allocs(id, all_terminal).await;
    allocs[0]["ID"].as_str().unwrap().to_string()
}

fn dir_of(a: &AgentProcess, alloc: &str) -> std::path::PathBuf {
    a.dir.join("data").join("alloc").join(alloc)
}

/// Wait until `done` holds of the allocation dirs, or fail showing them.
async fn wait_dirs(a: &AgentProcess, what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}; log:\n{}",
            a.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn past_gc_max_allocs_the_oldest_ended_allocations_are_collected_and_their_records_kept() {
    let dir = tempfile::tempdir().unwrap();
    // An hour between periodic runs: what is collected here is collected by the triggers.
    let mut a = agent(dir.path(), "gc_max_allocs = 3\ngc_interval = \"1h\"").await;

    let mut ended = Vec::new();
    for i in 0..3 {
        ended.push(run_batch(&a, &format!("b{i}")).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for id in &ended {
        assert!(dir_of(&a, id).exists(), "{id} collected under the limit");
    }

    // A fourth and a fifth: the client keeps 3, so the two oldest go, oldest first.
    ended.push(run_batch(&a, "b3").await);
    ended.push(run_batch(&a, "b4").await);
    wait_dirs(&a, "the two oldest ended allocations collected", || {
        !dir_of(&a, &ended[0]).exists() && !dir_of(&a, &ended[1]).exists()
    })
    .await;
    for id in &ended[2..] {
        assert!(dir_of(&a, id).exists(), "{id} collected out of order");
    }
    assert!(
        a.log()
            .contains("number of allocations (4) is over the limit (3)")
    );

    // Collected allocations keep their record (as Nomad's server keeps them), with their
    // final state; their logs are gone with their directory.
    let record = a.alloc(&ended[0]).await;
    assert_eq!(record["ClientStatus"], "complete", "{record}");
    assert_eq!(record["TaskStates"]["t"]["State"], "dead");
    let listed = a.get("/v1/job/b0/allocations").await;
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert!(a.stdout(&ended[4], "t").await.contains("hello from b4"));
    let logs = a
        .http
        .get(a.url(&format!(
            "/v1/client/fs/logs/{}?task=t&type=stdout&plain=true",
            ended[0]
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(logs.status().as_u16(), 404);

    // Running allocations count but are never collected: three running ones leave no
    // room for any ended one, and a fourth running one is still not touched.
    a.post_job(
        json!({ "ID": "svc", "Type": "service", "TaskGroups": [{ "Name": "g", "Count": 4,
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "1h" } }] }] }),
    )
    .await;
    let running = a
        .wait_allocs("svc", |v| {
            v.len() == 4 && v.iter().all(|x| x["ClientStatus"] == "running")
        })
        .await;
    wait_dirs(&a, "every ended allocation collected", || {
        ended.iter().all(|id| !dir_of(&a, id).exists())
    })
    .await;
    for r in &running {
        let id = r["ID"].as_str().unwrap();
        assert!(dir_of(&a, id).exists(), "running {id} collected");
    }

    // After a restart: the records are all there; nothing collected comes back.
    a.kill9();
    a.start().await;
    for id in &ended {
        assert_eq!(a.alloc(id).await["ClientStatus"], "complete");
        assert!(!dir_of(&a, id).exists());
    }
    let svc = a
        .wait_allocs("svc", |v| v.iter().all(|x| x["ClientStatus"] == "running"))
        .await;
    assert_eq!(svc.len(), 4);
}

#[tokio::test]
async fn over_the_disk_threshold_every_ended_allocation_is_collected_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // Any use of the disk is over 0 percent.
    let a = agent(
        dir.path(),
        "gc_disk_usage_threshold = 0\ngc_interval = \"1h\"",
    )
    .await;
    a.post_job(
        json!({ "ID": "svc", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "1h" } }] }] }),
    )
    .await;
    let running = a
        .wait_allocs("svc", |v| v.len() == 1 && v[0]["ClientStatus"] == "running")
        .await;
    let ended = run_batch(&a, "once").await;
    wait_dirs(&a, "the ended allocation collected", || {
        !dir_of(&a, &ended).exists()
    })
    .await;
    assert!(a.log().contains("is over gc threshold of 0"), "{}", a.log());
    let running = running[0]["ID"].as_str().unwrap();
    assert!(dir_of(&a, running).exists());
    assert_eq!(a.alloc(&ended).await["ClientStatus"], "complete");
}

#[tokio::test]
async fn a_bad_gc_key_stops_the_agent_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.hcl");
    std::fs::write(&config, "client {\n  gc_parallel_destroys = 0\n}\n").unwrap();
    let out = std::process::Command::new(crate::harness::agent_bin())
        .args(["run", "--dev", "--bind", "127.0.0.1:0", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("client.gc_parallel_destroys"), "{err}");
}
