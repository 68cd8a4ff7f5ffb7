//! `agent component call FILE OP [--json ARG]`: one export of a built component, called by
//! hand in a throwaway runtime, with the grants given on the command line (none by
//! default), its answer printed as one line of JSON. For a plugin author: what `info` says,
//! whether a config is accepted, what a start returns and what `wait` then answers, with the
//! handle passed back as JSON.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::drivermanager::Driver;
use crate::drivermanager::types::{TaskConfig, TaskHandle, WaitStatus};
use crate::pluginhost::{PluginHost, PluginHostOptions};
use crate::runtime::{
    ComponentSettings, ComponentSource, Grants, LoadedComponent, Runtime, RuntimeOptions, World,
};

/// The driver operations `call` knows, with what `--json` carries for each.
pub const DRIVER_OPS: &[(&str, &str)] = &[
    ("info", "nothing"),
    ("capabilities", "nothing"),
    ("fingerprint", "nothing"),
    ("validate-config", "the task's config object"),
    (
        "start",
        "{\"config\": {…}, optional \"id\", \"name\", \"env\", \"dir\"}",
    ),
    ("wait", "a handle (what start returned)"),
    ("inspect", "a handle"),
    ("stats", "a handle"),
    ("recover", "a handle"),
    ("destroy", "{\"handle\": …, \"force\": bool}"),
    (
        "stop",
        "{\"handle\": …, \"timeout_ms\": N, \"signal\": \"SIGTERM\"}",
    ),
    ("signal", "{\"handle\": …, \"signal\": \"SIGHUP\"}"),
];

/// Run the call; the answer is printed as JSON. Exit code 1 when the component refused or
/// failed the call.
pub async fn run(
    file: &std::path::Path,
    op: &str,
    arg: &str,
    grants: Grants,
) -> anyhow::Result<i32> {
    let arg: Value = if arg.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(arg).map_err(|e| anyhow::anyhow!("--json: {e}"))?
    };
    let (host, c) = match load_alone(file, None, grants, json!({})).await? {
        Ok(loaded) => loaded,
        Err(refusal) => {
            println!("{refusal}");
            return Ok(1);
        }
    };
    if op == "info" {
        let i = host.runtime.info(&c).await?;
        println!(
            "{}",
            json!({"name": i.name, "version": i.version, "world": c.world.to_string()})
        );
        return Ok(0);
    }
    if c.world != World::Driver {
        anyhow::bail!(
            "{} is a {} component: `call` offers `info` for it, and the driver operations for drivers",
            c.name,
            c.world
        );
    }
    let driver = host.drivers.driver(&c.name);
    match driver_op(&driver, op, &arg).await {
        Ok(v) => {
            println!("{v}");
            Ok(0)
        }
        Err(CallFailed::Usage(m)) => anyhow::bail!("{m}"),
        Err(CallFailed::Call(e)) => {
            println!(
                "{}",
                json!({"error": e.to_string(), "recoverable": e.recoverable()})
            );
            Ok(1)
        }
    }
}

/// Where a throwaway plugin host runs host processes: through a task executor of its own
/// (isolated processes are its children, as in the agent), or as this process's children.
pub(super) struct Executor<'a> {
    pub dir: &'a std::path::Path,
}

/// Loads `file` alone in a throwaway plugin host, giving `grants` and the
/// `plugin { config }` block `config` to the name its component turns out to have (known
/// once it is prepared). The refusal, as text, when it does not load.
pub(super) async fn load_alone(
    file: &std::path::Path,
    executor: Option<Executor<'_>>,
    grants: Grants,
    config: Value,
) -> anyhow::Result<Result<(PluginHost, Arc<LoadedComponent>), String>> {
    let bytes =
        std::fs::read(file).map_err(|e| anyhow::anyhow!("reading {}: {e}", file.display()))?;
    let source = || ComponentSource::File(file.to_path_buf());
    // One compile cache for the probe and the host, so the file is compiled once (a large
    // guest, Python's say, takes seconds); both loads happen here.
    let cache = tempfile::tempdir()?;
    let probe = Runtime::new(RuntimeOptions {
        cache_dir: Some(cache.path().to_path_buf()),
        ..Default::default()
    })?;
    let name = match probe.prepare(source(), Arc::from(bytes.clone())).await {
        Ok(c) => c.name.clone(),
        Err(r) => return Ok(Err(r.to_string())),
    };
    let host = PluginHost::build(PluginHostOptions {
        settings: [(
            name,
            // Bound to the file under test: the operator named it.
            ComponentSettings {
                grants,
                config,
                file: Some(std::path::absolute(file)?.display().to_string()),
                ..Default::default()
            },
        )]
        .into(),
        cache_dir: Some(cache.path().to_path_buf()),
        ..Default::default()
    })?;
    if let Some(e) = executor {
        let exe = std::env::current_exe()?;
        let db: Arc<dyn crate::state::StateDb> = Arc::new(crate::state::MemState::new());
        host.use_executor(exe, e.dir, db).await?;
    }
    Ok(match host.runtime.load(source(), Arc::from(bytes)).await {
        Ok(c) => Ok((host, c)),
        Err(r) => Err(r.to_string()),
    })
}

