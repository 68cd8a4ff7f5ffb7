//! The `hostile` fixture driver does, one task config option at a time, what a hostile
//! third-party plugin would. Each attempt is refused or capped with a message naming the
//! component and the limit, the agent's memory stays bounded, and other tasks and the API
//! carry on.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{AgentProcess, all_terminal};

/// An agent process with the hostile driver from a components folder, granted the commands
/// in `<dir>/allowed` and to read `<dir>/readable`, with a 2 s deadline and a 16 MiB memory
/// cap.
async fn hostile_agent(dir: &Path) -> AgentProcess {
    let comps = dir.join("components");
    std::fs::create_dir_all(&comps).unwrap();
    let fixture = guest_artifacts::FIXTURE_HOSTILE;
    std::fs::write(comps.join(fixture.file_name), fixture.bytes).unwrap();
    let root = std::fs::canonicalize(dir).unwrap();
    std::fs::create_dir_all(root.join("readable")).unwrap();
    let cfg = dir.join("agent.hcl");
    std::fs::write(
        &cfg,
        format!(
            "{}plugin \"hostile\" {{\n  file = \"fixture_hostile.wasm\"\n  grant {{\n    read_paths = [\"{root}/readable\"]\n    process = [\"{root}/allowed/*\"]\n  }}\n  limits {{\n    call_timeout = \"2s\"\n    memory_mb = 16\n  }}\n}}\n",
            crate::harness::NODE_DISK,
            root = root.display()
        ),
    )
    .unwrap();
    let mut agent = AgentProcess::new(dir);
    agent.args = vec![
        "--components".into(),
        comps.display().to_string(),
        "--config".into(),
        cfg.display().to_string(),
    ];
    agent.start().await;
    agent
}

/// A batch job of one hostile task (no restarts, no reschedule), with small rotated logs.
fn hostile_job(id: &str, config: Value) -> Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0, "Mode": "fail" },
        "ReschedulePolicy": { "Attempts": 0, "Unlimited": false },
        "Tasks": [{ "Name": "t", "Driver": "hostile", "Config": config,
            "LogConfig": { "MaxFiles": 2, "MaxFileSizeMB": 1 } }] }] })
}

/// The job's one allocation, once terminal.
async fn finished(agent: &AgentProcess, job: &str) -> Value {
    let allocs = agent.wait_allocs(job, all_terminal).await;
    agent.alloc(allocs[0]["ID"].as_str().unwrap()).await
}

