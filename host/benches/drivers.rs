//! Driver lifecycles side by side in one run:
//! - `mock/component` vs `mock/native`: start + wait + destroy of a mock task that exits at
//!   once, through the component, and the same logic as plain Rust in-process (the floor);
//! - `raw_exec/component` vs `raw_exec/std`: `/bin/true` from start to exit through the
//!   raw_exec component and the host `process` capability (a child of this process), and a
//!   bare spawn-and-wait; `raw_exec/component_executor` is the agent's path, through the task
//!   executor with the process recorded in a state DB.
//!
//! - `isolation/raw_exec` vs `isolation/exec` vs `isolation/std`: `/bin/true` from start to
//!   exit through the task executor, plain (raw_exec) and isolated (exec: PID, IPC, UTS and
//!   mount namespaces, chroot with the default chroot_env, nobody, a cgroup with limits,
//!   released after), beside a bare spawn-and-wait: the cost of isolation. Needs root and
//!   cgroups; skipped otherwise. `isolation/start/raw_exec` vs `isolation/start/exec`: the
//!   same, timing start→running only (until `start` returns with the process running).
//!
//! Run: `cargo bench -p paddock --bench drivers`. Quote medians and ratios.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use paddock::drivermanager::types::{
    ExitResult, LogConfig, TaskConfig, TaskHandle, TaskResources, WaitStatus,
};
use paddock::drivermanager::{Driver, DriverManager};
use paddock::pluginhost::{PluginHost, PluginHostOptions};
use paddock::runtime::{ComponentSettings, Grants};
use serde_json::{Value, json};

fn task_config(driver_config: Value, dir: &str) -> TaskConfig {
    TaskConfig {
        id: "a/t/12345678".into(),
        name: "t".into(),
        alloc_id: "a".into(),
        job_id: "j".into(),
        job_name: "j".into(),
        group_name: "g".into(),
        namespace: "default".into(),
        node_id: "n".into(),
        node_name: "n".into(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        device_env: vec![],
        user: String::new(),
        resources: TaskResources {
            cpu_mhz: 100,
            memory_mb: 64,
            memory_max_mb: 0,
        },
        driver_config: driver_config.to_string(),
        alloc_dir: dir.into(),
        task_dir: dir.into(),
        stdout_path: format!("{dir}/t.stdout"),
        stderr_path: format!("{dir}/t.stderr"),
        logs: LogConfig {
            max_files: 2,
            max_file_size_mb: 10,
        },
        kill_signal: "SIGINT".into(),
        kill_timeout_ns: 5_000_000_000,
        mounts: vec![],
        devices: vec![],
    }
}

/// Wait as the task runner does: ask, then sleep on the wake conditions.
async fn run_to_exit(dm: &DriverManager, d: &Driver, h: &TaskHandle) -> ExitResult {
    loop {
        match d.wait(h.clone()).await.unwrap() {
            WaitStatus::Exited(r) => return r,
            WaitStatus::Pending(w) => {
                if let Some(mut rx) = w
                    .processes
                    .first()
                    .and_then(|id| dm.process_exit_watch(*id))
                {
                    let _ = rx.wait_for(|e| e.is_some()).await;
                } else {
                    tokio::time::sleep(Duration::from_nanos(w.after_ns.unwrap_or(1_000_000))).await;
                }
            }
        }
    }
}

/// The mock's start/wait/destroy logic for a task that exits at once, in plain Rust: called
/// directly (the floor), and as a [`NativeDriver`] behind the driver manager's own path.
mod native_mock {
    use super::*;
    use futures::future::BoxFuture;
    use paddock::drivermanager::native::NativeDriver;
    use paddock::drivermanager::types::{DriverError, Failure, WakeOn};

    fn failed(e: impl std::fmt::Display) -> DriverError {
        DriverError::Failed(Failure {
            message: e.to_string(),
            recoverable: false,
        })
    }

    pub fn start(cfg: &TaskConfig) -> Result<TaskHandle, DriverError> {
        let config: serde_json::Map<String, Value> =
            serde_json::from_str(&cfg.driver_config).map_err(failed)?;
        for k in config.keys() {
            if !matches!(
                k.as_str(),
                "run_for" | "exit_code" | "exit_signal" | "exit_err_msg"
            ) {
                return Err(failed(format!("{k}: unknown field")));
            }
        }
        let state = json!({
            "started_at": paddock::util::now_nanos(),
            "run_for": config.get("run_for").and_then(Value::as_str).and_then(paddock::util::parse_duration).map(|d| d.as_nanos() as u64).unwrap_or(0),
            "exit_code": config.get("exit_code").and_then(Value::as_i64).unwrap_or(0),
        });
        Ok(TaskHandle {
            version: 1,
            task_id: cfg.id.clone(),
            driver_state: serde_json::to_vec(&state).unwrap(),
        })
    }

    pub fn wait(h: &TaskHandle) -> Result<WaitStatus, DriverError> {
        let s: Value = serde_json::from_slice(&h.driver_state).map_err(failed)?;
        let end = s["started_at"].as_u64().unwrap_or(0) + s["run_for"].as_u64().unwrap_or(0);
        let now = paddock::util::now_nanos();
        if now >= end {
            Ok(WaitStatus::Exited(ExitResult {
                exit_code: s["exit_code"].as_i64().unwrap_or(0) as i32,
                signal: 0,
                oom_killed: false,
                err: None,
            }))
        } else {
            Ok(WaitStatus::Pending(WakeOn {
                processes: vec![],
                after_ns: Some(end - now),
                handle: None,
            }))
        }
    }

    pub fn destroy(h: &TaskHandle) -> Result<(), DriverError> {
        let _: Value = serde_json::from_slice(&h.driver_state).map_err(failed)?;
        Ok(())
    }

    /// The same logic behind the driver manager's path.
    pub struct NativeMock;

    impl NativeDriver for NativeMock {
        fn start(&self, cfg: TaskConfig) -> BoxFuture<'_, Result<TaskHandle, DriverError>> {
            Box::pin(async move { start(&cfg) })
        }
        fn wait(&self, h: TaskHandle) -> BoxFuture<'_, Result<WaitStatus, DriverError>> {
            Box::pin(async move { wait(&h) })
        }
        fn destroy(&self, h: TaskHandle, _force: bool) -> BoxFuture<'_, Result<(), DriverError>> {
            Box::pin(async move { destroy(&h) })
        }
    }
}

