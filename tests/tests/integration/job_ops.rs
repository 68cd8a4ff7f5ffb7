//! What Nomad's tools do to a job besides registering it, through the real API: versions
//! with revert and stable, plan and EnforceIndex, periodic launches (by their cron and
//! forced), dispatch of a parameterized job with its payload file, evaluate, scale, the
//! deployments endpoints, a purged job registered again, fuzzy search and file streaming.

use std::time::Duration;

use base64::Engine;
use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{TestAgent, all_terminal};

fn service(id: &str, count: u32, run_for: &str) -> Value {
    json!({
        "ID": id, "Type": "service",
        "TaskGroups": [{"Name": "g", "Count": count, "Tasks": [{"Name": "t", "Driver": "mock", "Config": {"run_for": run_for}}]}]
    })
}

async fn running(t: &TestAgent, job: &str, n: usize) -> Vec<Value> {
    t.wait_allocs(job, Duration::from_secs(20), |a| {
        a.iter().filter(|a| a["ClientStatus"] == "running").count() == n
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_change_is_a_version_that_can_be_reverted_to_and_marked_stable() {
    let t = TestAgent::start("", vec![]).await;
    assert_eq!(t.post_job(service("v", 1, "1h")).await.status(), 200);
    // The same job again is not a new version; a changed one is.
    assert_eq!(t.post_job(service("v", 1, "1h")).await.status(), 200);
    assert_eq!(t.get("/v1/job/v").await["Version"], 0);
    assert_eq!(t.post_job(service("v", 2, "2h")).await.status(), 200);
    running(&t, "v", 2).await;
    let versions = t.get("/v1/job/v/versions?diffs=true").await;
    let list = versions["Versions"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["Version"], 1, "newest first");
    assert_eq!(list[1]["TaskGroups"][0]["Count"], 1);
    assert_eq!(versions["Diffs"][0]["Type"], "Edited", "{versions:#}");

    // Revert to version 0 (only if the job is at version 1 now): a new version, 2.
    let (s, r) = t
        .post(
            "/v1/job/v/revert",
            json!({"JobID": "v", "JobVersion": 0, "EnforcePriorVersion": 0}),
        )
        .await;
    assert_eq!(s, 500, "the prior version is 1, not 0: {r}");
    let (s, r) = t
        .post(
            "/v1/job/v/revert",
            json!({"JobID": "v", "JobVersion": 0, "EnforcePriorVersion": 1}),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    let job = t.get("/v1/job/v").await;
    assert_eq!(job["Version"], 2);
    assert_eq!(job["TaskGroups"][0]["Count"], 1);
    running(&t, "v", 1).await;

    let (s, _) = t
        .post("/v1/job/v/stable", json!({"JobVersion": 2, "Stable": true}))
        .await;
    assert_eq!(s, 200);
    assert_eq!(t.get("/v1/job/v").await["Stable"], true);
    let (s, _) = t.post("/v1/job/v/revert", json!({"JobVersion": 9})).await;
    assert!(s == 400 || s == 404, "an unknown version is refused: {s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_shows_the_change_and_enforce_index_registers_exactly_it() {
    let t = TestAgent::start("", vec![]).await;
    assert_eq!(t.post_job(service("p", 1, "1h")).await.status(), 200);
    running(&t, "p", 1).await;
    let (s, plan) = t
        .post(
            "/v1/job/p/plan",
            json!({"Job": service("p", 3, "1h"), "Diff": true}),
        )
        .await;
    assert_eq!(s, 200, "{plan}");
    let u = &plan["Annotations"]["DesiredTGUpdates"]["g"];
    // As Nomad's plan shows a count change: "2 create, 1 in-place update".
    assert_eq!(
        (u["Place"].as_u64(), u["InPlaceUpdate"].as_u64()),
        (Some(2), Some(1)),
        "{plan:#}"
    );
    assert_eq!(plan["Diff"]["Type"], "Edited");
    assert!(plan["FailedTGAllocs"].is_null());
    // Planning changed nothing.
    assert_eq!(
        t.get("/v1/job/p/allocations")
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let index = plan["JobModifyIndex"].as_u64().unwrap();
    let stale = t
        .http
        .post(t.url("/v1/jobs"))
        .json(&json!({"Job": service("p", 3, "1h"), "EnforceIndex": true, "JobModifyIndex": index - 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 500);
    assert!(stale.text().await.unwrap().contains("conflicting"));
    let ok = t
        .http
        .post(t.url("/v1/jobs"))
        .json(&json!({"Job": service("p", 3, "1h"), "EnforceIndex": true, "JobModifyIndex": index, "SecretID": "", "IdempotencyToken": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200, "{}", ok.text().await.unwrap());
    running(&t, "p", 3).await;
    // PreserveCounts keeps the registered count (as `nomad job run -preserve-counts`).
    let kept = t
        .http
        .post(t.url("/v1/jobs"))
        .json(&json!({"Job": service("p", 1, "2h"), "PreserveCounts": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(kept.status(), 200);
    assert_eq!(t.get("/v1/job/p").await["TaskGroups"][0]["Count"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_jobs_launch_children_on_their_cron_without_overlap_and_on_force() {
    let t = TestAgent::start("", vec![]).await;
    let periodic = |id: &str, spec: &str, overlap: bool| {
        json!({
            "ID": id, "Type": "batch",
            "Periodic": {"Enabled": true, "SpecType": "cron", "Spec": spec, "ProhibitOverlap": overlap, "TimeZone": "UTC"},
            "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock", "Config": {"run_for": "1h"}}]}]
        })
    };
    // Once a year: registering runs nothing.
    assert_eq!(
        t.post_job(periodic("yearly", "0 0 1 1 *", false))
            .await
            .status(),
        200
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(t.get("/v1/job/yearly/allocations").await, json!([]));
    assert_eq!(t.get("/v1/job/yearly").await["Status"], "running");
    let (s, r) = t.post("/v1/job/yearly/periodic/force", json!({})).await;
    assert_eq!(s, 200, "{r}");
    let jobs = t.get("/v1/jobs?prefix=yearly/periodic-").await;
    let child = jobs[0]["ID"].as_str().unwrap().to_string();
    assert_eq!(jobs[0]["ParentID"], "yearly");
    let unix: u64 = child
        .strip_prefix("yearly/periodic-")
        .unwrap()
        .parse()
        .unwrap();
    assert!(unix > 1_700_000_000, "{child}");
    running(&t, &urlencode(&child), 1).await;
    assert_eq!(
        t.get("/v1/job/yearly/summary").await["Children"]["Running"],
        1
    );

    // Every second (seven fields: seconds first, as cronexpr reads them), with overlap
    // prohibited: the first child runs an hour, so no second.
    assert_eq!(
        t.post_job(periodic("each", "* * * * * * *", true))
            .await
            .status(),
        200
    );
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let children = t.get("/v1/jobs?prefix=each/").await;
    assert_eq!(children.as_array().unwrap().len(), 1, "{children:#}");
    // Overlap allowed: a child a second.
    assert_eq!(
        t.post_job(periodic("many", "* * * * * * *", false))
            .await
            .status(),
        200
    );
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let children = t.get("/v1/jobs?prefix=many/").await;
    assert!(children.as_array().unwrap().len() >= 2, "{children:#}");
    let (s, _) = t.post("/v1/job/many/periodic/force", json!({})).await;
    assert_eq!(s, 200);
    let (s, _) = t
        .post(
            &format!("/v1/job/{}/periodic/force", urlencode(&child)),
            json!({}),
        )
        .await;
    assert_eq!(s, 400, "a child is not periodic");
    // Stopping the parent stops its launches.
    t.http.delete(t.url("/v1/job/many")).send().await.unwrap();
    let before = t
        .get("/v1/jobs?prefix=many/")
        .await
        .as_array()
        .unwrap()
        .len();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        t.get("/v1/jobs?prefix=many/")
            .await
            .as_array()
            .unwrap()
            .len(),
        before
    );
}

fn urlencode(s: &str) -> String {
    s.replace('/', "%2F")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_runs_a_child_with_its_meta_and_payload_file() {
    let t = TestAgent::start("", vec![]).await;
    let job = json!({
        "ID": "param", "Type": "batch",
        "ParameterizedJob": {"Payload": "required", "MetaRequired": ["who"], "MetaOptional": ["mood"]},
        "TaskGroups": [{"Name": "g", "RestartPolicy": {"Attempts": 0}, "Tasks": [{
            "Name": "t", "Driver": "raw_exec",
            "Config": {"command": "/bin/sh", "args": ["-c", "cat ${NOMAD_TASK_DIR}/input.txt; echo \" to $NOMAD_META_who\""]},
            "DispatchPayload": {"File": "input.txt"}
        }]}]
    });
    assert_eq!(t.post_job(job).await.status(), 200);
    assert_eq!(
        t.get("/v1/job/param/allocations").await,
        json!([]),
        "the parent runs nothing"
    );
    let payload = base64::engine::general_purpose::STANDARD.encode("hello");
    let (s, r) = t
        .post(
            "/v1/job/param/dispatch",
            json!({"Meta": {"mood": "ok"}, "Payload": payload}),
        )
        .await;
    assert_eq!(s, 400);
    assert!(r.as_str().unwrap().contains("who"), "{r}");
    let (s, r) = t
        .post(
            "/v1/job/param/dispatch",
            json!({"Meta": {"who": "you", "extra": "x"}, "Payload": payload}),
        )
        .await;
    assert_eq!(s, 400);
    assert!(r.as_str().unwrap().contains("extra"), "{r}");
    let (s, _) = t
        .post("/v1/job/param/dispatch", json!({"Meta": {"who": "you"}}))
        .await;
    assert_eq!(s, 400, "the payload is required");

    let body = json!({"Meta": {"who": "you"}, "Payload": payload, "IdempotencyToken": "tok-1"});
    let (s, d) = t.post("/v1/job/param/dispatch", body.clone()).await;
    assert_eq!(s, 200, "{d}");
    let child = d["DispatchedJobID"].as_str().unwrap().to_string();
    assert!(child.starts_with("param/dispatch-"), "{child}");
    let (_, again) = t.post("/v1/job/param/dispatch", body).await;
    assert_eq!(
        again["DispatchedJobID"],
        child.as_str(),
        "the same token is the same dispatch"
    );

    let (_, out) = crate::harness::stdout_of(&t, &urlencode(&child)).await;
    assert_eq!(out.trim(), "hello to you");
    let c = t.get(&format!("/v1/job/{}", urlencode(&child))).await;
    assert_eq!(
        (c["ParentID"].as_str(), c["Dispatched"].as_bool()),
        (Some("param"), Some(true))
    );
    assert_eq!(t.get("/v1/job/param/summary").await["Children"]["Dead"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluate_scale_and_deployments_act_on_a_running_job() {
    let t = TestAgent::start("", vec![]).await;
    let mut job = service("s", 1, "1h");
    job["Update"] = json!({ "MinHealthyTime": 100_000_000u64 });
    assert_eq!(t.post_job(job).await.status(), 200);
    let a = running(&t, "s", 1).await;
    // A stopped allocation is replaced (Nomad's `alloc stop`); evaluating the job then
    // finds nothing missing.
    let id = a[0]["ID"].as_str().unwrap();
    let (s, _) = t
        .post(&format!("/v1/allocation/{id}/stop"), json!({}))
        .await;
    assert_eq!(s, 200);
    t.alloc_done(id).await;
    t.wait_allocs("s", Duration::from_secs(20), |a| {
        a.len() == 2 && a.iter().any(|a| a["ClientStatus"] == "running")
    })
    .await;
    let (s, r) = t.post("/v1/job/s/evaluate", json!({})).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        t.get(&format!("/v1/evaluation/{}", r["EvalID"].as_str().unwrap()))
            .await["JobID"],
        "s"
    );
    running(&t, "s", 1).await;

    // As Nomad, a job is not scaled while its version's deployment runs.
    let mut deployed = Value::Null;
    for _ in 0..200 {
        deployed = t.get("/v1/job/s/deployment").await;
        if deployed["Status"] == "successful" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(deployed["Status"], "successful", "{deployed:#}");
    let (s, r) = t
        .post(
            "/v1/job/s/scale",
            json!({"Count": 3, "Target": {"Group": "g"}, "Message": "more"}),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    running(&t, "s", 3).await;
    let scale = t.get("/v1/job/s/scale").await;
    assert_eq!(scale["TaskGroups"]["g"]["Desired"], 3);
    assert_eq!(scale["TaskGroups"]["g"]["Running"], 3);
    assert_eq!(
        t.get("/v1/job/s").await["Version"],
        1,
        "a scale is a new version"
    );
    // Every request is a scaling event of its group, newest first; one without a count
    // changes nothing.
    let (s, r) = t
        .post(
            "/v1/job/s/scale",
            json!({"Target": {"Group": "g"}, "Message": "autoscaler: fine", "Meta": {"q": 1}}),
        )
        .await;
    assert_eq!((s, &r["EvalID"]), (200, &json!("")), "{r}");
    let events = t.get("/v1/job/s/scale").await["TaskGroups"]["g"]["Events"].clone();
    assert_eq!(events[0]["Message"], "autoscaler: fine", "{events:#}");
    assert_eq!(events[0]["Count"], Value::Null);
    assert_eq!(events[0]["PreviousCount"], 3);
    assert_eq!(events[0]["Meta"]["q"], 1);
    assert_eq!(events[1]["Message"], "more");
    assert_eq!(
        (&events[1]["Count"], &events[1]["PreviousCount"]),
        (&json!(3), &json!(1))
    );
    assert!(
        events[1]["EvalID"].as_str().is_some_and(|e| e.len() == 36),
        "{events:#}"
    );
    assert!(events[1]["Time"].as_i64().unwrap() > 1_700_000_000_000_000_000);
    assert_eq!(t.get("/v1/job/s").await["Version"], 1);
    let (s, r) = t
        .post(
            "/v1/job/s/scale",
            json!({"Count": 2, "Error": true, "Target": {"Group": "g"}}),
        )
        .await;
    assert_eq!(
        (s, r),
        (
            400,
            json!("scaling action should not contain count if error is true")
        )
    );
    let (s, r) = t
        .post(
            "/v1/job/s/scale",
            json!({"Count": 1, "Target": {"Group": "nope"}}),
        )
        .await;
    assert_eq!(s, 400);
    assert!(r.as_str().unwrap().contains("nope"));
    let (s, _) = t
        .post(
            "/v1/job/s/scale",
            json!({"Count": -1, "Target": {"Group": "g"}}),
        )
        .await;
    assert_eq!(s, 400);

    // Each version of the service job started a deployment; the first had ended (a
    // newer version cancels one that still runs: the deployment tests show it).
    let of_job = t.get("/v1/job/s/deployments").await;
    let of_job = of_job.as_array().unwrap();
    let version = t.get("/v1/job/s").await["Version"].clone();
    assert_eq!(of_job[0]["JobVersion"], version, "newest first");
    assert!(of_job.len() >= 2, "{of_job:#?}");
    let first = of_job.last().unwrap();
    assert_eq!(first["JobVersion"], 0);
    assert_eq!(first["Status"], "successful");
    assert_eq!(t.get("/v1/job/s/deployment").await["ID"], of_job[0]["ID"]);
    assert_eq!(
        t.get("/v1/deployments").await.as_array().unwrap().len(),
        of_job.len()
    );
    // A newer version cancels the deployment that still runs.
    for run_for in ["2h", "3h"] {
        let mut v = service("s", 1, run_for);
        v["Update"] = json!({ "MinHealthyTime": 60_000_000_000u64 });
        assert_eq!(t.post_job(v).await.status(), 200);
    }
    let of_job = t.get("/v1/job/s/deployments").await;
    let v2 = of_job
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["JobVersion"] == 2)
        .unwrap_or_else(|| panic!("no deployment of version 2: {of_job:#}"));
    assert_eq!(v2["Status"], "cancelled");
    assert_eq!(
        v2["StatusDescription"],
        "Cancelled due to newer version of job"
    );
    let (s, _) = t.send(Method::GET, "/v1/deployment/abc", None).await;
    assert_eq!(s, 404);
    let (s, _) = t.send(Method::GET, "/v1/job/ghost/deployments", None).await;
    assert_eq!(s, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purged_job_registered_again_starts_with_no_allocations_and_gc_forgets_dead_jobs() {
    let t = TestAgent::start("", vec![]).await;
    let batch = crate::harness::mock_job("b", json!({"run_for": "10ms"}));
    assert_eq!(t.post_job(batch.clone()).await.status(), 200);
    t.wait_allocs("b", Duration::from_secs(20), all_terminal)
        .await;
    let (s, _) = t.send(Method::DELETE, "/v1/job/b?purge=true", None).await;
    assert_eq!(s, 200);
    let (s, _) = t.send(Method::GET, "/v1/job/b", None).await;
    assert_eq!(s, 404);
    assert_eq!(
        t.post_job(crate::harness::mock_job("b", json!({"run_for": "1h"})))
            .await
            .status(),
        200
    );
    running(&t, "b", 1).await;
    assert_eq!(
        t.get("/v1/job/b/allocations")
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        t.get("/v1/job/b/allocations?all=true")
            .await
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let summary = t.get("/v1/job/b/summary").await;
    assert_eq!(
        (
            summary["Summary"]["g"]["Running"].as_u64(),
            summary["Summary"]["g"]["Complete"].as_u64()
        ),
        (Some(1), Some(0))
    );

    // A dead job is forgotten by the system gc; a running one is not.
    assert_eq!(
        t.post_job(crate::harness::mock_job("d", json!({"run_for": "10ms"})))
            .await
            .status(),
        200
    );
    t.wait_allocs("d", Duration::from_secs(20), all_terminal)
        .await;
    let (s, _) = t.send(Method::PUT, "/v1/system/gc", None).await;
    assert_eq!(s, 200);
    let (s, _) = t.send(Method::GET, "/v1/job/d", None).await;
    assert_eq!(s, 404, "the dead job is collected");
    assert_eq!(t.get("/v1/job/b").await["Status"], "running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzy_search_finds_names_and_a_file_streams_as_it_grows() {
    let t = TestAgent::start("", vec![]).await;
    let job = json!({
        "ID": "Fuzzy-Web", "Type": "service",
        "TaskGroups": [{"Name": "frontend", "Tasks": [{
            "Name": "server", "Driver": "raw_exec",
            "Config": {"command": "/bin/sh", "args": ["-c", "i=0; while true; do echo line$i >> ${NOMAD_TASK_DIR}/grow.txt; i=$((i+1)); sleep 0.2; done"]}
        }]}]
    });
    assert_eq!(t.post_job(job).await.status(), 200);
    let a = running(&t, "Fuzzy-Web", 1).await;
    let (s, r) = t
        .post(
            "/v1/search/fuzzy",
            json!({"Text": "zzy-w", "Context": "all"}),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["Matches"]["jobs"][0]["ID"], "Fuzzy-Web");
    assert_eq!(r["Matches"]["jobs"][0]["Scope"], json!(["default"]));
    let (_, r) = t
        .post(
            "/v1/search/fuzzy",
            json!({"Text": "front", "Context": "groups"}),
        )
        .await;
    assert_eq!(
        r["Matches"]["groups"][0]["Scope"],
        json!(["default", "Fuzzy-Web"])
    );
    let (_, r) = t
        .post(
            "/v1/search/fuzzy",
            json!({"Text": "SERV", "Context": "tasks"}),
        )
        .await;
    assert_eq!(
        r["Matches"]["tasks"][0]["Scope"],
        json!(["default", "Fuzzy-Web", "frontend"])
    );
    let (s, _) = t.post("/v1/search/fuzzy", json!({"Text": "z"})).await;
    assert_eq!(s, 400, "one character is too short");
    let (s, _) = t
        .post("/v1/search/fuzzy", json!({"Text": "zz", "Context": "job"}))
        .await;
    assert_eq!(s, 400);

    let id = a[0]["ID"].as_str().unwrap();
    let (s, _) = t
        .send(
            Method::GET,
            &format!("/v1/client/fs/stream/{id}?path=server/local/none.txt"),
            None,
        )
        .await;
    assert_eq!(s, 400, "a missing file is a bad request, as Nomad answers");
    let mut r = t
        .http
        .get(t.url(&format!(
            "/v1/client/fs/stream/{id}?path=server/local/grow.txt&origin=start&offset=0"
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Frames arrive as the task appends: at least three lines, in order.
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut raw = String::new();
    while text.lines().count() < 3 {
        let chunk = tokio::time::timeout_at(deadline, r.chunk())
            .await
            .expect("frames in time")
            .unwrap()
            .unwrap();
        raw.push_str(std::str::from_utf8(&chunk).unwrap());
        for f in serde_json::Deserializer::from_str(&raw.clone())
            .into_iter::<Value>()
            .flatten()
        {
            if let Some(d) = f["Data"].as_str() {
                text.push_str(
                    std::str::from_utf8(
                        &base64::engine::general_purpose::STANDARD.decode(d).unwrap(),
                    )
                    .unwrap(),
                );
            }
        }
        if text.lines().count() < 3 {
            text.clear();
        }
    }
    assert!(text.starts_with("line0\nline1\nline2"), "{text:?}");
    let allocs = t
        .get("/v1/allocations?resources=true&task_states=false")
        .await;
    assert!(allocs[0]["AllocatedResources"].is_object());
    assert!(allocs[0]["TaskStates"].is_null());
    assert_eq!(allocs[0]["JobVersion"], 0);
}
