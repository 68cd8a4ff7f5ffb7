//! One driver, called through its component: the driver world's plugin client, and with
//! the device and hook clients the only code that sees a contract version's bindings. It
//! converts the host's [`types`](super::types) to the bindings of the version the driver
//! was built against and back. A driver resolves its current version at each call, so a
//! hot-swapped version serves every call that starts after the swap; a driver taken
//! [`Driver::at`] one version (a running task's, see [`super::bindings`]) calls that one.

use std::sync::Arc;

use super::native::NativeDriver;
use super::types::{
    DriverCapabilities, DriverError, DriverFingerprint, Failure, FsIsolation, Health,
    ResourceUsage, TaskConfig, TaskHandle, TaskState, TaskStatus, WaitStatus, WakeOn,
};
use crate::runtime::bindings::v0_1::driver::exports::paddock::plugin::task_driver as wit;
use crate::runtime::bindings::v0_1::exec::exports::paddock::plugin::task_exec::{
    ExecInput as ExecWitInput, ExecRequest as ExecWitRequest, WindowSize as ExecWitSize,
};
use crate::runtime::bindings::v0_1::types as wit_types;
use crate::runtime::types::{ExecInput, ExecOutput, ExecStarted};
use crate::runtime::{
    CallError, CallFailure, LoadedComponent, Runtime, TaskContext, World, bounds,
};

/// A driver call that did not succeed: either the driver said no (a WIT error), or the
/// component failed (trap, memory, deadline).
#[derive(Debug, Clone, thiserror::Error)]
pub enum DriverCallError {
    /// The driver returned an error.
    #[error(transparent)]
    Driver(DriverError),
    /// The component failed.
    #[error(transparent)]
    Component(#[from] CallError),
}

impl DriverCallError {
    /// Whether trying again may help: a driver failure it says is recoverable, or a
    /// missed deadline or a guest memory budget in use, which may be the agent's load
    /// rather than the driver's fault (the restart policy decides, as for Nomad's
    /// recoverable driver errors). A trap or a memory cap is the component's own doing and
    /// would happen again.
    pub fn recoverable(&self) -> bool {
        match self {
            DriverCallError::Driver(DriverError::Failed(f)) => f.recoverable,
            DriverCallError::Driver(_) => false,
            DriverCallError::Component(e) => {
                matches!(e.kind, CallFailure::Deadline | CallFailure::Busy)
            }
        }
    }
}

/// A driver by name, at its current version or at one version.
#[derive(Clone)]
pub struct Driver {
    runtime: Arc<Runtime>,
    name: String,
    health: Arc<super::health::DriverHealth>,
    /// Where starts wait their turn.
    starts: Arc<super::starts::StartQueue>,
    /// The version every call goes to; `None`: the current one at each call.
    version: Option<Arc<LoadedComponent>>,
    /// A native driver serving the calls instead of a component (see [`super::native`]).
    native: Option<Arc<dyn NativeDriver>>,
    /// Whether this driver's failed calls count toward its health (the circuit breaker):
    /// the node's own calls do; an API caller's (`/v1/validate/job`) do not, or anyone
    /// allowed to validate a job could mark another driver unhealthy.
    counted: bool,
}

/// Call the driver's version (its own, or the current one): `$call` gets the bindings and
/// the store; a failure of the component (not a WIT error) is reported to the driver's
/// health.
macro_rules! driver_call {
    ($self:ident, $task:expr, $op:literal, |$d:ident, $s:ident| $call:expr) => {{
        let comp = $self.version().ok_or_else(|| CallError {
            component: $self.name.clone(),
            op: $op,
            kind: CallFailure::Closed,
            detail: "driver is no longer loaded".into(),
        })?;
        let r = $self
            .runtime
            .call_driver(&comp, $task, $op, move |$d, $s| {
                Box::pin(async move { $call.await })
            })
            .await;
        if $self.counted {
            match &r {
                Err(e) => $self.health.call_failed(&$self.name, e),
                Ok(_) => $self.health.call_succeeded(&$self.name),
            }
        }
        r
    }};
}

impl Driver {
    pub(super) fn new(
        runtime: Arc<Runtime>,
        name: String,
        health: Arc<super::health::DriverHealth>,
        starts: Arc<super::starts::StartQueue>,
    ) -> Self {
        Self {
            runtime,
            name,
            health,
            starts,
            version: None,
            native: None,
            counted: true,
        }
    }

    /// This driver for a caller outside the node's own work (the API): its calls do not
    /// count toward the driver's health.
    pub fn uncounted(&self) -> Driver {
        Driver {
            counted: false,
            ..self.clone()
        }
    }

