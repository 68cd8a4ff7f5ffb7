//! End to end over HTTP: jobs through the agent and the real mock driver component.

use std::time::Duration;

use serde_json::json;

use crate::harness::{TestAgent, all_terminal, event_types, mock_job};

#[tokio::test]
async fn a_mock_job_runs_end_to_end_over_http() {
    let t = TestAgent::start("", vec![]).await;
    let job = json!({
        "ID": "e2e", "Type": "batch",
        "TaskGroups": [{ "Name": "g", "Count": 2, "RestartPolicy": { "Attempts": 0 }, "Tasks": [
            { "Name": "ok", "Driver": "mock", "Config": { "run_for": "300ms" } },
            { "Name": "three", "Driver": "mock", "Config": { "run_for": "100ms", "exit_code": 3 } }
        ]}]
    });
    let r = t.post_job(job).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("X-Nomad-Index"));
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(
        body["EvalID"].as_str().is_some_and(|s| s.len() == 36),
        "{body}"
    );

    let allocs = t
        .wait_allocs("e2e", Duration::from_secs(20), all_terminal)
        .await;
    assert_eq!(allocs.len(), 2);
    for stub in &allocs {
        assert_eq!(
            stub["ClientStatus"], "failed",
            "exit code 3 fails the alloc: {stub:#}"
        );
        let id = stub["ID"].as_str().unwrap();
        let alloc = t.get(&format!("/v1/allocation/{id}")).await;
        assert_eq!(alloc["JobID"], "e2e");
        assert_eq!(
            event_types(&alloc, "ok"),
            ["Received", "Task Setup", "Started", "Terminated"]
        );
        let ok = &alloc["TaskStates"]["ok"];
        assert_eq!(ok["State"], "dead");
        assert_eq!(ok["Failed"], false);
        assert_eq!(ok["Events"][3]["ExitCode"], 0);
        let three = &alloc["TaskStates"]["three"];
        assert_eq!(three["Failed"], true);
        assert_eq!(three["Events"][3]["Type"], "Terminated");
        assert_eq!(three["Events"][3]["ExitCode"], 3);
        assert_eq!(three["Events"][3]["Details"]["exit_code"], "3");
        // The task ran for at least its run_for (times are Go `time.Time`: RFC 3339).
        let time = |f: &str| paddock::util::parse_go_time(ok[f].as_str().unwrap()).unwrap();
        let started = time("StartedAt");
        let finished = time("FinishedAt");
        assert!(
            finished - started >= 250_000_000,
            "ran {} ns",
            finished - started
        );
    }
    // Allocations and task states went through the state DB.
    let stored = t.agent.state().allocs().unwrap();
    assert_eq!(stored.iter().filter(|a| a.job_id == "e2e").count(), 2);
    assert!(stored.iter().all(|a| a.task_states["three"].failed));

    let jobs = t.get("/v1/jobs").await;
    assert_eq!(jobs[0]["ID"], "e2e");
    assert_eq!(jobs[0]["JobSummary"]["Summary"]["g"]["Failed"], 2);
    let job = t.get("/v1/job/e2e").await;
    assert_eq!(job["Status"], "dead");
    assert_eq!(job["TaskGroups"][0]["Count"], 2);
}

