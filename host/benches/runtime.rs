//! Hot paths of the component runtime, side by side in one run:
//! - `call/*`: one whole call as the agent makes it — a warm store (or a permit, a fresh
//!   `Store` and an instance from the `InstancePre`), the export call under its deadline —
//!   for each world; `call/driver_info_bare` is the floor beside `call/driver_info`: the same
//!   export as a bare wasmtime typed-function call on an instance that already exists;
//!   `call/driver_info_fresh_store` is the same call in a fresh store (`instance_reuse = 1`),
//!   and `call/driver_info_fresh_bare` its floor: wasmtime alone building the runtime's
//!   store, instantiating the same component, calling `info()` and dropping the store;
//! - `load/*`: compiling a component vs loading it from the on-disk compile cache;
//! - `metrics/*`: what counting one call costs (finding its counters, recording it), beside
//!   the call it is part of;
//! - `check/*`: one probe of the built-in `redis-ping` check component (a warm store, a
//!   connect through WASI sockets checked against its `network` grant, `PING`, `+PONG`)
//!   beside the same exchange made natively with tokio, against one loopback listener;
//! - `polyglot/*`: plugins in other languages beside the Rust ones (see `runtime/polyglot.rs`;
//!   their files come from `BENCH_COMPONENTS`).
//!
//! Run: `cargo bench -p paddock --bench runtime`. Quote medians and ratios: these machines
//! are shared and noisy.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use paddock::runtime::{CacheOutcome, ComponentSource, Runtime, RuntimeOptions};

