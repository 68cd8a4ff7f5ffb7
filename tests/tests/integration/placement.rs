//! Nothing is placed that the node cannot hold or run: resources counted against the
//! node's (or the config's) totals, drivers and constraints checked, what does not fit
//! reported in Nomad's shape and retried when things change.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{TestAgent, agent_bin};

fn job(id: &str, count: u32, memory: u64, driver: &str, config: Value) -> Value {
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g", "Count": count,
        "Tasks": [{ "Name": "t", "Driver": driver, "Config": config,
            "Resources": { "CPU": 100, "MemoryMB": memory } }] }] })
}

fn sleeper(id: &str, count: u32, memory: u64) -> Value {
    job(id, count, memory, "mock", json!({ "run_for": "1h" }))
}

async fn allocs(t: &TestAgent, id: &str) -> Vec<Value> {
    t.get(&format!("/v1/job/{id}/allocations"))
        .await
        .as_array()
        .unwrap()
        .clone()
}

async fn wait_for_allocs(t: &TestAgent, id: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let a = allocs(t, id).await;
        let live: Vec<Value> = a
            .into_iter()
            .filter(|a| a["DesiredStatus"] == "run")
            .collect();
        if live.len() == n {
            return live;
        }
        assert!(Instant::now() < deadline, "{id}: {live:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// Multi-threaded: the CLI runs as a blocking child while this agent answers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_does_not_fit_is_accepted_not_placed_and_says_why() {
    let t = TestAgent::start("", vec![]).await;
    let eval = t.register(sleeper("huge", 3, 100_000_000)).await;
    assert_eq!(eval["Status"], "complete");
    let m = &eval["FailedTGAllocs"]["g"];
    assert_eq!(m["DimensionExhausted"]["memory"], 1, "{eval:#}");
    assert_eq!(m["NodesExhausted"], 1);
    assert_eq!(m["NodesEvaluated"], 1);
    assert_eq!(m["CoalescedFailures"], 2);
    assert_eq!(eval["QueuedAllocations"]["g"], 3);
    let blocked = t
        .get(&format!(
            "/v1/evaluation/{}",
            eval["BlockedEval"].as_str().unwrap()
        ))
        .await;
    assert_eq!(blocked["Status"], "blocked");
    assert_eq!(blocked["TriggeredBy"], "queued-allocs");
    assert!(allocs(&t, "huge").await.is_empty());
    let summary = t.get("/v1/job/huge/summary").await;
    assert_eq!(summary["Summary"]["g"]["Queued"], 3, "{summary:#}");

    // The CLI shows Nomad's placement failure and exits 2.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("huge.json");
    std::fs::write(
        &file,
        json!({ "Job": sleeper("huge2", 1, 100_000_000) }).to_string(),
    )
    .unwrap();
    let out = std::process::Command::new(agent_bin())
        .args(["job", "run", "-address", &t.base])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("failed to place all allocations"), "{text}");
    assert!(text.contains("Placement Failure"), "{text}");
    assert!(
        text.contains("Dimension \"memory\" exhausted on 1 nodes"),
        "{text}"
    );
    assert!(text.contains("waiting for additional capacity"), "{text}");
    let out = std::process::Command::new(agent_bin())
        .args(["job", "status", "-address", &t.base, "huge2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Placement Failure") && text.contains("Resources exhausted on 1 nodes"),
        "{text}"
    );
}

#[tokio::test]
async fn a_count_that_fits_in_part_places_what_fits_and_the_rest_when_a_job_stops() {
    // 1,000 MB for allocations once 200 are reserved.
    let t = TestAgent::start(
        "client {\n  memory_total_mb = 1200\n  reserved {\n    memory = 200\n  }\n}\n",
        vec![],
    )
    .await;
    let node = t.get("/v1/node/self").await;
    assert_eq!(node["NodeResources"]["Memory"]["MemoryMB"], 1200);
    assert_eq!(node["ReservedResources"]["Memory"]["MemoryMB"], 200);

    let eval = t.register(sleeper("first", 1, 600)).await;
    assert!(eval["FailedTGAllocs"].is_null(), "{eval:#}");
    wait_for_allocs(&t, "first", 1).await;
    // 400 left: one of two fits.
    let eval = t.register(sleeper("second", 2, 400)).await;
    assert_eq!(
        eval["FailedTGAllocs"]["g"]["DimensionExhausted"]["memory"],
        1
    );
    assert_eq!(eval["QueuedAllocations"]["g"], 1);
    wait_for_allocs(&t, "second", 1).await;

    // Stopping the first frees its memory: the blocked allocation is placed.
    let r = t.http.delete(t.url("/v1/job/first")).send().await.unwrap();
    assert!(r.status().is_success());
    wait_for_allocs(&t, "second", 2).await;
    let evals = t.get("/v1/job/second/evaluations").await;
    let evals = evals.as_array().unwrap();
    assert!(evals.iter().all(|e| e["Status"] != "blocked"), "{evals:#?}");
    assert!(
        evals
            .iter()
            .any(|e| e["TriggeredBy"] == "queued-allocs" && e["FailedTGAllocs"].is_null()),
        "{evals:#?}"
    );
    let summary = t.get("/v1/job/second/summary").await;
    assert_eq!(summary["Summary"]["g"]["Queued"], 0, "{summary:#}");
}

