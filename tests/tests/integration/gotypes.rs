//! Every endpoint's answer, decoded as Nomad's Go client decodes it.
//!
//! One agent gets real state (a service job with two mock tasks, a port and a disk; a
//! batch job that completes; a job holding a device; a periodic job and its forced
//! launch; a parameterized job and a dispatch; versions, a revert and a stop), then every
//! route the API serves is called, with every method it takes, and each answer is
//! decoded into the Go-typed mirror of the type Go's `api` package decodes it into
//! (`paddock_tests::gotypes`). Event-stream lines are read while that happens and their
//! payloads decoded as `Event.Allocation()`, `.Job()` and `.Evaluation()` decode them.
//!
//! The test fails listing every mismatch as `METHOD path: GoType.field.path: Go type:
//! why; sent value`, every route answered with something other than 200, every route
//! the routers declare that it did not call, and the few things a Go client relies on
//! that a decode cannot see (every task of an allocation accounted for, the job version
//! an allocation stub claims, an evaluation's node).

use std::collections::BTreeSet;
use std::time::Duration;

use base64::Engine;
use paddock_tests::gotypes as go;
use serde_json::{Value, json};

use crate::gocheck::{GoCheck, req, served_routes};
use crate::harness::{TestAgent, all_terminal, mock_job};

/// The service job: two tasks (one with resources, one with Nomad's defaults), a dynamic
/// port, an ephemeral disk, and the cluster-only blocks Paddock keeps but does not use.
fn web_job() -> Value {
    json!({ "ID": "web", "Type": "service", "Meta": { "owner": "gotypes" },
        "Constraints": [{ "LTarget": "${attr.kernel.name}", "RTarget": "linux", "Operand": "=" }],
        "Update": { "MaxParallel": 1, "Stagger": 30_000_000_000u64 },
        "TaskGroups": [{ "Name": "g", "Count": 1, "EphemeralDisk": { "SizeMB": 150 },
            "ReschedulePolicy": { "Attempts": 1, "Interval": 3_600_000_000_000u64 },
            "Services": [{ "Name": "web", "PortLabel": "http", "Provider": "nomad",
                "Checks": [{ "Type": "tcp", "Interval": 1_000_000_000u64, "Timeout": 1_000_000_000u64 }] }],
            "Networks": [{ "Mode": "host", "DynamicPorts": [{ "Label": "http" }] }],
            "Tasks": [
                { "Name": "t", "Driver": "mock", "Resources": { "CPU": 120, "MemoryMB": 64 },
                  "Config": { "run_for": "1h", "stdout_string": "hello\n" } },
                { "Name": "side", "Driver": "mock", "Config": { "run_for": "1h" } }] }] })
}

fn batch_job() -> Value {
    let mut j = mock_job("batch", json!({ "run_for": "50ms" }));
    j["TaskGroups"][0]["Count"] = json!(3);
    j
}

fn device_job() -> Value {
    json!({ "ID": "dev", "Type": "service", "TaskGroups": [{ "Name": "d",
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "1h" },
            "Resources": { "CPU": 100, "MemoryMB": 32,
                "Devices": [{ "Name": "paddock/mock", "Count": 1 }] } }] }] })
}

fn periodic_job() -> Value {
    let mut j = mock_job("cron", json!({ "run_for": "10ms" }));
    j["Periodic"] = json!({ "Enabled": true, "Spec": "0 0 1 1 *", "SpecType": "cron" });
    j
}

fn parameterized_job() -> Value {
    let mut j = mock_job("param", json!({ "run_for": "10ms" }));
    j["ParameterizedJob"] = json!({ "Payload": "optional", "MetaOptional": ["who"] });
    j["TaskGroups"][0]["Tasks"][0]["DispatchPayload"] = json!({ "File": "in.txt" });
    j
}

