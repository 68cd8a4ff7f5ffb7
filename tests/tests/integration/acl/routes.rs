//! Every route against a token holding exactly what Nomad checks for it, and one holding
//! something near but not it: the first passes the gate (whatever the handler answers
//! then), the second is refused 403 "Permission denied". The table follows the route
//! table of `paddock::acl::check`, read from Nomad's source. Lists, the node's
//! allocations, variables and searches show only what the token may see.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::route_table::{MGMT, NODE_R, NOTHING, caps, table, vars};
use super::{CONFIGURED, client_token, ok_json, running_alloc, start};
use crate::harness::AgentProcess;

/// A request's status, and its body when refused (a stream's body is not waited for).
async fn status(
    a: &AgentProcess,
    method: &str,
    path: &str,
    secret: &str,
    body: Option<&Value>,
) -> (u16, String) {
    let mut r = a
        .http
        .request(method.parse().unwrap(), a.url(path))
        .timeout(Duration::from_secs(30))
        .header("X-Nomad-Token", secret);
    if let Some(b) = body {
        r = r.json(b);
    }
    let r = r.send().await.unwrap();
    let s = r.status().as_u16();
    let t = if s == 403 {
        r.text().await.unwrap()
    } else {
        String::new()
    };
    (s, t)
}

/// The secret of a client token holding `rules` (made once per distinct rules).
async fn token_for(a: &AgentProcess, made: &mut HashMap<String, String>, rules: &str) -> String {
    if rules == MGMT {
        return CONFIGURED.into();
    }
    if let Some(s) = made.get(rules) {
        return s.clone();
    }
    let name = format!("p{}", made.len());
    ok_json(
        a,
        "POST",
        &format!("/v1/acl/policy/{name}"),
        CONFIGURED,
        Some(json!({ "Name": name, "Rules": rules })),
    )
    .await;
    let (_, secret) = client_token(a, CONFIGURED, &name, &[&name]).await;
    made.insert(rules.to_string(), secret.clone());
    secret
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_passes_with_what_nomad_checks_and_is_refused_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = start(dir.path()).await;
    let web = json!({ "Job": { "ID": "web", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sh", "args": ["-c", "echo hello from web; exec sleep 600"] } }] }] } });
    ok_json(&a, "POST", "/v1/jobs", CONFIGURED, Some(web)).await;
    // A service, so that the system GC of the table leaves it.
    let other = json!({ "Job": { "ID": "web-elsewhere", "Namespace": "other", "Type": "service",
        "TaskGroups": [{ "Name": "g", "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sleep", "args": ["600"] } }] }] } });
    ok_json(&a, "POST", "/v1/jobs", CONFIGURED, Some(other)).await;
    let alloc = running_alloc(&a, CONFIGURED).await;
    let evals = ok_json(&a, "GET", "/v1/job/web/evaluations", CONFIGURED, None).await;
    let eval = evals[0]["ID"].as_str().unwrap().to_string();
    let nodes = ok_json(&a, "GET", "/v1/nodes", CONFIGURED, None).await;
    let node = nodes[0]["ID"].as_str().unwrap().to_string();
    for (path, ns) in [("app/one", "default"), ("other/two", "default")] {
        ok_json(
            &a,
            "PUT",
            &format!("/v1/var/{path}?namespace={ns}"),
            CONFIGURED,
            Some(json!({ "Items": { "k": "v" } })),
        )
        .await;
    }
    let rows = table(&alloc, &eval, &node);
    let read_job = caps(&["read-job"]);
    let (r, l) = (read_job.as_str(), caps(&["list-jobs"]));
    let l = l.as_str();
    let mut made = HashMap::new();
    let mut wrong = Vec::new();
    for row in &rows {
        for rules in &row.allow {
            let secret = token_for(&a, &mut made, rules).await;
            let (s, _) = status(&a, row.method, &row.path, &secret, row.body.as_ref()).await;
            if s == 403 {
                wrong.push(format!("{} {} refused with\n{rules}", row.method, row.path));
            }
        }
        for rules in &row.deny {
            let secret = token_for(&a, &mut made, rules).await;
            let (s, t) = status(&a, row.method, &row.path, &secret, row.body.as_ref()).await;
            if (s, t.as_str()) != (403, "Permission denied") {
                wrong.push(format!(
                    "{} {} gave {s} {t:?} with\n{rules}",
                    row.method, row.path
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} routes wrong:\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n")
    );

    // `alloc exec` into raw_exec (no filesystem isolation) needs `alloc-node-exec` as well
    // as `alloc-exec`, as Nomad's client requires: refused before the upgrade without it.
    let exec = format!(
        "/v1/client/allocation/{alloc}/exec?task=t&command=%5B%22%2Fbin%2Fsh%22%2C%22-c%22%2C%22echo%20in%22%5D"
    );
    let upgrade = |secret: String| {
        a.http
            .get(a.url(&exec))
            .header("X-Nomad-Token", secret)
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
            .send()
    };
    let exec_only = token_for(&a, &mut made, &caps(&["alloc-exec"])).await;
    let resp = upgrade(exec_only).await.unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    assert!(resp.text().await.unwrap().contains("alloc-node-exec"));
    let both = token_for(&a, &mut made, &caps(&["alloc-exec", "alloc-node-exec"])).await;
    let resp = upgrade(both).await.unwrap();
    assert_eq!(resp.status().as_u16(), 101, "{:?}", resp.text().await);

    // What a token may not see is left out of what it may list.
    let ids = |v: &Value, key: &str| -> Vec<String> {
        let mut ids: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o[key].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    let lister = token_for(&a, &mut made, l).await;
    let all = ok_json(&a, "GET", "/v1/jobs?namespace=*", CONFIGURED, None).await;
    assert_eq!(ids(&all, "ID"), ["web", "web-elsewhere"]);
    let mine = ok_json(&a, "GET", "/v1/jobs?namespace=*", &lister, None).await;
    assert_eq!(ids(&mine, "ID"), ["web"]);
    let node_allocs = format!("/v1/node/{node}/allocations");
    let everything = ok_json(&a, "GET", &node_allocs, CONFIGURED, None).await;
    assert!(
        everything
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["Namespace"] == "other"),
        "{everything}"
    );
    let reader = token_for(&a, &mut made, &format!("{NODE_R}{read_job}")).await;
    let seen = ok_json(&a, "GET", &node_allocs, &reader, None).await;
    let seen = seen.as_array().unwrap();
    assert!(
        !seen.is_empty() && seen.iter().all(|o| o["Namespace"] == "default"),
        "{seen:?}"
    );
    let node_only = token_for(&a, &mut made, NODE_R).await;
    assert_eq!(
        ok_json(&a, "GET", &node_allocs, &node_only, None).await,
        json!([])
    );
    let app_reader = token_for(&a, &mut made, &vars("app/*", &["read"])).await;
    let vs = ok_json(&a, "GET", "/v1/vars", &app_reader, None).await;
    // `app/new` the table's write made; `other/two` is not under `app/*`.
    assert_eq!(ids(&vs, "Path"), ["app/new", "app/one"]);
    let none = token_for(&a, &mut made, NOTHING).await;
    assert_eq!(ok_json(&a, "GET", "/v1/vars", &none, None).await, json!([]));
    let everything = ok_json(&a, "GET", "/v1/vars", CONFIGURED, None).await;
    assert_eq!(ids(&everything, "Path").len(), 3, "{everything}");
    // Searches: per object, and no node without node:read.
    let job_reader = token_for(&a, &mut made, r).await;
    let found = ok_json(
        &a,
        "POST",
        "/v1/search",
        &job_reader,
        Some(json!({ "Prefix": "web", "Context": "all" })),
    )
    .await;
    assert_eq!(found["Matches"]["jobs"], json!(["web"]), "{found}");
    assert!(found["Matches"].get("nodes").is_none(), "{found}");
    let found = ok_json(
        &a,
        "POST",
        "/v1/search/fuzzy",
        &job_reader,
        Some(json!({ "Text": "web", "Context": "jobs", "Namespace": "*" })),
    )
    .await;
    let names: Vec<&str> = found["Matches"]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["ID"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web"], "{found}");

    ok_json(&a, "DELETE", "/v1/job/web?purge=true", CONFIGURED, None).await;
    ok_json(
        &a,
        "DELETE",
        "/v1/job/web-elsewhere?namespace=other&purge=true",
        CONFIGURED,
        None,
    )
    .await;
    a.interrupt();
    crate::harness::reap_executor(&dir.path().join("data"));
}

/// The table above and the routes the API declares are the same list: every route the
/// API serves (but the ACL endpoints, which check their callers themselves, and the open
/// ones) has a row for one of the methods declared with one handler and need, and every
/// row is a route the API serves. A route added
/// without a row, or a row left behind by a route that went, fails here.
#[test]
fn the_table_covers_every_declared_route() {
    use paddock::acl::check::Need;
    let declared = paddock::api::route_table();
    let id = "00000000-0000-4000-8000-000000000000";
    let rows = table(id, id, id);
    let mut covered = std::collections::BTreeSet::new();
    for r in &rows {
        let path = r.path.split('?').next().unwrap();
        let d = declared
            .route(r.method, path)
            .unwrap_or_else(|| panic!("row {} {} is no route the API serves", r.method, r.path));
        covered.insert(format!("{} {}", d.methods, d.path));
    }
    let missing: Vec<String> = declared
        .routes()
        .iter()
        .filter(|d| {
            let sample = d.path.replace("{*path}", "p");
            !matches!(declared.need(d.method, &sample), Need::Open | Need::AclApi)
        })
        .map(|d| format!("{} {}", d.methods, d.path))
        .filter(|d| !covered.contains(d))
        .collect();
    assert!(
        missing.is_empty(),
        "declared routes with no row: {missing:#?}"
    );
}
