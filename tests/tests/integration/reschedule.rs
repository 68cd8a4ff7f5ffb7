//! Nomad's reschedule on one node: a failed service allocation is replaced after its
//! delay, then after twice that, the replacements linked to what they replaced and
//! carrying the tracker, across a `kill -9` of the agent; a batch job that completed is
//! never run again, whatever evaluates it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{AgentProcess, TestAgent, all_terminal, mock_job};

const S: u64 = 1_000_000_000;

fn flaky() -> Value {
    json!({ "ID": "flaky", "Type": "service", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0, "Mode": "fail" },
        "ReschedulePolicy": { "Delay": 5 * S, "DelayFunction": "exponential",
            "MaxDelay": 60 * S, "Unlimited": true },
        "Tasks": [{ "Name": "t", "Driver": "mock",
            "Config": { "run_for": "100ms", "exit_code": 1 } }] }] })
}

/// The allocations of `flaky` in full, oldest first, once there are `n` (the newest
/// named by the one it replaced).
async fn chain(a: &AgentProcess, n: usize) -> Vec<Value> {
    let stubs = a
        .wait_allocs("flaky", |l| {
            l.len() >= n && l.iter().filter(|x| x["NextAllocation"] != "").count() >= n - 1
        })
        .await;
    let mut full = Vec::new();
    for s in &stubs {
        full.push(a.alloc(s["ID"].as_str().unwrap()).await);
    }
    full.sort_by_key(|x| x["CreateIndex"].as_u64());
    full
}

fn fail_time(a: &Value) -> u64 {
    a["TaskStates"]["t"]["FinishedAt"]
        .as_str()
        .and_then(paddock::util::parse_go_time)
        .unwrap()
}

#[tokio::test]
async fn a_failing_service_is_replaced_after_its_delay_then_twice_that_across_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = AgentProcess::new(dir.path());
    a.start().await;
    a.post_job(flaky()).await;

    let first_two = chain(&a, 2).await;
    let (first, second) = (&first_two[0], &first_two[1]);
    assert_eq!(first["ClientStatus"], "failed");
    assert_eq!(first["NextAllocation"], second["ID"]);
    assert_ne!(
        first["FollowupEvalID"], "",
        "the delay had a follow-up evaluation"
    );
    assert_eq!(second["PreviousAllocation"], first["ID"]);
    let events = second["RescheduleTracker"]["Events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["PrevAllocID"], first["ID"]);
    assert_eq!(events[0]["Delay"], 5 * S);
    let waited = second["CreateTime"].as_u64().unwrap() - fail_time(first);
    assert!(waited >= 5 * S - S / 10, "replaced after {waited} ns");
    let followup = a
        .get(&format!(
            "/v1/evaluation/{}",
            first["FollowupEvalID"].as_str().unwrap()
        ))
        .await;
    assert_eq!(followup["TriggeredBy"], "alloc-reschedule");
    assert_ne!(followup["WaitUntil"], "0001-01-01T00:00:00Z");

    // The second fails at once; the agent dies before its 10 s delay is over.
    a.wait_allocs("flaky", |l| l.len() == 2 && all_terminal(l))
        .await;
    // `job status` shows the attempts and when the next replacement comes.
    let out = std::process::Command::new(crate::harness::agent_bin())
        .args(["job", "status", "-address", &a.url(""), "flaky"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Reschedules"), "{text}");
    assert!(text.contains("replaced 1 failed allocation(s)"), "{text}");
    assert!(text.contains("failed: rescheduled at 20"), "{text}");
    a.kill9();
    a.start().await;
    let three = chain(&a, 3).await;
    let (second, third) = (&three[1], &three[2]);
    assert_eq!(second["NextAllocation"], third["ID"]);
    assert_eq!(third["PreviousAllocation"], second["ID"]);
    let events = third["RescheduleTracker"]["Events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[1]["Delay"], 10 * S, "twice the last delay");
    let waited = third["CreateTime"].as_u64().unwrap() - fail_time(second);
    assert!(waited >= 10 * S - S / 10, "replaced after {waited} ns");
    a.interrupt();
}

#[tokio::test]
async fn a_completed_batch_job_never_runs_twice() {
    let t = TestAgent::start("", vec![]).await;
    t.register(mock_job("once", json!({ "run_for": "50ms" })))
        .await;
    let allocs = t
        .wait_allocs("once", Duration::from_secs(20), all_terminal)
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    assert_eq!(allocs[0]["ClientStatus"], "complete");
    let count = || async {
        t.get("/v1/job/once/allocations")
            .await
            .as_array()
            .unwrap()
            .len()
    };

    // Evaluated again, registered again unchanged, the node made eligible again, its
    // allocation collected by the client: nothing is placed.
    let (s, r) = t.post("/v1/job/once/evaluate", json!({})).await;
    assert_eq!(s, 200, "{r}");
    t.eval_done(r["EvalID"].as_str().unwrap()).await;
    assert_eq!(count().await, 1);
    let (s, r) = t
        .post(
            "/v1/jobs",
            json!({ "Job": mock_job("once", json!({ "run_for": "50ms" })) }),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    if let Some(e) = r["EvalID"].as_str().filter(|e| !e.is_empty()) {
        t.eval_done(e).await;
    }
    assert_eq!(count().await, 1);
    let r = t
        .http
        .get(t.url(&format!("/v1/client/allocation/{id}/gc")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (s, r) = t.post("/v1/job/once/evaluate", json!({})).await;
    assert_eq!(s, 200, "{r}");
    t.eval_done(r["EvalID"].as_str().unwrap()).await;
    assert_eq!(
        count().await,
        1,
        "run again after its allocation was collected"
    );

    // A failed batch allocation out of attempts is not placed again either.
    let mut failing = mock_job("fails", json!({ "run_for": "50ms", "exit_code": 1 }));
    failing["TaskGroups"][0]["ReschedulePolicy"] = json!({ "Attempts": 0, "Unlimited": false });
    t.register(failing).await;
    t.wait_allocs("fails", Duration::from_secs(20), all_terminal)
        .await;
    let (s, r) = t.post("/v1/job/fails/evaluate", json!({})).await;
    assert_eq!(s, 200, "{r}");
    t.eval_done(r["EvalID"].as_str().unwrap()).await;
    assert_eq!(
        t.get("/v1/job/fails/allocations")
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );
}
