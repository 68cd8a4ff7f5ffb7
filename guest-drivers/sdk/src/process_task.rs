//! The lifecycle of a task that is one host process (as `raw_exec` and `exec` run them):
//! the handle's driver state names the process the host's `process` interface started,
//! and every later call — recover, wait, stop, destroy, inspect, signal, stats — is the
//! same few host calls over it. A driver starts the process its own way, then hands the
//! rest to [`ProcessTask`]:
//!
//! ```ignore
//! fn start(cfg: TaskConfig) -> Result<TaskHandle, DriverError> {
//!     let id = process::spawn(&command).map_err(...)?;
//!     ProcessTask::started(id).handle(cfg.id, FORMAT)
//! }
//! fn wait(handle: TaskHandle) -> Result<WaitStatus, DriverError> {
//!     ProcessTask::wait(&handle)
//! }
//! ```

use serde::{Deserialize, Serialize};

use crate::host::{process, timer};
use crate::{
    DriverError, ExecPlan, ExecRequest, FieldError, HostError, JoinedCommand, ResourceUsage,
    TaskHandle, TaskState, TaskStatus, WaitStatus,
};

/// An exec request's command in the task dir, with `env`, as `user` and no output files
/// (the session gets the output); an empty `argv` is refused.
fn exec_command(
    req: ExecRequest,
    env: Vec<(String, String)>,
    user: String,
) -> Result<process::Command, DriverError> {
    let mut it = req.command.into_iter();
    let path = match it.next() {
        Some(p) if !p.is_empty() => p,
        _ => {
            return Err(DriverError::InvalidConfig(vec![FieldError::new(
                "command",
                "an exec needs a command to run",
            )]));
        }
    };
    Ok(process::Command {
        path,
        args: it.collect(),
        env,
        cwd: req.task_dir,
        stdout_path: String::new(),
        stderr_path: String::new(),
        logs: None,
        user,
    })
}

/// The `command` (required, not empty) and `args` (a list of strings) of a process task's
/// config object, every bad field added to `errors` (an empty command when it is bad).
pub fn command_and_args(
    map: &serde_json::Map<String, serde_json::Value>,
    errors: &mut Vec<FieldError>,
) -> (String, Vec<String>) {
    use serde_json::Value;
    let command = match map.get("command") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::String(_)) => {
            errors.push(FieldError::new("command", "must not be empty"));
            String::new()
        }
        None | Some(Value::Null) => {
            errors.push(FieldError::new("command", "missing required field"));
            String::new()
        }
        Some(other) => {
            errors.push(FieldError::new(
                "command",
                format!("expected a string, got {other}"),
            ));
            String::new()
        }
    };
    let mut args = Vec::new();
    match map.get("args") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) => {
            for (i, v) in a.iter().enumerate() {
                match v {
                    Value::String(s) => args.push(s.clone()),
                    other => errors.push(FieldError::new(
                        format!("args[{i}]"),
                        format!("expected a string, got {other}"),
                    )),
                }
            }
        }
        Some(other) => errors.push(FieldError::new(
            "args",
            format!("expected a list of strings, got {other}"),
        )),
    }
    (command, args)
}

/// What a process task's handle keeps (the driver state, as JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessTask {
    /// Host process id.
    pub process: u64,
    /// Start time, ns since the epoch.
    pub started_at: u64,
    /// Exit time, ns, once seen (0 until then).
    #[serde(default)]
    pub completed_at: u64,
}

/// A host error about the task's process: "not found" means the task is gone.
pub fn not_found(handle: &TaskHandle, e: HostError) -> DriverError {
    match e {
        HostError::NotFound(m) => DriverError::TaskNotFound(format!("{}: {m}", handle.task_id)),
        other => DriverError::from(other),
    }
}

impl ProcessTask {
    /// The host process `process`, started now.
    pub fn started(process: u64) -> Self {
        Self {
            process,
            started_at: timer::now(),
            completed_at: 0,
        }
    }

    /// Its handle for task `task_id`, in driver-state format `format`.
    pub fn handle(
        &self,
        task_id: impl Into<String>,
        format: u32,
    ) -> Result<TaskHandle, DriverError> {
        TaskHandle::with_format(task_id, format, self)
    }

    /// `recover`: a handle of one of `formats` whose process the host still knows.
    pub fn recover(handle: TaskHandle, formats: &[u32]) -> Result<TaskHandle, DriverError> {
        handle.require_format(formats)?;
        let s: Self = handle.state()?;
        process::status(s.process).map_err(|e| not_found(&handle, e))?;
        Ok(handle)
    }

    /// `wait`: the exit, or wake on the process's exit.
    pub fn wait(handle: &TaskHandle) -> Result<WaitStatus, DriverError> {
        let s: Self = handle.state()?;
        match process::status(s.process).map_err(|e| not_found(handle, e))? {
            process::Status::Running => Ok(WaitStatus::on_exit_of(vec![s.process])),
            process::Status::Exited(r) => Ok(WaitStatus::Exited(r)),
        }
    }

    /// `stop`: `signal` (SIGTERM when empty), then SIGKILL after `timeout_ns`; the host
    /// escalates.
    pub fn stop(
        handle: TaskHandle,
        timeout_ns: u64,
        signal: &str,
    ) -> Result<TaskHandle, DriverError> {
        let s: Self = handle.state()?;
        let signal = if signal.is_empty() { "SIGTERM" } else { signal };
        process::stop(s.process, signal, timeout_ns).map_err(|e| not_found(&handle, e))?;
        Ok(handle)
    }