const HCL: &str = r#"
job "parsed" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "mock"
      config {
        run_for = "1s"
      }
    }
  }
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_decodes_as_nomads_go_client_decodes_it() {
    // A driver pulled from a file source whose every new version waits for approval, so
    // that `components/pull` and `components/approve` have something to do.
    let sources = tempfile::tempdir().unwrap();
    let sleeper = sources.path().join("sleeper.wasm");
    std::fs::write(&sleeper, guest_artifacts::SLEEPER_DRIVER.bytes).unwrap();
    let t = TestAgent::start(
        &format!(
            "plugin \"sleeper\" {{\n  source = \"file://{}\"\n  auto_approve = \"never\"\n}}\n",
            sleeper.display()
        ),
        vec![],
    )
    .await;
    let mut c = GoCheck::new(&t);
    let events = watch_events(&mut c).await;

    // Writes that make the state, each register route with each method.
    let register = |b: Value| json!({ "Job": b });
    c.json::<go::JobRegisterResponse>(req("POST", "/v1/jobs").body(register(web_job())))
        .await;
    c.json::<go::JobRegisterResponse>(req("PUT", "/v1/jobs").body(register(batch_job())))
        .await;
    c.json::<go::JobRegisterResponse>(
        req("POST", "/v1/job/{id}")
            .arg("dev")
            .body(register(device_job())),
    )
    .await;
    c.json::<go::JobRegisterResponse>(
        req("PUT", "/v1/job/{id}")
            .arg("cron")
            .body(register(periodic_job())),
    )
    .await;
    c.json::<go::JobRegisterResponse>(req("PUT", "/v1/jobs").body(register(parameterized_job())))
        .await;
    let tmp = mock_job("tmp", json!({ "run_for": "1h" }));
    c.json::<go::JobRegisterResponse>(req("POST", "/v1/jobs").body(register(tmp)))
        .await;
    for m in ["POST", "PUT"] {
        c.json::<go::JobValidateResponse>(req(m, "/v1/validate/job").body(register(web_job())))
            .await;
        c.json::<go::Job>(
            req(m, "/v1/jobs/parse").body(json!({ "JobHCL": HCL, "Canonicalize": true })),
        )
        .await;
    }
    job_operations(&mut c).await;

    // Wait for the allocations to be where the reads need them.
    let running = |a: &[Value]| a.iter().any(|a| a["ClientStatus"] == "running");
    let web = t.wait_allocs("web", Duration::from_secs(30), running).await;
    let web_id = web.iter().find(|a| a["ClientStatus"] == "running").unwrap()["ID"]
        .as_str()
        .unwrap()
        .to_string();
    let dev = t.wait_allocs("dev", Duration::from_secs(30), running).await;
    let batch = t
        .wait_allocs("batch", Duration::from_secs(30), |a| {
            a.len() == 3 && all_terminal(a)
        })
        .await;
    let tmp = t.wait_allocs("tmp", Duration::from_secs(30), running).await;
    wait_stdout(&t, &web_id).await;

    reads(&mut c, &t).await;
    // A new version behind the file source each time, held (auto_approve = "never"), then
    // let in.
    for m in ["POST", "PUT"] {
        let build =
            crate::oci::with_section(guest_artifacts::SLEEPER_DRIVER.bytes, "build", m.as_bytes());
        std::fs::write(&sleeper, build).unwrap();
        let name = json!({ "Name": "sleeper" });
        let held = c
            .json::<Value>(req(m, "/v1/components/pull").body(name.clone()))
            .await;
        assert_eq!(
            held.map(|(v, _)| v["Outcome"].clone()),
            Some(json!("pending-approval"))
        );
        let approved = c
            .json::<Value>(req(m, "/v1/components/approve").body(name))
            .await;
        assert_eq!(
            approved.map(|(v, _)| v["Outcome"].clone()),
            Some(json!("replaced"))
        );
    }
    // The device job's stats carry its device's (Nomad's DeviceStats).
    c.json::<go::AllocResourceUsage>(
        req("GET", "/v1/client/allocation/{id}/stats").arg(dev[0]["ID"].as_str().unwrap()),
    )
    .await;
    alloc_operations(&mut c, &web_id).await;
    // The web job's group service, registered while its tasks run.
    c.json::<Vec<Option<go::ServiceRegistrationListStub>>>(req("GET", "/v1/services"))
        .await;
    c.json::<Vec<Option<go::ServiceRegistration>>>(req("GET", "/v1/service/{name}").arg("web"))
        .await;
    c.json::<Vec<Option<go::ServiceRegistration>>>(
        req("GET", "/v1/allocation/{id}/services").arg(&web_id),
    )
    .await;
    c.json::<std::collections::BTreeMap<String, go::AllocCheckStatus>>(
        req("GET", "/v1/client/allocation/{id}/checks").arg(&web_id),
    )
    .await;
    let reg = format!("_nomad-task-{web_id}-group-g-web-http");
    c.empty(
        req("DELETE", "/v1/service/{name}/{id}")
            .arg("web")
            .arg(&reg),
    )
    .await;
    for (a, m) in batch.iter().zip(["GET", "POST", "PUT"]) {
        let id = a["ID"].as_str().unwrap();
        c.empty(req(m, "/v1/client/allocation/{id}/gc").arg(id))
            .await;
    }
    let tmp_id = tmp[0]["ID"].as_str().unwrap();
    // Both stops before any gc: a gc between them could collect the stopped allocation.
    for m in ["POST", "PUT"] {
        c.json::<go::AllocStopResponse>(req(m, "/v1/allocation/{id}/stop").arg(tmp_id))
            .await;
    }
    for m in ["POST", "PUT"] {
        c.empty(req(m, "/v1/client/gc")).await;
    }
    c.empty(req("GET", "/v1/client/gc")).await;
    c.json::<go::JobDeregisterResponse>(req("DELETE", "/v1/job/{id}").arg("tmp"))
        .await;
    c.json::<go::JobDeregisterResponse>(
        req("DELETE", "/v1/job/{id}").arg("tmp").query("purge=true"),
    )
    .await;

    crate::gotypes_cluster::cluster(&mut c, &t.agent.node().id, &web_id).await;
    check_events(&mut c, events).await;
    // The ACL routes, on an agent with the ACL system on.
    let secured = TestAgent::start("acl {\n  enabled = true\n}\n", vec![]).await;
    let mut a = GoCheck::new(&secured);
    crate::gotypes_cluster::acl(&mut a).await;
    c.covered.extend(a.covered);
    c.failures.extend(a.failures);

    // Every route the routers declare was called, and answered 200.
    // The deployment operations are declared for their ACL need; with no deployments on one
    // node yet they answer 404, which no Go type decodes (the lifecycle issue makes them
    // real, and they come back here then).
    let served: std::collections::BTreeSet<_> = served_routes()
        .into_iter()
        .filter(|(m, p)| !(m != "GET" && p.starts_with("/v1/deployment/")))
        .collect();
    let missing: Vec<_> = served.difference(&c.covered).collect();
    let unknown: Vec<_> = c.covered.difference(&served).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "routes served but not checked (add them to this test): {missing:#?}\n\
         routes checked but not served: {unknown:#?}\nfailures so far:\n{}",
        c.failures.join("\n")
    );
    assert!(
        c.failures.is_empty(),
        "{} answers a Go client would not take as Nomad's:\n{}",
        c.failures.len(),
        c.failures.join("\n")
    );
}