#[tokio::test]
async fn a_job_for_a_missing_driver_is_blocked_and_placed_once_the_driver_is_there() {
    // raw_exec without its `process` grant is undetected.
    let t = TestAgent::start(
        "plugin \"raw_exec\" {\n grant {\n env = true\n }\n}",
        vec![],
    )
    .await;
    let eval = t
        .register(job(
            "later",
            1,
            64,
            "raw_exec",
            json!({ "command": "/bin/sleep", "args": ["600"] }),
        ))
        .await;
    assert_eq!(
        eval["FailedTGAllocs"]["g"]["ConstraintFiltered"]["missing drivers"], 1,
        "{eval:#}"
    );
    assert_eq!(eval["FailedTGAllocs"]["g"]["NodesFiltered"], 1);
    let eval = t
        .register(job("nowhere", 1, 64, "docker", json!({ "image": "x" })))
        .await;
    assert_eq!(
        eval["FailedTGAllocs"]["g"]["ConstraintFiltered"]["missing drivers"],
        1
    );
    assert!(allocs(&t, "later").await.is_empty());

    // The operator grants it (a config reload): the driver comes up, the job is placed.
    let config = t._dir.path().join("test.hcl");
    std::fs::write(
        &config,
        "plugin \"raw_exec\" {\n grant {\n process = [\"/bin/*\"]\n }\n}",
    )
    .unwrap();
    let r = t.http.post(t.url("/v1/agent/reload")).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let a = wait_for_allocs(&t, "later", 1).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let a = t
            .get(&format!("/v1/allocation/{}", a[0]["ID"].as_str().unwrap()))
            .await;
        if a["ClientStatus"] == "running" {
            break;
        }
        assert!(Instant::now() < deadline, "{a:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The docker job stays blocked.
    assert!(allocs(&t, "nowhere").await.is_empty());
    let _ = t.http.delete(t.url("/v1/job/later")).send().await;
}

#[tokio::test]
async fn constraints_on_node_attributes_decide_placement() {
    let t = TestAgent::start(
        "client {\n  node_class = \"batch\"\n  meta {\n    rack = \"r1\"\n  }\n}\n",
        vec![],
    )
    .await;
    let with = |id: &str, constraints: Value| {
        let mut j = sleeper(id, 1, 64);
        j["Constraints"] = constraints;
        j
    };
    let eval = t
        .register(with(
            "win",
            json!([{ "LTarget": "${attr.kernel.name}", "RTarget": "windows", "Operand": "=" }]),
        ))
        .await;
    assert_eq!(
        eval["FailedTGAllocs"]["g"]["ConstraintFiltered"]["${attr.kernel.name} = windows"], 1,
        "{eval:#}"
    );
    let eval = t
        .register(with(
            "fits",
            json!([
                { "LTarget": "${attr.kernel.name}", "RTarget": "linux", "Operand": "=" },
                { "LTarget": "${node.class}", "RTarget": "batch", "Operand": "=" },
                { "LTarget": "${meta.rack}", "RTarget": "^r[0-9]$", "Operand": "regexp" },
                { "LTarget": "${attr.kernel.version}", "RTarget": ">= 3.0", "Operand": "version" },
                { "LTarget": "${meta.rack}", "Operand": "is_set" },
                { "LTarget": "${node.class}", "RTarget": "gpu", "Operand": "!=" }
            ]),
        ))
        .await;
    assert!(eval["FailedTGAllocs"].is_null(), "{eval:#}");
    wait_for_allocs(&t, "fits", 1).await;

    // From HCL: a constraint block, at group level.
    let hcl = r#"
job "hcl" {
  group "g" {
    constraint {
      attribute = "${meta.rack}"
      value     = "r2"
    }
    task "t" {
      driver = "mock"
      config {
        run_for = "1h"
      }
    }
  }
}
"#;
    let (status, parsed) = t.post("/v1/jobs/parse", json!({ "JobHCL": hcl })).await;
    assert_eq!(status, 200, "{parsed:#}");
    assert_eq!(
        parsed["TaskGroups"][0]["Constraints"],
        json!([{ "LTarget": "${meta.rack}", "RTarget": "r2", "Operand": "=" }])
    );
    let eval = t.register(parsed).await;
    assert_eq!(
        eval["FailedTGAllocs"]["g"]["ConstraintFiltered"]["${meta.rack} = r2"], 1,
        "{eval:#}"
    );
    for id in ["win", "fits", "hcl"] {
        let _ = t.http.delete(t.url(&format!("/v1/job/{id}"))).send().await;
    }
}