    /// This driver served by `native` instead of a component, on the same path.
    pub(super) fn with_native(self, native: Arc<dyn NativeDriver>) -> Self {
        Driver {
            native: Some(native),
            ..self
        }
    }

    /// A native driver's answer, counted as a component's would be.
    fn native_answer<T>(&self, r: Result<T, DriverError>) -> Result<T, DriverCallError> {
        self.health.call_succeeded(&self.name);
        r.map_err(DriverCallError::Driver)
    }

    /// This driver at `version`, whatever is current: calls go to that version.
    pub fn at(&self, version: Arc<LoadedComponent>) -> Driver {
        Driver {
            version: Some(version),
            ..self.clone()
        }
    }

    /// Driver name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The version calls go to now: this driver's own, or the current one.
    pub fn version(&self) -> Option<Arc<LoadedComponent>> {
        self.version
            .clone()
            .or_else(|| self.runtime.registry.get(World::Driver, &self.name))
    }

    /// sha256 of the version serving this driver's calls.
    pub fn current_sha256(&self) -> Option<String> {
        self.version().map(|c| c.sha256.clone())
    }

    /// Whether a version of this driver is there to call.
    pub fn is_loaded(&self) -> bool {
        self.native.is_some() || self.version().is_some()
    }

    pub async fn capabilities(&self) -> Result<DriverCapabilities, DriverCallError> {
        if let Some(n) = &self.native {
            return self.native_answer(n.capabilities().await);
        }
        let c = driver_call!(self, None, "capabilities", |d, s| d
            .paddock_plugin_task_driver()
            .call_capabilities(s))?;
        Ok(DriverCapabilities {
            send_signals: c.send_signals,
            exec: c.exec,
            fs_isolation: match c.fs_isolation {
                wit::FsIsolation::None => FsIsolation::None,
                wit::FsIsolation::Chroot => FsIsolation::Chroot,
                wit::FsIsolation::Image => FsIsolation::Image,
            },
        })
    }

    /// Health and attributes.
    pub async fn fingerprint(&self) -> Result<DriverFingerprint, DriverCallError> {
        if let Some(n) = &self.native {
            return self.native_answer(n.fingerprint().await);
        }
        let fp = driver_call!(self, None, "fingerprint", |d, s| d
            .paddock_plugin_task_driver()
            .call_fingerprint(s))?;
        Ok(DriverFingerprint {
            health: match fp.health {
                wit::Health::Undetected => Health::Undetected,
                wit::Health::Unhealthy => Health::Unhealthy,
                wit::Health::Healthy => Health::Healthy,
            },
            health_description: bounds::text(fp.health_description, bounds::MESSAGE),
            attributes: bounds::attributes(
                fp.attributes
                    .into_iter()
                    .map(|(k, v)| (k, v.into()))
                    .collect(),
            ),
        })
    }

    /// Validate a task's config (JSON).
    pub async fn validate_config(&self, config: &str) -> Result<(), DriverCallError> {
        if let Some(n) = &self.native {
            return self.native_answer(n.validate_config(config).await);
        }
        let config = config.to_string();
        driver_call!(self, None, "validate-config", |d, s| d
            .paddock_plugin_task_driver()
            .call_validate_config(s, &config))?
        .map_err(driver_error)
    }

    /// Start a task invocation, once the start queue gives it a turn (its deadline counts
    /// from then).
    pub async fn start(
        &self,
        cfg: TaskConfig,
        task: Option<Arc<TaskContext>>,
    ) -> Result<TaskHandle, DriverCallError> {
        let _turn = self.starts.enter().await;
        if let Some(n) = &self.native {
            return self.native_answer(n.start(cfg).await);
        }
        let task = Some(with_paths(task, &cfg));
        let cfg = task_config(cfg);
        driver_call!(self, task, "start", |d, s| d
            .paddock_plugin_task_driver()
            .call_start(s, &cfg))?
        .map_err(driver_error)
        .and_then(|h| self.checked(h))
    }

    /// Reattach to a task.
    pub async fn recover(&self, handle: TaskHandle) -> Result<TaskHandle, DriverCallError> {
        if let Some(n) = &self.native {
            return self.native_answer(n.recover(handle).await);
        }
        let handle = wit_handle(handle);
        driver_call!(self, None, "recover", |d, s| d
            .paddock_plugin_task_driver()
            .call_recover(s, &handle))?
        .map_err(driver_error)
        .and_then(|h| self.checked(h))
    }

