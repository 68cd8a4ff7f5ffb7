//! The state DB's write path and restore, on real redb files:
//! - `dedup/on` vs `dedup/off`: the same task-state write again and again (the seed's
//!   BenchmarkWriteDeduplication_On/Off): with de-duplication it skips the transaction.
//! - `group_commit/on` vs `group_commit/off`: 200 task runners (threads) each write one
//!   task-state update; every write durable when it returns. Updates/s = 200 / time.
//! - `group_commit/sustained/*` (printed to stderr): the same 200 writers writing one
//!   update after another for 2 s, group commit on and off: the sustained rate.
//! - `restore/1000_allocs`: agent start with 1,000 running mock allocations in its state
//!   file, until every task is reattached.
//!
//! Run: `cargo bench -p paddock --bench state`. Quote medians and ratios.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use paddock::state::{
    CommitOptions, HookState, KvState, LocalTaskState, RedbBackend, StateDb, StoredHandle,
};
use paddock::structs::TaskState;

fn redb(dir: &std::path::Path, options: CommitOptions) -> KvState<RedbBackend> {
    KvState::with_backend(RedbBackend::open(&dir.join("state.redb")).unwrap(), options)
}

fn local(n: u64) -> LocalTaskState {
    let mut h = HookState::default();
    h.env.insert("N".into(), n.to_string());
    LocalTaskState {
        hooks: vec![("env-inject".into(), h)],
        ..Default::default()
    }
}

fn dedup(c: &mut Criterion) {
    let mut g = c.benchmark_group("dedup");
    for on in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let db = redb(
            dir.path(),
            CommitOptions {
                dedup: on,
                group: true,
            },
        );
        let value = local(1);
        db.put_local_state("a", "t", &value).unwrap();
        g.bench_function(if on { "on" } else { "off" }, |b| {
            b.iter(|| db.put_local_state("a", "t", &value).unwrap())
        });
    }
    g.finish();
}

/// A redb state DB in a temp dir, with de-duplication and group commit `on` or off.
fn group_db(on: bool) -> (tempfile::TempDir, Arc<KvState<RedbBackend>>) {
    let dir = tempfile::tempdir().unwrap();
    let db = redb(
        dir.path(),
        CommitOptions {
            dedup: true,
            group: on,
        },
    );
    (dir, Arc::new(db))
}

fn group_commit(c: &mut Criterion) {
    let mut g = c.benchmark_group("group_commit");
    g.sample_size(10);
    for on in [true, false] {
        let (_dir, db) = group_db(on);
        let mut round = 0u64;
        g.bench_function(if on { "on" } else { "off" }, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    round += 1;
                    // The writers are up and waiting before the clock starts.
                    let go = Arc::new(std::sync::Barrier::new(201));
                    let threads: Vec<_> = (0..200)
                        .map(|i| {
                            let (db, go) = (db.clone(), go.clone());
                            std::thread::spawn(move || {
                                let st = TaskState {
                                    restarts: round,
                                    ..Default::default()
                                };
                                go.wait();
                                db.put_task_state(&format!("alloc-{i}"), "t", &st).unwrap();
                            })
                        })
                        .collect();
                    go.wait();
                    let start = Instant::now();
                    for t in threads {
                        t.join().unwrap();
                    }
                    total += start.elapsed();
                }
                total
            })
        });
    }
    g.finish();
}

/// 200 writers that each write task-state updates one after another for 2 s (each
/// durable when it returns), with group commit on and off, side by side: the sustained
/// rate, printed to stderr (a burst, as `group_commit/*` times, pays two fsyncs where a
/// steady stream pays one per round of writers).
fn group_commit_sustained(_c: &mut Criterion) {
    for on in [true, false] {
        let (_dir, db) = group_db(on);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads: Vec<_> = (0..200)
            .map(|i| {
                let (db, stop) = (db.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        n += 1;
                        let st = TaskState {
                            restarts: n,
                            ..Default::default()
                        };
                        db.put_task_state(&format!("alloc-{i}"), "t", &st).unwrap();
                    }
                    n
                })
            })
            .collect();
        let start = Instant::now();
        std::thread::sleep(Duration::from_secs(2));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        eprintln!(
            "group_commit/sustained/{}: 200 writers, {:.0} durable updates/s",
            if on { "on" } else { "off" },
            total as f64 / start.elapsed().as_secs_f64()
        );
    }
}

