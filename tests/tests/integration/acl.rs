//! Nomad's ACL system on a real agent process (`agent run --acl-enabled`): bootstrap once,
//! policies in Nomad's HCL, client tokens that may do only what their policies grant, the
//! configured `acl { token }` as a management token, all of it kept over a restart; and
//! python-nomad using a client token.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{AgentProcess, NODE_DISK};

mod cli;
mod config;
mod events;
mod route_table;
mod routes;
mod stream_revoked;

const CONFIGURED: &str = "configured-management-s3cret";

/// A request as `secret` (none: anonymous): status and body text.
async fn call(
    a: &AgentProcess,
    method: &str,
    path: &str,
    secret: Option<&str>,
    body: Option<Value>,
) -> (u16, String) {
    let mut r = a
        .http
        .request(method.parse().unwrap(), a.url(path))
        .timeout(Duration::from_secs(30));
    if let Some(s) = secret {
        r = r.header("X-Nomad-Token", s);
    }
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn ok_json(
    a: &AgentProcess,
    method: &str,
    path: &str,
    secret: &str,
    body: Option<Value>,
) -> Value {
    let (s, t) = call(a, method, path, Some(secret), body).await;
    assert_eq!(s, 200, "{method} {path}: {t}");
    serde_json::from_str(&t).unwrap_or(Value::Null)
}

async fn denied(a: &AgentProcess, method: &str, path: &str, secret: Option<&str>) {
    let body = method.ne("GET").then(|| json!({}));
    let (s, t) = call(a, method, path, secret, body).await;
    assert_eq!(
        (s, t.as_str()),
        (403, "Permission denied"),
        "{method} {path}"
    );
}

async fn apply_policy(a: &AgentProcess, mgmt: &str, name: &str, rules: &str) -> (u16, String) {
    call(
        a,
        "POST",
        &format!("/v1/acl/policy/{name}"),
        Some(mgmt),
        Some(json!({ "Name": name, "Description": format!("{name} test policy"), "Rules": rules })),
    )
    .await
}

/// A client token with `policies`: (accessor, secret).
async fn client_token(
    a: &AgentProcess,
    mgmt: &str,
    name: &str,
    policies: &[&str],
) -> (String, String) {
    let t = ok_json(
        a,
        "POST",
        "/v1/acl/token",
        mgmt,
        Some(json!({ "Name": name, "Type": "client", "Policies": policies })),
    )
    .await;
    assert_eq!(t["Type"], "client");
    (
        t["AccessorID"].as_str().unwrap().into(),
        t["SecretID"].as_str().unwrap().into(),
    )
}

async fn start(dir: &std::path::Path) -> AgentProcess {
    let config = dir.join("acl.hcl");
    std::fs::write(
        &config,
        format!("{NODE_DISK}acl {{\n  token = \"{CONFIGURED}\"\n}}\n"),
    )
    .unwrap();
    let mut a = AgentProcess::new(dir);
    // The flag, not the config, turns the ACL system on.
    a.args = vec![
        "--acl-enabled".into(),
        "--config".into(),
        config.display().to_string(),
    ];
    a.start().await;
    // The namespaces these tests put jobs in, created first as an operator would.
    for ns in ["other", "team-a", "team-b"] {
        let body = json!({ "Name": ns });
        ok_json(
            &a,
            "PUT",
            &format!("/v1/namespace/{ns}"),
            CONFIGURED,
            Some(body),
        )
        .await;
    }
    a
}

/// The job's one allocation once its task runs and has printed its greeting.
async fn running_alloc(a: &AgentProcess, mgmt: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let allocs = ok_json(a, "GET", "/v1/job/web/allocations", mgmt, None).await;
        if let Some(al) = allocs.as_array().and_then(|v| v.first())
            && al["TaskStates"]["t"]["State"] == "running"
        {
            let id = al["ID"].as_str().unwrap().to_string();
            let (s, logs) = call(
                a,
                "GET",
                &format!("/v1/client/fs/logs/{id}?task=t&type=stdout&plain=true"),
                Some(mgmt),
                None,
            )
            .await;
            if s == 200 && logs.contains("hello from web") {
                return id;
            }
        }
        assert!(
            Instant::now() < deadline,
            "web never ran: {allocs}\n{}",
            a.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_may_do_what_their_policies_grant_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = start(dir.path()).await;

    // Before bootstrap: anonymous requests are refused, unknown secrets are not found,
    // health stays open.
    denied(&a, "GET", "/v1/jobs", None).await;
    let (s, t) = call(
        &a,
        "GET",
        "/v1/jobs",
        Some("5e0b8a3c-0000-4000-8000-000000000000"),
        None,
    )
    .await;
    assert_eq!((s, t.as_str()), (403, "ACL token not found"));
    assert_eq!(call(&a, "GET", "/v1/agent/health", None, None).await.0, 200);

    // Bootstrap once.
    let (s, t) = call(&a, "POST", "/v1/acl/bootstrap", None, None).await;
    assert_eq!(s, 200, "{t}");
    let boot: Value = serde_json::from_str(&t).unwrap();
    assert_eq!(boot["Name"], "Bootstrap Token");
    assert_eq!(boot["Type"], "management");
    let mgmt = boot["SecretID"].as_str().unwrap().to_string();
    assert_eq!(mgmt.len(), 36);
    let (s, t) = call(&a, "POST", "/v1/acl/bootstrap", None, None).await;
    assert_eq!(s, 400);
    assert!(t.contains("ACL bootstrap already done"), "{t}");
    // Nomad's Go client sends PUT: the same route, the same answer.
    let (s, t) = call(&a, "PUT", "/v1/acl/bootstrap", None, None).await;
    assert_eq!(s, 400);
    assert!(t.contains("ACL bootstrap already done"), "{t}");

    // Policies: bad HCL is a 400 naming what is wrong.
    let (s, t) = apply_policy(
        &a,
        &mgmt,
        "bad",
        r#"namespace "default" { policy = "own" }"#,
    )
    .await;
    assert_eq!(s, 400);
    assert!(
        t.contains("Invalid namespace policy") && t.contains("own"),
        "{t}"
    );
    let (s, t) = apply_policy(
        &a,
        &mgmt,
        "bad",
        "namespace \"default\" {\n  capabilities = [\"read-job\", \"fly\"]\n}",
    )
    .await;
    assert_eq!(s, 400);
    assert!(t.contains("Invalid namespace capability 'fly'"), "{t}");
    let (s, t) = apply_policy(&a, &mgmt, "bad", "namespace \"default\" {").await;
    assert_eq!(s, 400);
    assert!(t.contains("Failed to parse ACL Policy"), "{t}");
    assert_eq!(
        call(&a, "GET", "/v1/acl/policy/bad", Some(&mgmt), None)
            .await
            .0,
        404
    );
    for (name, rules) in [
        (
            "readonly",
            "namespace \"default\" {\n  policy = \"read\"\n}\nnode {\n  policy = \"read\"\n}\n",
        ),
        (
            "logs",
            "namespace \"default\" {\n  capabilities = [\"read-logs\"]\n}\n",
        ),
        (
            "lifecycle",
            "namespace \"def*\" {\n  capabilities = [\"read-job\", \"alloc-lifecycle\"]\n}\n",
        ),
    ] {
        let (s, t) = apply_policy(&a, &mgmt, name, rules).await;
        assert_eq!(s, 200, "{name}: {t}");
    }
    // A client token may not write policies or make tokens.
    let (_, reader) = client_token(&a, &mgmt, "reader", &["readonly"]).await;
    let (s, _) = apply_policy(&a, &reader, "mine", "node {\n  policy = \"write\"\n}").await;
    assert_eq!(s, 403);
    denied(&a, "POST", "/v1/acl/token", Some(&reader)).await;
    denied(&a, "GET", "/v1/acl/tokens", Some(&reader)).await;
    // `"ExpirationTTL": ""` is what Nomad's clients send for "no TTL".
    let (s, t) = call(
        &a,
        "POST",
        "/v1/acl/token",
        Some(&mgmt),
        Some(json!({ "Name": "no-ttl", "Type": "client", "Policies": ["readonly"], "ExpirationTTL": "" })),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let made: Value = serde_json::from_str(&t).unwrap();
    assert_eq!(made["ExpirationTTL"], 0);
    let gone = format!("/v1/acl/token/{}", made["AccessorID"].as_str().unwrap());
    assert_eq!(call(&a, "DELETE", &gone, Some(&mgmt), None).await.0, 200);
    let (s, t) = call(
        &a,
        "POST",
        "/v1/acl/token",
        Some(&mgmt),
        Some(json!({ "Name": "x", "Type": "root" })),
    )
    .await;
    assert_eq!(s, 400);
    assert!(t.contains("client or management"), "{t}");
    let (_, logger) = client_token(&a, &mgmt, "logger", &["logs"]).await;
    let (_, lifer) = client_token(&a, &mgmt, "lifer", &["lifecycle"]).await;

    // The management token submits a job.
    let job = json!({ "Job": { "ID": "web", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sh", "args": ["-c", "echo hello from web; exec sleep 600"] } }] }] } });
    ok_json(&a, "POST", "/v1/jobs", &mgmt, Some(job.clone())).await;
    let alloc = running_alloc(&a, &mgmt).await;
    let logs = format!("/v1/client/fs/logs/{alloc}?task=t&type=stdout&plain=true");

    // namespace "default" { policy = "read" }: reads, no writes, no logs.
    // A job in another namespace: lists without `?namespace=` show a management token
    // every namespace, a token that may read only `default` just that one.
    let other = json!({ "Job": { "ID": "elsewhere", "Namespace": "other", "Type": "batch",
        "TaskGroups": [{ "Name": "g", "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/true" } }] }] } });
    denied(
        &a,
        "GET",
        "/v1/job/elsewhere?namespace=other",
        Some(&reader),
    )
    .await;
    let (s, t) = call(&a, "POST", "/v1/jobs", Some(&reader), Some(other.clone())).await;
    assert_eq!((s, t.as_str()), (403, "Permission denied"));
    ok_json(&a, "POST", "/v1/jobs", &mgmt, Some(other)).await;
    let ids = |v: &Value| -> Vec<String> {
        let mut ids: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["ID"].as_str().unwrap().into())
            .collect();
        ids.sort();
        ids
    };
    let all = ok_json(&a, "GET", "/v1/jobs", &mgmt, None).await;
    assert_eq!(ids(&all), ["elsewhere", "web"]);
    let jobs = ok_json(&a, "GET", "/v1/jobs", &reader, None).await;
    assert_eq!(ids(&jobs), ["web"]);
    let allocs = ok_json(&a, "GET", "/v1/allocations", &reader, None).await;
    assert!(
        allocs
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["Namespace"] == "default"),
        "{allocs}"
    );
    let node = ok_json(&a, "GET", "/v1/nodes", &reader, None).await;
    let node_allocs = format!("/v1/node/{}/allocations", node[0]["ID"].as_str().unwrap());
    // A node's allocations need node:read; each shows only with read-job in its namespace.
    let mine = ok_json(&a, "GET", &node_allocs, &reader, None).await;
    assert!(
        mine.as_array()
            .unwrap()
            .iter()
            .all(|a| a["Namespace"] == "default"),
        "{mine}"
    );
    ok_json(&a, "GET", &node_allocs, &mgmt, None).await;
    ok_json(&a, "GET", "/v1/job/web", &reader, None).await;
    ok_json(&a, "GET", &format!("/v1/allocation/{alloc}"), &reader, None).await;
    ok_json(&a, "GET", "/v1/nodes", &reader, None).await;
    denied(&a, "POST", "/v1/jobs", Some(&reader)).await;
    let (s, t) = call(&a, "POST", "/v1/jobs", Some(&reader), Some(job.clone())).await;
    assert_eq!((s, t.as_str()), (403, "Permission denied"));
    denied(&a, "DELETE", "/v1/job/web", Some(&reader)).await;
    denied(&a, "GET", &logs, Some(&reader)).await;
    denied(
        &a,
        "GET",
        &format!("/v1/client/fs/ls/{alloc}?path=/"),
        Some(&reader),
    )
    .await;
    denied(
        &a,
        "POST",
        &format!("/v1/allocation/{alloc}/stop"),
        Some(&reader),
    )
    .await;
    denied(&a, "GET", "/v1/agent/self", Some(&reader)).await;
    denied(&a, "POST", "/v1/node/x/eligibility", Some(&reader)).await;
    denied(&a, "GET", "/v1/jobs?namespace=other", Some(&reader)).await;
    // Every namespace: as Nomad, allowed when some namespace grants list-jobs, and only
    // those namespaces' jobs shown.
    let every = ok_json(&a, "GET", "/v1/jobs?namespace=*", &reader, None).await;
    assert_eq!(ids(&every), ["web"]);

    // The web UI's pages check the same: the node and a namespace's jobs, not the agent's
    // components, and nothing without a token.
    for (page, want) in [
        ("/ui/node", 200),
        ("/ui/jobs?namespace=default", 200),
        ("/ui/components", 403),
    ] {
        assert_eq!(
            call(&a, "GET", page, Some(&reader), None).await.0,
            want,
            "{page}"
        );
    }
    assert_eq!(
        call(&a, "GET", "/ui/jobs?namespace=default", None, None)
            .await
            .0,
        403
    );

    // read-logs alone: the logs, not the job, not the files.
    let (s, t) = call(&a, "GET", &logs, Some(&logger), None).await;
    assert_eq!(s, 200);
    assert!(t.contains("hello from web"), "{t}");
    denied(&a, "GET", "/v1/job/web", Some(&logger)).await;
    denied(
        &a,
        "GET",
        &format!("/v1/client/fs/cat/{alloc}?path=alloc/logs/t.stdout.0"),
        Some(&logger),
    )
    .await;

    // alloc-lifecycle through a namespace glob: restart, but no logs and no submit.
    denied(&a, "GET", &logs, Some(&lifer)).await;
    denied(&a, "POST", "/v1/jobs", Some(&lifer)).await;
    let (s, t) = call(
        &a,
        "POST",
        &format!("/v1/client/allocation/{alloc}/restart"),
        Some(&lifer),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200, "{t}");

    // The configured token is a management token beside the ACL system's.
    ok_json(&a, "GET", "/v1/agent/self", CONFIGURED, None).await;
    let me = ok_json(&a, "GET", "/v1/acl/token/self", CONFIGURED, None).await;
    assert_eq!(me["Type"], "management");
    let (_, short) = client_token(&a, CONFIGURED, "short-lived", &["readonly"]).await;

    // A token reads itself with its secret; a management read of another shows no secret.
    let me = ok_json(&a, "GET", "/v1/acl/token/self", &reader, None).await;
    assert_eq!(me["SecretID"], reader.as_str());
    assert_eq!(me["Policies"], json!(["readonly"]));
    let other = ok_json(
        &a,
        "GET",
        &format!("/v1/acl/token/{}", me["AccessorID"].as_str().unwrap()),
        &mgmt,
        None,
    )
    .await;
    assert_eq!(other["Name"], "reader");
    assert_eq!(other["SecretID"], "");

    // Deleting a token ends it.
    let short_self = ok_json(&a, "GET", "/v1/acl/token/self", &short, None).await;
    let path = format!(
        "/v1/acl/token/{}",
        short_self["AccessorID"].as_str().unwrap()
    );
    assert_eq!(call(&a, "DELETE", &path, Some(&mgmt), None).await.0, 200);
    let (s, t) = call(&a, "GET", "/v1/jobs", Some(&short), None).await;
    assert_eq!((s, t.as_str()), (403, "ACL token not found"));

    // Secrets are stored hashed: no file of the data dir holds one.
    for secret in [&mgmt, &reader, &logger] {
        for f in walk(&dir.path().join("data")) {
            let bytes = std::fs::read(&f).unwrap_or_default();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds a secret",
                f.display()
            );
        }
    }

    // A restart keeps the tokens, the policies and the bootstrap.
    a.interrupt();
    a.start().await;
    let jobs = ok_json(&a, "GET", "/v1/jobs", &reader, None).await;
    assert_eq!(ids(&jobs), ["web"]);
    denied(&a, "POST", "/v1/jobs", Some(&reader)).await;
    assert_eq!(call(&a, "GET", &logs, Some(&logger), None).await.0, 200);
    let (s, t) = call(&a, "POST", "/v1/acl/bootstrap", None, None).await;
    assert_eq!(s, 400, "{t}");
    let tokens = ok_json(&a, "GET", "/v1/acl/tokens", &mgmt, None).await;
    assert_eq!(tokens[0]["Name"], "Bootstrap Token");
    assert_eq!(tokens.as_array().unwrap().len(), 4, "{tokens}");
    let policies = ok_json(&a, "GET", "/v1/acl/policies", &mgmt, None).await;
    assert_eq!(policies.as_array().unwrap().len(), 3, "{policies}");
    let (s, t) = call(&a, "GET", "/v1/jobs", Some(&short), None).await;
    assert_eq!((s, t.as_str()), (403, "ACL token not found"));

    // python-nomad, as a user's script would use a client token.
    python_nomad_as_reader(&a, &reader).await;

    ok_json(&a, "DELETE", "/v1/job/web?purge=true", &mgmt, None).await;
    ok_json(
        &a,
        "DELETE",
        "/v1/job/elsewhere?namespace=other&purge=true",
        &mgmt,
        None,
    )
    .await;
    a.interrupt();
    crate::harness::reap_executor(&dir.path().join("data"));
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.is_file() {
            out.push(p);
        }
    }
    out
}

