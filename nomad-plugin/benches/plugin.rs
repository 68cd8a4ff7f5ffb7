//! The plugin's costs, side by side in one run:
//! - `handshake`: from starting the binary (with Nomad's environment) to its handshake line,
//!   what each of Nomad's launches of the plugin waits for;
//! - `lifecycle/grpc` vs `lifecycle/in_process`: a mock task that exits at once, from
//!   StartTask through WaitTask's answer to DestroyTask, over gRPC on the plugin's Unix
//!   socket, and the same start, wait and destroy through the same driver manager and
//!   component in this process (what the agent does). The ratio of medians is printed.
//! - `call/component_info` vs `call/grpc_plugin_info`: one warm component call (`info()`)
//!   against one unary gRPC call to the plugin process over its Unix socket with a message
//!   of the same size (`PluginInfo`, which the plugin answers without a component): what
//!   the sandbox costs against the go-plugin way of running a third party's driver.
//!
//! Run: `cargo bench -p paddock-nomad-driver --bench plugin`. Quote medians and ratios.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use paddock_core::drivermanager::types::WaitStatus;
use paddock_nomad_driver::config::PluginConfig;
use paddock_nomad_driver::host::Host;
use paddock_nomad_driver::proto::base as bpb;
use paddock_nomad_driver::proto::base::base_plugin_client::BasePluginClient;
use paddock_nomad_driver::proto::drivers as pb;
use paddock_nomad_driver::proto::drivers::driver_client::DriverClient;
use paddock_nomad_driver::{cty, handshake, spec, tasks};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_paddock-nomad-driver"))
}

