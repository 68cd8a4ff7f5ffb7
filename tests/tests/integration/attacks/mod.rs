//! The attacker's suite: each hole an attacker found in the host's capabilities (issue 31),
//! tried again against a real agent process run as root, as the README runs it, asserting
//! the promise: nothing outside the grant is read, written, run, chowned or signalled; the
//! agent comes back after a restart; other tasks and namespaces are untouched.
//!
//! The attackers are the `hostile` driver and the `hostile-hook` hook (guest fixtures, built
//! with the guests, one attack per task config option or task meta key), a job submitter
//! with an ordinary token, and an API client. `docs/security.md` lists each attack and the
//! test that runs it. A new host capability adds its attacks here.
//!
//! - [`process`]: what a guest hands `process.spawn` and `spawn-isolated` (env, output
//!   paths, isolation, users, capabilities, pids) — holes 1, 2, 3 and 8;
//! - [`files`]: links a task or a hook leaves in its folders — holes 4 and 6, hook env 7;
//! - [`components`]: names, sizes, memory, events, logs, wake-ups, the breaker — holes 9,
//!   11, 12, 13 and the low ones;
//! - [`api`]: names and ids a job gives, variables, the event stream, connections — holes 5
//!   and 10 and the API client's;
//! - [`registry`]: what a registry a plugin block names serves (another name, past the size
//!   limit, not a component, a replayed signature), a file taking a pulled plugin's name, a
//!   cache altered on disk.

mod api;
mod components;
mod exec;
mod files;
mod network;
mod process;
mod registry;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{AgentProcess, NODE_DISK, all_terminal};

/// An agent process with the hostile driver (bound to its file, granted `/usr/bin/sleep`,
/// `<dir>/allowed/*`, events and isolation) and the hostile hook (granted the task dir), a
/// raw_exec granted `/usr/bin/sleep` and `/usr/bin/seq` only, and `extra` config.
async fn agent(dir: &Path, hostile_grant: &str, extra: &str) -> AgentProcess {
    let comps = dir.join("components");
    let hooks = dir.join("hooks");
    for (d, a) in [
        (&comps, guest_artifacts::FIXTURE_HOSTILE),
        (&hooks, guest_artifacts::FIXTURE_HOSTILE_HOOK),
    ] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join(a.file_name), a.bytes).unwrap();
    }
    std::fs::create_dir_all(dir.join("allowed")).unwrap();
    let config = format!(
        r#"{NODE_DISK}
plugin "hostile" {{
  file = "fixture_hostile.wasm"
  grant {{
    process   = ["/usr/bin/sleep", "{dir}/allowed/*"]
    events    = true
    isolation = true
    {hostile_grant}
  }}
  limits {{
    call_timeout = "5s"
    memory_mb    = 64
  }}
}}
plugin "hostile-hook" {{
  file = "fixture_hostile_hook.wasm"
  grant {{
    task_dir = true
  }}
}}
plugin "raw_exec" {{
  grant {{
    process    = ["/usr/bin/sleep", "/usr/bin/seq"]
    loader_env = ["LD_LIBRARY_PATH"]
  }}
}}
{extra}
"#,
        dir = dir.display()
    );
    let file = dir.join("attack.hcl");
    std::fs::write(&file, baseline(config)).unwrap();
    let mut a = AgentProcess::new(dir);
    a.args = vec![
        "--components".into(),
        comps.display().to_string(),
        "--hooks".into(),
        hooks.display().to_string(),
        "--config".into(),
        file.display().to_string(),
    ];
    a.start().await;
    a
}

