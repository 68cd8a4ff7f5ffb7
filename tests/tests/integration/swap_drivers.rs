//! Hot swap of a driver under running tasks, and what an agent restart makes of it: the real
//! agent binary, `raw_exec` versions made by rewriting its build stamp (build number and
//! handle format), real processes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::swap::{active_version, put, versions_of, wait_versions};
use crate::harness::{AgentProcess, alive};

/// `raw_exec` stamped with `build` and handle format `format`.
fn raw_exec(build: u32, format: u32) -> Vec<u8> {
    guest_artifacts::restamp(guest_artifacts::RAW_EXEC_DRIVER.bytes, build, format, "ok")
        .expect("raw_exec carries a stamp")
}

/// An agent whose `raw_exec` is build 1 from a watched components folder.
async fn agent_with_raw_exec(dir: &Path) -> (AgentProcess, PathBuf) {
    let comps = dir.join("components");
    std::fs::create_dir_all(&comps).unwrap();
    put(&comps, "raw_exec.wasm", &raw_exec(1, 1));
    let cfg = dir.join("agent.hcl");
    std::fs::write(
        &cfg,
        format!(
            "{}plugin \"raw_exec\" {{\n  grant {{\n    process = [\"*\"]\n  }}\n}}\n",
            crate::harness::NODE_DISK
        ),
    )
    .unwrap();
    let mut agent = AgentProcess::new(dir);
    agent.args = vec![
        "--components".into(),
        comps.display().to_string(),
        "--config".into(),
        cfg.display().to_string(),
    ];
    agent.start().await;
    wait_versions(&agent, "raw_exec", "build 1", |v| {
        active_version(v).as_deref() == Some("0.1.0+b1")
    })
    .await;
    (agent, comps)
}

/// A service job of `count` long-running raw_exec tasks that write their pid.
fn sleepers(id: &str, count: u32) -> Value {
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g", "Count": count,
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sh", "args": ["-c", "echo $$ > local/pid; exec sleep 600"] } }] }] })
}

