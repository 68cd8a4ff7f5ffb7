//! The frozen contract: components built once against `paddock:plugin@0.1.0` (one per world,
//! `tests/fixtures/contract-0.1.0`, never rebuilt) keep loading, keep the contract and run
//! jobs on this agent, as third parties' components built then must.

use std::path::PathBuf;
use std::process::Command;

use serde_json::json;

use crate::harness::{TestAgent, agent_bin, repo_root, stdout_of};

fn fixtures() -> PathBuf {
    repo_root().join("tests/fixtures/contract-0.1.0")
}

/// Each frozen file, its world, and the `component check` flags it is checked with.
const FROZEN: [(&str, &str, &[&str]); 3] = [
    (
        "sleeper_driver.wasm",
        "driver",
        &["--task-config", r#"{"seconds": 30}"#],
    ),
    (
        "env_inject_hook.wasm",
        "hook",
        &[
            "--grant",
            "env",
            "--config",
            r#"{"env": {"A": "${NOMAD_TASK_NAME}"}}"#,
        ],
    ),
    ("mock_device.wasm", "device-plugin", &[]),
];

fn agent(args: &[&str]) -> (bool, String) {
    let out = Command::new(agent_bin()).args(args).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn the_frozen_components_are_unchanged_load_and_keep_the_contract() {
    let sums = Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(fixtures())
        .output()
        .unwrap();
    assert!(
        sums.status.success(),
        "a frozen component changed: {}",
        String::from_utf8_lossy(&sums.stdout)
    );
    for (file, world, flags) in FROZEN {
        let path = fixtures().join(file);
        let path = path.to_str().unwrap();
        let (ok, text) = agent(&["component", "validate", path]);
        assert!(ok, "{text}");
        assert!(
            text.contains(&format!("ok: {world} component"))
                && text.contains("paddock:plugin@0.1.0"),
            "{text}"
        );
        let mut args = vec!["component", "check", path];
        args.extend_from_slice(flags);
        let (ok, report) = agent(&args);
        assert!(ok && !report.contains("FAIL"), "{file}:\n{report}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_through_the_frozen_driver_hook_and_device_plugin() {
    let dir = tempfile::tempdir().unwrap();
    for (file, _, _) in FROZEN {
        std::fs::copy(fixtures().join(file), dir.path().join(file)).unwrap();
    }
    let config = r#"
plugin "env-inject" {
  grant {
    env = true
  }
  config {
    env = {
      FROZEN = "hook 0.1.0 for ${NOMAD_TASK_NAME}"
    }
  }
}
hook "env-inject" {
  all_tasks = true
}
"#;
    let t = TestAgent::start(config, vec![dir.path().to_path_buf()]).await;
    // The frozen files serve, not the built-in components of the same names.
    let components = t.get("/v1/components").await;
    for (file, _, _) in FROZEN {
        let sums = std::fs::read_to_string(fixtures().join("SHA256SUMS")).unwrap();
        let sha = sums
            .lines()
            .find(|l| l.ends_with(file))
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        assert!(
            components.to_string().contains(sha),
            "{file} ({sha}) is not loaded: {components:#}"
        );
    }
    let job = json!({ "ID": "frozen", "Type": "batch", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0 },
        "Tasks": [
            { "Name": "sleep", "Driver": "sleeper", "Config": { "seconds": 1 } },
            { "Name": "t", "Driver": "raw_exec",
              "Config": { "command": "/bin/sh", "args": ["-c", "echo \"$FROZEN|$MOCK_DEVICE_IDS\""] },
              "Resources": { "CPU": 100, "MemoryMB": 64,
                  "Devices": [{ "Name": "paddock/mock/mock-device", "Count": 1 }] } }
        ] }] });
    t.post_job(job).await;
    let (alloc, out) = stdout_of(&t, "frozen").await;
    assert_eq!(alloc["ClientStatus"], "complete", "{alloc:#}");
    let (env, ids) = out.trim_end().split_once('|').unwrap();
    assert_eq!(env, "hook 0.1.0 for t");
    assert!(ids.starts_with("mock-"), "{out}");
    let sleep = crate::harness::last_terminated(&alloc, "sleep");
    assert_eq!(sleep["ExitCode"], 0, "{alloc:#}");
}
