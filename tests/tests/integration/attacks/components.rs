//! What a component is to the host: its name (hole 9), the size of what it answers (11), the
//! memory its calls hold together (12), the tasks its events reach (13), its log lines, its
//! wake-ups and its effect on the breaker (the low ones).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{agent, eventually, failed_saying, finished, job, running, text};

/// Hole 9: a file in the components folder that answers `info()` as `raw_exec` (here a real
/// raw_exec build under another file name) is refused: it gets neither raw_exec's grants
/// nor its running task, which runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_gets_the_grants_of_its_file_never_of_the_name_it_gives() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(&root, "", "").await;
    let mut service = job(
        "running",
        "raw_exec",
        json!({ "command": "/usr/bin/sleep", "args": ["30"] }),
    );
    service["Type"] = json!("service");
    a.post_job(service).await;
    let running_alloc = running(&a, "running").await;
    let impostor = guest_artifacts::restamp(guest_artifacts::RAW_EXEC_DRIVER.bytes, 7, 1, "ok")
        .expect("raw_exec carries a build stamp");
    std::fs::write(root.join("components/evil.wasm"), impostor).unwrap();
    let r: Value = a
        .http
        .post(a.url("/v1/components/reload"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let components = a.get("/v1/components").await;
    let refused = components["Refused"].to_string();
    assert!(
        refused.contains("evil.wasm")
            && refused.contains(
                "it reports the name \\\"raw_exec\\\", whose settings and grants belong to"
            ),
        "{r:#}\n{components:#}"
    );
    let serving = components["Components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["Name"] == "raw_exec")
        .cloned()
        .unwrap_or_default();
    assert!(
        !serving.to_string().contains("evil.wasm"),
        "the impostor serves raw_exec: {serving:#}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let al = a.alloc(&running_alloc).await;
    assert_eq!(
        al["TaskStates"]["t"]["State"],
        "running",
        "{}",
        super::events(&al)
    );
}

/// Hole 11: answers as large as the hostcall fuel allows — a 12 MB error, a 5 MB event with
/// 100,000 details, 10,000 fingerprint attributes of 1 KB — are kept at their caps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_component_answers_is_kept_at_its_caps() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(
        &root, "", "", // the plugin config below replaces nothing of the grant
    )
    .await;
    // The fingerprint's flood comes from the plugin config: reload with it.
    let cfg_file = root.join("attack.hcl");
    let cfg = std::fs::read_to_string(&cfg_file).unwrap().replacen(
        "  limits {\n    call_timeout = \"5s\"",
        "  config {\n    attributes      = 10000\n    attribute_bytes = 1000\n  }\n  limits {\n    call_timeout = \"5s\"",
        1,
    );
    std::fs::write(&cfg_file, cfg).unwrap();
    a.http.post(a.url("/v1/agent/reload")).send().await.unwrap();
    a.post_job(job(
        "error",
        "hostile",
        json!({ "error_bytes": 12_000_000 }),
    ))
    .await;
    a.post_job(job("event", "hostile", json!({ "event_bytes": 5_000_000 })))
        .await;
    let error = finished(&a, "error").await;
    failed_saying(&error, "more bytes cut");
    assert!(
        error.to_string().len() < 200_000,
        "{} bytes",
        error.to_string().len()
    );
    let event = finished(&a, "event").await;
    let ev = event["TaskStates"]["t"]["Events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["Type"] == "Driver")
        .cloned()
        .unwrap_or_else(|| panic!("no Driver event: {}", super::events(&event)));
    assert!(
        ev["DisplayMessage"].as_str().unwrap().len() <= 4200,
        "message"
    );
    assert!(ev["Details"].as_object().unwrap().len() <= 256, "details");
    let all = text(&a, "/v1/allocations").await;
    assert!(
        all.len() < 500_000,
        "/v1/allocations is {} bytes",
        all.len()
    );
    eventually("the fingerprint's flood is capped", async || {
        let node = text(&a, "/v1/node/self").await;
        let v: Value = serde_json::from_str(&node).unwrap();
        let n = v["Drivers"]["hostile"]["Attributes"]
            .as_object()
            .map_or(0, |m| m.len());
        assert!(
            node.len() < 1_000_000,
            "/v1/node/self is {} bytes",
            node.len()
        );
        n == 256
    })
    .await;
}

/// Resident memory of a process, MiB.
fn rss_mib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap()
        >> 10
}

/// Hole 12: 60 concurrent validations (any `read-job` caller may ask) against a driver whose
/// `validate-config` holds 56 MiB for a second. The calls beyond the agent's guest memory
/// budget (256 MiB here) are answered "busy", the agent's memory stays near the budget,
/// and the driver stays healthy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_stay_within_the_guest_memory_budget() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(&root, "", "limits {\n  guest_memory_mb = 256\n}\n").await;
    let pid = a.pid();
    let before = rss_mib(pid);
    let validate = json!({ "Job": job("v", "hostile",
        json!({ "validate_hold_mb": 56, "validate_hold_ms": 1000 })) });
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(before));
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                peak.fetch_max(rss_mib(pid), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let calls: Vec<_> = (0..60)
        .map(|_| {
            let (http, url, body) = (a.http.clone(), a.url("/v1/validate/job"), validate.clone());
            tokio::spawn(async move {
                let r = http.post(url).json(&body).send().await.unwrap();
                r.text().await.unwrap()
            })
        })
        .collect();
    let mut busy = 0;
    for c in calls {
        let text = c.await.unwrap();
        if text.contains("guest memory") {
            busy += 1;
        }
    }
    sampler.abort();
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("60 validations of 56 MiB: agent RSS {before} -> {peak} MiB, {busy} answered busy");
    assert!(
        peak < before + 600,
        "agent RSS went from {before} to {peak} MiB"
    );
    assert!(busy > 0, "no call met the 256 MiB budget");
    let node = a.get("/v1/node/self").await;
    assert_eq!(
        node["Drivers"]["hostile"]["Healthy"], true,
        "{:#}",
        node["Drivers"]["hostile"]
    );
}

