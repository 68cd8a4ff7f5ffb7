//! The exec driver component and the host's isolation: real namespaces, a real chroot and
//! real cgroups (v1 on the test machine), through the agent with its task executor.

use std::time::Duration;

use serde_json::json;

use crate::harness::TestAgent;

fn job(id: &str, memory_mb: u32, args: &[&str]) -> serde_json::Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g", "RestartPolicy": { "Attempts": 0 },
        "Tasks": [{ "Name": "t", "Driver": "exec", "KillTimeout": 200_000_000u64,
                    "Resources": { "CPU": 100, "MemoryMB": memory_mb },
                    "Config": { "command": "/bin/sh", "args": args } }] }] })
}

fn stdout(t: &TestAgent, alloc: &serde_json::Value) -> String {
    let path = t
        .agent
        .data_dir()
        .join("alloc")
        .join(alloc["ID"].as_str().unwrap())
        .join("alloc/logs/t.stdout.0");
    std::fs::read_to_string(path).unwrap_or_default()
}

fn terminated(alloc: &serde_json::Value) -> serde_json::Value {
    alloc["TaskStates"]["t"]["Events"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["Type"] == "Terminated")
        .cloned()
        .unwrap_or_else(|| panic!("no Terminated event: {alloc:#}"))
}

#[tokio::test]
async fn an_exec_task_is_pid_1_runs_as_nobody_and_sees_only_its_chroot() {
    // A file of the host's, outside the task's chroot, that the task must not read.
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "host-secret").unwrap();
    let t = TestAgent::start("", vec![]).await;
    let data_state = t.agent.data_dir().join("state.redb");
    let script = format!(
        "echo pid=$$; echo uid=$(id -u); echo procs=$(ls /proc | grep -c '^[0-9]'); \
         cat {} || echo secret-unreadable; ls {} || echo data-dir-unreadable; \
         echo dir=$NOMAD_TASK_DIR; echo hi > /dev/null && echo devnull-ok",
        secret.display(),
        data_state.display()
    );
    t.post_job(job("iso", 64, &["-c", &script])).await;
    let a = t.finished_alloc("iso").await;
    let out = stdout(&t, &a);
    assert_eq!(a["ClientStatus"], "complete", "{out}\n{a:#}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines.contains(&"pid=1"),
        "not PID 1 of its own namespace: {out}"
    );
    assert!(lines.contains(&"uid=65534"), "not nobody: {out}");
    let procs: u32 = lines
        .iter()
        .find_map(|l| l.strip_prefix("procs="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(u32::MAX);
    assert!(
        procs <= 5,
        "/proc shows the host's processes ({procs}): {out}"
    );
    assert!(
        !out.contains("host-secret"),
        "read a host file outside the chroot: {out}"
    );
    assert!(lines.contains(&"secret-unreadable"), "{out}");
    assert!(lines.contains(&"data-dir-unreadable"), "{out}");
    assert!(lines.contains(&"dir=/local"), "{out}");
    assert!(lines.contains(&"devnull-ok"), "{out}");
}

#[tokio::test]
async fn a_task_past_its_memory_is_oom_killed_alone_and_its_terminated_event_says_so() {
    let t = TestAgent::start("", vec![]).await;
    // Another task, in another allocation, that must keep running.
    t.post_job(job("bystander", 64, &["-c", "echo up; sleep 60"]))
        .await;
    let running = t
        .wait_allocs("bystander", Duration::from_secs(20), |a| {
            a.len() == 1 && a[0]["ClientStatus"] == "running"
        })
        .await;
    // `tail` keeps a line it has not ended yet: 200 MB of zeros against a 32 MB limit.
    t.post_job(job(
        "hog",
        32,
        &["-c", "head -c 200m /dev/zero | tail; echo survived"],
    ))
    .await;
    let a = t.finished_alloc("hog").await;
    assert_eq!(a["ClientStatus"], "failed", "{a:#}");
    let ev = terminated(&a);
    assert_eq!(ev["Details"]["oom_killed"], "true", "{ev:#}");
    assert!(
        ev["DisplayMessage"]
            .as_str()
            .unwrap_or_default()
            .contains("OOM Killed")
            || ev["Message"]
                .as_str()
                .unwrap_or_default()
                .contains("OOM Killed"),
        "{ev:#}"
    );
    let b = t
        .get(&format!(
            "/v1/allocation/{}",
            running[0]["ID"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        b["ClientStatus"], "running",
        "the other task was hit: {b:#}"
    );
    assert_eq!(b["TaskStates"]["t"]["State"], "running", "{b:#}");
    // Its stats come from its cgroup, which counts its shell and its sleep.
    let stats = t
        .get(&format!(
            "/v1/client/allocation/{}/stats",
            running[0]["ID"].as_str().unwrap()
        ))
        .await;
    let rss = stats["Tasks"]["t"]["ResourceUsage"]["MemoryStats"]["RSS"]
        .as_u64()
        .unwrap_or(0);
    assert!(rss > 0, "{stats:#}");
    let (status, _) = t
        .send(reqwest::Method::DELETE, "/v1/job/bystander", None)
        .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn without_the_isolation_grant_exec_is_undetected() {
    // A config block for exec without `isolation` overrides --dev's grants.
    let t = TestAgent::start(
        "plugin \"exec\" {\n grant {\n process = [\"*\"]\n }\n}",
        vec![],
    )
    .await;
    let node = t.get("/v1/node/self").await;
    let d = &node["Drivers"]["exec"];
    assert_eq!(d["Detected"], false, "{d:#}");
    assert!(
        d["HealthDescription"]
            .as_str()
            .unwrap_or_default()
            .contains("isolation"),
        "{d:#}"
    );
    assert!(node["Attributes"].get("driver.exec").is_none());
}