    /// `destroy`: release the process (the host removes what it set up for it, a cgroup
    /// included); a running one is refused unless `force`, as the contract says.
    pub fn destroy(handle: &TaskHandle, force: bool) -> Result<(), DriverError> {
        let s: Self = handle.state()?;
        match process::status(s.process) {
            Ok(process::Status::Running) if !force => Err(DriverError::failed(
                "task is still running; stop it first or destroy with force",
            )),
            Ok(_) => process::release(s.process).map_err(|e| not_found(handle, e)),
            Err(HostError::NotFound(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// `inspect`: running or exited, with the process id as an attribute.
    pub fn inspect(handle: &TaskHandle) -> Result<TaskStatus, DriverError> {
        let s: Self = handle.state()?;
        let (state, exit) = match process::status(s.process).map_err(|e| not_found(handle, e))? {
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

    /// `signal`: send `signal` to the process.
    pub fn signal(handle: TaskHandle, signal: &str) -> Result<TaskHandle, DriverError> {
        let s: Self = handle.state()?;
        process::signal(s.process, signal).map_err(|e| not_found(&handle, e))?;
        Ok(handle)
    }

    /// `exec-task` for a task whose process is isolated (`exec`): run the request's
    /// command joined into the task's process (its namespaces, root, cgroup and user, which
    /// the host reads from the process), in the task dir with `env` (the task's, as the
    /// driver gave it to the task).
    pub fn exec_joined(
        handle: &TaskHandle,
        req: ExecRequest,
        env: Vec<(String, String)>,
    ) -> Result<ExecPlan, DriverError> {
        let s: Self = handle.state()?;
        Ok(ExecPlan::Join(JoinedCommand {
            process: s.process,
            command: exec_command(req, env, String::new())?,
        }))
    }

    /// `exec-task` for a task that is a plain host process (`raw_exec`): run the request's
    /// command as a new process in the task dir, with `env` and as `user` (what the task's
    /// own process got); the host checks it as it checks `process.spawn`.
    pub fn exec_spawned(
        handle: &TaskHandle,
        req: ExecRequest,
        env: Vec<(String, String)>,
        user: String,
    ) -> Result<ExecPlan, DriverError> {
        let _: Self = handle.state()?;
        Ok(ExecPlan::Spawn(exec_command(req, env, user)?))
    }

    /// `stats`: the process's usage as the host measures it.
    pub fn stats(handle: &TaskHandle) -> Result<ResourceUsage, DriverError> {
        let s: Self = handle.state()?;
        process::stats(s.process).map_err(|e| not_found(handle, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_without_completed_at_still_reads() {
        // What exec wrote before this module: no `completed_at`.
        let handle = TaskHandle {
            version: 1,
            task_id: "t".into(),
            driver_state: br#"{"process":7,"started_at":9}"#.to_vec(),
        };
        let s: ProcessTask = handle.state().unwrap();
        assert_eq!(
            s,
            ProcessTask {
                process: 7,
                started_at: 9,
                completed_at: 0
            }
        );
    }

    /// The whole lifecycle against the fake host: what a driver's own unit tests can do
    /// without a component or an agent.
    #[test]
    fn a_process_task_through_its_lifecycle_on_the_fake_host() {
        use crate::fake::{self, FakeHost};
        fake::install(FakeHost {
            now_ns: 42,
            ..FakeHost::default()
        });
        let cmd = process::Command {
            path: "/bin/sleep".into(),
            args: vec!["60".into()],
            env: vec![],
            cwd: "/".into(),
            stdout_path: String::new(),
            stderr_path: String::new(),
            logs: None,
            user: String::new(),
        };
        let id = process::spawn(&cmd).unwrap();
        let handle = ProcessTask::started(id).handle("a/t/1", 2).unwrap();
        assert_eq!(handle.state::<ProcessTask>().unwrap().started_at, 42);
        assert!(
            ProcessTask::recover(handle.clone(), &[1]).is_err(),
            "format 2 is not readable"
        );
        let handle = ProcessTask::recover(handle, &[2]).unwrap();
        assert!(matches!(
            ProcessTask::wait(&handle).unwrap(),
            WaitStatus::Pending(w) if w.processes == [id]
        ));
        match ProcessTask::destroy(&handle, false) {
            Err(DriverError::Failed(f)) => assert!(f.message.contains("still running")),
            other => panic!("{other:?}"),
        }
        let handle = ProcessTask::signal(handle, "SIGHUP").unwrap();
        let handle = ProcessTask::stop(handle, 1_000, "").unwrap();
        match ProcessTask::wait(&handle).unwrap() {
            WaitStatus::Exited(r) => assert_eq!(r.signal, 15, "an empty signal means SIGTERM"),
            other => panic!("{other:?}"),
        }
        ProcessTask::destroy(&handle, false).unwrap();
        fake::with(|h| {
            assert_eq!(h.processes[&id].signals, ["SIGHUP", "SIGTERM"]);
            assert!(h.processes[&id].released);
            assert_eq!(h.processes[&id].command.args, ["60"]);
        });
        // A process the host no longer knows: the task is gone.
        fake::install(FakeHost::default());
        assert!(matches!(
            ProcessTask::wait(&handle),
            Err(DriverError::TaskNotFound(_))
        ));
    }
}
