//! Nomad-native service discovery on a real agent: a job's group and task `service`
//! blocks are registered while their tasks run and deregistered when they stop, answered
//! at Nomad's routes (`/v1/services`, `/v1/service/{name}` with `choose`, `tag` and
//! `filter`, `/v1/allocation/{id}/services`), published on the `Service` topic, kept
//! across a restart, and shown by `agent service list|info`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{AgentProcess, TestAgent};

/// A raw_exec service job: a group service `web` on the dynamic port `http`, and a task
/// service named from the task's environment, with no port.
fn web_job(id: &str) -> Value {
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g",
        "Networks": [{ "DynamicPorts": [{ "Label": "http" }] }],
        "Services": [{ "Name": "web", "PortLabel": "http", "Tags": ["v1", "${NOMAD_JOB_ID}"], "Provider": "nomad" }],
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sleep", "args": ["600"] },
            "Services": [{ "Name": "${NOMAD_TASK_NAME}-metrics", "Provider": "nomad" }],
            "Resources": { "CPU": 20, "MemoryMB": 16 } }] }] })
}

/// Poll `path` until `done` holds of its answer (or fail after 30 s).
async fn until(t: &TestAgent, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = t.get(path).await;
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{path}: {v:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many entries the list at `path` has.
async fn count(t: &TestAgent, path: &str) -> usize {
    t.get(path).await.as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_register_while_their_tasks_run_and_go_when_they_stop() {
    let t = TestAgent::start("", vec![]).await;
    t.register(web_job("web")).await;
    let regs = until(&t, "/v1/service/web", |v| {
        v.as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    let allocs = t.get("/v1/job/web/allocations").await;
    let alloc_id = allocs[0]["ID"].as_str().unwrap().to_string();
    let alloc = t.get(&format!("/v1/allocation/{alloc_id}")).await;
    let port = &alloc["AllocatedResources"]["Shared"]["Ports"][0];
    let r = &regs[0];
    assert_eq!(r["ID"], format!("_nomad-task-{alloc_id}-group-g-web-http"));
    assert_eq!(
        (r["Address"].clone(), r["Port"].clone()),
        (port["HostIP"].clone(), port["Value"].clone())
    );
    assert_eq!(r["Tags"], json!(["v1", "web"]), "tags interpolated");
    assert_eq!(
        (r["JobID"].as_str(), r["AllocID"].as_str()),
        (Some("web"), Some(alloc_id.as_str()))
    );
    assert_eq!(r["Datacenter"], "dc1");
    assert!(r["CreateIndex"].as_u64().unwrap() > 0);

    let list = until(&t, "/v1/services", |v| {
        v[0]["Services"].as_array().is_some_and(|s| s.len() == 2)
    })
    .await;
    assert_eq!(list[0]["Namespace"], "default");
    assert_eq!(
        list[0]["Services"][0],
        json!({ "ServiceName": "t-metrics", "Tags": [] })
    );
    assert_eq!(
        list[0]["Services"][1],
        json!({ "ServiceName": "web", "Tags": ["v1", "web"] })
    );
    let of_alloc = t.get(&format!("/v1/allocation/{alloc_id}/services")).await;
    assert_eq!(of_alloc.as_array().unwrap().len(), 2, "{of_alloc}");

    // choose, tag, filter, as Nomad answers them.
    assert_eq!(count(&t, "/v1/service/web?choose=1|caller").await, 1);
    let (s, v) = t
        .send(reqwest::Method::GET, "/v1/service/web?choose=one", None)
        .await;
    assert_eq!(s, 400, "{v}");
    assert!(
        v.to_string()
            .contains("Parameter for choose must be in form"),
        "{v}"
    );
    assert!(count(&t, "/v1/service/web?tag=v2").await == 0);
    assert_eq!(count(&t, "/v1/service/web?tag=v1").await, 1);
    let f = t.get("/v1/service/web?filter=%22v1%22%20in%20Tags").await;
    assert_eq!(f.as_array().unwrap().len(), 1, "{f}");
    assert!(count(&t, "/v1/service/web?namespace=prod").await == 0);

    // The CLI, as `nomad service` prints it.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(crate::harness::agent_bin())
            .args(args)
            .args(["-address", &t.base])
            .env_remove("NOMAD_ADDR")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let listed = cli(&["service", "list"]);
    assert!(
        listed.starts_with("Service Name") && listed.contains("web           [v1,web]"),
        "{listed}"
    );
    let info = cli(&["service", "info", "we"]);
    assert!(
        info.contains(&format!(
            "{}:{}",
            port["HostIP"].as_str().unwrap(),
            port["Value"]
        )),
        "{info}"
    );
    assert!(info.contains(&alloc_id[..8]), "{info}");

    // The job's page lists its services with their allocation.
    let page = t.text("/ui/jobs/web").await;
    assert!(
        page.contains("<h2>Services</h2>")
            && page.contains(r#"<tr data-service="web">"#)
            && page.contains(&alloc_id[..8]),
        "{page}"
    );

    // Stopping the job deregisters both; each change was an event.
    let (s, _) = t.send(reqwest::Method::DELETE, "/v1/job/web", None).await;
    assert_eq!(s, 200);
    until(&t, "/v1/services", |v| {
        v.as_array().is_some_and(Vec::is_empty)
    })
    .await;
    assert!(count(&t, "/v1/service/web").await == 0);
    let url = format!("{}/v1/event/stream?topic=Service&index=0", t.base);
    let events = crate::harness::stream_events(&url, |e| {
        e.iter()
            .filter(|e| e["Type"] == "ServiceDeregistration")
            .count()
            >= 2
    })
    .await;
    let web: Vec<&str> = events
        .iter()
        .filter(|e| e["Payload"]["Service"]["ServiceName"] == "web")
        .map(|e| e["Type"].as_str().unwrap())
        .collect();
    assert_eq!(
        web,
        ["ServiceRegistration", "ServiceDeregistration"],
        "{events:#?}"
    );
    assert!(
        events
            .iter()
            .all(|e| e["Topic"] == "Service" && e["FilterKeys"][0] == "web")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_naming_a_port_its_group_lacks_is_refused_and_a_registration_can_be_deleted() {
    let t = TestAgent::start("", vec![]).await;
    let mut bad = web_job("bad");
    bad["TaskGroups"][0]["Services"][0]["PortLabel"] = json!("admin");
    let r = t.post_job(bad).await;
    assert_eq!(r.status(), 400);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("Job.TaskGroups[0].Services[0]")
            && text.contains("port label \"admin\" does not exist"),
        "{text}"
    );
    // Nomad's default provider is Consul: registered here all the same, and said so.
    let mut consul = web_job("consul");
    consul["TaskGroups"][0]["Services"][0]
        .as_object_mut()
        .unwrap()
        .remove("Provider");
    let (s, reg) = t.post("/v1/jobs", json!({ "Job": consul })).await;
    assert_eq!(s, 200, "{reg}");
    assert!(
        reg["Warnings"]
            .as_str()
            .unwrap()
            .contains("Job.TaskGroups[0].Services[0].Provider: no Consul here"),
        "{reg}"
    );
    let regs = until(&t, "/v1/service/web", |v| {
        v.as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    let id = regs[0]["ID"].as_str().unwrap();
    // Another namespace's id is not found; in its own namespace it goes.
    for (query, want) in [("?namespace=prod", 404), ("", 200)] {
        let path = format!("/v1/service/web/{id}{query}");
        let (s, v) = t.send(reqwest::Method::DELETE, &path, None).await;
        assert_eq!(s, want, "{path}: {v}");
    }
    assert!(count(&t, "/v1/service/web").await == 0);
}

/// Registrations are in the state DB: after `kill -9` and a start they are there with
/// their indexes while the task was reattached; a task that died meanwhile takes its
/// registrations with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_survive_a_restart_and_leave_with_a_task_that_died_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = AgentProcess::new(dir.path());
    a.start().await;
    // Its own sleep, found by its argument; no restart, so a death ends the allocation.
    let mut job = web_job("web");
    job["TaskGroups"][0]["Tasks"][0]["Config"]["args"] = json!(["6017"]);
    job["TaskGroups"][0]["RestartPolicy"] = json!({ "Attempts": 0, "Mode": "fail" });
    // A check (of a port nothing listens on: it fails, and runs all the same).
    job["TaskGroups"][0]["Services"][0]["Checks"] = json!([{ "Name": "port", "Type": "tcp",
        "Interval": 1_000_000_000u64, "Timeout": 1_000_000_000u64 }]);
    a.post_job(job).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let before = loop {
        let v = a.get("/v1/service/web").await;
        if v.as_array().is_some_and(|l| !l.is_empty()) {
            break v;
        }
        assert!(Instant::now() < deadline, "never registered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    a.kill9();
    a.start().await;
    let after = a.get("/v1/service/web").await;
    assert_eq!(after, before, "the same registration, indexes and all");
    // Its check runs again at once after the restart (its first run half an interval
    // on), though the reattached task changed nothing.
    let alloc_id = before[0]["AllocID"].as_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(6);
    loop {
        let c = a
            .get(&format!("/v1/client/allocation/{alloc_id}/checks"))
            .await;
        if c.as_object()
            .is_some_and(|m| m.values().any(|r| r["Status"] == "failure"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no check ran after the restart: {c}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The task dies while the agent is down: at start its registrations go.
    let alloc = before[0]["AllocID"].as_str().unwrap().to_string();
    a.kill9();
    let pid_file = std::process::Command::new("pgrep")
        .args(["-f", "/bin/sleep 6017"])
        .output()
        .unwrap();
    for pid in String::from_utf8_lossy(&pid_file.stdout).split_whitespace() {
        let _ = std::process::Command::new("kill")
            .args(["-9", pid])
            .status();
    }
    a.start().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = a.get(&format!("/v1/allocation/{alloc}/services")).await;
        let regs = a.get("/v1/service/web").await;
        let gone = regs
            .as_array()
            .is_some_and(|l| l.iter().all(|r| r["AllocID"] != alloc.as_str()));
        if gone && v.as_array().is_some_and(Vec::is_empty) {
            break;
        }
        assert!(Instant::now() < deadline, "{regs:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Python HTTP server on the group's `http` port: 200 "up" at `/g` for its first three
/// seconds, then 500 "down" (and 500 at any other path).
const FLAKY: &str = r#"
import http.server, os, time
start = time.time()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = time.time() - start < 3 and self.path == "/g"
        self.send_response(200 if ok else 500)
        self.end_headers()
        self.wfile.write(b"up" if ok else b"down")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["NOMAD_PORT_http"])), H).serve_forever()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_pass_turn_critical_and_check_restart_restarts_the_task() {
    let t = TestAgent::start("", vec![]).await;
    let second = 1_000_000_000u64;
    let job = json!({ "ID": "flaky", "Type": "service", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 3, "Interval": 600 * second, "Delay": second, "Mode": "fail" },
        "Networks": [{ "DynamicPorts": [{ "Label": "http" }] }],
        "Services": [{ "Name": "flaky", "PortLabel": "http", "Provider": "nomad", "Checks": [
            { "Name": "health", "Type": "http", "Path": "/${NOMAD_GROUP_NAME}", "Interval": second, "Timeout": second,
              "CheckRestart": { "Limit": 2, "Grace": second } },
            { "Name": "port", "Type": "tcp", "Interval": second, "Timeout": second }] }],
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "python3", "args": ["-c", FLAKY] },
            "Resources": { "CPU": 20, "MemoryMB": 32 } }] }] });
    t.register(job).await;
    let allocs = t
        .wait_allocs("flaky", Duration::from_secs(30), |a| {
            a.iter().any(|a| a["ClientStatus"] == "running")
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let path = format!("/v1/client/allocation/{id}/checks");
    // Both pass within an interval and a half of the registration.
    let passing = until(&t, &path, |v| {
        v.as_object()
            .is_some_and(|m| m.len() == 2 && m.values().all(|r| r["Status"] == "success"))
    })
    .await;
    let http = passing
        .as_object()
        .unwrap()
        .values()
        .find(|r| r["Check"] == "health")
        .unwrap();
    assert_eq!(http["Output"], "nomad: http ok");
    // Seen by users: `alloc status` as Nomad's prints it, the allocation page, metrics.
    let out = std::process::Command::new(crate::harness::agent_bin())
        .args(["alloc", "status", &id, "-address", &t.base])
        .env_remove("NOMAD_ADDR")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Nomad Service Checks:"), "{text}");
    assert!(
        text.contains("flaky    (group)  health  healthiness  success"),
        "{text}"
    );
    let page = t.text(&format!("/ui/allocations/{id}")).await;
    assert!(
        page.contains(r#"<tr data-service="flaky">"#) && page.contains(r#"data-check="health""#),
        "{page}"
    );
    let prom = t.text("/v1/metrics?format=prometheus").await;
    assert!(
        prom.contains(r#"paddock_client_service_checks{status="success"} 2"#),
        "{prom}"
    );
    assert!(
        prom.contains(r#"paddock_client_service_check_probes_total{result="passed"}"#),
        "{prom}"
    );
    assert_eq!(http["StatusCode"], 200);
    assert_eq!(
        (
            http["Mode"].as_str(),
            http["Group"].as_str(),
            http["Service"].as_str()
        ),
        (Some("healthiness"), Some("g"), Some("flaky"))
    );
    assert_eq!(http["ID"].as_str().unwrap().len(), 64);
    // Then the server answers 500: the http check fails (the port still answers), and
    // after two failing results the task is restarted, counted against its policy.
    let failing = until(&t, &path, |v| {
        v.as_object().is_some_and(|m| {
            m.values()
                .any(|r| r["Check"] == "health" && r["Status"] == "failure")
        })
    })
    .await;
    let http = failing
        .as_object()
        .unwrap()
        .values()
        .find(|r| r["Check"] == "health")
        .unwrap();
    assert_eq!(
        (http["StatusCode"].as_u64(), http["Output"].as_str()),
        (Some(500), Some("down")),
        "{failing:#}"
    );
    let alloc = until(&t, &format!("/v1/allocation/{id}"), |a| {
        a["TaskStates"]["t"]["Restarts"].as_u64().unwrap_or(0) >= 1
    })
    .await;
    let events = alloc["TaskStates"]["t"]["Events"].as_array().unwrap();
    let signaled = events
        .iter()
        .find(|e| e["Type"] == "Restart Signaled")
        .expect("a Restart Signaled event");
    assert_eq!(
        signaled["Details"]["restart_reason"], "healthcheck: check \"health\" unhealthy",
        "{signaled}"
    );
    assert!(
        events.iter().any(|e| e["Type"] == "Restarting"),
        "the restart went through its policy: {events:#?}"
    );

    // Stopping the job stops its checks: their results go with the registration.
    let (s, _) = t.send(reqwest::Method::DELETE, "/v1/job/flaky", None).await;
    assert_eq!(s, 200);
    until(&t, &path, |v| v.as_object().is_some_and(|m| m.is_empty())).await;
    let (s, _) = t
        .send(
            reqwest::Method::GET,
            "/v1/client/allocation/nosuch/checks",
            None,
        )
        .await;
    assert_eq!(s, 404);
}

/// A Python HTTP server on the group's `http` port: with `MODE=late` it answers 500 for
/// its first three seconds and 200 after; with `MODE=never` always 500. The healthy deadline
/// (9 s) leaves room for a slow Python start on a loaded machine: with 6 s, a start that
/// took over 2 s failed a `late` deployment that should pass.
const LATE: &str = r#"
import http.server, os, time
start, mode = time.time(), os.environ["MODE"]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = mode == "late" and time.time() - start > 3
        self.send_response(200 if ok else 500)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["NOMAD_PORT_http"])), H).serve_forever()
"#;

fn judged_job(mode: &str, canary: u32) -> Value {
    let second = 1_000_000_000u64;
    json!({ "ID": "judged", "Type": "service", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0, "Mode": "fail" },
        "ReschedulePolicy": { "Attempts": 0, "Unlimited": false },
        "Update": { "MaxParallel": 1, "Canary": canary, "AutoRevert": true, "HealthCheck": "checks",
            "MinHealthyTime": second, "HealthyDeadline": 9 * second, "ProgressDeadline": 20 * second },
        "Networks": [{ "DynamicPorts": [{ "Label": "http" }] }],
        "Services": [{ "Name": "judged", "PortLabel": "http", "Provider": "nomad", "Checks": [
            { "Name": "ready", "Type": "http", "Path": "/", "Interval": second, "Timeout": second }] }],
        "Tasks": [{ "Name": "t", "Driver": "raw_exec", "Env": { "MODE": mode },
            "Config": { "command": "python3", "args": ["-c", LATE] },
            "Resources": { "CPU": 20, "MemoryMB": 32 } }] }] })
}

/// Deployments judged by checks: healthy only once the check passed (and for
/// `min_healthy_time`), and a canary whose check never passes fails at its healthy
/// deadline and is rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_are_judged_by_checks() {
    let t = TestAgent::start("", vec![]).await;
    t.register(judged_job("late", 0)).await;
    let d = until(&t, "/v1/job/judged/deployment", |d| {
        d["Status"] == "successful"
    })
    .await;
    let allocs = t.get("/v1/job/judged/allocations").await;
    let a = t
        .get(&format!(
            "/v1/allocation/{}",
            allocs[0]["ID"].as_str().unwrap()
        ))
        .await;
    let started = a["TaskStates"]["t"]["StartedAt"]
        .as_str()
        .unwrap()
        .to_string();
    let healthy = a["DeploymentStatus"]["Timestamp"]
        .as_str()
        .unwrap()
        .to_string();
    let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
    let waited = at(&healthy).duration_since(at(&started));
    assert!(
        waited >= jiff::SignedDuration::from_secs(4),
        "healthy {waited:?} after its start: before its check passed (3 s) and min_healthy_time (1 s): {d:#}"
    );
    assert_eq!(a["DeploymentStatus"]["Healthy"], true);

    // A canary that never passes: failed at the healthy deadline, the job rolled back.
    t.register(judged_job("never", 1)).await;
    let failed = until(&t, "/v1/job/judged/deployments", |l| {
        l.as_array()
            .is_some_and(|l| l.iter().any(|d| d["Status"] == "failed"))
    })
    .await;
    let f = failed
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["Status"] == "failed")
        .unwrap();
    assert!(
        f["StatusDescription"]
            .as_str()
            .unwrap()
            .contains("rolling back to job version 0"),
        "{f:#}"
    );
    let job = until(&t, "/v1/job/judged", |j| j["Version"] == 2).await;
    assert_eq!(
        job["TaskGroups"][0]["Tasks"][0]["Env"]["MODE"], "late",
        "the stable version again"
    );
    until(&t, "/v1/job/judged/deployment", |d| {
        d["JobVersion"] == 2 && d["Status"] == "successful"
    })
    .await;

    // A canary auto-promoted only once its check passed.
    let mut canary = judged_job("late", 1);
    canary["TaskGroups"][0]["Update"]["AutoPromote"] = json!(true);
    canary["TaskGroups"][0]["Tasks"][0]["Env"]["BUILD"] = json!("3");
    t.register(canary).await;
    let d = until(&t, "/v1/job/judged/deployment", |d| {
        d["JobVersion"] == 3 && d["Status"] == "successful"
    })
    .await;
    assert_eq!(d["TaskGroups"]["g"]["Promoted"], true, "{d:#}");
    let id = d["TaskGroups"]["g"]["PlacedCanaries"][0].as_str().unwrap();
    let a = t.get(&format!("/v1/allocation/{id}")).await;
    let started = at(a["TaskStates"]["t"]["StartedAt"].as_str().unwrap());
    let healthy = at(a["DeploymentStatus"]["Timestamp"].as_str().unwrap());
    assert!(
        healthy.duration_since(started) >= jiff::SignedDuration::from_secs(4),
        "the canary was healthy before its check passed: {a:#}"
    );
}

/// A task whose templates read the `web` service and a variable, each with its own
/// `change_mode`: `signal` (SIGHUP, which the task echoes), `restart`, `noop`, and a `once`
/// template that is never rendered again.
fn watching_job() -> Value {
    let tmpl = |data: &str, dest: &str, mode: &str, extra: Value| {
        let mut t = json!({ "EmbeddedTmpl": data, "DestPath": dest, "ChangeMode": mode,
            "ChangeSignal": if mode == "signal" { "SIGHUP" } else { "" }, "Splay": 0 });
        t.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        t
    };
    let upstreams = "{{ range nomadService \"web\" }}{{ .Address }}:{{ .Port }}\n{{ end }}";
    json!({ "ID": "conf", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sh", "args": ["-c",
                "trap 'echo got-hup' HUP; echo started; while true; do sleep 0.1; done"] },
            "Templates": [
                tmpl(upstreams, "local/upstreams.txt", "signal", json!({})),
                tmpl(upstreams, "local/noop.txt", "noop", json!({})),
                tmpl(upstreams, "local/once.txt", "noop", json!({ "Once": true })),
                // `script`: the script runs in the task (its dir, its env); a failing one
                // without `fail_on_error` is told, and the task runs on.
                tmpl(upstreams, "local/script.txt", "script", json!({ "ChangeScript": {
                    "Command": "/bin/sh",
                    "Args": ["-c", "wc -l < local/script.txt > local/script-ran.txt"],
                    "Timeout": 5_000_000_000u64 } })),
                tmpl(upstreams, "local/failing.txt", "script", json!({ "ChangeScript": {
                    "Command": "/bin/sh", "Args": ["-c", "exit 3"] } })),
                tmpl("{{ with nomadVar \"nomad/jobs/conf\" }}{{ .level }}{{ end }}",
                    "local/level.txt", "restart", json!({})),
            ],
            "Resources": { "CPU": 20, "MemoryMB": 16 } }] }] })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_render_again_when_services_and_variables_change_and_act_on_change_mode() {
    let t = TestAgent::start("", vec![]).await;
    let mut web = web_job("web");
    t.register(web.clone()).await;
    until(&t, "/v1/service/web", |v| {
        v.as_array().is_some_and(|a| a.len() == 1)
    })
    .await;
    t.register(watching_job()).await;
    let allocs = t
        .wait_allocs("conf", Duration::from_secs(30), |a| {
            a.iter().any(|a| a["ClientStatus"] == "running")
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let file = |name: &'static str| {
        let (t, id) = (&t, id.clone());
        async move {
            t.text(&format!("/v1/client/fs/cat/{id}?path=t/local/{name}"))
                .await
        }
    };
    assert_eq!(file("upstreams.txt").await.lines().count(), 1);

    // A second allocation of `web` registers: the templates reading it render again.
    web["TaskGroups"][0]["Count"] = json!(2);
    t.register(web).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while file("upstreams.txt").await.lines().count() != 2 {
        assert!(Instant::now() < deadline, "{}", file("upstreams.txt").await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let regs = t.get("/v1/service/web").await;
    let wanted: String = regs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{}:{}\n", r["Address"].as_str().unwrap(), r["Port"]))
        .collect();
    assert_eq!(file("upstreams.txt").await, wanted);
    assert_eq!(file("noop.txt").await, wanted, "noop renders too");
    assert_eq!(file("once.txt").await.lines().count(), 1, "once: not again");
    // `signal`: SIGHUP reached the task, told as Nomad tells it; no restart.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = t
            .text(&format!(
                "/v1/client/fs/logs/{id}?task=t&type=stdout&plain=true"
            ))
            .await;
        if out.contains("got-hup") {
            break;
        }
        assert!(Instant::now() < deadline, "{out}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let alloc = t.get(&format!("/v1/allocation/{id}")).await;
    let events = alloc["TaskStates"]["t"]["Events"]
        .as_array()
        .unwrap()
        .clone();
    let signaled = events
        .iter()
        .find(|e| e["Type"] == "Signaling")
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(signaled["DisplayMessage"], "Template re-rendered");
    assert!(!events.iter().any(|e| e["Type"] == "Restart Signaled"));
    // `script`: ran in the task dir after the render, told as Nomad tells it.
    let alloc = until(&t, &format!("/v1/allocation/{id}"), |a| {
        let ev = a["TaskStates"]["t"]["Events"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        ev.iter().any(|e| {
            e["DisplayMessage"]
                .as_str()
                .is_some_and(|m| m.starts_with("Template successfully ran script /bin/sh"))
        }) && ev.iter().any(|e| e["Type"] == "Task hook failed")
    })
    .await;
    assert_eq!(file("script-ran.txt").await.trim(), "2");
    let events = alloc["TaskStates"]["t"]["Events"].as_array().unwrap();
    let failed = events
        .iter()
        .find(|e| e["Type"] == "Task hook failed")
        .unwrap();
    assert_eq!(
        failed["DisplayMessage"],
        "Template ran script /bin/sh with arguments [\"-c\", \"exit 3\"] on change but it exited with code: 3"
    );
    assert_eq!(alloc["ClientStatus"], "running");

    // `restart`: a variable it reads changes; the task restarts once, not as a failure.
    let (status, v) = t
        .send(
            reqwest::Method::PUT,
            "/v1/var/nomad/jobs/conf",
            Some(json!({ "Items": { "level": "debug" } })),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let alloc = until(&t, &format!("/v1/allocation/{id}"), |a| {
        a["TaskStates"]["t"]["Restarts"] == 1 && a["TaskStates"]["t"]["State"] == "running"
    })
    .await;
    let events = alloc["TaskStates"]["t"]["Events"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e["Type"] == "Restart Signaled"
            && e["DisplayMessage"] == "Template with change_mode restart re-rendered"),
        "{events:#?}"
    );
    assert_eq!(file("level.txt").await, "debug");
    assert_eq!(alloc["ClientStatus"], "running");
}

/// A `change_script` with `fail_on_error` that fails kills the task, failed, as Nomad's
/// template manager does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_change_script_with_fail_on_error_kills_the_task() {
    let t = TestAgent::start("", vec![]).await;
    let job = json!({ "ID": "strict", "Type": "service", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0, "Mode": "fail" },
        "Tasks": [{ "Name": "t", "Driver": "raw_exec", "KillTimeout": 200_000_000u64,
            "Config": { "command": "/bin/sleep", "args": ["600"] },
            "Templates": [{ "EmbeddedTmpl": "{{ with nomadVar \"nomad/jobs/strict\" }}{{ .v }}{{ end }}",
                "DestPath": "local/v.txt", "ChangeMode": "script", "Splay": 0,
                "ChangeScript": { "Command": "/bin/sh", "Args": ["-c", "exit 1"], "FailOnError": true } }],
            "Resources": { "CPU": 20, "MemoryMB": 16 } }] }] });
    t.register(job).await;
    let id = running_alloc(&t, "strict").await;
    let (status, v) = t
        .send(
            reqwest::Method::PUT,
            "/v1/var/nomad/jobs/strict",
            Some(json!({ "Items": { "v": "2" } })),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let alloc = until(&t, &format!("/v1/allocation/{id}"), |a| {
        a["TaskStates"]["t"]["State"] == "dead"
    })
    .await;
    assert_eq!(alloc["TaskStates"]["t"]["Failed"], true, "{alloc:#}");
    let events = alloc["TaskStates"]["t"]["Events"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e["Type"] == "Killing"
            && e["DisplayMessage"] == "Template script failed, task is being killed"),
        "{events:#?}"
    );
}

/// The id of the job's first allocation once one runs.
async fn running_alloc(t: &TestAgent, job: &str) -> String {
    let allocs = t
        .wait_allocs(job, Duration::from_secs(30), |a| {
            a.iter().any(|a| a["ClientStatus"] == "running")
        })
        .await;
    allocs[0]["ID"].as_str().unwrap().to_string()
}

/// The result of the check named `name` in an allocation's check results.
fn check_named(results: &Value, name: &str) -> Value {
    results
        .as_object()
        .and_then(|m| m.values().find(|r| r["Check"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("no check {name:?}: {results:#}"))
}

/// A Redis stand-in on the group port `db`: `+PONG` to every RESP command.
const FAKE_REDIS: &str = r#"
import os, socketserver
class H(socketserver.StreamRequestHandler):
    def handle(self):
        while True:
            line = self.rfile.readline()
            if not line:
                return
            if line.startswith(b"*"):
                for _ in range(2 * int(line[1:])):
                    self.rfile.readline()
                self.wfile.write(b"+PONG\r\n")
                self.wfile.flush()
socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer(("127.0.0.1", int(os.environ["NOMAD_PORT_db"])), H).serve_forever()
"#;

/// The only check result of the allocation, once `done` holds of it.
async fn only_check(t: &TestAgent, alloc: &str, done: impl Fn(&Value) -> bool) -> Value {
    let v = until(t, &format!("/v1/client/allocation/{alloc}/checks"), |v| {
        v.as_object()
            .and_then(|m| m.values().next())
            .is_some_and(&done)
    })
    .await;
    v.as_object().unwrap().values().next().unwrap().clone()
}

/// Grant the built-in `redis-ping` check `hosts` (none: a plugin block without a network
/// grant) and reload.
async fn grant_redis_ping(t: &TestAgent, hosts: Option<&str>) {
    let grant = hosts.map_or(String::new(), |h| {
        format!("network {{\n hosts = [{h}]\n }}\n")
    });
    std::fs::write(
        t._dir.path().join("test.hcl"),
        format!("plugin \"redis-ping\" {{\n grant {{\n {grant} }}\n}}\n"),
    )
    .unwrap();
    let r = t.http.post(t.url("/v1/agent/reload")).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_component_probes_only_what_its_network_grant_allows() {
    let t = TestAgent::start("", vec![]).await;
    let second = 1_000_000_000u64;
    let job = |check_type: &str| {
        json!({ "ID": "cache", "Type": "service", "TaskGroups": [{ "Name": "g",
            "Networks": [{ "DynamicPorts": [{ "Label": "db" }] }],
            "Services": [{ "Name": "cache", "PortLabel": "db", "Provider": "nomad", "Checks": [
                { "Name": "ping", "Type": check_type, "Interval": second, "Timeout": second }] }],
            "Tasks": [{ "Name": "t", "Driver": "raw_exec",
                "Config": { "command": "python3", "args": ["-c", FAKE_REDIS] },
                "Resources": { "CPU": 20, "MemoryMB": 32 } }] }] })
    };
    // A type that is neither Nomad's nor a loaded check component is refused, naming it.
    let (status, v) = t
        .post("/v1/jobs", json!({ "Job": job("memcached-ping") }))
        .await;
    assert_eq!(status, 400, "{v}");
    let text = v.to_string();
    assert!(
        text.contains("Job.TaskGroups[0].Services[0].Checks[0].Type")
            && text.contains("redis-ping"),
        "{text}"
    );

    // No network grant: every probe is the host's denial, naming the grant.
    grant_redis_ping(&t, None).await;
    t.register(job("redis-ping")).await;
    let id = running_alloc(&t, "cache").await;
    let denied = only_check(&t, &id, |r| r["Status"] == "failure").await;
    let out = denied["Output"].as_str().unwrap();
    assert!(
        out.contains("component \"redis-ping\" has no `network` grant")
            && out.contains("127.0.0.1:"),
        "{denied:#}"
    );

    // A grant that lists another host: refused, naming the grant's hosts.
    grant_redis_ping(&t, Some("\"10.255.255.1:*\"")).await;
    let elsewhere = only_check(&t, &id, |r| {
        r["Output"]
            .as_str()
            .is_some_and(|o| o.contains("not in its `network` grant"))
    })
    .await;
    assert_eq!(elsewhere["Status"], "failure", "{elsewhere:#}");
    assert!(
        elsewhere["Output"]
            .as_str()
            .unwrap()
            .contains(r#"["10.255.255.1:*"]"#),
        "{elsewhere:#}"
    );

    // Granted loopback: the component speaks Redis to the task and the check passes.
    grant_redis_ping(&t, Some("\"127.0.0.1:*\"")).await;
    let passing = only_check(&t, &id, |r| r["Status"] == "success").await;
    assert_eq!(passing["Output"], "redis: PONG", "{passing:#}");
    // It is a component like any other: listed with its world and grants.
    let components = t.get("/v1/components").await;
    let c = components["Components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["Name"] == "redis-ping" && c["State"] == "active")
        .unwrap_or_else(|| panic!("{components:#}"));
    assert_eq!(c["World"], "check", "{c:#}");
    assert!(c.to_string().contains("network(127.0.0.1:*)"), "{c:#}");
}

/// Serves 10 bytes at `/small` and 10,000 at `/big` on the group port `http`.
const SIZES: &str = r#"
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"x" * (10 if self.path == "/small" else 10000)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["NOMAD_PORT_http"])), H).serve_forever()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_component_s_http_requests_go_only_where_its_grant_says_and_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = guest_artifacts::FIXTURE_HOSTILE_CHECK;
    std::fs::write(dir.path().join(fixture.file_name), fixture.bytes).unwrap();
    let config = r#"
plugin "hostile-check" {
  file = "fixture_hostile_check.wasm"
  grant {
    network {
      hosts              = ["127.0.0.1:*"]
      max_response_bytes = 1000
    }
  }
}
"#;
    let t = TestAgent::start(config, vec![dir.path().to_path_buf()]).await;
    let second = 1_000_000_000u64;
    let check = |name: &str, body: &str| {
        json!({ "Name": name, "Type": "hostile-check", "Body": body,
            "Interval": second, "Timeout": 2 * second })
    };
    let job = json!({ "ID": "sizes", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Networks": [{ "DynamicPorts": [{ "Label": "http" }] }],
        "Services": [{ "Name": "sizes", "PortLabel": "http", "Provider": "nomad", "Checks": [
            check("small", "http http://TARGET/small"),
            check("big", "http http://TARGET/big"),
            check("elsewhere", "http http://192.0.2.1/"),
            check("by-name", "http http://localhost/"),
        ] }],
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "python3", "args": ["-c", SIZES] },
            "Resources": { "CPU": 20, "MemoryMB": 32 } }] }] });
    t.register(job).await;
    let id = running_alloc(&t, "sizes").await;
    let results = until(&t, &format!("/v1/client/allocation/{id}/checks"), |v| {
        v.as_object().is_some_and(|m| {
            m.len() == 4
                && m.values()
                    .all(|r| r["Status"] != "pending" && r["Output"] != "")
                && m.values()
                    .any(|r| r["Check"] == "small" && r["Status"] == "success")
        })
    })
    .await;
    let by_name = |n: &str| check_named(&results, n);
    assert_eq!(by_name("small")["Output"], "status 200, read 10 bytes");
    let big = by_name("big");
    assert_eq!(big["Status"], "failure", "{big:#}");
    let out = big["Output"].as_str().unwrap();
    assert!(
        out.contains("reading the body after") && out.contains("1000"),
        "{out}"
    );
    for (check, authority) in [("elsewhere", "192.0.2.1:80"), ("by-name", "localhost:80")] {
        let r = by_name(check);
        let out = r["Output"].as_str().unwrap();
        assert!(
            r["Status"] == "failure"
                && out.contains(&format!(
                    "component \"hostile-check\" may not send an HTTP request to {authority}"
                )),
            "{check}: {r:#}"
        );
    }
}

