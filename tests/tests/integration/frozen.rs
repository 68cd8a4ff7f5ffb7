//! The frozen contract: components built once against `paddock:plugin@0.1.0`
//! (`tests/fixtures/contract-0.1.0`, never rebuilt), one of each world and together
//! importing every host interface, keep loading, keep the contract and run jobs on this
//! agent, as third parties' components built then must.

use std::path::PathBuf;
use std::process::Command;

use serde_json::json;

use crate::harness::{TestAgent, agent_bin, repo_root};

fn fixtures() -> PathBuf {
    repo_root().join("tests/fixtures/contract-0.1.0")
}

/// Each frozen file, its world, the name it reports, the host interfaces it imports, and
/// the `component check` flags it is checked with.
const FROZEN: [(&str, &str, &str, &[&str], &[&str]); 6] = [
    (
        "sleeper_driver.wasm",
        "driver",
        "sleeper",
        &["timer"],
        &["--task-config", r#"{"seconds": 30}"#],
    ),
    (
        "env_inject_hook.wasm",
        "hook",
        "env-inject",
        &["config", "env"],
        &[
            "--grant",
            "env",
            "--config",
            r#"{"env": {"A": "${NOMAD_TASK_NAME}"}}"#,
        ],
    ),
    (
        "mock_device.wasm",
        "device-plugin",
        "mock-device",
        &["config", "timer"],
        &[],
    ),
    (
        "mock_driver.wasm",
        "driver",
        "mock",
        &[
            "log",
            "config",
            "env",
            "devices",
            "timer",
            "events",
            "task-logs",
        ],
        &[
            "--grant",
            "env,devices,events",
            "--task-config",
            r#"{"run_for": "30s", "stdout_string": "${NOMAD_TASK_NAME}", "stdout_interpolate": true, "stdout_devices": true}"#,
        ],
    ),
    (
        "exec_driver.wasm",
        "driver",
        "exec",
        &["config", "process", "timer"],
        &[
            "--process",
            "/bin/sleep",
            "--grant",
            "isolation",
            "--task-config",
            r#"{"command": "/bin/sleep", "args": ["30"]}"#,
        ],
    ),
    (
        "template_hook.wasm",
        "hook",
        "template",
        &["log", "env", "variables"],
        &["--grant", "env,task_dir,variables"],
    ),
];

/// Every host interface of contract 0.1.0.
const HOST_INTERFACES: [&str; 9] = [
    "log",
    "config",
    "env",
    "devices",
    "process",
    "timer",
    "events",
    "task-logs",
    "variables",
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

fn sha256_of(file: &str) -> String {
    let sums = std::fs::read_to_string(fixtures().join("SHA256SUMS")).unwrap();
    sums.lines()
        .find(|l| l.ends_with(&format!(" {file}")))
        .unwrap_or_else(|| panic!("{file} is not in SHA256SUMS"))
        .split(' ')
        .next()
        .unwrap()
        .to_string()
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
    // Together they import every host interface and export every world.
    for iface in HOST_INTERFACES {
        assert!(
            FROZEN
                .iter()
                .any(|(_, _, _, imports, _)| imports.contains(&iface)),
            "no frozen component imports {iface}"
        );
    }
    for world in ["driver", "hook", "device-plugin"] {
        assert!(FROZEN.iter().any(|(_, w, ..)| *w == world), "{world}");
    }
    for (file, world, name, imports, flags) in FROZEN {
        let path = fixtures().join(file);
        let path = path.to_str().unwrap();
        let (ok, text) = agent(&["component", "validate", path]);
        assert!(ok, "{text}");
        assert!(
            text.contains(&format!("ok: {world} component"))
                && text.contains("paddock:plugin@0.1.0"),
            "{text}"
        );
        let (ok, text) = agent(&["component", "inspect", path]);
        assert!(
            ok && text.contains(&format!("Name         = {name}")),
            "{text}"
        );
        for iface in imports {
            assert!(
                text.contains(&format!("paddock:plugin/{iface}@0.1.0")),
                "{file} does not import {iface}:\n{text}"
            );
        }
        let mut args = vec!["component", "check", path];
        args.extend_from_slice(flags);
        let (ok, report) = agent(&args);
        assert!(ok && !report.contains("FAIL"), "{file}:\n{report}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_through_every_frozen_component() {
    let dir = tempfile::tempdir().unwrap();
    for (file, ..) in FROZEN {
        std::fs::copy(fixtures().join(file), dir.path().join(file)).unwrap();
    }
    // Each block binds its name to the frozen file, as an operator binds a file whose name
    // is not `<name>.wasm`; `mock_device.wasm` is `mock-device`'s by its name.
    let config = r#"
plugin "sleeper" {
  file = "sleeper_driver.wasm"
}
plugin "env-inject" {
  file = "env_inject_hook.wasm"
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
plugin "mock" {
  file = "mock_driver.wasm"
  grant {
    env     = true
    devices = true
    events  = true
  }
}
plugin "exec" {
  file = "exec_driver.wasm"
  grant {
    process   = ["/bin/*", "/usr/bin/*"]
    isolation = true
  }
}
plugin "template" {
  file = "template_hook.wasm"
  grant {
    env       = true
    task_dir  = true
    variables = true
  }
}
"#;
    let t = TestAgent::start(config, vec![dir.path().to_path_buf()]).await;
    // The frozen files serve, not the built-in components of the same names.
    let components = t.get("/v1/components").await;
    for (file, _, name, ..) in FROZEN {
        let sha = sha256_of(file);
        let serving = components["Components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["Name"] == name && c["State"] != "draining")
            .unwrap_or_else(|| panic!("{name} is not loaded: {components:#}"));
        assert_eq!(
            serving["SHA256"], sha,
            "{name} is not served by the frozen {file}: {components:#}"
        );
    }
    let (status, v) = t
        .send(
            reqwest::Method::PUT,
            "/v1/var/nomad/jobs/frozen",
            Some(json!({ "Items": { "word": "from a variable" } })),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let job = json!({ "ID": "frozen", "Type": "batch", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0 },
        "Tasks": [
            { "Name": "sleep", "Driver": "sleeper", "Config": { "seconds": 1 } },
            { "Name": "m", "Driver": "mock",
              "Config": { "stdout_string": "${FROZEN}\n", "stdout_interpolate": true,
                          "stdout_devices": true, "driver_event": "frozen mock event" },
              "Resources": { "CPU": 100, "MemoryMB": 64,
                  "Devices": [{ "Name": "paddock/mock/mock-device", "Count": 1 }] } },
            { "Name": "t", "Driver": "exec",
              "Config": { "command": "/bin/sh", "args": ["-c", "echo \"$FROZEN|$(cat local/out.txt)\""] },
              "Templates": [{ "EmbeddedTmpl": "{{ with nomadVar \"nomad/jobs/frozen\" }}{{ .word }}{{ end }}",
                              "DestPath": "local/out.txt" }] }
        ] }] });
    t.post_job(job).await;
    let alloc = t.finished_alloc("frozen").await;
    let id = alloc["ID"].as_str().unwrap();
    let log = |task: &str| {
        std::fs::read_to_string(
            t.agent
                .alloc_root()
                .join(id)
                .join(format!("alloc/logs/{task}.stdout.0")),
        )
        .unwrap_or_default()
    };
    assert_eq!(alloc["ClientStatus"], "complete", "{alloc:#}");
    // exec (process, isolated), template (variables) and env-inject (env).
    assert_eq!(log("t"), "hook 0.1.0 for t|from a variable\n", "{alloc:#}");
    // mock (env, devices, task-logs) over the frozen device plugin's reservation.
    let mock = log("m");
    let mut lines = mock.lines();
    assert_eq!(lines.next(), Some("hook 0.1.0 for m"), "{mock}");
    assert!(
        lines.any(|l| l.starts_with("env MOCK_DEVICE_IDS=mock-")),
        "{mock}"
    );
    // mock (events): its event reached the task.
    assert!(
        alloc["TaskStates"]["m"]["Events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["DisplayMessage"] == "frozen mock event"),
        "{alloc:#}"
    );
    let sleep = crate::harness::last_terminated(&alloc, "sleep");
    assert_eq!(sleep["ExitCode"], 0, "{alloc:#}");
}