/// Versions, plan, evaluate, revert, stable, periodic force and dispatch.
async fn job_operations(c: &mut GoCheck<'_>) {
    let mut v1 = web_job();
    v1["ID"] = json!("ver");
    c.json::<go::JobRegisterResponse>(req("POST", "/v1/jobs").body(json!({ "Job": v1.clone() })))
        .await;
    v1["Meta"]["owner"] = json!("second");
    for (m, diff) in [("POST", true), ("PUT", false)] {
        c.json::<go::JobPlanResponse>(
            req(m, "/v1/job/{id}/plan")
                .arg("ver")
                .body(json!({ "Job": v1, "Diff": diff })),
        )
        .await;
    }
    let source = json!({ "Source": "job \"ver\" {}\n", "Format": "hcl2",
        "VariableFlags": { "owner": "second" }, "Variables": "" });
    c.json::<go::JobRegisterResponse>(
        req("PUT", "/v1/jobs").body(json!({ "Job": v1, "Submission": source })),
    )
    .await;
    c.json::<go::JobSubmission>(
        req("GET", "/v1/job/{id}/submission")
            .arg("ver")
            .query("version=1"),
    )
    .await;
    for q in ["diffs=true", ""] {
        c.json::<go::JobVersionsResponse>(req("GET", "/v1/job/{id}/versions").arg("ver").query(q))
            .await;
    }
    for (m, version, prior) in [("POST", 0, 1), ("PUT", 1, 2)] {
        let body = json!({ "JobID": "ver", "JobVersion": version, "EnforcePriorVersion": prior });
        c.json::<go::JobRegisterResponse>(req(m, "/v1/job/{id}/revert").arg("ver").body(body))
            .await;
    }
    for (m, stable) in [("POST", true), ("PUT", false)] {
        let body = json!({ "JobID": "ver", "JobVersion": 3, "Stable": stable });
        c.json::<go::JobStabilityResponse>(req(m, "/v1/job/{id}/stable").arg("ver").body(body))
            .await;
    }
    for m in ["POST", "PUT"] {
        let body = json!({ "JobID": "ver", "EvalOptions": { "ForceReschedule": false } });
        c.json::<go::JobRegisterResponse>(req(m, "/v1/job/{id}/evaluate").arg("ver").body(body))
            .await;
        c.json::<go::PeriodicForceResponse>(req(m, "/v1/job/{id}/periodic/force").arg("cron"))
            .await;
        let payload = base64::engine::general_purpose::STANDARD.encode("input");
        let body = json!({ "JobID": "param", "Payload": payload, "Meta": { "who": m } });
        c.json::<go::JobDispatchResponse>(req(m, "/v1/job/{id}/dispatch").arg("param").body(body))
            .await;
    }
}

