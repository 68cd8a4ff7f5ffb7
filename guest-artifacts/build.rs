//! Builds the repo's guest components for `wasm32-wasip2` with a nested cargo, once per
//! build, into `<root>/target/wasm-guests`, and hands their paths to `src/lib.rs`.
//!
//! The guests live in their own workspaces (`guest-drivers/`, `hooks-wasm/`): as members of
//! the root workspace their cdylibs would fail to link for the host target.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

/// (workspace dir, artifact crate file stems) — every `.wasm` this crate exposes.
const WORKSPACES: &[(&str, &[&str])] = &[
    (
        "guest-drivers",
        &[
            "mock_driver",
            "raw_exec_driver",
            "mock_device",
            "fixture_future_version",
            "fixture_unknown_world",
            "fixture_mismatched_hook",
        ],
    ),
    (
        "hooks-wasm",
        &[
            "env_inject_hook",
            "policy_hook",
            "template_hook",
            "fixture_env_hook",
        ],
    ),
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir
        .parent()
        .expect("guest-artifacts lives in the repo root")
        .to_path_buf();
    let target_dir = root.join("target").join("wasm-guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());

    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    ensure_target();

    for (ws, artifacts) in WORKSPACES {
        let ws_dir = root.join(ws);
        watch_workspace(&ws_dir);
        let mut cmd = Command::new(&cargo);
        cmd.args(["build", "--release", "--target", TARGET, "--manifest-path"])
            .arg(ws_dir.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target_dir);
        // The outer build's flags and wrappers are for the host target; a different
        // target dir avoids deadlocking on the outer build-directory lock.
        for var in [
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTFLAGS",
            "CARGO_BUILD_RUSTFLAGS",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET",
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_PKG_NAME",
        ] {
            cmd.env_remove(var);
        }
        let out = cmd.output().expect("failed to run cargo for the guests");
        if !out.status.success() {
            panic!(
                "building the guest components in {ws}/ failed:\n{}\n\
                 If the error says the target is missing, run: rustup target add {TARGET}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for name in *artifacts {
            let path = target_dir
                .join(TARGET)
                .join("release")
                .join(format!("{name}.wasm"));
            assert!(
                path.exists(),
                "guest build did not produce {}",
                path.display()
            );
            println!(
                "cargo:rustc-env=PADDOCK_GUEST_{}={}",
                name.to_uppercase(),
                path.display()
            );
        }
    }
}

/// Adds the wasm target when it is missing. A `rust-toolchain.toml` cannot be relied on:
/// with auto-install off it leaves the target missing, with it on it upgrades the toolchain.
fn ensure_target() {
    let sysroot = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let installed = sysroot
        .map(|s| Path::new(&s).join("lib/rustlib").join(TARGET).exists())
        .unwrap_or(false);
    if installed {
        return;
    }
    let added = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !added {
        panic!(
            "the Rust target {TARGET} is missing and could not be added; run: rustup target add {TARGET}"
        );
    }
}

/// Re-run when any source of the workspace changes, but never watch its target dir.
fn watch_workspace(ws_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(ws_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name == "target" {
            continue;
        }
        println!("cargo:rerun-if-changed={}", entry.path().display());
    }
}
