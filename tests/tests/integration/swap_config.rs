//! What an operator sees and does around hot swap: config reload by SIGHUP and by `POST
//! /v1/agent/reload` (and a bad config refused), the `Component` topic of the event stream,
//! a rescan for folders whose file events are not delivered, and the `component` CLI.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::swap::{active_version, put, versioned, versions_of, wait_versions};
use crate::harness::{AgentProcess, agent_bin};

/// A batch job of one mock task that prints what the hook gave it.
fn printing(id: &str) -> Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g", "Count": 1,
        "RestartPolicy": { "Attempts": 0 },
        "Tasks": [{ "Name": "t", "Driver": "mock",
            "Config": { "run_for": "10ms", "stdout_string": "build=${PADDOCK_HOOK_BUILD}." } }] }] })
}

/// What a task prints without the hook.
const UNSET: &str = "build=${PADDOCK_HOOK_BUILD}.";

async fn printed(agent: &AgentProcess, id: &str) -> String {
    agent.post_job(printing(id)).await;
    let a = agent
        .wait_allocs(id, |a| a.len() == 1 && a[0]["ClientStatus"] == "complete")
        .await;
    agent.stdout(a[0]["ID"].as_str().unwrap(), "t").await
}

fn sighup(agent: &AgentProcess) {
    let ok = std::process::Command::new("kill")
        .args(["-HUP", &agent.pid().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_reload_applies_plugin_and_hook_blocks_and_a_bad_config_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    put(&hooks, "versioned.wasm", &versioned(1, "ok"));
    let cfg = dir.path().join("agent.hcl");
    let attached = "hook \"versioned\" {\n  all_tasks = true\n}\n";
    std::fs::write(&cfg, attached).unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.args = vec![
        "--hooks".into(),
        hooks.display().to_string(),
        "--config".into(),
        cfg.display().to_string(),
    ];
    agent.start().await;
    assert_eq!(printed(&agent, "one").await, "build=1.");

    // SIGHUP with the hook no longer attached: the next task does not get it.
    std::fs::write(&cfg, "").unwrap();
    sighup(&agent);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut n = 0;
    loop {
        n += 1;
        let out = printed(&agent, &format!("two-{n}")).await;
        // Without the hook the variable is unset, and Nomad leaves it uninterpolated.
        if out == UNSET {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the hook is still attached: {out:?}"
        );
    }

    // A config that does not parse is a 400 naming the problem, and nothing changes.
    std::fs::write(&cfg, "hook \"versioned\" {\n  all_tasks = \n").unwrap();
    let r = agent
        .http
        .post(agent.url("/v1/agent/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body = r.text().await.unwrap();
    assert!(body.contains("config not reloaded"), "{body}");
    assert_eq!(printed(&agent, "three").await, UNSET);

    // Attached again, with a grant for the hook: the reload answers what changed.
    std::fs::write(
        &cfg,
        format!("{attached}plugin \"versioned\" {{\n  grant {{\n    env = true\n  }}\n}}\n"),
    )
    .unwrap();
    let r: Value = agent
        .http
        .post(agent.url("/v1/agent/reload"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let changes = r["Changes"].as_array().unwrap();
    assert!(
        changes
            .iter()
            .any(|c| c["Target"] == "versioned" && c["Outcome"] == "replaced"),
        "{r:#}"
    );
    let v = versions_of(&agent, "versioned").await;
    assert!(
        v[0]["Grants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g.as_str().unwrap().contains("env")),
        "{v:#?}"
    );
    assert_eq!(printed(&agent, "four").await, "build=1.");

    // A newer file that is refused sits on disk; a reload with new settings still reaches
    // the running version (the same code, not the refused file's).
    let sha = |v: &[Value]| {
        v.iter()
            .find(|c| c["State"] == "active")
            .and_then(|c| c["SHA256"].as_str().map(str::to_string))
    };
    let running = sha(&versions_of(&agent, "versioned").await);
    assert!(running.is_some());
    put(&hooks, "versioned.wasm", b"not a component");
    let mut refused = false;
    for _ in 0..100 {
        let all = agent.get("/v1/components").await;
        if all["Refused"].as_array().is_some_and(|r| !r.is_empty()) {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refused, "the bad file was not refused");
    std::fs::write(
        &cfg,
        format!("{attached}plugin \"versioned\" {{\n  grant {{\n    env = true\n    variables = true\n  }}\n}}\n"),
    )
    .unwrap();
    sighup(&agent);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = versions_of(&agent, "versioned").await;
        let grants = v[0]["Grants"].to_string();
        if grants.contains("variables") {
            assert_eq!(sha(&v), running, "{v:#?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new grant never reached the running version: {v:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(printed(&agent, "five").await, "build=1.");
}

/// Read the event stream until `want` events of the `Component` topic came (or time out).
async fn component_events(url: String, want: usize) -> Vec<Value> {
    let url = format!("{url}/v1/event/stream?topic=Component");
    crate::harness::stream_events(&url, |e| e.len() >= want).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn component_changes_are_events_a_rescan_finds_them_and_the_cli_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    put(&hooks, "versioned.wasm", &versioned(1, "ok"));
    let mut agent = AgentProcess::new(dir.path());
    agent.args = vec!["--hooks".into(), hooks.display().to_string()];
    agent.start().await;
    let watching = tokio::spawn(component_events(agent.url(""), 3));
    tokio::time::sleep(Duration::from_millis(300)).await;
    put(&hooks, "versioned.wasm", &versioned(2, "ok"));
    wait_versions(&agent, "versioned", "build 2", |v| {
        active_version(v).as_deref() == Some("0.1.0+b2")
    })
    .await;
    put(&hooks, "other.wasm", b"garbage");
    let deadline = Instant::now() + Duration::from_secs(20);
    while agent.get("/v1/components").await["Refused"]
        .as_array()
        .unwrap()
        .is_empty()
    {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::remove_file(hooks.join("other.wasm")).unwrap();
    std::fs::remove_file(hooks.join("versioned.wasm")).unwrap();
    let events = watching.await.unwrap();
    let types: Vec<&str> = events.iter().map(|e| e["Type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["ComponentReplaced", "ComponentRefused", "ComponentUnloaded"],
        "{events:#?}"
    );
    assert_eq!(events[0]["Topic"], "Component");
    assert_eq!(events[0]["Key"], "versioned");
    assert_eq!(events[0]["Payload"]["Component"]["World"], "hook");
    assert_eq!(
        events[0]["Payload"]["Component"]["PreviousSHA256"]
            .as_str()
            .unwrap()
            .len(),
        64
    );
    assert!(
        events[1]["Payload"]["Component"]["File"]
            .as_str()
            .unwrap()
            .ends_with("other.wasm")
    );
    wait_versions(&agent, "versioned", "unloaded", |v| v.is_empty()).await;

    // A rescan applies what the folder holds now, and answers what changed.
    put(&hooks, "versioned.wasm", &versioned(3, "ok"));
    let r: Value = agent
        .http
        .post(agent.url("/v1/components/reload"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let v = versions_of(&agent, "versioned").await;
    assert_eq!(active_version(&v).as_deref(), Some("0.1.0+b3"), "{r:#}");

    // Refused beside a running version: a second file with the same component name, and a
    // contract version the agent does not know. Neither touches build 3.
    put(&hooks, "copy.wasm", &versioned(9, "ok"));
    put(
        &hooks,
        "future.wasm",
        guest_artifacts::FIXTURE_FUTURE_VERSION.bytes,
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let refused = loop {
        let r = agent.get("/v1/components").await["Refused"].clone();
        if r.as_array().unwrap().len() == 2 {
            break r;
        }
        assert!(Instant::now() < deadline, "{r:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let text = refused.to_string();
    assert!(
        text.contains("copy.wasm") && text.contains("it reports the name \\\"versioned\\\""),
        "{text}"
    );
    assert!(
        text.contains("future.wasm") && text.contains("9.0.0"),
        "{text}"
    );
    let v = versions_of(&agent, "versioned").await;
    assert_eq!(active_version(&v).as_deref(), Some("0.1.0+b3"), "{v:#?}");
    std::fs::remove_file(hooks.join("copy.wasm")).unwrap();
    std::fs::remove_file(hooks.join("future.wasm")).unwrap();

    // The CLI: list, status and reload.
    let cli = |args: &[&str]| {
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.extend(["-address".to_string(), agent.url("")]);
        std::process::Command::new(agent_bin())
            .args(all)
            .output()
            .unwrap()
    };
    let out = cli(&["component", "list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("versioned") && l.contains("active")),
        "{text}"
    );
    let out = cli(&["component", "status", "versioned"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("0.1.0+b3") && text.contains("active"),
        "{text}"
    );
    let out = cli(&["component", "status", "nosuch"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nosuch"));
    put(&hooks, "versioned.wasm", &versioned(4, "ok"));
    let out = cli(&["component", "reload"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let v = wait_versions(&agent, "versioned", "build 4", |v| {
        active_version(v).as_deref() == Some("0.1.0+b4")
    })
    .await;
    assert_eq!(v.len(), 1);
}
