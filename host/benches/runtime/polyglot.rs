//! `polyglot/*`: plugins built in other languages (`examples/plugins/`) beside the Rust mock
//! driver and env-inject hook, each measured the same way. Extra component files come from
//! `BENCH_COMPONENTS` (comma-separated paths, e.g. `target/polyglot/py-hook.wasm,
//! target/polyglot/js-driver.wasm`, built by the examples' `build.sh`); without it only the
//! Rust ones run. Per component (`<file>` in the name):
//! - `compile/<file>` and `cached/<file>`: a load without and with the compile cache;
//! - `info_fresh_store/<file>`: `info` in a fresh store (`instance_reuse = 1`: a new
//!   instance per call, so the guest's own start-up counts), `info_warm/<file>` in a warm one;
//! - `task_start/<file>`: what the plugin adds to a task's start: for a driver `start`, the
//!   waits until it exits (a zero-length task) and `destroy`; for a hook one `prestart`;
//! - memory per live instance (printed, not timed): resident memory grown by 16 more live
//!   instances, each having answered `info`, over one already live, divided by 16.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use criterion::Criterion;
use paddock::drivermanager::types::{TaskConfig, WaitStatus};
use paddock::drivermanager::{DriverManager, DriverServices};
use paddock::hookmanager::{HookManager, HookTask};
use paddock::runtime::bindings::v0_1::{driver::DriverPre, hook::HookPre};
use paddock::runtime::context::{CallLimits, ComponentContext};
use paddock::runtime::store::{HostState, add_to_linker, new_store};
use paddock::runtime::{ComponentSettings, ComponentSource, Runtime, RuntimeOptions, World};
use serde_json::json;
use wasmtime::component::{Component, Linker};

/// Live instances the memory figure divides by.
const LIVE: usize = 16;

/// The Rust references, then every file of `BENCH_COMPONENTS`.
fn components() -> Vec<(String, Arc<[u8]>)> {
    let mut all: Vec<(String, Arc<[u8]>)> = [
        guest_artifacts::MOCK_DRIVER,
        guest_artifacts::ENV_INJECT_HOOK,
    ]
    .into_iter()
    .map(|a| (a.file_name.to_string(), Arc::from(a.bytes)))
    .collect();
    let extra = std::env::var("BENCH_COMPONENTS").unwrap_or_default();
    for path in extra.split(',').filter(|p| !p.trim().is_empty()) {
        // Relative paths are the workspace's, where the command is run from.
        let mut file = PathBuf::from(path.trim());
        if file.is_relative() && !file.exists() {
            file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(file);
        }
        let bytes = std::fs::read(&file)
            .unwrap_or_else(|e| panic!("BENCH_COMPONENTS: reading {}: {e}", file.display()));
        let label = file.file_name().unwrap().to_string_lossy().into_owned();
        all.push((label, Arc::from(bytes)));
    }
    all
}

/// A task config a driver runs to an exit at once.
fn zero_task(driver: &str, dir: &str) -> TaskConfig {
    let config = match driver {
        "mock" => json!({"run_for": "0s", "exit_code": 0}),
        "countdown" => json!({"seconds": 0}),
        _ => json!({}),
    };
    TaskConfig {
        id: "bench/t/00000000".into(),
        name: "t".into(),
        alloc_id: "bench".into(),
        job_id: "bench".into(),
        group_name: "g".into(),
        namespace: "default".into(),
        driver_config: config.to_string(),
        alloc_dir: dir.into(),
        task_dir: dir.into(),
        stdout_path: format!("{dir}/t.stdout"),
        stderr_path: format!("{dir}/t.stderr"),
        kill_signal: "SIGINT".into(),
        kill_timeout_ns: 5_000_000_000,
        ..Default::default()
    }
}

