//! Acting on a running allocation over HTTP: restart, signal, stats and gc.

use std::time::Duration;

use serde_json::json;

use crate::harness::{TestAgent, event_types};

#[tokio::test]
async fn restart_signal_stats_and_gc_of_a_running_allocation() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(json!({ "ID": "svc", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "raw_exec", "KillTimeout": 1_000_000_000u64,
            "Config": { "command": "/bin/sh", "args": ["-c",
                "trap 'echo got HUP >> local/sig' HUP; echo start >> local/starts; while true; do sleep 0.1; done"] } }] }] }))
        .await;
    let running =
        |a: &[serde_json::Value]| a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "running";
    let allocs = t.wait_allocs("svc", Duration::from_secs(20), running).await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let local = t.agent.data_dir().join("alloc").join(&id).join("t/local");
    let wait_file = |name: &'static str, want: &'static str| {
        let path = local.join(name);
        async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(15);
            loop {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                if text == want {
                    return;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{}: {text:?}, want {want:?}",
                    path.display()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    // The trap is set before `start` is written: a SIGHUP sent once it is read is caught.
    wait_file("starts", "start\n").await;

    // Signal.
    let r = t
        .http
        .post(t.url(&format!("/v1/client/allocation/{id}/signal")))
        .json(&json!({"Task": "t", "Signal": "SIGHUP"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    wait_file("sig", "got HUP\n").await;
    let r = t
        .http
        .post(t.url(&format!("/v1/client/allocation/{id}/signal")))
        .json(&json!({"Task": "t", "Signal": "SIGNOPE"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // Stats of the live process.
    let stats = t.get(&format!("/v1/client/allocation/{id}/stats")).await;
    assert!(
        stats["Tasks"]["t"]["ResourceUsage"]["MemoryStats"]["RSS"]
            .as_u64()
            .unwrap()
            > 0,
        "{stats:#}"
    );
    let node = t.get("/v1/client/stats").await;
    assert!(node["Memory"]["Total"].as_u64().unwrap() > 0, "{node:#}");

    // Restart: a new start at once, counted in Restarts, not against the policy.
    let r = t
        .http
        .post(t.url(&format!("/v1/client/allocation/{id}/restart")))
        .json(&json!({"TaskName": "t"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    wait_file("starts", "start\nstart\n").await;
    let allocs = t.wait_allocs("svc", Duration::from_secs(20), running).await;
    let a = t
        .get(&format!(
            "/v1/allocation/{}",
            allocs[0]["ID"].as_str().unwrap()
        ))
        .await;
    assert_eq!(a["TaskStates"]["t"]["Restarts"], 1, "{a:#}");
    let types = event_types(&a, "t");
    assert!(types.iter().any(|e| e == "Restart Signaled"), "{types:?}");
    let r = t
        .http
        .post(t.url(&format!("/v1/client/allocation/{id}/restart")))
        .json(&json!({"TaskName": "nope"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    // GC: refused while it runs; after a stop it removes the allocation and its dir.
    let r = t
        .http
        .get(t.url(&format!("/v1/client/allocation/{id}/gc")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    t.http
        .post(t.url(&format!("/v1/allocation/{id}/stop")))
        .send()
        .await
        .unwrap();
    t.alloc_done(&id).await;
    let r = t
        .http
        .post(t.url(&format!("/v1/client/allocation/{id}/restart")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "a dead allocation cannot restart");
    let r = t
        .http
        .get(t.url(&format!("/v1/client/allocation/{id}/gc")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Its directory goes; its record stays, as a Nomad server keeps it until its own
    // collection.
    assert!(!t.agent.data_dir().join("alloc").join(&id).exists());
    let a = t.get(&format!("/v1/allocation/{id}")).await;
    assert_eq!(a["ClientStatus"], "complete");
}

#[tokio::test]
async fn allocations_page_as_nomads_paginator_does() {
    let t = TestAgent::start("", vec![]).await;
    let r = t
        .post_job(
            json!({ "ID": "many", "Type": "service", "TaskGroups": [{ "Name": "g", "Count": 5,
            "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "1h" },
                "Resources": { "CPU": 10, "MemoryMB": 10 } }] }] }),
        )
        .await;
    assert_eq!(r.status(), 200);
    let reg: serde_json::Value = r.json().await.unwrap();
    t.eval_done(reg["EvalID"].as_str().unwrap()).await;
    let all = t.get("/v1/allocations").await;
    let all: Vec<String> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["ID"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(all.len(), 5);
    // Pages of 2 by (CreateIndex, ID), the next page's first item as `CreateIndex.ID`.
    let mut seen = Vec::new();
    let mut token = String::new();
    for page in 0.. {
        let r = t
            .http
            .get(t.url(&format!("/v1/allocations?per_page=2&next_token={token}")))
            .send()
            .await
            .unwrap();
        let next = r
            .headers()
            .get("X-Nomad-NextToken")
            .map(|v| v.to_str().unwrap().to_string());
        let items: serde_json::Value = r.json().await.unwrap();
        let items = items.as_array().unwrap();
        assert!(items.len() <= 2, "page {page}: {items:#?}");
        seen.extend(items.iter().map(|a| a["ID"].as_str().unwrap().to_string()));
        match next {
            Some(n) => {
                let (index, id) = n.split_once('.').unwrap();
                assert!(index.parse::<u64>().is_ok(), "{n}");
                assert_eq!(
                    id,
                    all[seen.len()],
                    "the token names the next page's first item"
                );
                token = n;
            }
            None => break,
        }
    }
    assert_eq!(seen, all, "the pages together are the whole list, in order");
    // Under a prefix, by ID with the ID as the token.
    let prefix = &all[0][..1];
    let r = t
        .http
        .get(t.url(&format!("/v1/allocations?prefix={prefix}&per_page=1")))
        .send()
        .await
        .unwrap();
    let with_prefix = all.iter().filter(|id| id.starts_with(prefix)).count();
    let next = r.headers().get("X-Nomad-NextToken").cloned();
    let items: serde_json::Value = r.json().await.unwrap();
    assert_eq!(items.as_array().unwrap().len(), 1);
    if with_prefix > 1 {
        let mut ids: Vec<&String> = all.iter().filter(|id| id.starts_with(prefix)).collect();
        ids.sort();
        assert_eq!(items[0]["ID"], ids[0].as_str());
        assert_eq!(next.unwrap().to_str().unwrap(), ids[1].as_str());
    } else {
        assert!(next.is_none());
    }
}

/// A signal to a whole allocation whose only task's driver refuses it says the driver's own
/// reason, not "no running task".
#[tokio::test]
async fn an_alloc_signal_refused_by_the_driver_says_why() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(
        json!({ "ID": "deaf", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "mock",
            "Config": { "run_for": "1h", "signal_error": "this task takes no signals" } }] }] }),
    )
    .await;
    let running =
        |a: &[serde_json::Value]| a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "running";
    let allocs = t
        .wait_allocs("deaf", Duration::from_secs(20), running)
        .await;
    let id = allocs[0]["ID"].as_str().unwrap();
    let r = t
        .http
        .post(t.url(&format!("/v1/client/allocation/{id}/signal")))
        .json(&json!({"Signal": "SIGHUP"}))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let body = r.text().await.unwrap();
    assert!(!status.is_success(), "{status} {body}");
    assert!(
        body.contains("this task takes no signals"),
        "{status} {body}"
    );
}
