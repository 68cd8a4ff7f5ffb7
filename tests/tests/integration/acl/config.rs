//! The ACL system off and on by the config file: its API refused when off; the anonymous
//! policy, open endpoints and variable path rules when on.

use serde_json::{Value, json};

use crate::harness::TestAgent;

#[tokio::test]
async fn with_the_acl_system_off_its_api_is_refused_and_the_rest_stays_open() {
    let t = TestAgent::start("", vec![]).await;
    let r = t.http.get(t.url("/v1/jobs")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = t
        .http
        .post(t.url("/v1/acl/bootstrap"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.text().await.unwrap(), "ACL support disabled");
}

#[tokio::test]
async fn acl_enabled_in_the_config_file_turns_it_on() {
    let t = TestAgent::start("acl {\n  enabled = true\n}\n", vec![]).await;
    let r = t.http.get(t.url("/v1/jobs")).send().await.unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(r.text().await.unwrap(), "Permission denied");
    // An anonymous policy opens what it grants to requests without a token.
    let boot: Value = t
        .http
        .post(t.url("/v1/acl/bootstrap"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mgmt = boot["SecretID"].as_str().unwrap();
    let r = t
        .http
        .post(t.url("/v1/acl/policy/anonymous"))
        .header("X-Nomad-Token", mgmt)
        .json(&json!({ "Name": "anonymous", "Rules": "namespace \"default\" {\n  capabilities = [\"list-jobs\"]\n}" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        t.http.get(t.url("/v1/jobs")).send().await.unwrap().status(),
        200
    );
    assert_eq!(
        t.http
            .get(t.url("/v1/nodes"))
            .send()
            .await
            .unwrap()
            .status(),
        403
    );
    // Open endpoints never look at the token, a stale one included.
    let r = t
        .http
        .get(t.url("/v1/agent/health"))
        .header("X-Nomad-Token", "stale")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Variables: a path rule's capabilities, in the namespace a write's body names.
    let rules = "namespace \"default\" {\n  variables {\n    path \"app/*\" {\n      capabilities = [\"read\", \"write\"]\n    }\n  }\n}\n";
    let send = |method: reqwest::Method, path: &str, token: &str, body: Option<Value>| {
        let mut r = t
            .http
            .request(method, t.url(path))
            .header("X-Nomad-Token", token.to_string());
        if let Some(b) = body {
            r = r.json(&b);
        }
        async move { r.send().await.unwrap().status().as_u16() }
    };
    let body = json!({ "Name": "apps", "Rules": rules });
    assert_eq!(
        send(
            reqwest::Method::POST,
            "/v1/acl/policy/apps",
            mgmt,
            Some(body)
        )
        .await,
        200
    );
    let tok = json!({ "Name": "apps", "Type": "client", "Policies": ["apps"] });
    let r = t
        .http
        .post(t.url("/v1/acl/token"))
        .header("X-Nomad-Token", mgmt)
        .json(&tok)
        .send()
        .await
        .unwrap();
    let apps: Value = r.json().await.unwrap();
    let apps = apps["SecretID"].as_str().unwrap();
    let items = json!({ "Items": { "k": "v" } });
    assert_eq!(
        send(
            reqwest::Method::PUT,
            "/v1/var/app/one",
            apps,
            Some(items.clone())
        )
        .await,
        200
    );
    assert_eq!(
        send(reqwest::Method::GET, "/v1/var/app/one", apps, None).await,
        200
    );
    assert_eq!(
        send(reqwest::Method::PUT, "/v1/var/other/one", apps, Some(items)).await,
        403
    );
    let elsewhere = json!({ "Namespace": "other", "Items": { "k": "v" } });
    assert_eq!(
        send(
            reqwest::Method::PUT,
            "/v1/var/app/two",
            apps,
            Some(elsewhere)
        )
        .await,
        403
    );
    assert_eq!(
        send(reqwest::Method::DELETE, "/v1/var/app/one", apps, None).await,
        403
    );
}