/// Serves `ok` over https on the group port `https` with the certificate in the task dir.
const TLS_SERVER: &str = r#"
import http.server, os, ssl
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", int(os.environ["NOMAD_PORT_https"])), H)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
c.load_cert_chain(os.environ["CERT"], os.environ["KEY"])
s.socket = c.wrap_socket(s.socket, server_side=True)
s.serve_forever()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_checks_verify_the_certificate_unless_told_to_skip() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let t = TestAgent::start("", vec![]).await;
    let second = 1_000_000_000u64;
    let check = |name: &str, skip: bool| {
        json!({ "Name": name, "Type": "http", "Protocol": "https", "Path": "/",
            "TLSSkipVerify": skip, "Interval": second, "Timeout": second })
    };
    let job = json!({ "ID": "tls", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Networks": [{ "DynamicPorts": [{ "Label": "https" }] }],
        "Services": [{ "Name": "tls", "PortLabel": "https", "Provider": "nomad", "Checks": [
            check("verified", false), check("skipped", true)] }],
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "python3", "args": ["-c", TLS_SERVER] },
            "Env": { "CERT": cert.display().to_string(), "KEY": key.display().to_string() },
            "Resources": { "CPU": 20, "MemoryMB": 32 } }] }] });
    let (status, v) = t.post("/v1/jobs", json!({ "Job": job })).await;
    assert_eq!(status, 200, "{v}");
    assert!(
        !v.to_string().contains("Protocol"),
        "an https check is acted on, not warned about: {v}"
    );
    let id = running_alloc(&t, "tls").await;
    let results = until(&t, &format!("/v1/client/allocation/{id}/checks"), |v| {
        v.as_object().is_some_and(|m| {
            m.len() == 2
                && m.values()
                    .all(|r| r["Status"] != "pending" && r["Output"] != "")
                && m.values().any(|r| r["Status"] == "success")
        })
    })
    .await;
    let by_name = |n: &str| check_named(&results, n);
    let skipped = by_name("skipped");
    assert_eq!(
        (skipped["Status"].as_str(), skipped["StatusCode"].as_u64()),
        (Some("success"), Some(200)),
        "{skipped:#}"
    );
    let verified = by_name("verified");
    assert_eq!(verified["Status"], "failure", "{verified:#}");
    assert!(
        verified["Output"].as_str().unwrap().contains("certificate"),
        "{verified:#}"
    );
}

