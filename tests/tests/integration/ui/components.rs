//! The components page after hot swaps: the version each current one replaced, and what
//! happened to it (swapped, refused, reverted, removed), newest first, the same as
//! `GET /v1/components` says; a file refused before it ever loaded is shown with its
//! reason.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::page;
use crate::harness::TestAgent;
use crate::swap::{put, versioned};

/// Look at the folder now (the watcher may have already).
async fn rescan(t: &TestAgent) {
    let (status, v) = t.post("/v1/components/reload", json!({})).await;
    assert_eq!(status, 200, "{v}");
}

/// `/v1/components`, and the entry named `name` (or from a file ending in `name`).
async fn entry(t: &TestAgent, name: &str) -> (Value, Value) {
    let all = t.get("/v1/components").await;
    let e = all["Components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            (c["Name"] == name && c["State"] != "refused")
                || (c["Name"] == "" && c["Source"].as_str().unwrap().ends_with(name))
        })
        .cloned()
        .unwrap_or(Value::Null);
    (all, e)
}

/// Poll `/v1/components` until `done` holds for `name`'s entry.
async fn wait_entry(t: &TestAgent, name: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (all, e) = entry(t, name).await;
        if done(&e) {
            return e;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {all:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `s` as the page writes it in text.
fn escaped(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn kinds(e: &Value) -> Vec<String> {
    e["History"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["Kind"].as_str().unwrap().to_string())
        .collect()
}

/// The section of the components page for `marker` (`data-component="versioned"`).
fn section<'a>(page: &'a str, marker: &str) -> &'a str {
    let start = page
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker}: {page}"));
    let rest = &page[start..];
    &rest[..rest.find("</section>").unwrap_or(rest.len())]
}

/// A batch job of one mock task, which the `versioned` hook runs for.
async fn run_task(t: &TestAgent, id: &str) {
    t.register(
        json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0 },
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "10ms" } }] }] }),
    )
    .await;
    t.finished_alloc(id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_components_page_shows_the_previous_version_and_swaps_refusals_reverts_and_removals() {
    let hooks = tempfile::tempdir().unwrap();
    let dir: &Path = hooks.path();
    put(dir, "versioned.wasm", &versioned(1, "ok"));
    let t = TestAgent::start(
        "hook \"versioned\" {\n  all_tasks = true\n}\nplugin \"versioned\" {\n  auto_revert {\n    calls = 50\n    max_failures = 0\n  }\n}\n",
        vec![dir.to_path_buf()],
    )
    .await;
    let first = wait_entry(&t, "versioned", "build 1", |e| {
        e["PluginVersion"] == "0.1.0+b1"
    })
    .await;
    let sha1 = first["SHA256"].as_str().unwrap().to_string();
    assert!(first["Previous"].is_null(), "{first:#}");

    // A swap: the previous version and a `swapped` event.
    put(dir, "versioned.wasm", &versioned(2, "ok"));
    rescan(&t).await;
    let e = wait_entry(&t, "versioned", "build 2", |e| {
        e["PluginVersion"] == "0.1.0+b2"
    })
    .await;
    let sha2 = e["SHA256"].as_str().unwrap().to_string();
    assert_eq!(e["Previous"]["SHA256"], sha1.as_str(), "{e:#}");
    assert_eq!(e["Previous"]["PluginVersion"], "0.1.0+b1");
    assert_eq!(e["Previous"]["LoadedAt"], first["LoadedAt"]);
    assert_eq!(
        e["Previous"]["Draining"], false,
        "a hook has no tasks left on it"
    );
    assert_eq!(
        e["Previous"]["KeptForRevert"], true,
        "watched for auto-revert"
    );
    assert_eq!(
        e["PreviousSHA256"],
        sha1.as_str(),
        "the older field says the same"
    );
    assert_eq!(kinds(&e)[0], "swapped", "{e:#}");
    assert_eq!(e["History"][0]["SHA256"], sha2.as_str());
    assert_eq!(e["History"][0]["PreviousSHA256"], sha1.as_str());

    // A file that never loaded is refused, with its reason; a broken new version of a
    // loaded one is refused and the running version stays.
    put(
        dir,
        "broken.wasm",
        b"\0asm\x0d\0\x01\0 not really a component",
    );
    put(
        dir,
        "versioned.wasm",
        b"\0asm\x0d\0\x01\0 not really a component either",
    );
    rescan(&t).await;
    let broken = wait_entry(&t, "broken.wasm", "the refusal", |e| {
        e["State"] == "refused"
    })
    .await;
    assert_eq!(kinds(&broken), ["refused"], "{broken:#}");
    let reason = broken["History"][0]["Reason"].as_str().unwrap().to_string();
    assert!(
        !reason.is_empty() && reason == broken["Reason"],
        "{broken:#}"
    );
    let e = wait_entry(&t, "versioned", "the refused version", |e| {
        kinds(e).first().map(String::as_str) == Some("refused")
    })
    .await;
    assert_eq!(e["SHA256"], sha2.as_str(), "build 2 still serves: {e:#}");

    let (status, _, body) = page(&t, "/ui/components", &[]).await;
    assert_eq!(status, 200);
    let v = section(&body, r#"data-component="versioned""#);
    assert!(v.contains(&format!(r#"data-previous="{sha1}""#)), "{v}");
    assert!(v.contains("0.1.0+b1"), "{v}");
    assert!(v.contains(r#"<li data-swap-event="swapped">"#), "{v}");
    assert!(v.contains(r#"<li data-swap-event="refused">"#), "{v}");
    assert!(
        v.find(r#"data-swap-event="refused""#) < v.find(r#"data-swap-event="swapped""#),
        "newest first: {v}"
    );
    let b = section(
        &body,
        &format!(
            r#"data-state="refused" aria-label="{}""#,
            dir.join("broken.wasm").display()
        ),
    );
    assert!(b.contains(r#"<li data-swap-event="refused">"#), "{b}");
    assert!(b.contains(&escaped(&reason)), "{b}");

    // A version whose first calls fail is rolled back: a `reverted` event with the reason.
    put(dir, "versioned.wasm", &versioned(3, "trap"));
    rescan(&t).await;
    wait_entry(&t, "versioned", "build 3", |e| {
        e["PluginVersion"] == "0.1.0+b3"
    })
    .await;
    run_task(&t, "meets-the-trap").await;
    let e = wait_entry(&t, "versioned", "the revert", |e| {
        kinds(e).first().map(String::as_str) == Some("reverted")
    })
    .await;
    assert_eq!(e["SHA256"], sha2.as_str(), "build 2 serves again: {e:#}");
    let revert = &e["History"][0];
    assert_eq!(revert["SHA256"], sha2.as_str());
    assert!(
        revert["Reason"].as_str().unwrap().contains("failed"),
        "{revert:#}"
    );
    let (_, _, body) = page(&t, "/ui/components", &[]).await;
    let v = section(&body, r#"data-component="versioned""#);
    assert!(v.contains(r#"<li data-swap-event="reverted">"#), "{v}");
    assert!(v.contains("rolled back"), "{v}");

    // Deleted: the component is gone, its history stays in view.
    std::fs::remove_file(dir.join("versioned.wasm")).unwrap();
    std::fs::remove_file(dir.join("broken.wasm")).unwrap();
    rescan(&t).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let gone = loop {
        let all = t.get("/v1/components").await;
        let gone = all["Unloaded"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["Name"] == "versioned")
            .cloned();
        if let Some(g) = gone {
            break g;
        }
        assert!(tokio::time::Instant::now() < deadline, "{all:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(kinds(&gone)[0], "removed", "{gone:#}");
    let (_, _, body) = page(&t, "/ui/components", &[]).await;
    assert!(
        !body.contains("broken.wasm"),
        "a deleted refused file is gone: {body}"
    );
    let g = section(&body, r#"data-unloaded="versioned""#);
    assert!(g.contains(r#"<li data-swap-event="removed">"#), "{g}");
}

/// A pulled component's new version that declares more grants waits for approval: the page
/// shows where the running one came from, what the held one declares and the difference,
/// as `GET /v1/components` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_held_for_approval_shows_the_grants_it_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sleeper.wasm");
    std::fs::write(&file, guest_artifacts::SLEEPER_DRIVER.bytes).unwrap();
    let t = TestAgent::start(
        &format!(
            "plugin \"sleeper\" {{\n  source = \"file://{}\"\n}}\n",
            file.display()
        ),
        vec![],
    )
    .await;
    let wider = crate::oci::with_section(
        guest_artifacts::SLEEPER_DRIVER.bytes,
        "paddock:grants",
        br#"{"read_paths": ["/etc"]}"#,
    );
    std::fs::write(&file, wider).unwrap();
    let (status, v) = t
        .post("/v1/components/pull", json!({ "Name": "sleeper" }))
        .await;
    assert_eq!(
        (status, v["Outcome"].as_str()),
        (200, Some("pending-approval")),
        "{v}"
    );
    let (_, _, body) = page(&t, "/ui/components", &[]).await;
    let held = section(&body, r#"data-state="pending-approval""#);
    assert!(held.contains("<code>+ read_paths /etc</code>"), "{held}");
    assert!(held.contains("agent component approve sleeper"), "{held}");
    assert!(held.contains("read_paths(/etc)"), "{held}");
    let active = section(&body, r#"data-state="active" aria-label="sleeper""#);
    assert!(
        active.contains(&escaped(&format!("file://{}", file.display()))),
        "{active}"
    );
}