enum CallFailed {
    Usage(String),
    Call(crate::drivermanager::DriverCallError),
}

impl From<crate::drivermanager::DriverCallError> for CallFailed {
    fn from(e: crate::drivermanager::DriverCallError) -> Self {
        CallFailed::Call(e)
    }
}

fn handle_of(v: &Value) -> Result<TaskHandle, CallFailed> {
    serde_json::from_value(v.clone()).map_err(|e| {
        CallFailed::Usage(format!(
            "--json: not a handle ({{\"version\", \"task_id\", \"driver_state\"}}): {e}"
        ))
    })
}

fn handle_json(h: &TaskHandle) -> Value {
    serde_json::to_value(h).expect("a handle serializes")
}

/// The task `start` is given: `{"config", "env", "name", "id", "dir"}`, each optional; the
/// task's folder and logs in `dir` (default a temporary folder).
fn start_config(arg: &Value) -> Result<TaskConfig, CallFailed> {
    let dir = arg["dir"].as_str().map(String::from).unwrap_or_else(|| {
        std::env::temp_dir()
            .join("paddock-component-call")
            .display()
            .to_string()
    });
    std::fs::create_dir_all(&dir).map_err(|e| CallFailed::Usage(format!("dir {dir}: {e}")))?;
    let name = arg["name"].as_str().unwrap_or("task").to_string();
    Ok(TaskConfig {
        id: arg["id"].as_str().map(String::from).unwrap_or_else(|| {
            format!(
                "call/{name}/{}",
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            )
        }),
        name: name.clone(),
        alloc_id: "call".into(),
        env: arg["env"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default(),
        driver_config: arg.get("config").cloned().unwrap_or(json!({})).to_string(),
        alloc_dir: dir.clone(),
        task_dir: dir.clone(),
        stdout_path: format!("{dir}/{name}.stdout"),
        stderr_path: format!("{dir}/{name}.stderr"),
        kill_signal: "SIGINT".into(),
        kill_timeout_ns: 5_000_000_000,
        ..Default::default()
    })
}

async fn driver_op(d: &Driver, op: &str, arg: &Value) -> Result<Value, CallFailed> {
    Ok(match op {
        "capabilities" => {
            let c = d.capabilities().await?;
            json!({"send_signals": c.send_signals, "exec": c.exec, "fs_isolation": c.fs_isolation})
        }
        "fingerprint" => {
            let f = d.fingerprint().await?;
            json!({"health": format!("{:?}", f.health).to_lowercase(), "health_description": f.health_description,
                   "attributes": f.attributes.iter().map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or_default())).collect::<serde_json::Map<_, _>>()})
        }
        "validate-config" => {
            d.validate_config(&arg.to_string()).await?;
            json!({"valid": true})
        }
        "start" => handle_json(&d.start(start_config(arg)?, None).await?),
        "wait" => match d.wait(handle_of(arg)?).await? {
            WaitStatus::Exited(r) => json!({"exited": r}),
            WaitStatus::Pending(w) => {
                json!({"pending": {"processes": w.processes, "after_ns": w.after_ns, "handle": w.handle.as_ref().map(handle_json)}})
            }
        },
        "inspect" => {
            let s = d.inspect(handle_of(arg)?).await?;
            json!({"id": s.id, "state": format!("{:?}", s.state).to_lowercase(), "started_at": s.started_at,
                   "completed_at": s.completed_at, "exit_result": s.exit_result, "attributes": s.attributes})
        }
        "stats" => serde_json::to_value(d.stats(handle_of(arg)?).await?).unwrap_or_default(),
        "recover" => handle_json(&d.recover(handle_of(arg)?).await?),
        "destroy" => {
            d.destroy(
                handle_of(&arg["handle"])?,
                arg["force"].as_bool().unwrap_or(false),
            )
            .await?;
            json!({"destroyed": true})
        }
        "stop" => {
            let timeout = arg["timeout_ms"].as_u64().unwrap_or(5000) * 1_000_000;
            let signal = arg["signal"].as_str().unwrap_or("SIGTERM").to_string();
            handle_json(&d.stop(handle_of(&arg["handle"])?, timeout, signal).await?)
        }
        "signal" => {
            let signal = arg["signal"].as_str().unwrap_or("SIGHUP").to_string();
            handle_json(&d.signal(handle_of(&arg["handle"])?, signal).await?)
        }
        other => {
            let ops: Vec<&str> = DRIVER_OPS.iter().map(|(o, _)| *o).collect();
            return Err(CallFailed::Usage(format!(
                "unknown operation {other:?} (one of {})",
                ops.join(", ")
            )));
        }
    })
}
