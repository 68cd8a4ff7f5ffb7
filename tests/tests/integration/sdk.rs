//! The guest SDKs as a third party gets them: each carries the contract's WIT (a copy of
//! the newest served `wit/<version>/`, kept equal by the first test), and they package and build from their packages
//! alone, as they would from a registry.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::repo_root as root;

/// The SDK crates (the core every SDK shares, driver, device plugin, hook, check, secret
/// provider), by folder.
const SDKS: [&str; 6] = [
    "guest-drivers/guest-core",
    "guest-drivers/sdk",
    "guest-drivers/device-sdk",
    "hooks-wasm/sdk",
    "checks-wasm/sdk",
    "secrets-wasm/sdk",
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
    let contract = wit_files(&crate::harness::contract_dir());
    let from = crate::harness::contract_dir();
    let from = from.strip_prefix(root()).unwrap().display();
    assert!(!contract.is_empty());
    for sdk in SDKS {
        let copy = wit_files(&root().join(sdk).join("wit"));
        let names = |f: &[(String, Vec<u8>)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&copy),
            names(&contract),
            "{sdk}/wit must hold the files of {from}: run `for d in {}; do cp {from}/*.wit $d/wit/; done`",
            SDKS.join(" ")
        );
        for ((name, theirs), (_, ours)) in copy.iter().zip(&contract) {
            assert!(
                theirs == ours,
                "{sdk}/wit/{name} differs from {from}/{name}: the SDKs carry the contract as it is; \
                 copy it into each SDK (`for d in {}; do cp {from}/*.wit $d/wit/; done`)",
                SDKS.join(" ")
            );
        }
    }
}

/// The target dir packaging builds in: a folder of its own, removed before each run.
const PACKAGE_TARGET: &str = "target/sdk-package";

/// `cargo package` verifies a crate against the other packed crates through a registry of
/// its own, unpacks them under `$CARGO_HOME/registry/src/-<hash>/` once per name and
/// version, and keeps what it built from them as registry crates (known by name and version
/// alone): an earlier run's SDK (the same 0.1.0, older sources) would be used instead of
/// this checkout's. So the packaging target dir goes, and of those unpacked copies the ones of
/// this repository's crates in such local registries (a name starting with `-`).
fn forget_packed_sdks() {
    let _ = std::fs::remove_dir_all(root().join(PACKAGE_TARGET));
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    let Some(src) = home.map(|h| h.join("registry/src")) else {
        return;
    };
    for registry in std::fs::read_dir(src).into_iter().flatten().flatten() {
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        for krate in std::fs::read_dir(registry.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if krate.file_name().to_string_lossy().starts_with("paddock-") {
                let _ = std::fs::remove_dir_all(krate.path());
            }
        }
    }
}

#[test]
fn the_sdks_package_and_build_from_their_packages_alone() {
    let run = |offline: bool| {
        let mut cmd = crate::harness::cargo();
        cmd.current_dir(root().join("guest-drivers")).arg("package");
        if offline {
            cmd.arg("--offline");
        }
        for p in [
            "paddock-guest-core",
            "paddock-driver-sdk",
            "paddock-device-sdk",
            "paddock-hook-sdk",
            "paddock-check-sdk",
        ] {
            cmd.args(["-p", p]);
        }
        // A checkout under test may have uncommitted changes; packaging verifies by
        // building each package from its packed sources, for the guests' target.
        cmd.args(["--allow-dirty", "--target", "wasm32-wasip2", "--target-dir"])
            .arg(root().join(PACKAGE_TARGET));
        cmd.output().expect("running cargo package")
    };
    forget_packed_sdks();
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
        "paddock-check-sdk",
    ] {
        assert!(
            stderr.contains(&format!("Verifying {sdk} v")),
            "{sdk} was not built from its package:\n{stderr}"
        );
        let packed = root().join(format!("{PACKAGE_TARGET}/package/{sdk}-0.1.0.crate"));
        assert!(packed.is_file(), "{} is missing", packed.display());
    }
}

fn sleeper_job(id: &str, kind: &str, config: serde_json::Value) -> serde_json::Value {
    serde_json::json!({ "ID": id, "Type": kind, "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0 }, "Tasks": [{ "Name": "t", "Driver": "sleeper",
        "Config": config, "KillTimeout": 1_000_000_000u64 }] }] })
}