#[tokio::test]
async fn a_bad_job_is_a_400_naming_the_field_and_stores_nothing() {
    let t = TestAgent::start("", vec![]).await;
    let cases = [
        (
            json!({"ID": "x", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t"}]}]}),
            "Job.TaskGroups[0].Tasks[0].Driver",
        ),
        (
            json!({"ID": "x", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock", "Resources": {"MemoryMB": "big"}}]}]}),
            "Job.TaskGroups[0].Tasks[0].Resources.MemoryMB",
        ),
        (json!({"TaskGroups": []}), "Job.ID"),
        (
            json!({"ID": "x", "Typo": 1, "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock"}]}]}),
            "Job.Typo",
        ),
    ];
    for (job, field) in cases {
        let r = t.post_job(job).await;
        assert_eq!(r.status(), 400);
        let text = r.text().await.unwrap();
        assert!(text.contains(field), "{text:?} should name {field}");
    }
    let r = t
        .http
        .post(t.url("/v1/jobs"))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("invalid JSON"));
    assert_eq!(t.get("/v1/jobs").await, json!([]));
    assert!(t.agent.state().jobs().unwrap().is_empty());
    let r = t.http.get(t.url("/v1/job/nope")).send().await.unwrap();
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn a_broken_driver_fails_only_its_task_with_a_driver_failure_naming_the_component() {
    let t = TestAgent::start("plugin \"mock\" {\n grant {\n env = true\n events = true\n }\n limits {\n call_timeout = \"700ms\"\n }\n}", vec![]).await;
    t.post_job(mock_job(
        "trap",
        json!({"misbehave": {"op": "start", "kind": "trap"}}),
    ))
    .await;
    t.post_job(mock_job(
        "loop",
        json!({"misbehave": {"op": "wait", "kind": "loop"}, "run_for": "1h"}),
    ))
    .await;
    t.post_job(mock_job("fine", json!({"run_for": "200ms"})))
        .await;
    for (job, op, kind) in [
        ("trap", "start", "trapped"),
        ("loop", "wait", "missed its deadline"),
    ] {
        let a = t.finished_alloc(job).await;
        assert_eq!(a["ClientStatus"], "failed");
        let events = a["TaskStates"]["t"]["Events"].as_array().unwrap();
        let failure = events
            .iter()
            .find(|e| e["Type"] == "Driver Failure")
            .unwrap_or_else(|| panic!("{events:#?}"));
        let msg = failure["DisplayMessage"].as_str().unwrap();
        assert!(
            msg.contains("\"mock\"") && msg.contains(kind) && msg.contains(op),
            "{msg}"
        );
    }
    let allocs = t
        .wait_allocs("fine", Duration::from_secs(20), all_terminal)
        .await;
    assert_eq!(allocs[0]["ClientStatus"], "complete");
    // A job after the failures still runs on the same driver.
    t.post_job(mock_job("after", json!({"run_for": "50ms"})))
        .await;
    let allocs = t
        .wait_allocs("after", Duration::from_secs(20), all_terminal)
        .await;
    assert_eq!(allocs[0]["ClientStatus"], "complete");
}

#[tokio::test]
async fn invalid_driver_config_is_a_failed_validation_event_naming_the_field() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(mock_job("badcfg", json!({"run_for": "soon"})))
        .await;
    let a = t.finished_alloc("badcfg").await;
    let events = a["TaskStates"]["t"]["Events"].as_array().unwrap();
    let ev = events
        .iter()
        .find(|e| e["Type"] == "Failed Validation")
        .unwrap_or_else(|| panic!("{events:#?}"));
    let msg = ev["ValidationError"].as_str().unwrap();
    assert!(msg.contains("run_for") && msg.contains("soon"), "{msg}");
    assert!(!events.iter().any(|e| e["Type"] == "Started"));
}

