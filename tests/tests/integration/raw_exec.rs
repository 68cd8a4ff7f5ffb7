//! The raw_exec driver component: real host processes through the `process` grant.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{TestAgent, event_types, last_terminated};

fn job(id: &str, task: serde_json::Value) -> serde_json::Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g", "RestartPolicy": { "Attempts": 0 }, "Tasks": [task] }] })
}

fn log_dir(t: &TestAgent, alloc: &serde_json::Value) -> std::path::PathBuf {
    t.agent
        .data_dir()
        .join("alloc")
        .join(alloc["ID"].as_str().unwrap())
        .join("alloc")
        .join("logs")
}

#[tokio::test]
async fn output_goes_to_log_files_and_the_exit_code_is_reported() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(job(
        "out",
        json!({ "Name": "t", "Driver": "raw_exec", "Env": { "WHO": "${NOMAD_TASK_NAME}" },
                "Config": { "command": "/bin/sh", "args": ["-c", "echo hello $WHO in $(pwd); echo oops >&2; exit 3"] } }),
    ))
    .await;
    let a = t.finished_alloc("out").await;
    assert_eq!(a["ClientStatus"], "failed");
    assert_eq!(last_terminated(&a, "t")["ExitCode"], 3);
    let logs = log_dir(&t, &a);
    let out = std::fs::read_to_string(logs.join("t.stdout.0")).unwrap();
    let task_dir = t
        .agent
        .data_dir()
        .join("alloc")
        .join(a["ID"].as_str().unwrap())
        .join("t");
    assert_eq!(out, format!("hello t in {}\n", task_dir.display()));
    assert_eq!(
        std::fs::read_to_string(logs.join("t.stderr.0")).unwrap(),
        "oops\n"
    );
}

#[tokio::test]
async fn a_bare_command_name_resolves_through_path() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(job(
        "bare",
        json!({ "Name": "t", "Driver": "raw_exec", "Config": { "command": "true" } }),
    ))
    .await;
    let a = t.finished_alloc("bare").await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
}

