//! What tools watch: evaluations, `/v1/metrics` and the event stream.

use std::time::Duration;

use serde_json::json;

use crate::harness::{TestAgent, mock_job};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluations_follow_registration_deregistration_and_alloc_stops() {
    let t = TestAgent::start("", vec![]).await;
    let r = t.post_job(mock_job("ev", json!({"run_for": "60s"}))).await;
    let reg: serde_json::Value = r.json().await.unwrap();
    let eval_id = reg["EvalID"].as_str().unwrap().to_string();
    // Registration answers before it places, as Nomad's does: the evaluation is pending,
    // then complete.
    let eval = t.eval_done(&eval_id).await;
    assert_eq!(eval["Status"], "complete");
    assert_eq!(eval["TriggeredBy"], "job-register");
    assert_eq!(eval["JobID"], "ev");
    assert_eq!(eval["Type"], "batch");
    // Nomad names a node only on node-update evaluations.
    assert_eq!(eval["NodeID"], "");
    let placed = t
        .get(&format!("/v1/evaluation/{eval_id}/allocations"))
        .await;
    assert_eq!(placed.as_array().unwrap().len(), 1);
    let alloc = placed[0]["ID"].as_str().unwrap().to_string();
    assert_eq!(placed[0]["EvalID"], eval_id.as_str());

    let r = t
        .http
        .post(t.url(&format!("/v1/allocation/{alloc}/stop")))
        .send()
        .await
        .unwrap();
    let stop: serde_json::Value = r.json().await.unwrap();
    let stop_eval = t
        .get(&format!(
            "/v1/evaluation/{}",
            stop["EvalID"].as_str().unwrap()
        ))
        .await;
    assert_eq!(stop_eval["TriggeredBy"], "alloc-stop");
    let r = t.http.delete(t.url("/v1/job/ev")).send().await.unwrap();
    let dereg: serde_json::Value = r.json().await.unwrap();
    let evals = t.get("/v1/job/ev/evaluations").await;
    let triggers: Vec<&str> = evals
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["TriggeredBy"].as_str().unwrap())
        .collect();
    assert_eq!(triggers, ["job-deregister", "alloc-stop", "job-register"]);
    assert_eq!(evals[0]["ID"], dereg["EvalID"]);
    let by_prefix = t
        .get(&format!("/v1/evaluations?prefix={}", &eval_id[..8]))
        .await;
    assert_eq!(by_prefix[0]["ID"], eval_id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_allocations_tasks_and_component_calls_including_traps() {
    let t = TestAgent::start("", vec![]).await;
    let r = t
        .post_job(
            json!({ "ID": "m", "Type": "service", "TaskGroups": [{ "Name": "g",
            "Tasks": [{ "Name": "t", "Driver": "raw_exec",
                "Config": { "command": "/bin/sh", "args": ["-c", "exec sleep 600"] } }] }] }),
        )
        .await;
    assert!(r.status().is_success());
    let alloc = t
        .wait_allocs("m", Duration::from_secs(20), |a| {
            a.len() == 1 && a[0]["ClientStatus"] == "running"
        })
        .await[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    // A trapping start, for the trap counter.
    let r = t
        .post_job(mock_job(
            "trap",
            json!({"misbehave": {"op": "start", "kind": "trap"}}),
        ))
        .await;
    assert!(r.status().is_success());
    t.wait_allocs(
        "trap",
        Duration::from_secs(20),
        crate::harness::all_terminal,
    )
    .await;

    let m = t.get("/v1/metrics").await;
    let find = |kind: &str, name: &str, label: Option<(&str, &str)>| -> Option<serde_json::Value> {
        m[kind]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["Name"] == name && label.is_none_or(|(k, v)| g["Labels"][k] == v))
            .cloned()
    };
    assert_eq!(
        find("Gauges", "nomad.client.allocations.running", None).unwrap()["Value"],
        1.0
    );
    let rss = find(
        "Gauges",
        "nomad.client.allocs.memory.rss",
        Some(("alloc_id", &alloc)),
    )
    .unwrap_or_else(|| panic!("no rss for {alloc}: {m:#}"));
    assert!(rss["Value"].as_f64().unwrap() > 0.0, "{rss}");
    assert_eq!(rss["Labels"]["task"], "t");
    assert_eq!(rss["Labels"]["task_group"], "g");
    assert_eq!(rss["Labels"]["job"], "m");
    let traps = find("Counters", "paddock.component.traps", Some(("op", "start")))
        .into_iter()
        .chain(m["Counters"].as_array().unwrap().iter().cloned())
        .filter(|c| {
            c["Name"] == "paddock.component.traps"
                && c["Labels"]["component"] == "mock"
                && c["Labels"]["op"] == "start"
        })
        .map(|c| c["Count"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(traps, 1.0, "{m:#}");
    let calls = find(
        "Counters",
        "paddock.component.calls",
        Some(("component", "raw_exec")),
    )
    .unwrap();
    assert!(calls["Count"].as_f64().unwrap() >= 1.0);
    let hist = m["Samples"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["Name"] == "paddock.component.call_seconds" && s["Labels"]["op"] == "start")
        .unwrap();
    assert!(hist["Count"].as_u64().unwrap() >= 1);

    let text = t
        .http
        .get(t.url("/v1/metrics?format=prometheus"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("# TYPE paddock_component_call_seconds histogram"),
        "{text}"
    );
    assert!(text.contains("nomad_client_allocations_running{"), "{text}");
    assert!(
        text.lines().any(
            |l| l.starts_with("paddock_component_traps_total{component=\"mock\"")
                && l.contains("op=\"start\"")
                && l.ends_with(" 1")
        ),
        "{text}"
    );
    t.http.delete(t.url("/v1/job/m")).send().await.unwrap();
}

/// The next `{"Index", "Events"}` line of an event stream whose events satisfy `want`.
async fn next_event(
    lines: &mut reqwest::Response,
    buf: &mut String,
    want: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        while let Some(nl) = buf.find('\n') {
            let line: String = buf.drain(..=nl).collect();
            let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
            if let Some(ev) = v["Events"].as_array().and_then(|e| e.first())
                && want(ev)
            {
                return ev.clone();
            }
        }
        let chunk = tokio::time::timeout_at(deadline, lines.chunk())
            .await
            .expect("no matching event in time")
            .unwrap()
            .expect("the stream ended");
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_tells_jobs_allocations_and_evaluations_as_they_happen() {
    let t = TestAgent::start("", vec![]).await;
    let open = |query: &str| {
        let url = t.url(&format!("/v1/event/stream{query}"));
        let http = t.http.clone();
        async move {
            let r = http.get(url).send().await.unwrap();
            assert!(r.status().is_success(), "{}", r.status());
            r
        }
    };
    let mut all = open("").await;
    let mut only_allocs_of_ev = open("?topic=Allocation:ev").await;
    let (mut buf, mut buf2) = (String::new(), String::new());

    let r = t.post_job(mock_job("ev", json!({"run_for": "60s"}))).await;
    let reg: serde_json::Value = r.json().await.unwrap();
    let job = next_event(&mut all, &mut buf, |e| e["Topic"] == "Job").await;
    assert_eq!(job["Type"], "JobRegistered");
    assert_eq!(job["Key"], "ev");
    assert_eq!(job["Payload"]["Job"]["ID"], "ev");
    let eval = next_event(&mut all, &mut buf, |e| e["Topic"] == "Evaluation").await;
    assert_eq!(eval["Key"], reg["EvalID"]);
    assert_eq!(eval["Payload"]["Evaluation"]["Status"], "pending");
    let eval = next_event(&mut all, &mut buf, |e| e["Topic"] == "Evaluation").await;
    assert_eq!(eval["Key"], reg["EvalID"]);
    assert_eq!(eval["Payload"]["Evaluation"]["Status"], "complete");
    // The allocation as it goes: placed, running, complete.
    let alloc = next_event(&mut only_allocs_of_ev, &mut buf2, |_| true).await;
    assert_eq!(alloc["Topic"], "Allocation");
    assert_eq!(alloc["Type"], "PlanResult");
    let id = alloc["Key"].as_str().unwrap().to_string();
    assert_eq!(alloc["FilterKeys"][0], "ev");
    next_event(&mut only_allocs_of_ev, &mut buf2, |e| {
        e["Payload"]["Allocation"]["ClientStatus"] == "running"
    })
    .await;
    // Another job's allocation runs to its end; then ev is deregistered. The filtered
    // stream's next event is ev's allocation told to stop (Nomad tells only allocations
    // that still run): nothing of the other job.
    let later = t
        .post_job(mock_job("other", json!({"run_for": "10ms"})))
        .await;
    assert!(later.status().is_success());
    t.wait_allocs(
        "other",
        Duration::from_secs(20),
        crate::harness::all_terminal,
    )
    .await;
    let r = t.http.delete(t.url("/v1/job/ev")).send().await.unwrap();
    assert!(r.status().is_success());
    let dereg = next_event(&mut all, &mut buf, |e| e["Type"] == "JobDeregistered").await;
    assert_eq!(dereg["Key"], "ev");
    let stop = next_event(&mut only_allocs_of_ev, &mut buf2, |e| {
        assert_eq!(e["Key"], id.as_str(), "the filter let through {e:#}");
        e["Type"] == "AllocationUpdateDesiredStatus"
    })
    .await;
    assert_eq!(stop["Payload"]["Allocation"]["DesiredStatus"], "stop");
    assert!(stop["Index"].as_u64().unwrap() > alloc["Index"].as_u64().unwrap());
    let done = next_event(&mut only_allocs_of_ev, &mut buf2, |e| {
        e["Payload"]["Allocation"]["ClientStatus"] == "complete"
    })
    .await;
    assert_eq!(done["Key"], id.as_str());
    let r = t
        .http
        .get(t.url("/v1/event/stream?topic=Nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}