#[tokio::test]
async fn stopping_an_allocation_kills_its_task() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(mock_job("long", json!({"run_for": "1h"}))).await;
    let allocs = t
        .wait_allocs("long", Duration::from_secs(20), |a| {
            a.first().is_some_and(|a| a["ClientStatus"] == "running")
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let r = t
        .http
        .post(t.url(&format!("/v1/allocation/{id}/stop")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let a = t.alloc_done(&id).await;
    assert_eq!(a["DesiredStatus"], "stop");
    assert_eq!(a["DesiredTransition"]["Migrate"], true);
    assert_eq!(a["ClientStatus"], "complete");
    // As Nomad's `alloc stop`: a replacement is placed, the two linked.
    let allocs = t
        .wait_allocs("long", Duration::from_secs(20), |a| {
            a.len() == 2
                && a.iter()
                    .any(|a| a["ID"] == id.as_str() && a["NextAllocation"] != "")
        })
        .await;
    assert_eq!(allocs.len(), 2);
    let stopped = allocs.iter().find(|a| a["ID"] == id.as_str()).unwrap();
    let next = t
        .get(&format!(
            "/v1/allocation/{}",
            stopped["NextAllocation"].as_str().unwrap()
        ))
        .await;
    assert_eq!(next["PreviousAllocation"], id.as_str());
    assert_eq!(
        next["RescheduleTracker"],
        serde_json::Value::Null,
        "a move is no reschedule"
    );
    let types = event_types(&a, "t");
    assert!(
        types.ends_with(&[
            "Killing".to_string(),
            "Terminated".to_string(),
            "Killed".to_string()
        ]),
        "{types:?}"
    );
}

#[tokio::test]
async fn job_run_cli_follows_the_job_and_reports_failure_in_its_exit_code() {
    let t = TestAgent::start("", vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let ok = dir.path().join("ok.json");
    std::fs::write(
        &ok,
        serde_json::to_vec(&json!({"Job": mock_job("cli-ok", json!({"run_for": "100ms"}))}))
            .unwrap(),
    )
    .unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        serde_json::to_vec(
            &json!({"Job": mock_job("cli-bad", json!({"run_for": "100ms", "exit_code": 1}))}),
        )
        .unwrap(),
    )
    .unwrap();
    let api = paddock::cli::ApiArgs {
        address: t.base.clone(),
        token: None,
    };
    assert_eq!(
        paddock::cli::job::job_run(&api, &ok, &[], false)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        paddock::cli::job::job_run(&api, &bad, &[], false)
            .await
            .unwrap(),
        2
    );
    let missing =
        paddock::cli::job::job_run(&api, &dir.path().join("missing.json"), &[], false).await;
    assert!(missing.unwrap_err().to_string().contains("missing.json"));
}

#[tokio::test]
async fn the_agent_starts_with_a_folder_of_bad_components_and_lists_what_it_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("junk.wasm"), b"junk").unwrap();
    std::fs::write(
        dir.path().join("widget.wasm"),
        guest_artifacts::FIXTURE_UNKNOWN_WORLD.bytes,
    )
    .unwrap();
    // A new build of the built-in mock under its own name: shown as replacing it. The same
    // under another file name is refused: a name's grants and tasks go only to its file.
    std::fs::write(
        dir.path().join("mock.wasm"),
        guest_artifacts::MOCK_DRIVER.bytes,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("their_mock.wasm"),
        guest_artifacts::MOCK_DRIVER.bytes,
    )
    .unwrap();
    let t = TestAgent::start("", vec![dir.path().to_path_buf()]).await;
    let v = t.get("/v1/components").await;
    let by_name = |n: &str| {
        v["Components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["Name"] == n && c["State"] == "active")
            .cloned()
            .unwrap_or_else(|| panic!("no active {n}: {v:#}"))
    };
    let mock = by_name("mock");
    assert_eq!(mock["ReplacesBuiltIn"], true, "{mock:#}");
    assert!(
        mock["Source"].as_str().unwrap().ends_with("/mock.wasm"),
        "{mock:#}"
    );
    assert_eq!(by_name("raw_exec")["ReplacesBuiltIn"], false);
    let names: Vec<_> = v["Components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["Name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"mock".to_string()), "{names:?}");
    let refused = v["Refused"].as_array().unwrap();
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert!(refused.iter().any(|r| {
        let r = r.as_str().unwrap();
        r.contains("their_mock.wasm") && r.contains("it reports the name \"mock\"")
    }));
    assert!(
        refused
            .iter()
            .any(|r| r.as_str().unwrap().contains("junk.wasm"))
    );
    let node = t.get("/v1/agent/self").await;
    let node_id = node["stats"]["client"]["node_id"].as_str().unwrap();
    let n = t.get(&format!("/v1/node/{node_id}")).await;
    assert_eq!(n["Attributes"]["driver.mock"], "1");
    assert!(
        n["Attributes"]["cpu.numcores"]
            .as_str()
            .unwrap()
            .parse::<u32>()
            .unwrap()
            >= 1
    );
    assert_eq!(n["Drivers"]["mock"]["Healthy"], true);
}

#[tokio::test]
async fn a_failing_task_restarts_per_its_policy_with_a_new_task_id_each_time() {
    let t = TestAgent::start("", vec![]).await;
    let job = json!({
        "ID": "flaky", "Type": "service",
        "TaskGroups": [{ "Name": "g", "RestartPolicy": { "Attempts": 2, "Delay": 200_000_000u64, "Interval": 3_600_000_000_000u64, "Mode": "fail" },
            "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "10ms", "exit_code": 1 } }] }]
    });
    let started = std::time::Instant::now();
    t.post_job(job).await;
    let allocs = t
        .wait_allocs("flaky", Duration::from_secs(20), all_terminal)
        .await;
    let elapsed = started.elapsed();
    let a = t
        .get(&format!(
            "/v1/allocation/{}",
            allocs[0]["ID"].as_str().unwrap()
        ))
        .await;
    let st = &a["TaskStates"]["t"];
    assert_eq!(st["Restarts"], 2);
    assert_eq!(st["Failed"], true);
    assert_eq!(a["ClientStatus"], "failed");
    let types = event_types(&a, "t");
    assert_eq!(
        types.iter().filter(|t| *t == "Restarting").count(),
        2,
        "{types:?}"
    );
    assert_eq!(types.last().unwrap(), "Not Restarting");
    // The delay was honoured: two restarts of at least 200 ms each.
    assert!(elapsed >= Duration::from_millis(400), "{elapsed:?}");
    let events = st["Events"].as_array().unwrap();
    for e in events.iter().filter(|e| e["Type"] == "Restarting") {
        let d = e["StartDelay"].as_u64().unwrap();
        assert!((200_000_000..250_000_000).contains(&d), "delay {d}");
    }
    let ids: Vec<&str> = events
        .iter()
        .filter(|e| e["Type"] == "Started")
        .map(|e| e["Details"]["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{types:?}");
    let alloc_id = a["ID"].as_str().unwrap();
    for id in &ids {
        let suffix = id
            .strip_prefix(&format!("{alloc_id}/t/"))
            .unwrap_or_else(|| panic!("{id}"));
        assert!(
            suffix.len() == 8 && suffix.chars().all(|c| c.is_ascii_hexdigit()),
            "{id}"
        );
    }
    let unique: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(
        unique.len(),
        3,
        "task ids must be unique per invocation: {ids:?}"
    );
}

#[tokio::test]
async fn events_a_driver_emits_reach_the_task_as_driver_events() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(mock_job(
        "evented",
        json!({"run_for": "10ms", "driver_event": "pulling image"}),
    ))
    .await;
    let a = t.finished_alloc("evented").await;
    let events = a["TaskStates"]["t"]["Events"].as_array().unwrap();
    let ev = events
        .iter()
        .find(|e| e["Type"] == "Driver")
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(ev["DriverMessage"], "pulling image");
    assert_eq!(ev["Details"]["source"], "mock");
}

#[tokio::test]
async fn the_mock_writes_stdout_string_repeatedly_while_it_runs() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(mock_job("talk", json!({"run_for": "700ms", "stdout_string": "hi\n", "stdout_repeat": 3, "stdout_repeat_duration": "100ms"}))).await;
    t.post_job(mock_job("short", json!({"run_for": "150ms", "stdout_string": "x", "stdout_repeat": 10, "stdout_repeat_duration": "100ms"}))).await;
    for (job, want) in [("talk", "hi\nhi\nhi\nhi\n"), ("short", "xx")] {
        let allocs = t
            .wait_allocs(job, Duration::from_secs(20), all_terminal)
            .await;
        let id = allocs[0]["ID"].as_str().unwrap();
        let path = t
            .agent
            .data_dir()
            .join("alloc")
            .join(id)
            .join("alloc/logs/t.stdout.0");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), want, "{job}");
    }
}

