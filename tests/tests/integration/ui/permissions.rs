//! The pages with Nomad's ACL policies: an allocation's or a job's page is checked in the
//! object's own namespace (not the one `?namespace=` names), and a page offers only what
//! the API will let the token do there: the logs with `read-logs` (or `read-fs`), stop and
//! purge with `submit-job`, restart, signal and stop of an allocation with
//! `alloc-lifecycle`.

use std::time::Duration;

use serde_json::{Value, json};

use super::{client, page, ticker};
use crate::harness::TestAgent;

const MGMT: &str = "ui-acl-mgmt";

/// `POST path` as the management token; the answer must be a 200.
async fn as_mgmt(t: &TestAgent, path: &str, body: Value) -> Value {
    let r = client()
        .post(t.url(path))
        .header("X-Nomad-Token", MGMT)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert_eq!(status, 200, "POST {path}: {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// A client token whose one policy is `rules`: its secret.
async fn token_with(t: &TestAgent, name: &str, rules: &str) -> String {
    as_mgmt(
        t,
        &format!("/v1/acl/policy/{name}"),
        json!({ "Name": name, "Rules": rules }),
    )
    .await;
    let tok = as_mgmt(
        t,
        "/v1/acl/token",
        json!({ "Name": name, "Type": "client", "Policies": [name] }),
    )
    .await;
    tok["SecretID"].as_str().unwrap().to_string()
}

/// The id of `job`'s allocation, once it has one.
async fn alloc_of(t: &TestAgent, job: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let found = t
            .agent
            .visit_allocations(|a| (a.job_id == job).then(|| a.id.clone()));
        if let Some(id) = found.into_iter().next() {
            return id;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{job} has no allocation"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A page as `token`.
async fn as_token(t: &TestAgent, path: &str, token: &str) -> (u16, String) {
    let (status, _, body) = page(t, path, &[("X-Nomad-Token", token)]).await;
    (status, body)
}

const BUTTONS: [&str; 3] = [
    "Restart</button>",
    "Send signal</button>",
    "Stop allocation</button>",
];

#[tokio::test]
async fn pages_check_the_objects_own_namespace_and_offer_only_what_the_token_may_do() {
    let t = TestAgent::start(
        &format!("acl {{\n  enabled = true\n  token = \"{MGMT}\"\n}}\n"),
        vec![],
    )
    .await;
    as_mgmt(&t, "/v1/namespace/prod", json!({ "Name": "prod" })).await;
    for (id, ns) in [("web", "default"), ("other", "prod")] {
        let mut job = ticker(id);
        job["Namespace"] = json!(ns);
        as_mgmt(&t, "/v1/jobs", json!({ "Job": job })).await;
    }
    let web = alloc_of(&t, "web").await;
    let other = alloc_of(&t, "other").await;

    let reader = token_with(
        &t,
        "reader",
        "namespace \"default\" {\n  capabilities = [\"read-job\"]\n}\n",
    )
    .await;
    let operator = token_with(
        &t,
        "operator",
        "namespace \"default\" {\n  capabilities = [\"read-job\", \"read-logs\", \"submit-job\", \"alloc-lifecycle\", \"alloc-exec\", \"alloc-node-exec\"]\n}\n",
    )
    .await;

    // Another namespace's allocation, by its id: a 403 whatever ?namespace= says, as the
    // API answers; a prefix of its id finds nothing this token may see.
    for path in [
        format!("/ui/allocations/{other}"),
        format!("/ui/allocations/{other}?namespace=default"),
    ] {
        let (status, body) = as_token(&t, &path, &reader).await;
        assert_eq!(status, 403, "{path}: {body}");
        assert!(body.contains("403: Permission denied"), "{body}");
        assert!(!body.contains("Task t"), "{body}");
    }
    let (status, _) = as_token(&t, &format!("/ui/allocations/{}", &other[..8]), &reader).await;
    assert_eq!(
        status, 404,
        "a prefix of an allocation the token may not read"
    );
    let r = client()
        .get(t.url(&format!("/v1/allocation/{other}")))
        .header("X-Nomad-Token", &reader)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "the API refuses it too");
    // Another namespace's job: 403 in its namespace, not found in the token's own.
    let (status, _) = as_token(&t, "/ui/jobs/other?namespace=prod", &reader).await;
    assert_eq!(status, 403);
    let (status, body) = as_token(&t, "/ui/jobs/other?namespace=default", &reader).await;
    assert_eq!(status, 404, "{body}");

    // Its own namespace's allocation: shown, without logs or buttons.
    let (status, body) = as_token(&t, &format!("/ui/allocations/{web}"), &reader).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Task t"), "{body}");
    assert!(
        body.contains("Your token may not read logs") && !body.contains("data-logs="),
        "no log panel without read-logs: {body}"
    );
    assert!(
        body.contains("Your token may not restart, signal or stop this allocation"),
        "{body}"
    );
    // No terminal: raw_exec needs alloc-exec and alloc-node-exec, and says so.
    assert!(
        body.contains("Your token may not run commands in this allocation")
            && body.contains("needs alloc-exec and alloc-node-exec")
            && !body.contains("data-exec="),
        "{body}"
    );
    for b in BUTTONS {
        assert!(
            !body.contains(b),
            "a read-only token is offered {b}: {body}"
        );
    }
    // The API would refuse what the page does not offer.
    let r = client()
        .get(t.url(&format!(
            "/v1/client/fs/logs/{web}?task=t&type=stdout&plain=true"
        )))
        .header("X-Nomad-Token", &reader)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // Its job: no stop or purge, in the list or on its page.
    for path in ["/ui/jobs/web", "/ui/jobs"] {
        let (status, body) = as_token(&t, path, &reader).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert!(
            body.contains("/ui/jobs/web?") || path != "/ui/jobs",
            "{body}"
        );
        assert!(!body.contains(r#"data-action="DELETE""#), "{path}: {body}");
        assert!(body.contains("Read only"), "{path}: {body}");
    }

    // The node page lays out only the allocations the token may read; the rest of the
    // node's use is one segment that names nothing.
    let node_reader = token_with(
        &t,
        "node-reader",
        "namespace \"default\" {\n  capabilities = [\"read-job\"]\n}\nnode {\n  policy = \"read\"\n}\n",
    )
    .await;
    let (status, body) = as_token(&t, "/ui/node", &node_reader).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(&format!(r#"<tr data-alloc="{web}">"#)),
        "{body}"
    );
    assert!(
        !body.contains(&other[..8]) && !body.contains("/ui/jobs/other"),
        "{body}"
    );
    assert!(body.contains(r#"<span class="share other""#), "{body}");
    // The editor opens only a job the token may read.
    let (status, _) = as_token(&t, "/ui/run?job=other&namespace=prod", &reader).await;
    assert_eq!(status, 403);
    let (status, body) = as_token(&t, "/ui/run?job=web", &reader).await;
    assert_eq!(status, 200, "{body}");

    // read-fs reads the log files too, so the logs endpoint lets it follow them.
    let fs_reader = token_with(
        &t,
        "fs-reader",
        "namespace \"default\" {\n  capabilities = [\"read-job\", \"read-fs\"]\n}\n",
    )
    .await;
    let (status, body) = as_token(&t, &format!("/ui/allocations/{web}"), &fs_reader).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&format!(r#"data-logs="{web}""#)), "{body}");
    assert!(!body.contains("Restart</button>"), "{body}");

    // A token with the capabilities sees the log panel and every button.
    let (status, body) = as_token(&t, &format!("/ui/allocations/{web}"), &operator).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&format!(r#"data-logs="{web}""#)), "{body}");
    assert!(!body.contains("may not"), "{body}");
    for b in BUTTONS {
        assert!(body.contains(b), "lacks {b}: {body}");
    }
    assert!(
        body.contains(&format!(r#"data-exec="{web}""#)),
        "no terminal: {body}"
    );
    let (_, body) = as_token(&t, "/ui/jobs/web", &operator).await;
    assert!(
        body.contains(r#"data-url="/v1/job/web?namespace=default&amp;purge=true""#),
        "{body}"
    );
    // It may not see the other namespace either.
    let (status, _) = as_token(&t, &format!("/ui/allocations/{other}"), &operator).await;
    assert_eq!(status, 403);

    // The management token sees everything, anywhere.
    let (status, body) = as_token(&t, &format!("/ui/allocations/{other}"), MGMT).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&format!(r#"data-logs="{other}""#)), "{body}");
    for b in BUTTONS {
        assert!(body.contains(b), "lacks {b}: {body}");
    }
    let (status, body) = as_token(&t, "/ui/jobs/other?namespace=prod", MGMT).await;
    assert_eq!(status, 200);
    assert!(body.contains(r#"data-action="DELETE""#), "{body}");

    // Without a token: the anonymous token has no policy here, so the pages ask for one.
    let (status, _, body) = page(&t, &format!("/ui/allocations/{web}"), &[]).await;
    assert_eq!(status, 403);
    assert!(
        body.contains(r#"<label for="token">ACL token</label>"#),
        "{body}"
    );
}

/// The variables pages list, show and offer to edit only what the token's variable rules
/// allow.
#[tokio::test]
async fn variables_pages_follow_the_tokens_variable_rules() {
    let t = TestAgent::start(
        &format!("acl {{\n  enabled = true\n  token = \"{MGMT}\"\n}}\n"),
        vec![],
    )
    .await;
    for path in ["app/one", "secret/two"] {
        let r = client()
            .put(t.url(&format!("/v1/var/{path}")))
            .header("X-Nomad-Token", MGMT)
            .json(&json!({ "Items": { "k": "v" } }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let rules = "namespace \"default\" {\n  variables {\n    path \"app/*\" {\n      capabilities = [\"list\", \"read\"]\n    }\n  }\n}\n";
    let reader = token_with(&t, "app-reader", rules).await;
    let (status, body) = as_token(&t, "/ui/variables", &reader).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("data-var=\"app/one\""), "{body}");
    assert!(
        !body.contains("secret/two"),
        "a variable the token may not list: {body}"
    );
    let (status, body) = as_token(&t, "/ui/variables/app/one", &reader).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("data-item=\"k\"") && !body.contains("var-edit"),
        "{body}"
    );
    let (status, _) = as_token(&t, "/ui/variables/secret/two", &reader).await;
    assert_eq!(status, 403);
    let (status, body) = as_token(&t, "/ui/variables/app/one", MGMT).await;
    assert_eq!(status, 200);
    assert!(body.contains("var-edit"), "management may write: {body}");
}

/// The file browser keeps to the allocation's dir: `..` and a link a task made to a host
/// folder are refused, as the API's file endpoints refuse them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_browser_does_not_leave_the_allocation_dir() {
    let t = TestAgent::start("", vec![]).await;
    let job = json!({ "ID": "linker", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "raw_exec", "Config": { "command": "/bin/sh",
            "args": ["-c", "ln -s /etc local/out; echo made > local/ok; exec sleep 600"] } }] }] });
    t.register(job).await;
    let id = alloc_of(&t, "linker").await;
    let mut listed = String::new();
    for _ in 0..100 {
        let (status, body) =
            status_body(page(&t, &format!("/ui/allocations/{id}/files?path=t/local"), &[]).await);
        if status == 200 && body.contains("data-file=\"ok\"") {
            listed = body;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(listed.contains("data-file=\"out\""), "{listed}");
    for escape in ["..", "t/local/out", "t/local/out/passwd", "t/../../.."] {
        let (status, body) = status_body(
            page(
                &t,
                &format!("/ui/allocations/{id}/files?path={escape}"),
                &[],
            )
            .await,
        );
        assert!(status == 400 || status == 404, "{escape}: {status}");
        assert!(!body.contains("root:"), "{escape}: a host file shown");
    }
}

fn status_body<H>((status, _, body): (u16, H, String)) -> (u16, String) {
    (status, body)
}