    /// Non-blocking wait.
    pub async fn wait(&self, handle: TaskHandle) -> Result<WaitStatus, DriverCallError> {
        if let Some(n) = &self.native {
            return self.native_answer(n.wait(handle).await);
        }
        let handle = wit_handle(handle);
        let status = driver_call!(self, None, "wait", |d, s| d
            .paddock_plugin_task_driver()
            .call_wait(s, &handle))?
        .map_err(driver_error)?;
        Ok(match status {
            wit::WaitStatus::Exited(r) => WaitStatus::Exited(exit_of(r)),
            wit::WaitStatus::Pending(w) => WaitStatus::Pending(WakeOn {
                processes: w.processes,
                after_ns: w.after_ns,
                handle: w.handle.map(|h| self.checked(h)).transpose()?,
            }),
        })
    }

    /// Stop: signal, then kill after the timeout. Returns the updated handle.
    pub async fn stop(
        &self,
        handle: TaskHandle,
        timeout_ns: u64,
        signal: String,
    ) -> Result<TaskHandle, DriverCallError> {
        if let Some(n) = &self.native {
            return self.native_answer(n.stop(handle, timeout_ns, signal).await);
        }
        let handle = wit_handle(handle);
        driver_call!(self, None, "stop", |d, s| d
            .paddock_plugin_task_driver()
            .call_stop(s, &handle, timeout_ns, &signal))?
        .map_err(driver_error)
        .and_then(|h| self.checked(h))
    }

    /// Release a task.
    pub async fn destroy(&self, handle: TaskHandle, force: bool) -> Result<(), DriverCallError> {
        if let Some(n) = &self.native {
            return self.native_answer(n.destroy(handle, force).await);
        }
        let handle = wit_handle(handle);
        driver_call!(self, None, "destroy", |d, s| d
            .paddock_plugin_task_driver()
            .call_destroy(s, &handle, force))?
        .map_err(driver_error)
    }

    /// Describe a task.
    pub async fn inspect(&self, handle: TaskHandle) -> Result<TaskStatus, DriverCallError> {
        if let Some(n) = &self.native {
            return self.native_answer(n.inspect(handle).await);
        }
        let handle = wit_handle(handle);
        let st = driver_call!(self, None, "inspect", |d, s| d
            .paddock_plugin_task_driver()
            .call_inspect(s, &handle))?
        .map_err(driver_error)?;
        Ok(TaskStatus {
            id: bounds::text(st.id, bounds::KEY),
            state: match st.state {
                wit::TaskState::Unknown => TaskState::Unknown,
                wit::TaskState::Running => TaskState::Running,
                wit::TaskState::Exited => TaskState::Exited,
            },
            started_at: st.started_at,
            completed_at: st.completed_at,
            exit_result: st.exit_result.map(exit_of),
            attributes: bounds::pairs(st.attributes),
        })
    }

    /// Signal a task. Returns the updated handle.
    pub async fn signal(
        &self,
        handle: TaskHandle,
        signal: String,
    ) -> Result<TaskHandle, DriverCallError> {
        if let Some(n) = &self.native {
            return self.native_answer(n.signal(handle, signal).await);
        }
        let handle = wit_handle(handle);
        driver_call!(self, None, "signal", |d, s| d
            .paddock_plugin_task_driver()
            .call_signal(s, &handle, &signal))?
        .map_err(driver_error)
        .and_then(|h| self.checked(h))
    }