#[tokio::test]
async fn hcl_job_files_run_through_the_cli_and_parse_through_the_api() {
    let t = TestAgent::start("", vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("job.nomad.hcl");
    std::fs::write(&file, "job \"hcl\" {\n  type = \"batch\"\n  group \"g\" {\n    restart {\n      attempts = 0\n    }\n    task \"t\" {\n      driver = \"mock\"\n      config {\n        run_for = \"50ms\"\n      }\n    }\n  }\n}\n").unwrap();
    let api = paddock::cli::ApiArgs {
        address: t.base.clone(),
        token: None,
    };
    assert_eq!(
        paddock::cli::job::job_run(&api, &file, &[], false)
            .await
            .unwrap(),
        0
    );
    let job = t.get("/v1/job/hcl").await;
    assert_eq!(
        job["TaskGroups"][0]["Tasks"][0]["Config"]["run_for"],
        "50ms"
    );

    let r = t.http.post(t.url("/v1/jobs/parse")).json(&json!({"JobHCL": "job \"p\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"mock\"\n      resources {\n        memory = \"big\"\n      }\n    }\n  }\n}\n"})).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("job.group[0].task[0].resources.memory (line 6)"),
        "{text}"
    );
    let r = t
        .http
        .post(t.url("/v1/jobs/parse"))
        .json(&json!({"JobHCL": std::fs::read_to_string(&file).unwrap()}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let parsed: serde_json::Value = r.json().await.unwrap();
    assert_eq!(parsed["ID"], "hcl");
    assert_eq!(parsed["TaskGroups"][0]["RestartPolicy"]["Attempts"], 0);

    // Variables, as `nomad job run -var` sends them: they override the defaults.
    let hcl = "variable \"n\" {\n  default = 1\n}\nvariable \"who\" {\n  default = \"x\"\n}\njob \"v\" {\n  group \"g\" {\n    count = var.n\n    task \"t\" {\n      driver = \"mock\"\n      env {\n        WHO = \"${var.who} on ${node.unique.name}\"\n      }\n    }\n  }\n}\n";
    let r = t
        .http
        .post(t.url("/v1/jobs/parse"))
        .json(&json!({"JobHCL": hcl, "Variables": "n = 3\nwho = \"ops\"\n"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let parsed: serde_json::Value = r.json().await.unwrap();
    assert_eq!(parsed["TaskGroups"][0]["Count"], 3);
    assert_eq!(
        parsed["TaskGroups"][0]["Tasks"][0]["Env"]["WHO"],
        "ops on ${node.unique.name}"
    );
    let r = t
        .http
        .post(t.url("/v1/jobs/parse"))
        .json(&json!({"JobHCL": hcl, "Variables": "typo = 3\n"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("var.typo"));
}

#[tokio::test]
async fn with_an_acl_token_every_endpoint_requires_it() {
    let t = TestAgent::start("acl {\n  token = \"s3cret-token\"\n}\n", vec![]).await;
    for path in [
        "/v1/jobs",
        "/v1/allocations",
        "/v1/agent/self",
        "/v1/agent/health",
        "/v1/nodes",
        "/v1/status/leader",
        "/v1/components",
    ] {
        let r = t.http.get(t.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 403, "{path} without a token");
        assert!(r.text().await.unwrap().contains("requires an ACL token"));
        let r = t
            .http
            .get(t.url(path))
            .header("X-Nomad-Token", "wrong-token!")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{path} with a wrong token");
        let r = t
            .http
            .get(t.url(path))
            .header("X-Nomad-Token", "s3cret-token")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path} with the token");
        let r = t
            .http
            .get(t.url(path))
            .bearer_auth("s3cret-token")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path} with a bearer token");
    }
    // A write without the token changes nothing.
    let r = t
        .http
        .post(t.url("/v1/jobs"))
        .json(&json!({"Job": crate::harness::mock_job("nope", json!({}))}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(t.agent.server().jobs().is_empty());
    // The CLI sends -token / NOMAD_TOKEN.
    let api = paddock::cli::ApiArgs {
        address: t.base.clone(),
        token: Some("s3cret-token".into()),
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("j.json");
    std::fs::write(
        &file,
        crate::harness::mock_job("viacli", json!({"run_for": "10ms"})).to_string(),
    )
    .unwrap();
    assert_eq!(
        paddock::cli::job::job_run(&api, &file, &[], false)
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn status_and_regions_answer_like_a_single_node_cluster() {
    let t = TestAgent::start("region = \"eu\"\n", vec![]).await;
    assert_eq!(t.get("/v1/regions").await, json!(["eu"]));
    assert!(
        t.get("/v1/status/leader")
            .await
            .as_str()
            .unwrap()
            .contains(':')
    );
    let r = t.http.get(t.url("/v1/status/leader")).send().await.unwrap();
    assert!(r.headers().contains_key("X-Nomad-Index"));
}

#[tokio::test]
async fn job_summary_and_node_allocations() {
    let t = TestAgent::start("", vec![]).await;
    let mut job = mock_job("sum", json!({"run_for": "10ms"}));
    job["TaskGroups"][0]["Count"] = json!(2);
    t.post_job(job).await;
    t.wait_allocs("sum", Duration::from_secs(20), |a| {
        a.len() == 2 && all_terminal(a)
    })
    .await;
    let s = t.get("/v1/job/sum/summary").await;
    assert_eq!(s["Summary"]["g"]["Complete"], 2, "{s:#}");
    assert_eq!(s["Summary"]["g"]["Failed"], 0, "{s:#}");
    let node_id = t.get("/v1/agent/self").await["stats"]["client"]["node_id"]
        .as_str()
        .unwrap()
        .to_string();
    let allocs = t.get(&format!("/v1/node/{node_id}/allocations")).await;
    assert_eq!(allocs.as_array().unwrap().len(), 2);
    assert!(allocs[0]["Job"]["ID"].is_string());
    let r = t
        .http
        .get(t.url("/v1/node/not-this-node/allocations"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = t
        .http
        .get(t.url("/v1/job/nope/summary"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}
