//! A component pulled from a registry, from the pull to its first call, measured in one
//! process with the agent's own parts (the swapper, the pull cache, the runtime) against a
//! real registry on loopback (Debian's `docker-registry`), a 500 KB driver signed with a
//! P-256 key:
//! - `fetch`: resolve the tag, check the manifest, verify the signature, fetch and hash the
//!   layer (no compile);
//! - `pull/new-build`: the whole `agent component pull` of a build never seen: fetch,
//!   compile, link, `info()`, install, the driver's fingerprint (its first call);
//! - `pull/compiled`: the same for a build the compile cache holds (two builds pushed in
//!   turn);
//! - `file/compiled`: the baseline, the same driver's bytes renamed into a watched folder and
//!   applied (no network, no signature).
//!
//! Run: `cargo bench -p paddock --bench pull` (prints medians and p99; quote those and the
//! ratios). `PULL_BENCH_ROUNDS` sets the rounds (default 20).

#![allow(clippy::print_stdout)] // a benchmark prints its figures

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use paddock::changes::Changes;
use paddock::pluginhost::{PluginHost, PluginHostOptions, RemoteSources};
use paddock::remote::cosign::SigningKey;
use paddock::remote::{AutoApprove, RemoteSpec, Source};
use paddock::swap::Applied;

const SIZE: usize = 500_000;

/// The sleeper driver padded to 500 KB, its build number in a custom section.
fn build(n: u32) -> Vec<u8> {
    let mut out = guest_artifacts::SLEEPER_DRIVER.bytes.to_vec();
    let name = b"build";
    let pad = SIZE - out.len() - 1 - 3 - 1 - name.len();
    let len = 1 + name.len() + pad;
    out.push(0);
    out.extend([
        (len & 0x7f) as u8 | 0x80,
        ((len >> 7) & 0x7f) as u8 | 0x80,
        (len >> 14) as u8,
    ]);
    out.push(name.len() as u8);
    out.extend(name);
    let mut body = vec![0u8; pad];
    body[..4].copy_from_slice(&n.to_le_bytes());
    out.extend(body);
    assert_eq!(out.len(), SIZE);
    out
}

/// `bytes` with a small `build` custom section appended.
fn with_section(bytes: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out.push(0);
    out.push((1 + 5 + data.len()) as u8);
    out.push(5);
    out.extend(b"build");
    out.extend(data);
    out
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn report(name: &str, mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    let p50 = quantile(&ms, 0.5);
    println!(
        "{name:<18} n={:<4} median {p50:9.2} ms   p99 {:9.2} ms   max {:9.2} ms",
        ms.len(),
        quantile(&ms, 0.99),
        ms[ms.len() - 1]
    );
    p50
}

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("paddock-pull-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("drivers")).unwrap();
    d
}

fn main() {
    let rounds: u32 = std::env::var("PULL_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let root = scratch();
    let port = std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        root.join("registry.yml"),
        format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            root.join("registry").display()
        ),
    )
    .unwrap();
    let mut registry = Command::new("docker-registry")
        .arg("serve")
        .arg(root.join("registry.yml"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("docker-registry (Debian's package) is needed");
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (_, key) = SigningKey::generate().unwrap();
    std::fs::write(root.join("bench.pub"), key.public().to_pem()).unwrap();
    let target = format!("127.0.0.1:{port}/bench/sleeper:latest");
    let spec = RemoteSpec {
        name: "sleeper".into(),
        source: Source::Oci(target.clone()),
        pin: None,
        key: Some(root.join("bench.pub")),
        insecure: false,
        ca_file: None,
        max_size: 128 << 20,
        poll_interval: None,
        auto_approve: AutoApprove::Always,
    };
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async {
        let publish = async |n: u32| {
            paddock::remote::oci::push(&target, &build(n), false, None)
                .await
                .unwrap();
            paddock::remote::oci::sign(&target, &key, false, None)
                .await
                .unwrap();
        };
        publish(1).await;
        let host = PluginHost::build(PluginHostOptions {
            cache_dir: Some(root.join("cache")),
            ..Default::default()
        })
        .unwrap();
        let drivers = root.join("drivers");
        let swapper = host
            .start_swapper(
                std::sync::Arc::new(Changes::default()),
                vec![drivers.clone()],
                BTreeMap::new(),
                RemoteSources {
                    cache: Some(root.join("pulled")),
                    specs: [("sleeper".to_string(), spec.clone())].into(),
                },
            )
            .await
            .unwrap();
        let fetch_cache = paddock::remote::cache::Cache::open(&root.join("fetch-cache")).unwrap();
        let (mut fetch, mut new_build, mut compiled, mut file) = (vec![], vec![], vec![], vec![]);
        let pull = async |label: &str| {
            let t = Instant::now();
            let a = swapper.pull("sleeper", "bench").await.unwrap();
            assert!(matches!(a, Applied::Replaced { .. }), "{label}: {a:?}");
            t.elapsed().as_secs_f64() * 1e3
        };
        for n in 0..rounds {
            // A build never seen.
            publish(100 + n).await;
            let t = Instant::now();
            paddock::remote::fetch(&spec, &fetch_cache).await.unwrap();
            fetch.push(t.elapsed().as_secs_f64() * 1e3);
            new_build.push(pull("new build").await);
            // Builds 1 and 2 in turn: compiled after their first pull.
            for b in [1, 2] {
                publish(b).await;
                let ms = pull("compiled").await;
                if n > 0 {
                    compiled.push(ms);
                }
            }
        }
        // The baseline: a driver dropped into a watched folder, two builds in turn (so
        // compiled); the mock driver (565 KB), as the pulled plugin's name is bound to its
        // source.
        for n in 0..rounds + 1 {
            let bytes = with_section(guest_artifacts::MOCK_DRIVER.bytes, &[(n % 2) as u8]);
            let path = drivers.join("mock.wasm");
            let tmp = drivers.join(".mock.wasm.part");
            std::fs::write(&tmp, &bytes).unwrap();
            let t = Instant::now();
            std::fs::rename(&tmp, &path).unwrap();
            let a = swapper.apply_file(&path, Instant::now()).await;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            assert!(
                matches!(a, Applied::Replaced { .. } | Applied::Loaded(_)),
                "{a:?}"
            );
            if n > 1 {
                file.push(ms);
            }
        }
        println!("component: {SIZE} bytes; registry on loopback; keyed cosign signature");
        let f = report("fetch", fetch);
        let nb = report("pull/new-build", new_build);
        let c = report("pull/compiled", compiled);
        let fl = report("file/compiled", file);
        println!(
            "ratios: pull/compiled vs file/compiled {:.2}x; fetch is {:.0}% of pull/compiled; compile adds {:.0} ms",
            c / fl,
            f / c * 100.0,
            nb - c
        );
    });
    let _ = registry.kill();
    let _ = registry.wait();
    let _ = std::fs::remove_dir_all(&root);
}
