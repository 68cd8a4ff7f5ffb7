//! The agent restarts, even after `kill -9`, and its tasks run on: the real binary, a real
//! redb file, real processes under the task executor.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{AgentProcess, alive, pid_in};

fn task_dir(dir: &Path, alloc: &str) -> PathBuf {
    dir.join("data/alloc").join(alloc).join("t")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_ten_times_while_20_raw_exec_tasks_run_leaves_every_task_running() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    agent
        .post_job(json!({ "ID": "fleet", "Type": "service", "TaskGroups": [{ "Name": "g", "Count": 20,
            "Tasks": [{ "Name": "t", "Driver": "raw_exec",
                "Config": { "command": "/bin/sh", "args": ["-c", "echo $$ > local/pid; exec sleep 600"] } }] }] }))
        .await;
    let all_running =
        |a: &[Value]| a.len() == 20 && a.iter().all(|a| a["TaskStates"]["t"]["State"] == "running");
    let allocs = agent.wait_allocs("fleet", all_running).await;
    let ids: Vec<String> = allocs
        .iter()
        .map(|a| a["ID"].as_str().unwrap().to_string())
        .collect();
    let mut pids = Vec::new();
    for id in &ids {
        let pid = pid_in(&task_dir(dir.path(), id).join("local/pid")).await;
        pids.push(pid);
    }

    for round in 0..11 {
        // Ten kill -9 in a row, then a graceful stop: the tasks outlive both.
        if round < 10 {
            agent.kill9();
        } else {
            agent.interrupt();
        }
        for pid in &pids {
            assert!(alive(*pid), "round {round}: pid {pid} died with the agent");
        }
        agent.start().await;
        let allocs = agent.wait_allocs("fleet", all_running).await;
        let mut now: Vec<String> = allocs
            .iter()
            .map(|a| a["ID"].as_str().unwrap().to_string())
            .collect();
        now.sort();
        let mut before = ids.clone();
        before.sort();
        assert_eq!(now, before, "round {round}: the same allocations");
        for pid in &pids {
            assert!(
                alive(*pid),
                "round {round}: pid {pid} died across the restart"
            );
        }
    }
    // After the last start: every task is the one first started, never restarted.
    for id in &ids {
        let a = agent.alloc(id).await;
        let t = &a["TaskStates"]["t"];
        assert_eq!(t["State"], "running", "{a:#}");
        assert_eq!(t["Restarts"], 0, "{a:#}");
        let started = t["Events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["Type"] == "Started")
            .count();
        let types: Vec<&str> = t["Events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["Type"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(started, 1, "{types:?} {}", agent.log());
    }

    // Stopping the job still reaches the reattached processes.
    let r = agent
        .http
        .delete(agent.url("/v1/job/fleet"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while pids.iter().any(|p| alive(*p)) {
        assert!(Instant::now() < deadline, "stopped tasks still run");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_exits_while_the_agent_is_down_reports_its_real_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    agent
        .post_job(json!({ "ID": "three", "Type": "batch", "TaskGroups": [{ "Name": "g",
            "RestartPolicy": { "Attempts": 0, "Mode": "fail" },
            "Tasks": [{ "Name": "t", "Driver": "raw_exec",
                "Config": { "command": "/bin/sh", "args": ["-c", "echo $$ > local/pid; while [ ! -f local/go ]; do sleep 0.05; done; exit 3"] } }] }] }))
        .await;
    let allocs = agent
        .wait_allocs("three", |a| {
            a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "running"
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let td = task_dir(dir.path(), &id);
    let deadline = Instant::now() + Duration::from_secs(20);
    let pid = loop {
        if let Some(p) = std::fs::read_to_string(td.join("local/pid"))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            break p;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let before_kill = index_of(&agent).await;
    agent.kill9();
    std::fs::write(td.join("local/go"), "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(Instant::now() < deadline, "the task did not exit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    agent.start().await;
    let allocs = agent
        .wait_allocs("three", |a| {
            a.len() == 1 && a[0]["ClientStatus"] == "failed"
        })
        .await;
    // The change index goes on past every index handed out before the restart.
    let index = index_of(&agent).await;
    assert!(
        index > before_kill,
        "X-Nomad-Index {index} after the restart is not past {before_kill}, the index before it"
    );
    let a = agent.alloc(allocs[0]["ID"].as_str().unwrap()).await;
    let events = a["TaskStates"]["t"]["Events"].as_array().unwrap();
    let terminated = events
        .iter()
        .find(|e| e["Type"] == "Terminated")
        .unwrap_or_else(|| panic!("{a:#}"));
    assert_eq!(terminated["ExitCode"], 3, "{terminated:#}");
    // Its restart policy applied: no attempts left.
    assert!(
        events.iter().any(|e| e["Type"] == "Not Restarting"),
        "{a:#}"
    );
    assert_eq!(events.iter().filter(|e| e["Type"] == "Started").count(), 1);
}

/// Wait for a file to have `n` lines; returns them.
async fn lines(path: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let v: Vec<String> = text.lines().map(str::to_string).collect();
        if v.len() >= n {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{} has {} lines, waiting for {n}",
            path.display(),
            v.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_env_and_done_hooks_are_restored_in_first_run_order_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = crate::harness::fixture_env_dir();
    let config = |env_inject_order: u32, fixture_order: u32| {
        format!(
            "plugin \"env-inject\" {{\n grant {{\n env = true\n }}\n config {{\n env = {{ GREETING = \"from env-inject\" }}\n }}\n}}\nplugin \"fixture-env\" {{\n config {{\n env = {{ GREETING = \"from the fixture\" }}\n done = true\n }}\n}}\nhook \"env-inject\" {{\n order = {env_inject_order}\n all_tasks = true\n}}\nhook \"fixture-env\" {{\n order = {fixture_order}\n all_tasks = true\n}}\n"
        )
    };
    let config_file = dir.path().join("agent.hcl");
    std::fs::write(&config_file, config(1, 2)).unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.args = vec![
        "--config".into(),
        config_file.display().to_string(),
        "--hooks".into(),
        hooks.path().display().to_string(),
    ];
    agent.start().await;
    // Each start appends $GREETING, then waits for `go` and fails: one restart follows.
    agent
        .post_job(json!({ "ID": "env", "Type": "batch", "TaskGroups": [{ "Name": "g",
            "RestartPolicy": { "Attempts": 1, "Interval": 600_000_000_000u64, "Delay": 10_000_000, "Mode": "fail" },
            "Tasks": [{ "Name": "t", "Driver": "raw_exec",
                "Config": { "command": "/bin/sh", "args": ["-c",
                    "echo \"$GREETING\" >> local/out; while [ ! -f local/go ]; do sleep 0.05; done; rm local/go; exit 1"] } }] }] }))
        .await;
    let allocs = agent
        .wait_allocs("env", |a| {
            a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "running"
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let td = task_dir(dir.path(), &id);
    assert_eq!(lines(&td.join("local/out"), 1).await, ["from the fixture"]);

    // Crash, and come back with the hook order reversed: what ran first stays first.
    agent.kill9();
    std::fs::write(&config_file, config(2, 1)).unwrap();
    agent.start().await;
    agent
        .wait_allocs("env", |a| {
            a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "running"
        })
        .await;
    std::fs::write(td.join("local/go"), "").unwrap();
    // The restart after the restore sees the same env: the fixture (done, so skipped)
    // keeps its place after env-inject, and its env still applies.
    assert_eq!(
        lines(&td.join("local/out"), 2).await,
        ["from the fixture", "from the fixture"]
    );
    let a = agent.alloc(&id).await;
    assert_eq!(a["TaskStates"]["t"]["Restarts"], 1, "{a:#}");
    std::fs::write(td.join("local/go"), "").unwrap();
    agent
        .wait_allocs("env", |a| a.len() == 1 && a[0]["ClientStatus"] == "failed")
        .await;
    // The done hook ran once in all: not again on the restore nor on the restart.
    agent.kill9();
    let db = paddock::state::RedbState::open(&dir.path().join("data/state.redb")).unwrap();
    let local = paddock::state::StateDb::local_state(&db, &id, "t")
        .unwrap()
        .unwrap();
    let order: Vec<&str> = local.hooks.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(order, ["env-inject", "fixture-env"]);
    assert_eq!(
        local.hooks[1].1.data.get("runs").map(String::as_str),
        Some("1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_allocation_that_cannot_be_restored_does_not_hold_up_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    agent
        .post_job(json!({ "ID": "pair", "Type": "service", "TaskGroups": [{ "Name": "g", "Count": 2,
            "RestartPolicy": { "Attempts": 2, "Interval": 600_000_000_000u64, "Delay": 10_000_000, "Mode": "fail" },
            "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "1h" } }] }] }))
        .await;
    let running =
        |a: &[Value]| a.len() == 2 && a.iter().all(|a| a["TaskStates"]["t"]["State"] == "running");
    let allocs = agent.wait_allocs("pair", running).await;
    let (good, bad) = (
        allocs[0]["ID"].as_str().unwrap().to_string(),
        allocs[1]["ID"].as_str().unwrap().to_string(),
    );
    agent.kill9();
    // Damage one task's stored driver handle.
    {
        let db = paddock::state::RedbState::open(&dir.path().join("data/state.redb")).unwrap();
        let mut local = paddock::state::StateDb::local_state(&db, &bad, "t")
            .unwrap()
            .unwrap();
        local.handle.as_mut().unwrap().driver_state = b"not a mock handle".to_vec();
        paddock::state::StateDb::put_local_state(&db, &bad, "t", &local).unwrap();
    }
    agent.start().await;
    let allocs = agent
        .wait_allocs("pair", |a| {
            running(a) && a.iter().any(|a| a["TaskStates"]["t"]["Restarts"] == 1)
        })
        .await;
    let g = agent.alloc(&good).await;
    assert_eq!(g["TaskStates"]["t"]["Restarts"], 0, "{g:#}");
    let b = agent.alloc(&bad).await;
    let events = b["TaskStates"]["t"]["Events"].as_array().unwrap();
    let failed = events
        .iter()
        .find(|e| e["Type"] == "Failed Restoring Task")
        .unwrap_or_else(|| panic!("{b:#}"));
    assert!(
        failed["DriverError"].as_str().unwrap().contains("recover"),
        "{failed:#}"
    );
    // Its restart policy started it again.
    assert!(events.iter().any(|e| e["Type"] == "Restarting"), "{b:#}");
    assert_eq!(allocs.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_a_task_waits_to_restart_resumes_its_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    // Fails at once the first time, then runs: the restart waits 2 s, and the agent dies then.
    agent
        .post_job(json!({ "ID": "flaky", "Type": "service", "TaskGroups": [{ "Name": "g",
            "RestartPolicy": { "Attempts": 3, "Interval": 600_000_000_000u64, "Delay": 2_000_000_000u64, "Mode": "fail" },
            "Tasks": [{ "Name": "t", "Driver": "raw_exec",
                "Config": { "command": "/bin/sh", "args": ["-c", "if [ -f local/ran ]; then echo $$ > local/pid; exec sleep 600; fi; touch local/ran; exit 1"] } }] }] }))
        .await;
    let allocs = agent
        .wait_allocs("flaky", |a| {
            a.len() == 1 && a[0]["TaskStates"]["t"]["Restarts"] == 1
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    agent.kill9();
    agent.start().await;
    let allocs = agent
        .wait_allocs("flaky", |a| {
            a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "running"
        })
        .await;
    assert_eq!(allocs[0]["ID"], id.as_str());
    let a = agent.alloc(&id).await;
    let t = &a["TaskStates"]["t"];
    // The restart that was due happened once: the count did not grow or reset.
    assert_eq!(t["Restarts"], 1, "{a:#}");
    // And the start that followed is the one that runs now.
    let pid = task_dir(dir.path(), &id).join("local/pid");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pid.exists() {
        assert!(Instant::now() < deadline, "the restarted task never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Node events of one subsystem, as the node API shows them.
async fn node_events(agent: &AgentProcess, subsystem: &str) -> Vec<String> {
    agent.get("/v1/node/self").await["Events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["Subsystem"] == subsystem)
        .map(|e| e["Message"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_and_device_state_survive_a_restart_and_changes_while_down_are_node_events() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    // First start: everything is news.
    let drivers = node_events(&agent, "Driver").await;
    assert!(drivers.iter().any(|m| m == "Driver healthy"), "{drivers:?}");
    assert!(node_events(&agent, "Device").await.is_empty());
    agent.interrupt();

    // Nothing changed while the agent was down: no driver or device events at all.
    agent.start().await;
    assert_eq!(node_events(&agent, "Driver").await, Vec::<String>::new());
    assert_eq!(node_events(&agent, "Device").await, Vec::<String>::new());
    let node = agent.get("/v1/node/self").await;
    assert_eq!(node["Drivers"]["mock"]["Healthy"], true, "{node:#}");
    agent.kill9();

    // While it was down, the operator broke the mock driver's config and took a device
    // away: the first fingerprint reports exactly those changes.
    let config = dir.path().join("agent.hcl");
    std::fs::write(
        &config,
        r#"
plugin "mock" {
  config {
    run_for = "1s"
  }
}
plugin "mock-device" {
  config {
    devices = [{ vendor = "paddock", type = "mock", name = "mock-device", ids = ["mock-0"] }]
  }
}
"#,
    )
    .unwrap();
    agent.args = vec!["--config".into(), config.display().to_string()];
    agent.start().await;
    let drivers = node_events(&agent, "Driver").await;
    assert_eq!(drivers.len(), 1, "{drivers:?}");
    assert!(
        drivers[0].starts_with("Driver unhealthy: invalid plugin config: run_for"),
        "{drivers:?}"
    );
    assert_eq!(
        node_events(&agent, "Device").await,
        ["Device removed: paddock/mock/mock-device mock-1"]
    );
    let node = agent.get("/v1/node/self").await;
    assert_eq!(node["Drivers"]["mock"]["Healthy"], false, "{node:#}");
    assert_eq!(node["Drivers"]["raw_exec"]["Healthy"], true, "{node:#}");
    agent.interrupt();

    // The unhealthy state was stored too: the same config again is no news.
    agent.start().await;
    assert_eq!(node_events(&agent, "Driver").await, Vec::<String>::new());
    assert_eq!(node_events(&agent, "Device").await, Vec::<String>::new());
    agent.interrupt();
}

/// The agent's change index (`X-Nomad-Index` of a read).
async fn index_of(agent: &AgentProcess) -> u64 {
    reqwest::get(agent.url("/v1/jobs")).await.unwrap().headers()["X-Nomad-Index"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_answered_but_not_placed_before_a_crash_is_placed_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    agent
        .post_job(
            json!({ "ID": "cut", "Type": "service", "TaskGroups": [{ "Name": "g", "Count": 2,
            "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "1h" } }] }] }),
        )
        .await;
    let running =
        |a: &[Value]| a.len() == 2 && a.iter().all(|a| a["TaskStates"]["t"]["State"] == "running");
    agent.wait_allocs("cut", running).await;
    agent.kill9();
    // The state a crash between the answer and the placement leaves: the job stored with
    // its placement's mark, and no allocations.
    let path = dir.path().join("data/state.redb");
    {
        use paddock::state::StateDb;
        let db = paddock::state::RedbState::open(&path).unwrap();
        for a in db.allocs().unwrap() {
            db.delete_alloc(&a.id).unwrap();
        }
        let job = db
            .jobs()
            .unwrap()
            .into_iter()
            .find(|j| j.id == "cut")
            .unwrap();
        db.queue_job_placing(&job, Some("interrupted"))
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(db.interrupted_placements().unwrap().len(), 1);
    }
    agent.start().await;
    agent.wait_allocs("cut", running).await;
    agent.kill9();
    let db = paddock::state::RedbState::open(&path).unwrap();
    assert!(
        paddock::state::StateDb::interrupted_placements(&db)
            .unwrap()
            .is_empty(),
        "the marks are cleared once placed"
    );
}

/// A stop the API acknowledged whose allocations' stop never reached the state file (the
/// state DB refused it on a failing disk, then the agent was killed): the stored job says
/// it was stopped, and a restart stops its allocations instead of running them on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocations_of_a_job_stored_as_stopped_are_stopped_on_restore() {
    use paddock::state::{RedbState, StateDb};

    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    let job = |id: &str| {
        json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g",
            "Tasks": [{ "Name": "t", "Driver": "raw_exec",
                "Config": { "command": "/bin/sh", "args": ["-c", "echo $$ > local/pid; exec sleep 600"] } }] }] })
    };
    let running = |a: &[Value]| a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "running";
    let mut pids = Vec::new();
    for id in ["kept", "stopped"] {
        agent.post_job(job(id)).await;
        let allocs = agent.wait_allocs(id, running).await;
        let alloc = allocs[0]["ID"].as_str().unwrap().to_string();
        pids.push(pid_in(&task_dir(dir.path(), &alloc).join("local/pid")).await);
    }
    agent.kill9();
    // The stop's job write landed; its allocations' did not.
    {
        let db = RedbState::open(&dir.path().join("data/state.redb")).unwrap();
        let mut stopped = db
            .jobs()
            .unwrap()
            .into_iter()
            .find(|j| j.id == "stopped")
            .unwrap();
        stopped.stop = true;
        db.put_job(&stopped).unwrap();
    }
    agent.start().await;
    let allocs = agent
        .wait_allocs("stopped", |a| {
            a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "dead"
        })
        .await;
    assert_eq!(allocs[0]["DesiredStatus"], "stop", "{:#}", allocs[0]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while alive(pids[1]) {
        assert!(
            Instant::now() < deadline,
            "the stopped job's task still runs"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kept = agent.wait_allocs("kept", running).await;
    assert_eq!(kept[0]["TaskStates"]["t"]["Restarts"], 0);
    assert!(alive(pids[0]), "the other job's task runs on");
}
