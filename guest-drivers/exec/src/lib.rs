//! The `exec` task driver (Nomad's exec): runs a task's `command` with `args` confined —
//! PID, IPC, UTS and mount namespaces, a chroot of the task dir with read-only binds of
//! the operator's `chroot_env`, as an unprivileged user with no capabilities and
//! no_new_privs, in a cgroup that enforces the task's `resources` (memory as the hard
//! limit, or the soft one under a larger `memory_max`; CPU shares from `cpu` MHz) and the
//! grant's `pids_max`.
//!
//! The driver asks; the host decides. The host's `process.spawn-isolated` carries the
//! isolation out only with the operator's `isolation` grant (and `process`, which still
//! decides which commands may run), and itself sets the chroot (the task dir), what it
//! holds (the grant's `chroot_env` and the alloc dir) and which users are refused (the
//! grant's `denied_host_uids`, root by default):
//!
//! ```hcl
//! plugin "exec" {
//!   grant {
//!     process    = ["*"]
//!     isolation  = true
//!     chroot_env = ["/bin", "/etc", "/lib", "/lib64", "/usr"]   # or { "/host/path" = "/in/chroot" }
//!   }
//!   config {
//!     default_user = "nobody"
//!   }
//! }
//! ```
//!
//! Without the grants, or on a host that cannot isolate (not root, no cgroup memory
//! controller), it fingerprints as undetected and says why.
//!
//! Task config: `command` (required), `args`, `pid_mode` and `ipc_mode` (`"private"`, the
//! default, or `"host"`). `cap_add` and `cap_drop` are refused: tasks hold no capabilities.
//! Inside the task, the task dir is `/`, the allocation's shared dir `/alloc`, and the
//! `NOMAD_*_DIR` variables say so.

mod config;

use paddock_driver_sdk::host::{config as plugin_config, process};
use paddock_driver_sdk::{
    Capabilities, Driver, DriverError, ExecPlan, ExecRequest, Fingerprint, FsIsolation, HostError,
    PluginInfo, ProcessTask, ResourceUsage, TaskConfig, TaskHandle, TaskStatus, WaitStatus,
};

/// Format of the driver state ([`ProcessTask`]) in handles.
const HANDLE_FORMAT: u32 = 1;

/// The exec driver.
pub struct Exec;

/// The task's env as the task sees it: its `NOMAD_*_DIR` paths inside the chroot.
fn chroot_env(env: &[(String, String)], alloc_dir: &str, task_dir: &str) -> Vec<(String, String)> {
    env.iter()
        .map(|(k, v)| {
            let v = if k.starts_with("NOMAD_") && k.ends_with("_DIR") {
                in_chroot(v, alloc_dir, task_dir)
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

/// A host path as the task sees it: under `alloc_dir` `/alloc`, under `task_dir` `/`.
fn in_chroot(value: &str, alloc_dir: &str, task_dir: &str) -> String {
    let rebase = |base: &str, to: &str| -> Option<String> {
        let rest = value.strip_prefix(base.trim_end_matches('/'))?;
        (rest.is_empty() || rest.starts_with('/')).then(|| {
            let joined = format!("{to}{rest}");
            if joined.is_empty() {
                "/".into()
            } else {
                joined
            }
        })
    };
    rebase(alloc_dir, "/alloc")
        .or_else(|| rebase(task_dir, ""))
        .unwrap_or_else(|| value.to_string())
}

impl Driver for Exec {
    fn info() -> PluginInfo {
        PluginInfo::new("exec", env!("CARGO_PKG_VERSION"))
    }

    fn capabilities() -> Capabilities {
        Capabilities {
            send_signals: true,
            exec: true,
            fs_isolation: FsIsolation::Chroot,
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
        match process::isolation_support() {
            Ok(()) => Fingerprint::healthy().with_attribute("version", env!("CARGO_PKG_VERSION")),
            Err(HostError::Denied(m)) => Fingerprint::undetected(format!(
                "exec needs the `process` and `isolation` grants (plugin \"exec\" {{ grant {{ process = [...] isolation = true }} }}): {m}"
            )),
            Err(e) => Fingerprint::undetected(format!("this host cannot isolate tasks: {e}")),
        }
    }

    fn validate_config(config: &str) -> Result<(), DriverError> {
        config::task(config).map(|_| ())
    }

    fn start(cfg: TaskConfig) -> Result<TaskHandle, DriverError> {
        let task = config::task(&cfg.driver_config)?;
        let plugin = config::plugin(&plugin_config::raw()).map_err(DriverError::failed)?;
        let env = chroot_env(&cfg.env, &cfg.alloc_dir, &cfg.task_dir);
        let cmd = process::Command {
            path: task.command,
            args: task.args,
            env,
            cwd: cfg.task_dir.clone(),
            stdout_path: cfg.stdout_path.clone(),
            stderr_path: cfg.stderr_path.clone(),
            user: String::new(),
            logs: Some(cfg.logs),
        };
        let r = &cfg.resources;
        let iso = process::Isolation {
            pid_namespace: task.private_pid,
            ipc_namespace: task.private_ipc,
            uts_namespace: true,
            chroot: cfg.task_dir.clone(),
            // The host binds the operator's chroot_env and the alloc dir.
            binds: Vec::new(),
            user: if cfg.user.is_empty() {
                plugin.default_user
            } else {
                cfg.user.clone()
            },
            no_new_privs: true,
            memory_bytes: u64::from(r.memory_mb) << 20,
            memory_max_bytes: u64::from(r.memory_max_mb) << 20,
            cpu_shares: u64::from(r.cpu_mhz),
            // The cores placement reserved for the task (its `cores`), as Nomad's exec
            // driver pins them.
            cpuset_cpus: cfg
                .env
                .iter()
                .find(|(k, _)| k == "NOMAD_CPU_CORES")
                .map(|(_, v)| v.clone())
                .unwrap_or_default(),
        };
        // The host's own words: what it refused, or which step failed.
        let id = process::spawn_isolated(&cmd, &iso).map_err(|e| match e {
            HostError::Denied(m) => DriverError::Denied(m),
            HostError::Invalid(m) | HostError::Failed(m) | HostError::NotFound(m) => {
                DriverError::failed(m)
            }
        })?;
        ProcessTask::started(id).handle(cfg.id, HANDLE_FORMAT)
    }

    fn recover(handle: TaskHandle) -> Result<TaskHandle, DriverError> {
        ProcessTask::recover(handle, &[HANDLE_FORMAT])
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

    /// Joined into the task's process: its namespaces, chroot, cgroup and user, with the
    /// task's env as the task sees it.
    fn exec_task(handle: TaskHandle, req: ExecRequest) -> Result<ExecPlan, DriverError> {
        let alloc_dir = std::path::Path::new(&req.task_dir)
            .parent()
            .map(|p| p.join("alloc").display().to_string())
            .unwrap_or_default();
        let env = chroot_env(&req.env, &alloc_dir, &req.task_dir);
        ProcessTask::exec_joined(&handle, req, env)
    }
}

paddock_driver_sdk::export_driver!(Exec);
