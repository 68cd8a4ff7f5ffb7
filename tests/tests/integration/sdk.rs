//! The guest SDKs as a third party gets them: each carries the contract's WIT (a copy of
//! `wit/`, kept equal by the first test), and they package and build from their packages
//! alone, as they would from a registry.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The SDK crates (the core every SDK shares, driver, device plugin, hook), by folder.
const SDKS: [&str; 4] = [
    "guest-drivers/guest-core",
    "guest-drivers/sdk",
    "guest-drivers/device-sdk",
    "hooks-wasm/sdk",
];

fn wit_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn every_sdk_carries_the_contract_wit_unchanged() {
    let contract = wit_files(&root().join("wit"));
    assert!(!contract.is_empty());
    for sdk in SDKS {
        let copy = wit_files(&root().join(sdk).join("wit"));
        let names = |f: &[(String, Vec<u8>)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&copy),
            names(&contract),
            "{sdk}/wit must hold the files of wit/: run `for d in {}; do cp wit/*.wit $d/wit/; done`",
            SDKS.join(" ")
        );
        for ((name, theirs), (_, ours)) in copy.iter().zip(&contract) {
            assert!(
                theirs == ours,
                "{sdk}/wit/{name} differs from wit/{name}: the SDKs carry the contract as it is; \
                 copy wit/ into each SDK (`for d in {}; do cp wit/*.wit $d/wit/; done`)",
                SDKS.join(" ")
            );
        }
    }
}

#[test]
fn the_sdks_package_and_build_from_their_packages_alone() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let run = |offline: bool| {
        let mut cmd = Command::new(&cargo);
        cmd.current_dir(root().join("guest-drivers")).arg("package");
        if offline {
            cmd.arg("--offline");
        }
        for p in [
            "paddock-guest-core",
            "paddock-driver-sdk",
            "paddock-device-sdk",
            "paddock-hook-sdk",
        ] {
            cmd.args(["-p", p]);
        }
        // A checkout under test may have uncommitted changes; packaging verifies by
        // building each package from its packed sources, for the guests' target.
        cmd.args(["--allow-dirty", "--target", "wasm32-wasip2", "--target-dir"])
            .arg(root().join("target/wasm-guests"));
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
        cmd.output().expect("running cargo package")
    };
    // Offline first (the guests' build has fetched every dependency); the registry's index
    // only when that is not enough.
    let mut out = run(true);
    if !out.status.success() {
        out = run(false);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo package failed:\n{stderr}");
    for sdk in [
        "paddock-driver-sdk",
        "paddock-device-sdk",
        "paddock-hook-sdk",
    ] {
        assert!(
            stderr.contains(&format!("Verifying {sdk} v")),
            "{sdk} was not built from its package:\n{stderr}"
        );
        let packed = root().join(format!("target/wasm-guests/package/{sdk}-0.1.0.crate"));
        assert!(packed.is_file(), "{} is missing", packed.display());
    }
}
