//! The CLI as users run it: the real `agent` binary against a real agent on a loopback
//! port, with nomad's single-dash flags, `NOMAD_ADDR` and `NOMAD_TOKEN`.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::harness::{TestAgent, agent_bin};

mod format;

/// Exit code, stdout and stderr of `agent <args>`.
pub(crate) struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

async fn agent_cmd(args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = tokio::process::Command::new(agent_bin());
    cmd.args(args)
        .env_remove("NOMAD_ADDR")
        .env_remove("NOMAD_TOKEN")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("agent {args:?} did not finish"))
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `agent <args> -address <the test agent>`, nomad style.
pub(crate) async fn cli(t: &TestAgent, args: &[&str]) -> Out {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-address", &t.base]);
    agent_cmd(&all, &[]).await
}

pub(crate) fn write_job(dir: &Path, name: &str, job: Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(&json!({ "Job": job })).unwrap()).unwrap();
    p.display().to_string()
}

/// A service job whose task prints five lines, one line on stderr, then a numbered line
/// every 200 ms, and says when it gets SIGUSR1.
fn chatty_job() -> Value {
    json!({ "ID": "web", "Type": "service", "TaskGroups": [{ "Name": "g",
        "Update": { "MinHealthyTime": 1_000_000_000u64 },
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sh", "args": ["-c",
                "trap 'echo got-usr1' USR1; for i in 1 2 3 4 5; do echo out$i; done; echo err1 >&2; i=6; while true; do echo out$i; i=$((i+1)); sleep 0.2; done"] } }] }] })
}

