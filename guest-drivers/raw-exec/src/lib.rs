//! The `raw_exec` task driver: runs a task's `command` with `args` as a host process, in the
//! task dir, with the task's environment and no isolation (Nomad's raw_exec).
//!
//! The driver only decides what to run; the host's `process` capability spawns it, so the
//! operator's grant decides which commands may run at all:
//!
//! ```hcl
//! plugin "raw_exec" {
//!   grant {
//!     process = ["/usr/bin/*", "/bin/*"]   # paths that may run; "*" allows any
//!   }
//!   config {
//!     enabled = true                       # optional; false disables the driver
//!     user    = "paddock"                  # optional; every task runs as this user
//!   }
//! }
//! ```
//!
//! Without a `process` grant the driver fingerprints as undetected. No shell is involved
//! unless the job asks for one (`command = "/bin/sh"`, `args = ["-c", "..."]`).
//!
//! A task's mounts (host volumes) cannot be made without isolation: their host paths reach
//! the task in its env instead ([`mount_env`]).
//!
//! Task config: `command` (string, required), `args` (list of strings). Stdout and stderr
//! go to the task's rotated log files; stop sends the task's kill signal and SIGKILL after
//! its kill timeout; stats come from the host. With the plugin's `user`, every task runs
//! as that user (a task asking for another one fails, naming both); without it, a task
//! runs as its own `user`, or as the agent's.
//!
//! Its handles carry driver-state format [`Stamp::handle_format`] (1 as built) and it reads
//! only that format: a version stamped with another format refuses older handles in
//! `recover`, which keeps those tasks on the version that started them after a hot swap.

mod config;

use paddock_driver_sdk::host::{config as plugin_config, process};
use paddock_driver_sdk::{
    Capabilities, Driver, DriverError, ExecPlan, ExecRequest, Fingerprint, HostError, PluginInfo,
    ProcessTask, ResourceUsage, Stamp, TaskConfig, TaskHandle, TaskStatus, WaitStatus,
};

/// Where a task's mounts are, for a driver that cannot mount them (no mount namespace):
/// `PADDOCK_VOLUME_<DESTINATION>` = the host path, the destination upper-cased with
/// every character but letters and digits made `_` (`/data` → `PADDOCK_VOLUME_DATA`).
/// Read-only cannot be enforced here; the task runs as its user.
pub fn mount_env(mounts: &[paddock_driver_sdk::Mount]) -> Vec<(String, String)> {
    mounts
        .iter()
        .map(|m| {
            let key: String = m
                .task_path
                .trim_matches('/')
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            (format!("PADDOCK_VOLUME_{key}"), m.host_path.clone())
        })
        .collect()
}

/// The raw_exec driver.
pub struct RawExec;

/// The user a task runs as: the operator's (`config { user }`) or the task's, never
/// another than the operator's.
fn task_user(operator: &str, task: &str) -> Result<String, DriverError> {
    match (operator, task) {
        ("", task) => Ok(task.to_string()),
        (operator, "") => Ok(operator.to_string()),
        (operator, task) if operator == task => Ok(task.to_string()),
        (operator, task) => Err(DriverError::Denied(format!(
            "user: this agent runs raw_exec tasks as {operator:?} (plugin \"raw_exec\" {{ config {{ user }} }}), not as the task's {task:?}"
        ))),
    }
}

impl Driver for RawExec {
    fn info() -> PluginInfo {
        PluginInfo::new("raw_exec", Stamp::get().version(env!("CARGO_PKG_VERSION")))
    }

    fn capabilities() -> Capabilities {
        Capabilities {
            send_signals: true,
            exec: true,
            ..Capabilities::default()
        }
    }

    fn fingerprint() -> Fingerprint {
        match config::plugin(&plugin_config::raw()) {
            Err(e) => return Fingerprint::unhealthy(format!("invalid plugin config: {e}")),
            Ok(c) if c.enabled == Some(false) => {
                return Fingerprint::undetected("disabled by the plugin config (enabled = false)");
            }
            Ok(_) => {}
        }
        // Probe the grant: an unknown id is "not found" when granted, "denied" when not.
        match process::status(u64::MAX) {
            Err(HostError::Denied(_)) => Fingerprint::undetected(
                "raw_exec needs the `process` grant (plugin \"raw_exec\" { grant { process = [...] } })",
            ),
            _ => Fingerprint::healthy().with_attribute("version", env!("CARGO_PKG_VERSION")),
        }
    }

    fn validate_config(config: &str) -> Result<(), DriverError> {
        config::task(config).map(|_| ())
    }

    fn start(cfg: TaskConfig) -> Result<TaskHandle, DriverError> {
        let task = config::task(&cfg.driver_config)?;
        let plugin = config::plugin(&plugin_config::raw()).map_err(DriverError::failed)?;
        let user = task_user(&plugin.user, &cfg.user)?;
        let mut env = cfg.env.clone();
        env.extend(mount_env(&cfg.mounts));
        let cmd = process::Command {
            path: task.command,
            args: task.args,
            env,
            cwd: cfg.task_dir.clone(),
            stdout_path: cfg.stdout_path.clone(),
            stderr_path: cfg.stderr_path.clone(),
            user,
            logs: Some(cfg.logs),
        };
        let id = process::spawn(&cmd).map_err(|e| match e {
            HostError::Denied(m) => DriverError::Denied(m),
            // A command that cannot be started (missing, not executable) will not start on
            // a retry either.
            HostError::Invalid(m) | HostError::Failed(m) | HostError::NotFound(m) => {
                DriverError::failed(m)
            }
        })?;
        ProcessTask::started(id).handle(cfg.id, Stamp::get().handle_format)
    }

    fn recover(handle: TaskHandle) -> Result<TaskHandle, DriverError> {
        ProcessTask::recover(handle, &[Stamp::get().handle_format])
    }

    fn wait(handle: TaskHandle) -> Result<WaitStatus, DriverError> {
        ProcessTask::wait(&handle)
    }

    fn stop(handle: TaskHandle, timeout_ns: u64, signal: &str) -> Result<TaskHandle, DriverError> {
        ProcessTask::stop(handle, timeout_ns, signal)
    }

    fn destroy(handle: TaskHandle, force: bool) -> Result<(), DriverError> {
        ProcessTask::destroy(&handle, force)
    }

    fn inspect(handle: TaskHandle) -> Result<TaskStatus, DriverError> {
        ProcessTask::inspect(&handle)
    }

    fn signal(handle: TaskHandle, signal: &str) -> Result<TaskHandle, DriverError> {
        ProcessTask::signal(handle, signal)
    }

    fn stats(handle: TaskHandle) -> Result<ResourceUsage, DriverError> {
        ProcessTask::stats(&handle)
    }

    /// A new host process in the task dir, with the task's env and as its user (the
    /// host checks the command against the `process` grant as it checks the task's).
    fn exec_task(handle: TaskHandle, req: ExecRequest) -> Result<ExecPlan, DriverError> {
        let plugin = config::plugin(&plugin_config::raw()).map_err(DriverError::failed)?;
        let user = task_user(&plugin.user, &req.user)?;
        let env = req.env.clone();
        ProcessTask::exec_spawned(&handle, req, env, user)
    }
}

paddock_driver_sdk::export_driver!(RawExec);
