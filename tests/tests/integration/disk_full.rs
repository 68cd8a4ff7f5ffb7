//! A full disk, as a user meets it: the agent's data dir on a 24 MB tmpfs, jobs
//! registered, the disk filled with a file. Registrations are then answered 503 naming
//! the error and start nothing; reads go on; once the file is deleted, writes succeed
//! again without a restart, and after a restart every acknowledged job and allocation is
//! there (the state file opened, so it is not corrupt).
//!
//! Needs root (mount). Where mounting is refused the test says so on stderr and falls back
//! to the state DB alone: the same full disk injected under a real redb file.
//!
//! `PADDOCK_DISK_FULL_HOLD_MS` (default 1000) is how long the disk stays full before the
//! filler goes: the agent's retries back off up to 5 s, so a longer outage shows the
//! slowest recovery.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::AgentProcess;

/// A tmpfs mounted for the test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(path: &Path, size: &str) -> Result<Self, String> {
        std::fs::create_dir_all(path).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(Tmpfs(path.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: a task's process may still hold a file there for a moment.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Write zeros at the end of `path` until the disk refuses: first in 1 MiB blocks, then
/// in 4 KiB, then 512 bytes.
fn fill(path: &Path) -> u64 {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    let mut written = 0u64;
    for block in [1 << 20, 4 << 10, 512] {
        let zeros = vec![0u8; block];
        while f.write_all(&zeros).is_ok() && f.flush().is_ok() {
            written += block as u64;
        }
    }
    let _ = f.sync_all();
    written
}

fn sleeper(id: &str) -> Value {
    json!({ "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g",
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "1h" } }] }] })
}

async fn register(agent: &AgentProcess, id: &str) -> reqwest::Response {
    agent
        .http
        .post(agent.url("/v1/jobs"))
        .json(&json!({ "Job": sleeper(id) }))
        .send()
        .await
        .unwrap()
}