/// A driver manager over a runtime with the mock and raw_exec drivers loaded; `reuse`
/// overrides `instance_reuse`.
fn load_drivers(tokio: &tokio::runtime::Runtime, reuse: Option<u32>) -> Arc<DriverManager> {
    let mut settings = BTreeMap::new();
    settings.insert(
        "raw_exec".to_string(),
        ComponentSettings {
            grants: Grants {
                process: vec!["*".into()],
                ..Default::default()
            },
            instance_reuse: reuse,
            ..Default::default()
        },
    );
    settings.insert(
        "exec".to_string(),
        ComponentSettings {
            grants: Grants {
                process: vec!["*".into()],
                isolation: true,
                ..Default::default()
            },
            instance_reuse: reuse,
            ..Default::default()
        },
    );
    settings.insert(
        "mock".to_string(),
        ComponentSettings {
            instance_reuse: reuse,
            ..Default::default()
        },
    );
    let host = PluginHost::build(PluginHostOptions {
        settings,
        ..Default::default()
    })
    .unwrap();
    tokio.block_on(async {
        for a in [
            guest_artifacts::MOCK_DRIVER,
            guest_artifacts::RAW_EXEC_DRIVER,
            guest_artifacts::EXEC_DRIVER,
        ] {
            host.load_built_in(&a).await.unwrap();
        }
    });
    host.drivers
}