/// Every read, over every job, allocation, evaluation and the node.
async fn reads(c: &mut GoCheck<'_>, t: &TestAgent) {
    let jobs = c
        .json::<Vec<go::JobListStub>>(req("GET", "/v1/jobs").query("meta=true"))
        .await
        .map(|(v, _)| v)
        .unwrap_or_default();
    for j in &jobs {
        let id = j.ID.as_str();
        let job = c.json::<go::Job>(req("GET", "/v1/job/{id}").arg(id)).await;
        c.json::<go::JobSummary>(req("GET", "/v1/job/{id}/summary").arg(id))
            .await;
        c.json::<Vec<go::Evaluation>>(req("GET", "/v1/job/{id}/evaluations").arg(id))
            .await;
        c.json::<Vec<go::AllocationListStub>>(
            req("GET", "/v1/job/{id}/allocations")
                .arg(id)
                .query("all=true"),
        )
        .await;
        if let (Some((job, _)), "web") = (job, id) {
            check_kept_blocks(c, &job);
        }
    }
    let stubs = c
        .json::<Vec<go::AllocationListStub>>(req("GET", "/v1/allocations"))
        .await
        .map(|(v, _)| v)
        .unwrap_or_default();
    for s in &stubs {
        let a = c
            .json::<go::Allocation>(req("GET", "/v1/allocation/{id}").arg(&s.ID))
            .await;
        if let Some((a, _)) = a {
            check_allocation(c, s, &a);
        }
    }
    let evals = c
        .json::<Vec<go::Evaluation>>(req("GET", "/v1/evaluations"))
        .await
        .map(|(v, _)| v)
        .unwrap_or_default();
    if let Some((n, _)) = c
        .json::<go::EvalCountResponse>(req("GET", "/v1/evaluations/count"))
        .await
        && n.Count as usize != evals.len()
    {
        c.fail(format!(
            "GET /v1/evaluations/count: {} where the list holds {}",
            n.Count,
            evals.len()
        ));
    }
    for e in &evals {
        c.json::<go::Evaluation>(req("GET", "/v1/evaluation/{id}").arg(&e.ID))
            .await;
        c.json::<Vec<go::AllocationListStub>>(
            req("GET", "/v1/evaluation/{id}/allocations").arg(&e.ID),
        )
        .await;
        if e.TriggeredBy == "job-register" && !e.NodeID.is_empty() {
            c.fail(format!(
                "GET /v1/evaluation/{}: Evaluation.NodeID: {:?}, but Nomad leaves \
                 a job-register evaluation's node empty",
                e.ID, e.NodeID
            ));
        }
    }
    let node_id = t.agent.node().id;
    c.json::<Vec<go::NodeListStub>>(req("GET", "/v1/nodes"))
        .await;
    c.json::<go::Node>(req("GET", "/v1/node/{id}").arg(&node_id))
        .await;
    c.json::<Vec<go::Allocation>>(req("GET", "/v1/node/{id}/allocations").arg(&node_id))
        .await;
    c.json::<go::HostStats>(req("GET", "/v1/client/stats"))
        .await;
    // Namespaces: written by both methods, at the name and at the create route.
    let ns = |name: &str| {
        json!({ "Name": name, "Description": "gotypes", "Meta": { "k": "v" },
            "Capabilities": { "EnabledTaskDrivers": ["mock"] },
            "NodePoolConfiguration": { "Default": "default" } })
    };
    for (m, name) in [("POST", "ns-a"), ("PUT", "ns-b")] {
        c.write(req(m, "/v1/namespace/{name}").arg(name).body(ns(name)))
            .await;
        c.write(req(m, "/v1/namespace").body(ns(&format!("{name}-2"))))
            .await;
    }
    c.json::<Vec<Option<go::Namespace>>>(req("GET", "/v1/namespaces"))
        .await;
    c.json::<go::Namespace>(req("GET", "/v1/namespace/{name}").arg("ns-a"))
        .await;
    c.write(req("DELETE", "/v1/namespace/{name}").arg("ns-b-2"))
        .await;
    c.json::<go::AgentSelf>(req("GET", "/v1/agent/self")).await;
    c.json::<go::AgentHealthResponse>(req("GET", "/v1/agent/health"))
        .await;
    c.json::<go::StatusLeader>(req("GET", "/v1/status/leader"))
        .await;
    c.json::<go::StatusPeers>(req("GET", "/v1/status/peers"))
        .await;
    c.json::<go::RegionsList>(req("GET", "/v1/regions")).await;
    c.json::<go::MetricsSummary>(req("GET", "/v1/metrics"))
        .await;
    // Paddock's own: no Go type, any JSON with Nomad's headers.
    c.json::<Value>(req("GET", "/v1/components")).await;
    for m in ["POST", "PUT"] {
        c.json::<Value>(req(m, "/v1/components/reload")).await;
        c.json::<Value>(req(m, "/v1/agent/reload")).await;
    }
    for (m, ctx) in [
        ("POST", "all"),
        ("PUT", "jobs"),
        ("POST", "allocs"),
        ("PUT", "evals"),
        ("POST", "nodes"),
    ] {
        c.json::<go::SearchResponse>(
            req(m, "/v1/search").body(json!({ "Prefix": "", "Context": ctx })),
        )
        .await;
    }
}

