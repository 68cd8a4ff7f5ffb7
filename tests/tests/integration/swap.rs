//! Hot swap of hooks while tasks run: the real agent binary watching a real folder, files
//! replaced by rename and by slow writes, tasks started in a loop. Distinct versions of one
//! hook are made by rewriting the build stamp of the `versioned` fixture
//! (`guest_artifacts::restamp`), which puts its build in the task's env.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::AgentProcess;

/// The `versioned` hook stamped with `build` and `mode`.
pub fn versioned(build: u32, mode: &str) -> Vec<u8> {
    guest_artifacts::restamp(
        guest_artifacts::FIXTURE_VERSIONED_HOOK.bytes,
        build,
        1,
        mode,
    )
    .expect("the versioned hook carries a stamp")
}

/// Put `bytes` in place as `dir/name` the way an operator's deploy does: write a temp file
/// beside it, then rename it over the old one.
pub fn put(dir: &Path, name: &str, bytes: &[u8]) {
    let tmp = dir.join(format!(".{name}.part"));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// Overwrite `dir/name` in place, slowly: half the bytes, a pause longer than the watcher's
/// debounce with the file still open, then the rest.
fn slow_write(path: &Path, bytes: &[u8], pause: Duration) {
    let mut f = std::fs::File::create(path).unwrap();
    let half = bytes.len() / 2;
    f.write_all(&bytes[..half]).unwrap();
    f.flush().unwrap();
    std::thread::sleep(pause);
    f.write_all(&bytes[half..]).unwrap();
}

/// The agent's `/v1/components` entries named `name`.
pub async fn versions_of(agent: &AgentProcess, name: &str) -> Vec<Value> {
    let v = agent.get("/v1/components").await;
    v["Components"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["Name"] == name)
        .cloned()
        .collect()
}

/// Poll `/v1/components` until `done` holds for the entries named `name`.
pub async fn wait_versions(
    agent: &AgentProcess,
    name: &str,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = versions_of(agent, name).await;
        if done(&v) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {v:#?}\n{}",
            agent.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The active version's plugin version (`0.1.0+b<build>`).
pub fn active_version(v: &[Value]) -> Option<String> {
    v.iter()
        .find(|c| c["State"] == "active")
        .and_then(|c| c["PluginVersion"].as_str())
        .map(str::to_string)
}

/// A counter of `/v1/metrics`, 0 when absent.
pub async fn counter(agent: &AgentProcess, name: &str) -> i64 {
    let m = agent.get("/v1/metrics").await;
    m["Counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["Name"] == name)
        .and_then(|c| c["Count"].as_i64())
        .unwrap_or(0)
}

/// An agent watching `hooks` with the `versioned` hook attached to every task, plus
/// `extra` config.
async fn agent_with_hook(dir: &Path, extra: &str) -> (AgentProcess, PathBuf) {
    let hooks = dir.join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    put(&hooks, "versioned.wasm", &versioned(1, "ok"));
    let cfg = dir.join("agent.hcl");
    std::fs::write(
        &cfg,
        format!("hook \"versioned\" {{\n  all_tasks = true\n}}\n{extra}"),
    )
    .unwrap();
    let mut agent = AgentProcess::new(dir);
    agent.args = vec![
        "--hooks".into(),
        hooks.display().to_string(),
        "--config".into(),
        cfg.display().to_string(),
    ];
    agent.start().await;
    wait_versions(&agent, "versioned", "build 1", |v| {
        active_version(v).as_deref() == Some("0.1.0+b1")
    })
    .await;
    (agent, hooks)
}

/// A batch job of `count` mock tasks that print the hook build they were given.
fn printing_job(id: &str, count: u32) -> Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g", "Count": count,
        "RestartPolicy": { "Attempts": 0 },
        "Tasks": [{ "Name": "t", "Driver": "mock",
            "Config": { "run_for": "10ms", "stdout_string": "build=${PADDOCK_HOOK_BUILD}" } }] }] })
}

/// Run `job` to its end; its allocations.
async fn run(agent: &AgentProcess, job: Value) -> Vec<Value> {
    let id = job["ID"].as_str().unwrap().to_string();
    let count = job["TaskGroups"][0]["Count"].as_u64().unwrap() as usize;
    agent.post_job(job).await;
    agent
        .wait_allocs(&id, |a| {
            a.len() == count
                && a.iter()
                    .all(|a| a["ClientStatus"] != "pending" && a["ClientStatus"] != "running")
        })
        .await
}

