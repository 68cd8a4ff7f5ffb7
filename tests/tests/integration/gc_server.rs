//! The server's own garbage collection (`server { job_gc_interval, *_gc_threshold }`):
//! what ended longer ago than its threshold is forgotten without anyone asking, what runs
//! or ended recently stays. The real binary with a config file, driven over HTTP.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{AgentProcess, NODE_DISK};

fn batch(id: &str) -> Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0 },
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "100ms" } }] }] })
}

fn service(id: &str) -> Value {
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "1h" } }] }] })
}

/// An agent whose config file holds `server` (and a node disk independent of the machine).
async fn agent_with(dir: &std::path::Path, server: &str) -> AgentProcess {
    AgentProcess::with_config(dir, &format!("{NODE_DISK}server {{\n{server}}}\n")).await
}

async fn status(agent: &AgentProcess, path: &str) -> u16 {
    agent
        .http
        .get(agent.url(path))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn one_with(status: &'static str) -> impl Fn(&[Value]) -> bool {
    move |a: &[Value]| a.len() == 1 && a[0]["ClientStatus"] == status
}

fn id(allocs: &[Value]) -> String {
    allocs[0]["ID"].as_str().unwrap().to_string()
}

/// A batch job that ended and a service job that was stopped, a running service job: the
/// first two are collected with their allocations, the last is left alone.
async fn ended_and_running_jobs(agent: &AgentProcess) -> (String, String, String) {
    agent.post_job(batch("ended")).await;
    agent.post_job(service("stopped")).await;
    agent.post_job(service("running")).await;
    let running = id(&agent.wait_allocs("running", one_with("running")).await);
    agent.wait_allocs("stopped", one_with("running")).await;
    let r = agent
        .http
        .delete(agent.url("/v1/job/stopped"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let ended = id(&agent.wait_allocs("ended", one_with("complete")).await);
    let stopped = id(&agent.wait_allocs("stopped", one_with("complete")).await);
    (ended, stopped, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_jobs_and_their_allocations_are_collected_after_their_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_with(
        dir.path(),
        "  job_gc_interval = \"1s\"\n  job_gc_threshold = \"2s\"\n  eval_gc_threshold = \"2s\"\n  batch_eval_gc_threshold = \"2s\"\n",
    )
    .await;
    let (ended, stopped, running) = ended_and_running_jobs(&agent).await;

    // Ended just now: kept until the threshold has passed.
    agent.post_job(batch("recent")).await;
    let recent = id(&agent.wait_allocs("recent", one_with("complete")).await);
    assert_eq!(
        status(&agent, &format!("/v1/allocation/{recent}")).await,
        200
    );
    assert_eq!(status(&agent, "/v1/job/recent").await, 200);

    let deadline = Instant::now() + Duration::from_secs(20);
    let gone = [
        format!("/v1/allocation/{ended}"),
        format!("/v1/allocation/{stopped}"),
        "/v1/job/ended".to_string(),
        "/v1/job/stopped".to_string(),
    ];
    loop {
        let mut left = Vec::new();
        for p in &gone {
            if status(&agent, p).await != 404 {
                left.push(p.clone());
            }
        }
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not collected: {left:?}\n{}",
            agent.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // What runs stays, however old.
    assert_eq!(
        status(&agent, &format!("/v1/allocation/{running}")).await,
        200
    );
    assert_eq!(status(&agent, "/v1/job/running").await, 200);
    let r = agent.get("/v1/job/running/allocations").await;
    assert_eq!(r.as_array().unwrap().len(), 1, "{r:#}");
    // The evaluations of the collected jobs went with them.
    let evals = agent.get("/v1/evaluations").await;
    let left: Vec<&Value> = evals
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["JobID"] == "ended" || e["JobID"] == "stopped")
        .collect();
    assert!(left.is_empty(), "{left:#?}");
    assert!(
        agent.log().contains("garbage collection removed"),
        "{}",
        agent.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_nomads_default_thresholds_nothing_ended_minutes_ago_is_collected() {
    let dir = tempfile::tempdir().unwrap();
    // Passes every second, Nomad's thresholds (an hour and more).
    let agent = agent_with(dir.path(), "  job_gc_interval = \"1s\"\n").await;
    let (ended, stopped, running) = ended_and_running_jobs(&agent).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    for p in [
        format!("/v1/allocation/{ended}"),
        format!("/v1/allocation/{stopped}"),
        format!("/v1/allocation/{running}"),
        "/v1/job/ended".to_string(),
        "/v1/job/stopped".to_string(),
        "/v1/job/running".to_string(),
    ] {
        assert_eq!(status(&agent, &p).await, 200, "{p}");
    }
}