/// Files, logs, stats, signal and restart of the running service allocation.
async fn alloc_operations(c: &mut GoCheck<'_>, id: &str) {
    c.json::<go::AllocResourceUsage>(req("GET", "/v1/client/allocation/{id}/stats").arg(id))
        .await;
    exec_frames(c, id).await;
    let root = c
        .json::<Vec<Option<go::AllocFileInfo>>>(
            req("GET", "/v1/client/fs/ls/{alloc}")
                .arg(id)
                .query("path=/"),
        )
        .await;
    for f in root
        .map(|(v, _)| v)
        .unwrap_or_default()
        .into_iter()
        .flatten()
    {
        let q = format!("path=/{}", f.Name);
        c.json::<go::AllocFileInfo>(req("GET", "/v1/client/fs/stat/{alloc}").arg(id).query(&q))
            .await;
    }
    let log = "path=alloc/logs/t.stdout.0";
    c.raw(req("GET", "/v1/client/fs/cat/{alloc}").arg(id).query(log))
        .await;
    c.raw(
        req("GET", "/v1/client/fs/readat/{alloc}")
            .arg(id)
            .query("path=alloc/logs/t.stdout.0&offset=0&limit=5"),
    )
    .await;
    let frames = c
        .raw(
            req("GET", "/v1/client/fs/logs/{alloc}")
                .arg(id)
                .query("task=t&type=stdout&origin=start&offset=0"),
        )
        .await
        .unwrap_or_default();
    let what = format!("GET /v1/client/fs/logs/{id}");
    let mut n = 0;
    for frame in serde_json::Deserializer::from_slice(&frames).into_iter::<Value>() {
        match frame {
            Ok(f) => {
                n += 1;
                c.decode::<go::StreamFrame>(&what, &f);
            }
            Err(e) => c.fail(format!("{what}: StreamFrame: not JSON: {e}")),
        }
    }
    if n == 0 {
        c.fail(format!("{what}: no frame (the task wrote to stdout)"));
    }
    for m in ["POST", "PUT"] {
        let body = json!({ "AllocID": id, "Task": "t", "Signal": "SIGHUP" });
        c.json::<go::GenericResponse>(
            req(m, "/v1/client/allocation/{id}/signal")
                .arg(id)
                .body(body),
        )
        .await;
    }
    for m in ["POST", "PUT"] {
        // A restart is refused while the task is not running, as the one before leaves it
        // for a moment: wait for it to run again.
        let t = c.agent();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while t.get(&format!("/v1/allocation/{id}")).await["TaskStates"]["side"]["State"]
            != "running"
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "side never ran again"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let body = json!({ "TaskName": "side" });
        c.json::<go::EmptyResponse>(
            req(m, "/v1/client/allocation/{id}/restart")
                .arg(id)
                .body(body),
        )
        .await;
    }
}

