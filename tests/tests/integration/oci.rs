//! Components from an OCI registry: a real registry (Debian's `docker-registry`, the CNCF
//! distribution server) on loopback, components published and signed by an independent
//! client (Python `oras`, signatures made by `openssl` over cosign's simple-signing
//! payload), an agent that has never seen the driver on disk pulling, verifying, refusing,
//! swapping, holding for approval, and starting again from its cache with the registry down.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{AgentProcess, agent_bin, python_with, repo_root};

/// A registry on a free loopback port, its storage in `dir`.
pub(crate) struct Registry {
    child: Child,
    addr: String,
    storage: PathBuf,
}

impl Registry {
    pub(crate) fn start(dir: &Path) -> Self {
        Self::start_at(dir, std::net::Ipv4Addr::LOCALHOST, None)
    }

    /// A registry listening on `ip`, over TLS with `tls` (certificate, key) when given.
    pub(crate) fn start_at(
        dir: &Path,
        ip: std::net::Ipv4Addr,
        tls: Option<(&Path, &Path)>,
    ) -> Self {
        let bin = ["/usr/bin/docker-registry", "/usr/local/bin/docker-registry"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect(
                "the registry tests need Debian's docker-registry package (the CNCF distribution \
                 server): apt-get install docker-registry (.ci/run installs it)",
            );
        std::fs::create_dir_all(dir).unwrap();
        let port = std::net::TcpListener::bind((ip, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let storage = dir.join("registry");
        let config = dir.join("registry.yml");
        let tls = tls
            .map(|(c, k)| {
                format!(
                    "  tls:\n    certificate: {}\n    key: {}\n",
                    c.display(),
                    k.display()
                )
            })
            .unwrap_or_default();
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  \
                 delete:\n    enabled: true\nhttp:\n  addr: {ip}:{port}\n{tls}",
                storage.display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("registry.log")).unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect((ip, port)).is_err() {
            assert!(Instant::now() < deadline, "the registry did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            child,
            addr: format!("{ip}:{port}"),
            storage,
        }
    }

    pub(crate) fn host(&self) -> String {
        self.addr.clone()
    }

    /// The file a blob's bytes are kept in.
    pub(crate) fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    pub(crate) fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The independent publisher (`tests/python/oci/publish.py`).
pub(crate) struct Publisher {
    python: String,
    path: PathBuf,
    pub(crate) registry: String,
}

impl Publisher {
    pub(crate) async fn new(registry: String) -> Self {
        let dir = repo_root().join("tests/python/oci");
        let (python, path) = python_with("oras", &dir.join("requirements.txt"), "python-oci").await;
        Self {
            python,
            path,
            registry,
        }
    }

    pub(crate) fn run(&self, args: &[&str]) -> String {
        let out = Command::new(&self.python)
            .arg(repo_root().join("tests/python/oci/publish.py"))
            .args(args)
            .env("PYTHONPATH", &self.path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "publish.py {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// Push `bytes` to `repo:tag`; the manifest digest.
    pub(crate) fn push(&self, dir: &Path, target: &str, bytes: &[u8]) -> String {
        let file = dir.join(format!("{}.wasm", target.replace(['/', ':'], "_")));
        std::fs::write(&file, bytes).unwrap();
        let d = self.run(&["push", &self.registry, target, file.to_str().unwrap()]);
        assert!(d.starts_with("sha256:"), "{d}");
        d
    }

    pub(crate) fn sign(&self, repo: &str, digest: &str, key: &Path) {
        self.run(&["sign", &self.registry, repo, digest, key.to_str().unwrap()]);
    }
}

/// An EC P-256 key pair made by openssl: (private PKCS#8, public SPKI).
pub(crate) fn openssl_key(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let key = dir.join(format!("{name}.pem"));
    let public = dir.join(format!("{name}.pub"));
    let ok = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(&key)
        .status()
        .unwrap()
        .success()
        && Command::new("openssl")
            .args(["pkey", "-pubout", "-in"])
            .arg(&key)
            .arg("-out")
            .arg(&public)
            .status()
            .unwrap()
            .success();
    assert!(ok, "openssl could not make a key");
    (key, public)
}

/// `bytes` with a custom section `name` appended at the top level (a component may hold
/// custom sections anywhere): a new version of the same code, or one declaring grants.
pub(crate) fn with_section(bytes: &[u8], name: &str, data: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    let mut payload = Vec::new();
    leb(name.len(), &mut payload);
    payload.extend_from_slice(name.as_bytes());
    payload.extend_from_slice(data);
    let mut out = bytes.to_vec();
    out.push(0);
    leb(payload.len(), &mut out);
    out.extend(payload);
    out
}

/// The `sleeper` entries of `/v1/components`.
async fn sleeper_versions(agent: &AgentProcess) -> Vec<Value> {
    agent.get("/v1/components").await["Components"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["Name"] == "sleeper")
        .cloned()
        .collect()
}

/// The active `sleeper` entry, if one is.
async fn active_entry(agent: &AgentProcess) -> Option<Value> {
    sleeper_versions(agent)
        .await
        .into_iter()
        .find(|c| c["State"] == "active")
}

async fn active_digest(agent: &AgentProcess) -> String {
    active_entry(agent)
        .await
        .map(|c| c["Digest"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

/// `POST /v1/agent/reload`, which must succeed.
async fn reload(agent: &AgentProcess) {
    let r = agent
        .http
        .post(agent.url("/v1/agent/reload"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
}

/// `agent component pull sleeper`: its exit code and output.
fn cli(agent: &AgentProcess, args: &[&str]) -> (i32, String) {
    let out = Command::new(agent_bin())
        .args(["component"])
        .args(args)
        .args(["--address", &agent.url("")])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Pull now and expect a refusal whose reason holds `words`; the refusal is in
/// `/v1/components` and a node event, and `digest` still serves.
async fn refused(agent: &AgentProcess, words: &str, digest: &str) {
    let (code, out) = cli(agent, &["pull", "sleeper"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("refused") && out.contains(words), "{out}");
    let v = sleeper_versions(agent).await;
    assert!(
        v.iter()
            .any(|c| c["State"] == "refused" && c["Reason"].as_str().unwrap().contains(words)),
        "{v:#?}"
    );
    assert_eq!(active_digest(agent).await, digest, "{v:#?}");
    let node = agent.get("/v1/node/self").await;
    assert!(
        node["Events"].as_array().unwrap().iter().any(|e| {
            let m = e["Message"].as_str().unwrap();
            e["Subsystem"] == "Component" && m.contains("refused") && m.contains(words)
        }),
        "{:#}",
        node["Events"]
    );
}

async fn wait_for(what: &str, mut ok: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ok().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_component_is_pulled_verified_swapped_held_and_run_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut registry = Registry::start(d);
    let publisher = Publisher::new(registry.host()).await;
    let (trusted, trusted_pub) = openssl_key(d, "trusted");
    let (stranger, _) = openssl_key(d, "stranger");
    let v1 = guest_artifacts::SLEEPER_DRIVER.bytes.to_vec();
    let repo = "acme/sleeper";
    let d1 = publisher.push(d, &format!("{repo}:stable"), &v1);
    publisher.sign(repo, &d1, &trusted);

    // Our own pusher and signer, read back by the independent client and openssl: the
    // layout, the digest the registry computed, and a signature openssl verifies.
    let ours = format!("oci://{}/acme/ours:1", registry.host());
    let run = |args: &[&str]| {
        let out = Command::new(agent_bin()).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let wasm = d.join("ours.wasm");
    std::fs::write(&wasm, &v1).unwrap();
    let pushed = run(&["component", "push", wasm.to_str().unwrap(), &ours]);
    let ours_digest = pushed
        .lines()
        .find_map(|l| l.strip_prefix("digest: "))
        .unwrap_or_else(|| panic!("{pushed}"))
        .to_string();
    run(&[
        "component",
        "sign",
        "--key",
        trusted.to_str().unwrap(),
        &ours,
    ]);
    let manifest: Value =
        serde_json::from_str(&publisher.run(&["manifest", &registry.host(), "acme/ours:1"]))
            .unwrap();
    assert_eq!(
        publisher.run(&["digest", &registry.host(), "acme/ours:1"]),
        ours_digest
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(
        manifest["layers"][0]["digest"],
        format!("sha256:{}", paddock::runtime::cache::sha256_hex(&v1)).as_str()
    );
    assert_eq!(
        publisher.run(&[
            "verify",
            &registry.host(),
            "acme/ours",
            &ours_digest,
            trusted_pub.to_str().unwrap()
        ]),
        "verified"
    );

    let config = |extra: &str| {
        format!(
            "plugin \"sleeper\" {{\n  source = \"oci://{}/{repo}:stable\"\n  verify {{\n    key = \"{}\"\n  }}\n  poll_interval = \"1s\"\n{extra}}}\n",
            registry.host(),
            trusted_pub.display()
        )
    };
    let cfg = d.join("agent.hcl");
    std::fs::write(&cfg, config("")).unwrap();
    let mut agent = AgentProcess::new(d);
    agent.args = vec!["--config".into(), cfg.display().to_string()];
    agent.start().await;

    // Never on disk, pulled, verified: the view names the reference, digest and signer.
    let active = active_entry(&agent)
        .await
        .unwrap_or_else(|| panic!("no active sleeper:\n{}", agent.log()));
    assert_eq!(active["Digest"], d1.as_str());
    assert_eq!(
        active["Reference"],
        format!("oci://{}/{repo}@{d1}", registry.host()).as_str()
    );
    let fingerprint = {
        let der = Command::new("openssl")
            .args(["pkey", "-pubin", "-outform", "DER", "-in"])
            .arg(&trusted_pub)
            .output()
            .unwrap()
            .stdout;
        paddock::runtime::cache::sha256_hex(&der)
    };
    assert!(
        active["Signer"].as_str().unwrap().contains(&fingerprint),
        "{active:#}"
    );
    assert_eq!(active["DeclaredGrants"], Value::Null);

    // A task on it keeps running through every refusal below.
    agent
        .post_job(
            json!({ "ID": "nap", "Type": "service", "TaskGroups": [{ "Name": "g", "Count": 1,
            "Tasks": [{ "Name": "t", "Driver": "sleeper", "Config": { "seconds": 600 } }] }] }),
        )
        .await;
    agent
        .wait_allocs("nap", |a| a.len() == 1 && a[0]["ClientStatus"] == "running")
        .await;

    // An unsigned new version behind the tag (the poller sees it too, and refuses it).
    let v2 = with_section(&v1, "build", b"2");
    let d2 = publisher.push(d, &format!("{repo}:stable"), &v2);
    refused(&agent, "no signature", &d1).await;
    // Signed, but by a key the operator did not name.
    publisher.sign(repo, &d2, &stranger);
    refused(&agent, "does not verify under the key", &d1).await;
    // Signed by the right key, its layer changed in the registry's storage (before the
    // signature goes up: the poller must never see it whole and signed).
    let v3 = with_section(&v1, "build", b"3");
    let d3 = publisher.push(d, &format!("{repo}:stable"), &v3);
    let layer = paddock::runtime::cache::sha256_hex(&v3);
    let file = registry.blob_file(&layer);
    let mut tampered = std::fs::read(&file).unwrap();
    let at = tampered.len() - 1;
    tampered[at] ^= 0xff;
    std::fs::write(&file, &tampered).unwrap();
    publisher.sign(repo, &d3, &trusted);
    refused(&agent, "does not match its digest", &d1).await;

    // Each refusal is a ComponentRefused event keyed by the reference it was refused for.
    let url = agent.url("/v1/event/stream?topic=Component&index=0");
    let events = crate::harness::stream_events(&url, |e| {
        e.iter().any(|e| {
            e["Type"] == "ComponentRefused"
                && e["Payload"]["Component"]["Reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("does not match its digest"))
        })
    })
    .await;
    let refusals: Vec<&Value> = events
        .iter()
        .filter(|e| e["Type"] == "ComponentRefused")
        .collect();
    assert!(
        refusals.iter().any(|e| {
            let reason = e["Payload"]["Component"]["Reason"].as_str().unwrap();
            e["Key"] == format!("oci://{}/{repo}:stable", registry.host()).as_str()
                && reason.contains("does not verify")
                && reason.contains(&d2.replace(':', "-"))
        }),
        "{refusals:#?}"
    );

    // Pinned to another digest: the reloaded config says so, and what the tag holds is
    // refused.
    let other = "ab".repeat(32);
    std::fs::write(&cfg, config(&format!("  sha256 = \"{other}\"\n"))).unwrap();
    reload(&agent).await;
    refused(&agent, &format!("pins sha256:{other}"), &d1).await;
    std::fs::write(&cfg, config("")).unwrap();
    reload(&agent).await;
    let alloc = agent.wait_allocs("nap", |a| a.len() == 1).await.remove(0);
    assert_eq!(alloc["ClientStatus"], "running", "{alloc:#}");

    // A new tag with the same (no) declared grants, signed: the poller swaps it in.
    let v4 = with_section(&v1, "build", b"4");
    let d4 = publisher.push(d, &format!("{repo}:stable"), &v4);
    publisher.sign(repo, &d4, &trusted);
    let started = Instant::now();
    wait_for("the polled tag to swap in", async || {
        active_digest(&agent).await == d4
    })
    .await;
    let swapped_in = started.elapsed();
    assert!(swapped_in < Duration::from_secs(10), "{swapped_in:?}");

    // Declaring more grants: held for approval with the difference, until approved.
    let grants = br#"{"network": {"hosts": ["api.example.com:443"]}}"#;
    let v5 = with_section(&with_section(&v1, "build", b"5"), "paddock:grants", grants);
    let d5 = publisher.push(d, &format!("{repo}:stable"), &v5);
    publisher.sign(repo, &d5, &trusted);
    wait_for("the wider version to be held", async || {
        sleeper_versions(&agent)
            .await
            .iter()
            .any(|c| c["State"] == "pending-approval" && c["Digest"] == d5.as_str())
    })
    .await;
    let pending = sleeper_versions(&agent).await;
    let held = pending
        .iter()
        .find(|c| c["State"] == "pending-approval")
        .unwrap();
    assert_eq!(
        held["GrantsDiff"],
        json!(["+ network api.example.com:443"]),
        "{held:#}"
    );
    assert_eq!(active_digest(&agent).await, d4);
    let (_, status) = cli(&agent, &["status", "sleeper"]);
    assert!(
        status.contains("pending-approval") && status.contains("+ network api.example.com:443"),
        "{status}"
    );
    let node = agent.get("/v1/node/self").await;
    assert!(
        node["Events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["Message"].as_str().unwrap().contains("pending approval")),
        "{:#}",
        node["Events"]
    );
    let (code, out) = cli(&agent, &["approve", "sleeper"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(active_digest(&agent).await, d5);
    let active = active_entry(&agent).await.unwrap();
    assert_eq!(
        active["DeclaredGrants"]["network"]["hosts"],
        json!(["api.example.com:443"])
    );
    // The declaration granted nothing: the operator's grants (none) are what it runs with.
    assert!(
        !active["Grants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g.as_str().unwrap().starts_with("network")),
        "{active:#}"
    );

    // kill -9 at moments through pulls of a new version, then the registry goes down: the
    // agent starts from its cache, which holds a whole, verified version.
    let v6 = with_section(
        &with_section(&v1, "build", &[6; 4096]),
        "paddock:grants",
        grants,
    );
    let d6 = publisher.push(d, &format!("{repo}:stable"), &v6);
    publisher.sign(repo, &d6, &trusted);
    for delay_ms in [150u64, 400, 700, 1000, 1500] {
        agent.kill9();
        agent.spawn();
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    }
    agent.kill9();
    let cache = d.join("data/cache/pulled");
    registry.stop();
    agent.start().await;
    let active = active_entry(&agent)
        .await
        .unwrap_or_else(|| panic!("no active sleeper:\n{}", agent.log()));
    let digest = active["Digest"].as_str().unwrap();
    assert!(digest == d5 || digest == d6, "{active:#}");
    assert!(
        agent.log().contains("running the cached version"),
        "{}",
        agent.log()
    );
    assert_eq!(std::fs::read_dir(cache.join("tmp")).unwrap().count(), 0);
    for r in std::fs::read_dir(cache.join("refs")).unwrap() {
        let r: Value = serde_json::from_slice(&std::fs::read(r.unwrap().path()).unwrap()).unwrap();
        let blob = r["Blob"].as_str().unwrap();
        let bytes = std::fs::read(cache.join("blobs/sha256").join(&blob[7..])).unwrap();
        assert_eq!(
            format!("sha256:{}", paddock::runtime::cache::sha256_hex(&bytes)),
            blob
        );
    }
    let alloc = agent.wait_allocs("nap", |a| a.len() == 1).await.remove(0);
    assert_eq!(alloc["ClientStatus"], "running", "{alloc:#}");
}

/// This machine's first address that is not on the loopback (a registry there needs TLS).
fn routable_ipv4() -> std::net::Ipv4Addr {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    // No packet is sent: connecting a UDP socket only picks the route and the source address.
    s.connect("192.0.2.1:9")
        .or_else(|_| s.connect("10.255.255.255:9"))
        .expect("the registry TLS test needs an address off the loopback (a route to 192.0.2.1 or 10.0.0.0/8)");
    match s.local_addr().unwrap().ip() {
        std::net::IpAddr::V4(ip) if !ip.is_loopback() && !ip.is_unspecified() => ip,
        other => panic!("the registry TLS test needs an address off the loopback, found {other}"),
    }
}

/// A registry off the loopback: HTTPS unless the plugin block says `insecure = true`; a
/// certificate the web's roots do not know is trusted only through `ca_file`. Pushed by our
/// own CLI with `--ca-file` and `--insecure`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_off_the_loopback_needs_tls_or_insecure_and_a_ca_file_is_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ip = routable_ipv4();
    // A private CA and the registry's certificate signed by it (rustls, as browsers, takes
    // no CA certificate as a server's own).
    let (ca, cert, key) = (d.join("ca.pem"), d.join("cert.pem"), d.join("key.pem"));
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .current_dir(d)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-days",
                "1",
                "-subj",
                "/CN=paddock-test-ca",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-subj",
                "/CN=registry",
                "-keyout",
                "key.pem",
                "-out",
                "cert.csr",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        d.join("ext.cnf"),
        format!("subjectAltName=IP:{ip}\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n"),
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "cert.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
        "-out",
        "cert.pem",
    ]);
    let tls = Registry::start_at(&d.join("tls"), ip, Some((&cert, &key)));
    let plain = Registry::start_at(&d.join("plain"), ip, None);
    let bytes = guest_artifacts::SLEEPER_DRIVER.bytes;
    let wasm = d.join("sleeper.wasm");
    std::fs::write(&wasm, bytes).unwrap();
    let push = |args: &[&str]| {
        let out = Command::new(agent_bin())
            .args(["component", "push", wasm.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let tls_ref = format!("oci://{}/acme/sleeper:1", tls.host());
    let plain_ref = format!("oci://{}/acme/sleeper:1", plain.host());
    // Our pusher holds itself to the same rules.
    let (ok, err) = push(&[&tls_ref]);
    assert!(
        !ok && err.contains("pushing to"),
        "an unknown certificate was trusted: {err}"
    );
    assert!(push(&[&tls_ref, "--ca-file", ca.to_str().unwrap()]).0);
    assert!(push(&[&plain_ref, "--insecure"]).0);

    let cfg = d.join("agent.hcl");
    let write = |source: &str, extra: &str| {
        std::fs::write(
            &cfg,
            format!("plugin \"sleeper\" {{\n  source = \"{source}\"\n{extra}}}\n"),
        )
        .unwrap()
    };
    write(&tls_ref, "");
    let mut agent = AgentProcess::new(d);
    agent.args = vec!["--config".into(), cfg.display().to_string()];
    agent.start().await;
    let reload_and_pull = async |source: &str, extra: &str| {
        write(source, extra);
        reload(&agent).await;
        let (_, out) = cli(&agent, &["pull", "sleeper"]);
        out
    };
    // Not trusted without the CA file: refused; with it, loaded.
    let v = sleeper_versions(&agent).await;
    assert!(
        v.iter().any(|c| c["State"] == "refused"
            && c["Reason"].as_str().unwrap().contains("cannot reach it")),
        "{v:#?}"
    );
    let out = reload_and_pull(&tls_ref, &format!("  ca_file = \"{}\"\n", ca.display())).await;
    assert!(out.contains("unchanged") || out.contains("loaded"), "{out}");
    assert_eq!(
        active_digest(&agent).await.is_empty(),
        false,
        "{:#?}",
        sleeper_versions(&agent).await
    );
    // Plain HTTP off the loopback only when the block says so.
    let out = reload_and_pull(&plain_ref, "").await;
    assert!(out.contains("refused"), "{out}");
    let out = reload_and_pull(&plain_ref, "  insecure = true\n").await;
    assert!(!out.contains("refused"), "{out}");
    let active = active_entry(&agent).await.unwrap();
    assert!(
        active["Reference"]
            .as_str()
            .unwrap()
            .starts_with(&format!("oci://{}/", plain.host())),
        "{active:#}"
    );
}