async fn spawn() -> (tokio::process::Child, PathBuf) {
    let mut child = tokio::process::Command::new(bin())
        .env(handshake::MAGIC_COOKIE_KEY, handshake::MAGIC_COOKIE_VALUE)
        .env("PLUGIN_PROTOCOL_VERSIONS", "2")
        .env("PADDOCK_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next_line().await.unwrap().unwrap();
    let socket = PathBuf::from(line.split('|').nth(3).unwrap());
    (child, socket)
}

static N: AtomicU64 = AtomicU64::new(0);

fn task(alloc_dir: &Path) -> pb::TaskConfig {
    let n = N.fetch_add(1, Ordering::Relaxed);
    pb::TaskConfig {
        id: format!("alloc{n}/t/{n:08x}"),
        name: "t".into(),
        alloc_id: format!("alloc{n}"),
        msgpack_driver_config: cty::from_json(&json!({"run_for": "0s"}), &[]),
        alloc_dir: alloc_dir.display().to_string(),
        stdout_path: "/dev/null".into(),
        stderr_path: "/dev/null".into(),
        ..Default::default()
    }
}

fn config(data: &Path) -> serde_json::Value {
    json!({"driver": "mock", "data_dir": data})
}

/// StartTask → WaitTask → DestroyTask over gRPC.
async fn grpc_lifecycle(mut d: DriverClient<tonic::transport::Channel>, alloc_dir: &Path) {
    let t = task(alloc_dir);
    let id = t.id.clone();
    d.start_task(pb::StartTaskRequest { task: Some(t) })
        .await
        .unwrap();
    let r = d
        .wait_task(pb::WaitTaskRequest {
            task_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.result.unwrap().exit_code, 0);
    d.destroy_task(pb::DestroyTaskRequest {
        task_id: id,
        force: true,
    })
    .await
    .unwrap();
}

/// The same through the driver manager in this process.
async fn in_process_lifecycle(host: &Host, alloc_dir: &Path) {
    let t = task(alloc_dir);
    let json = cty::to_json(&t.msgpack_driver_config).unwrap().to_string();
    let driver = host.driver();
    driver.validate_config(&json).await.unwrap();
    let mut h = driver
        .start(tasks::task_config(&t, json), None)
        .await
        .unwrap();
    loop {
        match driver.wait(h.clone()).await.unwrap() {
            WaitStatus::Exited(r) => {
                assert_eq!(r.exit_code, 0);
                break;
            }
            WaitStatus::Pending(w) => {
                if let Some(n) = w.handle.clone() {
                    h = n;
                }
                host.drivers.sleep_until_wake(&w, None).await;
            }
        }
    }
    driver.destroy(h, true).await.unwrap();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let allocs = tempfile::tempdir().unwrap();

    c.bench_function("handshake", |b| {
        b.to_async(&rt).iter(|| async {
            let (mut child, _) = spawn().await;
            // SIGTERM, which it answers by exiting and removing its socket dir (a killed
            // plugin leaves one behind per iteration).
            let pid = rustix::process::Pid::from_raw(child.id().unwrap() as i32).unwrap();
            rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
            let _ = child.wait().await;
        })
    });

    let (_child, socket) = rt.block_on(spawn());
    let channel = rt
        .block_on(paddock_nomad_driver::client::connect_unix(&socket))
        .unwrap();
    rt.block_on(async {
        BasePluginClient::new(channel.clone())
            .set_config(bpb::SetConfigRequest {
                msgpack_config: cty::from_json(&config(data.path()), spec::PLUGIN_CONFIG_KEYS),
                ..Default::default()
            })
            .await
            .unwrap();
    });
    let local = tempfile::tempdir().unwrap();
    let host = rt
        .block_on(Host::open(
            PluginConfig::decode(&cty::from_json(
                &config(local.path()),
                spec::PLUGIN_CONFIG_KEYS,
            ))
            .unwrap(),
            "bench",
        ))
        .unwrap();
    let mut g = c.benchmark_group("lifecycle");
    g.bench_function("grpc", |b| {
        let d = DriverClient::new(channel.clone());
        b.to_async(&rt)
            .iter(|| grpc_lifecycle(d.clone(), allocs.path()))
    });
    g.bench_function("in_process", |b| {
        b.to_async(&rt)
            .iter(|| in_process_lifecycle(&host, allocs.path()))
    });
    g.finish();

    let component = host.driver().version().expect("the mock is loaded");
    let mut g = c.benchmark_group("call");
    g.bench_function("component_info", |b| {
        b.to_async(&rt)
            .iter(|| async { host.runtime.info(&component).await.unwrap() })
    });
    g.bench_function("grpc_plugin_info", |b| {
        let base = BasePluginClient::new(channel.clone());
        b.to_async(&rt).iter(|| {
            let mut base = base.clone();
            async move { base.plugin_info(bpb::PluginInfoRequest {}).await.unwrap() }
        })
    });
    g.finish();
    let (mut grpc_calls, mut comp_calls) = (Vec::new(), Vec::new());
    rt.block_on(async {
        let mut base = BasePluginClient::new(channel.clone());
        for _ in 0..2000 {
            let t = Instant::now();
            base.plugin_info(bpb::PluginInfoRequest {}).await.unwrap();
            grpc_calls.push(t.elapsed());
            let t = Instant::now();
            host.runtime.info(&component).await.unwrap();
            comp_calls.push(t.elapsed());
        }
    });
    let (g, l) = (median(grpc_calls), median(comp_calls));
    eprintln!(
        "call compare (2000 alternating rounds): grpc PluginInfo median {g:?}, component \
         info() median {l:?}, the component call {:.0}x faster",
        g.as_secs_f64() / l.as_secs_f64()
    );

    // Alternating, so both see the same moments of a noisy machine.
    let (mut grpc, mut local) = (Vec::new(), Vec::new());
    rt.block_on(async {
        let d = DriverClient::new(channel.clone());
        for _ in 0..300 {
            let t = Instant::now();
            grpc_lifecycle(d.clone(), allocs.path()).await;
            grpc.push(t.elapsed());
            let t = Instant::now();
            in_process_lifecycle(&host, allocs.path()).await;
            local.push(t.elapsed());
        }
    });
    let (g, l) = (median(grpc), median(local));
    eprintln!(
        "lifecycle compare (300 alternating rounds): grpc median {g:?}, in-process median {l:?}, \
         ratio {:.2}x",
        g.as_secs_f64() / l.as_secs_f64()
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
