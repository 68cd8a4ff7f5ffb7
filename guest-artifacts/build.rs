//! Builds the repo's guest components for `wasm32-wasip2` with one nested cargo, once per
//! build, into `<root>/target/wasm-guests`, and hands their paths to `src/lib.rs`.
//!
//! The guests form one workspace of their own, rooted at `guest-drivers/Cargo.toml` and also
//! covering the crates in `hooks-wasm/`: as members of the root workspace their cdylibs would
//! fail to link for the host target.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

/// The guest workspace's root manifest, relative to the repo root.
const WORKSPACE_MANIFEST: &str = "guest-drivers/Cargo.toml";

/// The folders holding guest crates; a change to any source in them rebuilds the guests.
const GUEST_DIRS: &[&str] = &["guest-drivers", "hooks-wasm", "checks-wasm", "secrets-wasm"];

/// The crate file stem of every `.wasm` this crate exposes.
const ARTIFACTS: &[&str] = &[
    "mock_driver",
    "raw_exec_driver",
    "exec_driver",
    "sleeper_driver",
    "mock_device",
    "host_devices",
    "fixture_future_version",
    "fixture_unknown_world",
    "fixture_mismatched_hook",
    "fixture_hostile",
    "env_inject_hook",
    "policy_hook",
    "template_hook",
    "artifact_hook",
    "fixture_env_hook",
    "fixture_versioned_hook",
    "fixture_hostile_hook",
    "redis_ping_check",
    "fixture_hostile_check",
    "nomad_secrets",
];

/// The SDK crates whose sources `sources.rs` carries, for the projects `agent component new`
/// writes: each as (crate folder relative to the repo root, package name).
const SDK_CRATES: &[(&str, &str)] = &[
    ("guest-drivers/guest-core", "paddock-guest-core"),
    ("guest-drivers/sdk", "paddock-driver-sdk"),
    ("guest-drivers/device-sdk", "paddock-device-sdk"),
    ("hooks-wasm/sdk", "paddock-hook-sdk"),
    ("checks-wasm/sdk", "paddock-check-sdk"),
    ("secrets-wasm/sdk", "paddock-secret-sdk"),
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
    write_sdk_sources(&root);
    ensure_target();

    for dir in GUEST_DIRS {
        watch_dir(&root.join(dir));
    }
    let mut cmd = Command::new(&cargo);
    cmd.args(["build", "--release", "--target", TARGET, "--manifest-path"])
        .arg(root.join(WORKSPACE_MANIFEST))
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
            "building the guest components ({WORKSPACE_MANIFEST}) failed:\n{}\n\
             If the error says the target is missing, run: rustup target add {TARGET}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for name in ARTIFACTS {
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

/// Writes `$OUT_DIR/sdk_sources.rs`: every file of the SDK crates (manifest, `src/`, `wit/`),
/// each included by its absolute path, so a new file is carried without a list to keep.
fn write_sdk_sources(root: &Path) {
    let mut out = String::from("&[\n");
    for (dir, package) in SDK_CRATES {
        let mut files = Vec::new();
        collect_files(&root.join(dir), &root.join(dir), &mut files);
        files.sort();
        for rel in files {
            let abs = root.join(dir).join(&rel);
            out.push_str(&format!(
                "    SdkFile {{ package: {package:?}, path: {rel:?}, text: include_str!({abs:?}) }},\n",
                abs = abs.display().to_string(),
            ));
        }
    }
    out.push_str("]\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("sdk_sources.rs");
    std::fs::write(dest, out).expect("write sdk_sources.rs");
}

/// The files under `dir` (relative to `base`, `/`-separated), target dirs left out.
fn collect_files(base: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name() == "target" {
            continue;
        }
        if path.is_dir() {
            collect_files(base, &path, out);
        } else if let Ok(rel) = path.strip_prefix(base) {
            out.push(rel.to_string_lossy().replace('\\', "/"));
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

/// Re-run when any source in a guest folder changes, but never watch a target dir (a
/// `cargo build` run inside the folder would leave one there).
fn watch_dir(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
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