/// The messages of the task's `Driver Failure` events.
fn driver_failures(alloc: &Value, task: &str) -> String {
    alloc["TaskStates"][task]["Events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["Type"] == "Driver Failure")
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            format!("{} {}", text("DisplayMessage"), text("DriverError"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every event of every task, one per line, for failure messages.
fn events(alloc: &Value) -> String {
    let mut out = String::new();
    for (task, state) in alloc["TaskStates"].as_object().into_iter().flatten() {
        for e in state["Events"].as_array().into_iter().flatten() {
            out += &format!(
                "{task}: {} {} {}\n",
                e["Type"], e["DisplayMessage"], e["DriverError"]
            );
        }
    }
    out
}

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_driver_reads_and_runs_nothing_it_was_not_granted() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (allowed, outside) = (root.join("allowed"), root.join("outside"));
    for d in [&allowed, &outside] {
        std::fs::create_dir_all(d).unwrap();
        executable(&d.join("tool"), "#!/bin/sh\necho \"ran $0\"\n");
    }
    symlink("/bin/sh", allowed.join("sh")).unwrap();
    symlink(outside.join("tool"), allowed.join("escape")).unwrap();
    let agent = hostile_agent(&root).await;

    // Escapes from the `process` grant: directly, by `..`, through a link in the allowed
    // folder, and through `PATH` (absolute, and relative to the working directory).
    let a = allowed.display();
    let may_not_run = "component \"hostile\" may not run ";
    let spawns = [
        (
            "direct",
            json!({ "spawn": "/bin/sh" }),
            format!("{may_not_run}\"/bin/sh\""),
        ),
        (
            "dots",
            json!({ "spawn": format!("{a}/../outside/tool") }),
            format!("{may_not_run}\"{}\"", outside.join("tool").display()),
        ),
        (
            "link",
            json!({ "spawn": format!("{a}/escape") }),
            "(it resolves to".into(),
        ),
        (
            "path",
            json!({ "spawn": "sh", "spawn_path": a.to_string() }),
            "(it resolves to".into(),
        ),
        // A working dir outside the task's own is refused before anything is looked up.
        (
            "relpath",
            json!({ "spawn": "tool", "spawn_path": ".", "spawn_cwd": outside.display().to_string() }),
            "cwd: component \"hostile\" may run a process only in the task dir".into(),
        ),
    ];
    for (job, config, _) in &spawns {
        agent.post_job(hostile_job(job, config.clone())).await;
    }
    // The control: the allowed command runs, by its own name.
    agent
        .post_job(hostile_job(
            "granted",
            json!({ "spawn": format!("{a}/tool") }),
        ))
        .await;

    // Reads through WASI: a file in the granted folder works; a host path with no preopen,
    // `..` out of the granted folder and a symlink in it to a file outside do not.
    let readable = root.join("readable");
    std::fs::write(readable.join("ok.txt"), "granted\n").unwrap();
    std::fs::write(root.join("secret.txt"), "secret\n").unwrap();
    symlink(root.join("secret.txt"), readable.join("escape")).unwrap();
    let r = readable.display().to_string();
    let reads = [
        format!("{r}/ok.txt"),
        format!("{r}/escape"),
        format!("{r}/../secret.txt"),
        "/etc/hostname".to_string(),
    ];
    agent
        .post_job(hostile_job("reads", json!({ "read_files": reads })))
        .await;

    for (job, _, want) in &spawns {
        let alloc = finished(&agent, job).await;
        assert_eq!(alloc["ClientStatus"], "failed", "{job}: {alloc:#}");
        let said = driver_failures(&alloc, "t");
        assert!(
            said.contains(want.as_str()),
            "{job}: want {want:?} in {said}"
        );
    }
    let granted = finished(&agent, "granted").await;
    assert_eq!(granted["ClientStatus"], "complete", "{}", events(&granted));
    let out = agent.stdout(granted["ID"].as_str().unwrap(), "t").await;
    assert_eq!(out.trim(), format!("ran {a}/tool"));

    let alloc = finished(&agent, "reads").await;
    let out = agent.stdout(alloc["ID"].as_str().unwrap(), "t").await;
    assert!(out.contains(&format!("READ {r}/ok.txt: granted")), "{out}");
    for refused in &reads[1..] {
        assert!(
            out.contains(&format!("REFUSED {refused}: ")),
            "{refused}: {out}"
        );
    }
    assert!(!out.contains(": secret"), "{out}");
    assert!(
        driver_failures(&alloc, "t").contains("read /etc/hostname"),
        "{alloc:#}"
    );
}

/// Resident memory of a process, MiB.
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb >> 10
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floods_loops_and_memory_at_the_cap_are_cut_and_the_agent_stays_well() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let agent = hostile_agent(&root).await;
    let rss_before = rss_mib(agent.pid());

    // Each call's whole deadline: spinning, calling the host in a loop, logging in a loop.
    for (job, config) in [
        ("spin", json!({ "take_deadline": true })),
        ("hostcalls", json!({ "host_call_loop": true })),
        ("logflood", json!({ "log_flood": true })),
    ] {
        agent.post_job(hostile_job(job, config)).await;
    }
    // A gigabyte of task output, 8 MiB a call; memory grown to the cap (three tasks); and
    // a plain task beside them.
    agent
        .post_job(hostile_job("output", json!({ "log_bytes": 1u64 << 30 })))
        .await;
    for i in 0..3 {
        agent
            .post_job(hostile_job(
                &format!("grow{i}"),
                json!({ "grow_memory": true }),
            ))
            .await;
    }
    agent
        .post_job(crate::harness::mock_job(
            "plain",
            json!({ "run_for": "3s" }),
        ))
        .await;

    // The API answers promptly throughout.
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    while started.elapsed() < Duration::from_secs(8) {
        let asked = Instant::now();
        agent.get("/v1/agent/health").await;
        slowest = slowest.max(asked.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(slowest < Duration::from_secs(1), "health took {slowest:?}");

    for job in ["spin", "hostcalls", "logflood"] {
        let alloc = finished(&agent, job).await;
        let said = driver_failures(&alloc, "t");
        assert!(
            said.contains("component \"hostile\" missed its deadline in start")
                && said.contains("still running after 2s"),
            "{job}: {said}"
        );
    }
    // A memory cap is not a failure a restart mends: each task fails at once.
    for i in 0..3 {
        let grow = finished(&agent, &format!("grow{i}")).await;
        assert!(
            driver_failures(&grow, "t").contains(
                "component \"hostile\" exceeded its memory cap in start: memory cap of 16 MiB reached"
            ),
            "{}",
            events(&grow)
        );
    }
    let plain = finished(&agent, "plain").await;
    assert_eq!(plain["ClientStatus"], "complete", "{plain:#}");
    let output = finished(&agent, "output").await;
    assert_eq!(output["ClientStatus"], "complete", "{}", events(&output));

    // Rotation keeps two 1 MiB files of the gigabyte.
    let logs = root
        .join("data/alloc")
        .join(output["ID"].as_str().unwrap())
        .join("alloc/logs");
    let kept: u64 = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(
        kept <= 3 << 20,
        "{kept} bytes of logs kept in {}",
        logs.display()
    );

    // One call's log lines are capped, with one warning naming the component.
    let log = agent.log();
    let flooded = log.matches("hostile: flooding the log").count();
    assert!((1..=1000).contains(&flooded), "{flooded} lines logged");
    assert!(
        log.contains("component logged more than 1000 lines in one call"),
        "no warning"
    );
    let rss_after = rss_mib(agent.pid());
    assert!(
        rss_after < rss_before + 200,
        "agent RSS grew from {rss_before} to {rss_after} MiB"
    );
}