#[path = "runtime/polyglot.rs"]
mod polyglot;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn calls(c: &mut Criterion) {
    let tokio = rt();
    let runtime = Runtime::new(RuntimeOptions::default()).unwrap();
    let (driver, device, hook) = tokio.block_on(async {
        let load = |a: guest_artifacts::Artifact| {
            let runtime = runtime.clone();
            async move {
                runtime
                    .load(
                        ComponentSource::BuiltIn(a.file_name.into()),
                        Arc::from(a.bytes),
                    )
                    .await
                    .unwrap()
            }
        };
        (
            load(guest_artifacts::MOCK_DRIVER).await,
            load(guest_artifacts::MOCK_DEVICE).await,
            load(guest_artifacts::ENV_INJECT_HOOK).await,
        )
    });
    let mut g = c.benchmark_group("call");
    g.bench_function("driver_info", |b| {
        b.to_async(&tokio)
            .iter(|| async { runtime.info(&driver).await.unwrap() })
    });
    // The floor: the same export called on an instance that already exists, in a store
    // that is already armed (inside one call, `iters` bare typed-function calls).
    g.bench_function("driver_info_bare", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async {
                runtime
                    .call_driver(&driver, None, "info", move |d, s| {
                        Box::pin(async move {
                            let t = std::time::Instant::now();
                            for _ in 0..iters {
                                d.paddock_plugin_task_driver().call_info(&mut *s).await?;
                            }
                            Ok(t.elapsed())
                        })
                    })
                    .await
                    .unwrap()
            })
        })
    });
    g.bench_function("driver_capabilities", |b| {
        b.to_async(&tokio).iter(|| async {
            runtime
                .call_driver(&driver, None, "capabilities", |d, s| {
                    Box::pin(d.paddock_plugin_task_driver().call_capabilities(s))
                })
                .await
                .unwrap()
        })
    });
    g.bench_function("device_fingerprint", |b| {
        b.to_async(&tokio).iter(|| async {
            runtime
                .call_device(&device, "fingerprint", |d, s| {
                    Box::pin(d.paddock_plugin_device().call_fingerprint(s))
                })
                .await
                .unwrap()
        })
    });
    g.bench_function("hook_info", |b| {
        b.to_async(&tokio)
            .iter(|| async { runtime.info(&hook).await.unwrap() })
    });

    // The same call with the on-demand allocator (the fallback when the pool cannot be
    // reserved), side by side.
    let on_demand = Runtime::new(RuntimeOptions {
        engine: paddock::runtime::engine::EngineConfig {
            pooling: false,
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let driver2 = tokio
        .block_on(on_demand.load(
            ComponentSource::BuiltIn("mock_driver.wasm".into()),
            Arc::from(guest_artifacts::MOCK_DRIVER.bytes),
        ))
        .unwrap();
    g.bench_function("driver_info_on_demand", |b| {
        b.to_async(&tokio)
            .iter(|| async { on_demand.info(&driver2).await.unwrap() })
    });

    // A fresh store per call, through Paddock's path and bare.
    let fresh = Runtime::new(RuntimeOptions {
        components: [(
            "mock".to_string(),
            paddock::runtime::ComponentSettings {
                instance_reuse: Some(1),
                ..Default::default()
            },
        )]
        .into(),
        ..Default::default()
    })
    .unwrap();
    let driver3 = tokio
        .block_on(fresh.load(
            ComponentSource::BuiltIn("mock_driver.wasm".into()),
            Arc::from(guest_artifacts::MOCK_DRIVER.bytes),
        ))
        .unwrap();
    g.bench_function("driver_info_fresh_store", |b| {
        b.to_async(&tokio)
            .iter(|| async { fresh.info(&driver3).await.unwrap() })
    });
    let floor = bare::Floor::new(guest_artifacts::MOCK_DRIVER.bytes);
    g.bench_function("driver_info_fresh_bare", |b| {
        b.to_async(&tokio).iter(|| floor.fresh_info())
    });
    g.finish();
}

/// wasmtime alone on the runtime's own linker and store (Paddock's host interfaces, a
/// store built as every call's is), with the runtime's engine settings: no permit, warm
/// pool, deadline timer or metrics.
mod bare {
    use std::sync::Arc;

    use paddock::runtime::bindings::v0_1::driver::DriverPre;
    use paddock::runtime::context::{CallLimits, ComponentContext};
    use paddock::runtime::store::{HostState, add_to_linker, new_store};
    use wasmtime::Engine;
    use wasmtime::component::{Component, Linker};

    pub struct Floor {
        engine: Engine,
        pre: DriverPre<HostState>,
        ctx: Arc<ComponentContext>,
    }

    impl Floor {
        pub fn new(bytes: &[u8]) -> Self {
            let (engine, _) = paddock::runtime::engine::build(&Default::default()).expect("engine");
            let component = Component::new(&engine, bytes).expect("compiling");
            let mut linker = Linker::<HostState>::new(&engine);
            add_to_linker(&mut linker).expect("linking");
            let pre = DriverPre::new(linker.instantiate_pre(&component).expect("pre"))
                .expect("driver world");
            let ctx = Arc::new(ComponentContext {
                name: "mock".into(),
                grants: Default::default(),
                plugin_config: "{}".into(),
                limits: CallLimits::default(),
            });
            Self { engine, pre, ctx }
        }

        /// A store, an instance, one `info()` call, the store dropped.
        pub async fn fresh_info(&self) -> String {
            let (mut store, _) = new_store(
                &self.engine,
                self.ctx.clone(),
                None,
                Default::default(),
                std::sync::Arc::new(paddock::runtime::store::MemoryBudget::new(usize::MAX)),
            );
            let d = self
                .pre
                .instantiate_async(&mut store)
                .await
                .expect("instance");
            d.paddock_plugin_task_driver()
                .call_info(&mut store)
                .await
                .expect("info")
                .name
        }
    }
}

fn loads(c: &mut Criterion) {
    let tokio = rt();
    let mut g = c.benchmark_group("load");
    g.sample_size(10);
    for a in [
        guest_artifacts::MOCK_DRIVER,
        guest_artifacts::MOCK_DEVICE,
        guest_artifacts::ENV_INJECT_HOOK,
    ] {
        // No cache: compile every time.
        let uncached = Runtime::new(RuntimeOptions::default()).unwrap();
        g.bench_function(format!("compile/{}", a.file_name), |b| {
            b.to_async(&tokio).iter(|| async {
                let c = uncached
                    .prepare(
                        ComponentSource::BuiltIn(a.file_name.into()),
                        Arc::from(a.bytes),
                    )
                    .await
                    .unwrap();
                assert_eq!(c.cache, CacheOutcome::Miss);
            })
        });
        // Warm cache: deserialize (mmap) the stored compilation.
        let dir = tempfile::tempdir().unwrap();
        let cached = Runtime::new(RuntimeOptions {
            cache_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        tokio
            .block_on(cached.prepare(
                ComponentSource::BuiltIn(a.file_name.into()),
                Arc::from(a.bytes),
            ))
            .unwrap();
        g.bench_function(format!("cached/{}", a.file_name), |b| {
            b.to_async(&tokio).iter(|| async {
                let c = cached
                    .prepare(
                        ComponentSource::BuiltIn(a.file_name.into()),
                        Arc::from(a.bytes),
                    )
                    .await
                    .unwrap();
                assert_eq!(c.cache, CacheOutcome::Hit);
            })
        });
    }
    g.finish();
}

/// The per-call cost of metrics: one lookup of the call's counters (at its start) and one
/// record (at its end), with 30 components' worth of counters present.
fn metrics(c: &mut Criterion) {
    use paddock::runtime::metrics::RuntimeMetrics;
    let m = RuntimeMetrics::default();
    for i in 0..30 {
        for op in ["start", "wait", "stop", "inspect"] {
            m.op(&format!("component-{i}"), "driver", op);
        }
    }
    let mut g = c.benchmark_group("metrics");
    g.bench_function("lookup_and_record", |b| {
        b.iter(|| {
            let op = m.op("component-17", "driver", "wait");
            op.record(std::time::Duration::from_micros(3), true, None);
        })
    });
    g.finish();
}

/// A loopback listener answering `+PONG` to every RESP command it reads; its port.
async fn pong_listener() -> u16 {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            tokio::spawn(async move {
                let (r, mut w) = s.into_split();
                let mut lines = BufReader::new(r).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Some(n) = line.strip_prefix('*').and_then(|n| n.parse::<usize>().ok()) {
                        for _ in 0..2 * n {
                            let _ = lines.next_line().await;
                        }
                        if w.write_all(b"+PONG\r\n").await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    port
}

fn checks(c: &mut Criterion) {
    use paddock::checkcomponents::{CheckComponents, CheckStatus, CheckTarget};
    use paddock::runtime::network::NetworkGrant;
    use paddock::runtime::{ComponentSettings, Grants};
    let tokio = rt();
    let settings = ComponentSettings {
        grants: Grants {
            network: Some(NetworkGrant {
                hosts: vec!["127.0.0.1:*".into()],
                max_response_bytes: None,
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let runtime = Runtime::new(RuntimeOptions {
        components: [("redis-ping".to_string(), settings)].into(),
        ..Default::default()
    })
    .unwrap();
    let port = tokio.block_on(async {
        let a = guest_artifacts::REDIS_PING_CHECK;
        runtime
            .load(
                ComponentSource::BuiltIn(a.file_name.into()),
                Arc::from(a.bytes),
            )
            .await
            .unwrap();
        pong_listener().await
    });
    let checks = CheckComponents::new(runtime.clone());
    let target = CheckTarget {
        address: "127.0.0.1".into(),
        port,
        ..Default::default()
    };
    let timeout = std::time::Duration::from_secs(5);
    let mut g = c.benchmark_group("check");
    g.bench_function("redis_ping_component", |b| {
        b.to_async(&tokio).iter(|| async {
            let a = checks
                .probe("redis-ping", &target, "{}", timeout)
                .await
                .unwrap();
            assert_eq!(a.status, CheckStatus::Passing);
        })
    });
    g.bench_function("redis_ping_native", |b| {
        b.to_async(&tokio).iter(|| async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            s.write_all(b"*1\r\n$4\r\nPING\r\n").await.unwrap();
            let mut buf = [0u8; 7];
            s.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"+PONG\r\n");
        })
    });
    g.finish();
}

criterion_group!(benches, calls, loads, metrics, checks, polyglot::polyglot);
criterion_main!(benches);
