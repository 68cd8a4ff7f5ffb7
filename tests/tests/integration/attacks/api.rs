//! A job submitter with an ordinary token (ACLs on) and an API client: the names and ids a
//! job gives (hole 5 and the fuzzer's ids), the variables a task reads (hole 10), the event
//! stream under many subscribers, connections held open or trickled, and service checks
//! aimed at what is not the allocation's.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{agent, failed_saying, job};
use crate::harness::AgentProcess;

const MGMT: &str = "attack-management-s3cret";

/// An agent with the ACL system on, a management token, and a client token that may write
/// jobs in namespace `dev` only (and read variables there).
async fn acl_agent(dir: &std::path::Path, extra: &str) -> (AgentProcess, String) {
    let mut a = agent(
        dir,
        "",
        &format!("acl {{\n  enabled = true\n  token = \"{MGMT}\"\n}}\n{extra}"),
    )
    .await;
    a.http = reqwest::Client::builder()
        .default_headers(
            [(
                "x-nomad-token",
                reqwest::header::HeaderValue::from_static(MGMT),
            )]
            .into_iter()
            .map(|(k, v)| (reqwest::header::HeaderName::from_static(k), v))
            .collect(),
        )
        .build()
        .unwrap();
    let send = |method: &str, path: &str, body: Value| {
        a.http
            .request(method.parse().unwrap(), a.url(path))
            .json(&body)
            .send()
    };
    let rules = r#"namespace "dev" { policy = "write" }"#;
    let r = send(
        "POST",
        "/v1/acl/policy/dev-writer",
        json!({ "Name": "dev-writer", "Rules": rules }),
    )
    .await
    .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let t: Value = send(
        "POST",
        "/v1/acl/token",
        json!({ "Name": "dev", "Type": "client", "Policies": ["dev-writer"] }),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    (a, t["SecretID"].as_str().unwrap().to_string())
}

/// POST a job as `token`: status and body.
async fn submit(a: &AgentProcess, token: &str, job: Value) -> (u16, String) {
    let r = reqwest::Client::new()
        .post(a.url("/v1/jobs"))
        .header("X-Nomad-Token", token)
        .json(&json!({ "Job": job }))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Hole 5 and the fuzzer's ids: a task named `..` (its dir was every allocation's), `.`,
/// `alloc`, and job ids with a newline, a space or a NUL are refused with a 400 naming the
/// field; an empty namespace is the default one, so the job is read and purged there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_ids_that_would_be_paths_or_log_lines_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (a, dev) = acl_agent(&root, "").await;
    let template = json!({ "EmbeddedTmpl": "x", "DestPath": "local/x" });
    for name in ["..", ".", "alloc", "a/b"] {
        let mut j = job("named", "mock", json!({}));
        j["Namespace"] = json!("dev");
        j["TaskGroups"][0]["Tasks"][0]["Name"] = json!(name);
        j["TaskGroups"][0]["Tasks"][0]["Templates"] = json!([template]);
        let (s, t) = submit(&a, &dev, j).await;
        assert_eq!(s, 400, "task {name:?}: {t}");
        assert!(t.contains("Job.TaskGroups[0].Tasks[0].Name"), "{t}");
    }
    for id in ["a\nb", "a b", "a\0b", "x\u{1b}[2Ky"] {
        let mut j = job(id, "mock", json!({}));
        j["Namespace"] = json!("dev");
        let (s, t) = submit(&a, &dev, j).await;
        assert_eq!(s, 400, "id {id:?}: {t}");
        assert!(t.contains("Job.ID"), "{t}");
    }
    // No allocation dir was made for any of them.
    let allocs = std::fs::read_dir(root.join("data/alloc"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(allocs, 0);
    // An empty namespace is `default`: the job reads and purges there.
    let mut j = job("blank-ns", "mock", json!({}));
    j["Namespace"] = json!("");
    let (s, t) = submit(&a, MGMT, j).await;
    assert_eq!(s, 200, "{t}");
    let read = a.get("/v1/job/blank-ns").await;
    assert_eq!(read["Namespace"], "default", "{read:#}");
    let r = a
        .http
        .delete(a.url("/v1/job/blank-ns?purge=true"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
}

/// Hole 10: a job `web/db` reads only its own variables: `nomad/jobs/web/db` is job `web`'s
/// group `db`, which a template of `web/db` does not render.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_id_with_a_slash_reads_no_other_jobs_variables() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (a, dev) = acl_agent(&root, "").await;
    let r = a
        .http
        .put(a.url("/v1/namespace/dev"))
        .json(&json!({ "Name": "dev" }))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let r = a
        .http
        .put(a.url("/v1/var/nomad/jobs/web/db?namespace=dev"))
        .json(&json!({ "Namespace": "dev", "Path": "nomad/jobs/web/db",
            "Items": { "password": "web-db-s3cret" } }))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let mut j = job("web/db", "mock", json!({ "run_for": "100ms" }));
    j["Namespace"] = json!("dev");
    j["TaskGroups"][0]["Tasks"][0]["Templates"] = json!([{
        "EmbeddedTmpl": "{{ with nomadVar \"nomad/jobs/web/db\" }}{{ .password }}{{ end }}",
        "DestPath": "local/secret" }]);
    let (s, t) = submit(&a, &dev, j).await;
    assert_eq!(s, 200, "{t}");
    let mut al = Value::Null;
    super::eventually("job web/db ends", async || {
        let allocs = a.get("/v1/job/web%2Fdb/allocations?namespace=dev").await;
        match allocs.as_array().and_then(|v| v.first()) {
            Some(first) if crate::harness::all_terminal(std::slice::from_ref(first)) => {
                al = a.alloc(first["ID"].as_str().unwrap()).await;
                true
            }
            _ => false,
        }
    })
    .await;
    failed_saying(&al, "may not read variable \"nomad/jobs/web/db\"");
    let secret = root
        .join("data/alloc")
        .join(al["ID"].as_str().unwrap())
        .join("t/local/secret");
    assert!(
        !std::fs::read_to_string(&secret)
            .unwrap_or_default()
            .contains("s3cret")
    );
}

/// The API client's: ninety subscribers replaying a full event buffer of large events do
/// not hold the API up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_stream_subscribers_do_not_hold_up_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(&root, "", "").await;
    // A full buffer of large events: jobs with 16 KB of meta each.
    let meta: serde_json::Map<String, Value> = (0..16)
        .map(|i| (format!("k{i}"), json!("m".repeat(1000))))
        .collect();
    for i in 0..40 {
        let mut j = job(&format!("big{i}"), "mock", json!({}));
        j["Meta"] = Value::Object(meta.clone());
        a.post_job(j).await;
    }
    // Ninety subscribers from index 0, reading slowly.
    let mut streams = Vec::new();
    for _ in 0..90 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", a.port)).unwrap();
        write!(
            s,
            "GET /v1/event/stream?index=0 HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        .unwrap();
        streams.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = Instant::now();
    let r = reqwest::Client::new()
        .get(a.url("/v1/agent/self"))
        .timeout(Duration::from_secs(15))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let took = asked.elapsed();
    eprintln!("/v1/agent/self beside 90 replaying subscribers: {took:?}");
    assert!(
        took < Duration::from_secs(3),
        "/v1/agent/self took {took:?}"
    );
    drop(streams);
}

/// The API client's: past `http_max_conns_per_client` a connection is told Nomad's 429 and
/// closed; a client trickling its headers is cut after `http_read_header_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_are_refused_and_slow_headers_cut() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(
        &root,
        "",
        "limits {\n  http_max_conns_per_client = 100\n  http_read_header_timeout = \"1s\"\n}\n",
    )
    .await;
    // A hundred streams held open from this address.
    let mut streams = Vec::new();
    for _ in 0..100 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", a.port)).unwrap();
        write!(
            s,
            "GET /v1/event/stream?index=0 HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        .unwrap();
        streams.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Fifteen more: past 100 connections from this address, each is refused with Nomad's
    // 429 and closed.
    let mut refused = 0;
    for _ in 0..15 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", a.port)).unwrap();
        write!(
            s,
            "GET /v1/event/stream?index=0 HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut answer = [0u8; 300];
        let n = s.read(&mut answer).unwrap_or(0);
        let answer = String::from_utf8_lossy(&answer[..n]);
        if answer.starts_with("HTTP/1.1 429") && answer.contains("too many concurrent connections")
        {
            refused += 1;
        }
        streams.push(s);
    }
    assert!(refused >= 10, "{refused} of 15 refused past the limit");
    drop(streams);
    tokio::time::sleep(Duration::from_millis(300)).await;

    // A client that sends half its headers and waits is cut after the header timeout.
    let mut slow = std::net::TcpStream::connect(("127.0.0.1", a.port)).unwrap();
    slow.write_all(b"GET /v1/agent/self HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = slow.read_to_end(&mut buf);
    let held = started.elapsed();
    assert!(
        held < Duration::from_secs(4),
        "a trickling client held its connection {held:?}"
    );
    // And the API answers as ever.
    assert!(a.get("/v1/agent/self").await["config"].is_object());
}

/// A service check probes only the allocation's own ports on this node: a job naming
/// another listener's port (a numeric `port`), or another host (`address`), makes the agent
/// connect to neither; the check fails saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_reaches_only_the_allocations_own_ports() {
    let t = crate::harness::TestAgent::start("", vec![]).await;
    let victim = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = victim.local_addr().unwrap().port();
    let second = 1_000_000_000u64;
    let job = json!({ "ID": "ssrf", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Networks": [{ "DynamicPorts": [{ "Label": "http" }] }],
        "Services": [
            { "Name": "local", "PortLabel": "http", "Provider": "nomad", "Checks": [
                { "Name": "other-listener", "Type": "tcp", "PortLabel": port.to_string(), "Interval": second, "Timeout": second }] },
            { "Name": "remote", "PortLabel": "http", "Address": "169.254.169.254", "Provider": "nomad", "Checks": [
                { "Name": "metadata", "Type": "http", "Path": "/latest/meta-data/", "Interval": second, "Timeout": second }] }],
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "1h" } }] }] });
    t.register(job).await;
    let allocs = t
        .wait_allocs("ssrf", Duration::from_secs(30), |a| {
            a.iter().any(|a| a["ClientStatus"] == "running")
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    let results = loop {
        let r = t.get(&format!("/v1/client/allocation/{id}/checks")).await;
        if r.as_object().is_some_and(|m| m.len() == 2) {
            break r;
        }
        assert!(Instant::now() < deadline, "{r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for r in results.as_object().unwrap().values() {
        assert_eq!(r["Status"], "failure", "{r}");
        assert!(
            r["Output"].as_str().unwrap().contains("check refused"),
            "{r}"
        );
    }
    // Three intervals: no connection reached the other listener.
    let accepted = tokio::time::timeout(Duration::from_secs(3), victim.accept()).await;
    assert!(accepted.is_err(), "the agent connected to another listener");
}

/// A job of one namespace reading another namespace's services through its template
/// (`nomadService`, `nomadServices`) sees none of them: the `services` interface answers for
/// the task's own namespace only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_reads_no_other_namespace_s_services() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let grant = "plugin \"template\" {\n  grant {\n    env = true\n    task_dir = true\n    services = true\n  }\n}\n";
    let (a, dev) = acl_agent(&root, grant).await;
    let r = a
        .http
        .put(a.url("/v1/namespace/dev"))
        .json(&json!({ "Name": "dev" }))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    // The default namespace's database, registered by the operator.
    let mut db = job("db", "mock", json!({ "run_for": "60s" }));
    db["Type"] = json!("service");
    db["TaskGroups"][0]["Networks"] = json!([{ "DynamicPorts": [{ "Label": "db" }] }]);
    db["TaskGroups"][0]["Services"] =
        json!([{ "Name": "secret-db", "PortLabel": "db", "Provider": "nomad" }]);
    let (s, t) = submit(&a, MGMT, db).await;
    assert_eq!(s, 200, "{t}");
    super::eventually("secret-db registers", async || {
        a.get("/v1/service/secret-db")
            .await
            .as_array()
            .is_some_and(|v| v.len() == 1)
    })
    .await;
    // A dev job reads it by name and lists every service it may see.
    let mut peek = job("peek", "mock", json!({ "run_for": "100ms" }));
    peek["Namespace"] = json!("dev");
    peek["TaskGroups"][0]["Tasks"][0]["Templates"] = json!([{
        "EmbeddedTmpl": "seen:[{{ range nomadService \"secret-db\" }}{{ .Address }}:{{ .Port }}{{ end }}][{{ range nomadServices }}{{ .Name }}{{ end }}]",
        "DestPath": "local/seen" }]);
    let (s, t) = submit(&a, &dev, peek).await;
    assert_eq!(s, 200, "{t}");
    let mut al = Value::Null;
    super::eventually("job peek ends", async || {
        let allocs = a.get("/v1/job/peek/allocations?namespace=dev").await;
        match allocs.as_array().and_then(|v| v.first()) {
            Some(first) if crate::harness::all_terminal(std::slice::from_ref(first)) => {
                al = a.alloc(first["ID"].as_str().unwrap()).await;
                true
            }
            _ => false,
        }
    })
    .await;
    let seen = root
        .join("data/alloc")
        .join(al["ID"].as_str().unwrap())
        .join("t/local/seen");
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap_or_else(|e| panic!("{e}: {al:#}")),
        "seen:[][]"
    );
}
