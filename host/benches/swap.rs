//! Hot swap, measured in one process with the agent's own parts (runtime, swapper, folder
//! watch, hook manager) and a real folder:
//! - `first_call/miss` and `first_call/hit`: from the moment a new version of a hook is
//!   renamed into the watched folder to the first call answered by it, while a caller
//!   calls the hook back to back; with a build never seen (compiled) and with a build the
//!   compile cache holds;
//! - `hook_call/steady` vs `hook_call/swapping`: the latency of the hook's `prestart`
//!   calls with no swaps, and while a new version is renamed in every 100 ms.
//!
//! Run: `cargo bench -p paddock --bench swap` (prints medians and p99; quote those and the
//! ratio: these machines are shared and noisy). `SWAP_BENCH_ROUNDS` sets the first-call
//! rounds (default 30).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use paddock::changes::Changes;
use paddock::hookmanager::{HookManager, HookTask};
use paddock::pluginhost::{PluginHost, PluginHostOptions};
use paddock::swap::{Swapper, SwapperParts};

const HOOK: &str = "versioned";

fn versioned(build: u32) -> Vec<u8> {
    guest_artifacts::restamp(
        guest_artifacts::FIXTURE_VERSIONED_HOOK.bytes,
        build,
        1,
        "ok",
    )
    .unwrap()
}

fn put(dir: &Path, bytes: &[u8]) {
    let tmp = dir.join(".versioned.wasm.part");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dir.join("versioned.wasm")).unwrap();
}

/// The build the current version put in the env, and how long the call took.
async fn call(hooks: &HookManager) -> (u32, Duration) {
    let t = Instant::now();
    let p = hooks
        .prestart(HOOK, &HookTask::default(), None, &BTreeMap::new())
        .await
        .unwrap();
    let took = t.elapsed();
    (p.env["PADDOCK_HOOK_BUILD"].parse().unwrap(), took)
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn report(name: &str, mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    let (p50, p99) = (quantile(&ms, 0.5), quantile(&ms, 0.99));
    println!(
        "{name:<22} n={:<6} median {p50:9.4} ms   p99 {p99:9.4} ms   max {:9.4} ms",
        ms.len(),
        ms[ms.len() - 1]
    );
    (p50, p99)
}

/// Rename `build` in and call until it answers; ms from the rename.
async fn first_call(hooks: &HookManager, dir: &Path, build: u32) -> f64 {
    let bytes = versioned(build);
    let t = Instant::now();
    put(dir, &bytes);
    loop {
        if call(hooks).await.0 == build {
            return t.elapsed().as_secs_f64() * 1e3;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "build {build} never served"
        );
    }
}

/// Back-to-back calls for `secs`; their latencies, ms.
async fn calls_for(hooks: &HookManager, secs: f64) -> Vec<f64> {
    let t = Instant::now();
    let mut out = Vec::new();
    while t.elapsed().as_secs_f64() < secs {
        out.push(call(hooks).await.1.as_secs_f64() * 1e3);
    }
    out
}

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("paddock-swap-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("hooks")).unwrap();
    d
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let rounds: u32 = std::env::var("SWAP_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let root = scratch();
    let dir = root.join("hooks");
    put(&dir, &versioned(1));
    tokio.block_on(async {
        let host = PluginHost::build(PluginHostOptions {
            cache_dir: Some(root.join("cache")),
            ..Default::default()
        })
        .unwrap();
        let (runtime, hooks) = (host.runtime.clone(), host.hooks.clone());
        let swapper = Swapper::start(SwapperParts {
            runtime: runtime.clone(),
            drivers: host.drivers.clone(),
            devices: host.devices.clone(),
            hooks: hooks.clone(),
            node_events: host.node_events.clone(),
            changes: Arc::new(Changes::default()),
            dirs: vec![dir.clone()],
            auto_revert: BTreeMap::new(),
            pull_cache: None,
            remotes: BTreeMap::new(),
        })
        .await
        .unwrap();
        let _watch = paddock::swap::watch::start(&swapper).unwrap();
        assert_eq!(call(&hooks).await.0, 1);

        // Builds 2..: each new (a compile), then the same ones again (from the cache).
        let mut miss = Vec::new();
        for b in 0..rounds {
            miss.push(first_call(&hooks, &dir, 2 + b).await);
        }
        let mut hit = Vec::new();
        for b in 0..rounds {
            hit.push(first_call(&hooks, &dir, 2 + b).await);
        }
        println!("rename -> first call on the new version ({rounds} rounds each)");
        report("first_call/miss", miss);
        report("first_call/hit", hit);

        // Hook calls with and without a swap every 100 ms (builds from the cache).
        calls_for(&hooks, 0.5).await;
        let steady = calls_for(&hooks, 4.0).await;
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = {
            let (stop, dir) = (stop.clone(), dir.clone());
            std::thread::spawn(move || {
                let builds: Vec<Vec<u8>> = (2..12).map(versioned).collect();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    put(&dir, &builds[n % builds.len()]);
                    n += 1;
                }
                n
            })
        };
        let swapping = calls_for(&hooks, 4.0).await;
        stop.store(true, Ordering::Relaxed);
        let n = swaps.join().unwrap();
        println!("hook prestart calls, back to back, 4 s each ({n} swaps in the second)");
        let (s50, s99) = report("hook_call/steady", steady);
        let (w50, w99) = report("hook_call/swapping", swapping);
        println!(
            "swapping / steady: median {:.2}x, p99 {:.2}x",
            w50 / s50,
            w99 / s99
        );
    });
    let _ = std::fs::remove_dir_all(&root);
}