/// Run `count` sleepers as job `id`; their allocation ids and pids.
async fn start_sleepers(agent: &AgentProcess, id: &str, count: u32) -> Vec<(String, u32)> {
    agent.post_job(sleepers(id, count)).await;
    let allocs = agent
        .wait_allocs(id, |a| {
            a.len() == count as usize
                && a.iter().all(|a| a["TaskStates"]["t"]["State"] == "running")
        })
        .await;
    let mut out = Vec::new();
    for a in allocs {
        let alloc = a["ID"].as_str().unwrap().to_string();
        let f = agent
            .dir
            .join("data/alloc")
            .join(&alloc)
            .join("t/local/pid");
        let deadline = Instant::now() + Duration::from_secs(20);
        let pid = loop {
            if let Some(p) = std::fs::read_to_string(&f)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
            {
                break p;
            }
            assert!(Instant::now() < deadline, "no pid file for {alloc}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        out.push((alloc, pid));
    }
    out
}

fn started_events(alloc: &Value) -> usize {
    alloc["TaskStates"]["t"]["Events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["Type"] == "Started")
        .count()
}

/// Every task still runs its first process: same pid, alive, no restart, one `Started`.
async fn untouched(agent: &AgentProcess, tasks: &[(String, u32)]) {
    for (alloc, pid) in tasks {
        assert!(alive(*pid), "task {alloc}'s process {pid} is gone");
        let a = agent.alloc(alloc).await;
        let t = &a["TaskStates"]["t"];
        assert_eq!(t["State"], "running", "{a:#}");
        assert_eq!(t["Restarts"], 0, "{a:#}");
        assert_eq!(started_events(&a), 1, "{a:#}");
    }
}

async fn stop_alloc(agent: &AgentProcess, alloc: &str) {
    let r = agent
        .http
        .post(agent.url(&format!("/v1/allocation/{alloc}/stop")))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_upgrade_moves_running_tasks_and_one_that_refuses_their_handles_drains() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, comps) = agent_with_raw_exec(dir.path()).await;
    let tasks = start_sleepers(&agent, "fleet", 20).await;

    // Build 2 reads format 1: every task moves to it, untouched.
    put(&comps, "raw_exec.wasm", &raw_exec(2, 1));
    let v = wait_versions(&agent, "raw_exec", "build 2 serving all 20 tasks", |v| {
        v.len() == 1
            && active_version(v).as_deref() == Some("0.1.0+b2")
            && v[0]["Tasks"].as_array().unwrap().len() == 20
    })
    .await;
    assert_eq!(v[0]["PreviousSHA256"].as_str().unwrap().len(), 64);
    untouched(&agent, &tasks).await;

    // Stats and stop go through build 2.
    let calls_before = v[0]["Calls"].as_u64().unwrap();
    let (first, first_pid) = &tasks[0];
    let stats = agent
        .get(&format!("/v1/client/allocation/{first}/stats"))
        .await;
    assert!(
        stats["Tasks"]["t"]["ResourceUsage"]["MemoryStats"]["RSS"]
            .as_u64()
            .unwrap()
            > 0,
        "{stats:#}"
    );
    stop_alloc(&agent, first).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(*first_pid) {
        assert!(
            Instant::now() < deadline,
            "the stopped task's process still runs"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let v = versions_of(&agent, "raw_exec").await;
    assert!(v[0]["Calls"].as_u64().unwrap() > calls_before, "{v:#?}");
    // `alloc stop` places a replacement (on build 2, the active one).
    agent
        .wait_allocs("fleet", |a| {
            a.iter().filter(|a| a["ClientStatus"] == "running").count() == 20
        })
        .await;

    // Build 3 writes and reads format 2: it refuses the 20 running tasks' handles, which
    // stay on build 2 (draining); new tasks start on build 3.
    put(&comps, "raw_exec.wasm", &raw_exec(3, 2));
    let v = wait_versions(
        &agent,
        "raw_exec",
        "build 3 active, build 2 draining",
        |v| {
            active_version(v).as_deref() == Some("0.1.0+b3")
                && v.iter().any(|c| {
                    c["State"] == "draining"
                        && c["PluginVersion"] == "0.1.0+b2"
                        && c["Tasks"].as_array().unwrap().len() == 20
                })
        },
    )
    .await;
    assert_eq!(v.len(), 2, "{v:#?}");
    untouched(&agent, &tasks[1..]).await;
    let newer = start_sleepers(&agent, "newer", 2).await;
    let v = versions_of(&agent, "raw_exec").await;
    let active = v.iter().find(|c| c["State"] == "active").unwrap();
    assert_eq!(active["Tasks"].as_array().unwrap().len(), 2, "{v:#?}");
    // The active version names the one it replaced, which still runs tasks.
    assert_eq!(active["Previous"]["PluginVersion"], "0.1.0+b2", "{v:#?}");
    assert_eq!(active["Previous"]["Draining"], true, "{v:#?}");
    assert_eq!(active["History"][0]["Kind"], "swapped", "{v:#?}");

    // A pinned task is still served by its version: signal and stop work.
    let (second, second_pid) = &tasks[1];
    stop_alloc(&agent, second).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(*second_pid) {
        assert!(Instant::now() < deadline, "the pinned task did not stop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // When the last pinned task ends, the draining version is let go.
    let r = agent
        .http
        .delete(agent.url("/v1/job/fleet"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let v = wait_versions(&agent, "raw_exec", "build 2 unloaded", |v| v.len() == 1).await;
    assert_eq!(active_version(&v).as_deref(), Some("0.1.0+b3"));
    for (_, pid) in &tasks {
        assert!(!alive(*pid));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let node = agent.get("/v1/node/self").await;
        let told = node["Events"].as_array().unwrap().iter().any(|e| {
            e["Message"]
                .as_str()
                .unwrap()
                .contains("raw_exec unloaded: its last running task ended")
        });
        if told {
            break;
        }
        assert!(Instant::now() < deadline, "{:#}", node["Events"]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let v = versions_of(&agent, "raw_exec").await;
    assert_eq!(v[0]["History"][0]["Kind"], "drained", "{v:#?}");
    assert_eq!(v[0]["Previous"]["Draining"], false, "{v:#?}");
    untouched(&agent, &newer).await;

    // Deleting the file: the built-in raw_exec serves again; it reads only format 1, so the
    // two tasks of build 3 keep their version, draining, until they end.
    std::fs::remove_file(comps.join("raw_exec.wasm")).unwrap();
    let v = wait_versions(
        &agent,
        "raw_exec",
        "built-in active, build 3 draining",
        |v| {
            active_version(v).as_deref() == Some("0.1.0")
                && v.iter().any(|c| {
                    c["State"] == "draining"
                        && c["PluginVersion"] == "0.1.0+b3"
                        && c["Tasks"].as_array().unwrap().len() == 2
                })
        },
    )
    .await;
    assert_eq!(v.len(), 2, "{v:#?}");
    untouched(&agent, &newer).await;
    let r = agent
        .http
        .delete(agent.url("/v1/job/newer"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    wait_versions(&agent, "raw_exec", "build 3 unloaded", |v| v.len() == 1).await;
    for (_, pid) in &newer {
        assert!(!alive(*pid));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_in_the_middle_of_a_swap_restarts_on_the_file_on_disk_with_every_task_known() {
    let dir = tempfile::tempdir().unwrap();
    let (mut agent, comps) = agent_with_raw_exec(dir.path()).await;
    let tasks = start_sleepers(&agent, "fleet", 5).await;

    // Build 2 is renamed in and the agent killed while it applies it.
    put(&comps, "raw_exec.wasm", &raw_exec(2, 1));
    tokio::time::sleep(Duration::from_millis(60)).await;
    agent.kill9();
    agent.start().await;
    let v = wait_versions(&agent, "raw_exec", "build 2 from disk", |v| {
        active_version(v).as_deref() == Some("0.1.0+b2")
            && v[0]["Tasks"].as_array().unwrap().len() == 5
    })
    .await;
    let on_disk = std::fs::read(comps.join("raw_exec.wasm")).unwrap();
    assert_eq!(
        v[0]["SHA256"],
        paddock::runtime::cache::sha256_hex(&on_disk)
    );
    for (alloc, pid) in &tasks {
        assert!(alive(*pid));
        let a = agent.alloc(alloc).await;
        assert_eq!(a["TaskStates"]["t"]["State"], "running", "{a:#}");
        assert_eq!(started_events(&a), 1, "{a:#}");
    }

    // Restarted with a build that cannot read their handles: the tasks are not dropped but
    // reported lost, with the version that started them named.
    agent.kill9();
    put(&comps, "raw_exec.wasm", &raw_exec(3, 2));
    agent.start().await;
    for (alloc, _) in &tasks {
        let deadline = Instant::now() + Duration::from_secs(30);
        let a = loop {
            let a = agent.alloc(alloc).await;
            if a["TaskStates"]["t"]["State"] == "dead" {
                break a;
            }
            assert!(Instant::now() < deadline, "{a:#}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let events = a["TaskStates"]["t"]["Events"].as_array().unwrap();
        let gone = events
            .iter()
            .rfind(|e| {
                e["Type"] == "Driver"
                    && e["DisplayMessage"]
                        .as_str()
                        .unwrap()
                        .contains("no longer loaded")
            })
            .unwrap_or_else(|| panic!("{a:#}"));
        assert_eq!(gone["Details"]["previous_sha256"], v[0]["SHA256"]);
        let lost = events
            .iter()
            .find(|e| e["Type"] == "Failed Restoring Task")
            .unwrap_or_else(|| panic!("{a:#}"));
        let m = lost["DisplayMessage"].as_str().unwrap();
        assert!(
            m.starts_with("task lost") && m.contains("handle format 1"),
            "{m}"
        );
        assert_eq!(lost["Details"]["lost"], "true");
        assert_eq!(started_events(&a), 1, "not started again: {a:#}");
    }
    // Lost means nothing reaches them any more: end them here.
    for (_, pid) in &tasks {
        kill(*pid);
    }
}

fn kill(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
}
