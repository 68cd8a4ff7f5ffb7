//! Namespaces as objects: created, read, listed and deleted through Nomad's routes; a job
//! only in a namespace that exists and allows its drivers; kept across a `kill -9`.

use reqwest::Method;
use serde_json::json;

use crate::harness::{AgentProcess, TestAgent, mock_job};

#[tokio::test]
async fn namespaces_are_objects_jobs_live_in() {
    let t = TestAgent::start("", vec![]).await;
    let list = t.get("/v1/namespaces").await;
    assert_eq!(list.as_array().unwrap().len(), 1, "{list:#}");
    assert_eq!(list[0]["Name"], "default");
    assert_eq!(list[0]["Description"], "Default shared namespace");

    // A job in a namespace nobody created is refused, naming both.
    let mut job = mock_job("j", json!({ "run_for": "1h" }));
    job["Namespace"] = json!("prod");
    let (status, body) = t.post("/v1/jobs", json!({ "Job": job })).await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        json!("job \"j\" is in nonexistent namespace \"prod\"")
    );

    // Created with Nomad's fields; read back with its indexes and hash.
    let ns = json!({ "Name": "prod", "Description": "production", "Meta": { "team": "a" },
        "Capabilities": { "DisabledTaskDrivers": ["raw_exec"] } });
    let (status, body) = t.send(Method::PUT, "/v1/namespace/prod", Some(ns)).await;
    assert_eq!((status, body), (200, json!(null)));
    let prod = t.get("/v1/namespace/prod").await;
    assert_eq!(prod["Description"], "production");
    assert_eq!(prod["Meta"]["team"], "a");
    assert!(prod["CreateIndex"].as_u64().unwrap() > 0);
    assert_eq!(prod["CreateIndex"], prod["ModifyIndex"]);
    assert!(
        prod["Hash"].as_str().is_some_and(|h| !h.is_empty()),
        "{prod:#}"
    );
    // Updated through the create route: the create index stays.
    let (status, _) = t
        .post(
            "/v1/namespace",
            json!({ "Name": "prod", "Description": "prod v2",
            "Capabilities": { "DisabledTaskDrivers": ["raw_exec"] } }),
        )
        .await;
    assert_eq!(status, 200);
    let v2 = t.get("/v1/namespace/prod").await;
    assert_eq!(v2["Description"], "prod v2");
    assert_eq!(v2["CreateIndex"], prod["CreateIndex"]);
    assert!(v2["ModifyIndex"].as_u64() > prod["ModifyIndex"].as_u64());
    assert_ne!(v2["Hash"], prod["Hash"]);

    // Bad writes name what is wrong.
    let (status, body) = t
        .send(
            Method::PUT,
            "/v1/namespace/prod",
            Some(json!({ "Name": "other" })),
        )
        .await;
    assert_eq!(
        (status, body),
        (400, json!("Namespace name does not match request path"))
    );
    let (status, body) = t
        .post("/v1/namespace", json!({ "Name": "no spaces" }))
        .await;
    assert_eq!(status, 400);
    assert!(
        body.as_str()
            .unwrap()
            .contains("invalid name \"no spaces\""),
        "{body}"
    );
    let (status, body) = t.send(Method::GET, "/v1/namespace/nope", None).await;
    assert_eq!((status, body), (404, json!("Namespace not found")));

    // The job goes in now; a driver the namespace disables does not.
    t.register(job.clone()).await;
    assert_eq!(t.get("/v1/job/j?namespace=prod").await["Namespace"], "prod");
    // A namespace's default node pool is the pool of a job that names none.
    let (status, _) = t
        .post(
            "/v1/namespace",
            json!({ "Name": "pooled", "NodePoolConfiguration": { "Default": "gpu" } }),
        )
        .await;
    assert_eq!(status, 200);
    // Here that pool does not exist (the node is in `default`): refused as Nomad refuses it.
    let mut pooled = mock_job("p", json!({ "run_for": "1ms" }));
    pooled["Namespace"] = json!("pooled");
    let (status, body) = t.post("/v1/jobs", json!({ "Job": pooled.clone() })).await;
    assert_eq!(
        (status, body),
        (400, json!("job \"p\" is in nonexistent node pool \"gpu\""))
    );
    // `all` takes every node.
    pooled["NodePool"] = json!("all");
    t.register(pooled).await;
    assert_eq!(t.get("/v1/job/p?namespace=pooled").await["NodePool"], "all");
    let listed = t.get("/v1/jobs?namespace=pooled").await;
    assert_eq!(listed[0]["NodePool"], "all");
    let mut raw = json!({ "ID": "r", "Namespace": "prod", "Type": "batch", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "raw_exec", "Config": { "command": "/bin/true" } }] }] });
    let (status, body) = t.post("/v1/jobs", json!({ "Job": raw.clone() })).await;
    assert_eq!(
        (status, body),
        (
            400,
            json!("used task driver \"raw_exec\" is not allowed in namespace \"prod\"")
        )
    );
    // An empty namespace is `default`.
    raw["Namespace"] = json!("");
    raw["ID"] = json!("in-default");
    t.register(raw).await;
    assert_eq!(t.get("/v1/job/in-default").await["Namespace"], "default");

    // Not deleted while something lives in it; `default` never.
    let (status, body) = t.send(Method::DELETE, "/v1/namespace/prod", None).await;
    assert_eq!(status, 400);
    let why = body.as_str().unwrap();
    assert!(
        why.contains("namespace \"prod\" has non-terminal jobs"),
        "{why}"
    );
    assert!(why.contains("non-terminal allocations"), "{why}");
    let (status, body) = t.send(Method::DELETE, "/v1/namespace/default", None).await;
    assert_eq!(
        (status, body),
        (400, json!("can not delete default namespace"))
    );
    let (status, _) = t
        .send(Method::DELETE, "/v1/job/j?namespace=prod&purge=true", None)
        .await;
    assert_eq!(status, 200);
    let mut gone = false;
    for _ in 0..100 {
        let (status, _) = t.send(Method::DELETE, "/v1/namespace/prod", None).await;
        if status == 200 {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(gone, "prod could not be deleted once its job was purged");
    let names: Vec<String> = t
        .get("/v1/namespaces")
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["Name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["default", "pooled"]);
    // Deleting one that does not exist is no error, as in Nomad.
    let (status, _) = t.send(Method::DELETE, "/v1/namespace/prod", None).await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    let r = agent
        .http
        .put(agent.url("/v1/namespace/team-b"))
        .json(&json!({ "Name": "team-b", "Description": "kept" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    agent.kill9();
    agent.start().await;
    let ns = agent.get("/v1/namespace/team-b").await;
    assert_eq!(ns["Description"], "kept");
    let list = agent.get("/v1/namespaces?prefix=team").await;
    assert_eq!(list.as_array().unwrap().len(), 1, "{list:#}");
}
