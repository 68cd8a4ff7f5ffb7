//! Commands a test runs as a user would in a project of its own (the SDKs' packages, a
//! generated plugin, the guide's commands): cargo without the outer build's flags, wrappers
//! and target dir, which are for the host's test build, and `agent` on `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The folder of the newest contract version this agent serves (`wit/<version>/`): the
/// WIT the SDKs carry and third parties build against.
pub fn contract_dir() -> PathBuf {
    let newest = paddock::runtime::contract::SERVED
        .iter()
        .max_by_key(|v| paddock::runtime::contract::Version::parse(v))
        .unwrap();
    repo_root().join("wit").join(newest)
}

/// `cargo` (the one running the tests), with the outer build's environment removed.
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// One cargo build dir (`build.build-dir`: where cargo keeps what it compiles on the way,
/// apart from the target dir a project's own artifacts land in) for every generated
/// project a test run builds: the Rust projects of `component new` and the guide's. Their
/// registry dependencies (wit-bindgen and what it compiles with) are compiled once per
/// run instead of once per project, and each project's `.wasm` still lands where its
/// README says. Not for the SDKs' packaging: packed crates are known by name and version
/// alone, and an older pack's build would be taken for this one.
pub fn shared_build_dir() -> PathBuf {
    repo_root().join("target/generated-build")
}

/// A `PATH` whose first folder, `dir/bin`, holds `agent`: the agent binary under test.
pub fn path_with_agent(dir: &Path) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let _ = std::fs::remove_file(bin.join("agent"));
    std::os::unix::fs::symlink(super::agent_bin(), bin.join("agent")).unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}
