//! The node's scheduling state through the API, as Nomad's tools drive it: eligibility,
//! drain (with its deadline, system jobs last), the `Node` event topic with replay from an
//! index, and what a cluster of one answers to the cluster endpoints.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::TestAgent;

fn long_job(id: &str, job_type: &str) -> Value {
    json!({
        "ID": id, "Type": job_type,
        "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock", "Config": {"run_for": "1h"}}]}]
    })
}

async fn node_id(t: &TestAgent) -> String {
    t.get("/v1/nodes").await[0]["ID"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn status_of(t: &TestAgent, job: &str) -> Vec<String> {
    t.get(&format!("/v1/job/{job}/allocations"))
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["ClientStatus"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ineligible_node_places_nothing_until_it_is_eligible_again() {
    let t = TestAgent::start("", vec![]).await;
    let node = node_id(&t).await;
    let (s, r) = t
        .post(
            &format!("/v1/node/{node}/eligibility"),
            json!({"NodeID": node, "Eligibility": "ineligible"}),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        t.get(&format!("/v1/node/{node}")).await["SchedulingEligibility"],
        "ineligible"
    );
    let (s, _) = t
        .post(
            &format!("/v1/node/{node}/eligibility"),
            json!({"Eligibility": "maybe"}),
        )
        .await;
    assert_eq!(s, 400);

    let reg: Value = t
        .post_job(long_job("web", "service"))
        .await
        .json()
        .await
        .unwrap();
    assert!(status_of(&t, "web").await.is_empty(), "nothing placed");
    let eval = t.eval_done(reg["EvalID"].as_str().unwrap()).await;
    assert_eq!(eval["QueuedAllocations"]["g"], 1);
    assert_eq!(eval["FailedTGAllocs"]["g"]["NodesEvaluated"], 0);
    let blocked = eval["BlockedEval"].as_str().unwrap().to_string();
    assert_eq!(
        t.get(&format!("/v1/evaluation/{blocked}")).await["Status"],
        "blocked"
    );
    let summary = t.get("/v1/job/web/summary").await;
    assert_eq!(summary["Summary"]["g"]["Queued"], 1);
    assert_eq!(t.get("/v1/job/web").await["Status"], "pending");
    let (s, plan) = t
        .post(
            "/v1/job/web/plan",
            json!({"Job": long_job("web", "service")}),
        )
        .await;
    assert_eq!(s, 200, "{plan}");
    assert!(plan["FailedTGAllocs"]["g"].is_object(), "{plan:#}");

    let (s, r) = t
        .post(
            &format!("/v1/node/{node}/eligibility"),
            json!({"Eligibility": "eligible"}),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(r["EvalIDs"].as_array().unwrap().len(), 1, "{r}");
    t.wait_allocs("web", Duration::from_secs(20), |a| {
        a.len() == 1 && a[0]["ClientStatus"] == "running"
    })
    .await;
    assert_eq!(
        t.get(&format!("/v1/evaluation/{blocked}")).await["Status"],
        "complete"
    );
    assert_eq!(
        t.get("/v1/job/web/summary").await["Summary"]["g"]["Queued"],
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_stops_services_at_once_batch_at_its_deadline_and_system_jobs_last() {
    let t = TestAgent::start("", vec![]).await;
    let node = node_id(&t).await;
    for (id, ty) in [("svc", "service"), ("bat", "batch"), ("sys", "system")] {
        assert_eq!(t.post_job(long_job(id, ty)).await.status(), 200);
        t.wait_allocs(id, Duration::from_secs(20), |a| {
            a.len() == 1 && a[0]["ClientStatus"] == "running"
        })
        .await;
    }
    let (s, r) = t
        .post(
            &format!("/v1/node/{node}/drain"),
            json!({"NodeID": node, "DrainSpec": {"Deadline": 1_500_000_000u64, "IgnoreSystemJobs": false}, "Meta": {"why": "test"}}),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    let n = t.get(&format!("/v1/node/{node}")).await;
    assert_eq!(n["Drain"], true);
    assert_eq!(n["SchedulingEligibility"], "ineligible");
    assert_eq!(n["DrainStrategy"]["Deadline"], 1_500_000_000u64);
    assert_eq!(n["LastDrain"]["Status"], "draining");
    assert_eq!(n["LastDrain"]["Meta"]["why"], "test");
    // The service goes at once; the batch job runs on until the deadline; the system job
    // waits for both.
    t.wait_allocs("svc", Duration::from_secs(10), crate::harness::all_terminal)
        .await;
    assert_eq!(status_of(&t, "bat").await, ["running"]);
    assert_eq!(status_of(&t, "sys").await, ["running"]);
    t.wait_allocs("bat", Duration::from_secs(10), crate::harness::all_terminal)
        .await;
    t.wait_allocs("sys", Duration::from_secs(10), crate::harness::all_terminal)
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let n = t.get(&format!("/v1/node/{node}")).await;
        if n["Drain"] == false {
            assert_eq!(n["LastDrain"]["Status"], "complete");
            assert!(n["DrainStrategy"].is_null());
            assert_eq!(
                n["SchedulingEligibility"], "ineligible",
                "a drained node stays ineligible"
            );
            let msgs: Vec<&str> = n["Events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["Message"].as_str().unwrap())
                .collect();
            assert!(
                msgs.contains(&"Node drain strategy set") && msgs.contains(&"Node drain complete"),
                "{msgs:?}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the drain never completed: {n:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stopped = t.get("/v1/job/svc/allocations").await;
    assert_eq!(stopped[0]["DesiredStatus"], "stop");
    // Marking it eligible (through a drain cancel, as `nomad node drain -disable` does)
    // places the service again.
    let (s, r) = t
        .post(
            &format!("/v1/node/{node}/drain"),
            json!({"DrainSpec": null, "MarkEligible": true}),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    t.wait_allocs("svc", Duration::from_secs(20), |a| {
        a.iter().any(|a| a["ClientStatus"] == "running")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_changes_are_events_that_a_late_subscriber_still_gets_from_its_index() {
    let t = TestAgent::start("", vec![]).await;
    let node = node_id(&t).await;
    let (_, r) = t
        .post(
            &format!("/v1/node/{node}/drain"),
            json!({"DrainSpec": {"Deadline": -1}}),
        )
        .await;
    let index = r["Index"].as_u64().unwrap();
    // Subscribed after the drain: the kept events from `index` are replayed first.
    let mut stream = t
        .http
        .get(t.url(&format!(
            "/v1/event/stream?topic=Node&index={index}&namespace=prod"
        )))
        .send()
        .await
        .unwrap();
    let mut buf = String::new();
    let first = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(nl) = buf.find('\n') {
                let line: String = buf.drain(..=nl).collect();
                let v: Value = serde_json::from_str(line.trim()).unwrap();
                if v["Events"].is_array() {
                    return v;
                }
                continue;
            }
            let chunk = stream.chunk().await.unwrap().expect("stream ended");
            buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    })
    .await
    .expect("no replayed event");
    let ev = &first["Events"][0];
    assert_eq!(ev["Topic"], "Node");
    assert_eq!(ev["Type"], "NodeDrain");
    assert_eq!(ev["Key"], node.as_str());
    assert_eq!(ev["Index"], index);
    assert_eq!(ev["Payload"]["Node"]["Drain"], true);
}

#[tokio::test]
async fn a_cluster_of_one_answers_the_cluster_endpoints() {
    let t = TestAgent::start("", vec![]).await;
    let members = t.get("/v1/agent/members").await;
    assert_eq!(members["Members"].as_array().unwrap().len(), 1);
    assert_eq!(members["Members"][0]["Status"], "alive");
    assert_eq!(
        t.get("/v1/agent/servers").await.as_array().unwrap().len(),
        1
    );
    let (s, j) = t
        .post("/v1/agent/join?address=10.0.0.9:4648", json!({}))
        .await;
    assert_eq!(s, 200);
    assert_eq!(j["num_joined"], 0);
    assert!(
        j["error"].as_str().unwrap().contains("10.0.0.9:4648"),
        "{j}"
    );
    let (s, _) = t.post("/v1/agent/force-leave?node=ghost", json!({})).await;
    assert_eq!(s, 200);
    let raft = t.get("/v1/operator/raft/configuration").await;
    assert_eq!(raft["Servers"][0]["Leader"], true);
    let sched = t.get("/v1/operator/scheduler/configuration").await;
    assert_eq!(sched["SchedulerConfig"]["SchedulerAlgorithm"], "binpack");
    assert_eq!(t.get("/v1/scaling/policies").await, json!([]));
    let (s, _) = t
        .send(reqwest::Method::GET, "/v1/scaling/policy/nope", None)
        .await;
    assert_eq!(s, 404);

    // ?resources and ?os on the node list; a unique id prefix names the node.
    let plain = t.get("/v1/nodes").await;
    assert!(plain[0]["NodeResources"].is_null() && plain[0].get("Attributes").is_none());
    let full = t.get("/v1/nodes?resources=true&os=true").await;
    assert!(
        full[0]["NodeResources"]["Cpu"]["CpuShares"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(full[0]["Attributes"].as_object().unwrap().len(), 1);
    assert!(full[0]["Attributes"]["os.name"].is_string());
    let id = full[0]["ID"].as_str().unwrap();
    assert_eq!(t.get(&format!("/v1/node/{}", &id[..8])).await["ID"], id);
    let (s, _) = t
        .send(reqwest::Method::GET, "/v1/nodes?resources=perhaps", None)
        .await;
    assert_eq!(s, 400);
}
