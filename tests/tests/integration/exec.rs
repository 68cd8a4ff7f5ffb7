//! The exec driver component and the host's isolation: real namespaces, a real chroot and
//! real cgroups (v1 on the test machine), through the agent with its task executor.

use std::time::Duration;

use serde_json::json;

use crate::harness::{AgentProcess, TestAgent, last_terminated};

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
         echo dir=$NOMAD_TASK_DIR; echo hi > /dev/null && echo devnull-ok; \
         echo mine > /local/f && echo local-write-ok; echo ours > /alloc/data/f && echo alloc-write-ok",
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
    assert!(lines.contains(&"local-write-ok"), "{out}");
    assert!(lines.contains(&"alloc-write-ok"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_task_outlives_kill_9_of_the_agent_and_reports_its_exit_after() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    agent
        .post_job(job(
            "survivor",
            64,
            &[
                "-c",
                "i=0; while [ ! -f /local/go ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; exit 3",
            ],
        ))
        .await;
    let allocs = agent
        .wait_allocs("survivor", |a| {
            a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "running"
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let data = dir.path().join("data");
    let procs = || -> Vec<String> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(data.join("executor")).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "cgroups") {
                for d in std::fs::read_to_string(e.path()).unwrap().lines().skip(1) {
                    let p = std::path::Path::new(d).join("cgroup.procs");
                    out.extend(
                        std::fs::read_to_string(p)
                            .unwrap_or_default()
                            .lines()
                            .map(String::from),
                    );
                }
            }
        }
        out
    };
    let before = procs();
    assert!(!before.is_empty(), "the task's cgroup holds no process");
    agent.kill9();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The task's shell (its first process) is still there; its `sleep`s come and go.
    assert!(
        procs().contains(&before[0]),
        "the task did not outlive the agent: {before:?}"
    );
    agent.start().await;
    let a = agent.alloc(&id).await;
    assert_eq!(a["TaskStates"]["t"]["State"], "running", "{a:#}");
    std::fs::write(data.join("alloc").join(&id).join("t/local/go"), "").unwrap();
    agent
        .wait_allocs("survivor", |a| {
            a.len() == 1 && a[0]["ClientStatus"] == "failed"
        })
        .await;
    let a = agent.alloc(&id).await;
    assert_eq!(last_terminated(&a, "t")["ExitCode"], 3, "{a:#}");
    let started = a["TaskStates"]["t"]["Events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["Type"] == "Started")
        .count();
    assert_eq!(started, 1, "started again instead of reattached: {a:#}");
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
    // Its cgroup, as the executor recorded it, holds it, and is gone once it is released.
    let cgroups = cgroup_dirs(&t);
    assert!(
        cgroups
            .iter()
            .any(|d| d.join("memory.limit_in_bytes").exists() || d.join("memory.max").exists()),
        "no memory cgroup recorded: {cgroups:?}"
    );
    assert!(cgroups.iter().all(|d| d.exists()), "{cgroups:?}");
    // `tail` keeps a line it has not ended yet: 200 MB of zeros against a 32 MB limit.
    t.post_job(job(
        "hog",
        32,
        &["-c", "head -c 200m /dev/zero | tail; echo survived"],
    ))
    .await;
    let a = t.finished_alloc("hog").await;
    assert_eq!(a["ClientStatus"], "failed", "{a:#}");
    let ev = last_terminated(&a, "t");
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
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while cgroups.iter().any(|d| d.exists()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the stopped task's cgroup is still there: {cgroups:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The cgroup dirs of the isolated processes the executor runs for `t` (its
/// `<id>.cgroups` records: a version line, then one dir a line).
fn cgroup_dirs(t: &TestAgent) -> Vec<std::path::PathBuf> {
    let dir = t.agent.data_dir().join("executor");
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "cgroups") {
            let text = std::fs::read_to_string(e.path()).unwrap();
            out.extend(text.lines().skip(1).map(std::path::PathBuf::from));
        }
    }
    out
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

#[tokio::test]
async fn a_command_outside_the_chroot_fails_the_task_saying_so() {
    let outside = tempfile::tempdir().unwrap();
    let t = TestAgent::start("", vec![]).await;
    let mut j = job("outside", 64, &[]);
    j["TaskGroups"][0]["Tasks"][0]["Config"]["command"] =
        json!(outside.path().join("run.sh").display().to_string());
    t.post_job(j).await;
    let a = t.finished_alloc("outside").await;
    assert_eq!(a["ClientStatus"], "failed", "{a:#}");
    let events = a["TaskStates"]["t"]["Events"].to_string();
    assert!(events.contains("neither in the chroot"), "{a:#}");
}

#[tokio::test]
async fn a_step_that_fails_in_the_confined_child_fails_the_task_naming_the_step() {
    // /etc/passwd is inside the chroot (chroot_env binds /etc) but cannot be executed: the
    // child gets as far as its exec, which fails after every other step succeeded.
    let t = TestAgent::start("", vec![]).await;
    let mut j = job("noexec", 64, &[]);
    j["TaskGroups"][0]["Tasks"][0]["Config"]["command"] = json!("/etc/passwd");
    t.post_job(j).await;
    let a = t.finished_alloc("noexec").await;
    assert_eq!(a["ClientStatus"], "failed", "{a:#}");
    let events = a["TaskStates"]["t"]["Events"].to_string();
    assert!(
        events.contains("isolating it, exec") && events.contains("ermission denied"),
        "{a:#}"
    );
}

#[tokio::test]
async fn cores_are_reserved_whole_pinned_by_cpuset_and_not_given_twice() {
    // The test machine has 2 cores: a task reserves one, a job then asking for two waits.
    let t = TestAgent::start("", vec![]).await;
    let mut j = job(
        "pinned",
        64,
        &[
            "-c",
            "grep Cpus_allowed_list /proc/self/status; echo cores=$NOMAD_CPU_CORES limit=$NOMAD_CPU_LIMIT; sleep 30",
        ],
    );
    j["TaskGroups"][0]["Tasks"][0]["Resources"] = json!({ "Cores": 1, "MemoryMB": 64 });
    assert_eq!(t.post_job(j).await.status(), 200);
    let allocs = t
        .wait_allocs("pinned", Duration::from_secs(20), |a| {
            a.iter().any(|a| a["ClientStatus"] == "running")
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap();
    let a = t.get(&format!("/v1/allocation/{id}")).await;
    let cpu = &a["AllocatedResources"]["Tasks"]["t"]["Cpu"];
    assert_eq!(cpu["ReservedCores"], json!([0]), "{a:#}");
    let node = t.get("/v1/node/self").await;
    let per_core = node["Attributes"]["cpu.totalcompute"]
        .as_str()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap()
        / 2;
    assert_eq!(cpu["CpuShares"], per_core, "{a:#}");

    // Its output: the kernel's view of the cpuset and the env it was given.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let out = loop {
        let out = stdout(&t, &a);
        if out.contains("cores=") || std::time::Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let allowed = out
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim);
    assert_eq!(allowed, Some("0"), "not pinned to its core: {out}");
    assert!(out.contains(&format!("cores=0 limit={per_core}")), "{out}");

    // Two more cores do not exist while it holds one: the job is blocked on `cores`.
    let mut two = job("two-cores", 64, &["-c", "true"]);
    two["TaskGroups"][0]["Tasks"][0]["Resources"] = json!({ "Cores": 2, "MemoryMB": 64 });
    let eval = t.register(two).await;
    assert_eq!(
        eval["FailedTGAllocs"]["g"]["DimensionExhausted"]["cores"], 1,
        "{eval:#}"
    );

    // Asking for both is refused, naming the field.
    let mut both = job("both", 64, &["-c", "true"]);
    both["TaskGroups"][0]["Tasks"][0]["Resources"] = json!({ "Cores": 1, "CPU": 100 });
    let r = t.post_job(both).await;
    assert_eq!(r.status(), 400);
    let text = r.text().await.unwrap();
    assert!(text.contains("Resources.Cores"), "{text}");
}
