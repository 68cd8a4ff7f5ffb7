//! The load harness: the real agent (this build's `agent` binary, its redb state in a temp
//! dir, built-in components) driven only through its HTTP API on 127.0.0.1, the way a
//! scheduler drives a Nomad client. It reports:
//!
//! - task starts per second, with jobs of 100 mock tasks and with jobs of 1, from the first
//!   registration until every task runs;
//! - submit → `running` latency p50/p99 of one-task jobs submitted one after another;
//! - agent RSS per running task ((RSS at N running − RSS idle) / N) at each step of
//!   `LOAD_STEPS` running tasks, and the state file's size;
//! - API latency p50/p99 of `GET /v1/allocations` and `GET /v1/allocation/{id}` with the
//!   most tasks running;
//! - after `kill -9` of the agent, the time from starting it again until every allocation
//!   is running again (its tasks reattached): with the mock tasks, and then again with
//!   `LOAD_RAW` (default 1,000) raw_exec `sleep` tasks added, which are real processes;
//!   and on fresh agents with `LOAD_REATTACH` (default 1,000) tasks alone, mock and then
//!   raw_exec `sleep`;
//! - on a fresh agent each: starts per second sustained for `LOAD_SUSTAIN` seconds (default
//!   30) with jobs of 100 and of 1, the state DB's commits, writes and de-duplicated writes
//!   per second meanwhile, and the API's p50/p99 meanwhile (one allocation, a page of the
//!   list, agent/self, every 20 ms);
//! - submit → running p50/p99 of one-task jobs sent at a fixed `LOAD_RATE` (default 1,000
//!   per second) for `LOAD_PACED` seconds (default 10), from the harness's clock at the
//!   send to the time of the task's `Started` event.
//!
//! The steps are drawn as an SVG chart (starts/s and KiB per task against tasks running)
//! at `LOAD_SVG` (default `target/load-chart.svg`).
//!
//! `LOAD_ALLOC_DIR=/dev/shm` builds the allocation dirs there (`client { alloc_dir }`)
//! while the state DB stays in the temp dir: the figures without the data dir's
//! filesystem's cost of creating directories.
//!
//! Run: `cargo bench -p paddock --bench load` (release build). `LOAD_STEPS` sets the steps
//! (default `1000,5000,10000`); `LOAD_STEPS=200,1000 LOAD_SUSTAIN=5 LOAD_PACED=3` is a quick
//! run. Bounded: each step gives up after 120 s; agents are stopped at the end, or killed
//! if the harness panics.

mod agent;
mod chart;
mod sustained;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use agent::{Agent, Client};

/// Tasks per job in the throughput runs.
const JOB_SIZE: u32 = 100;
/// How long one step may take before the harness gives up.
pub(crate) const STEP_LIMIT: Duration = Duration::from_secs(120);

fn raw_job(id: &str, count: u32) -> Value {
    json!({ "Job": { "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g", "Count": count,
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sleep", "args": ["3600"] },
            "Resources": { "CPU": 1, "MemoryMB": 1 } }] }] } })
}

