//! Prefix and fuzzy search look in the request's namespace only (the body's `Namespace`,
//! else `?namespace=`, else `default`), and in every namespace for `*`, as Nomad does.

use serde_json::{Value, json};

use crate::harness::{TestAgent, mock_job};

/// The IDs a search found in `context`, sorted.
fn ids(found: &Value, context: &str) -> Vec<String> {
    let mut v: Vec<String> = found["Matches"][context]
        .as_array()
        .unwrap_or_else(|| panic!("no {context} in {found}"))
        .iter()
        .map(|m| m.as_str().or_else(|| m["ID"].as_str()).unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_look_only_in_the_requested_namespace() {
    let t = TestAgent::start("", vec![]).await;
    let mut evals = Vec::new();
    for ns in ["team-a", "team-b"] {
        let (s, _) = t
            .post(&format!("/v1/namespace/{ns}"), json!({ "Name": ns }))
            .await;
        assert_eq!(s, 200);
        let mut job = mock_job(&format!("lookup-{ns}"), json!({"run_for": "1h"}));
        job["Namespace"] = json!(ns);
        evals.push(t.register(job).await);
    }
    let eval_a = evals[0]["ID"].as_str().unwrap().to_string();
    assert_eq!(evals[0]["Namespace"], "team-a");

    let prefix = |ns: Option<&str>, p: &str, ctx: &str| {
        let mut body = json!({ "Prefix": p, "Context": ctx });
        if let Some(ns) = ns {
            body["Namespace"] = json!(ns);
        }
        body
    };
    let search = |path: &'static str, body: Value| {
        let t = &t;
        async move {
            let (s, r) = t.post(path, body).await;
            assert_eq!(s, 200, "{r}");
            r
        }
    };

    let r = search("/v1/search", prefix(Some("team-b"), "lookup", "jobs")).await;
    assert_eq!(ids(&r, "jobs"), ["lookup-team-b"]);
    let r = search("/v1/search", prefix(Some("team-a"), "lookup", "all")).await;
    assert_eq!(ids(&r, "jobs"), ["lookup-team-a"]);
    let r = search("/v1/search", prefix(None, "lookup", "jobs")).await;
    assert!(ids(&r, "jobs").is_empty(), "default holds neither: {r}");
    let r = search(
        "/v1/search?namespace=team-b",
        prefix(None, "lookup", "jobs"),
    )
    .await;
    assert_eq!(
        ids(&r, "jobs"),
        ["lookup-team-b"],
        "?namespace= is the request's"
    );
    let r = search("/v1/search", prefix(Some("*"), "lookup", "jobs")).await;
    assert_eq!(ids(&r, "jobs"), ["lookup-team-a", "lookup-team-b"]);

    // An evaluation is found by its id in its own namespace only.
    let r = search("/v1/search", prefix(Some("team-b"), &eval_a, "evals")).await;
    assert!(ids(&r, "evals").is_empty(), "{r}");
    let r = search("/v1/search", prefix(Some("team-a"), &eval_a, "evals")).await;
    assert_eq!(ids(&r, "evals"), [eval_a.as_str()]);
    let r = search("/v1/search", prefix(Some("*"), &eval_a[..8], "evals")).await;
    assert_eq!(ids(&r, "evals"), [eval_a.as_str()]);

    // Fuzzy search likewise; namespaces themselves are found from any namespace.
    let fuzzy =
        |ns: &str, text: &str, ctx: &str| json!({ "Text": text, "Context": ctx, "Namespace": ns });
    let r = search("/v1/search/fuzzy", fuzzy("team-b", "ookup", "jobs")).await;
    assert_eq!(ids(&r, "jobs"), ["lookup-team-b"]);
    let r = search("/v1/search/fuzzy", fuzzy("*", "ookup", "jobs")).await;
    assert_eq!(ids(&r, "jobs"), ["lookup-team-a", "lookup-team-b"]);
    let r = search("/v1/search/fuzzy", fuzzy("default", "ookup", "all")).await;
    assert!(ids(&r, "jobs").is_empty(), "{r}");
    let r = search("/v1/search/fuzzy", fuzzy("default", "team", "namespaces")).await;
    assert_eq!(ids(&r, "namespaces"), ["team-a", "team-b"], "{r}");
}