/// The build a finished task printed.
async fn build_seen(agent: &AgentProcess, alloc: &Value) -> u32 {
    let id = alloc["ID"].as_str().unwrap();
    let out = agent
        .http
        .get(agent.url(&format!(
            "/v1/client/fs/logs/{id}?task=t&type=stdout&plain=true"
        )))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let n = out
        .strip_prefix("build=")
        .and_then(|b| b.trim().parse().ok());
    n.unwrap_or_else(|| panic!("task of {id} printed {out:?}, not one build"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_replaced_22_times_while_200_tasks_start_fails_none_and_only_moves_forward() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, hooks) = agent_with_hook(dir.path(), "").await;

    // Builds 2..=23: by rename, except 8 and 16 by a slow write in place, and a broken
    // file (not a component) renamed in before 12. Each one is waited for before the next
    // (files that change faster than they load are coalesced: only the newest is loaded).
    let swapper = {
        let hooks = hooks.clone();
        let url = agent.url("/v1/components");
        let node_url = agent.url("/v1/node/self");
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            for build in 2..=23u32 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if build == 12 {
                    // Refused with a node event naming the file; the running version stays.
                    put(
                        &hooks,
                        "versioned.wasm",
                        b"\0asm\x0d\0\x01\0 not really a component",
                    );
                    let deadline = Instant::now() + Duration::from_secs(30);
                    loop {
                        let node: Value = http
                            .get(&node_url)
                            .send()
                            .await
                            .unwrap()
                            .json()
                            .await
                            .unwrap();
                        let refused = node["Events"].as_array().unwrap().iter().any(|e| {
                            let m = e["Message"].as_str().unwrap();
                            e["Subsystem"] == "Component"
                                && m.contains("refused")
                                && m.contains("versioned.wasm")
                        });
                        if refused {
                            break;
                        }
                        assert!(
                            Instant::now() < deadline,
                            "no node event for the broken file: {node:#}"
                        );
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                let hooks = hooks.clone();
                tokio::task::spawn_blocking(move || match build {
                    8 | 16 => slow_write(
                        &hooks.join("versioned.wasm"),
                        &versioned(build, "ok"),
                        Duration::from_millis(700),
                    ),
                    _ => put(&hooks, "versioned.wasm", &versioned(build, "ok")),
                })
                .await
                .unwrap();
                let want = format!("0.1.0+b{build}");
                let deadline = Instant::now() + Duration::from_secs(30);
                loop {
                    let v: Value = http.get(&url).send().await.unwrap().json().await.unwrap();
                    let now = v["Components"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|c| c["Name"] == "versioned" && c["State"] == "active")
                        .map(|c| c["PluginVersion"].clone());
                    if now.as_ref().and_then(Value::as_str) == Some(want.as_str()) {
                        break;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "build {build} was not loaded: {now:?}"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        })
    };

    // 40 jobs of 5 tasks, one after the other, while the swaps go on (and after).
    let mut seen: Vec<Vec<u32>> = Vec::new();
    for j in 0..40 {
        let allocs = run(&agent, printing_job(&format!("loop-{j:02}"), 5)).await;
        let mut builds = Vec::new();
        for a in &allocs {
            assert_eq!(a["ClientStatus"], "complete", "{a:#}\n{}", agent.log());
            builds.push(build_seen(&agent, a).await);
        }
        seen.push(builds);
    }
    swapper.await.unwrap();

    // Forward only: every task of a job saw a build no older than any task of the jobs
    // that ended before it started.
    let mut newest = 0;
    for (j, builds) in seen.iter().enumerate() {
        assert!(
            builds.iter().all(|b| *b >= newest && (1..=23).contains(b)),
            "job {j} saw {builds:?} after build {newest} had served: {seen:?}"
        );
        newest = newest.max(*builds.iter().max().unwrap());
    }
    let distinct: std::collections::BTreeSet<u32> = seen.iter().flatten().copied().collect();
    assert!(
        distinct.len() >= 4,
        "the swaps did not happen while tasks started: {seen:?}"
    );

    // Every good file was applied, the broken one refused (a node event naming the file),
    // and the half-written files were never loaded (they would have been refusals too).
    let v = wait_versions(&agent, "versioned", "build 23", |v| {
        active_version(v).as_deref() == Some("0.1.0+b23")
    })
    .await;
    assert_eq!(v.len(), 1, "one version of a hook is loaded: {v:#?}");
    assert_eq!(counter(&agent, "paddock.component.swaps").await, 22);
    assert_eq!(counter(&agent, "paddock.component.refusals").await, 1);
    // The refusal is in the log too, naming the file.
    assert!(
        agent
            .log()
            .lines()
            .any(|l| l.contains("component refused") && l.contains("versioned.wasm")),
        "{}",
        agent.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_that_traps_is_rolled_back_and_the_tasks_after_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, hooks) = agent_with_hook(
        dir.path(),
        "plugin \"versioned\" {\n  auto_revert {\n    calls = 10\n    max_failures = 2\n  }\n}\n",
    )
    .await;
    let good =
        wait_versions(&agent, "versioned", "build 1", |v| v.len() == 1).await[0]["SHA256"].clone();
    put(&hooks, "versioned.wasm", &versioned(2, "trap"));
    wait_versions(&agent, "versioned", "the trapping build", |v| {
        active_version(v).as_deref() == Some("0.1.0+b2")
    })
    .await;

    // Tasks one at a time: the first ones meet the trap, until the version is rolled back.
    let mut outcomes = Vec::new();
    for j in 0..8 {
        let a = run(&agent, printing_job(&format!("after-{j}"), 1)).await;
        outcomes.push(a[0].clone());
    }
    let failed: Vec<&Value> = outcomes
        .iter()
        .filter(|a| a["ClientStatus"] == "failed")
        .collect();
    assert!(
        !failed.is_empty() && failed.len() <= 3,
        "{} failed: {outcomes:#?}",
        failed.len()
    );
    for a in &failed {
        let events = a["TaskStates"]["t"]["Events"].as_array().unwrap();
        let setup = events
            .iter()
            .find(|e| e["Type"] == "Setup Failure")
            .unwrap_or_else(|| panic!("{a:#}"));
        let m = setup["DisplayMessage"].as_str().unwrap().to_string()
            + setup["Message"].as_str().unwrap_or_default();
        assert!(m.contains("versioned") && m.contains("trap"), "{m}");
    }
    // Once rolled back, every task succeeds on build 1 again.
    let first_ok = outcomes
        .iter()
        .position(|a| a["ClientStatus"] == "complete")
        .expect("a task after the revert");
    assert!(
        outcomes[first_ok..]
            .iter()
            .all(|a| a["ClientStatus"] == "complete"),
        "{outcomes:#?}"
    );
    for a in &outcomes[first_ok..] {
        assert_eq!(build_seen(&agent, a).await, 1);
    }
    let v = versions_of(&agent, "versioned").await;
    assert_eq!(active_version(&v).as_deref(), Some("0.1.0+b1"), "{v:#?}");
    assert_eq!(v[0]["SHA256"], good);
    assert_eq!(counter(&agent, "paddock.component.reverts").await, 1);
    let node = agent.get("/v1/node/self").await;
    assert!(
        node["Events"].as_array().unwrap().iter().any(|e| {
            let m = e["Message"].as_str().unwrap();
            m.contains("versioned reverted") && m.contains("failed")
        }),
        "{:#}",
        node["Events"]
    );
}

/// Resident memory of `pid`, KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_swaps_return_the_memory_of_the_versions_they_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, hooks) = agent_with_hook(dir.path(), "").await;
    // Five builds, each compiled once in a warm-up round (with a task, so that each
    // version is called and has warm stores), then swapped in turn: what is measured is what
    // swapping keeps alive, not the compile cache or the job history filling up.
    let builds: Vec<Vec<u8>> = (2..=6).map(|b| versioned(b, "ok")).collect();
    let swap_to = async |i: usize| {
        let b = 2 + (i % 5) as u32;
        put(&hooks, "versioned.wasm", &builds[i % 5]);
        let want = format!("0.1.0+b{b}");
        wait_versions(&agent, "versioned", &want, |v| {
            active_version(v).as_deref() == Some(want.as_str())
        })
        .await;
    };
    for i in 0..10 {
        swap_to(i).await;
        run(&agent, printing_job(&format!("warm-{i}"), 1)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(agent.pid());
    for i in 10..110 {
        swap_to(i).await;
    }
    // Let the last watches end and the allocator settle.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib(agent.pid());
    eprintln!("agent RSS before 100 swaps {before} KiB, after {after} KiB");
    assert!(
        (after as f64) <= before as f64 * 1.05,
        "agent memory grew from {before} KiB to {after} KiB over 100 swaps"
    );
    let v = versions_of(&agent, "versioned").await;
    assert_eq!(v.len(), 1, "{v:#?}");
}