/// What a Go client relies on in an allocation beyond decoding it.
/// `alloc exec` into the mock's echo shell: every frame decodes as the Go client's
/// `ExecStreamingOutput`, and the exit comes as `nomad alloc exec` reads it.
async fn exec_frames(c: &mut GoCheck<'_>, id: &str) {
    let what = format!("GET /v1/client/allocation/{id}/exec");
    c.covered.insert((
        "GET".to_string(),
        "/v1/client/allocation/{id}/exec".to_string(),
    ));
    let mut ws = crate::alloc_exec::open_at(
        &c.base(),
        id,
        "t",
        &["sh", "-c", "echo from-exec; nope"],
        false,
    )
    .await;
    let mut frames = Vec::new();
    while let Some(Ok(m)) = futures::StreamExt::next(&mut ws).await {
        match m {
            tokio_tungstenite::tungstenite::Message::Text(t) => {
                frames.push(serde_json::from_str::<Value>(&t).unwrap())
            }
            tokio_tungstenite::tungstenite::Message::Close(_) => break,
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut exit = None;
    for f in &frames {
        if let Some(o) = c.decode::<go::ExecStreamingOutput>(&what, f) {
            if let Some(s) = o.stdout {
                out.extend(
                    base64::engine::general_purpose::STANDARD
                        .decode(&s.data.0)
                        .unwrap_or_default(),
                );
            }
            if o.exited {
                exit = o.result.map(|r| r.exit_code);
            }
        }
    }
    if out != b"from-exec\n" || exit != Some(127) {
        c.fail(format!(
            "{what}: stdout {:?}, exit {exit:?} (want \"from-exec\\n\", 127)",
            String::from_utf8_lossy(&out)
        ));
    }
}

fn check_allocation(c: &mut GoCheck<'_>, stub: &go::AllocationListStub, a: &go::Allocation) {
    let what = format!("GET /v1/allocation/{}", a.ID);
    let Some(job) = &a.Job else { return };
    let version = job.Version.unwrap_or_default();
    if stub.JobVersion != version {
        c.fail(format!(
            "GET /v1/allocations: AllocationListStub.JobVersion of {}: {}, \
             but its Job.Version is {version}",
            a.ID, stub.JobVersion
        ));
    }
    let group = job
        .TaskGroups
        .iter()
        .flatten()
        .find(|g| g.Name.as_deref() == Some(a.TaskGroup.as_str()));
    let Some(group) = group else {
        c.fail(format!(
            "{what}: Allocation.Job has no group {:?}",
            a.TaskGroup
        ));
        return;
    };
    let tasks: BTreeSet<&str> = group
        .Tasks
        .iter()
        .flatten()
        .map(|t| t.Name.as_str())
        .collect();
    let allocated: BTreeSet<&str> = a
        .AllocatedResources
        .iter()
        .flat_map(|r| r.Tasks.keys().map(String::as_str))
        .collect();
    let legacy: BTreeSet<&str> = a.TaskResources.keys().map(String::as_str).collect();
    for (field, got) in [
        ("AllocatedResources.Tasks", allocated),
        ("TaskResources", legacy),
    ] {
        if got != tasks {
            c.fail(format!(
                "{what}: Allocation.{field}: tasks {got:?}, but the group's tasks are {tasks:?}"
            ));
        }
    }
    let cpu: i64 = group
        .Tasks
        .iter()
        .flatten()
        .map(|t| t.Resources.as_ref().and_then(|r| r.CPU).unwrap_or_default())
        .sum();
    let disk = group
        .EphemeralDisk
        .as_ref()
        .and_then(|d| d.SizeMB)
        .unwrap_or_default();
    if let Some(r) = &a.Resources
        && (r.CPU != Some(cpu) || r.DiskMB != Some(disk))
    {
        c.fail(format!(
            "{what}: Allocation.Resources: CPU {:?} DiskMB {:?}, \
             but its tasks ask {cpu} MHz and its group {disk} MB",
            r.CPU, r.DiskMB
        ));
    }
}

/// The blocks Paddock does not act on come back as they were sent.
fn check_kept_blocks(c: &mut GoCheck<'_>, job: &go::Job) {
    let group = job
        .TaskGroups
        .first()
        .cloned()
        .flatten()
        .unwrap_or_default();
    for (field, kept) in [
        ("Constraints", !job.Constraints.is_empty()),
        ("Update", job.Update.is_some()),
        ("TaskGroups[0].Services", !group.Services.is_empty()),
        (
            "TaskGroups[0].ReschedulePolicy",
            group.ReschedulePolicy.is_some(),
        ),
    ] {
        if !kept {
            c.fail(format!(
                "GET /v1/job/web: Job.{field}: registered with one, read back without it"
            ));
        }
    }
}

/// Wait until task `t` of allocation `id` wrote to stdout, so the log endpoints read it.
async fn wait_stdout(t: &TestAgent, id: &str) {
    let file = t
        .agent
        .data_dir()
        .join("alloc")
        .join(id)
        .join("alloc/logs/t.stdout.0");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} never written",
            file.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Subscribe to the event stream; its lines arrive on the returned channel.
async fn watch_events(c: &mut GoCheck<'_>) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    if let Some(mut resp) = c.stream(req("GET", "/v1/event/stream")).await {
        tokio::spawn(async move {
            let mut buf = Vec::new();
            while let Ok(Some(chunk)) = resp.chunk().await {
                buf.extend_from_slice(&chunk);
                while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=nl).collect();
                    if tx
                        .send(String::from_utf8_lossy(&line).trim().to_string())
                        .is_err()
                    {
                        return;
                    }
                }
            }
        });
    }
    rx
}

/// Decode the event-stream lines read so far; every topic must have shown up.
async fn check_events(c: &mut GoCheck<'_>, mut rx: tokio::sync::mpsc::UnboundedReceiver<String>) {
    let what = "GET /v1/event/stream";
    let mut topics = BTreeSet::new();
    while let Ok(Some(line)) = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await {
        if line.is_empty() || line == "{}" {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            c.fail(format!("{what}: line is not JSON: {line}"));
            continue;
        };
        let Some(events) = c.decode::<go::Events>(what, &v) else {
            continue;
        };
        for (i, e) in events.Events.iter().enumerate() {
            topics.insert(e.Topic.clone());
            let payload = json!(e.Payload);
            let where_ = format!(
                "{what} (Index {}, event {i}: {} {})",
                events.Index, e.Topic, e.Type
            );
            c.decode::<go::EventPayload>(&where_, &payload);
        }
    }
    for topic in ["Job", "Allocation", "Evaluation"] {
        if !topics.contains(topic) {
            c.fail(format!("{what}: no {topic} event arrived"));
        }
    }
}