/// The config as an agent from before the walls reads it, when `PADDOCK_ATTACK_BASELINE`
/// is set (with `PADDOCK_AGENT_BIN` naming that agent): the keys it did not know are left
/// out, so the suite shows each hole open on it. Unset, the config as written.
fn baseline(config: String) -> String {
    if std::env::var_os("PADDOCK_ATTACK_BASELINE").is_none() {
        return config;
    }
    let new_keys = [
        "file = \"",
        "loader_env",
        "denied_host_uids",
        "pids_max",
        "http_max_conns_per_client",
        "http_read_header_timeout",
        "guest_memory_mb",
    ];
    let mut out = String::new();
    let mut lines = config.lines().peekable();
    while let Some(line) = lines.next() {
        // The agent-level `limits` block holds only new keys.
        if line.trim_start() == "limits {" && !line.starts_with(' ') {
            for l in lines.by_ref() {
                if l.trim() == "}" {
                    break;
                }
            }
            continue;
        }
        if !new_keys.iter().any(|k| line.contains(k)) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// A batch job of one task (no restarts, small logs).
fn job(id: &str, driver: &str, config: Value) -> Value {
    json!({ "ID": id, "Type": "batch", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0, "Mode": "fail" },
        "Tasks": [{ "Name": "t", "Driver": driver, "Config": config,
            "KillTimeout": 200_000_000u64,
            "Resources": { "CPU": 100, "MemoryMB": 64 },
            "LogConfig": { "MaxFiles": 2, "MaxFileSizeMB": 1 } }] }] })
}

/// The job's one allocation, once terminal.
async fn finished(agent: &AgentProcess, job: &str) -> Value {
    let allocs = agent.wait_allocs(job, all_terminal).await;
    agent.alloc(allocs[0]["ID"].as_str().unwrap()).await
}

/// The body of `GET path`, as text.
async fn text(a: &AgentProcess, path: &str) -> String {
    a.http
        .get(a.url(path))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// What task `t` of allocation `alloc` wrote to `kind` (stdout or stderr), through the
/// logs endpoint.
async fn task_log(a: &AgentProcess, alloc: &str, kind: &str) -> String {
    text(
        a,
        &format!("/v1/client/fs/logs/{alloc}?task=t&type={kind}&plain=true"),
    )
    .await
}

/// The id of the job's first allocation, once its task runs.
async fn running(a: &AgentProcess, job: &str) -> String {
    a.wait_allocs(job, |al| {
        al.first()
            .is_some_and(|a| a["TaskStates"]["t"]["State"] == "running")
    })
    .await[0]["ID"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Every event of every task, one per line: what a failure message shows.
fn events(alloc: &Value) -> String {
    let mut out = String::new();
    for (task, state) in alloc["TaskStates"].as_object().into_iter().flatten() {
        for e in state["Events"].as_array().into_iter().flatten() {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            out += &format!(
                "{task}: {} | {} | {}\n",
                text("Type"),
                text("DisplayMessage"),
                text("DriverError")
            );
        }
    }
    out
}

/// Asserts the allocation failed and one of its events says `want`.
fn failed_saying(alloc: &Value, want: &str) {
    let said = events(alloc);
    assert_eq!(alloc["ClientStatus"], "failed", "{said}");
    assert!(said.contains(want), "want {want:?} in:\n{said}");
}

/// Waits until `check` holds, 30 s at most.
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A file of `text` that only root may read or write.
fn root_only(path: &Path, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.to_path_buf()
}

/// A shared object whose constructor writes `marker`: what `LD_PRELOAD` would run. Built
/// with the machine's C compiler (the guests' build needs one too).
fn preload_library(dir: &Path, marker: &Path) -> Vec<u8> {
    let src = dir.join("payload.c");
    std::fs::write(
        &src,
        format!(
            "#include <fcntl.h>\n#include <unistd.h>\n\
             __attribute__((constructor)) static void payload(void) {{\n\
               int fd = open(\"{}\", O_CREAT | O_WRONLY, 0644);\n\
               if (fd >= 0) {{ write(fd, \"ran as root\\n\", 12); close(fd); }}\n\
             }}\n",
            marker.display()
        ),
    )
    .unwrap();
    let out = dir.join("payload.so");
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
        .expect("running the C compiler (cc) for the LD_PRELOAD payload");
    assert!(
        built.status.success(),
        "building the payload: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    std::fs::read(&out).unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
