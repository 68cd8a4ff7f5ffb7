//! Nomad's list query on the list endpoints: `filter` (go-bexpr over the whole listed
//! object), `per_page` and `next_token` paging, `reverse`, and Nomad's errors for each.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{TestAgent, mock_job};

/// `GET path`: the answer and its `X-Nomad-NextToken`.
async fn page(t: &TestAgent, path: &str) -> (Value, Option<String>) {
    let r = t.http.get(t.url(path)).send().await.unwrap();
    assert_eq!(r.status(), 200, "GET {path}");
    let next = r
        .headers()
        .get("X-Nomad-NextToken")
        .map(|v| v.to_str().unwrap().to_string());
    (r.json().await.unwrap(), next)
}

fn ids(v: &Value, field: &str) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|o| o[field].as_str().unwrap().to_string())
        .collect()
}

fn q(expr: &str) -> String {
    expr.replace('"', "%22")
        .replace(' ', "%20")
        .replace('=', "%3D")
        .replace('/', "%2F")
        .replace('^', "%5E")
}

#[tokio::test]
async fn list_endpoints_filter_page_and_reverse_as_nomads_do() {
    let t = TestAgent::start("", vec![]).await;
    for id in ["a", "b", "c"] {
        let mut job = mock_job(id, json!({ "run_for": "10ms" }));
        if id == "b" {
            job["Meta"] = json!({ "owner": "ops" });
        }
        t.register(job).await;
    }

    // Jobs: by Namespace.ID, filtered on the whole job.
    let (all, next) = page(&t, "/v1/jobs").await;
    assert_eq!(
        (ids(&all, "ID"), next),
        (vec!["a".into(), "b".into(), "c".into()], None)
    );
    let (none, _) = page(&t, &format!("/v1/jobs?filter={}", q(r#"ID == "zz""#))).await;
    assert_eq!(none, json!([]));
    let (owned, _) = page(
        &t,
        &format!("/v1/jobs?filter={}", q(r#"Meta.owner == "ops""#)),
    )
    .await;
    assert_eq!(ids(&owned, "ID"), ["b"]);
    let (first, next) = page(&t, "/v1/jobs?per_page=2").await;
    assert_eq!(ids(&first, "ID"), ["a", "b"]);
    assert_eq!(next.as_deref(), Some("default.c"));
    let (rest, next) = page(&t, "/v1/jobs?per_page=2&next_token=default.c").await;
    assert_eq!((ids(&rest, "ID"), next), (vec!["c".to_string()], None));
    let (rev, _) = page(&t, "/v1/jobs?reverse=true").await;
    assert_eq!(ids(&rev, "ID"), ["c", "b", "a"]);
    let (two, _) = page(
        &t,
        &format!(
            "/v1/jobs?filter={}",
            q(r#"ID matches "^[ab]$" and Status != "running""#)
        ),
    )
    .await;
    assert_eq!(ids(&two, "ID"), ["a", "b"]);

    // Allocations: by CreateIndex.ID; the filter sees the whole allocation (its job too).
    let (allocs, _) = page(&t, "/v1/allocations").await;
    assert_eq!(allocs.as_array().unwrap().len(), 3);
    let (of_b, _) = page(
        &t,
        &format!("/v1/allocations?filter={}", q(r#"Job.Meta.owner == "ops""#)),
    )
    .await;
    assert_eq!(ids(&of_b, "JobID"), ["b"]);
    let (rev, next) = page(&t, "/v1/allocations?reverse=true&per_page=2").await;
    assert_eq!(ids(&rev, "JobID"), ["c", "b"]);
    let last = allocs[0].clone();
    assert_eq!(
        next,
        Some(format!(
            "{}.{}",
            last["CreateIndex"],
            last["ID"].as_str().unwrap()
        ))
    );
    let (paged, _) = page(
        &t,
        &format!("/v1/allocations?per_page=1&filter={}", q(r#"JobID != "a""#)),
    )
    .await;
    assert_eq!(ids(&paged, "JobID"), ["b"]);

    // Evaluations, their count, and the older filters that `filter` excludes.
    let (evals, _) = page(
        &t,
        &format!("/v1/evaluations?filter={}", q(r#"JobID == "a""#)),
    )
    .await;
    assert_eq!(ids(&evals, "JobID"), ["a"]);
    let (evals, _) = page(&t, "/v1/evaluations?job=c").await;
    assert_eq!(ids(&evals, "JobID"), ["c"]);
    let (count, _) = page(
        &t,
        &format!("/v1/evaluations/count?filter={}", q(r#"JobID != "a""#)),
    )
    .await;
    assert_eq!(count["Count"], 2);
    let (s, body) = t
        .send(
            Method::GET,
            &format!("/v1/evaluations?job=a&filter={}", q(r#"ID != """#)),
            None,
        )
        .await;
    assert_eq!(
        (s, body),
        (
            400,
            json!("Filter expression cannot be used with other filter parameters")
        )
    );

    // The node, variables and deployments take the same query.
    let (nodes, _) = page(
        &t,
        &format!("/v1/nodes?filter={}", q(r#"Status == "ready""#)),
    )
    .await;
    assert_eq!(nodes.as_array().unwrap().len(), 1);
    let (nodes, _) = page(
        &t,
        &format!("/v1/nodes?filter={}", q(r#""mock" in Drivers"#)),
    )
    .await;
    assert_eq!(
        nodes.as_array().unwrap().len(),
        1,
        "the whole node's Drivers"
    );
    for path in ["app/one", "app/two", "other/x"] {
        let (s, _) = t
            .send(
                Method::PUT,
                &format!("/v1/var/{path}"),
                Some(json!({ "Items": { "k": "v" } })),
            )
            .await;
        assert_eq!(s, 200);
    }
    let (vars, _) = page(
        &t,
        &format!("/v1/vars?filter={}", q(r#"Path matches "^app/""#)),
    )
    .await;
    assert_eq!(ids(&vars, "Path"), ["app/one", "app/two"]);
    let (vars, next) = page(&t, "/v1/vars?per_page=1&reverse=true").await;
    assert_eq!(
        (ids(&vars, "Path"), next.as_deref()),
        (vec!["other/x".into()], Some("default.app/two"))
    );
    let (deps, _) = page(
        &t,
        &format!("/v1/deployments?filter={}", q(r#"JobID == "a""#)),
    )
    .await;
    assert_eq!(deps, json!([]));

    // Nomad's errors: a bad expression when the paginator is made, one that cannot be
    // evaluated when the page is read, a page size that is not a number.
    let (s, body) = t
        .send(
            Method::GET,
            &format!("/v1/jobs?filter={}", q("ID ==")),
            None,
        )
        .await;
    assert_eq!(s, 400);
    let msg = body.as_str().unwrap();
    assert!(
        msg.starts_with("failed to create result paginator: failed to read filter expression: 1:"),
        "{msg}"
    );
    let (s, body) = t
        .send(
            Method::GET,
            &format!("/v1/allocations?filter={}", q("Nope == 1")),
            None,
        )
        .await;
    assert_eq!(s, 400);
    assert!(
        body.as_str()
            .unwrap()
            .starts_with("failed to read result page: error finding value in datum"),
        "{body}"
    );
    let (s, body) = t
        .send(Method::GET, "/v1/deployments?per_page=ten", None)
        .await;
    assert_eq!(
        (s, body),
        (
            400,
            json!("Expect a number for `per_page` query string parameter")
        )
    );
}