async fn wait_for(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_and_alloc_commands_drive_a_running_task() {
    let t = TestAgent::start("", vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = write_job(dir.path(), "web.json", chatty_job());

    // validate: good, bad driver config, unknown driver.
    let out = cli(&t, &["job", "validate", &file]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("Job validation successful"), "{out:?}");
    let mut bad = crate::harness::mock_job("bad", json!({ "run_for": "soon" }));
    let bad_file = write_job(dir.path(), "bad.json", bad.clone());
    let out = cli(&t, &["job", "validate", &bad_file]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("Job.TaskGroups[0].Tasks[0].Config.run_for"),
        "{out:?}"
    );
    bad["TaskGroups"][0]["Tasks"][0]["Driver"] = json!("nope");
    let nope = write_job(dir.path(), "nope.json", bad);
    let out = cli(&t, &["job", "validate", &nope]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("Driver: driver \"nope\" is not loaded"),
        "{out:?}"
    );

    // run: progress while it waits, the evaluation, exit 0 once the task runs.
    let out = cli(&t, &["job", "run", &file]).await;
    assert_eq!(out.code, 0, "{out:?}");
    for want in [
        "submitted (evaluation ",
        "finished with status \"complete\"",
        "1 allocation(s) placed",
        "Started",
        "running",
        // The first version's deployment, followed to its end as `nomad job run` does.
        "==> Monitoring deployment",
        "Task Group  Desired  Placed  Healthy  Unhealthy  Progress Deadline",
        "successful",
    ] {
        assert!(out.stdout.contains(want), "{want:?} missing: {out:?}");
    }
    let out = cli(&t, &["deployment", "list"]).await;
    assert!(
        out.stdout.contains("Deployment completed successfully"),
        "{out:?}"
    );
    let out = cli(&t, &["job", "status", "web"]).await;
    assert!(out.stdout.contains("Latest Deployment"), "{out:?}");

    // status and inspect, for people and as JSON.
    let out = cli(&t, &["job", "status"]).await;
    assert!(out.stdout.contains("web"), "{out:?}");
    let out = cli(&t, &["job", "status", "-json", "web"]).await;
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(v[0]["Summary"]["JobID"], "web", "Nomad's JobJson");
    let out = cli(&t, &["job", "inspect", "web"]).await;
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(v["Job"]["TaskGroups"][0]["Tasks"][0]["Driver"], "raw_exec");
    let out = cli(&t, &["job", "inspect", "missing"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("job not found"), "{out:?}");

    let allocs = t.get("/v1/job/web/allocations").await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let prefix = &id[..6];

    // alloc status by prefix.
    let out = cli(&t, &["alloc", "status", prefix]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains(&id), "{out:?}");
    assert!(out.stdout.contains("Task \"t\" is \"running\""), "{out:?}");
    assert!(out.stdout.contains("Started"), "{out:?}");
    let out = cli(&t, &["alloc", "status", "-json", prefix]).await;
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(v["ID"], id.as_str());
    let out = cli(&t, &["alloc", "status", "ffffffffff"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("No allocation(s) with prefix"),
        "{out:?}"
    );

    // logs: whole, stderr, tail by lines and by bytes.
    wait_for("the task's sixth line", async || {
        cli(&t, &["alloc", "logs", prefix])
            .await
            .stdout
            .contains("out6\n")
    })
    .await;
    let out = cli(&t, &["alloc", "logs", prefix, "t"]).await;
    assert!(
        out.stdout
            .starts_with("out1\nout2\nout3\nout4\nout5\nout6\n"),
        "{out:?}"
    );
    let out = cli(&t, &["alloc", "logs", "-stderr", prefix]).await;
    assert_eq!(out.stdout, "err1\n", "{out:?}");
    let out = cli(&t, &["alloc", "logs", "-tail", "-n", "2", prefix]).await;
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{out:?}");
    assert!(lines.iter().all(|l| l.starts_with("out")), "{out:?}");
    let out = cli(
        &t,
        &["alloc", "logs", "-tail", "-c", "5", "-stderr", prefix],
    )
    .await;
    assert_eq!(out.stdout, "err1\n", "{out:?}");
    let out = cli(&t, &["alloc", "logs", prefix, "nosuch"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("has no task \"nosuch\""), "{out:?}");

    // logs -f keeps printing what the task writes after the command started; alone it
    // follows both streams, stderr to stderr.
    let now = cli(&t, &["alloc", "logs", prefix]).await.stdout;
    let last: u32 = now
        .lines()
        .filter_map(|l| l.strip_prefix("out")?.parse().ok())
        .max()
        .unwrap();
    let mut follow = tokio::process::Command::new(agent_bin())
        .args(["alloc", "logs", "-f", "-address", &t.base, prefix])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(follow.stdout.take().unwrap()).lines();
    let target = format!("out{}", last + 5);
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            if l == target {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(seen, Ok(true), "-f never printed {target}");
    follow.kill().await.unwrap();
    let mut err = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut follow.stderr.take().unwrap(), &mut err)
        .await
        .unwrap();
    assert_eq!(err, "err1\n", "stderr, followed");

    // signal reaches the task (its trap prints), restart restarts it, stop stops it.
    let out = cli(&t, &["alloc", "signal", "-s", "SIGUSR1", prefix, "t"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("Sent SIGUSR1"), "{out:?}");
    wait_for("the task's trap", async || {
        cli(&t, &["alloc", "logs", prefix])
            .await
            .stdout
            .contains("got-usr1")
    })
    .await;
    let out = cli(&t, &["alloc", "restart", prefix]).await;
    assert_eq!(out.code, 0, "{out:?}");
    wait_for("Restart Signaled", async || {
        crate::harness::event_types(&t.get(&format!("/v1/allocation/{id}")).await, "t")
            .contains(&"Restart Signaled".to_string())
    })
    .await;
    let out = cli(&t, &["alloc", "stop", prefix]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("stopping (evaluation "), "{out:?}");
    wait_for("the allocation to stop", async || {
        let a = t.get(&format!("/v1/allocation/{id}")).await;
        a["DesiredStatus"] == "stop" && a["TaskStates"]["t"]["State"] == "dead"
    })
    .await;
    let out = cli(&t, &["job", "stop", "-purge", "web"]).await;
    assert_eq!(out.code, 0, "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_and_component_commands() {
    let t = TestAgent::start("", vec![]).await;
    let out = cli(&t, &["node", "status"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let node_id = t.agent.node().id;
    assert!(out.stdout.contains(&node_id[..8]), "{out:?}");
    let out = cli(&t, &["node", "status", "-self"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    for want in [
        node_id.as_str(),
        "Drivers",
        "raw_exec",
        "Devices",
        "paddock/mock/mock-device",
        "2/2",
    ] {
        assert!(out.stdout.contains(want), "{want:?} missing: {out:?}");
    }
    let out = cli(&t, &["node", "status", "-json", &node_id[..5]]).await;
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(v["Drivers"]["mock"]["Healthy"], true);

    let out = cli(&t, &["component", "list"]).await;
    assert!(out.stdout.contains("raw_exec"), "{out:?}");
    // A loaded component: what it was granted, and which grants its imports can use.
    let out = cli(&t, &["component", "inspect", "raw_exec"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("World        = driver"), "{out:?}");
    assert!(out.stdout.contains("Grants used  = process"), "{out:?}");
    // A file, before it is ever loaded.
    let dir = tempfile::tempdir().unwrap();
    let a = guest_artifacts::TEMPLATE_HOOK;
    let file = dir.path().join(a.file_name);
    std::fs::write(&file, a.bytes).unwrap();
    let out = agent_cmd(
        &["component", "inspect", "-json", &file.display().to_string()],
        &[],
    )
    .await;
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(v["World"], "hook");
    assert_eq!(v["Name"], "template");
    let grants: Vec<&str> = v["GrantsUsed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_str().unwrap())
        .collect();
    assert!(grants.contains(&"task_dir"), "{v:#}");
    assert!(grants.contains(&"variables"), "{v:#}");
    assert!(!grants.contains(&"process"), "{v:#}");
    // The compile is a long step: it says so on stderr, and how long it took.
    assert!(
        out.stderr.contains("Compiling ") && out.stderr.contains(" kB)…"),
        "{out:?}"
    );
    assert!(out.stderr.contains("done in "), "{out:?}");
    let out = cli(&t, &["component", "inspect", "no-such-thing"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("neither a file nor a component"),
        "{out:?}"
    );
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"\0asm\x01\0\0\0").unwrap();
    let out = agent_cmd(&["component", "validate", &junk.display().to_string()], &[]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("core WebAssembly module"), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_takes_the_address_and_token_from_flags_or_nomad_env() {
    let t = TestAgent::start("acl {\n  token = \"s3cret\"\n}\n", vec![]).await;
    let out = cli(&t, &["job", "status"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("403"), "{out:?}");
    let out = cli(&t, &["job", "status", "-token", "s3cret"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let out = agent_cmd(
        &["node", "status"],
        &[("NOMAD_ADDR", &t.base), ("NOMAD_TOKEN", "s3cret")],
    )
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("ready"), "{out:?}");
    let out = agent_cmd(&["node", "status"], &[("NOMAD_ADDR", &t.base)]).await;
    assert_eq!(out.code, 1, "{out:?}");
}

/// Start `agent run --dev` with `extra` flags; wait for its API; return its stderr lines.
async fn run_agent_and_collect_logs(extra: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bind = format!("127.0.0.1:{port}");
    let data = dir.path().join("data");
    let cache = crate::harness::shared_cache_dir();
    let mut args = vec![
        "run",
        "--dev",
        "--data-dir",
        data.to_str().unwrap(),
        "--bind",
        &bind,
        "--cache-dir",
        cache.to_str().unwrap(),
    ];
    args.extend(extra);
    let mut child = tokio::process::Command::new(agent_bin())
        .args(&args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let health = format!("http://{bind}/v1/agent/health");
    wait_for("the agent's API", async || {
        http.get(&health)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;
    // Stop it as Ctrl-C would, so the shutdown line is logged too.
    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut out = Vec::new();
    while let Ok(Some(l)) = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
    {
        out.push(l);
    }
    let _ = child.wait().await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_json_gives_one_json_object_per_line_and_log_level_filters() {
    let lines = run_agent_and_collect_logs(&["-log-json"]).await;
    assert!(!lines.is_empty());
    let parsed: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    // hclog's keys, as Nomad's log_json writes them.
    let started = parsed
        .iter()
        .find(|v| {
            v["@message"]
                .as_str()
                .is_some_and(|m| m.contains("HTTP API listening"))
        })
        .unwrap_or_else(|| panic!("no start line: {lines:#?}"));
    assert_eq!(started["@level"], "info");
    assert!(
        started["@module"].as_str().unwrap().starts_with("paddock"),
        "{started}"
    );
    assert!(
        started["address"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
    let ts = started["@timestamp"].as_str().unwrap();
    assert!(
        ts.len() == 27 && ts.ends_with('Z') && &ts[10..11] == "T",
        "{ts}"
    );
    assert!(
        parsed
            .iter()
            .all(|v| v["@level"].is_string() && v["@message"].is_string()),
        "{lines:#?}"
    );

    let lines = run_agent_and_collect_logs(&["-log-level", "warn"]).await;
    assert!(
        lines.iter().all(|l| !l.contains("INFO")),
        "info lines at warn level: {lines:#?}"
    );
    let lines = run_agent_and_collect_logs(&[]).await;
    assert!(
        lines
            .iter()
            .any(|l| l.contains("INFO") && l.contains("HTTP API listening")),
        "{lines:#?}"
    );
    assert!(
        serde_json::from_str::<Value>(&lines[0]).is_err(),
        "text by default"
    );
}

/// `agent component call`: one export of a built component by hand, its answer as JSON,
/// the handle `start` printed passed back to `wait`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn component_call_runs_one_export_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mock.wasm");
    std::fs::write(&file, guest_artifacts::MOCK_DRIVER.bytes).unwrap();
    let f = file.to_str().unwrap();
    let json = |o: &Out| -> serde_json::Value {
        serde_json::from_str(o.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {o:?}"))
    };
    let info = agent_cmd(&["component", "call", f, "info"], &[]).await;
    assert_eq!(info.code, 0, "{info:?}");
    assert_eq!(json(&info)["name"], "mock");
    let bad = agent_cmd(
        &[
            "component",
            "call",
            f,
            "validate-config",
            "--json",
            r#"{"run_for": "soon", "colour": "red"}"#,
        ],
        &[],
    )
    .await;
    assert_eq!(bad.code, 1, "{bad:?}");
    let err = json(&bad)["error"].as_str().unwrap().to_string();
    assert!(err.contains("colour") && err.contains("run_for"), "{err}");
    let arg = serde_json::json!({
        "config": {"run_for": "0s", "exit_code": 3},
        "dir": dir.path(),
    })
    .to_string();
    let start = agent_cmd(&["component", "call", f, "start", "--json", &arg], &[]).await;
    assert_eq!(start.code, 0, "{start:?}");
    let handle = start.stdout.trim().to_string();
    assert!(
        json(&start)["task_id"]
            .as_str()
            .unwrap()
            .starts_with("call/task/")
    );
    let wait = agent_cmd(&["component", "call", f, "wait", "--json", &handle], &[]).await;
    assert_eq!(wait.code, 0, "{wait:?}");
    assert_eq!(json(&wait)["exited"]["exit_code"], 3, "{wait:?}");
    let unknown = agent_cmd(&["component", "call", f, "frob"], &[]).await;
    assert_ne!(unknown.code, 0);
    assert!(unknown.stderr.contains("validate-config"), "{unknown:?}");
}

/// `agent job run` settles for every job type as `nomad job run` does, each under the
/// helper's 60 s timeout: a periodic job prints its next launch, a parameterized one its
/// registration, an unchanged job returns at once, a failing service exits 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_run_returns_for_every_job_type() {
    let t = TestAgent::start("", vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let group = |config: Value| {
        json!([{ "Name": "g", "RestartPolicy": { "Attempts": 0, "Mode": "fail" },
            "ReschedulePolicy": { "Attempts": 0, "Unlimited": false },
            "Update": { "MinHealthyTime": 100_000_000u64 },
            "Tasks": [{ "Name": "t", "Driver": "mock", "Config": config }] }])
    };
    let periodic = write_job(
        dir.path(),
        "cron.json",
        json!({ "ID": "cron", "Type": "batch",
        "Periodic": { "Enabled": true, "Spec": "0 0 1 1 *", "SpecType": "cron" },
        "TaskGroups": group(json!({ "run_for": "10ms" })) }),
    );
    let out = cli(&t, &["job", "run", &periodic]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("Job registration successful"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("Approximate next launch time: "),
        "{out:?}"
    );
    assert!(out.stdout.contains("-01-01T00:00:00Z ("), "{out:?}");

    let param = write_job(
        dir.path(),
        "param.json",
        json!({ "ID": "param", "Type": "batch",
        "ParameterizedJob": { "Payload": "optional" },
        "TaskGroups": group(json!({ "run_for": "10ms" })) }),
    );
    let out = cli(&t, &["job", "run", &param]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.trim().ends_with("Job registration successful"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("next launch"), "{out:?}");

    let svc = write_job(
        dir.path(),
        "svc.json",
        json!({ "ID": "svc", "Type": "service",
        "TaskGroups": group(json!({ "run_for": "1h" })) }),
    );
    // Its deployment ends in a fraction of a second (a blocking query that missed the
    // deployment's last change used to add its whole 10 s wait).
    let t0 = Instant::now();
    let first = cli(&t, &["job", "run", &svc]).await;
    assert!(
        t0.elapsed() < Duration::from_secs(8),
        "{:?} {first:?}",
        t0.elapsed()
    );
    assert_eq!(first.code, 0, "{first:?}");
    let again = cli(&t, &["job", "run", &svc]).await;
    assert_eq!(again.code, 0, "{again:?}");
    assert!(
        again.stdout.contains("No allocation placed or changed"),
        "{again:?}"
    );

    let failing = write_job(
        dir.path(),
        "bad.json",
        json!({ "ID": "bad", "Type": "service",
        "TaskGroups": group(json!({ "run_for": "10ms", "exit_code": 3 })) }),
    );
    let out = cli(&t, &["job", "run", &failing]).await;
    assert_eq!(out.code, 2, "{out:?}");

    // A job for another datacenter is not placed on this node's, and says so.
    let elsewhere = write_job(
        dir.path(),
        "dc2.json",
        json!({ "ID": "dc2", "Type": "batch",
        "Datacenters": ["dc2"], "TaskGroups": group(json!({ "run_for": "10ms" })) }),
    );
    let out = cli(&t, &["job", "run", &elsewhere]).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stdout
            .contains(r#"No nodes are available in datacenter "dc2""#),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("No nodes were eligible for evaluation"),
        "{out:?}"
    );
}

/// A command whose reader went away (`agent job inspect … | head -0`) ends as a Go
/// program's does, by the pipe's signal, and does not panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_pipe_ends_a_command_without_a_panic() {
    let t = TestAgent::start("", vec![]).await;
    t.register(crate::harness::mock_job("j", json!({ "run_for": "10ms" })))
        .await;
    let mut child = std::process::Command::new(agent_bin())
        .args(["job", "inspect", "j", "-address", &t.base])
        .env_remove("NOMAD_ADDR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader is gone before the command writes a byte.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc_sigpipe()),
        "{:?} {stderr}",
        out.status
    );
}

fn libc_sigpipe() -> i32 {
    13
}

/// The commands `nomad` users type, each against a real agent: namespace, var, job
/// plan/dispatch/periodic force/history/revert/scale/allocs/eval, eval, alloc fs, system gc.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_nomad_users_type_drive_a_real_agent() {
    let t = TestAgent::start("", vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let ok = async |args: &[&str]| {
        let out = cli(&t, args).await;
        assert_eq!(out.code, 0, "{args:?}: {out:?}");
        out.stdout
    };

    // Namespaces.
    assert!(
        ok(&["namespace", "apply", "-description", "team x", "team-x"])
            .await
            .contains("Successfully applied")
    );
    let list = ok(&["namespace", "list"]).await;
    assert!(
        list.starts_with("Name") && list.contains("team-x") && list.contains("default"),
        "{list}"
    );
    assert!(
        ok(&["namespace", "status", "team-x"])
            .await
            .contains("Description = team x")
    );

    // Variables.
    assert!(
        ok(&["var", "put", "app/db", "user=admin", "pass=s3cret"])
            .await
            .contains("Created variable \"app/db\"")
    );
    assert_eq!(
        ok(&["var", "get", "-item", "pass", "app/db"]).await.trim(),
        "s3cret"
    );
    let got = ok(&["var", "get", "-out", "table", "app/db"]).await;
    assert!(
        got.contains("Path        = app/db") && got.contains("user = admin"),
        "{got}"
    );
    assert!(ok(&["var", "list", "app/"]).await.contains("app/db"));
    assert!(
        ok(&["var", "purge", "app/db"])
            .await
            .contains("Successfully purged")
    );
    assert!(
        ok(&["var", "list", "-out", "table"])
            .await
            .contains("No matching variables found")
    );

    // A batch job: its allocations, history, a new evaluation, the evaluations, its files.
    let batch = write_job(
        dir.path(),
        "b.json",
        json!({ "ID": "b", "Type": "batch", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "10ms", "stdout_string": "hello\n" } }] }] }),
    );
    ok(&["job", "run", &batch]).await;
    let allocs = ok(&["job", "allocs", "b"]).await;
    assert!(
        allocs.starts_with("ID") && allocs.contains("Task Group") && allocs.contains("complete"),
        "{allocs}"
    );
    assert!(
        ok(&["job", "history", "b"])
            .await
            .contains("Version     = 0")
    );
    assert!(
        ok(&["job", "eval", "b"])
            .await
            .starts_with("Created eval ID: ")
    );
    let evals = ok(&["eval", "list", "-job", "b"]).await;
    assert!(
        evals.contains("Triggered By") && evals.contains("job-register"),
        "{evals}"
    );
    let eval_id = t.get("/v1/job/b/evaluations").await[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        ok(&["eval", "status", &eval_id])
            .await
            .contains("Job ID             = b")
    );
    let alloc = t.get("/v1/job/b/allocations").await[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    let ls = ok(&["alloc", "fs", &alloc[..8], "alloc/logs"]).await;
    assert!(ls.starts_with("Mode") && ls.contains("t.stdout.0"), "{ls}");
    assert_eq!(
        ok(&["alloc", "fs", &alloc, "alloc/logs/t.stdout.0"]).await,
        "hello\n"
    );
    assert!(
        ok(&["alloc", "fs", "-stat", &alloc, "alloc/logs/t.stdout.0"])
            .await
            .contains("t.stdout.0")
    );

    // A service: plan (exit 1 with a change, 0 without), scale, revert.
    let web = |count: u32| {
        json!({ "ID": "web", "Type": "service", "TaskGroups": [{ "Name": "g", "Count": count,
        "Update": { "MinHealthyTime": 100_000_000u64 },
        "Networks": [{ "DynamicPorts": [{ "Label": "http" }] }],
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "1h" } }] }] })
    };
    let one = write_job(dir.path(), "web1.json", web(1));
    ok(&["job", "run", &one]).await;
    // What Nomad's status commands show: the port, the summary, the node's resources.
    let web_alloc = t.get("/v1/job/web/allocations").await[0]["ID"]
        .as_str()
        .unwrap()
        .to_string();
    let st = ok(&["alloc", "status", &web_alloc]).await;
    assert!(
        st.contains("Allocation Addresses:") && st.contains("*http  yes      127.0.0.1:"),
        "{st}"
    );
    let js = ok(&["job", "status", "web"]).await;
    assert!(
        js.contains("Submit Date   = 20") && js.contains("Datacenters   = *"),
        "{js}"
    );
    assert!(
        js.contains("Summary\nTask Group  Queued  Starting  Running"),
        "{js}"
    );
    let submit = js.lines().find(|l| l.starts_with("Submit Date")).unwrap();
    assert!(!submit.contains('.'), "whole seconds: {submit}");
    let node = ok(&["node", "status", "-self"]).await;
    assert!(
        node.contains("Allocated Resources") && node.contains("MHz"),
        "{node}"
    );
    let same = cli(&t, &["job", "plan", &one]).await;
    assert_eq!(same.code, 0, "{same:?}");
    assert!(
        same.stdout.contains("All tasks successfully allocated"),
        "{same:?}"
    );
    let two = write_job(dir.path(), "web2.json", web(2));
    let more = cli(&t, &["job", "plan", &two]).await;
    assert_eq!(more.code, 1, "{more:?}");
    assert!(
        more.stdout.contains("Job Modify Index: ") && more.stdout.contains("Task Group: \"g\""),
        "{more:?}"
    );
    assert!(
        ok(&["job", "scale", "web", "2"])
            .await
            .contains("Job scale successful")
    );
    assert_eq!(t.get("/v1/job/web").await["TaskGroups"][0]["Count"], 2);
    assert!(
        ok(&["job", "revert", "web", "0"])
            .await
            .contains("reverted to version 0")
    );
    assert_eq!(t.get("/v1/job/web").await["TaskGroups"][0]["Count"], 1);

    // Parameterized and periodic jobs: their children, ids with a `/`.
    let param = write_job(
        dir.path(),
        "p.json",
        json!({ "ID": "param", "Type": "batch",
        "ParameterizedJob": { "MetaOptional": ["k"] },
        "TaskGroups": [{ "Name": "g", "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "10ms" } }] }] }),
    );
    ok(&["job", "run", &param]).await;
    let d = ok(&["job", "dispatch", "-meta", "k=v", "param"]).await;
    let child = d
        .lines()
        .find_map(|l| l.strip_prefix("Dispatched Job ID = "))
        .unwrap_or_else(|| panic!("{d}"))
        .to_string();
    assert!(child.starts_with("param/dispatch-"), "{child}");
    assert!(
        ok(&["job", "status", &child])
            .await
            .contains(&format!("ID            = {child}"))
    );
    let cron = write_job(
        dir.path(),
        "c.json",
        json!({ "ID": "cron", "Type": "batch",
        "Periodic": { "Enabled": true, "Spec": "0 0 1 1 *", "SpecType": "cron" },
        "TaskGroups": [{ "Name": "g", "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "10ms" } }] }] }),
    );
    ok(&["job", "run", &cron]).await;
    assert!(
        ok(&["job", "periodic", "force", "cron"])
            .await
            .starts_with("Evaluation ID: ")
    );

    ok(&["system", "gc"]).await;

    // Operator basics: a raw API call with the CLI's address and token, the scheduler.
    let jobs: Value = serde_json::from_str(&ok(&["operator", "api", "/v1/jobs"]).await).unwrap();
    assert!(
        jobs.as_array().unwrap().iter().any(|j| j["ID"] == "web"),
        "{jobs:#}"
    );
    ok(&[
        "operator",
        "api",
        "-X",
        "PUT",
        "-d",
        r#"{"Name":"ops"}"#,
        "/v1/namespace/ops",
    ])
    .await;
    assert_eq!(t.get("/v1/namespace/ops").await["Name"], "ops");
    let missing = cli(&t, &["operator", "api", "/v1/job/nope"]).await;
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(
        ok(&["operator", "scheduler", "get-config"])
            .await
            .contains("Scheduler Algorithm")
    );
}

/// Shell completions for every command, in scripts the shells accept.
#[tokio::test]
async fn completions_cover_the_commands_and_parse_in_their_shell() {
    let bash = agent_cmd(&["completions", "bash"], &[]).await;
    assert_eq!(bash.code, 0, "{bash:?}");
    for word in ["_agent()", "namespace", "dispatch", "periodic", "var"] {
        assert!(bash.stdout.contains(word), "{word} missing");
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("agent.bash");
    std::fs::write(&script, &bash.stdout).unwrap();
    let syntax = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .unwrap();
    assert!(syntax.success(), "bash -n refused the script");
    let zsh = agent_cmd(&["completions", "zsh"], &[]).await;
    assert!(zsh.stdout.starts_with("#compdef agent"), "{zsh:?}");
    let fish = agent_cmd(&["completions", "fish"], &[]).await;
    assert!(fish.stdout.contains("complete -c agent"), "{fish:?}");
}