    /// Resource usage of a task.
    pub async fn stats(&self, handle: TaskHandle) -> Result<ResourceUsage, DriverCallError> {
        if let Some(n) = &self.native {
            return self.native_answer(n.stats(handle).await);
        }
        let handle = wit_handle(handle);
        driver_call!(self, None, "stats", |d, s| d
            .paddock_plugin_task_driver()
            .call_stats(s, &handle))?
        .map(Into::into)
        .map_err(driver_error)
    }
}

/// A driver's error as the host's, every message within [`bounds`].
fn driver_error(e: wit::DriverError) -> DriverCallError {
    let m = |s: String| bounds::text(s, bounds::MESSAGE);
    DriverCallError::Driver(match e {
        wit::DriverError::InvalidConfig(fields) => DriverError::InvalidConfig(
            fields
                .into_iter()
                .take(bounds::ENTRIES)
                .map(|f| crate::runtime::types::FieldError {
                    field: bounds::text(f.field, bounds::KEY),
                    message: m(f.message),
                })
                .collect(),
        ),
        wit::DriverError::NotSupported(s) => DriverError::NotSupported(m(s)),
        wit::DriverError::TaskNotFound(s) => DriverError::TaskNotFound(m(s)),
        wit::DriverError::Denied(s) => DriverError::Denied(m(s)),
        wit::DriverError::Failed(f) => DriverError::Failed(Failure {
            message: m(f.message),
            recoverable: f.recoverable,
        }),
    })
}

impl Driver {
    /// Run `command` in the running task of `handle` (`alloc exec`), the task's own
    /// environment, dir and user taken from `cfg` (the config its invocation started
    /// with): the driver's `task-exec` says how, and the host carries that out with the
    /// checks of `process` (a driver without `task-exec` is refused, naming it).
    pub async fn exec_task(
        &self,
        handle: TaskHandle,
        cfg: &TaskConfig,
        command: Vec<String>,
        tty: bool,
    ) -> Result<ExecStarted, DriverCallError> {
        if self.native.is_some() {
            return Err(DriverCallError::Driver(DriverError::NotSupported(format!(
                "driver {:?} cannot run commands in its tasks",
                self.name
            ))));
        }
        let task = Some(with_paths(None, cfg));
        let req = ExecWitRequest {
            command,
            tty,
            env: cfg.env.clone(),
            task_dir: cfg.task_dir.clone(),
            user: cfg.user.clone(),
        };
        let handle = wit_handle(handle);
        let name = self.name.clone();
        let r = driver_call!(self, task, "exec-task", |d, s| async move {
            let Some(exec) = d.exec() else {
                return Ok(Err(DriverError::NotSupported(format!(
                    "driver {name:?} does not run commands in its tasks (it exports no task-exec, contract 0.1.3)"
                ))));
            };
            match exec.call_exec_task(&mut *s, &handle, &req).await? {
                Err(e) => Ok(Err(driver_error_of(e.into()))),
                Ok(plan) => Ok(crate::runtime::store::process_view(s)
                    .exec(plan, tty)
                    .await
                    .map_err(|e| host_refusal(&name, e))),
            }
        })?;
        r.map_err(DriverCallError::Driver)
    }

