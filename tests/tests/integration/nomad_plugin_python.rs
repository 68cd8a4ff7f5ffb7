//! An independent client of `paddock-nomad-driver`, written in Python from the `.proto` files
//! (`tests/python/nomad_plugin/test_nomad_plugin.py`): it compiles them with grpcio-tools,
//! starts the binary as Nomad's client does and drives the go-plugin handshake, the
//! `BasePlugin` and `Driver` services and go-plugin's `Shutdown`, with config as Nomad's cty
//! msgpack. Its packages (`tests/python/nomad_plugin/requirements.txt`) are installed by
//! `.ci/run`; where they are missing, this test installs them from PyPI into
//! `target/python-deps-nomad-plugin` first.

use std::path::PathBuf;
use std::time::Duration;

/// The cases the suite holds: all must run, none skipped.
const CASES: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_drives_the_plugin() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/nomad_plugin");
    let (python, deps) = crate::harness::python_with(
        "grpc, grpc_tools, grpc_health, msgpack",
        &dir.join("requirements.txt"),
        "python-deps-nomad-plugin",
    )
    .await;
    let run = tokio::process::Command::new(&python)
        .arg(dir.join("test_nomad_plugin.py"))
        .env(
            "PADDOCK_NOMAD_DRIVER",
            env!("CARGO_BIN_EXE_paddock-nomad-driver"),
        )
        .env("PYTHONPATH", &deps)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the Python client's suite did not finish in 5 minutes")
        .unwrap();
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python client's suite failed:\n{report}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Every case ran (none skipped or left out).
    assert!(report.contains(&format!("Ran {CASES} tests")), "{report}");
    assert!(!report.contains("skipped"), "{report}");
}
