//! Constructors and conversions for the contract's types that the driver world owns. Those of
//! the types every world shares (`PluginInfo::new`, the defaults of `ExitResult` and
//! `ResourceUsage`) are `paddock_guest_core`'s.

use crate::{
    Attribute, Capabilities, DriverError, ExitResult, Failure, FieldError, Fingerprint,
    FsIsolation, Health, HostError, LogConfig, TaskConfig, TaskHandle, TaskResources, WaitStatus,
    WakeOn,
};
use serde::{Serialize, de::DeserializeOwned};

impl Default for Capabilities {
    /// No signals, no exec, no filesystem isolation.
    fn default() -> Self {
        Self {
            send_signals: false,
            exec: false,
            fs_isolation: FsIsolation::None,
        }
    }
}

impl Capabilities {
    /// Signals supported (`signal`, and `stop` with the job's `kill_signal`); nothing else.
    pub fn with_signals() -> Self {
        Self {
            send_signals: true,
            ..Self::default()
        }
    }
}

impl TaskConfig {
    /// A task `id` whose `config` block is `driver_config` (JSON), named `task`, in job
    /// `job`, group `group`, with 100 MHz and 300 MB (Nomad's defaults) and every other
    /// field empty: what a driver's unit tests start on the fake host.
    pub fn new(id: impl Into<String>, driver_config: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: "task".into(),
            alloc_id: String::new(),
            job_id: "job".into(),
            job_name: "job".into(),
            group_name: "group".into(),
            namespace: "default".into(),
            node_id: String::new(),
            node_name: String::new(),
            env: Vec::new(),
            device_env: Vec::new(),
            user: String::new(),
            resources: TaskResources {
                cpu_mhz: 100,
                memory_mb: 300,
                memory_max_mb: 0,
            },
            driver_config: driver_config.into(),
            alloc_dir: String::new(),
            task_dir: String::new(),
            stdout_path: String::new(),
            stderr_path: String::new(),
            logs: LogConfig {
                max_files: 10,
                max_file_size_mb: 10,
            },
            kill_signal: "SIGINT".into(),
            kill_timeout_ns: 5_000_000_000,
            mounts: Vec::new(),
            devices: Vec::new(),
        }
    }
}

impl Fingerprint {
    /// Healthy, described as "Healthy", without attributes.
    pub fn healthy() -> Self {
        Self::new(Health::Healthy, "Healthy")
    }
    /// Present but not working, for `reason`.
    pub fn unhealthy(reason: impl Into<String>) -> Self {
        Self::new(Health::Unhealthy, reason)
    }
    /// The driver's prerequisites are absent, for `reason`.
    pub fn undetected(reason: impl Into<String>) -> Self {
        Self::new(Health::Undetected, reason)
    }
    /// A fingerprint with no attributes.
    pub fn new(health: Health, description: impl Into<String>) -> Self {
        Self {
            health,
            health_description: description.into(),
            attributes: Vec::new(),
        }
    }
    /// Adds the attribute `driver.<name>.<key>`.
    pub fn with_attribute(mut self, key: impl Into<String>, value: impl Into<Attribute>) -> Self {
        self.attributes.push((key.into(), value.into()));
        self
    }
}

impl From<&str> for Attribute {
    fn from(value: &str) -> Self {
        Self::Str(value.to_string())
    }
}
impl From<String> for Attribute {
    fn from(value: String) -> Self {
        Self::Str(value)
    }
}
impl From<i64> for Attribute {
    fn from(value: i64) -> Self {
        Self::Int(value)
    }
}
impl From<f64> for Attribute {
    fn from(value: f64) -> Self {
        Self::Float(value)
    }
}
impl From<bool> for Attribute {
    fn from(value: bool) -> Self {
        Self::Boolean(value)
    }
}

/// Layout version that [`TaskHandle::new`] records.
pub const DEFAULT_STATE_VERSION: u32 = 1;

