//! Asked to stop (SIGTERM, as `systemctl stop` or `docker stop` send, or SIGINT), the agent
//! says so, stops taking work, flushes its state DB, leaves its tasks running as Nomad's
//! client does and exits 0 within a bound; a second signal exits at once.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{AgentProcess, alive, pid_in};

fn sleeper(id: &str) -> Value {
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sh", "args": ["-c", "echo $$ > local/pid; exec sleep 600"] } }] }] })
}

async fn running_pid(agent: &AgentProcess, job: &str) -> (String, u32) {
    let running = |a: &[Value]| a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "running";
    let allocs = agent.wait_allocs(job, running).await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let pid_file = agent.dir.join("data/alloc").join(&id).join("t/local/pid");
    (id, pid_in(&pid_file).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_and_sigint_stop_the_agent_cleanly_and_leave_tasks_running() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    agent.post_job(sleeper("held")).await;
    let (id, pid) = running_pid(&agent, "held").await;
    for signal in ["TERM", "INT"] {
        let asked = Instant::now();
        let status = agent.stop_by(signal);
        let took = asked.elapsed();
        assert_eq!(
            status.code(),
            Some(0),
            "SIG{signal}: {status:?}\n{}",
            agent.log()
        );
        assert!(took < Duration::from_secs(10), "SIG{signal} took {took:?}");
        let log = agent.log();
        let last_run = &log[log.rfind("agent started").unwrap()..];
        assert!(last_run.contains(&format!("SIG{signal}")), "{last_run}");
        assert!(last_run.contains("stopping: no new work"), "{last_run}");
        assert!(last_run.contains("state DB flushed"), "{last_run}");
        // The task outlived its agent, and the next agent finds it where it was.
        assert!(alive(pid), "SIG{signal}: the task died with the agent");
        agent.start().await;
        assert_eq!(running_pid(&agent, "held").await, (id.clone(), pid));
    }
}

/// A started agent with an event stream open (a stream never ends by itself, so a stop
/// waits its grace for it), sent one SIGTERM.
async fn stopping_agent() -> (AgentProcess, tempfile::TempDir, reqwest::Response) {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    let stream = agent
        .http
        .get(agent.url("/v1/event/stream"))
        .send()
        .await
        .unwrap();
    assert!(stream.status().is_success());
    std::process::Command::new("kill")
        .args(["-TERM", &agent.pid().to_string()])
        .status()
        .unwrap();
    (agent, dir, stream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once() {
    // The first signal waits for the stream (its grace); the second one cuts that short.
    let (mut agent, _dir, stream) = stopping_agent().await;
    let asked = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let status = agent.stop_by("TERM");
    let took = asked.elapsed();
    assert_eq!(status.code(), Some(1), "{status:?}\n{}", agent.log());
    assert!(
        took < Duration::from_secs(3),
        "the second signal took {took:?}"
    );
    assert!(
        agent.log().contains("second signal: exiting now"),
        "{}",
        agent.log()
    );
    drop(stream);
}

/// `timeout` (as README's first command uses it) passes its signal to the agent and then to
/// its whole process group, and a shell's job control may do the same: the agent gets the
/// signal twice, milliseconds apart. That is one request to stop cleanly, not a second one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_delivered_twice_at_once_is_one_clean_stop() {
    // The stream holds the stop for its grace: the second delivery finds the agent stopping.
    let (mut agent, _dir, stream) = stopping_agent().await;
    // Apart enough that the first was taken before the second came (the kernel merges a
    // signal sent while the same one is still pending).
    tokio::time::sleep(Duration::from_millis(20)).await;
    let status = agent.stop_by("TERM");
    let log = agent.log();
    assert_eq!(status.code(), Some(0), "{status:?}\n{log}");
    assert!(log.contains("state DB flushed"), "{log}");
    assert!(!log.contains("second signal: exiting now"), "{log}");
    drop(stream);
}