fn restore(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // A state file with 1,000 running mock allocations, each with a real mock handle.
    let template = tempfile::tempdir().unwrap();
    let handle = tokio.block_on(async {
        let host = paddock::pluginhost::PluginHost::build(Default::default()).unwrap();
        host.load_built_in(&guest_artifacts::MOCK_DRIVER)
            .await
            .unwrap();
        let dm = host.drivers.clone();
        let mock = dm.dispense("mock").unwrap();
        let cfg = paddock::drivermanager::types::TaskConfig {
            id: "x/t/00000000".into(),
            name: "t".into(),
            alloc_id: "x".into(),
            job_id: "j".into(),
            job_name: "j".into(),
            group_name: "g".into(),
            namespace: "default".into(),
            node_id: "n".into(),
            node_name: "n".into(),
            env: vec![],
            device_env: vec![],
            user: String::new(),
            resources: paddock::drivermanager::types::TaskResources {
                cpu_mhz: 100,
                memory_mb: 64,
                memory_max_mb: 0,
            },
            driver_config: r#"{"run_for": "24h"}"#.into(),
            alloc_dir: "/tmp".into(),
            task_dir: "/tmp".into(),
            stdout_path: String::new(),
            stderr_path: String::new(),
            logs: paddock::drivermanager::types::LogConfig {
                max_files: 1,
                max_file_size_mb: 1,
            },
            kill_signal: "SIGINT".into(),
            kill_timeout_ns: 1_000_000_000,
            mounts: vec![],
            devices: vec![],
        };
        mock.start(cfg, None).await.unwrap()
    });
    {
        let db = paddock::state::RedbState::open(&template.path().join("state.redb")).unwrap();
        let job = paddock::jobspec::parse_job_json(
            br#"{"ID": "many", "Type": "service", "TaskGroups": [{"Name": "g", "Count": 1000,
                "Tasks": [{"Name": "t", "Driver": "mock", "Config": {"run_for": "24h"}}]}]}"#,
        )
        .unwrap();
        db.put_job(&job).unwrap();
        for i in 0..1000u32 {
            let id = format!("{:08x}-0000-4000-8000-{:012x}", i, i);
            let mut alloc: paddock::structs::Allocation =
                serde_json::from_value(serde_json::json!({
                    "ID": id, "Namespace": "default", "EvalID": "e", "Name": format!("many.g[{i}]"),
                    "NodeID": "n", "NodeName": "n", "JobID": "many", "Job": job, "TaskGroup": "g",
                    "DesiredStatus": "run", "DesiredDescription": "", "ClientStatus": "running",
                    "ClientDescription": "", "TaskStates": {}, "CreateIndex": 1, "ModifyIndex": 1,
                    "CreateTime": 0, "ModifyTime": 0
                }))
                .unwrap();
            alloc.index = i;
            db.put_alloc(&alloc).unwrap();
            db.put_task_state(
                &id,
                "t",
                &TaskState {
                    state: paddock::structs::TaskRunState::Running,
                    ..Default::default()
                },
            )
            .unwrap();
            db.put_local_state(
                &id,
                "t",
                &LocalTaskState {
                    handle: Some(StoredHandle {
                        driver: "mock".into(),
                        driver_sha256: String::new(),
                        version: handle.version,
                        task_id: format!("{id}/t/00000000"),
                        driver_state: handle.driver_state.clone(),
                    }),
                    ..Default::default()
                },
            )
            .unwrap();
        }
    }
    let mut g = c.benchmark_group("restore");
    g.sample_size(10);
    let mut keep = Vec::new();
    g.bench_function("1000_allocs", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().unwrap();
                std::fs::copy(
                    template.path().join("state.redb"),
                    dir.path().join("state.redb"),
                )
                .unwrap();
                let start = Instant::now();
                let agent = tokio.block_on(async {
                    let agent = paddock::agent::Agent::start(paddock::agent::AgentOptions {
                        data_dir: Some(dir.path().to_path_buf()),
                        dev: true,
                        executor_program: Some(env!("CARGO_BIN_EXE_agent").into()),
                        // Components come from the compile cache, as on any restart.
                        cache_dir: Some(template.path().join("cache")),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                    while agent.attached_tasks() < 1000 {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    agent
                });
                total += start.elapsed();
                // The agents stay up (their tasks hold the state file) until the end.
                keep.push((agent, dir));
            }
            total
        })
    });
    g.finish();
}

criterion_group!(state, dedup, group_commit, group_commit_sustained, restore);
criterion_main!(state);