/// Low: validations that trap (their memory past the cap), asked by an API caller, do not
/// feed the driver's circuit breaker: six in a row and the driver is still healthy, as the
/// node's own calls alone decide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_caller_cannot_trip_a_drivers_breaker() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(&root, "", "").await;
    let validate = json!({ "Job": job("v", "hostile",
        json!({ "validate_hold_mb": 100, "validate_hold_ms": 1 })) });
    for _ in 0..6 {
        let r = a
            .http
            .post(a.url("/v1/validate/job"))
            .json(&validate)
            .send()
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        assert!(text.contains("exceeded its memory cap"), "{text}");
    }
    let node = a.get("/v1/node/self").await;
    assert_eq!(
        node["Drivers"]["hostile"]["Healthy"], true,
        "{:#}",
        node["Drivers"]["hostile"]
    );
}

/// Hole 13: a driver emitting events for a task another driver runs ("Task OOM-killed by
/// operator", a hundred of them) reaches nobody; the task's own events are its driver's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_s_events_reach_only_the_tasks_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(&root, "", "").await;
    a.post_job(crate::harness::mock_job(
        "victim",
        json!({ "run_for": "3s" }),
    ))
    .await;
    let victim = running(&a, "victim").await;
    a.post_job(job(
        "forger",
        "hostile",
        json!({ "events_to": format!("{victim}/t/00000000") }),
    ))
    .await;
    finished(&a, "forger").await;
    let al = finished(&a, "victim").await;
    assert_eq!(al["ClientStatus"], "complete", "{}", super::events(&al));
    assert!(
        !super::events(&al).contains("OOM-killed by operator"),
        "{}",
        super::events(&al)
    );
}

/// Low: a component's log line holding a newline and an escape cannot forge a line of the
/// agent's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_forges_no_log_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(&root, "", "").await;
    a.post_job(job(
        "forge",
        "hostile",
        json!({ "log_line": "fine\nFORGED-LINE INFO agent: ACL token accepted\u{1b}[2K" }),
    ))
    .await;
    finished(&a, "forge").await;
    let log = a.log();
    assert!(
        log.contains("FORGED-LINE"),
        "the line was not logged at all"
    );
    assert!(
        !log.lines().any(|l| l.starts_with("FORGED-LINE")),
        "a guest's line began a line of the agent's log"
    );
    assert!(!log.contains("\u{1b}[2K"), "the escape reached the log");
}

/// Low: twenty tasks whose `wait` asks to be called again at once, for ever, cost little:
/// a wait is at least 10 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_wait_costs_little() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let a = agent(&root, "", "").await;
    let mut busy = job("busy", "hostile", json!({ "busy": true }));
    busy["TaskGroups"][0]["Count"] = json!(20);
    a.post_job(busy).await;
    a.wait_allocs("busy", |al| {
        al.len() == 20
            && al
                .iter()
                .all(|a| a["TaskStates"]["t"]["State"] == "running")
    })
    .await;
    let ticks = |pid: u32| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let f: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    };
    let (t0, c0) = (Instant::now(), ticks(a.pid()));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cores = (ticks(a.pid()) - c0) as f64 / 100.0 / t0.elapsed().as_secs_f64();
    eprintln!("20 busy waits: {cores:.2} cores");
    assert!(cores < 0.5, "20 busy waits took {cores:.2} cores");
}