#[tokio::test]
async fn stop_escalates_to_sigkill_for_a_process_that_ignores_its_kill_signal() {
    let t = TestAgent::start("", vec![]).await;
    t.post_job(job(
        "stubborn",
        json!({ "Name": "t", "Driver": "raw_exec", "KillSignal": "SIGTERM", "KillTimeout": 500_000_000u64,
                "Config": { "command": "/bin/sh", "args": ["-c", "trap '' TERM INT; echo ready; while true; do sleep 0.05; done"] } }),
    ))
    .await;
    let allocs = t
        .wait_allocs("stubborn", Duration::from_secs(20), |a| {
            a.first().is_some_and(|a| a["ClientStatus"] == "running")
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    // Give the shell time to install its trap.
    let logs = t
        .agent
        .data_dir()
        .join("alloc")
        .join(&id)
        .join("alloc")
        .join("logs")
        .join("t.stdout.0");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&logs).unwrap_or_default() != "ready\n" {
        assert!(Instant::now() < deadline, "task never became ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stopped = Instant::now();
    t.http
        .post(t.url(&format!("/v1/allocation/{id}/stop")))
        .send()
        .await
        .unwrap();
    let a = t.alloc_done(&id).await;
    let took = stopped.elapsed();
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(8),
        "stop took {took:?}"
    );
    assert_eq!(last_terminated(&a, "t")["Signal"], 9, "{a:#}");
    assert!(event_types(&a, "t").contains(&"Killed".to_string()));
}

#[tokio::test]
async fn logs_rotate_per_the_logs_block() {
    let t = TestAgent::start("", vec![]).await;
    // 3.5 MiB of output in 1 MiB files, keeping 2.
    t.post_job(job(
        "chatty",
        json!({ "Name": "t", "Driver": "raw_exec", "LogConfig": { "MaxFiles": 2, "MaxFileSizeMB": 1 },
                "Config": { "command": "/bin/sh", "args": ["-c", "head -c 3670016 /dev/zero | tr '\\0' x"] } }),
    ))
    .await;
    let a = t.finished_alloc("chatty").await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
    let logs = log_dir(&t, &a);
    let mut files: Vec<_> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("t.stdout."))
        .collect();
    files.sort();
    assert_eq!(files, ["t.stdout.2", "t.stdout.3"]);
    assert_eq!(
        std::fs::metadata(logs.join("t.stdout.2")).unwrap().len(),
        1 << 20
    );
    assert_eq!(
        std::fs::metadata(logs.join("t.stdout.3")).unwrap().len(),
        512 << 10
    );
}

#[tokio::test]
async fn a_command_outside_the_grant_is_refused_with_a_clear_error() {
    let t = TestAgent::start(
        "plugin \"raw_exec\" {\n grant {\n process = [\"/bin/echo\", \"/usr/bin/echo\"]\n }\n}",
        vec![],
    )
    .await;
    t.post_job(job("refused", json!({ "Name": "t", "Driver": "raw_exec", "Config": { "command": "/bin/sh", "args": ["-c", "true"] } }))).await;
    let a = t.finished_alloc("refused").await;
    assert_eq!(a["ClientStatus"], "failed");
    let ev = a["TaskStates"]["t"]["Events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["Type"] == "Driver Failure")
        .cloned()
        .unwrap();
    let msg = ev["DisplayMessage"].as_str().unwrap();
    assert!(
        msg.contains("\"raw_exec\"") && msg.contains("/bin/sh") && msg.contains("/bin/echo"),
        "{msg}"
    );
    // An allowed command runs.
    t.post_job(job("allowed", json!({ "Name": "t", "Driver": "raw_exec", "Config": { "command": "echo", "args": ["hi"] } }))).await;
    let a = t.finished_alloc("allowed").await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
}

#[tokio::test]
async fn without_a_process_grant_raw_exec_is_undetected() {
    // A config block for raw_exec without `process` overrides --dev's grants.
    let t = TestAgent::start(
        "plugin \"raw_exec\" {\n grant {\n env = true\n }\n}",
        vec![],
    )
    .await;
    let node = t.get("/v1/node/self").await;
    let d = &node["Drivers"]["raw_exec"];
    assert_eq!(d["Detected"], false, "{d:#}");
    assert!(
        d["HealthDescription"].as_str().unwrap().contains("process"),
        "{d:#}"
    );
    assert!(node["Attributes"].get("driver.raw_exec").is_none());
    assert_eq!(node["Attributes"]["driver.mock"], "1");
}

/// Defence in depth: the operator's `user` for raw_exec runs every task as that user, with
/// no way back through a setuid binary (the executor sets no_new_privs); a task asking for
/// another user fails, naming both.
#[tokio::test]
async fn the_operators_user_runs_every_raw_exec_task() {
    let t = TestAgent::start(
        "plugin \"raw_exec\" {\n grant {\n process = [\"/bin/*\", \"/usr/bin/*\"]\n }\n config {\n user = \"nobody\"\n }\n}",
        vec![],
    )
    .await;
    t.post_job(job(
        "as-nobody",
        json!({ "Name": "t", "Driver": "raw_exec", "Config": { "command": "/bin/sh",
            "args": ["-c", "id -u; grep NoNewPrivs /proc/self/status"] } }),
    ))
    .await;
    let mut root = job(
        "as-root",
        json!({ "Name": "t", "Driver": "raw_exec", "User": "root",
                "Config": { "command": "/bin/true" } }),
    );
    root["TaskGroups"][0]["RestartPolicy"] = json!({ "Attempts": 0, "Mode": "fail" });
    t.post_job(root).await;
    let a = t.finished_alloc("as-nobody").await;
    assert_eq!(a["ClientStatus"], "complete", "{a:#}");
    let out = std::fs::read_to_string(log_dir(&t, &a).join("t.stdout.0")).unwrap();
    assert_eq!(out, "65534\nNoNewPrivs:\t1\n");
    let a = t.finished_alloc("as-root").await;
    assert_eq!(a["ClientStatus"], "failed");
    assert!(
        a.to_string()
            .contains("this agent runs raw_exec tasks as \\\"nobody\\\""),
        "{a:#}"
    );
}

/// A task executor started with SIGHUP, SIGINT and SIGQUIT ignored (by an embedder started
/// with `nohup … &` from a script: an ignored signal stays ignored through fork and exec)
/// still starts its tasks with every signal at its default action: a task's trap on SIGHUP
/// runs when the task is signalled, and Nomad's default kill signal, SIGINT, stops a task
/// at once instead of after its kill timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_start_with_default_signals_however_their_executor_was_started() {
    let dir = tempfile::tempdir().unwrap();
    // The executor the agent will find running for its data dir, started ignoring them.
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let socket = data.join("executor.sock");
    let mut executor = std::process::Command::new("/bin/sh")
        .args(["-c", "trap '' HUP INT QUIT; exec \"$0\" \"$@\""])
        .arg(crate::harness::agent_bin())
        .arg("executor")
        .arg("--socket")
        .arg(&socket)
        .arg("--dir")
        .arg(data.join("executor"))
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket.exists() {
        assert!(Instant::now() < deadline, "the executor did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut a = crate::harness::AgentProcess::new(dir.path());
    a.start().await;
    a.post_job(
        json!({ "ID": "sig", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "raw_exec", "KillTimeout": 30_000_000_000u64,
            "Config": { "command": "/bin/sh", "args": ["-c",
                "trap 'echo got HUP' HUP; echo ready; while true; do sleep 0.1; done"] } }] }] }),
    )
    .await;
    let allocs = a
        .wait_allocs("sig", |l| {
            l.len() == 1 && l[0]["TaskStates"]["t"]["State"] == "running"
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !a.stdout(&id, "t").await.contains("ready") {
        assert!(
            Instant::now() < deadline,
            "the task never said it was ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = a
        .http
        .post(a.url(&format!("/v1/client/allocation/{id}/signal")))
        .json(&json!({ "Task": "t", "Signal": "SIGHUP" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let out = a.stdout(&id, "t").await;
        if out.contains("got HUP") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the task's trap on SIGHUP never ran (the signal is still ignored): {out:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Stopped with SIGINT, its default action ends it well within the 30 s kill timeout.
    let stopped = Instant::now();
    a.http
        .delete(a.url("/v1/job/sig"))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    a.wait_allocs("sig", |l| {
        l.len() == 1 && l[0]["TaskStates"]["t"]["State"] == "dead"
    })
    .await;
    assert!(
        stopped.elapsed() < Duration::from_secs(10),
        "SIGINT did not stop the task: it took {:?}",
        stopped.elapsed()
    );
    a.kill9();
    let _ = executor.kill();
    let _ = executor.wait();
}
