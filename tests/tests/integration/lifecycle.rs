//! Lifecycle order, leader, and kill order of an allocation's tasks.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{TestAgent, all_terminal, event_types};

fn task(name: &str, config: Value, lifecycle: Option<(&str, bool)>, leader: bool) -> Value {
    let mut t = json!({ "Name": name, "Driver": "mock", "Config": config, "Leader": leader });
    if let Some((hook, sidecar)) = lifecycle {
        t["Lifecycle"] = json!({ "Hook": hook, "Sidecar": sidecar });
    }
    t
}

/// Wait until every one of `tasks` of job `id`'s allocation runs, then stop the allocation.
/// Stop the job's first allocation once `tasks` run in it; returns its id.
async fn stop_when_running(t: &TestAgent, id: &str, tasks: &[&str]) -> String {
    let allocs = t
        .wait_allocs(id, Duration::from_secs(20), |a| {
            a.first().is_some_and(|a| {
                tasks
                    .iter()
                    .all(|n| a["TaskStates"][n]["State"] == "running")
            })
        })
        .await;
    let alloc = allocs[0]["ID"].as_str().unwrap();
    let r = t
        .http
        .post(t.url(&format!("/v1/allocation/{alloc}/stop")))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    alloc.to_string()
}

async fn run(t: &TestAgent, id: &str, tasks: Vec<Value>) -> Value {
    t.post_job(json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g", "RestartPolicy": { "Attempts": 0 }, "Tasks": tasks }] })).await;
    let allocs = t
        .wait_allocs(id, Duration::from_secs(30), all_terminal)
        .await;
    t.get(&format!(
        "/v1/allocation/{}",
        allocs[0]["ID"].as_str().unwrap()
    ))
    .await
}

/// A task state's time field (Go `time.Time`, RFC 3339) in ns.
fn time(a: &Value, task: &str, field: &str) -> u64 {
    a["TaskStates"][task][field]
        .as_str()
        .and_then(paddock::util::parse_go_time)
        .unwrap_or_else(|| panic!("{task}.{field}: {a:#}"))
}

fn event_time(a: &Value, task: &str, ty: &str) -> u64 {
    a["TaskStates"][task]["Events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["Type"] == ty)
        .and_then(|e| e["Time"].as_u64())
        .unwrap_or_else(|| panic!("{task} has no {ty}: {a:#}"))
}

#[tokio::test]
async fn prestart_main_poststart_and_poststop_run_in_order() {
    let t = TestAgent::start("", vec![]).await;
    let a = run(
        &t,
        "order",
        vec![
            task(
                "init",
                json!({"run_for": "200ms"}),
                Some(("prestart", false)),
                false,
            ),
            task(
                "side",
                json!({"run_for": "1h"}),
                Some(("prestart", true)),
                false,
            ),
            task("main", json!({"run_for": "300ms"}), None, false),
            task(
                "after",
                json!({"run_for": "50ms"}),
                Some(("poststart", false)),
                false,
            ),
            task(
                "cleanup",
                json!({"run_for": "10ms"}),
                Some(("poststop", false)),
                false,
            ),
        ],
    )
    .await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
    assert!(
        time(&a, "main", "StartedAt") >= time(&a, "init", "FinishedAt"),
        "main waits for the prestart task"
    );
    assert!(
        time(&a, "main", "StartedAt") >= time(&a, "side", "StartedAt"),
        "main waits for the sidecar to run"
    );
    assert!(
        time(&a, "after", "StartedAt") >= time(&a, "main", "StartedAt"),
        "poststart after main runs"
    );
    assert!(
        time(&a, "cleanup", "StartedAt") >= time(&a, "main", "FinishedAt"),
        "poststop after main is done"
    );
    // The sidecar was stopped once the main task was done.
    assert!(time(&a, "side", "FinishedAt") >= time(&a, "main", "FinishedAt"));
    assert!(
        event_types(&a, "side").contains(&"Killed".to_string()),
        "{:?}",
        event_types(&a, "side")
    );
    assert_eq!(a["TaskStates"]["side"]["Failed"], false);
}

#[tokio::test]
async fn a_dead_leader_kills_the_others() {
    let t = TestAgent::start("", vec![]).await;
    let a = run(
        &t,
        "leader",
        vec![
            task("boss", json!({"run_for": "100ms"}), None, true),
            task("worker", json!({"run_for": "1h"}), None, false),
            task(
                "helper",
                json!({"run_for": "1h"}),
                Some(("prestart", true)),
                false,
            ),
        ],
    )
    .await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
    for other in ["worker", "helper"] {
        let types = event_types(&a, other);
        assert!(
            types.contains(&"Leader Task Dead".to_string())
                && types.contains(&"Killed".to_string()),
            "{other}: {types:?}"
        );
    }
    // Main tasks die before sidecars.
    assert!(event_time(&a, "worker", "Killing") <= event_time(&a, "helper", "Killing"));
}

#[tokio::test]
async fn stopping_kills_the_leader_first_then_main_tasks_then_sidecars() {
    let t = TestAgent::start("", vec![]).await;
    let job = json!({ "ID": "stopme", "Type": "service", "TaskGroups": [{ "Name": "g", "Tasks": [
        task("side", json!({"run_for": "1h"}), Some(("prestart", true)), false),
        task("worker", json!({"run_for": "1h"}), None, false),
        task("boss", json!({"run_for": "1h", "kill_after": "150ms"}), None, true),
    ] }] });
    t.post_job(job).await;
    let stopped = stop_when_running(&t, "stopme", &["side", "worker", "boss"]).await;
    let a = t.alloc_done(&stopped).await;
    let (boss, worker, side) = (
        event_time(&a, "boss", "Killing"),
        event_time(&a, "worker", "Killing"),
        event_time(&a, "side", "Killing"),
    );
    assert!(
        boss < worker && worker <= side,
        "kill order boss {boss} worker {worker} side {side}"
    );
    // The leader had to be dead before the others were asked: it took 150 ms to die.
    assert!(worker - boss >= 100_000_000, "{}", worker - boss);
}

#[tokio::test]
async fn a_failed_prestart_task_keeps_the_main_tasks_from_starting() {
    let t = TestAgent::start("", vec![]).await;
    let a = run(
        &t,
        "badinit",
        vec![
            task(
                "init",
                json!({"run_for": "10ms", "exit_code": 1}),
                Some(("prestart", false)),
                false,
            ),
            task("main", json!({"run_for": "1s"}), None, false),
        ],
    )
    .await;
    assert_eq!(a["ClientStatus"], "failed");
    let types = event_types(&a, "main");
    assert!(
        !types.contains(&"Started".to_string()) && types.contains(&"Task Not Started".to_string()),
        "{types:?}"
    );
}

#[tokio::test]
async fn a_task_waits_its_shutdown_delay_before_it_is_sent_its_kill_signal() {
    let t = TestAgent::start("", vec![]).await;
    let mut delayed = task("delayed", json!({"run_for": "1h"}), None, false);
    delayed["ShutdownDelay"] = json!(400_000_000u64);
    let job = json!({ "ID": "delay", "Type": "service", "TaskGroups": [{ "Name": "g", "Tasks": [
        delayed,
        task("prompt", json!({"run_for": "1h"}), None, false),
    ] }] });
    t.post_job(job).await;
    let stopped = stop_when_running(&t, "delay", &["delayed", "prompt"]).await;
    let a = t.alloc_done(&stopped).await;
    let waiting = event_time(&a, "delayed", "Waiting for shutdown delay");
    let killing = event_time(&a, "delayed", "Killing");
    assert!(
        killing - waiting >= 400_000_000,
        "the kill signal came {} ns after the delay started",
        killing - waiting
    );
    let types = event_types(&a, "delayed");
    let (w, k) = (
        types.iter().position(|t| t == "Waiting for shutdown delay"),
        types.iter().position(|t| t == "Killing"),
    );
    assert!(w.unwrap() < k.unwrap(), "{types:?}");
    // A task without a delay is killed at once.
    assert!(!event_types(&a, "prompt").contains(&"Waiting for shutdown delay".to_string()));
}

#[tokio::test]
async fn a_stopped_allocation_waits_its_group_shutdown_delay_before_any_kill() {
    let t = TestAgent::start("", vec![]).await;
    let job = json!({ "ID": "gdelay", "Type": "service", "TaskGroups": [{ "Name": "g",
        "ShutdownDelay": 500_000_000u64,
        "Tasks": [
            task("a", json!({"run_for": "1h"}), None, false),
            task("b", json!({"run_for": "1h"}), None, false),
        ] }] });
    t.post_job(job).await;
    let stopped = stop_when_running(&t, "gdelay", &["a", "b"]).await;
    let a = t.alloc_done(&stopped).await;
    for task in ["a", "b"] {
        let waiting = event_time(&a, task, "Waiting for shutdown delay");
        let killing = event_time(&a, task, "Killing");
        assert!(
            killing - waiting >= 500_000_000,
            "{task}: the kill came {} ns after the group's delay started",
            killing - waiting
        );
    }
}

#[tokio::test]
async fn a_task_that_ends_by_itself_does_not_wait_the_group_shutdown_delay() {
    let t = TestAgent::start("", vec![]).await;
    let job = json!({ "ID": "gdone", "Type": "batch", "TaskGroups": [{ "Name": "g",
        "ShutdownDelay": 30_000_000_000u64,
        "Tasks": [
            task("main", json!({"run_for": "50ms"}), None, false),
            task("side", json!({"run_for": "1h"}), Some(("poststart", true)), false),
        ] }] });
    let started = std::time::Instant::now();
    t.post_job(job).await;
    let a = t.finished_alloc("gdone").await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the group's delay applies only when the allocation is stopped"
    );
    assert!(!event_types(&a, "side").contains(&"Waiting for shutdown delay".to_string()));
}

#[tokio::test]
async fn a_job_update_that_no_task_sees_is_applied_in_place_and_reaches_update_hooks() {
    let hooks = crate::harness::fixture_env_dir();
    let t = TestAgent::start(
        "plugin \"fixture-env\" {\n grant {\n env = true\n task_dir = true\n }\n}\nhook \"fixture-env\" {\n all_tasks = true\n}",
        vec![hooks.path().to_path_buf()],
    )
    .await;
    let job = |priority: u32, count: u32, run_for: &str| {
        json!({ "ID": "inplace", "Type": "service", "Priority": priority, "TaskGroups": [{ "Name": "g", "Count": count,
            "Tasks": [task("t", json!({"run_for": run_for}), None, false)] }] })
    };
    let running = |n: usize| {
        move |a: &[Value]| {
            a.iter()
                .filter(|a| a["ClientStatus"] == "running" && a["DesiredStatus"] == "run")
                .count()
                == n
        }
    };
    t.post_job(job(50, 1, "1h")).await;
    let first = t
        .wait_allocs("inplace", Duration::from_secs(20), running(1))
        .await;
    let id0 = first[0]["ID"].as_str().unwrap().to_string();

    // Priority and count change: the running allocation stays, a second one is placed.
    let r = t.post_job(job(70, 2, "1h")).await;
    assert!(r.status().is_success());
    let eval: Value = r.json().await.unwrap();
    let now = t
        .wait_allocs("inplace", Duration::from_secs(20), running(2))
        .await;
    assert!(now.iter().any(|a| a["ID"] == id0.as_str()), "{now:#?}");
    let a0 = t.get(&format!("/v1/allocation/{id0}")).await;
    assert_eq!(
        a0["Job"]["Priority"], 70,
        "the allocation carries the new job"
    );
    assert_eq!(
        a0["EvalID"], eval["EvalID"],
        "and the evaluation that updated it"
    );
    assert_eq!(a0["TaskStates"]["t"]["Restarts"], 0);
    assert_eq!(
        event_types(&a0, "t")
            .iter()
            .filter(|e| *e == "Started")
            .count(),
        1,
        "not restarted"
    );
    // The update hooks ran for the kept allocation's task.
    let updates = t
        .agent
        .data_dir()
        .join("alloc")
        .join(&id0)
        .join("t/local/fixture-updates");
    // The hook creates the file, then writes its line: wait for the whole line.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let read = || std::fs::read_to_string(&updates).unwrap_or_default();
    while !read().ends_with('\n') && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(read(), "update inplace\n");

    // A change the task sees (its config) replaces every allocation.
    assert!(t.post_job(job(70, 2, "2h")).await.status().is_success());
    let after = t
        .wait_allocs("inplace", Duration::from_secs(20), |a| {
            running(2)(a) && a.iter().filter(|a| a["DesiredStatus"] == "stop").count() == 2
        })
        .await;
    let old = after.iter().find(|a| a["ID"] == id0.as_str()).unwrap();
    assert_eq!(old["DesiredStatus"], "stop", "{old:#}");
}

#[tokio::test]
async fn a_start_that_misses_its_deadline_restarts_per_the_policy_and_a_trap_does_not() {
    let t = TestAgent::start(
        "plugin \"mock\" {\n limits {\n call_timeout = \"300ms\"\n }\n}",
        vec![],
    )
    .await;
    let job = |id: &str, kind: &str| {
        json!({ "ID": id, "Type": "batch",
            "TaskGroups": [{ "Name": "g",
                "RestartPolicy": { "Attempts": 1, "Delay": 100_000_000u64, "Interval": 3_600_000_000_000u64, "Mode": "fail" },
                "Tasks": [{ "Name": "t", "Driver": "mock",
                    "Config": { "misbehave": { "op": "start", "kind": kind } } }] }] })
    };
    t.post_job(job("slow", "loop")).await;
    t.post_job(job("broken", "trap")).await;
    let events = |a: &serde_json::Value| -> Vec<(String, String)> {
        a["TaskStates"]["t"]["Events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["Type"].as_str().unwrap_or("").to_string(),
                    e["DisplayMessage"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    // A missed deadline may be load: the policy's one restart is used, then it gives up
    // because the attempts ran out, not because the error was unrecoverable.
    let slow = events(&t.finished_alloc("slow").await);
    let failures = slow.iter().filter(|(k, _)| k == "Driver Failure").count();
    assert_eq!(failures, 2, "{slow:#?}");
    assert!(slow.iter().any(|(k, _)| k == "Restarting"), "{slow:#?}");
    let last = slow.last().unwrap();
    assert_eq!(last.0, "Not Restarting", "{slow:#?}");
    assert!(!last.1.contains("unrecoverable"), "{slow:#?}");
    // A trap would trap again: not restarted.
    let broken = events(&t.finished_alloc("broken").await);
    assert!(
        !broken.iter().any(|(k, _)| k == "Restarting"),
        "{broken:#?}"
    );
    assert!(
        broken.last().unwrap().1.contains("unrecoverable"),
        "{broken:#?}"
    );
}
