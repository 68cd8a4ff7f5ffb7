//! Deployments on one node, as Nomad runs them: a canary beside the old allocations,
//! promoted by an operator, then the rest rolled `max_parallel` at a time, each step
//! waiting for health; an update whose tasks fail, auto-reverted to the stable version.

use std::time::Duration;

use paddock_tests::gotypes as go;
use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::TestAgent;

const S: u64 = 1_000_000_000;

/// Service `web`: `count` mock tasks, their config `config`, the group's `update`.
fn web(count: u32, config: Value, update: Value) -> Value {
    json!({ "ID": "web", "Type": "service", "TaskGroups": [{ "Name": "g", "Count": count,
        "RestartPolicy": { "Attempts": 0, "Mode": "fail" },
        "ReschedulePolicy": { "Attempts": 0, "Unlimited": false },
        "Update": update,
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": config }] }] })
}

fn update(canary: u32, auto_revert: bool) -> Value {
    json!({ "MaxParallel": 1, "Canary": canary, "AutoRevert": auto_revert,
        "MinHealthyTime": S, "HealthyDeadline": 30 * S, "ProgressDeadline": 60 * S })
}

/// A deployment of the job (any, newest first) once `done` holds for it.
async fn deployment_when(t: &TestAgent, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let all = t.get("/v1/job/web/deployments").await;
        let d = all
            .as_array()
            .and_then(|l| l.iter().find(|d| done(d)).cloned())
            .unwrap_or(all);
        if d.is_object() {
            return d;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "deployment never got there: {d:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn group(d: &Value) -> &Value {
    &d["TaskGroups"]["g"]
}

fn live_of(allocs: &[Value], version: u64) -> Vec<&Value> {
    allocs
        .iter()
        .filter(|a| a["JobVersion"] == version && a["DesiredStatus"] == "run")
        .filter(|a| a["ClientStatus"] != "complete" && a["ClientStatus"] != "failed")
        .collect()
}

#[tokio::test]
async fn a_canary_is_promoted_then_the_rest_roll_one_at_a_time() {
    let t = TestAgent::start("", vec![]).await;
    t.register(web(3, json!({ "run_for": "10m" }), update(1, false)))
        .await;
    let first = deployment_when(&t, |d| d["Status"] == "successful").await;
    assert_eq!(group(&first)["DesiredTotal"], 3);
    assert_eq!(group(&first)["HealthyAllocs"], 3);
    assert_eq!(
        group(&first)["DesiredCanaries"],
        0,
        "no canary on a first version"
    );
    let versions = t.get("/v1/job/web/versions").await;
    assert_eq!(
        versions["Versions"][0]["Stable"], true,
        "a successful version is stable"
    );

    // Version 1: the plan shows one canary and the rest left for later.
    let v1 = web(
        3,
        json!({ "run_for": "10m", "stdout_string": "v1" }),
        update(1, false),
    );
    let (status, plan) = t
        .post("/v1/job/web/plan", json!({ "Job": v1, "Diff": true }))
        .await;
    assert_eq!(status, 200, "{plan}");
    assert_eq!(
        plan["Annotations"]["DesiredTGUpdates"]["g"]["Canary"], 1,
        "{plan:#}"
    );
    t.register(v1).await;
    let d = deployment_when(&t, |d| {
        d["JobVersion"] == 1 && group(d)["HealthyAllocs"] == 1
    })
    .await;
    assert_eq!(d["Status"], "running");
    assert_eq!(
        d["StatusDescription"],
        "Deployment is running but requires manual promotion"
    );
    assert_eq!(group(&d)["DesiredCanaries"], 1);
    let canaries = group(&d)["PlacedCanaries"].as_array().unwrap().clone();
    assert_eq!(canaries.len(), 1);
    let allocs = t.get("/v1/job/web/allocations").await;
    let allocs = allocs.as_array().unwrap();
    assert_eq!(
        live_of(allocs, 0).len(),
        3,
        "the old allocations all run beside the canary"
    );
    assert_eq!(live_of(allocs, 1).len(), 1);
    let canary = t
        .get(&format!("/v1/allocation/{}", canaries[0].as_str().unwrap()))
        .await;
    assert_eq!(canary["DeploymentID"], d["ID"]);
    assert_eq!(canary["DeploymentStatus"]["Canary"], true);
    assert_eq!(canary["DeploymentStatus"]["Healthy"], true);

    // Promoted: the rest roll, never more than one new allocation not yet healthy.
    let id = d["ID"].as_str().unwrap();
    // Only in its own namespace: asked in another, it is not found and nothing happens.
    let (status, _) = t
        .send(
            Method::GET,
            &format!("/v1/deployment/{id}?namespace=other"),
            None,
        )
        .await;
    assert_eq!(status, 404);
    let (status, r) = t
        .post(
            &format!("/v1/deployment/promote/{id}?namespace=other"),
            json!({ "All": true }),
        )
        .await;
    assert_eq!((status, r), (500, json!("deployment not found")));
    let (status, r) = t
        .post(
            &format!("/v1/deployment/promote/{id}"),
            json!({ "All": true }),
        )
        .await;
    assert_eq!(status, 200, "{r}");
    let answer: go::DeploymentUpdateResponse = go::decode(&r).expect("Nomad's Go type");
    assert_ne!(answer.EvalID, "", "a promotion evaluates the job");
    let d: go::Deployment = go::decode(&t.get(&format!("/v1/deployment/{id}")).await).unwrap();
    assert!(d.TaskGroups["g"].as_ref().unwrap().Promoted);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let allocs = t.get("/v1/job/web/allocations").await;
        let allocs = allocs.as_array().unwrap();
        let new = live_of(allocs, 1);
        let unhealthy = new
            .iter()
            .filter(|a| a["DeploymentStatus"]["Healthy"] != true)
            .count();
        assert!(
            unhealthy <= 1,
            "max_parallel 1, {unhealthy} in flight: {allocs:#?}"
        );
        assert!(
            live_of(allocs, 0).len() + new.len() <= 4,
            "at most one allocation beside the count"
        );
        let d = t.get(&format!("/v1/deployment/{id}")).await;
        if d["Status"] == "successful" {
            assert_eq!(new.len(), 3, "{allocs:#?}");
            assert!(
                live_of(allocs, 0).is_empty(),
                "every old allocation stopped"
            );
            assert_eq!(group(&d)["Promoted"], true);
            assert_eq!(group(&d)["HealthyAllocs"], 3);
            break;
        }
        assert_ne!(d["Status"], "failed", "{d:#}");
        assert!(tokio::time::Instant::now() < deadline, "{d:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let all = t.get("/v1/deployments").await;
    assert_eq!(all.as_array().unwrap().len(), 2);
    let (status, r) = t
        .post(&format!("/v1/deployment/fail/{id}"), json!({}))
        .await;
    assert_eq!((status, r), (500, json!("can't fail terminal deployment")));

    // A forced garbage collection forgets every ended deployment, as Nomad's does.
    let (status, _) = t.send(Method::PUT, "/v1/system/gc", None).await;
    assert_eq!(status, 200);
    assert_eq!(t.get("/v1/deployments").await, json!([]));
    assert_eq!(t.get("/v1/job/web/deployment").await, Value::Null);
}

#[tokio::test]
async fn an_update_whose_tasks_fail_is_reverted_to_the_stable_version() {
    let t = TestAgent::start("", vec![]).await;
    let good = json!({ "run_for": "10m", "stdout_string": "good" });
    t.register(web(2, good.clone(), update(0, true))).await;
    deployment_when(&t, |d| d["Status"] == "successful").await;

    let bad = json!({ "run_for": "100ms", "exit_code": 1 });
    t.register(web(2, bad, update(0, true))).await;
    let failed = deployment_when(&t, |d| d["JobVersion"] == 1 && d["Status"] == "failed").await;
    assert_eq!(
        failed["StatusDescription"],
        "Failed due to unhealthy allocations - rolling back to job version 0"
    );
    assert_eq!(group(&failed)["UnhealthyAllocs"], 1);
    // Only one allocation was replaced before the failure stopped the roll-out.
    assert_eq!(group(&failed)["PlacedAllocs"], 1);

    let reverted =
        deployment_when(&t, |d| d["JobVersion"] == 2 && d["Status"] == "successful").await;
    assert_eq!(group(&reverted)["HealthyAllocs"], 2);
    let job = t.get("/v1/job/web").await;
    assert_eq!(job["Version"], 2);
    assert_eq!(job["TaskGroups"][0]["Tasks"][0]["Config"], good);
    let allocs = t.get("/v1/job/web/allocations").await;
    let allocs = allocs.as_array().unwrap();
    assert_eq!(
        live_of(allocs, 2).len() + live_of(allocs, 0).len(),
        2,
        "{allocs:#?}"
    );
    assert!(live_of(allocs, 1).is_empty());
}

#[tokio::test]
async fn manual_health_is_set_by_an_operator_and_a_deployment_without_progress_fails() {
    let t = TestAgent::start("", vec![]).await;
    let manual = json!({ "MaxParallel": 1, "HealthCheck": "manual", "MinHealthyTime": 0,
        "HealthyDeadline": 2 * S, "ProgressDeadline": 3 * S });
    t.register(web(1, json!({ "run_for": "10m" }), manual.clone()))
        .await;
    let d = deployment_when(&t, |d| d["Status"] == "running").await;
    let id = d["ID"].as_str().unwrap();
    // The client judges nothing: the operator says.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        group(&t.get(&format!("/v1/deployment/{id}")).await)["HealthyAllocs"],
        0
    );
    let allocs = t.get(&format!("/v1/deployment/allocations/{id}")).await;
    let alloc = allocs[0]["ID"].as_str().unwrap();
    let (status, r) = t
        .post(
            &format!("/v1/deployment/allocation-health/{id}"),
            json!({ "HealthyAllocationIDs": ["not-in-it"] }),
        )
        .await;
    assert_eq!(status, 500, "{r}");
    let (status, r) = t
        .post(
            &format!("/v1/deployment/allocation-health/{id}"),
            json!({ "HealthyAllocationIDs": [alloc] }),
        )
        .await;
    assert_eq!(status, 200, "{r}");
    let done = deployment_when(&t, |d| d["ID"] == id && d["Status"] == "successful").await;
    assert_eq!(group(&done)["HealthyAllocs"], 1);

    // A new version nobody judges: its progress deadline passes and fails it.
    t.register(web(
        1,
        json!({ "run_for": "10m", "stdout_string": "v1" }),
        manual,
    ))
    .await;
    let failed = deployment_when(&t, |d| d["JobVersion"] == 1 && d["Status"] == "failed").await;
    assert_eq!(
        failed["StatusDescription"],
        "Failed due to progress deadline"
    );
    let (status, r) = t
        .post(
            &format!("/v1/deployment/pause/{}", failed["ID"].as_str().unwrap()),
            json!({ "Pause": true }),
        )
        .await;
    assert_eq!((status, r), (500, json!("can't pause terminal deployment")));
}
