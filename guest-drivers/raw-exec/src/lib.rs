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
//!   }
//! }
//! ```
//!
//! Without a `process` grant the driver fingerprints as undetected. No shell is involved
//! unless the job asks for one (`command = "/bin/sh"`, `args = ["-c", "..."]`).
//!
//! Task config: `command` (string, required), `args` (list of strings). Stdout and stderr
//! go to the task's rotated log files; stop sends the task's kill signal and SIGKILL after
//! its kill timeout; stats come from the host.
//!
//! Its handles carry driver-state format [`Stamp::handle_format`] (1 as built) and it reads
//! only that format: a version stamped with another format refuses older handles in
//! `recover`, which keeps those tasks on the version that started them after a hot swap.

mod config;

use paddock_driver_sdk::host::{config as plugin_config, process};
use paddock_driver_sdk::{
    Capabilities, Driver, DriverError, Fingerprint, HostError, PluginInfo, ResourceUsage, Stamp,
    TaskConfig, TaskHandle, TaskState, TaskStatus, WaitStatus,
};
use serde::{Deserialize, Serialize};

/// What the driver remembers about a task, in its handle.
#[derive(Debug, Serialize, Deserialize)]
struct State {
    /// Host process id.
    process: u64,
    /// Start time, ns since the epoch.
    started_at: u64,
    /// Exit time, ns, once seen.
    #[serde(default)]
    completed_at: u64,
}

/// The raw_exec driver.
pub struct RawExec;

fn not_found(handle: &TaskHandle, e: HostError) -> DriverError {
    match e {
        HostError::NotFound(m) => DriverError::TaskNotFound(format!("{}: {m}", handle.task_id)),
        other => DriverError::from(other),
    }
}

impl Driver for RawExec {
    fn info() -> PluginInfo {
        PluginInfo::new("raw_exec", Stamp::get().version(env!("CARGO_PKG_VERSION")))
    }

    fn capabilities() -> Capabilities {
        Capabilities {
            send_signals: true,
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
        let cmd = process::Command {
            path: task.command,
            args: task.args,
            env: cfg.env.clone(),
            cwd: cfg.task_dir.clone(),
            stdout_path: cfg.stdout_path.clone(),
            stderr_path: cfg.stderr_path.clone(),
            user: cfg.user.clone(),
            logs: Some(cfg.logs),
        };
        let id = process::spawn(&cmd).map_err(|e| match e {
            HostError::Denied(m) => DriverError::Denied(m),
            HostError::Invalid(m) => DriverError::failed(m),
            // A command that cannot be started (missing, not executable) will not start on
            // a retry either.
            other => DriverError::failed(other.to_string()),
        })?;
        let state = State {
            process: id,
            started_at: paddock_driver_sdk::host::timer::now(),
            completed_at: 0,
        };
        TaskHandle::with_format(cfg.id, Stamp::get().handle_format, &state)
    }

    fn recover(handle: TaskHandle) -> Result<TaskHandle, DriverError> {
        handle.require_format(&[Stamp::get().handle_format])?;
        let s: State = handle.state()?;
        process::status(s.process).map_err(|e| not_found(&handle, e))?;
        Ok(handle)
    }

    fn wait(handle: TaskHandle) -> Result<WaitStatus, DriverError> {
        let s: State = handle.state()?;
        match process::status(s.process).map_err(|e| not_found(&handle, e))? {
            process::Status::Running => Ok(WaitStatus::on_exit_of(vec![s.process])),
            process::Status::Exited(r) => Ok(WaitStatus::Exited(r)),
        }
    }

    fn stop(handle: TaskHandle, timeout_ns: u64, signal: &str) -> Result<TaskHandle, DriverError> {
        let s: State = handle.state()?;
        let signal = if signal.is_empty() { "SIGTERM" } else { signal };
        process::stop(s.process, signal, timeout_ns).map_err(|e| not_found(&handle, e))?;
        Ok(handle)
    }

    fn destroy(handle: TaskHandle, force: bool) -> Result<(), DriverError> {
        let s: State = handle.state()?;
        match process::status(s.process) {
            Ok(process::Status::Running) if !force => Err(DriverError::failed(
                "task is still running; stop it first or destroy with force",
            )),
            Ok(_) => process::release(s.process).map_err(|e| not_found(&handle, e)),
            Err(HostError::NotFound(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn inspect(handle: TaskHandle) -> Result<TaskStatus, DriverError> {
        let s: State = handle.state()?;
        let (state, exit) = match process::status(s.process).map_err(|e| not_found(&handle, e))? {
            process::Status::Running => (TaskState::Running, None),
            process::Status::Exited(r) => (TaskState::Exited, Some(r)),
        };
        Ok(TaskStatus {
            id: handle.task_id.clone(),
            state,
            started_at: s.started_at,
            completed_at: s.completed_at,
            exit_result: exit,
            attributes: vec![("process".to_string(), s.process.to_string())],
        })
    }

    fn signal(handle: TaskHandle, signal: &str) -> Result<TaskHandle, DriverError> {
        let s: State = handle.state()?;
        process::signal(s.process, signal).map_err(|e| not_found(&handle, e))?;
        Ok(handle)
    }

    fn stats(handle: TaskHandle) -> Result<ResourceUsage, DriverError> {
        let s: State = handle.state()?;
        process::stats(s.process).map_err(|e| not_found(&handle, e))
    }
}

paddock_driver_sdk::export_driver!(RawExec);