fn benches(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dm = load_drivers(&tokio, None);
    // The same components, every call in a fresh store (`instance_reuse = 1`).
    let dm_fresh = load_drivers(&tokio, Some(1));
    let dir = tempfile::tempdir().unwrap();
    let dir_s = dir.path().display().to_string();

    let mut g = c.benchmark_group("mock");
    let mock = dm.dispense("mock").unwrap();
    let cfg = task_config(json!({"run_for": "0s", "exit_code": 0}), &dir_s);
    g.bench_function("component", |b| {
        b.to_async(&tokio).iter(|| async {
            let h = mock.start(cfg.clone(), None).await.unwrap();
            let r = run_to_exit(&dm, &mock, &h).await;
            mock.destroy(h, false).await.unwrap();
            r
        })
    });
    let mock_fresh = dm_fresh.dispense("mock").unwrap();
    g.bench_function("component_fresh_store", |b| {
        b.to_async(&tokio).iter(|| async {
            let h = mock_fresh.start(cfg.clone(), None).await.unwrap();
            let r = run_to_exit(&dm_fresh, &mock_fresh, &h).await;
            mock_fresh.destroy(h, false).await.unwrap();
            r
        })
    });
    g.bench_function("native", |b| {
        b.iter(|| {
            let h = native_mock::start(&cfg).unwrap();
            let r = native_mock::wait(&h).unwrap();
            native_mock::destroy(&h).unwrap();
            r
        })
    });
    let native = dm.native_driver("native-mock", Arc::new(native_mock::NativeMock));
    g.bench_function("native_same_path", |b| {
        b.to_async(&tokio).iter(|| async {
            let h = native.start(cfg.clone(), None).await.unwrap();
            let r = run_to_exit(&dm, &native, &h).await;
            native.destroy(h, false).await.unwrap();
            r
        })
    });
    g.finish();
    compare_sandbox(
        &tokio,
        [
            ("component", &dm, &mock),
            ("component_fresh_store", &dm_fresh, &mock_fresh),
            ("native_same_path", &dm, &native),
        ],
        &cfg,
    );

    let mut g = c.benchmark_group("raw_exec");
    let raw = dm.dispense("raw_exec").unwrap();
    let cfg = task_config(json!({"command": "/bin/true"}), &dir_s);
    g.bench_function("component", |b| {
        b.to_async(&tokio).iter(|| async {
            let h = raw.start(cfg.clone(), None).await.unwrap();
            let r = run_to_exit(&dm, &raw, &h).await;
            raw.destroy(h, false).await.unwrap();
            assert_eq!(r.exit_code, 0);
        })
    });
    // The agent's path: the process starts under the task executor and is recorded in a
    // state DB, so that it outlives the agent.
    let dm_exec = load_drivers(&tokio, None);
    let exec_dir = tempfile::tempdir().unwrap();
    dm_exec.services().processes.use_executor(
        paddock::executor::client::ExecutorConfig {
            program: env!("CARGO_BIN_EXE_agent").into(),
            socket: exec_dir.path().join("executor.sock"),
            dir: exec_dir.path().join("executor"),
        },
        Arc::new(paddock::state::DbProcessStore(Arc::new(
            paddock::state::MemState::new(),
        ))),
    );
    let raw_exec = dm_exec.dispense("raw_exec").unwrap();
    g.bench_function("component_executor", |b| {
        b.to_async(&tokio).iter(|| async {
            let h = raw_exec.start(cfg.clone(), None).await.unwrap();
            let r = run_to_exit(&dm_exec, &raw_exec, &h).await;
            raw_exec.destroy(h, false).await.unwrap();
            assert_eq!(r.exit_code, 0);
        })
    });
    g.bench_function("std", |b| {
        b.to_async(&tokio).iter(|| async {
            let status = tokio::process::Command::new("/bin/true")
                .status()
                .await
                .unwrap();
            assert!(status.success());
        })
    });
    g.finish();

    // Plain vs isolated, both through the executor, beside a bare spawn.
    if !rustix::process::geteuid().is_root() {
        eprintln!("isolation/*: skipped, isolation needs root");
        return;
    }
    let mut g = c.benchmark_group("isolation");
    g.bench_function("raw_exec", |b| {
        b.to_async(&tokio).iter(|| async {
            let h = raw_exec.start(cfg.clone(), None).await.unwrap();
            let r = run_to_exit(&dm_exec, &raw_exec, &h).await;
            raw_exec.destroy(h, false).await.unwrap();
            assert_eq!(r.exit_code, 0);
        })
    });
    let exec = dm_exec.dispense("exec").unwrap();
    let mut exec_cfg = cfg.clone();
    exec_cfg.task_dir = format!("{dir_s}/t");
    exec_cfg.alloc_dir = format!("{dir_s}/alloc");
    for d in [&exec_cfg.task_dir, &exec_cfg.alloc_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    g.bench_function("exec", |b| {
        b.to_async(&tokio).iter(|| async {
            let h = exec.start(exec_cfg.clone(), None).await.unwrap();
            let r = run_to_exit(&dm_exec, &exec, &h).await;
            exec.destroy(h, false).await.unwrap();
            assert_eq!(r.exit_code, 0, "{r:?}");
        })
    });
    g.bench_function("std", |b| {
        b.to_async(&tokio).iter(|| async {
            let status = tokio::process::Command::new("/bin/true")
                .status()
                .await
                .unwrap();
            assert!(status.success());
        })
    });
    // Start→running alone: the clock stops when `start` returns, once the process runs
    // (exec'd, confined); waiting for the exit and destroying are not timed.
    for (name, d, c) in [
        ("start/raw_exec", &raw_exec, &cfg),
        ("start/exec", &exec, &exec_cfg),
    ] {
        let dm = &dm_exec;
        g.bench_function(name, |b| {
            b.to_async(&tokio).iter_custom(|iters| async move {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let t = std::time::Instant::now();
                    let h = d.start(c.clone(), None).await.unwrap();
                    timed += t.elapsed();
                    let r = run_to_exit(dm, d, &h).await;
                    d.destroy(h, false).await.unwrap();
                    assert_eq!(r.exit_code, 0, "{r:?}");
                }
                timed
            })
        });
    }
    g.finish();
    compare_isolation(&tokio, &dm_exec, [(&raw_exec, &cfg), (&exec, &exec_cfg)]);
}

