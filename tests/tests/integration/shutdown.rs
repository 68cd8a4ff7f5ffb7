//! Asked to stop (SIGTERM, as `systemctl stop` or `docker stop` send, or SIGINT), the agent
//! says so, stops taking work, flushes its state DB, leaves its tasks running as Nomad's
//! client does and exits 0 within a bound; a second signal exits at once. A `--dev` agent
//! stops its allocations instead and leaves nothing behind.

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

/// A `--dev` agent stopped by SIGTERM stops its allocations, and nothing of it remains:
/// no task, no executor, no temporary data dir (Nomad's `-dev` stops its allocations).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dev_agent_leaves_nothing_behind() {
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("dev.hcl");
    std::fs::write(&config, crate::harness::NODE_DISK).unwrap();
    let (agent, base) = dev_agent(&config, |c| {
        c.arg("--cache-dir").arg(crate::harness::shared_cache_dir());
    })
    .await;
    let http = reqwest::Client::new();
    let out = scratch.path().join("task");
    let script = format!(
        "echo $$ > {0}.pid; echo $NOMAD_ALLOC_DIR > {0}.dir; exec sleep 600",
        out.display()
    );
    let job = serde_json::json!({ "Job": { "ID": "left", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sh", "args": ["-c", script] } }] }] } });
    let r = http
        .post(format!("{base}/v1/jobs"))
        .json(&job)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let pid_file = scratch.path().join("task.pid");
    let mut task_pid = 0u32;
    for _ in 0..300 {
        if let Ok(t) = std::fs::read_to_string(&pid_file)
            && let Ok(p) = t.trim().parse()
        {
            task_pid = p;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        task_pid > 0 && crate::harness::alive(task_pid),
        "the task did not start"
    );
    let alloc_dir = std::fs::read_to_string(scratch.path().join("task.dir")).unwrap();
    // <data dir>/alloc/<id>/alloc
    let data_dir = std::path::Path::new(alloc_dir.trim())
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf();
    assert!(data_dir.join("alloc").is_dir(), "{}", data_dir.display());
    let executor = executor_of(&data_dir).expect("the dev agent's executor runs");

    sigterm(agent).await;
    assert!(
        !crate::harness::alive(task_pid),
        "the task outlived the dev agent"
    );
    assert!(!data_dir.exists(), "{} is left", data_dir.display());
    let mut gone = false;
    for _ in 0..100 {
        if !crate::harness::alive(executor) {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(gone, "the executor (pid {executor}) outlived the dev agent");
}

/// The pid of the executor serving `data_dir`, from `/proc`.
fn executor_of(data_dir: &std::path::Path) -> Option<u32> {
    let want = data_dir.display().to_string();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        (cmd.contains(" executor ") && cmd.contains(&want)).then_some(pid)
    })
}

/// Two `--dev` agents one after the other (no data dir, no `--cache-dir`): the second
/// compiles nothing, as the first kept its compilations in the user's cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_dev_agent_compiles_nothing() {
    let home = tempfile::tempdir().unwrap();
    let cache = home.path().join("xdg");
    let dir = cache.join("paddock").join("components");
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&dir)
        .unwrap();
    // What the suite compiled already, so the first agent need not compile it again.
    for e in std::fs::read_dir(crate::harness::shared_cache_dir())
        .unwrap()
        .flatten()
    {
        let _ = std::fs::copy(e.path(), dir.join(e.file_name()));
    }
    let config = home.path().join("dev.hcl");
    std::fs::write(&config, crate::harness::NODE_DISK).unwrap();
    let mut logs = Vec::new();
    for round in 0..2 {
        let log = home.path().join(format!("agent-{round}.log"));
        let (agent, _) = dev_agent(&config, |c| {
            c.env("XDG_CACHE_HOME", &cache)
                .env("HOME", home.path())
                .stderr(std::fs::File::create(&log).unwrap());
        })
        .await;
        sigterm(agent).await;
        logs.push(std::fs::read_to_string(&log).unwrap());
    }
    assert!(
        logs[0].contains("compiling component") || logs[0].contains("cache=Hit"),
        "{}",
        logs[0]
    );
    assert!(
        !logs[1].contains("compiling component"),
        "the second dev agent compiled again:\n{}",
        logs[1]
    );
    assert!(
        std::fs::read_dir(&dir).unwrap().count() >= 8,
        "the user's cache holds the built-ins"
    );
}

/// A `--dev` agent with no data dir of its own, on a free port, with `config` and what
/// `setup` adds to its command; once its API answers: the process and its address.
async fn dev_agent(
    config: &std::path::Path,
    setup: impl FnOnce(&mut std::process::Command),
) -> (std::process::Child, String) {
    let port = std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = std::process::Command::new(crate::harness::agent_bin());
    cmd.args([
        "run",
        "--dev",
        "--bind",
        &format!("127.0.0.1:{port}"),
        "--config",
    ])
    .arg(config)
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    setup(&mut cmd);
    let agent = cmd.spawn().unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let started = Instant::now();
    while !http
        .get(format!("{base}/v1/agent/health"))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the dev agent did not come up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (agent, base)
}

/// SIGTERM `agent` and wait for it to exit 0.
async fn sigterm(mut agent: std::process::Child) {
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(agent.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = tokio::task::spawn_blocking(move || agent.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}
