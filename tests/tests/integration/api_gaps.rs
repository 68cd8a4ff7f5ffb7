//! Answers a typed Nomad client reads, where this agent used to differ from Nomad: keys
//! Nomad always sends, keys it leaves out unless asked, an empty body where its handler
//! returns no object, the evaluation count, and a bad `wait` refused.

use serde_json::{Value, json};

use crate::harness::{TestAgent, mock_job};

#[tokio::test]
async fn keys_bodies_and_refusals_are_nomads() {
    let t = TestAgent::start("", vec![]).await;
    let batch = t
        .register(mock_job(
            "b",
            json!({ "run_for": "10ms", "stdout_string": "hello\n" }),
        ))
        .await;
    let svc = json!({ "ID": "s", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "1h" } }] }] });
    let r = t.post_job(svc).await;
    let r: Value = r.json().await.unwrap();
    // Nomad's default migrate strategy is always sent and asks for nothing to warn of.
    assert_eq!(r["Warnings"], "", "{r:#}");
    t.eval_done(r["EvalID"].as_str().unwrap()).await;

    // Jobs: the node pool and the job-level update strategy, always (a value in Nomad's
    // struct: zero for a batch job, the canonical default for a service job).
    let b = t.get("/v1/job/b").await;
    assert_eq!(b["NodePool"], "default");
    assert_eq!(b["Update"]["MaxParallel"], 0, "{b:#}");
    assert_eq!(b["Update"]["HealthCheck"], "");
    let s = t.get("/v1/job/s").await;
    assert_eq!(s["Update"]["MaxParallel"], 1);
    assert_eq!(s["Update"]["MinHealthyTime"], 10_000_000_000u64);
    assert_eq!(s["TaskGroups"][0]["Update"]["HealthCheck"], "checks");
    assert_eq!(
        s["TaskGroups"][0]["Migrate"],
        json!({ "MaxParallel": 1, "HealthCheck": "checks",
            "MinHealthyTime": 10_000_000_000u64, "HealthyDeadline": 300_000_000_000u64 })
    );
    assert_eq!(
        b["TaskGroups"][0]["Migrate"],
        Value::Null,
        "a batch group has none"
    );

    // An allocation's AllocModifyIndex: the server's last change (its placement here).
    let done = t.finished_alloc("b").await;
    let full = t
        .get(&format!("/v1/allocation/{}", done["ID"].as_str().unwrap()))
        .await;
    assert_eq!(full["AllocModifyIndex"], full["CreateIndex"], "{full:#}");
    assert!(full["ModifyIndex"].as_u64() > full["AllocModifyIndex"].as_u64());

    // The host's CPU per core and its disks.
    let stats = t.get("/v1/client/stats").await;
    assert_eq!(stats["CPU"][0]["CPU"], "cpu0", "{stats:#}");
    assert!(stats["CPU"][0]["Total"].as_f64().is_some());
    assert!(
        stats["DiskStats"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["Size"].as_u64() > Some(0))
    );

    // A file's content type, as Go's sniffing gives it.
    let stat = t
        .get(&format!(
            "/v1/client/fs/stat/{}?path=alloc/logs/t.stdout.0",
            done["ID"].as_str().unwrap()
        ))
        .await;
    assert_eq!(stat["ContentType"], "text/plain; charset=utf-8", "{stat:#}");
    let stat = t
        .get(&format!(
            "/v1/client/fs/stat/{}?path=alloc",
            done["ID"].as_str().unwrap()
        ))
        .await;
    assert_eq!(stat["ContentType"], "application/octet-stream");

    // Nodes: host volumes and networks (none), when the status last changed.
    let node = t.get("/v1/node/self").await;
    assert_eq!(node["HostVolumes"], json!({}));
    assert_eq!(node["HostNetworks"], json!({}));
    assert!(
        node["StatusUpdatedAt"].as_u64().unwrap() > 1_700_000_000,
        "{node:#}"
    );
    // Stubs leave the resources out unless asked (`omitempty`).
    let stubs = t.get("/v1/nodes").await;
    let stub = stubs[0].as_object().unwrap();
    assert!(!stub.contains_key("NodeResources") && !stub.contains_key("ReservedResources"));
    let stubs = t.get("/v1/nodes?resources=true").await;
    assert!(stubs[0]["NodeResources"].is_object());
    let allocs = t.get("/v1/allocations").await;
    assert!(allocs.as_array().unwrap().iter().all(|a| {
        let a = a.as_object().unwrap();
        !a.contains_key("AllocatedResources") && a.contains_key("DeploymentStatus")
    }));
    let allocs = t.get("/v1/allocations?resources=true").await;
    assert!(allocs[0]["AllocatedResources"].is_object());

    // Evaluations: RelatedEvals is sent (null unless asked); the count endpoint.
    let eval = t
        .get(&format!("/v1/evaluation/{}", batch["ID"].as_str().unwrap()))
        .await;
    assert!(eval.as_object().unwrap().contains_key("RelatedEvals"));
    assert_eq!(eval["RelatedEvals"], Value::Null);
    let listed = t.get("/v1/evaluations").await.as_array().unwrap().len();
    let count = t.get("/v1/evaluations/count").await;
    assert_eq!(count["Count"], listed);

    // The client's GC answers no body at all, as Nomad's handler returns no object.
    for path in [
        "/v1/client/gc".to_string(),
        format!(
            "/v1/client/allocation/{}/gc",
            t.finished_alloc("b").await["ID"].as_str().unwrap()
        ),
    ] {
        let r = t.http.get(t.url(&path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert!(r.headers().contains_key("X-Nomad-Index"));
        assert_eq!(r.bytes().await.unwrap().len(), 0, "{path}: a body");
    }

    // A `wait` that is not a duration is refused, not waited for by default.
    let (status, body) = t
        .send(reqwest::Method::GET, "/v1/jobs?index=1&wait=soon", None)
        .await;
    assert_eq!((status, body), (400, json!("Invalid wait time")));
    let (status, _) = t
        .send(reqwest::Method::GET, "/v1/jobs?index=1&wait=10ms", None)
        .await;
    assert_eq!(status, 200);
}