async fn python_nomad_as_reader(a: &AgentProcess, reader: &str) {
    let req = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/requirements.txt");
    let (python, deps) = crate::harness::python_with("nomad", &req, "python-deps").await;
    let script = r#"
import os, nomad, nomad.api.exceptions as ex
n = nomad.Nomad(host="127.0.0.1", port=int(os.environ["PORT"]), token=os.environ["TOKEN"])
assert [j["ID"] for j in n.jobs.get_jobs()] == ["web"], n.jobs.get_jobs()
assert n.acl.get_self_token()["Policies"] == ["readonly"]
try:
    n.job.deregister_job("web")
    raise SystemExit("a read-only token deregistered a job")
except ex.URLNotAuthorizedNomadException as e:
    assert "Permission denied" in e.nomad_resp.text, e.nomad_resp.text
print("ok")
"#;
    let out = tokio::process::Command::new(python)
        .args(["-c", script])
        .env("PYTHONPATH", deps)
        .env("PORT", a.port.to_string())
        .env("TOKEN", reader)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "python-nomad: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `/v1/acl/token/onetime`: a token's bearer gets a one-time secret that another program
/// exchanges, once, for that token (with its secret); anonymous callers get none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_time_token_is_exchanged_once_for_its_callers_token() {
    let dir = tempfile::tempdir().unwrap();
    let a = start(dir.path()).await;
    let rules = "namespace \"default\" {\n  policy = \"read\"\n}\n";
    assert_eq!(apply_policy(&a, CONFIGURED, "ott-read", rules).await.0, 200);
    let (accessor, secret) = client_token(&a, CONFIGURED, "ott", &["ott-read"]).await;

    let (s, t) = call(&a, "PUT", "/v1/acl/token/onetime", None, None).await;
    assert_eq!((s, t.as_str()), (403, "Permission denied"));
    // Not read as a token whose accessor is "onetime".
    let (s, _) = call(&a, "GET", "/v1/acl/token/onetime", Some(CONFIGURED), None).await;
    assert_eq!(s, 405);

    let issued = ok_json(&a, "PUT", "/v1/acl/token/onetime", &secret, None).await;
    let ott = &issued["OneTimeToken"];
    assert_eq!(ott["AccessorID"], accessor.as_str());
    assert!(issued["Index"].as_u64().unwrap() > 0);
    let expires: jiff::Timestamp = ott["ExpiresAt"].as_str().unwrap().parse().unwrap();
    let left = expires.duration_since(jiff::Timestamp::now()).as_secs();
    assert!((590..=600).contains(&left), "{left} s left: {issued:#}");

    // Exchanged without a token of its own, once.
    let body = json!({ "OneTimeSecretID": ott["OneTimeSecretID"] });
    let (s, t) = call(
        &a,
        "POST",
        "/v1/acl/token/onetime/exchange",
        None,
        Some(body.clone()),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let got: Value = serde_json::from_str(&t).unwrap();
    assert_eq!(got["Token"]["AccessorID"], accessor.as_str());
    assert_eq!(got["Token"]["SecretID"], secret.as_str());
    assert_eq!(got["Token"]["Policies"], json!(["ott-read"]));
    let (s, _) = call(
        &a,
        "POST",
        "/v1/acl/token/onetime/exchange",
        None,
        Some(body),
    )
    .await;
    assert_eq!(s, 403, "exchanged twice");
}
