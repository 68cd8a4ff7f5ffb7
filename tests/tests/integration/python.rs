//! python-nomad, from PyPI, drives a real agent the way a user's script would:
//! `tests/python/test_python_nomad.py`. Its packages (`tests/python/requirements.txt`) are
//! installed by `.ci/run`; where they are missing, this test installs them from PyPI into
//! `target/python-deps` first, so `cargo test --workspace` needs nothing else. The agent
//! requires an ACL token, so the suite also shows that every call without it is refused.

use std::path::PathBuf;
use std::time::Duration;

use crate::harness::TestAgent;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_nomad_suite() {
    let t = TestAgent::start("acl {\n  token = \"py-s3cret\"\n}\n", vec![]).await;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python");
    let (python, deps) = crate::harness::python_with(
        "nomad, prometheus_client",
        &dir.join("requirements.txt"),
        "python-deps",
    )
    .await;
    let run = tokio::process::Command::new(&python)
        .arg(dir.join("test_python_nomad.py"))
        .env("PYTHONPATH", &deps)
        .env("PADDOCK_ADDR", &t.base)
        .env("PADDOCK_TOKEN", "py-s3cret")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output();
    let out = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the python-nomad suite did not finish in 5 minutes")
        .unwrap();
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python-nomad suite failed:\n{report}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Every case ran (none skipped or left out).
    assert!(report.contains("Ran 9 tests"), "{report}");
    assert!(!report.contains("skipped"), "{report}");
}

/// python-nomad's own upstream test suite (the `tests/` of its PyPI source distribution),
/// run by `tests/python/upstream/run.py` against the real agent binary: the tests that
/// fail must be exactly those listed, with reasons, in `expected_failures.txt` (ACL and
/// deployments, and upstream's own bugs), so a new failure, or a listed test that now
/// passes, fails this test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_nomad_upstream_suite() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let run = tokio::process::Command::new(&python)
        .arg(root.join("tests/python/upstream/run.py"))
        .env("PADDOCK_AGENT", crate::harness::agent_bin())
        .env("PADDOCK_CACHE_DIR", crate::harness::shared_cache_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(&root)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(900), run)
        .await
        .expect("python-nomad's upstream suite did not finish in 15 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python-nomad's upstream suite: unexpected results\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("288 tests") || stderr.contains("288 tests"),
        "{stdout}\n{stderr}"
    );
}