fn job(id: &str, count: u32) -> Value {
    json!({ "Job": { "ID": id, "Type": "service", "TaskGroups": [{ "Name": "g", "Count": count,
        "Tasks": [{ "Name": "t", "Driver": "mock", "Config": { "run_for": "1h" },
            "Resources": { "CPU": 1, "MemoryMB": 1 } }] }] } })
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Register `tasks` tasks as jobs of `size` and time it until all run: starts per second.
/// Only jobs not yet all running are polled, so the polling stays small beside the load.
async fn throughput(
    c: &Client,
    prefix: &str,
    tasks: u32,
    size: u32,
    jobs: &mut Vec<String>,
) -> f64 {
    let t = Instant::now();
    let mut pending = Vec::new();
    for i in 0..tasks.div_ceil(size) {
        let id = format!("{prefix}-{i}");
        c.register(&job(&id, size)).await;
        pending.push(id);
    }
    let added = pending.len() as f64 * f64::from(size);
    let deadline = Instant::now() + STEP_LIMIT;
    while !pending.is_empty() {
        let mut left = Vec::new();
        for id in pending {
            if c.running(&id).await < u64::from(size) {
                left.push(id);
            } else {
                jobs.push(id);
            }
        }
        pending = left;
        assert!(
            Instant::now() < deadline,
            "{} jobs of {prefix} not running after {STEP_LIMIT:?}",
            pending.len()
        );
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    added / t.elapsed().as_secs_f64()
}

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no filter.
    let steps: Vec<u32> = std::env::var("LOAD_STEPS")
        .unwrap_or_else(|_| "1000,5000,10000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut agent = Agent::start();
    let c = Client {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap(),
        base: agent.base.clone(),
    };
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib >> 20);
    eprintln!("load: {cores} cores, {mem_gib} GiB; agent {}", agent.base);
    let _listed = tokio.block_on(async {
        c.wait_ready().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let idle = agent.rss_kib();
        eprintln!("load: idle agent RSS {idle} KiB");

        // Submit → running, one job of one task at a time on an idle agent.
        let mut lat = Vec::new();
        let mut singles = Vec::new();
        for i in 0..100 {
            let id = format!("single-{i}");
            let t = Instant::now();
            c.register(&job(&id, 1)).await;
            loop {
                if c.running(&id).await == 1 {
                    break;
                }
                assert!(t.elapsed() < STEP_LIMIT, "{id} never ran");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            lat.push(t.elapsed());
            singles.push(id);
        }
        eprintln!(
            "load: submit→running, one-task jobs one after another: p50 {:.1} ms, p99 {:.1} ms",
            ms(percentile(&mut lat, 0.5)),
            ms(percentile(&mut lat, 0.99))
        );
        let rate = throughput(&c, "one", 200, 1, &mut singles).await;
        eprintln!(
            "load: 200 one-task jobs registered one after another, then awaited: {rate:.0} starts/s"
        );

        // Throughput and memory per task, step by step.
        let mut points = Vec::new();
        let mut jobs = Vec::new();
        let mut running = 0u32;
        for &step in &steps {
            if step <= running {
                continue;
            }
            let added = step - running;
            let rate = throughput(&c, &format!("s{step}"), added, JOB_SIZE, &mut jobs).await;
            running = step;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let total = running + singles.len() as u32;
            let rss = agent.rss_kib();
            points.push(chart::Point {
                running: f64::from(total),
                starts_per_s: rate,
                kib_per_task: (rss.saturating_sub(idle)) as f64 / f64::from(total),
            });
            eprintln!(
                "load: {total} running: +{added} tasks at {rate:.0} starts/s (jobs of {JOB_SIZE}); RSS {rss} KiB, {:.1} KiB per task; state file {:.1} MiB",
                (rss.saturating_sub(idle)) as f64 / f64::from(total),
                agent.state_bytes() as f64 / f64::from(1 << 20),
            );
        }

        // The API while it holds all of that.
        let mut list = Vec::new();
        for _ in 0..20 {
            let t = Instant::now();
            let v = c.get("/v1/allocations").await;
            list.push(t.elapsed());
            assert!(v.as_array().is_some_and(|a| !a.is_empty()));
        }
        let allocs = c.get("/v1/allocations").await;
        let ids: Vec<String> = allocs
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a["ID"].as_str().map(String::from))
            .collect();
        let mut one = Vec::new();
        for id in ids.iter().step_by((ids.len() / 200).max(1)) {
            let t = Instant::now();
            c.get(&format!("/v1/allocation/{id}")).await;
            one.push(t.elapsed());
        }
        eprintln!(
            "load: with {} allocations: GET /v1/allocations p50 {:.1} ms p99 {:.1} ms; GET /v1/allocation/{{id}} p50 {:.2} ms p99 {:.2} ms",
            ids.len(),
            ms(percentile(&mut list, 0.5)),
            ms(percentile(&mut list, 0.99)),
            ms(percentile(&mut one, 0.5)),
            ms(percentile(&mut one, 0.99)),
        );
        let svg = std::env::var("LOAD_SVG").unwrap_or_else(|_| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/../target/load-chart.svg").into()
        });
        match chart::draw(std::path::Path::new(&svg), &points) {
            Ok(()) => eprintln!("load: chart written to {svg}"),
            Err(e) => eprintln!("load: chart not written: {e}"),
        }
        ids.len()
    });
    let total = tokio.block_on(async {
        let (running, _) = c.running_allocs().await;
        running
    });

    // kill -9 and back: the mock tasks reattach from their stored handles.
    agent.kill9_and_restart();
    let took = tokio.block_on(c.reattach_time(total));
    eprintln!(
        "load: kill -9, restart: all {total} mock allocations running again after {:.2} s",
        took.as_secs_f64()
    );

    // The same with real processes among them: raw_exec sleeps under the task executor.
    let raw: u32 = std::env::var("LOAD_RAW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    if raw > 0 {
        let mut raw_jobs = Vec::new();
        tokio.block_on(async {
            for i in 0..raw.div_ceil(JOB_SIZE) {
                let id = format!("raw-{i}");
                c.register(&raw_job(&id, JOB_SIZE.min(raw))).await;
                raw_jobs.push(id);
            }
            let want = total + raw_jobs.len() * JOB_SIZE.min(raw) as usize;
            let deadline = Instant::now() + STEP_LIMIT;
            while c.running_allocs().await.0 < want {
                assert!(
                    Instant::now() < deadline,
                    "raw_exec tasks did not all start"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let want = total + raw_jobs.len() * JOB_SIZE.min(raw) as usize;
        agent.kill9_and_restart();
        let took = tokio.block_on(c.reattach_time(want));
        eprintln!(
            "load: kill -9, restart: all {want} allocations ({} raw_exec sleep processes) running again after {:.2} s",
            want - total,
            took.as_secs_f64()
        );
        // The sleeps are real processes the executor keeps past the agent: stop them.
        tokio.block_on(async {
            for id in &raw_jobs {
                c.delete(&format!("/v1/job/{id}?purge=true")).await;
            }
            let deadline = Instant::now() + Duration::from_secs(60);
            while c.running_allocs().await.0 > total && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
    }
    drop(agent);

    // Reattach alone: a fresh agent with only LOAD_REATTACH (default 1,000) tasks, mock
    // and then raw_exec `sleep`s, killed with -9 and started again.
    let alone: u32 = std::env::var("LOAD_REATTACH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    if alone > 0 {
        for (kind, make) in [
            ("mock", job as fn(&str, u32) -> Value),
            ("raw_exec sleep", raw_job),
        ] {
            let mut agent = Agent::start();
            let c = Client {
                base: agent.base.clone(),
                ..c.clone()
            };
            let jobs: Vec<String> = (0..alone.div_ceil(JOB_SIZE))
                .map(|i| format!("alone-{i}"))
                .collect();
            let want = jobs.len() * JOB_SIZE.min(alone) as usize;
            tokio.block_on(async {
                c.wait_ready().await;
                for id in &jobs {
                    c.register(&make(id, JOB_SIZE.min(alone))).await;
                }
                let deadline = Instant::now() + STEP_LIMIT;
                while c.running_allocs().await.0 < want {
                    assert!(Instant::now() < deadline, "{kind} tasks did not all start");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            });
            agent.kill9_and_restart();
            let took = tokio.block_on(c.reattach_time(want));
            eprintln!(
                "load: kill -9, restart: {want} {kind} allocations alone running again after {:.2} s",
                took.as_secs_f64()
            );
            tokio.block_on(async {
                for id in &jobs {
                    c.delete(&format!("/v1/job/{id}?purge=true")).await;
                }
                let deadline = Instant::now() + Duration::from_secs(60);
                while c.running_allocs().await.0 > 0 && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            });
        }
    }

    // Held load on a fresh agent: as fast as it takes them for LOAD_SUSTAIN seconds, with
    // jobs of 100 and of 1, then one-task jobs at a fixed LOAD_RATE for submit → running.
    let secs = |name: &str, default: u64| {
        Duration::from_secs(
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default),
        )
    };
    let window = secs("LOAD_SUSTAIN", 30);
    // A fresh agent, and the client pointed at it.
    let fresh = || {
        let agent = Agent::start();
        let c = Client {
            base: agent.base.clone(),
            ..c.clone()
        };
        (agent, c)
    };
    for size in [JOB_SIZE, 1] {
        let (agent, c) = fresh();
        tokio.block_on(async {
            c.wait_ready().await;
            let mut s = sustained::sustained(&c, &format!("held{size}"), size, window).await;
            eprintln!(
                "load: sustained {:.0} s, jobs of {size}: {} tasks at {:.0} starts/s; state DB {:.0} commits/s, {:.0} writes/s, {:.0} de-duplicated/s; RSS {} KiB",
                s.secs,
                s.tasks,
                s.starts_per_s(),
                s.commits_per_s,
                s.writes_per_s,
                s.deduplicated_per_s,
                agent.rss_kib(),
            );
            eprintln!("load:   API meanwhile: {}", s.probe.line());
        });
    }
    let rate: f64 = std::env::var("LOAD_RATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000.0);
    let (_agent, c) = fresh();
    tokio.block_on(async {
        c.wait_ready().await;
        let (mut lat, achieved) =
            sustained::paced(&c, "paced", rate, secs("LOAD_PACED", 10)).await;
        eprintln!(
            "load: one-task jobs sent at {rate:.0}/s ({achieved:.0}/s achieved): submit→running p50 {:.1} ms, p99 {:.1} ms",
            ms(percentile(&mut lat, 0.5)),
            ms(percentile(&mut lat, 0.99)),
        );
    });
}