/// Resident memory of this process, bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Resident bytes per live instance: LIVE instances, each after one `info`, on the
/// runtime's engine, linker and store, counted after a first one (shared pages) is live.
async fn memory_per_instance(bytes: &[u8], world: World) -> u64 {
    let (engine, _) = paddock::runtime::engine::build(&Default::default()).expect("engine");
    let component = Component::new(&engine, bytes).expect("compiling");
    let mut linker = Linker::<HostState>::new(&engine);
    add_to_linker(&mut linker).expect("linking");
    let pre = linker.instantiate_pre(&component).expect("pre");
    let ctx = Arc::new(ComponentContext {
        name: "bench".into(),
        grants: Default::default(),
        plugin_config: "{}".into(),
        limits: CallLimits::default(),
    });
    let mut live = Vec::new();
    let mut before = 0;
    for i in 0..=LIVE {
        if i == 1 {
            before = rss();
        }
        let (mut store, _) = new_store(
            &engine,
            ctx.clone(),
            None,
            Default::default(),
            std::sync::Arc::new(paddock::runtime::store::MemoryBudget::new(usize::MAX)),
        );
        match world {
            World::Driver => {
                let d = DriverPre::new(pre.clone()).expect("driver world");
                let d = d.instantiate_async(&mut store).await.expect("instance");
                let p = d.paddock_plugin_task_driver();
                p.call_info(&mut store).await.expect("info");
            }
            World::Hook => {
                let h = HookPre::new(pre.clone()).expect("hook world");
                let h = h.instantiate_async(&mut store).await.expect("instance");
                let p = h.paddock_plugin_task_hook();
                p.call_info(&mut store).await.expect("info");
            }
            World::DevicePlugin | World::Check | World::SecretProvider => return 0,
        }
        live.push(store);
    }
    rss().saturating_sub(before) / LIVE as u64
}

pub fn polyglot(c: &mut Criterion) {
    let tokio = super::rt();
    let mut g = c.benchmark_group("polyglot");
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(500));
    let dir = tempfile::tempdir().unwrap();
    let dir_s = dir.path().display().to_string();
    for (label, bytes) in components() {
        let source = || ComponentSource::File(PathBuf::from(&label));
        let uncached = Runtime::new(RuntimeOptions::default()).unwrap();
        g.bench_function(format!("compile/{label}"), |b| {
            b.to_async(&tokio)
                .iter(|| async { uncached.prepare(source(), bytes.clone()).await.unwrap() })
        });
        let cache = tempfile::tempdir().unwrap();
        let cached = |components: BTreeMap<String, ComponentSettings>| {
            let services = DriverServices::new();
            let rt = Runtime::new(RuntimeOptions {
                cache_dir: Some(cache.path().to_path_buf()),
                components,
                services: services.host_services(),
                ..Default::default()
            })
            .unwrap();
            (rt, services)
        };
        let (warm, services) = cached(BTreeMap::new());
        let c = tokio
            .block_on(warm.load(source(), bytes.clone()))
            .unwrap_or_else(|r| panic!("{label}: {r}"));
        g.bench_function(format!("cached/{label}"), |b| {
            b.to_async(&tokio)
                .iter(|| async { warm.prepare(source(), bytes.clone()).await.unwrap() })
        });
        // Settings for a name bind to a file: this one's.
        let reuse_once = ComponentSettings {
            instance_reuse: Some(1),
            file: Some(label.clone()),
            ..Default::default()
        };
        let (fresh, _) = cached([(c.name.clone(), reuse_once)].into());
        let fresh_c = tokio.block_on(fresh.load(source(), bytes.clone())).unwrap();
        g.bench_function(format!("info_fresh_store/{label}"), |b| {
            b.to_async(&tokio)
                .iter(|| async { fresh.info(&fresh_c).await.unwrap() })
        });
        g.bench_function(format!("info_warm/{label}"), |b| {
            b.to_async(&tokio)
                .iter(|| async { warm.info(&c).await.unwrap() })
        });
        match c.world {
            World::Driver => {
                let dm = DriverManager::new(warm.clone(), services);
                let d = dm.dispense(&c.name).unwrap();
                let task = zero_task(&c.name, &dir_s);
                g.bench_function(format!("task_start/{label}"), |b| {
                    b.to_async(&tokio).iter(|| async {
                        let h = d.start(task.clone(), None).await.unwrap();
                        while let WaitStatus::Pending(_) = d.wait(h.clone()).await.unwrap() {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                        d.destroy(h, false).await.unwrap();
                    })
                });
            }
            World::Hook => {
                let hooks = HookManager::new(warm.clone(), &BTreeMap::new());
                let task = HookTask {
                    alloc_id: "bench".into(),
                    job_id: "bench".into(),
                    group_name: "g".into(),
                    task_name: "t".into(),
                    driver: "mock".into(),
                    driver_config: "{}".into(),
                    ..Default::default()
                };
                g.bench_function(format!("task_start/{label}"), |b| {
                    b.to_async(&tokio).iter(|| async {
                        hooks
                            .prestart(&c.name, &task, None, &BTreeMap::new())
                            .await
                            .unwrap()
                    })
                });
            }
            World::DevicePlugin | World::Check | World::SecretProvider => {}
        }
        let per = tokio.block_on(memory_per_instance(&bytes, c.world));
        eprintln!(
            "polyglot/memory_per_instance/{label}: {} KiB resident per live instance ({LIVE} instances)",
            per / 1024
        );
    }
    g.finish();
}