async fn job_ids(agent: &AgentProcess) -> Vec<String> {
    let mut ids: Vec<String> = agent
        .get("/v1/jobs")
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["ID"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

async fn alloc_count(agent: &AgentProcess) -> usize {
    agent.get("/v1/allocations").await.as_array().unwrap().len()
}

async fn running(agent: &AgentProcess, job: &str) {
    agent
        .wait_allocs(job, |a| {
            a.len() == 1 && a[0]["TaskStates"]["t"]["State"] == "running"
        })
        .await;
}

async fn writable_gauge(agent: &AgentProcess) -> f64 {
    let m = agent.get("/v1/metrics").await;
    m["Gauges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["Name"] == "paddock.state.writable")
        .and_then(|g| g["Value"].as_f64())
        .expect("paddock.state.writable in /v1/metrics")
}

/// One outage: fill the disk, register until one is refused (a small write may still fit
/// in the state file's free pages), check the refusal, free the disk; how long from
/// freeing it to the first registration taken. `acked` gets every job acknowledged.
async fn outage(
    agent: &AgentProcess,
    data: &Path,
    round: u32,
    acked: &mut Vec<String>,
) -> Duration {
    let filler = data.join("filler");
    let filled = fill(&filler);
    assert!(filled > 0, "nothing could be written to fill the disk");
    let allocs_before = alloc_count(agent).await;
    let mut refused = None;
    for i in 0..40 {
        let id = format!("full-{round}-{i}");
        let r = register(agent, &id).await;
        if r.status().is_success() {
            acked.push(id);
            continue;
        }
        let status = r.status();
        let retry_after = r.headers().get("Retry-After").cloned();
        let body = r.text().await.unwrap();
        assert_eq!(status, 503, "{id}: {body}");
        assert!(body.contains("No space left on device"), "{body}");
        assert!(retry_after.is_some(), "a 503 without Retry-After");
        refused = Some(id);
        break;
    }
    let refused = refused.expect("40 registrations on a full disk were all taken");
    // Reopening the state file may give some room back: taken again, so the disk stays
    // full until the test frees it.
    fill(&filler);
    let gauge = writable_gauge(agent).await;
    // The next one is refused before it is tried, naming the reason.
    let t = Instant::now();
    let r = register(agent, &format!("full-{round}-again")).await;
    assert_eq!(r.status(), 503);
    assert!(t.elapsed() < Duration::from_secs(1));
    assert!(r.text().await.unwrap().contains("No space left on device"));
    assert_eq!(gauge, 0.0);
    // Reads go on: the jobs, a stored job's versions (read from the file).
    assert!(job_ids(agent).await.contains(&acked[0]));
    let versions = agent
        .http
        .get(agent.url(&format!("/v1/job/{}/versions", acked[0])))
        .send()
        .await
        .unwrap();
    assert!(
        versions.status().is_success(),
        "{}",
        versions.text().await.unwrap()
    );
    // Nothing was started for what was refused, and nothing placed that was not stored.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = agent
        .http
        .get(agent.url(&format!("/v1/job/{refused}/allocations")))
        .send()
        .await
        .unwrap();
    if r.status().is_success() {
        let allocs: Value = r.json().await.unwrap();
        assert_eq!(allocs.as_array().map_or(0, Vec::len), 0, "{allocs}");
    }
    let acked_now = acked
        .iter()
        .filter(|j| j.starts_with(&format!("full-{round}-")))
        .count();
    // A job taken while the disk filled may have no allocation yet: its placement could
    // not be stored, and is made again once the disk is back.
    assert!(alloc_count(agent).await <= allocs_before + acked_now);

    let hold: u64 = std::env::var("PADDOCK_DISK_FULL_HOLD_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    tokio::time::sleep(Duration::from_millis(hold)).await;
    std::fs::remove_file(&filler).unwrap();
    let freed = Instant::now();
    let id = format!("after-{round}");
    loop {
        let r = register(agent, &id).await;
        if r.status().is_success() {
            break;
        }
        assert_eq!(r.status(), 503, "{}", r.text().await.unwrap());
        assert!(
            freed.elapsed() < Duration::from_secs(30),
            "no write taken 30 s after the disk was freed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = freed.elapsed();
    acked.push(id.clone());
    for id in acked.iter() {
        running(agent, id).await;
    }
    assert_eq!(alloc_count(agent).await, acked.len());
    assert_eq!(writable_gauge(agent).await, 1.0);
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_503_starts_nothing_and_recovers_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let _tmpfs = match Tmpfs::mount(&data, "24m") {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "\n!!! disk_full: mounting a 24 MB tmpfs at {} failed ({e}).\n!!! NOT testing a real full disk: \
                 testing an injected `No space left on device` under a real state file instead.\n",
                data.display()
            );
            injected_disk_full_on_a_real_file(dir.path());
            return;
        }
    };
    let mut agent = AgentProcess::new(dir.path());
    agent.start().await;
    let mut acked = Vec::new();
    for i in 0..5 {
        let id = format!("job-{i}");
        agent.post_job(sleeper(&id)).await;
        running(&agent, &id).await;
        acked.push(id);
    }
    let mut took = Vec::new();
    for round in 0..2 {
        took.push(outage(&agent, &data, round, &mut acked).await);
    }
    eprintln!("disk_full: first write taken {took:?} after the disk was freed");
    // One line when an outage begins, one when it ends (a retry may find room, and a
    // later write none, so there may be more than one per filling).
    let log = agent.log();
    let began = log
        .matches("the state DB cannot write: refusing writes")
        .count();
    let ended = log
        .matches("the state DB writes again: writes are taken")
        .count();
    assert!(
        began >= 2 && began == ended,
        "{began} outages, {ended} ends:\n{log}"
    );

    // Every acknowledged job and its allocation are in the file.
    agent.interrupt();
    agent.start().await;
    acked.sort();
    let ids = job_ids(&agent).await;
    for id in &acked {
        assert!(
            ids.contains(id),
            "{id} was acknowledged and is gone: {ids:?}"
        );
        running(&agent, id).await;
    }
    assert_eq!(alloc_count(&agent).await, acked.len());
    agent.interrupt();
}

/// Where no tmpfs can be mounted: a full disk injected under a real state file, the
/// writes refused meanwhile, taken again after, and all acknowledged ones in the file.
fn injected_disk_full_on_a_real_file(dir: &Path) {
    use paddock::state::{CommitOptions, FaultyBackend, KvState, RedbBackend, RedbState, StateDb};
    let path = dir.join("state.redb");
    let state = |i: usize| json!({ "n": i });
    let mut acked = Vec::new();
    {
        let db = KvState::with_backend(
            FaultyBackend::new(RedbBackend::open(&path).unwrap()),
            CommitOptions::default(),
        );
        for i in 0..5 {
            db.put_plugin_state("driver", &format!("p{i}"), &state(i))
                .unwrap();
            acked.push(format!("p{i}"));
        }
        db.backend().io.set_disk_full(true);
        let e = db
            .put_plugin_state("driver", "refused", &state(9))
            .unwrap_err();
        assert!(e.to_string().contains("No space left on device"), "{e}");
        assert!(db.unwritable().is_some());
        assert_eq!(db.plugin_states("driver").unwrap().len(), 5);
        db.backend().io.set_disk_full(false);
        let freed = Instant::now();
        while db.unwritable().is_some() {
            assert!(freed.elapsed() < Duration::from_secs(30));
            std::thread::sleep(Duration::from_millis(5));
        }
        db.put_plugin_state("driver", "p5", &state(5)).unwrap();
        acked.push("p5".into());
    }
    let db = RedbState::open(&path).unwrap();
    let stored = db.plugin_states("driver").unwrap();
    let names: Vec<&String> = stored.keys().collect();
    assert_eq!(names, acked.iter().collect::<Vec<_>>());
}
