//! What a call into a component is about: the component's identity, grants, limits and
//! config ([`ComponentContext`], fixed per loaded version) and the task the call concerns
//! ([`TaskContext`], given by the caller). The host interfaces borrow these; none of them
//! knows the store type that holds them.

use std::time::Duration;

use crate::grants::Grants;
use crate::types::{Reservation, TaskEnv, WorkloadIdentity};

/// Calls of one component in flight at once, unless its `limits` say otherwise.
pub const DEFAULT_CONCURRENT_CALLS: u32 = 16;

/// Limits applied to every call of one component.
#[derive(Debug, Clone, PartialEq)]
pub struct CallLimits {
    /// Linear memory cap, bytes.
    pub memory_bytes: usize,
    /// Deadline of one call: guest CPU and host waits alike, from the moment the call has
    /// its store (a wait for an instance permit is not counted).
    pub call_timeout: Duration,
    /// Bytes a guest may pass to one host call.
    pub hostcall_fuel: usize,
    /// Calls one instance may serve before it is retired; 1 gives every call a fresh store.
    pub instance_reuse: u32,
    /// Calls of the component in flight at once; more wait their turn (a wait not charged
    /// to the call's deadline). One component cannot take every instance or the agent's
    /// whole guest memory budget.
    pub max_concurrent_calls: u32,
}

impl Default for CallLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            call_timeout: Duration::from_secs(10),
            hostcall_fuel: 16 << 20,
            instance_reuse: 1000,
            max_concurrent_calls: DEFAULT_CONCURRENT_CALLS,
        }
    }
}

/// Who is being called: the component's identity, grants, config and limits.
#[derive(Debug)]
pub struct ComponentContext {
    /// Component name.
    pub name: String,
    /// Operator grants.
    pub grants: Grants,
    /// The `config` block, as JSON.
    pub plugin_config: String,
    pub limits: CallLimits,
}

/// The task directories a call may see as WASI preopens (`/task` and `/alloc`), with the
/// `task_dir` grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFiles {
    /// The task's own directory.
    pub task_dir: String,
    /// The allocation's shared directory.
    pub alloc_dir: String,
}

/// Where a task's processes live, as the host laid it out: what a component's `process`
/// calls are checked against. A process of the task runs in the task dir (or below it, or
/// in the alloc dir), and writes its output only to the task's own log files; every path
/// is opened beneath the allocation dir without following a link.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskPaths {
    /// The allocation's dir, which holds the task dir and the shared alloc dir. Trusted:
    /// the host made it, and nothing a task or a component can write is above it.
    pub alloc_root: String,
    /// The task's own directory.
    pub task_dir: String,
    /// The allocation's shared directory.
    pub alloc_dir: String,
    /// The base path of the task's stdout log.
    pub stdout: String,
    /// The base path of the task's stderr log.
    pub stderr: String,
    /// Host folders and files the host binds into an isolated process of the task at
    /// their task paths: its host volumes and its device reservations' mounts. The host's
    /// (from the operator's config and the device plugins), never a driver's.
    pub mounts: Vec<crate::types::Mount>,
    /// Device nodes the host makes in an isolated process's `/dev`: its reservations'.
    pub devices: Vec<crate::types::DeviceNode>,
}

/// The task a call is about, when there is one.
#[derive(Debug, Clone, Default)]
pub struct TaskContext {
    /// The task's environment and the node keys interpolation sees (`env`).
    pub env: TaskEnv,
    /// Device reservations of the task (`devices`).
    pub reservations: Vec<Reservation>,
    /// Directories to preopen, for a component with the `task_dir` grant.
    pub files: Option<TaskFiles>,
    /// The task's workload identity: which variables it may read (`variables`).
    pub workload: Option<WorkloadIdentity>,
    /// Where the task's processes may run and write (`process`); `None`: a spawn in this
    /// call runs nowhere of a task's and writes no output.
    pub paths: Option<TaskPaths>,
    /// The task's `artifact` blocks, interpolated (`artifacts`).
    pub artifacts: Vec<crate::types::Artifact>,
}

/// Whether a call needs its own WASI context with the task's dirs preopened. Such a store
/// is never reused: a guest's libc caches its preopens, so a reused store could reach
/// another task's files.
pub fn needs_preopens(component: &ComponentContext, task: Option<&TaskContext>) -> bool {
    component.grants.task_dir && task.is_some_and(|t| t.files.is_some())
}