/// The sandbox's cost per task: a mock task's start + wait + destroy through the same driver
/// path, as a component (warm stores, then a fresh store per call) and as native Rust,
/// alternated task by task so that all three see the same machine; medians, and each
/// component's difference from the native one.
fn compare_sandbox(
    tokio: &tokio::runtime::Runtime,
    drivers: [(&str, &DriverManager, &Driver); 3],
    cfg: &TaskConfig,
) {
    const ROUNDS: usize = 20_000;
    let mut times: [Vec<Duration>; 3] = Default::default();
    tokio.block_on(async {
        for _ in 0..ROUNDS {
            for (i, (_, dm, d)) in drivers.iter().enumerate() {
                let t = std::time::Instant::now();
                let h = d.start(cfg.clone(), None).await.unwrap();
                let r = run_to_exit(dm, d, &h).await;
                d.destroy(h, false).await.unwrap();
                times[i].push(t.elapsed());
                assert_eq!(r.exit_code, 0);
            }
        }
    });
    let medians: Vec<Duration> = times
        .iter_mut()
        .map(|v| {
            v.sort();
            v[v.len() / 2]
        })
        .collect();
    let native = medians[2];
    for (i, (name, _, _)) in drivers.iter().enumerate() {
        eprintln!(
            "mock/compare {name}: {:?} (median of {ROUNDS} alternated rounds), sandbox overhead {:.2} µs",
            medians[i],
            (medians[i].as_secs_f64() - native.as_secs_f64()) * 1e6
        );
    }
}

/// raw_exec and exec alternated, one task each per round, so that both see the same
/// machine (a shared one is noisy over the seconds between two criterion groups): median
/// start→running and start→exit of each, and their ratio.
fn compare_isolation(
    tokio: &tokio::runtime::Runtime,
    dm: &DriverManager,
    drivers: [(&Driver, &TaskConfig); 2],
) {
    const ROUNDS: usize = 400;
    let mut times = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
    tokio.block_on(async {
        for _ in 0..ROUNDS {
            for (i, (d, c)) in drivers.iter().enumerate() {
                let t = std::time::Instant::now();
                let h = d.start((*c).clone(), None).await.unwrap();
                times[i][0].push(t.elapsed());
                let r = run_to_exit(dm, d, &h).await;
                times[i][1].push(t.elapsed());
                d.destroy(h, false).await.unwrap();
                assert_eq!(r.exit_code, 0, "{r:?}");
            }
        }
    });
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    for (phase, what) in ["start→running", "start→exit"].iter().enumerate() {
        let raw = median(&mut times[0][phase]);
        let exec = median(&mut times[1][phase]);
        eprintln!(
            "isolation/compare {what}: raw_exec {raw:?}, exec {exec:?}, exec/raw_exec {:.2}x (medians of {ROUNDS} alternated rounds)",
            exec.as_secs_f64() / raw.as_secs_f64()
        );
    }
}

/// The same `/bin/true` as a whole task through the agent: alloc runner, task runner,
/// events, task-state writes to the state DB (in memory or a redb file), dirs and logs.
fn whole_task(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("raw_exec_task");
    for in_memory in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let agent = tokio
            .block_on(paddock::agent::Agent::start(paddock::agent::AgentOptions {
                data_dir: Some(dir.path().to_path_buf()),
                dev: true,
                in_memory_state: in_memory,
                executor_program: Some(env!("CARGO_BIN_EXE_agent").into()),
                ..Default::default()
            }))
            .unwrap();
        let mut n = 0u64;
        g.bench_function(if in_memory { "agent_mem_state" } else { "agent_redb_state" }, |b| {
            b.to_async(&tokio).iter(|| {
                n += 1;
                let id = format!("true-{n}");
                let agent = agent.clone();
                async move {
                    let job = paddock::jobspec::parse_job_json(
                        json!({"ID": id, "Type": "batch", "TaskGroups": [{"Name": "g", "RestartPolicy": {"Attempts": 0},
                            "Tasks": [{"Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"}}]}]})
                        .to_string()
                        .as_bytes(),
                    )
                    .unwrap();
                    let r = agent.server().register_job(job).unwrap();
                    let alloc_id = r.allocs[0].clone();
                    loop {
                        let index = agent.index();
                        let a = agent.allocation(&alloc_id).unwrap();
                        if a.task_states.values().all(|s| s.state == "dead") && a.is_terminal() {
                            assert_eq!(a.client_status, "complete");
                            break;
                        }
                        agent.wait_for_change(index, Duration::from_secs(10)).await;
                    }
                }
            })
        });
    }
    g.finish();
}

criterion_group!(drivers, benches, whole_task);
criterion_main!(drivers);
