//! The event stream across namespaces (`?namespace=*`) with a token for one namespace:
//! let through because a namespace grants `read-job`, and then cut per event to the
//! namespaces that grant it, as Nomad filters each event.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{CONFIGURED, apply_policy, call, client_token, ok_json, start};
use crate::harness::AgentProcess;

pub(super) fn batch(id: &str, ns: &str) -> Value {
    json!({ "Job": { "ID": id, "Namespace": ns, "Type": "batch", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "raw_exec", "Config": { "command": "/bin/true" } }] }] } })
}

/// The events a stream shows, as (topic, namespace, key), until the first evaluation of
/// namespace `until` (which comes after its job's event).
async fn events_until(a: &AgentProcess, query: &str, secret: &str, until: &str) -> Vec<Value> {
    let mut r = a
        .http
        .get(a.url(&format!("/v1/event/stream?{query}")))
        .header("X-Nomad-Token", secret)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{query}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut buf, mut seen) = (String::new(), Vec::new());
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let chunk = tokio::time::timeout(left, r.chunk())
            .await
            .unwrap_or_else(|_| panic!("no event of {until} in {seen:?}"))
            .unwrap()
            .expect("the stream ended");
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(i) = buf.find('\n') {
            let line: String = buf.drain(..=i).collect();
            let v: Value = serde_json::from_str(&line).unwrap();
            for e in v["Events"].as_array().into_iter().flatten() {
                seen.push(json!([e["Topic"], e["Namespace"], e["Key"]]));
                if e["Topic"] == "Evaluation" && e["Namespace"] == until {
                    return seen;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_every_namespace_shows_only_the_tokens_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let a = start(dir.path()).await;
    // B's job first, so its events come before A's in the kept events.
    ok_json(
        &a,
        "POST",
        "/v1/jobs",
        CONFIGURED,
        Some(batch("job-b", "team-b")),
    )
    .await;
    ok_json(
        &a,
        "POST",
        "/v1/jobs",
        CONFIGURED,
        Some(batch("job-a", "team-a")),
    )
    .await;
    let (s, t) = apply_policy(
        &a,
        CONFIGURED,
        "a-read",
        r#"namespace "team-a" { policy = "read" }"#,
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let (_, a_reader) = client_token(&a, CONFIGURED, "a-reader", &["a-read"]).await;
    // The namespaces list keeps those the token holds anything in (Nomad's
    // `AllowNamespace`); reading another one is refused.
    let seen = ok_json(&a, "GET", "/v1/namespaces", &a_reader, None).await;
    let names: Vec<&str> = seen
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["Name"].as_str())
        .collect();
    assert_eq!(names, ["team-a"], "{seen:#}");
    let (s, _) = call(&a, "GET", "/v1/namespace/team-b", Some(&a_reader), None).await;
    assert_eq!(s, 403);
    // Lists are cut to what the token reads before they are paged, filtered or counted:
    // no page, next token, filter or count says anything of team-b's objects.
    let r = a
        .http
        .get(a.url("/v1/jobs?namespace=*&per_page=1"))
        .header("X-Nomad-Token", &a_reader)
        .send()
        .await
        .unwrap();
    assert!(
        r.headers().get("X-Nomad-NextToken").is_none(),
        "{:?}",
        r.headers()
    );
    let page: Value = r.json().await.unwrap();
    assert_eq!(page.as_array().unwrap().len(), 1, "{page:#}");
    assert_eq!(page[0]["ID"], "job-a");
    let oracle = "/v1/evaluations/count?namespace=*&filter=Namespace%20%3D%3D%20%22team-b%22";
    let count = ok_json(&a, "GET", oracle, &a_reader, None).await;
    assert_eq!(count["Count"], 0, "team-b's evaluations counted");
    let count = ok_json(&a, "GET", oracle, CONFIGURED, None).await;
    assert!(count["Count"].as_u64().unwrap() > 0);

    let q = "topic=Job&topic=Evaluation&namespace=*&index=0";
    let all = events_until(&a, q, CONFIGURED, "team-a").await;
    assert!(all.contains(&json!(["Job", "team-b", "job-b"])), "{all:?}");
    assert!(
        all.iter().any(|e| e[0] == "Evaluation" && e[1] == "team-b"),
        "{all:?}"
    );

    let mine = events_until(&a, q, &a_reader, "team-a").await;
    assert!(
        mine.contains(&json!(["Job", "team-a", "job-a"])),
        "{mine:?}"
    );
    assert!(
        mine.iter().all(|e| e[1] == "team-a"),
        "only team-a's events: {mine:?}"
    );
    assert!(
        mine.iter().any(|e| e[0] == "Evaluation"),
        "its evaluations too: {mine:?}"
    );

    // The namespace it may not read, and a token reading no namespace, are refused.
    let (s, t) = call(
        &a,
        "GET",
        "/v1/event/stream?topic=Job&namespace=team-b",
        Some(&a_reader),
        None,
    )
    .await;
    assert_eq!((s, t.as_str()), (403, "Permission denied"));
    let (s, _) = apply_policy(&a, CONFIGURED, "nodes", r#"node { policy = "read" }"#).await;
    assert_eq!(s, 200);
    let (_, node_reader) = client_token(&a, CONFIGURED, "node-reader", &["nodes"]).await;
    let (s, t) = call(
        &a,
        "GET",
        "/v1/event/stream?topic=Job&namespace=*",
        Some(&node_reader),
        None,
    )
    .await;
    assert_eq!((s, t.as_str()), (403, "Permission denied"));
}
