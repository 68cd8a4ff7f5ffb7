//! An open event stream follows ACL changes, as Nomad's event broker does: a stream whose
//! token is deleted ends with Nomad's "subscription closed by server" error; one whose
//! policy stops granting a namespace stops getting that namespace's events; a management
//! stream is not touched.

use std::time::Duration;

use serde_json::{Value, json};

use super::events::batch;
use super::{CONFIGURED, apply_policy, call, client_token, ok_json, start};
use crate::harness::AgentProcess;

/// An open `/v1/event/stream`, read line by line.
struct Stream {
    r: reqwest::Response,
    buf: String,
}

impl Stream {
    async fn open(a: &AgentProcess, query: &str, secret: &str) -> Stream {
        let url = a.url(&format!("/v1/event/stream?{query}"));
        let req = a.http.get(url).header("X-Nomad-Token", secret);
        let r = req.send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{query}");
        Stream {
            r,
            buf: String::new(),
        }
    }

    /// The next line within `within` (heartbeats skipped); `None` when the stream ended.
    async fn line(&mut self, within: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(i) = self.buf.find('\n') {
                let line: String = self.buf.drain(..=i).collect();
                let v: Value = serde_json::from_str(&line).unwrap();
                if v != json!({}) {
                    return Some(v);
                }
                continue;
            }
            let chunk = tokio::time::timeout_at(deadline, self.r.chunk())
                .await
                .unwrap_or_else(|_| panic!("nothing within {within:?} after {:?}", self.buf))
                .unwrap()?;
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The jobs of the Job events up to and including job `until`'s.
    async fn jobs_until(&mut self, until: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let v = self
                .line(Duration::from_secs(30))
                .await
                .unwrap_or_else(|| panic!("the stream ended before {until}: {seen:?}"));
            for e in v["Events"].as_array().into_iter().flatten() {
                let id = e["Key"].as_str().unwrap_or_default().to_string();
                seen.push(id.clone());
                if id == until {
                    return seen;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_stream_follows_token_and_policy_changes() {
    let dir = tempfile::tempdir().unwrap();
    let a = start(dir.path()).await;
    let set_rules = async |rules: &str| {
        let (s, t) = apply_policy(&a, CONFIGURED, "ab-read", rules).await;
        assert_eq!(s, 200, "{t}");
    };
    set_rules(
        r#"namespace "team-a" { policy = "read" }
namespace "team-b" { policy = "read" }"#,
    )
    .await;
    let (accessor, reader) = client_token(&a, CONFIGURED, "reader", &["ab-read"]).await;
    // A management token made through the API, besides the configured one.
    let m = ok_json(
        &a,
        "POST",
        "/v1/acl/token",
        CONFIGURED,
        Some(json!({ "Name": "ops", "Type": "management" })),
    )
    .await;
    let mgmt = m["SecretID"].as_str().unwrap().to_string();

    let q = "topic=Job&namespace=*";
    let mut theirs = Stream::open(&a, q, &reader).await;
    let mut ops = Stream::open(&a, q, &mgmt).await;
    let post = async |id: &str, ns: &str| {
        ok_json(&a, "POST", "/v1/jobs", CONFIGURED, Some(batch(id, ns))).await;
    };
    post("a-1", "team-a").await;
    post("b-1", "team-b").await;
    let first = theirs.jobs_until("b-1").await;
    assert!(first.contains(&"a-1".to_string()), "{first:?}");

    // The policy stops granting team-a: the open stream stops getting its events.
    set_rules(r#"namespace "team-b" { policy = "read" }"#).await;
    post("a-2", "team-a").await;
    post("b-2", "team-b").await;
    let after = theirs.jobs_until("b-2").await;
    assert!(!after.contains(&"a-2".to_string()), "{after:?}");

    // The token is deleted: its stream ends with Nomad's error, soon.
    let (s, t) = call(
        &a,
        "DELETE",
        &format!("/v1/acl/token/{accessor}"),
        Some(CONFIGURED),
        None,
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let last = theirs.line(Duration::from_secs(5)).await;
    assert_eq!(
        last,
        Some(json!({ "Error": "subscription closed by server, client should resubscribe" }))
    );
    assert_eq!(
        theirs.line(Duration::from_secs(5)).await,
        None,
        "the stream ended"
    );

    // The management stream saw every job and goes on.
    post("a-3", "team-a").await;
    let all = ops.jobs_until("a-3").await;
    for id in ["a-1", "b-1", "a-2", "b-2"] {
        assert!(all.contains(&id.to_string()), "{id}: {all:?}");
    }
}