/// The SDK's 60-line example driver, built from `guest-drivers/sleeper`, loaded from a
/// components folder: its config checks name every wrong field, it sleeps by the host's
/// timer, and a stop ends it with the job's kill signal.
#[tokio::test]
async fn the_sleeper_driver_from_the_sdk_validates_sleeps_stops_and_reports_stats() {
    use crate::harness::{TestAgent, all_terminal, last_terminated};
    use serde_json::json;
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    let a = guest_artifacts::SLEEPER_DRIVER;
    std::fs::write(dir.path().join(a.file_name), a.bytes).unwrap();
    let t = TestAgent::start("", vec![dir.path().to_path_buf()]).await;

    // Every wrong field in one answer, named by its path.
    let (status, v) = t
        .post(
            "/v1/validate/job",
            json!({ "Job": sleeper_job("bad", "batch", json!({ "seconds": "soon", "colour": 1 })) }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let errors = v["ValidationErrors"].to_string();
    assert!(
        errors.contains("Tasks[0].Config.colour: unknown field"),
        "{v}"
    );
    assert!(
        errors.contains("Tasks[0].Config.seconds: invalid type: string"),
        "{v}"
    );
    let (_, v) = t
        .post(
            "/v1/validate/job",
            json!({ "Job": sleeper_job("long", "batch", json!({ "seconds": 90000 })) }),
        )
        .await;
    assert!(
        v["ValidationErrors"]
            .to_string()
            .contains("Config.seconds: must be <= 86400"),
        "{v}"
    );

    // A one-second sleep, to the end.
    let started = Instant::now();
    t.post_job(sleeper_job("nap", "batch", json!({ "seconds": 1 })))
        .await;
    let allocs = t
        .wait_allocs("nap", Duration::from_secs(20), all_terminal)
        .await;
    assert!(started.elapsed() >= Duration::from_secs(1));
    let alloc = t
        .get(&format!(
            "/v1/allocation/{}",
            allocs[0]["ID"].as_str().unwrap()
        ))
        .await;
    assert_eq!(alloc["ClientStatus"], "complete", "{alloc:#}");
    assert_eq!(last_terminated(&alloc, "t")["ExitCode"], 0, "{alloc:#}");

    // An hour's sleep: running, with stats; stopped, it ends by the kill signal.
    t.post_job(sleeper_job("long", "service", json!({ "seconds": 3600 })))
        .await;
    let allocs = t
        .wait_allocs("long", Duration::from_secs(20), |a| {
            a.iter().any(|a| a["ClientStatus"] == "running")
        })
        .await;
    let id = allocs[0]["ID"].as_str().unwrap().to_string();
    let stats = t.get(&format!("/v1/client/allocation/{id}/stats")).await;
    assert!(stats["Tasks"]["t"].is_object(), "{stats:#}");
    let (status, _) = t.send(reqwest::Method::DELETE, "/v1/job/long", None).await;
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(20);
    let alloc = loop {
        let alloc = t.get(&format!("/v1/allocation/{id}")).await;
        if alloc["TaskStates"]["t"]["State"] == "dead" {
            break alloc;
        }
        assert!(Instant::now() < deadline, "not stopped: {alloc:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        last_terminated(&alloc, "t")["Signal"],
        2,
        "SIGINT, Nomad's default kill_signal: {alloc:#}"
    );
}

/// `agent component check` over every component the repository ships passes (warnings
/// allowed), and over broken ones fails naming the check: a driver that traps in `recover`
/// (the mock, told to), and a file that is no Paddock component.
#[test]
fn component_check_passes_every_shipped_component_and_fails_broken_ones() {
    let dir = tempfile::tempdir().unwrap();
    let check = |a: guest_artifacts::Artifact, args: &[&str]| {
        let file = dir.path().join(a.file_name);
        std::fs::write(&file, a.bytes).unwrap();
        let out = Command::new(crate::harness::agent_bin())
            .args(["component", "check"])
            .arg(&file)
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.code(), text)
    };
    let sleep = r#"{"command": "/bin/sleep", "args": ["30"]}"#;
    for (a, args) in [
        (
            guest_artifacts::MOCK_DRIVER,
            vec!["--task-config", r#"{"run_for": "30s"}"#],
        ),
        (
            guest_artifacts::SLEEPER_DRIVER,
            vec!["--task-config", r#"{"seconds": 30}"#],
        ),
        (
            guest_artifacts::RAW_EXEC_DRIVER,
            vec!["--process", "/bin/sleep", "--task-config", sleep],
        ),
        (
            guest_artifacts::EXEC_DRIVER,
            vec![
                "--process",
                "/bin/sleep",
                "--grant",
                "isolation",
                "--task-config",
                sleep,
            ],
        ),
        (guest_artifacts::ENV_INJECT_HOOK, vec![]),
        (guest_artifacts::POLICY_HOOK, vec![]),
        (guest_artifacts::TEMPLATE_HOOK, vec![]),
        (guest_artifacts::MOCK_DEVICE, vec![]),
        (
            guest_artifacts::HOST_DEVICES,
            vec!["--read", "/sys", "--read", "/dev"],
        ),
    ] {
        let (code, text) = check(a, &args);
        assert_eq!(code, Some(0), "{}:\n{text}", a.file_name);
        assert!(!text.contains("FAIL"), "{}:\n{text}", a.file_name);
        assert!(text.contains(" 0 failed"), "{}:\n{text}", a.file_name);
    }
    // A driver's checks are the whole lifecycle.
    let (_, text) = check(
        guest_artifacts::MOCK_DRIVER,
        &["--task-config", r#"{"run_for": "30s"}"#],
    );
    for line in [
        "pass  validate-config (unknown field)",
        "pass  recover (damaged handle)",
        "pass  destroy (running, not forced)",
        "pass  stop: exited after stop",
        "pass  two tasks at once",
        "pass  limits: memory: an instance held at most",
    ] {
        assert!(text.contains(line), "{line}:\n{text}");
    }

    let (code, text) = check(
        guest_artifacts::MOCK_DRIVER,
        &[
            "--task-config",
            r#"{"run_for": "30s"}"#,
            "--config",
            r#"{"misbehave": {"op": "recover", "kind": "trap"}}"#,
        ],
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("FAIL  recover: component \"mock\" trapped in recover"),
        "{text}"
    );
    assert!(
        text.contains("after an agent restart this task would be lost"),
        "{text}"
    );
    let (code, text) = check(guest_artifacts::FIXTURE_UNKNOWN_WORLD, &[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("FAIL  load:") && text.contains("exports no Paddock world"),
        "{text}"
    );
}
