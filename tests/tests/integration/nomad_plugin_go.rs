//! go: HashiCorp's own go-plugin client (Debian's 1.0.1, the library Nomad's plugin loader
//! is built on) drives `paddock-nomad-driver`: `tests/go/nomadhost`, a small Go host, does
//! the handshake and the gRPC connection with go-plugin, calls the Nomad services through
//! clients protoc generates from `nomad-plugin/proto`, encodes the configs with go-cty's
//! msgpack as Nomad does, runs a mock task's life and kills the plugin as Nomad does.
//!
//! Go, protoc and the Go libraries are Debian packages
//! (`tests/go/nomadhost/debian-packages.txt`, which `.ci/run` installs). Where they are
//! missing this test installs them with apt-get; on a system without apt-get it says it
//! skipped, loudly. The code is generated and built at test time under
//! `target/go-nomadhost` (GOPATH mode, no network), where Go's build cache makes later runs
//! quick.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// What the host needs on PATH.
const TOOLS: &[&str] = &["go", "protoc", "protoc-gen-go", "protoc-gen-go-grpc"];

/// The Go libraries the host imports, where Debian puts them, and the well-known types'
/// protos that protoc reads.
const FILES: &[&str] = &[
    "/usr/share/gocode/src/github.com/hashicorp/go-plugin",
    "/usr/share/gocode/src/github.com/hashicorp/go-hclog",
    "/usr/share/gocode/src/github.com/zclconf/go-cty/cty/msgpack",
    "/usr/share/gocode/src/google.golang.org/grpc",
    "/usr/share/gocode/src/google.golang.org/protobuf/types/known/durationpb",
    "/usr/include/google/protobuf/duration.proto",
];

/// The steps the host reports, in order, each as `ok <step>`.
const STEPS: &[&str] = &[
    "handshake",
    "ping",
    "dispense",
    "plugin_info",
    "config_schema",
    "set_config",
    "fingerprint",
    "capabilities",
    "task_config_schema",
    "start_task",
    "wait_task_blocks",
    "exec_task",
    "exec_task_streaming",
    "stop_task",
    "wait_task",
    "destroy_task",
    "kill",
    "exited",
    "plugin_log",
];

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(dir.join(tool))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// What of the toolchain is missing, by name.
fn missing() -> Vec<String> {
    TOOLS
        .iter()
        .filter(|t| !on_path(t))
        .chain(FILES.iter().filter(|f| !Path::new(f).exists()))
        .map(|s| s.to_string())
        .collect()
}

/// apt-get update and install of the package list, as root.
async fn apt_install(packages: &Path) -> Result<(), String> {
    let list = std::fs::read_to_string(packages)
        .map_err(|e| format!("reading {}: {e}", packages.display()))?;
    let names: Vec<&str> = list.split_whitespace().collect();
    let update = tokio::process::Command::new("apt-get")
        .args(["update", "-qq"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("apt-get update: {e}"))?;
    if !update.status.success() {
        return Err(format!(
            "apt-get update: {}\n{}",
            update.status,
            String::from_utf8_lossy(&update.stderr)
        ));
    }
    let install = tokio::process::Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&names)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("apt-get install: {e}"))?;
    if !install.status.success() {
        return Err(format!(
            "apt-get install {}: {}\n{}",
            names.join(" "),
            install.status,
            String::from_utf8_lossy(&install.stderr)
        ));
    }
    Ok(())
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_go_plugin_client_drives_the_plugin() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let host = root.join("tests/go/nomadhost");
    let packages = host.join("debian-packages.txt");
    let plugin = PathBuf::from(env!("CARGO_BIN_EXE_paddock-nomad-driver"));

    let absent = missing();
    if !absent.is_empty() {
        if !on_path("apt-get") {
            // Straight to stderr, which the test harness does not capture: the skip shows
            // even though the test passes.
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!(
                    "\n*** SKIPPED: the_real_go_plugin_client_drives_the_plugin: no apt-get to \
                     install Debian's Go, protoc and go-plugin ({} missing: {}); install the \
                     packages of {} to run it ***\n\n",
                    absent.len(),
                    absent.join(", "),
                    packages.display()
                )
                .as_bytes(),
            );
            return;
        }
        if let Err(e) = apt_install(&packages).await {
            panic!(
                "missing {}; installing the packages of {} with apt-get (as root: {}) failed: {e}",
                absent.join(", "),
                packages.display(),
                rustix::process::geteuid().is_root(),
            );
        }
        let still = missing();
        assert!(
            still.is_empty(),
            "after installing {}, still missing: {}",
            packages.display(),
            still.join(", ")
        );
    }

    // Next to the plugin's own target dir: target/go-nomadhost (GOPATH, build cache, host).
    let work = plugin
        .parent()
        .and_then(Path::parent)
        .expect("the plugin binary sits in target/<profile>/")
        .join("go-nomadhost");
    let mut child = tokio::process::Command::new("sh")
        .arg(host.join("run.sh"))
        .arg(&plugin)
        .arg(&work)
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a timeout ends go, the host and the plugin alike.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .expect("running tests/go/nomadhost/run.sh");
    let pid = child.id().expect("the host's pid") as i32;
    let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let read_out = tokio::spawn(async move {
        let mut s = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut s).await;
        s
    });
    let read_err = tokio::spawn(async move {
        let mut s = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut s).await;
        s
    });
    let limit = Duration::from_secs(300);
    let status = match tokio::time::timeout(limit, child.wait()).await {
        Ok(status) => status.unwrap(),
        Err(_) => {
            if let Some(group) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
            let _ = child.wait().await;
            let out = read_out.await.unwrap_or_default();
            let err = read_err.await.unwrap_or_default();
            panic!(
                "generating, building and running the Go host took over {limit:?}\n\
                 stdout:\n{out}\nstderr (last 100 lines):\n{}",
                tail(&err, 100)
            );
        }
    };
    let out = read_out.await.unwrap();
    let err = read_err.await.unwrap();
    assert!(
        status.success(),
        "the Go host failed ({status}):\n{out}\nstderr (last 100 lines):\n{}",
        tail(&err, 100)
    );
    for step in STEPS {
        let done = out.lines().any(|l| {
            l.strip_prefix("ok ")
                .and_then(|rest| rest.strip_prefix(step))
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(" ("))
        });
        assert!(
            done,
            "the Go host did not report `ok {step}`:\n{out}\nstderr (last 100 lines):\n{}",
            tail(&err, 100)
        );
    }
}
