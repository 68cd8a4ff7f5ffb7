//! The driver contract in host-owned types: what the task runner, the state DB and the API
//! exchange with a driver, whatever contract version the driver was built against. Only
//! [`super::driver`] converts them to and from a version's bindings.

use serde::{Deserialize, Serialize};

pub use crate::runtime::types::{
    Attribute, DeviceNode, ExitResult, FieldError, LogConfig, Mount, ResourceUsage,
};

/// CPU and memory given to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TaskResources {
    /// CPU in MHz (Nomad's `cpu`).
    pub cpu_mhz: u32,
    /// Memory in MiB (Nomad's `memory`).
    pub memory_mb: u32,
    /// Memory ceiling in MiB (Nomad's `memory_max`); 0 when unset.
    pub memory_max_mb: u32,
}

/// Everything a driver needs to start one invocation of a task (Nomad's TaskConfig).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskConfig {
    /// `<alloc-id>/<task>/<first 8 of a fresh uuid>`: unique per invocation.
    pub id: String,
    /// Task name.
    pub name: String,
    /// Allocation id.
    pub alloc_id: String,
    /// Job id.
    pub job_id: String,
    /// Job name.
    pub job_name: String,
    /// Task group name.
    pub group_name: String,
    /// Job namespace.
    pub namespace: String,
    /// Node id.
    pub node_id: String,
    /// Node name.
    pub node_name: String,
    /// The task's full environment, sorted by key.
    pub env: Vec<(String, String)>,
    /// The subset of `env` set by device reservations.
    pub device_env: Vec<(String, String)>,
    /// User to run as; empty means the agent's user.
    pub user: String,
    /// Resources given to the task.
    pub resources: TaskResources,
    /// The task's `config` block, as JSON, after `${...}` interpolation.
    pub driver_config: String,
    /// The allocation directory shared by its tasks.
    pub alloc_dir: String,
    /// This task's own directory.
    pub task_dir: String,
    /// Base path of the task's stdout log.
    pub stdout_path: String,
    /// Base path of the task's stderr log.
    pub stderr_path: String,
    /// How the task's logs rotate.
    pub logs: LogConfig,
    /// Signal the task asks to be stopped with, e.g. "SIGTERM".
    pub kill_signal: String,
    /// Time between the kill signal and SIGKILL, ns.
    pub kill_timeout_ns: u64,
    /// Mounts prepared by device reservations.
    pub mounts: Vec<Mount>,
    /// Device nodes reserved for the task.
    pub devices: Vec<DeviceNode>,
}

/// A driver's handle on one running task invocation: all the state a driver keeps. The
/// host persists it and passes it back to every later call about that task.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TaskHandle {
    /// Version of the driver-state layout, chosen by the driver.
    pub version: u32,
    /// The task invocation id.
    pub task_id: String,
    /// Opaque driver state.
    pub driver_state: Vec<u8>,
}

/// How a driver isolates a task's filesystem (Nomad's FSIsolation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsIsolation {
    /// The task sees the host filesystem.
    None,
    /// A chroot of its task dir.
    Chroot,
    /// Its own image.
    Image,
}

/// What a driver can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverCapabilities {
    /// `signal` works.
    pub send_signals: bool,
    /// Commands can be run inside a task.
    pub exec: bool,
    /// Filesystem isolation.
    pub fs_isolation: FsIsolation,
}

/// Driver health (Nomad's HealthState).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Health {
    /// The driver's prerequisites are absent on this node.
    Undetected,
    /// Present but not working.
    Unhealthy,
    /// Ready to run tasks.
    Healthy,
}

/// A fingerprint: health and attributes (keyed without the `driver.<name>.` prefix).
#[derive(Debug, Clone, PartialEq)]
pub struct DriverFingerprint {
    pub health: Health,
    pub health_description: String,
    pub attributes: Vec<(String, Attribute)>,
}

/// A driver's failure and whether trying again may help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong.
    pub message: String,
    /// Whether trying again may succeed.
    pub recoverable: bool,
}

/// An error a driver returned (a value, not a trap).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// The task's `config` block is invalid; one entry per bad field.
    #[error("{}", .0.iter().map(|f| format!("{}: {}", f.field, f.message)).collect::<Vec<_>>().join("; "))]
    InvalidConfig(Vec<FieldError>),
    /// The operation is not supported by this driver.
    #[error("not supported: {0}")]
    NotSupported(String),
    /// The handle names no task this driver knows.
    #[error("task not found: {0}")]
    TaskNotFound(String),
    /// A host capability the driver needed was not granted.
    #[error("denied: {0}")]
    Denied(String),
    /// The operation failed.
    #[error("{}", .0.message)]
    Failed(Failure),
}

/// When to ask `wait` again.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WakeOn {
    /// Host process ids whose exit should wake the waiter.
    pub processes: Vec<u64>,
    /// Wake after this long, ns, even if nothing exited.
    pub after_ns: Option<u64>,
    /// A new handle to persist.
    pub handle: Option<TaskHandle>,
}

/// What `wait` answered.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitStatus {
    /// The task has exited.
    Exited(ExitResult),
    /// Still running; ask again after one of these.
    Pending(WakeOn),
}

/// A task's coarse state, as `inspect` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskState {
    /// The driver cannot tell.
    Unknown,
    Running,
    Exited,
}

/// What `inspect` reports (Nomad's TaskStatus).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskStatus {
    /// Task invocation id.
    pub id: String,
    /// Coarse state.
    pub state: TaskState,
    /// Start time, ns.
    pub started_at: u64,
    /// Exit time, ns; 0 while running.
    pub completed_at: u64,
    /// How it exited, once it has.
    pub exit_result: Option<ExitResult>,
    /// Driver-specific attributes.
    pub attributes: Vec<(String, String)>,
}

/// The handle to give back to the driver.
impl From<crate::state::StoredHandle> for TaskHandle {
    fn from(s: crate::state::StoredHandle) -> Self {
        TaskHandle {
            version: s.version,
            task_id: s.task_id,
            driver_state: s.driver_state,
        }
    }
}