    /// The next step of a session the driver answers itself (an `exec-task` plan of
    /// `session`): `state` is what its last output said.
    pub async fn exec_step(
        &self,
        handle: TaskHandle,
        state: Vec<u8>,
        input: ExecInput,
    ) -> Result<ExecOutput, DriverCallError> {
        let handle = wit_handle(handle);
        let input = match input {
            ExecInput::Stdin(b) => ExecWitInput::Stdin(b),
            ExecInput::StdinClosed => ExecWitInput::StdinClosed,
            ExecInput::Resize { rows, cols } => ExecWitInput::Resize(ExecWitSize { rows, cols }),
        };
        let name = self.name.clone();
        let r = driver_call!(self, None, "exec-step", |d, s| async move {
            let Some(exec) = d.exec() else {
                return Ok(Err(DriverError::NotSupported(format!(
                    "driver {name:?} exports no task-exec"
                ))));
            };
            Ok(
                match exec
                    .call_exec_step(&mut *s, &handle, &state, &input)
                    .await?
                {
                    Err(e) => Err(driver_error_of(e.into())),
                    Ok(o) => crate::runtime::host_api::process::exec_output(o)
                        .map_err(|e| host_refusal(&name, e)),
                },
            )
        })?;
        r.map_err(DriverCallError::Driver)
    }
}

impl Driver {
    /// [`Driver::exec_task`] as [`crate::execstream`] serves it: a session the driver
    /// answers itself is stepped through this driver with `handle`.
    pub async fn exec_started(
        &self,
        handle: TaskHandle,
        cfg: &TaskConfig,
        command: Vec<String>,
        tty: bool,
    ) -> Result<crate::execstream::Started, DriverCallError> {
        use crate::execstream::Started;
        Ok(
            match self.exec_task(handle.clone(), cfg, command, tty).await? {
                ExecStarted::Process(p) => Started::Process(p),
                ExecStarted::Session(first) => Started::Session(
                    first,
                    Box::new(DriverSteps {
                        driver: self.clone(),
                        handle,
                    }),
                ),
            },
        )
    }
}

/// A session the driver answers itself, each input an `exec-step` call with the task's
/// handle.
struct DriverSteps {
    driver: Driver,
    handle: TaskHandle,
}

impl crate::execstream::Steps for DriverSteps {
    fn step(
        &self,
        state: Vec<u8>,
        input: ExecInput,
    ) -> futures::future::BoxFuture<'_, Result<ExecOutput, String>> {
        Box::pin(async move {
            self.driver
                .exec_step(self.handle.clone(), state, input)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// What the host refused of a driver's exec plan, as the driver's failure (named).
fn host_refusal(driver: &str, e: crate::runtime::types::HostError) -> DriverError {
    use crate::runtime::types::HostError;
    match e {
        HostError::Denied(m) => DriverError::Denied(m),
        HostError::NotFound(m) => DriverError::TaskNotFound(m),
        HostError::Invalid(m) | HostError::Failed(m) => DriverError::Failed(Failure {
            message: format!("driver {driver:?}: {m}"),
            recoverable: false,
        }),
    }
}

fn driver_error_of(e: wit::DriverError) -> DriverError {
    match driver_error(e) {
        DriverCallError::Driver(e) => e,
        other => DriverError::Failed(Failure {
            message: other.to_string(),
            recoverable: false,
        }),
    }
}

/// The call's task context with the task's own places (what its processes are checked
/// against), from the host's task config when the caller gave none.
fn with_paths(task: Option<Arc<TaskContext>>, cfg: &TaskConfig) -> Arc<TaskContext> {
    if let Some(t) = &task
        && t.paths.is_some()
    {
        return t.clone();
    }
    let mut t = task.map(|t| (*t).clone()).unwrap_or_default();
    t.paths = Some(crate::runtime::TaskPaths {
        alloc_root: std::path::Path::new(&cfg.alloc_dir)
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        task_dir: cfg.task_dir.clone(),
        alloc_dir: cfg.alloc_dir.clone(),
        stdout: cfg.stdout_path.clone(),
        stderr: cfg.stderr_path.clone(),
        mounts: cfg.mounts.clone(),
        devices: cfg.devices.clone(),
    });
    Arc::new(t)
}

/// A driver's exit result, its error within [`bounds`].
fn exit_of(r: wit_types::ExitResult) -> crate::runtime::types::ExitResult {
    let mut r: crate::runtime::types::ExitResult = r.into();
    r.err = r.err.map(|e| bounds::text(e, bounds::MESSAGE));
    r
}

/// The most a driver may keep in one task's handle, bytes: the host stores the handle with
/// the task's state at every change, and a handle keeps only what finds the task again.
pub const MAX_HANDLE_BYTES: usize = 1 << 20;

impl Driver {
    /// `h` as the host's handle, unless it is over [`MAX_HANDLE_BYTES`]: then the call
    /// fails, naming the driver and the limit.
    fn checked(&self, h: wit_types::TaskHandle) -> Result<TaskHandle, DriverCallError> {
        let over = |what: String| {
            Err(DriverCallError::Driver(DriverError::Failed(Failure {
                message: format!("driver {:?} returned {what}", self.name),
                recoverable: false,
            })))
        };
        let n = h.driver_state.len();
        if n > MAX_HANDLE_BYTES {
            return over(format!(
                "a task handle of {n} bytes, over the limit of {MAX_HANDLE_BYTES} bytes"
            ));
        }
        if h.task_id.len() > bounds::KEY {
            return over(format!(
                "a task id of {} bytes in its handle, over the limit of {} bytes",
                h.task_id.len(),
                bounds::KEY
            ));
        }
        Ok(handle_of(h))
    }
}

fn handle_of(h: wit_types::TaskHandle) -> TaskHandle {
    TaskHandle {
        version: h.version,
        task_id: h.task_id,
        driver_state: h.driver_state,
    }
}

fn wit_handle(h: TaskHandle) -> wit_types::TaskHandle {
    wit_types::TaskHandle {
        version: h.version,
        task_id: h.task_id,
        driver_state: h.driver_state,
    }
}

fn task_config(c: TaskConfig) -> wit_types::TaskConfig {
    wit_types::TaskConfig {
        id: c.id,
        name: c.name,
        alloc_id: c.alloc_id,
        job_id: c.job_id,
        job_name: c.job_name,
        group_name: c.group_name,
        namespace: c.namespace,
        node_id: c.node_id,
        node_name: c.node_name,
        env: c.env,
        device_env: c.device_env,
        user: c.user,
        resources: wit_types::TaskResources {
            cpu_mhz: c.resources.cpu_mhz,
            memory_mb: c.resources.memory_mb,
            memory_max_mb: c.resources.memory_max_mb,
        },
        driver_config: c.driver_config,
        alloc_dir: c.alloc_dir,
        task_dir: c.task_dir,
        stdout_path: c.stdout_path,
        stderr_path: c.stderr_path,
        logs: c.logs.into(),
        kill_signal: c.kill_signal,
        kill_timeout_ns: c.kill_timeout_ns,
        mounts: c.mounts.into_iter().map(Into::into).collect(),
        devices: c.devices.into_iter().map(Into::into).collect(),
    }
}