impl TaskHandle {
    /// A handle on `task_id` whose driver state is `state` as JSON.
    pub fn new(task_id: impl Into<String>, state: &impl Serialize) -> Result<Self, DriverError> {
        let mut handle = Self {
            version: DEFAULT_STATE_VERSION,
            task_id: task_id.into(),
            driver_state: Vec::new(),
        };
        handle.set_state(state)?;
        Ok(handle)
    }
    /// A handle in driver-state format `format` (see [`TaskHandle::require_format`]).
    pub fn with_format(
        task_id: impl Into<String>,
        format: u32,
        state: &impl Serialize,
    ) -> Result<Self, DriverError> {
        let mut handle = Self::new(task_id, state)?;
        handle.version = format;
        Ok(handle)
    }
    /// The handle-compatibility rule of the contract: a driver names its driver-state format
    /// in `version`, and a version that cannot read a handle's format refuses it with
    /// `not-supported` (so `recover` after a hot swap leaves that task on the driver version
    /// that wrote it). `readable` are the formats this driver reads.
    pub fn require_format(&self, readable: &[u32]) -> Result<(), DriverError> {
        if readable.contains(&self.version) {
            return Ok(());
        }
        Err(DriverError::NotSupported(format!(
            "handle format {} of task {} is not readable by this driver version (it reads {:?})",
            self.version, self.task_id, readable
        )))
    }
    /// Decodes the driver state; a state that does not decode means the handle is not ours.
    pub fn state<T: DeserializeOwned>(&self) -> Result<T, DriverError> {
        serde_json::from_slice(&self.driver_state).map_err(|e| {
            DriverError::TaskNotFound(format!(
                "task {}: unreadable driver state: {e}",
                self.task_id
            ))
        })
    }
    /// This handle with its driver state (of type `T`) changed by `change`.
    pub fn update<T: Serialize + DeserializeOwned>(
        mut self,
        change: impl FnOnce(&mut T),
    ) -> Result<Self, DriverError> {
        let mut state: T = self.state()?;
        change(&mut state);
        self.set_state(&state)?;
        Ok(self)
    }
    /// Replaces the driver state with `state` as JSON.
    pub fn set_state(&mut self, state: &impl Serialize) -> Result<(), DriverError> {
        self.driver_state = serde_json::to_vec(state)
            .map_err(|e| DriverError::failed(format!("encoding driver state: {e}")))?;
        Ok(())
    }
}

impl WaitStatus {
    /// Exited with `code`.
    pub fn exited(code: i32) -> Self {
        Self::Exited(ExitResult {
            exit_code: code,
            ..ExitResult::default()
        })
    }
    /// Ended by signal `signal` (see [`crate::signal`]).
    pub fn killed(signal: i32) -> Self {
        Self::Exited(ExitResult {
            signal,
            ..ExitResult::default()
        })
    }
    /// Still running: ask again in `after_ns` nanoseconds.
    pub fn after(after_ns: u64) -> Self {
        Self::Pending(WakeOn {
            processes: Vec::new(),
            after_ns: Some(after_ns),
            handle: None,
        })
    }
    /// Still running: ask again when one of these host processes exits.
    pub fn on_exit_of(processes: Vec<u64>) -> Self {
        Self::Pending(WakeOn {
            processes,
            after_ns: None,
            handle: None,
        })
    }
    /// Still running, and the host should keep `handle` from now on (progress the driver
    /// tracks, such as output already written). No effect on an exited status.
    pub fn with_handle(mut self, handle: TaskHandle) -> Self {
        if let Self::Pending(wake) = &mut self {
            wake.handle = Some(handle);
        }
        self
    }
}

impl FieldError {
    /// `field` (a dotted path in the task's `config` block) is wrong because of `message`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl DriverError {
    /// `op` is not supported by this driver.
    pub fn not_supported(op: &str) -> Self {
        Self::NotSupported(format!("{op} is not supported by this driver"))
    }
    /// A failure that trying again will not fix.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(Failure {
            message: message.into(),
            recoverable: false,
        })
    }
    /// A failure that trying again may fix.
    pub fn recoverable(message: impl Into<String>) -> Self {
        Self::Failed(Failure {
            message: message.into(),
            recoverable: true,
        })
    }
    /// One invalid field of the task's `config` block.
    pub fn invalid_field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidConfig(vec![FieldError::new(field, message)])
    }
}

impl From<HostError> for DriverError {
    /// `denied` stays denied, `not-found` means the task is gone, `failed` may pass on retry,
    /// `invalid` will not.
    fn from(error: HostError) -> Self {
        match error {
            HostError::Denied(m) => Self::Denied(m),
            HostError::NotFound(m) => Self::TaskNotFound(m),
            HostError::Invalid(m) => Self::failed(m),
            HostError::Failed(m) => Self::recoverable(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct State {
        pid: u64,
    }

    #[test]
    fn handle_state_round_trips() {
        let handle = TaskHandle::new("a/b/c", &State { pid: 7 }).unwrap();
        assert_eq!(handle.version, DEFAULT_STATE_VERSION);
        assert_eq!(handle.driver_state, br#"{"pid":7}"#);
        assert_eq!(handle.state::<State>().unwrap(), State { pid: 7 });
    }

    #[test]
    fn undecodable_state_is_task_not_found() {
        let handle = TaskHandle {
            version: 1,
            task_id: "t".into(),
            driver_state: b"nope".to_vec(),
        };
        assert!(
            matches!(handle.state::<State>(), Err(DriverError::TaskNotFound(m)) if m.contains("task t"))
        );
    }

    #[test]
    fn a_handle_of_another_format_is_not_supported() {
        let handle = TaskHandle::with_format("t", 2, &State { pid: 7 }).unwrap();
        assert_eq!(handle.version, 2);
        assert!(handle.require_format(&[2, 3]).is_ok());
        assert!(matches!(
            handle.require_format(&[1]),
            Err(DriverError::NotSupported(m)) if m.contains("handle format 2 of task t")
        ));
    }

    #[test]
    fn not_supported_names_the_op() {
        assert!(
            matches!(DriverError::not_supported("stop"), DriverError::NotSupported(m) if m.starts_with("stop "))
        );
    }
}