/// A check component is hot-swapped like any other: a job naming it is refused until its
/// file lands in the watched folder, its checks run once it is loaded, and they fail naming
/// it once it is removed — the agent never restarts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_component_comes_and_goes_with_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = r#"
plugin "hostile-check" {
  file = "fixture_hostile_check.wasm"
  grant {
    network {
      hosts = ["127.0.0.1:*"]
    }
  }
}
"#;
    let t = TestAgent::start(config, vec![dir.path().to_path_buf()]).await;
    t.agent.watch_components().unwrap();
    let second = 1_000_000_000u64;
    let job = json!({ "ID": "swapped", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Networks": [{ "DynamicPorts": [{ "Label": "db" }] }],
        "Services": [{ "Name": "swapped", "PortLabel": "db", "Provider": "nomad", "Checks": [
            { "Name": "ping", "Type": "hostile-check", "Body": "target",
              "Interval": second, "Timeout": second }] }],
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "python3", "args": ["-c", FAKE_REDIS] },
            "Resources": { "CPU": 20, "MemoryMB": 32 } }] }] });
    let (status, v) = t.post("/v1/jobs", json!({ "Job": job.clone() })).await;
    assert_eq!(status, 400, "{v}");
    assert!(v.to_string().contains("(loaded: redis-ping)"), "{v}");
    // The file lands (a rename into place, as an operator's deploy does).
    let fixture = guest_artifacts::FIXTURE_HOSTILE_CHECK;
    let staged = dir.path().join(".staged");
    std::fs::write(&staged, fixture.bytes).unwrap();
    std::fs::rename(&staged, dir.path().join(fixture.file_name)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, v) = t.post("/v1/jobs", json!({ "Job": job.clone() })).await;
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "never loaded: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let id = running_alloc(&t, "swapped").await;
    let up = only_check(&t, &id, |r| r["Status"] == "success").await;
    assert!(
        up["Output"]
            .as_str()
            .unwrap()
            .starts_with("connected to 127.0.0.1:"),
        "{up:#}"
    );
    // The file goes: the component is unloaded, and its checks say so.
    std::fs::remove_file(dir.path().join(fixture.file_name)).unwrap();
    let gone = only_check(&t, &id, |r| r["Status"] == "failure").await;
    assert!(
        gone["Output"]
            .as_str()
            .unwrap()
            .contains("check component \"hostile-check\" is not loaded"),
        "{gone:#}"
    );
}
