//! Job kinds and job lifecycles Nomad's clients use: system and sysbatch jobs, periodic
//! and parameterized jobs, versions.

use std::time::Duration;

use serde_json::json;

use crate::harness::{TestAgent, all_terminal};

#[tokio::test]
async fn system_jobs_place_one_allocation_per_group_whatever_the_count() {
    let t = TestAgent::start("", vec![]).await;
    let r = t
        .post_job(json!({
            "ID": "sys", "Type": "system",
            "TaskGroups": [
                {"Name": "a", "Count": 3, "Tasks": [{"Name": "t", "Driver": "mock", "Config": {"run_for": "1h"}}]},
                {"Name": "b", "Tasks": [{"Name": "t", "Driver": "mock", "Config": {"run_for": "1h"}}]}
            ]
        }))
        .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let allocs = t
        .wait_allocs("sys", Duration::from_secs(20), |a| {
            a.len() == 2 && a.iter().all(|a| a["ClientStatus"] == "running")
        })
        .await;
    let mut groups: Vec<&str> = allocs
        .iter()
        .map(|a| a["TaskGroup"].as_str().unwrap())
        .collect();
    groups.sort();
    assert_eq!(groups, ["a", "b"]);
    let job = t.get("/v1/job/sys").await;
    assert_eq!(job["Type"], "system");
    assert_eq!(
        job["TaskGroups"][0]["Count"], 3,
        "the count is kept as written"
    );
}

#[tokio::test]
async fn a_sysbatch_task_that_succeeds_is_complete_not_restarted() {
    let t = TestAgent::start("", vec![]).await;
    let r = t
        .post_job(json!({
            "ID": "sb", "Type": "sysbatch",
            "TaskGroups": [{"Name": "g", "Count": 2, "Tasks": [{"Name": "t", "Driver": "mock", "Config": {"run_for": "20ms"}}]}]
        }))
        .await;
    assert_eq!(r.status(), 200);
    let allocs = t
        .wait_allocs("sb", Duration::from_secs(20), all_terminal)
        .await;
    assert_eq!(allocs.len(), 1);
    assert_eq!(allocs[0]["ClientStatus"], "complete");
    assert_eq!(allocs[0]["TaskStates"]["t"]["Restarts"], 0);
}
